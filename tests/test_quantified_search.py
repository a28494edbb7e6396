""""For all W" as a searchable object (tests/planted_search4, a test-only extension of known truth): weights and
perturbations drawn through ctx.weights / ctx.perturbation in declared balls (absolute or relative radii, spectral or
Frobenius), moved by the engine's projected ascent (search.search_quantified) when the claim's search asks for it,
never by the estimator. Every run here is seeded: the outcomes are exact, not probable."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest
import torch
from plugins import cli_json, full_result, planted_copies

from lemmacheck.claims import parse_claim
from lemmacheck.context import Context, Observation
from lemmacheck.errors import ClaimError, EstimatorError
from lemmacheck.hunt import probe
from lemmacheck.search import search_quantified

PLANTED4 = Path(__file__).parent / "planted_search4"
ALIGNED = {"L": 2, "d": 2, "k": 3, "m": 4, "n": 1}


@pytest.fixture(scope="module")
def p4(tmp_path_factory):
    return planted_copies(PLANTED4, tmp_path_factory)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_false_for_all_w_bound_reads_violated_in_the_full_profile(p4, seed):
    # L/d is below the true constant (1 + 1/d)^L - 1 only on aligned weights; the estimator has no search code,
    # the full profile's default hunt runs it with the engine's ascent over W and U and finds the aligned case.
    res = full_result(p4["gap-planted"], seed)
    assert res.verdict == "violated"
    hit = [c for c in res.configs if c.violations]
    assert hit and all(c.pinned and c.pinned.get("search") == "adversarial" for c in hit)
    # the failure text names the search each configuration ran, not only the claim's own
    from lemmacheck.summary import failure_text

    assert "search: random (configurations ran: random + adversarial)" in failure_text(res)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_true_twin_holds_and_the_search_gets_tight(p4, seed):
    res = full_result(p4["gap-true"], seed)
    assert res.verdict == "holds"
    # the hunted configuration comes within 1% of the equality case (slack 1), never past it
    assert min(c.slack_min for c in res.configs) < 1.01


def test_random_draws_never_come_near(p4):
    # the claim's own search ("random"): the grid's draws stay far from the aligned case, so only the search refutes
    p = probe(p4["gap-planted"], ALIGNED, 0, 50)
    assert p.violations == 0 and p.slack_min > 1.5
    q = probe(p4["gap-planted"], ALIGNED, 0, 50, search="adversarial")
    assert q.significant and q.slack_min == pytest.approx(1 / 1.25, rel=1e-3)  # (1 + 1/2)^2 - 1 = 1.25 vs L/d = 1


def test_json_names_the_search_of_each_configuration_and_repro_replays_it(p4, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent.parent)
    src = str(PLANTED4 / "gap-planted.toml")
    doc = cli_json(["run", src, "--profile", "full", "--db", str(tmp_path / "r.db"), "--json", "-", "-q"], capsys)
    res = doc["claims"][0]
    assert res["verdict"] == "violated" and res["search"] == "random"
    assert res["searches"] == ["random", "adversarial"]
    worst = next(c for c in res["configs"] if c["violations"])
    assert worst["search"] == "adversarial"
    assert {c["search"] for c in res["configs"] if not c["pinned"]} == {"random"}
    # the reproduce line pins the search: the same seed replays the ascent to the same weights and value
    argv = shlex.split(res["repro"])[1:] + ["--json"]
    again = cli_json(argv, capsys)
    assert again["verdict"] == "violated" and again["configs"][0]["violations"] == worst["violations"]
    assert again["configs"][0]["slack_min"] == worst["slack_min"]
    # the report names both searches: the index's search column and the claim page's facts
    from lemmacheck.report import build_report

    index = build_report(tmp_path / "r.db", tmp_path / "site")
    assert "<td>random + adversarial</td>" in index.read_text()
    page = next((index.parent / "claims").glob("*.html")).read_text()
    assert "random; adversarial (1 hunted or corpus configuration)" in page


def _ctx(inputs: dict, search: str, params: dict | None = None, R: int = 6) -> Context:
    return Context("t", params or {"r": 0.5}, R, torch.Generator().manual_seed(3), inputs_spec=inputs, search=search)


def _entry(ctx: Context) -> Observation:
    """U_1[0, 0] for W drawn in the unit spectral ball and U in the relative ball ||U|| <= r ||W||."""
    Ws = ctx.weights([(3, 4)])
    Us = ctx.perturbation(Ws)
    return Observation(Us[0][:, 0, 0], extras={"w": torch.linalg.matrix_norm(Ws[0], ord=2)})


@pytest.mark.parametrize("norm", ["spectral", "frobenius"])
def test_ascent_reaches_and_respects_a_relative_ball(norm):
    inputs = {"weights": {"radius": "1", "norm": norm}, "perturbation": {"radius": "r", "relative": True,
                                                                         "norm": norm}}
    drawn = search_quantified(_entry, _ctx(inputs, "random"), 1)
    found = search_quantified(_entry, _ctx(inputs, "adversarial"), 1)
    # the largest entry of U in the ball ||U|| <= r ||W|| (||W|| <= 1) is r: reached, never exceeded
    assert float(drawn.value.max()) < 0.45
    assert float(found.value.min()) > 0.5 * (1 - 1e-3) and float(found.value.max()) <= 0.5 * (1 + 1e-12)
    assert bool((found.extras["search"] == 2).all())  # the ascent found each replicate's best
    assert float(found.extras["w"].max()) <= 1 + 1e-12  # the weights stayed in their ball


def test_lower_bounds_are_searched_downwards():
    inputs = {"weights": {"radius": "1"}, "perturbation": {"radius": "0.5"}}
    found = search_quantified(_entry, _ctx(inputs, "adversarial"), -1)
    assert float(found.value.max()) < -0.5 * (1 - 1e-3)  # an absolute radius 0.5: the entry goes down to -0.5


def test_a_value_that_is_not_differentiable_is_returned_as_drawn():
    def rounded(ctx):
        Ws = ctx.weights([(2, 2)])
        return Observation(torch.round(Ws[0][:, 0, 0].detach() * 10))

    inputs = {"weights": {"radius": "1"}}
    drawn = search_quantified(rounded, _ctx(inputs, "random"), 1)
    found = search_quantified(rounded, _ctx(inputs, "adversarial"), 1)
    torch.testing.assert_close(found.value, drawn.value)
    assert "not differentiable" in found.method


def test_undeclared_weights_are_a_clear_error():
    with pytest.raises(EstimatorError, match="inputs.weights"):
        _entry(_ctx({}, "random"))
    with pytest.raises(EstimatorError, match="inputs.perturbation"):
        _entry(_ctx({"weights": {"radius": "1"}}, "random"))


@pytest.mark.parametrize("table, field", [
    ({"weights": {"radius": "1", "norm": "nuclear"}}, "inputs.weights.norm"),
    ({"perturbation": {"relative": True}}, "inputs.perturbation.radius"),
    ({"perturbation": {"radius": "1/q"}}, "inputs.perturbation.radius"),
    ({"weights": {"family": "orthogonal"}}, "inputs.weights.family"),
    ({"weights": {"radius": "1", "size": 3}}, "inputs.weights.size"),
])
def test_a_bad_ball_names_its_field(p4, table, field):
    claim = p4["gap-planted"]
    raw = copy.deepcopy(claim.raw)
    raw["inputs"] = {**{k: v for k, v in raw["inputs"].items() if k not in table}, **table}
    with pytest.raises(ClaimError, match=field.replace(".", r"\.")) as err:
        parse_claim(raw, claim.source)
    assert str(claim.source) in str(err.value)


def test_a_protocol_networks_weights_are_searched_through_its_forward_pass(p4):
    # the estimator asks generic.network_for for the setting's protocol network and reads its forward pass; the
    # claim's inputs.weights makes the network's weights the ball's draw, and the ascent runs through `forward`
    params = {"n": 2, "k": 3, "m": 8, "L": 2}
    drawn = probe(p4["protocol-planted"], params, 0, 20, search="random")
    assert drawn.violations == 0  # the initialisation, projected into the ball: below 0.8
    found = probe(p4["protocol-planted"], params, 0, 20, search="adversarial")
    assert found.significant and found.slack_min == pytest.approx(0.8, rel=1e-6)  # sup ||x_L|| = 1
    tight = probe(p4["protocol-true"], params, 0, 20, search="adversarial")
    assert tight.violations == 0 and tight.slack_min < 1 + 1e-6


def test_a_hunted_starting_family_is_pinned_and_replays(p4):
    from lemmacheck.hunt import apply_pins, pinned, pins_of

    claim = p4["gap-planted"]
    run = pinned(claim, search="adversarial", quantified={"weights": "aligned", "perturbation": "aligned"})
    pins = pins_of(claim, run.snapshot)
    assert pins == {"weights": {"family": "aligned"}, "perturbation": {"family": "aligned"}, "search": "adversarial"}
    again = apply_pins(claim, pins)
    assert again.snapshot == run.snapshot
    # aligned weights with U = W/d are the equality case: where the drawn input lies near the chain's first direction
    # (|<x, u_0>| > 0.8 here) the draw itself refutes L/d, before any ascent step
    p = probe(claim, ALIGNED, 0, 8, search="random", quantified={"weights": "aligned", "perturbation": "aligned"})
    assert p.violations > 0
    with pytest.raises(ValueError, match="family"):
        apply_pins(claim, {"weights": "aligned"})
