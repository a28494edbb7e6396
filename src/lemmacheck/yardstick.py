"""A speed yardstick of the machine a run draws on, recorded with the run: the same work measured on every box, so
a run's cost (estimator-seconds) can be stated in the yardstick's units and compared across days and machines.

Two figures on one thread, the two kinds of work the estimators do: float64 GEMM (GFLOP/s, a 256 x 256 product)
and float64 Gaussian draws (million per second, torch.randn). Each is the best of three timed repeats of about
0.1 s, so about 0.6 s in all; the best, not the mean, because a shared box only ever slows a repeat down."""

from __future__ import annotations

import time
from functools import cache

import torch

GEMM_N = 256
RANDN_N = 1 << 18


def _best_rate(work, units: float, seconds: float = 0.1, repeats: int = 3) -> float:
    """units per second of `work`, the best of `repeats` timings of as many calls as fill `seconds`."""
    work()  # warm-up: first-call allocations and dispatch
    t0 = time.perf_counter()
    work()
    calls = max(1, int(seconds / max(time.perf_counter() - t0, 1e-6)))
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            work()
        best = max(best, calls * units / (time.perf_counter() - t0))
    return best


@cache  # once per process: a session that starts many runs measures its box once
def measure() -> dict[str, float]:
    """{"gemm64_gflops": ..., "randn64_mps": ...} on one thread (restored after)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(0)
        a = torch.randn(GEMM_N, GEMM_N, generator=g, dtype=torch.float64)
        b = torch.randn(GEMM_N, GEMM_N, generator=g, dtype=torch.float64)
        gemm = _best_rate(lambda: a @ b, 2 * GEMM_N ** 3 / 1e9)
        randn = _best_rate(lambda: torch.randn(RANDN_N, generator=g, dtype=torch.float64), RANDN_N / 1e6)
    finally:
        torch.set_num_threads(threads)
    return {"gemm64_gflops": round(gemm, 2), "randn64_mps": round(randn, 1)}


def describe(m: dict[str, float]) -> str:
    return (f"float64 GEMM {m['gemm64_gflops']:.3g} GFLOP/s, float64 randn {m['randn64_mps']:.3g} M/s "
            "(one thread, best of 3)")
