"""Planted false claims (tests/planted, a test-only extension): each fails only on a structured dataset, only
for one label pattern, only at the smallest depth or only in one perturbation direction. Plain i.i.d. sampling
at the claim's own profile misses each; the hunt finds each and shrinks it to the minimal example. On true
claims the hunt reports nothing. All of it is seeded: the outcomes below are exact, not probable."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch

from lemmacheck.claims import load_claims, load_extension, parse_claim
from lemmacheck.hunt import adversary, hunt, probe
from lemmacheck.inputs import min_separation, unit_sphere
from lemmacheck.search import project_separated

PLANTED = Path(__file__).parent / "planted"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    load_extension(PLANTED)  # registered once, from its one path; the copies below are claim files only
    folder = tmp_path_factory.mktemp("claims") / "planted"
    shutil.copytree(PLANTED, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    claims, errors = load_claims([folder])
    assert not errors
    return {c.id.split("/")[-1]: c for c in claims}


def _iid_violations(claim) -> int:
    """Violations of the quick profile's configurations with the claim's own (i.i.d.) draws."""
    prof = claim.profiles["quick"]
    return sum(probe(claim, dict(cfg), 0, prof.replicates).violations for cfg in prof.configs)


def test_structured_dataset_only(planted):
    claim = planted["structured"]
    assert _iid_violations(claim) == 0  # 2,000 iid datasets: none is balanced enough
    res = hunt(claim, examples=100, seed=0)
    ce = res.counterexample
    assert res.data and not res.labels
    assert ce is not None and ce.significant
    # Minimal: two points in the plane, antipodal, in the simplest coordinates.
    assert ce.params == {"d": 2, "n": 2}
    assert ce.points == [[1.0, 0.0], [-1.0, 0.0]]


def test_one_label_pattern_only(planted):
    claim = planted["pattern"]
    assert _iid_violations(claim) == 0  # 400 Rademacher labellings of 14 and 16 points
    ce = hunt(claim, examples=100, seed=0).counterexample
    assert ce is not None and ce.params == {"n": 2} and ce.labels == [1, -1]


def test_smallest_depth_only(planted):
    claim = planted["depth"]
    assert _iid_violations(claim) == 0
    assert all(cfg["L"] > 1 for cfg in claim.profiles["full"].configs)  # the profiles skip the edge L = 1
    ce = hunt(claim, examples=30, seed=0).counterexample
    assert ce is not None and ce.params == {"L": 1}


def test_one_perturbation_direction_only(planted):
    claim = planted["direction"]
    assert _iid_violations(claim) == 0  # random directions: <D, e1 e1^T> / tau ~ 1/(2 sqrt(m)) << 0.5
    res = hunt(claim, examples=30, seed=0)
    ce = res.counterexample
    assert res.search == "adversarial" and ce is not None and ce.search == "adversarial"
    assert ce.params == {"m": 2, "tau": 1.0}


def test_true_claim_hunt_reports_nothing_but_gets_tight(planted):
    res = hunt(planted["true-correlation"], examples=60, seed=0)
    assert res.data and res.labels
    assert res.counterexample is None
    assert 1.0 <= res.worst().slack_min < 1.05  # the search gets near the equality case (slack 1), never past it


def test_probabilistic_claim_needs_a_significant_rate(planted):
    claim = planted["coin"]
    # Rate 0.05 everywhere (below delta = 0.1): probes see violations, none is significant.
    raw = copy.deepcopy(claim.raw)
    raw["check"]["args"] = {"everywhere": True}
    flat = parse_claim(raw, claim.source)
    res = hunt(flat, examples=40, seed=0)
    assert any(p.violations for p in res.probes)
    assert res.counterexample is None
    # Rate 0.6 on balanced datasets: confirmed, with the interval's lower end above delta.
    ce = hunt(claim, examples=60, seed=0).counterexample
    assert ce is not None and ce.violation_ci[0] > 0.1 and ce.points == [[1.0, 0.0], [-1.0, 0.0]]


def test_gradient_adversary_moves_points_to_a_violation(planted):
    claim = planted["structured"]
    X = unit_sphere(torch.Generator().manual_seed(5), 1, n=5, d=3, separation=0.1)[0]
    start = probe(claim, {"n": 5, "d": 3}, 0, 4, points=X.tolist())
    assert not start.significant
    moved = adversary(claim, start, 0, steps=60, separation=0.1)
    assert moved is not None and moved.significant and moved.found_by == "gradient adversary"
    Y = torch.tensor(moved.points, dtype=torch.float64)
    torch.testing.assert_close(Y.norm(dim=-1), torch.ones(5, dtype=torch.float64))
    assert float(min_separation(Y[None])[0]) >= 0.1 * (1 - 1e-12)


def test_gradient_adversary_declines_a_non_differentiable_quantity(planted):
    claim = planted["coin"]
    start = probe(claim, {"n": 2, "d": 2}, 0, 4, points=[[1.0, 0.0], [0.0, 1.0]])
    assert adversary(claim, start, 0, steps=5) is None


def test_projection_restores_the_separation():
    X = torch.tensor([[1.0, 0.0, 0.0], [0.999, 0.01, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    Y = project_separated(X, 0.3)
    torch.testing.assert_close(Y.norm(dim=-1), torch.ones(3, dtype=torch.float64))
    assert float(min_separation(Y[None])[0]) >= 0.3


def test_hunts_are_deterministic(planted):
    a = hunt(planted["structured"], examples=40, seed=3)
    b = hunt(planted["structured"], examples=40, seed=3)
    assert [p.to_json() for p in a.probes] == [p.to_json() for p in b.probes]


def test_full_profile_runs_a_bounded_hunt(planted):
    from lemmacheck.runner import plan

    claim = planted["structured"]
    raw = copy.deepcopy(claim.raw)
    raw["profiles"]["full"] = {"replicates": 20, "shard_size": 20, "grid": {"n": [5, 6]}, "hunt": 30}
    hunted = parse_claim(raw, claim.source)
    first, *rest = plan(hunted, "full", 0)
    assert first.params == {"d": 2, "n": 2} and first.replicates == 20
    assert json.loads(first.definition)["inputs"]["points"] == [[1.0, 0.0], [-1.0, 0.0]]
    assert [p.params["n"] for p in rest] == [5, 6] and all(not p.definition for p in rest)
    # The full profile hunts by default; `hunt = 0` turns it off.
    assert plan(claim, "full", 0)[0].definition != ""
    raw["profiles"]["full"]["hunt"] = 0
    assert all(not p.definition for p in plan(parse_claim(raw, claim.source), "full", 0))
