"""Calibration suite: claims of exactly known truth through the real runner and the CLI.

Pinned with fixed seeds (deterministic), and for probabilistic claims also checked against the exact binomial
probability of each verdict: the count over the seeds must lie inside the central 1 - 1e-6 range of
Binomial(seeds, P(verdict)). The many-seed table is scripts/calibration.py -> docs/calibration.md.
"""

import json

import pytest
from scipy import stats as sps

from calibration.cases import cases, run_case
from lemmacheck.cli import main

CASES = {c.name: c for c in cases()}
SEEDS = range(12)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.rate is not None])
def test_probabilistic_verdict_frequencies_match_the_exact_binomial_prediction(name):
    case = CASES[name]
    exact = case.exact()
    verdicts = [run_case(case, seed).verdict for seed in SEEDS]
    for v, p in exact.items():
        count = verdicts.count(v)
        lo, hi = sps.binom.ppf(1e-6 / 2, len(SEEDS), p), sps.binom.isf(1e-6 / 2, len(SEEDS), p)
        assert lo <= count <= hi, (v, count, p)
    if case.truth == "true":
        assert "violated" not in verdicts and exact["violated"] < 1e-4
    else:
        assert "holds" not in verdicts and exact["holds"] < 0.01  # the old rule read "holds" up to 23% at n = 100


# (case, verdict at seed 0, flag that must be present)
PINNED = [
    ("scaling: flat constant (tail-log)", "holds", None),
    ("scaling: constant converging from below, 2(1 - m^-1/2)", "holds", None),
    ("scaling: flat constant, for every draw (max-log)", "holds", None),
    ("scaling lower bound: flat constant", "holds", None),
    ("scaling: C(m) ~ m^0.1 (at the slope tolerance 0.1)", "inconclusive", "still-growing"),
    ("scaling: C(m) ~ m^0.2", "violated", None),
    ("scaling: C(m) ~ sqrt(log m)", "inconclusive", "still-growing"),
    ("scaling: flat median, 1 - delta tail ~ m^0.3", "violated", None),
    ("scaling lower bound: 30% exact zeros", "violated", "non-positive"),
    ("scaling upper bound, mean-log: flat constant, zeros thinning from 30% to 0", "holds", None),
    ("scaling upper bound, mean-log: C(m) ~ m^0.2, 70% zeros at the top m", "violated", None),
    ("scaling: NaN at the largest m (an estimator failure)", "inconclusive", "errors"),
    ("tight inequality ||a+b|| - ||a|| - ||b|| <= 0, float64", "holds", None),
    ("tight inequality ||a+b|| - ||a|| - ||b|| <= 0, float32", "holds", None),
    ("equality ratio sum x^2 / x.x <= 1, float32", "holds", None),
    ("equality ratio sum x^2 / x.x >= 1, float64", "holds", None),
    ("1e-6 relative excess over <= 1, float64", "violated", None),
    ("negative bound: -2 e^(0.1 Z) <= -1", "holds", None),
    ("negative bound: -2 e^(0.1 Z) + 1.2 <= -1 (always violated)", "violated", None),
    ("trajectory: 30% never reach the target within the claim's own budget", "inconclusive", None),
    ("trajectory: 30% never reach the target within the stated budget", "violated", None),
]


@pytest.mark.parametrize("name,verdict,flag", PINNED)
def test_known_truth_verdicts_are_pinned_and_never_wrong(name, verdict, flag):
    case = CASES[name]
    first = run_case(case, 0)
    assert first.verdict == verdict and (flag is None or flag in first.flags), (first.verdict, first.flags)
    others = [run_case(case, seed).verdict for seed in (1, 2)]
    if case.truth == "true":
        assert "violated" not in others
    elif case.truth == "false":
        assert "holds" not in others
    else:
        assert set(others) == {"inconclusive"}


def test_every_case_is_in_the_pinned_or_exact_lists():
    assert {c.name for c in CASES.values() if c.rate is None} == {n for n, _, _ in PINNED}


def test_cli_smoke_reports_verdicts_flags_and_the_family_wise_bound(tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    for name in ("violation rate 2 delta, n = 200", "scaling: C(m) ~ sqrt(log m)",
                 "trajectory: 30% never reach the target within the claim's own budget"):
        (folder / f"{CASES[name].claim().id.split('/')[1]}.toml").write_text(CASES[name].text)
    out = tmp_path / "run.json"
    main(["run", str(folder), "--db", str(tmp_path / "r.db"), "--json", str(out), "--quiet", "--workers", "1"])
    data = json.loads(out.read_text())
    by_id = {c["id"]: c for c in data["claims"]}
    assert by_id["calib/rate-2delta-n200"]["verdict"] == "violated"
    assert "still-growing" in by_id["calib/scaling-sqrtlog-upper"]["flags"]
    assert by_id["calib/hitting-own"]["not_reached"]["budget_steps"] == 100
    fw = data["run"]["false_violation"]
    assert set(fw["by_mode"]) == {"probabilistic", "scaling"} and fw["by_mode"]["scaling"] > 0
    assert fw["bound"] == pytest.approx(sum(c["false_violation_bound"] for c in data["claims"]))
    assert "never a proof" in fw["holds_means"]
