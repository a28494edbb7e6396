"""Calibration suite: claims of exactly known truth through the real runner and the CLI.

Pinned with fixed seeds (deterministic), and for probabilistic claims also checked against the exact binomial
probability of each verdict: the count over the seeds must lie inside the central 1 - 1e-6 range of
Binomial(seeds, P(verdict)). The many-seed table is scripts/calibration.py -> docs/calibration.md.
"""

import json

import numpy as np
import pytest
from scipy import stats as sps

from calibration.cases import Case, cases, run_case
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
    ("log factor: sqrt(log m) e^(0.2 Z) <= C, m 64..1.3e8", "inconclusive", "log-growth"),
    ("log factor: log m e^(0.2 Z) <= C, m 64..1.3e8", "violated", "log-growth"),
    ("log factor: log log m e^(0.2 Z) <= C, m 64..1.3e8", "inconclusive", "log-growth"),
    ("log factor: (1 - 1/sqrt m) e^(0.2 Z) <= C, m 64..1.3e8", "holds", None),
    ("log factor: (1 - 1/m) e^(0.2 Z) <= C, m 64..1.3e8", "holds", None),
    ("log factor: (1 - 1/log m) e^(0.2 Z) <= C, m 64..1.3e8", "holds", None),
    ("log factor: flat constant e^(0.2 Z) <= C, m 64..1.3e8", "holds", None),
    ("tight inequality ||a+b|| - ||a|| - ||b|| <= 0, float64", "holds", None),
    ("tight inequality ||a+b|| - ||a|| - ||b|| <= 0, float32", "holds", None),
    ("equality ratio sum x^2 / x.x <= 1, float32", "holds", None),
    ("equality ratio sum x^2 / x.x >= 1, float64", "holds", None),
    ("1e-6 relative excess over <= 1, float64", "violated", None),
    ("negative bound: -2 e^(0.1 Z) <= -1", "holds", None),
    ("negative bound: -2 e^(0.1 Z) + 1.2 <= -1 (always violated)", "violated", None),
    ("trajectory: 30% never reach the target within the claim's own budget", "inconclusive", None),
    ("trajectory: 30% never reach the target within the stated budget", "violated", None),
    ("saturating: ||G||_2 <= C sqrt(h) w.p. 1 - delta, G h x h Gaussian, h 1..512", "holds", None),
    ("saturating: E||G||_2 <= C sqrt(h) (mean-log), G h x h Gaussian, h 1..512", "holds", None),
    ("saturating: C(h) = 2 - h^-1/2, h 1..512", "holds", None),
    ("saturating: logistic rise 0.14 -> 2 over two decades, h 1..16384", "holds", None),
    ("slow growth: E max of n |N(0,1)| <= C (mean-log), n 1..4096", "inconclusive", "log-growth"),
    ("slow growth: E max of n |N(0,1)| <= C (mean-log), n 16..65536", "inconclusive", "log-growth"),
    ("slow growth: C(n) = sqrt(1 + log n), n 1..4096", "inconclusive", "log-growth"),
    ("slow growth: C(n) = 1 + log(1 + log n), n 1..4096", "inconclusive", None),
    ("slow growth: C(n) = sqrt(log n), n 16..65536", "inconclusive", "log-growth"),
    ("slow growth: C(n) = log log n, n 16..65536", "inconclusive", "log-growth"),
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


def test_a_sqrt_log_factor_never_reads_holds():
    """The measured case: sqrt(log m) e^(0.2 Z) stated "<= C w.p. 1 - delta", m from 64 to 1.3e8 in 8 levels, 256
    draws each. Its power-law slope interval lies under the 0.1 tolerance and it rises only a few percent per
    level, so the slope and still-growing tests alone read holds at every seed; the log-growth test sees the
    exponent b = 1/2 of log m. (A flat constant is flagged with probability <= 1e-3: the box's.)"""
    case = CASES["log factor: sqrt(log m) e^(0.2 Z) <= C, m 64..1.3e8"]
    for seed in range(8):
        res = run_case(case, seed)
        lg = res.scaling["log_growth"]["m"]
        assert res.verdict != "holds" and "log-growth" in res.flags, (seed, res.verdict, res.flags, lg)
        assert lg["b_ci"][0] <= 0.5 <= lg["b_ci"][1] and lg["decades"] == pytest.approx(6.3, abs=0.01)
        assert res.scaling["slope_ci"]["m"][1] < 0.1  # what the power-law fit alone sees: under the tolerance


def test_log_growth_and_convergence_are_told_apart_by_curvature_in_log_log_m():
    """log m is convex in log log m: decisively not a converging constant over 6.3 decades (violated); a constant
    converging like 1 - 1/log m is concave there and is never rejected (exact under the interval box)."""
    from lemmacheck.stats import concave_fits_box

    grow = run_case(CASES["log factor: log m e^(0.2 Z) <= C, m 64..1.3e8"], 3)
    lg = grow.scaling["log_growth"]["m"]
    assert grow.verdict == "violated" and lg["concave_rejected"] and lg["b_ci"][0] <= 1.0 <= lg["b_ci"][1]
    conv = run_case(CASES["log factor: (1 - 1/log m) e^(0.2 Z) <= C, m 64..1.3e8"], 3)
    assert conv.verdict != "violated" and not conv.scaling["log_growth"]["m"]["concave_rejected"]
    # the LP itself: a concave curve's exact values fit; a convex one's, in a tight box, do not
    s = np.log(np.log(np.array([64.0, 1e3, 1e5, 1e8])))
    assert concave_fits_box(s, np.log(1 - np.exp(-s)) - 1e-9, np.log(1 - np.exp(-s)) + 1e-9)
    assert not concave_fits_box(s, s - 1e-3, s + 1e-3)  # log C = s: C = log m, convex in s


def test_the_report_says_how_many_decades_and_what_growth_the_sweep_could_miss():
    res = run_case(CASES["log factor: flat constant e^(0.2 Z) <= C, m 64..1.3e8"], 0)
    s = res.scaling
    assert s["decades"]["m"] == pytest.approx(6.3, abs=0.01)
    assert 0 < s["log_exponent_max"]["m"] < 0.5 and 0 < s["slope_max"]["m"] < 0.1
    from lemmacheck.summary import failure_text, table

    assert "6.3 decades, log exponent b of Ĉ" in failure_text(res) and "6.3 dec" in table([res])
    from lemmacheck.report.pages import _scaling_facts

    facts = dict(_scaling_facts(s))
    assert facts["log growth in m"].startswith("6.3 decades; b = ")


def test_a_constant_that_flattens_at_the_top_is_not_log_growth():
    """Exact (zero-width) values rising 1.74, 1.83, 1.86 over x = 16, 64, 256: an exponent of log x near 0.1 over
    the sweep, but 0.05 over the last step: decelerating as convergence does, so not flagged. The same values with
    the last step rising at the sweep's rate (b = 0.5 throughout) are flagged."""
    from lemmacheck.verdicts import _log_growth

    log_x = np.log(np.array([[16.0], [64.0], [256.0]]))
    flat = np.log(np.array([1.737, 1.834, 1.859]))
    res = _log_growth(["H"], log_x, flat, flat, flat, True)["H"]
    assert res["b_ci"][0] > 0.1 and res["b_last_ci"][1] < 0.1 and not res["growing"]
    grow = 0.5 * np.log(log_x[:, 0])
    res = _log_growth(["H"], log_x, grow, grow - 0.01, grow + 0.01, True)["H"]
    assert res["growing"] and res["b_ci"][0] <= 0.5 <= res["b_ci"][1] and not res["decisive"]  # 1.2 decades
    # a lower bound's constant decaying like (log x)^-1/2 is the same test on 1/C
    res = _log_growth(["H"], log_x, -grow, -grow - 0.01, -grow + 0.01, False)["H"]
    assert res["growing"] and res["direction"] == "decay"


SATURATING = [n for n in CASES if n.startswith("saturating:") and "w.p." not in n]  # the tail case: pinned
SLOW = [n for n in CASES if n.startswith("slow growth:")]


@pytest.mark.parametrize("name", SATURATING)
def test_a_constant_rising_from_far_below_and_saturating_reads_holds(name):
    """E||G||_2 / sqrt(h) goes 0.5 -> 1.99 from h = 1 to 512 (mean-log), 2 - h^-1/2 and a logistic rise over two
    decades: the whole-sweep slope reads growth (0.15-0.3 > 0.1), the top of the sweep a plateau. Only growth that
    persists at the top refutes; the whole-sweep rule read these violated or inconclusive. The box covers the true
    quantiles with probability >= 1 - 1e-3, and then a plateau of a constant converging from below reads holds."""
    case = CASES[name]
    for seed in (0, 1, 2):
        res = run_case(case, seed)
        assert res.verdict == "holds", (seed, res.verdict, res.flags, res.scaling.get("reason"))


def test_the_failure_text_of_a_saturating_constant_says_where_the_rise_stops():
    from lemmacheck.report.pages import _scaling_explanation
    from lemmacheck.summary import failure_text

    res = run_case(CASES["saturating: E||G||_2 <= C sqrt(h) (mean-log), G h x h Gaussian, h 1..512"], 0)
    s = res.scaling
    assert s["whole_sweep_verdict"] == "violated" and res.verdict == "holds"  # the old rule's verdict, kept beside
    assert "the rise stops" in s["reason"] and "the constant that fits every configuration is Ĉ = 1.9" in s["reason"]
    assert s["top_slopes"]["m"]["ci"][1] < 0.1 < s["slope_ci"]["m"][0]
    assert s["reason"] in failure_text(res) and "no single hidden constant" not in failure_text(res)
    assert _scaling_explanation(res.verdict, "<=", s["reason"]) == s["reason"]


def test_a_logistic_rise_extends_its_sweep_until_the_top_decides_and_a_declared_range_stops_it():
    """Over 1..16384 the top decade of the logistic rise still shows a log exponent up to ~0.3 (the plateau is not
    yet clear): the run doubles m until it is. Declared as a range ending at 16384, m is never taken beyond it, and
    the verdict stays inconclusive with the reason naming the sweep that would decide."""
    case = CASES["saturating: logistic rise 0.14 -> 2 over two decades, h 1..16384"]
    res = run_case(case, 0)
    top = max(c.params["m"] for c in res.configs)
    assert res.verdict == "holds" and top > 16384, (top, res.scaling.get("reason"))
    bounded = Case(case.name, case.truth, case.text.replace("m = { values = [1, 4, 16, 64, 256, 1024, 4096, 16384] }",
                                                            "m = { min = 1, max = 16384, integer = true }"),
                   case.replicates, case.configs)
    res = run_case(bounded, 0)
    assert max(c.params["m"] for c in res.configs) == 16384
    assert res.verdict == "inconclusive" and "a sweep beyond m = 1.638e+04 would decide" in res.scaling["reason"]
    assert res.scaling["extend"] == {"m": 32768.0}


@pytest.mark.parametrize("name", SLOW)
def test_slow_growth_never_reads_holds_nor_violated_by_its_first_step(name):
    """sqrt(log n) and log log n growth, from n = 1 and from n = 16: never holds (the log-growth test or an undecided
    top), and a sweep from n = 1 reads as one from n = 16 does: the jump of the first step (E max |g| 0.5 -> 1.4 from
    n = 1 to 4) is no growth at the top. The whole-sweep rule read the n = 1 sweep violated and the n = 16 one
    inconclusive."""
    case = CASES[name]
    for seed in (0, 1, 2):
        res = run_case(case, seed)
        assert res.verdict == "inconclusive", (seed, res.verdict, res.flags, res.scaling.get("reason"))


def test_a_regime_path_along_the_swept_parameter_states_the_verdicts_growth():
    """A constant growing like m^0.2, with a second swept parameter x it does not depend on and a regime path along
    m: each level's fit (sweeping x at one m) holds, yet the claim is violated along m itself. The path's line says
    so and the trend persists; before, it printed "per-level fits holds, holds, holds; no violation"."""
    from lemmacheck.verdicts import trend_text

    base = _scaling_pow_text()
    case = Case("pow0.2 with a regime path", "false", base, 200, configs=8)
    res = run_case(case, 0)
    assert res.verdict == "violated"
    t = res.regime_path
    assert t["verdicts"] == ["holds"] * 4 and t["trend"] == "persists" and t["along"]["grows"]
    assert "along m: Ĉ local slope at the top 0.2" in trend_text(t) and "the claim's violation" in trend_text(t)


def _scaling_pow_text() -> str:
    from calibration.cases import _toml

    text = _toml("pow-path", "calib-scaling", "<=", "C * sqrt(m)", "1 - 0.1", 'growth = "pow0.2", sigma = 0.05',
                 "m = { values = [64, 512, 4096, 32768] }\nx = { values = [1, 2] }",
                 "m = [64, 512, 4096, 32768], x = [1, 2]", 200, 'constants = ["C"]')
    return text.replace("grid = { m = [64, 512, 4096, 32768], x = [1, 2] }\n",
                        'grid = { m = [64, 512, 4096, 32768], x = [1, 2] }\n'
                        'regime_path = { param = "m", levels = [64, 512, 4096, 32768] }\n', 1)


def test_a_sweep_extension_stays_within_the_claims_own_cost(monkeypatch):
    """The extension may add at most EXTEND_COST times the claim's own sweep (memory_estimate's work proxy: one
    unit per configuration here). At 1/8 of the eight-level sweep it adds one level and stops, undecided."""
    from lemmacheck import runner

    monkeypatch.setattr(runner, "EXTEND_COST", 1 / 8)
    res = run_case(CASES["saturating: logistic rise 0.14 -> 2 over two decades, h 1..16384"], 0)
    assert sorted(c.params["m"] for c in res.configs)[-2:] == [16384, 32768]
    assert res.verdict == "inconclusive" and res.scaling["extend"] == {"m": 65536.0}, res.scaling.get("reason")
