"""Draws until decided, calibrated: a failure rate a factor times delta = 0.003 through the real runner's full
profile (sequential drawing up to claims.DRAW_BUDGET), shared by tests/calibration/test_sequential.py and the
"sequential" section of scripts/calibration.py (docs/calibration.md)."""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

from scipy import stats as sps

from lemmacheck.claims import DRAW_BUDGET, parse_claim
from lemmacheck.runner import evaluate, run_claims
from lemmacheck.stats import DEFAULT_ALPHA, clopper_pearson
from lemmacheck.store import Store
from lemmacheck.verdicts import ClaimResult

from . import extension  # noqa: F401 - registers calib-bernoulli

SEQ_DELTA = 0.003
FIRST = 4096  # the claim's replicates: the first batch, one shard (the defaults decide the rest)
FACTORS = (1.5, 0.8)


def claim_text(factor: float) -> str:
    """'a Bernoulli(factor * delta) draw is at most 0.5 with probability 1 - delta': violated exactly when factor
    > 1. No max_replicates: the full profile's default budget is what is calibrated."""
    return f'''
id = "calib/sequential-rate-{factor:g}"
paper = "calib"
result = "Calibration"
title = "rate {factor:g} delta at delta = {SEQ_DELTA}"
statement = "known truth"
kind = "calibration"
network = "scalar"
notes = "calibration case"
[params]
x = {{ values = [1] }}
[check]
quantity = "calib-bernoulli"
relation = "<="
bound = "0.5"
probability = "1 - {SEQ_DELTA}"
args = {{ rate = {factor * SEQ_DELTA!r} }}
[profiles.quick]
replicates = {FIRST}
shard_size = {FIRST}
[profiles.full]
replicates = {FIRST}
shard_size = {FIRST}
hunt = 0
'''


def run_sequential(factor: float, seed: int) -> ClaimResult:
    claim = parse_claim(tomllib.loads(claim_text(factor)), Path(f"calib/sequential-{factor:g}.toml"))
    store = Store(":memory:")
    run_id = run_claims([claim], store, profile="full", seed=seed, paths=[claim.id])
    return evaluate(store, run_id, [claim])[0]


def miss_at_budget(factor: float) -> float:
    """P(not violated) of a fixed-size Clopper-Pearson reading at the whole budget: an upper bound on the chance
    that the sequential run (which reads the anytime-valid sequence at every look and, at the budget, this same
    interval; a configuration with a violation is never stopped for want of budget) ends without reading
    violated."""
    n = DRAW_BUDGET
    k = next(k for k in range(n + 1) if clopper_pearson(k, n, DEFAULT_ALPHA)[0] > SEQ_DELTA)
    return float(sps.binom.cdf(k - 1, n, factor * SEQ_DELTA))


def table(seeds: int) -> str:
    lines = ["", "## Draws until decided: a failure rate near delta", "",
             f"A Bernoulli(factor x delta) violation at delta = {SEQ_DELTA} (tests/calibration/sequential.py), through the",
             f"full profile: the claim's {FIRST:,} replicates first, then waves doubling the draws up to the default",
             f"budget of {DRAW_BUDGET:,} (claims.DRAW_BUDGET), the anytime-valid sequence read at every look and the",
             "fixed-size interval at the budget. A true claim (factor <= 1) reads violated with probability at most",
             f"1.5 alpha = {1.5 * DEFAULT_ALPHA:g} (the sequence, alpha, and the final interval, alpha/2: a union bound).",
             f"Seeds 0..{seeds - 1}; draws are the median and the largest over the seeds.", "",
             "| factor | truth | observed h / i / v | draws median / max | bound on P(not violated) | P(violated) bound |",
             "|---|---|---|---|---|---|"]
    for factor in FACTORS:
        counts: Counter = Counter()
        drawn = []
        for seed in range(seeds):
            res = run_sequential(factor, seed)
            counts[res.verdict] += 1
            drawn.append(res.configs[0].drawn)
        drawn.sort()
        freq = " / ".join(f"{counts[v] / seeds:.2f}" for v in ("holds", "inconclusive", "violated"))
        miss = f"{miss_at_budget(factor):.2g}" if factor > 1 else "-"
        viol = "-" if factor > 1 else f"{1.5 * DEFAULT_ALPHA:g}"
        lines.append(f"| {factor:g} | {'false' if factor > 1 else 'true'} | {freq} | "
                     f"{drawn[len(drawn) // 2]:,} / {drawn[-1]:,} | {miss} | {viol} |")
    return "\n".join(lines) + "\n"
