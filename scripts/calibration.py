"""Regenerate docs/calibration.md: verdict frequencies of claims of known truth over many seeds.

    python scripts/calibration.py --seeds 200 > docs/calibration.md

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

from calibration.cases import DELTA, cases, run_case

from lemmacheck.stats import DEFAULT_ALPHA
from lemmacheck.verdicts import ROUNDING_ULPS, SCALING_ALPHA, STILL_GROWING_RISE, STILL_GROWING_SLOPE

VERDICTS = ("holds", "inconclusive", "violated")


def _freq(counts: Counter, total: int) -> str:
    return " / ".join(f"{counts.get(v, 0) / total:.3f}" for v in VERDICTS)


def table(seeds: int) -> str:
    from lemmacheck import runner

    fixed = runner.versions()
    runner.versions = lambda: fixed  # one git query, not two per run: thousands of runs follow
    lines = [
        "# Verdict calibration",
        "",
        "Claims whose truth is known exactly (tests/calibration/cases.py, quantities in tests/calibration/extension.py)",
        f"run through the real runner over seeds 0..{seeds - 1}. Regenerate with",
        "",
        "```bash",
        f"python scripts/calibration.py --seeds {seeds} > docs/calibration.md",
        "```",
        "",
        f"Settings: delta = {DELTA}, alpha = {DEFAULT_ALPHA:g} per configuration (two-sided Clopper-Pearson),",
        f"scaling intervals at 1 - {SCALING_ALPHA:g} simultaneous over a claim's configurations, slope tolerance 0.1,",
        f"still-growing at a log rise above {STILL_GROWING_RISE} and a local slope above {STILL_GROWING_SLOPE},",
        f"comparison tolerance {ROUNDING_ULPS} ulps of",
        "the dtype times the operands' magnitude. Frequencies are holds / inconclusive / violated.",
        "",
        "A true claim must never read violated; a false one must not read holds beyond the exact rate where one",
        "exists. \"holds\" means \"not refuted at this confidence\", never \"proved\".",
        "",
        "| case | truth | replicates x configs | observed h / i / v | exact h / i / v | flags seen |",
        "|---|---|---|---|---|---|",
    ]
    bad = []
    for case in cases():
        counts: Counter = Counter()
        flags: Counter = Counter()
        for seed in range(seeds):
            res = run_case(case, seed)
            counts[res.verdict] += 1
            flags.update(res.flags)
        exact = case.exact()
        ex = "-" if exact is None else " / ".join(f"{exact[v]:.3g}" for v in VERDICTS)
        fl = ", ".join(f"{k} {v / seeds:.2f}" for k, v in sorted(flags.items())) or "-"
        lines.append(f"| {case.name} | {case.truth} | {case.replicates} x {case.configs} | {_freq(counts, seeds)} "
                     f"| {ex} | {fl} |")
        if case.truth == "true" and counts["violated"] or case.truth == "false" and counts["holds"] and (
                exact is None or counts["holds"] / seeds > 3 * exact["holds"] + 3 / seeds):
            bad.append(case.name)
    lines += ["", "Cases outside their documented rates: " + (", ".join(bad) if bad else "none.")]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    args = ap.parse_args()
    sys.stdout.write(table(args.seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
