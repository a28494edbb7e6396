#!/usr/bin/env bash
# Set up lemmacheck on a fresh machine, isolated from the system Python: a virtual environment at .venv
# (created here unless one is already active), the Python dependencies at the tested versions (constraints.txt
# pins the CPU build of torch 2.13.0), and headless Chromium for the report's browser test when apt-get is
# available. The tests then run with `.venv/bin/python -m pytest` (or `python -m pytest` in the active venv).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VIRTUAL_ENV:-}" ]; then
    py=python                           # the user's own active venv: install into it
else
    [ -x .venv/bin/python ] || python3 -m venv .venv
    py=.venv/bin/python
fi
"$py" -m pip install -q -c constraints.txt -e '.[dev]'
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "note: chromium/chromedriver not found; the browser test will be skipped" >&2
    fi
fi
echo "set up in $("$py" -c 'import sys; print(sys.prefix)'); run the tests with: $py -m pytest" >&2
