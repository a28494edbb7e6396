"""How verdict numbers are printed: levels that never round to 100%, the slope that decides a scaling verdict,
axis labels that never repeat."""

from lemmacheck.readout import deciding_slope, level_text
from lemmacheck.report.svg import linear_ticks, log_ticks
from lemmacheck.summary import _fit

# Lemma A.11 (a lower bound): Ĉ grows in n (harmless) and is flat in iphi, the direction that decides
A11 = {"implied_constant_slopes": {"n": 2.0, "iphi": -0.0016},
       "slope_ci": {"n": [2.0, 2.0], "iphi": [-0.18, 0.18]},
       "slope_max": {"n": -2.0, "iphi": 0.18}, "interval_level": 0.999}


def test_a_level_below_one_never_reads_100_percent():
    assert level_text(0.999) == "99.9%"
    assert level_text(0.9995) == "99.95%"
    assert level_text(0.95) == "95%"
    assert level_text(1.0) == "100%"
    assert all(level_text(1 - 10.0 ** -k) != "100%" for k in range(1, 8))


def test_the_scaling_column_shows_the_slope_that_decides_not_the_steepest():
    assert deciding_slope(A11)[0] == "iphi"
    assert _fit(A11).startswith("C slope in iphi -0.0016 [-0.18, 0.18]")
    # without oriented ends (an older result), the steepest slope as before
    old = {k: v for k, v in A11.items() if k != "slope_max"}
    assert deciding_slope(old)[0] == "n"
    assert _fit(None) == "-"


def test_axis_labels_are_distinct_on_a_narrow_axis():
    for lo, hi in [(1.4701, 1.4712), (1.46999, 1.47004), (0.0, 10.0), (1e-3, 1e3), (1.47, 1.4702)]:
        for ticks in (linear_ticks(lo, hi), *([log_ticks(lo, hi)] if lo > 0 else [])):
            labels = [lab for _, lab in ticks]
            assert len(set(labels)) == len(labels), (lo, hi, labels)


def test_show_of_a_holding_scaling_claim_prints_no_violation_count():
    """`show`/failure text of a hidden-constant claim: the draws above the bound at C = 1 are illustrative, and are
    not printed as 'violations k/n'."""
    from pathlib import Path

    from lemmacheck.claims import load_claims
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store
    from lemmacheck.summary import failure_text

    path = Path(__file__).resolve().parents[1] / "claims" / "zou2018" / "lemma-a.11-li-liang-probability.toml"
    claims, errors = load_claims([path])
    assert not errors
    store = Store(":memory:")
    res = evaluate(store, run_claims(claims, store, paths=["x"]), claims)[0]
    text = failure_text(res)
    assert res.verdict == "holds" and res.scaling is not None
    assert "draws above the bound at" in text and "violations " not in text


def test_list_inputs_prints_every_geometry_in_full_wrapped(capsys, monkeypatch):
    from lemmacheck.cli import main
    from lemmacheck.inputs import GEOMETRIES

    monkeypatch.setenv("COLUMNS", "90")
    assert main(["list", "--inputs"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 90  # wrapped to the terminal, not one long line
    flat = " ".join(out.split())
    for g in GEOMETRIES.values():  # every geometry and its whole description
        assert f"{g.name}: {' '.join(g.description.split())}" in flat


def test_repro_of_a_scaling_claims_configuration_says_one_configuration_cannot_fit_a_slope(capsys):
    from lemmacheck.cli import main

    rc = main(["repro", "zou2018/lemma-a.11/li-liang-probability", "--params", '{"n": 4, "iphi": 4, "t": 1.0}',
               "--seed", "1", "--replicates", "20", "--shard-size", "20"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "one configuration cannot fit a slope" in out and "--seed <run seed>" in out
