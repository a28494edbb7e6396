#!/usr/bin/env bash
# Set up lemmacheck on a fresh machine: Python dependencies at the tested versions (constraints.txt pins the
# CPU build of torch 2.13.0), and headless Chromium for the report's browser test when apt-get is available.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -c constraints.txt -e '.[dev]'
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "note: chromium/chromedriver not found; the browser test will be skipped" >&2
    fi
fi
