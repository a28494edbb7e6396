"""Parity and zero as strata of the default search (tests/planted_search4, test-only claims of known truth): an
integer parameter the statement reads by parity (inside floor/ceil, or (-1)^m) is swept odd and even at every scale,
and the zero vector is tried wherever the statement admits it. Every sweep and hunt here is seeded: exact outcomes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from plugins import planted_copies

from lemmacheck.claims import parse_claim
from lemmacheck.errors import ClaimError
from lemmacheck.hunt import hunt, probe
from lemmacheck.strategies import parity_params, strata, sweep_values

PLANTED4 = Path(__file__).parent / "planted_search4"


@pytest.fixture(scope="module")
def p4(tmp_path_factory):
    return planted_copies(PLANTED4, tmp_path_factory)


def _with_bound(claim, bound: str):
    raw = copy.deepcopy(claim.raw)
    raw["check"]["bound"] = bound
    return parse_claim(raw, claim.source)


def test_parameters_read_by_parity_are_found(p4):
    claim = p4["parity-middle"]
    assert parity_params(claim) == {"m"}
    assert parity_params(_with_bound(claim, "(-1)**m + m/2")) == {"m"}
    assert parity_params(_with_bound(claim, "ceil(m/2)")) == {"m"}
    assert parity_params(_with_bound(claim, "m/2 + 1")) == set()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_statement_false_at_odd_middle_values_is_refuted_by_the_sweep(p4, seed):
    # false at every odd m in [100, 900] only: the range's ends (1, 2, 3, 999, 1000) and its middle 500 all hold;
    # the parity stratum adds 501 (and 4), where the sweep's probe refutes it
    claim = p4["parity-middle"]
    assert sweep_values(claim)["m"] == [1, 2, 3, 4, 500, 501, 999, 1000]
    broken = [c.params for c in strata(claim, 8, seed, data=False, labels=False)
              if probe(claim, c.params, 0, 2).significant]
    assert broken == [{"m": 501}]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_zero_vector_is_tried_where_the_statement_admits_it(p4, seed):
    # ||a||_1 > ||a||_2 / sqrt(n) holds for every nonzero a (n >= 2) and fails at a = 0 alone
    res = hunt(p4["zero-coefficients"], examples=6, seed=seed)
    ce = res.counterexample
    assert ce is not None and ce.coefficients == "zero" and ce.found_by == "stratified sweep"
    # where the statement says a != 0 (inputs.nonzero), zero is never tried and nothing is found
    twin = hunt(p4["nonzero-coefficients"], examples=6, seed=seed)
    assert twin.counterexample is None and twin.probes
    assert all(p.coefficients != "zero" for p in twin.probes)


def test_a_bad_nonzero_list_names_its_field(p4):
    claim = p4["nonzero-coefficients"]
    raw = copy.deepcopy(claim.raw)
    raw["inputs"]["nonzero"] = ["labels"]
    with pytest.raises(ClaimError, match=r"inputs\.nonzero"):
        parse_claim(raw, claim.source)


def _quick(claim, seed: int):
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    store = Store(":memory:")
    return evaluate(store, run_claims([claim], store, profile="quick", seed=seed), [claim])[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_quick_profile_finds_the_regular_hexagon(p4, seed):
    # The ReLU kernel's Gram is singular on a regular hexagon (alternating signs: relu(a) - relu(-a) = a and
    # x_0 - x_1 + x_2 = 0); the quick grid's random datasets (n = 3) never come near. The quick sweep's first cell is
    # that hexagon (n = 6, within the declared n <= 6), which joins the plan as a pinned configuration.
    claim = p4["gram-hexagon"]
    grid = claim.profiles["quick"].configs
    assert all(probe(claim, dict(c), seed, 20).violations == 0 for c in grid)
    res = _quick(claim, seed)
    assert res.verdict == "violated"
    hit = [c for c in res.configs if c.violations]
    assert len(hit) == 1 and hit[0].params == {"d": 2, "n": 6}
    X = torch.tensor(hit[0].pinned["points"], dtype=torch.float64)
    assert (X @ X.T).min() <= -1 + 1e-9  # a set closed under x -> -x: the hexagon's antipodal pairs


def test_the_quick_sweep_costs_a_few_probes_and_only_where_datasets_are_drawn(p4):
    from lemmacheck.corpus import hunt_budget

    # 20 quick draws: the sweep's probes (4 draws each) take at most half of them, 2 probes
    assert hunt_budget(p4["gram-hexagon"], "quick") == 2
    assert hunt_budget(p4["parity-middle"], "quick") == 0  # no datasets: nothing to sweep
    res = _quick(p4["parity-middle"], 0)
    assert res.verdict == "holds" and not res.probes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_full_profile_finds_what_the_quick_sweep_finds(p4, seed):
    # the full profile's own hunt may miss the hexagon (at seed 0 its sweep never reaches n = 6 as a polygon); it then
    # probes the quick cells too, so a fuller profile never reads holds where the quick one refutes
    from plugins import full_result

    res = full_result(p4["gram-hexagon"], seed)
    assert res.verdict == "violated"
    assert any(c.violations and c.params["n"] == 6 for c in res.configs)


def test_the_zero_perturbation_is_a_stratum_wherever_the_ball_admits_it(p4):
    # "the output moves under every perturbation in the ball" (gap > 0) is false at U = 0, which every ball holds
    raw = copy.deepcopy(p4["gap-planted"].raw)
    raw["check"].update(relation=">", bound="0")
    moves = parse_claim(raw, p4["gap-planted"].source)
    cases = strata(moves, 24, 0, data=False, labels=False, quantified=("weights", "perturbation"))
    zero = [c for c in cases if c.quantified["perturbation"] == "zero"]
    assert zero and any(c.quantified["weights"] == "zero" for c in cases)
    p = probe(moves, zero[0].params, 0, 4, search="random", quantified=zero[0].quantified)
    assert p.significant and p.violations == 4
    # a statement over nonzero perturbations says so, and the sweep never starts there
    raw["inputs"]["nonzero"] = ["perturbation"]
    excluded = parse_claim(raw, p4["gap-planted"].source)
    cases = strata(excluded, 24, 0, data=False, labels=False, quantified=("weights", "perturbation"))
    assert cases and all(c.quantified["perturbation"] != "zero" for c in cases)
