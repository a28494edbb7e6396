#!/usr/bin/env bash
# The GPU checks, as one prepared script for a machine with CUDA (on one without, it stops at the first step).
#   bash scripts/device_check.sh [OUT]      (OUT: where the outputs go; default $OUT, else /tmp/device_check)
# About 10 minutes on an H200 with 16 cores; LEMMACHECK_DEVICE_WORKERS (default: every core) workers throughout.
# 1. tests/test_device.py's CUDA tests: every claim's quick profile three ways on the same workers, each timed: on
#    the CPU alone, with every shard on the GPU (LEMMACHECK_DEVICE_MIN_COST=0: compared with the CPU run per
#    configuration by a two-sample KS test of the values, per claim by verdict), and placed as `run --device cuda`
#    places it (wide configurations on the GPU, the rest on the CPU, which must draw exactly the CPU run's values;
#    LEMMACHECK_DEVICE_MIN_COST set here is its threshold); then the five-claim comparison. comparison.json: the
#    three wall times, and per configuration the estimator seconds on either device summed as each threshold would
#    place them (the threshold the measured configurations favour: what shards.DEVICE_MIN_COST should be).
# 2. the benchmarks' lemmacheck rows on the CPU and the GPU (--bench-device cuda): bench.txt, the GPU/CPU table of
#    docs/performance.md; then, in the time left, the GPU rows at the wide sizes (bench_wide.txt).
# The CPU side of the device tests (numpy boundary, stand-in device) runs in the ordinary test suite, not here.
# Exit status: that of the tests (0: no GPU shard raised, laws and verdicts agree, placement drew the CPU's values).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/device_check}}"
mkdir -p "$out"
budget="${LEMMACHECK_CHECK_BUDGET:-570}"  # seconds for the whole script; the benchmarks get what the tests leave
python - <<'PY' || { echo "no CUDA device: nothing to check here"; exit 3; }
import torch
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
workers="${LEMMACHECK_DEVICE_WORKERS:-$(nproc)}"
export LEMMACHECK_DEVICE_WORKERS="$workers" LEMMACHECK_DEVICE_REPORT="$out/comparison.json"
python -m pytest -q -rs tests/test_device.py -k gpu_run 2>&1 | tee "$out/pytest.txt"
rc_tests=${PIPESTATUS[0]}
python - "$out/comparison.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
w, p = r["walls"], r["placement"]
print(f"quick profile, every claim, {r['workers']} workers, wall: CPU alone {w['cpu']} s; every shard on the GPU "
      f"{w['gpu']} s; placed {w['placed']} s ({r['placed_on_gpu']} configurations on the GPU)")
print(f"estimator seconds over {p['configs']} configurations: CPU {p['cpu_s']:.0f}, GPU {p['gpu_s']:.0f}, placed at "
      f"{p['threshold']:g} {p['placed_s']:.0f} ({p['on_gpu_at_threshold']} on the GPU); the measured ones favour "
      f"{p['best_threshold']:g} ({p['best_s']:.0f} s)")
print(f"GPU against CPU: {len(r['ks_fail'])} KS failures of {r['tested']}, {len(r['differ'])} verdicts differ "
      f"({len(r['flips'])} holds/violated), {len(r['gpu_errors'])} claims with GPU errors, "
      f"{len(r['placed_errors'])} placed")
PY
left=$((budget - SECONDS))
if [ "$left" -gt 60 ]; then
    LEMMACHECK_BENCH_OUT="$out/bench.txt" timeout $((left * 2 / 3)) python -m pytest -q tests/test_benchmarks.py \
        --benchmark-enable --bench-device cuda --benchmark-group-by=group -k "lemmacheck or gemm or eigvalsh" \
        > "$out/bench_pytest.txt" 2>&1
    echo "benchmarks exit $?"
    tail -n 40 "$out/bench.txt" 2>/dev/null || tail -n 20 "$out/bench_pytest.txt"
fi
left=$((budget - SECONDS))
if [ "$left" -gt 30 ]; then
    LEMMACHECK_BENCH=wide LEMMACHECK_BENCH_OUT="$out/bench_wide.txt" timeout "$left" python -m pytest -q \
        tests/test_benchmarks.py --benchmark-enable --bench-device cuda --benchmark-group-by=group -k "cuda or gemm" \
        > "$out/bench_wide_pytest.txt" 2>&1
    tail -n 20 "$out/bench_wide.txt" 2>/dev/null
fi
echo "device_check: tests exit $rc_tests (0: all as required), ${SECONDS} s; outputs in $out"
[ "$rc_tests" -eq 0 ]
