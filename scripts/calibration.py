"""Regenerate docs/calibration.md: verdict frequencies of claims of known truth over many seeds.

    python scripts/calibration.py --seeds 100 > docs/calibration.md
    python scripts/calibration.py --seeds 100 --section power >> docs/calibration.md
    python scripts/calibration.py --seeds 100 --section sequential >> docs/calibration.md

(the two sections run as separate commands; `--section all` writes both.)

Every case of tests/calibration/cases.py runs through the real runner once per seed (0 .. seeds-1); the table
gives the true state, the replicates per configuration, the observed verdict frequencies and, for probabilistic
claims, the exact probability of each verdict (binomial sum over the Clopper-Pearson decision).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from calibration.cases import (
    DELTA,
    LOG_DRAWS,
    LOG_LEVELS,
    LOG_SIGMA,
    POWER_DECADES,
    cases,
    log_case,
    log_grid,
    run_case,
)

from lemmacheck.runner import EXTEND_ROUNDS
from lemmacheck.stats import DEFAULT_ALPHA, LOG_CONCAVE_LOG_X, TOP_DECADES
from lemmacheck.verdicts import (
    LOG_GROWTH_B,
    LOG_GROWTH_B_TOP,
    LOG_PLATEAU_B,
    LOG_VIOLATED_DECADES,
    ROUNDING_ULPS,
    SCALING_ALPHA,
    STILL_GROWING_RISE,
    STILL_GROWING_SLOPE,
)

VERDICTS = ("holds", "inconclusive", "violated")


def _freq(counts: Counter, total: int) -> str:
    return " / ".join(f"{counts.get(v, 0) / total:.3f}" for v in VERDICTS)


def _fix_versions() -> None:
    from lemmacheck import runner

    fixed = runner.versions()
    runner.versions = lambda: fixed  # one git query, not two per run: thousands of runs follow


POWER_CASES = (("sqrtlog", "sqrt(log m)"), ("log", "log m"), ("loglog", "log log m"), ("conv-log", "1 - 1/log m"))


def _mean(xs: list[float]) -> str:
    return f"{sum(xs) / len(xs):.2f}" if xs else "-"


def _judge(case, seed: int):
    """The verdict of a logarithmic case at one seed without the runner: numpy draws of the case's law
    (C(m) e^(sigma Z), LOG_DRAWS per level) judged by the same config_result and claim_result the runner
    calls. Thousands of runs in seconds; the main table's rows run the same cases through the runner."""
    import math

    import numpy as np
    from calibration.extension import _constant

    from lemmacheck.verdicts import claim_result, config_result

    claim = case.claim()
    grid = claim.raw["profiles"]["quick"]["grid"]["m"]
    growth = claim.check.args["growth"]
    rng = np.random.default_rng([seed, 7])
    cfgs, samples = [], []
    idx = np.arange(LOG_DRAWS)
    for j, m in enumerate(grid):
        value = _constant(growth, m) * np.exp(LOG_SIGMA * rng.standard_normal(LOG_DRAWS))
        valid = np.ones(LOG_DRAWS, bool)
        cfgs.append(config_result(claim, j, {"m": m}, seed, value, valid, idx * 0, idx, "", 0.0, []))
        samples.append(value)
    assert math.isfinite(samples[0][0])
    return claim_result(claim, cfgs, samples)


def power(seeds: int) -> str:
    """Verdicts of the logarithmic cases against the decades of m swept (8 levels from m = 64, 256 draws)."""
    lines = [
        "",
        "## Logarithmic factors: power against the decades swept",
        "",
        (f"C(m) e^({LOG_SIGMA} Z) stated \"<= C with probability 1 - delta\", {LOG_LEVELS} levels of m from 64 "
        f"(equal steps in log m), {LOG_DRAWS} draws each, seeds 0..{seeds - 1}."),
        ("The log-growth test (lemmacheck.stats.log_growth_test) fits the 1 - delta quantile of log C against "
        "s = log log m: the exponent b of C ~ (log m)^b over the whole sweep and over its top two thirds, with "
        f"exact intervals over the order-statistic box (simultaneous at 1 - {SCALING_ALPHA:g})."),
        (f"Flag `log-growth` (never holds): b's lower end above {LOG_GROWTH_B_TOP} at the top or above "
        f"{LOG_GROWTH_B} over the sweep, unless the last step's upper end is at most {LOG_GROWTH_B_TOP} or the top "
        f"decade's at most {LOG_PLATEAU_B} (a plateau). "
        "Violated besides: no function concave in s (every constant converging from below) fits the box over "
        f"the points with log m >= {LOG_CONCAVE_LOG_X:g}, and they span at least {LOG_VIOLATED_DECADES:g} "
        "decades."),
        ("\"b max\" is the mean over seeds of b's upper interval end: the largest log exponent the sweep could "
        "have missed. Draws here come from numpy and are judged by the verdict code directly (no runner, no "
        "store: the same config_result and claim_result); \"not holds\" is the power for a false case (for 1 - 1/log m, true, it is the rate of "
        "inconclusive: never violated is what is required)."),
        ("Violated needs growth at the top of the sweep (its top decade): log m over 2-3 decades rises at a local "
         "exponent 1/log m of about 0.1 there, the tolerance, and reads inconclusive, never holds; no sweep is "
         "extended here (the runner's extension is in the rows above)."),
        "",
        "| C(m) | decades | m | h / i / v | not holds | b (mean) | b max (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for growth, label in POWER_CASES:
        for dec in POWER_DECADES:
            case = log_case(growth, "true" if growth.startswith("conv") else "false", decades=dec)
            counts: Counter = Counter()
            bs, bmax = [], []
            for seed in range(seeds):
                res = _judge(case, seed)
                counts[res.verdict] += 1
                lg = (res.scaling or {}).get("log_growth", {}).get("m")
                if lg:
                    bs.append(lg["b"])
                    bmax.append(lg["b_ci"][1])
            grid = log_grid(dec)
            lines.append(f"| {label} | {dec:g} | {grid[0]}..{grid[-1]:.3g} | {_freq(counts, seeds)} | "
                         f"{1 - counts['holds'] / seeds:.2f} | {_mean(bs)} | {_mean(bmax)} |")
    return "\n".join(lines) + "\n"


def table(seeds: int, only: str | None = None) -> str:
    _fix_versions()
    lines = [
        "# Verdict calibration",
        "",
        "Claims whose truth is known exactly (tests/calibration/cases.py, quantities in tests/calibration/extension.py)",
        f"run through the real runner over seeds 0..{seeds - 1}. Regenerate with",
        "",
        "```bash",
        f"python scripts/calibration.py --seeds {seeds} > docs/calibration.md",
        f"python scripts/calibration.py --seeds {seeds} --section power >> docs/calibration.md",
        f"python scripts/calibration.py --seeds {seeds} --section sequential >> docs/calibration.md",
        "```",
        "",
        f"Settings: delta = {DELTA}, alpha = {DEFAULT_ALPHA:g} per configuration (two-sided Clopper-Pearson),",
        f"scaling intervals at 1 - {SCALING_ALPHA:g} simultaneous over a claim's configurations, slope tolerance 0.1",
        (f"judged at the top of the sweep (the top {TOP_DECADES:g} decade: violated only when Ĉ grows there; holds "
         f"on a plateau, log exponent at most {LOG_PLATEAU_B} there; a slope that falls is extended by doubling, "
         f"at most {EXTEND_ROUNDS} rounds),"),
        f"still-growing at a log rise above {STILL_GROWING_RISE} and a local slope above {STILL_GROWING_SLOPE},",
        (f"log-growth at a log-m exponent above {LOG_GROWTH_B_TOP} at the top or {LOG_GROWTH_B} over the sweep "
        "(power section below),"),
        f"comparison tolerance {ROUNDING_ULPS} ulps of",
        "the dtype times the operands' magnitude. Frequencies are holds / inconclusive / violated.",
        "",
        "A true claim must never read violated; a false one must not read holds beyond the exact rate where one",
        "exists. \"holds\" means \"not refuted at this confidence\", never \"proved\". The \"saturating\" rows rise from",
        "far below their limit (the whole-sweep slope reads growth) and must read holds; the \"slow growth\" rows",
        "(sqrt(log n), log log n from n = 1 and n = 16) must never read holds.",
        "",
        "| case | truth | replicates x configs | observed h / i / v | exact h / i / v | flags seen |",
        "|---|---|---|---|---|---|",
    ]
    bad = []
    sys.stdout.write("\n".join(lines) + "\n")
    lines = []
    for case in cases():
        if only and only not in case.name:
            continue
        counts: Counter = Counter()
        flags: Counter = Counter()
        for seed in range(seeds):
            res = run_case(case, seed)
            counts[res.verdict] += 1
            flags.update(res.flags)
        exact = case.exact()
        ex = "-" if exact is None else " / ".join(f"{exact[v]:.3g}" for v in VERDICTS)
        fl = ", ".join(f"{k} {v / seeds:.2f}" for k, v in sorted(flags.items())) or "-"
        row = (f"| {case.name} | {case.truth} | {case.replicates} x {case.configs} | {_freq(counts, seeds)} "
               f"| {ex} | {fl} |")
        sys.stdout.write(row + "\n")
        sys.stdout.flush()
        if case.truth == "true" and counts["violated"] or case.truth == "false" and counts["holds"] and (
                exact is None or counts["holds"] / seeds > 3 * exact["holds"] + 3 / seeds):
            bad.append(case.name)
    lines += ["", "Cases outside their documented rates: " + (", ".join(bad) if bad else "none.")]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--section", choices=("verdicts", "power", "sequential", "all"), default="verdicts")
    ap.add_argument("--only", help="only the verdict-table cases whose name contains this text")
    args = ap.parse_args()
    if args.section in ("verdicts", "all"):
        sys.stdout.write(table(args.seeds, args.only))
    if args.section in ("power", "all"):
        sys.stdout.write(power(args.seeds))
    if args.section in ("sequential", "all"):
        from calibration.sequential import table as sequential_table  # draws until decided

        sys.stdout.write(sequential_table(args.seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
