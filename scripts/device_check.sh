#!/usr/bin/env bash
# The GPU checks, as one prepared script for a machine with CUDA (on one without, it stops at the first step).
#   bash scripts/device_check.sh [OUT]      (OUT: where the outputs go; default $OUT, else /tmp/device_check)
# 1. the CUDA-only tests of tests/test_device.py: the GPU comparison over every claim's quick profile (CPU and GPU,
#    per configuration a two-sample KS test of the values, per claim the verdicts) and the five-claim comparison;
# 2. the numpy-boundary sweep over every claim and the planted device bugs (CPU side; they must pass here too);
# 3. `lemmacheck run --device cuda` over every claim, for the summary table and the exit code (70: an estimator
#    raised on the GPU; the bug list is in run.err);
# 4. the benchmarks with their GPU rows (--bench-device cuda; LEMMACHECK_BENCH=wide for the wide sizes):
#    bench.txt, the GPU/CPU table of docs/performance.md.
# The whole script fits in about 10 minutes on an H200 with LEMMACHECK_DEVICE_WORKERS=8.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/device_check}}"
mkdir -p "$out"
python - <<'PY' || { echo "no CUDA device: nothing to check here"; exit 3; }
import torch
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
workers="${LEMMACHECK_DEVICE_WORKERS:-4}"
export LEMMACHECK_DEVICE_WORKERS="$workers" LEMMACHECK_DEVICE_REPORT="$out/comparison.json"
python -m pytest -q -rs tests/test_device.py 2>&1 | tee "$out/pytest.txt"
rc_tests=${PIPESTATUS[0]}
lemmacheck run claims --profile quick --device cuda --workers "$workers" --db "$out/gpu.db" --json "$out/gpu.json" \
    > "$out/run.txt" 2> "$out/run.err"
rc_run=$?
tail -n 5 "$out/run.txt"
grep -A 3 "estimator bugs" "$out/run.err" || true
LEMMACHECK_BENCH_OUT="$out/bench.txt" timeout 240 python -m pytest -q tests/test_benchmarks.py --benchmark-enable \
    --bench-device cuda --benchmark-group-by=group > "$out/bench_pytest.txt" 2>&1
rc_bench=$?
tail -n 40 "$out/bench.txt" 2>/dev/null || tail -n 20 "$out/bench_pytest.txt"
echo "device_check: tests exit $rc_tests, GPU run exit $rc_run (0 all as expected, 1 verdicts differ, 70 bugs)," \
     "benchmarks exit $rc_bench; outputs in $out"
[ "$rc_tests" -eq 0 ] && [ "$rc_run" -ne 70 ]
