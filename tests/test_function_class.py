"""Function classes as searchable domains (tests/planted_search3, a test-only extension of known truth): a claim
quantifies over every member of a declared class (`inputs.activation = { class = ..., constants }`), quantities draw
the member through ctx.activation(), runs use the class's default member, and the full profile's default hunt ranges
over every admitted member, pins the one that breaks the statement and replays it from its reproduce line. Every hunt
is seeded (Hypothesis derandomised by its seed, Monte-Carlo draws by the configuration seed): the outcomes are
exact, not probable."""

from __future__ import annotations

import copy
import json
import math
import shlex
from pathlib import Path

import pytest
import torch
from plugins import cli_json, full_result, planted_copies

from lemmacheck.claims import parse_claim
from lemmacheck.errors import ClaimError
from lemmacheck.functions import BASES, CLASSES, Member, member_key, members, parse_member, resolve
from lemmacheck.hunt import hunt, probe

PLANTED3 = Path(__file__).parent / "planted_search3"


@pytest.fixture(scope="module")
def p3(tmp_path_factory):
    return planted_copies(PLANTED3, tmp_path_factory)


def _default(claim):
    return {k: p.default for k, p in claim.params.items()}


# ------------------------------------------------------------------------------------------- the catalogue


@pytest.mark.parametrize("spec", [
    {"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1},
    {"class": "lipschitz-smooth", "lipschitz": 2, "smooth": 0.5, "at_zero": 0},
    {"class": "lipschitz", "lipschitz": 1, "bound": 3},
    {"class": "convex-lipschitz-smooth", "lipschitz": 1, "smooth": 0.25},
])
def test_every_member_meets_the_constants_it_states_and_the_class_admits(spec):
    # Each member's constants are computed from its base's exact ones; a fine grid must agree with them (sup |phi'|
    # and sup |phi''| attained up to grid resolution, never exceeded) and they must meet the class's.
    x = torch.linspace(-12, 12, 240_001, dtype=torch.float64)
    found = members(spec)
    assert len(found) >= 5 and found[0] == resolve(spec)
    for m in found:
        slope = m.d1(x).abs().max().item()
        assert slope <= m.lipschitz * (1 + 1e-12) and slope >= m.lipschitz * (1 - 1e-4), m.name
        assert slope <= spec["lipschitz"] * (1 + 1e-12)
        # phi' agrees with the function's own difference quotients (the derivative is the member's)
        h = x[1] - x[0]
        assert torch.allclose((m(x[1:]) - m(x[:-1])) / h, m.d1((x[1:] + x[:-1]) / 2), atol=1e-6 * max(1, m.lipschitz))
        if m.smooth is not None:
            curv = m.d2(x).abs().max().item()
            assert curv <= m.smooth * (1 + 1e-12) and curv >= m.smooth * (1 - 1e-4), m.name
            assert m.smooth <= spec.get("smooth", math.inf) * (1 + 1e-12)
        assert m.at_zero == pytest.approx(m(torch.zeros(1, dtype=torch.float64)).item(), abs=1e-15)
        if "at_zero" in spec:
            assert m.at_zero == pytest.approx(spec["at_zero"], abs=1e-12)
        if "bound" in spec:
            assert m(x).abs().max().item() <= spec["bound"] * (1 + 1e-12)


def test_the_catalogue_includes_shifts_and_rescalings_that_keep_the_constants():
    spec = {"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1}
    names = [m.name for m in members(spec)]
    assert names[0] == "tanh(x)"  # the default: the first admitted member
    for expected in ("tanh(x + 1)", "tanh(x) + 1", "softplus(x)", "0.25*softplus(4x)", "sigmoid(x)", "linear(x)"):
        assert expected in names
    assert not any(n.startswith(("relu", "abs", "leaky-relu")) for n in names)  # not smooth: not in this class
    # at_zero = 0 keeps only the members through the origin, the shifted ones moved back to it
    zero = [m for m in members({**spec, "at_zero": 0})]
    assert zero and all(abs(m.at_zero) < 1e-12 for m in zero)
    assert any(m.base == "softplus" for m in zero)  # softplus(x) - log 2
    # a member whose constants exceed the class's is refused by name
    from lemmacheck.functions import admits

    assert "Lipschitz" in admits(spec, Member("tanh", 2.0))
    assert "smooth" in admits(spec, Member("softplus", 0.125, 8.0))  # 1-Lipschitz, 2-smooth
    assert set(CLASSES) >= {"lipschitz", "lipschitz-smooth", "convex-lipschitz-smooth"} and "tanh" in BASES


# ------------------------------------------------------------------------------------------- claim files


@pytest.mark.parametrize("table, field, problem", [
    ({"class": "lipschitz-smoth", "lipschitz": 1, "smooth": 1}, "inputs.activation.class", "unknown function class"),
    ({"class": "lipschitz-smooth", "lipschitz": 1}, "inputs.activation.smooth", "missing"),
    ({"lipschitz": 1, "smooth": 1}, "inputs.activation.class", "missing"),
    ({"class": "lipschitz-smooth", "lipschitz": "1", "smooth": 1}, "inputs.activation.lipschitz", "not a finite"),
    ({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": -1}, "inputs.activation.smooth", "negative"),
    ({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1, "beta": 1}, "inputs.activation.beta", "unknown"),
    ({"class": "lipschitz", "lipschitz": 1, "smooth": 1}, "inputs.activation.smooth", "no smoothness"),
    ({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1, "member": "relu"}, "inputs.activation.member",
     "not smooth"),
    ({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1, "member": {"base": "tanh", "a": 3}},
     "inputs.activation.member", "above lipschitz"),
    ({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1, "member": "swish"}, "inputs.activation.member.base",
     "unknown function"),
    ({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1, "bound": 0.1}, "inputs.activation", "admits no"),
    ("tanh", "inputs.activation", "expected a table"),
])
def test_a_malformed_function_class_is_a_claim_error_naming_file_and_field(p3, table, field, problem):
    claim = p3["gain"]
    raw = copy.deepcopy(claim.raw)
    raw["inputs"]["activation"] = table
    with pytest.raises(ClaimError) as err:
        parse_claim(raw, claim.source)
    assert err.value.field == field and problem in err.value.problem
    assert str(claim.source) in str(err.value)


def test_a_quantity_asking_for_an_undeclared_function_fails_with_a_clear_error(p3):
    raw = copy.deepcopy(p3["gain"].raw)
    del raw["inputs"]["activation"]
    claim = parse_claim(raw, p3["gain"].source)
    with pytest.raises(RuntimeError, match="inputs.activation"):
        probe(claim, _default(claim), 0, 4)


def test_runs_use_the_default_member_and_a_pinned_one_replays(p3):
    claim = p3["gain"]
    # the default member (tanh) meets the statement: a plain run cannot see the false claim
    assert probe(claim, _default(claim), 0, 50).violations == 0
    shifted = parse_member({"base": "tanh", "e": 1.0}).to_json()
    assert probe(claim, _default(claim), 0, 50, functions={"activation": shifted}).violations > 0
    # pinning is what the claim file says too: `member` in the class's table
    raw = copy.deepcopy(claim.raw)
    raw["inputs"]["activation"]["member"] = shifted
    assert probe(parse_claim(raw, claim.source), _default(claim), 0, 50).violations > 0


# ------------------------------------------------------------------------------------------- the search


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_full_profile_finds_the_claim_false_only_for_a_non_default_member(p3, seed):
    claim = p3["gain"]  # ||phi(Wx)|| <= L ||Wx|| uses phi(0) = 0, which the class does not state
    assert "hunt" not in claim.raw["profiles"]["full"]
    grid_only = copy.deepcopy(claim.raw)
    grid_only["profiles"]["full"]["hunt"] = 0
    assert full_result(parse_claim(grid_only, claim.source), seed).verdict == "holds"  # the default member holds
    res = full_result(claim, seed)
    assert res.verdict == "violated"
    bad = [c for c in res.configs if c.violations]
    assert bad
    default = resolve(claim.inputs["activation"])
    for c in bad:  # found by the hunt, pinned to the member, which is not the default and moves phi(0)
        member = parse_member(c.pinned["activation"])
        assert member != default and abs(member.at_zero) > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_losses_are_a_function_class_too(p3, seed):
    claim = p3["loss-floor"]  # loss >= 0: true for the default (the logistic loss), false for shifted members
    assert resolve(claim.inputs["loss"]).name == "softplus(-x)"
    grid_only = copy.deepcopy(claim.raw)
    grid_only["profiles"]["full"]["hunt"] = 0
    assert full_result(parse_claim(grid_only, claim.source), seed).verdict == "holds"
    res = full_result(claim, seed)
    assert res.verdict == "violated"
    bad = [c for c in res.configs if c.violations]
    assert bad and all(parse_member(c.pinned["loss"]).range[0] < 0 for c in bad)  # an admitted member below 0


@pytest.mark.parametrize("name", ["gain-at-zero", "descent"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_true_controls_over_the_class_are_never_flagged(p3, name, seed):
    # gain-at-zero: the same statement over the class with phi(0) = 0 declared (tight: the linear member attains
    # the bound); descent: the descent lemma, tight on the Huberised ReLU's quadratic piece
    res = full_result(p3[name], seed)
    assert res.verdict == "holds"
    assert any(c.pinned and "activation" in c.pinned for c in res.configs)  # the hunt's worst member ran too


@pytest.mark.parametrize("name", ["gain-at-zero", "descent"])
def test_controls_are_tight_at_a_non_default_member(p3, name):
    claim = p3[name]
    res = hunt(claim, examples=6, seed=0, replicates=4, max_probes=18, stratified=6)
    assert res.counterexample is None
    worst = res.worst()
    assert parse_member(worst.functions["activation"]) != resolve(claim.inputs["activation"])
    again = probe(claim, worst.params, 0, 50, points=worst.points, functions=worst.functions)
    assert again.violations == 0
    # the largest draw equals the bound up to rounding: the tightness the rounding tolerance must forgive
    from lemmacheck.hunt import pinned
    from lemmacheck.shards import ShardTask, execute_shard, shard_seed

    run = pinned(claim, worst.points, None, None, None, worst.functions)
    rec = execute_shard(ShardTask(str(claim.source), run.snapshot, claim.id, 0, 0, worst.params,
                                  shard_seed(again.seed, 0), 50))
    assert max(rec.value) == pytest.approx(1.0, abs=1e-9)


def test_the_hunt_probes_every_admitted_member(p3):
    # stratified: a hunt smaller than the class still probes each member (not only Hypothesis's draws near the
    # default), so a statement false for one member only is reached
    claim = p3["descent"]
    res = hunt(claim, examples=6, seed=1, replicates=4, max_probes=18, stratified=6)
    tried = res.tried()["functions"]
    assert {f"activation: {m.name}" for m in members(claim.inputs["activation"])} <= set(tried)


def test_the_shrunk_counterexample_is_the_simplest_failing_member(p3):
    claim = p3["gain"]
    listed = members(claim.inputs["activation"])
    ce = hunt(claim, examples=6, seed=0, replicates=4, max_probes=18, stratified=6).counterexample
    assert ce is not None and ce.significant
    member = parse_member(ce.functions["activation"])
    # no earlier member of the catalogue breaks the statement at the counterexample's configuration
    for m in listed[:listed.index(member)]:
        assert not probe(claim, ce.params, 0, ce.replicates, points=ce.points,
                         functions={"activation": m.to_json()}).significant


def test_reproduce_line_replays_the_hunted_member(p3, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).parent.parent)
    src = str(PLANTED3 / "gain.toml")
    doc = cli_json(["run", src, "--profile", "full", "--db", str(tmp_path / "r.db"), "--json", "-", "-q"], capsys)
    res = doc["claims"][0]
    assert res["verdict"] == "violated"
    worst = next(c for c in res["configs"] if c["violations"])
    assert "activation" in worst["pinned"]  # the run's JSON names the member
    line = res["repro"]
    assert "--pinned" in line and '"activation"' in line
    again = cli_json(shlex.split(line)[1:] + ["--json"], capsys)
    assert again["verdict"] == "violated" and again["configs"][0]["violations"] == worst["violations"]
    # the same line without the member (the dataset kept) reads holds: the member is what refutes
    pins = json.loads(shlex.split(line)[shlex.split(line).index("--pinned") + 1])
    pins.pop("activation")
    argv = shlex.split(line.split(" --pinned ")[0])[1:] + ["--claims", str(PLANTED3), "--json"]
    assert cli_json(argv + (["--pinned", json.dumps(pins)] if pins else []), capsys)["verdict"] == "holds"


def test_repro_refuses_a_member_outside_the_class(p3, capsys):
    from lemmacheck.cli import main

    base = ["repro", "planted3/fact-1/gain", "--params", '{"d": 2, "m": 16, "n": 1}', "--seed", "1",
            "--replicates", "4", "--shard-size", "4", "--claims", str(PLANTED3)]
    assert main(base + ["--pinned", '{"activation": {"base": "tanh", "a": 2.0}}']) != 0
    assert "above lipschitz" in capsys.readouterr().err
    assert main(base + ["--pinned", '{"loss": "softplus"}']) != 0
    assert "loss" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- analytic members


def _one_sided(f, x0: float, order: int, h: float = 1e-4) -> tuple[float, float]:
    """The order-th derivative of f at x0 from the left and from the right (one-sided finite differences)."""
    x = torch.tensor([x0 + s * k * h for s in (-1, 1) for k in range(order + 1)], dtype=torch.float64)
    v = f(x).tolist()
    left, right = v[:order + 1], v[order + 1:]
    coef = [math.comb(order, k) * (-1) ** k for k in range(order + 1)]
    return (sum(c * y for c, y in zip(coef, left, strict=True)) / h ** order,  # backward differences
            sum(c * y for c, y in zip(coef, right, strict=True)) * (-1) ** order / h ** order)  # forward ones


@pytest.mark.parametrize("name", list(BASES))
def test_each_base_says_truthfully_whether_it_is_analytic_and_polynomial(name):
    base = BASES[name]
    m = Member(name, 1.5, 0.7, 0.3, -0.2)  # flags and kinks survive an affine change of argument and value
    assert (m.analytic, m.polynomial) == (base.analytic, base.polynomial)
    assert base.analytic == (not base.kinks) and (base.analytic or not base.polynomial)
    # a polynomial (degree <= 3 here) has vanishing 4th differences; a non-polynomial function does not
    x = torch.linspace(-4, 4, 81, dtype=torch.float64)
    fourth = torch.diff(m(x), n=4).abs().max().item()
    assert (fourth < 1e-9) == base.polynomial, (name, fourth)
    # a non-analytic member is listed with its kinks, where its first or second derivative jumps; an analytic
    # member's agree from both sides at the same points
    points = m.kinks if m.kinks else [(k - m.c) / m.b for k in (0.0, 1.0)]
    for k in points:
        jumps = [abs(r - lft) for lft, r in (_one_sided(m, k, 1), _one_sided(m, k, 2, 1e-3))]
        assert (max(jumps) > 0.05) == bool(m.kinks), (name, k, jumps)
    assert m.kinks == tuple(sorted((k - 0.3) / 0.7 for k in base.kinks))


@pytest.mark.parametrize("spec", [
    {"class": "analytic-non-polynomial", "lipschitz": 1},
    {"class": "analytic-non-polynomial", "lipschitz": 1, "smooth": 0.5},
    {"class": "analytic-non-polynomial", "lipschitz": 2, "at_zero": 0},
])
def test_the_analytic_non_polynomial_class_lists_only_such_members(spec):
    from lemmacheck.functions import admits

    found = members(spec)
    assert {"tanh", "softplus", "sigmoid"} <= {m.base for m in found}
    x = torch.linspace(-4, 4, 81, dtype=torch.float64)
    for m in found:
        assert m.analytic and not m.kinks and not m.polynomial, m.name
        assert torch.diff(m(x), n=4).abs().max().item() > 1e-9, m.name  # not a polynomial of degree <= 3
        assert m.smooth is not None and m.smooth <= spec.get("smooth", math.inf) * (1 + 1e-12)
    # a polynomial, a kinked member and a member above the constants are refused, each by its reason
    assert "is a polynomial" in admits(spec, Member("linear", 0.5))
    assert "not analytic (kinks at x = -1)" in admits(spec, Member("relu", 1.0, 1.0, 1.0))
    assert "not analytic" in admits(spec, Member("huber-relu"))
    assert "above lipschitz" in admits(spec, Member("tanh", 3.0))


@pytest.mark.parametrize("member, problem", [("linear", "is a polynomial"), ("abs", "not analytic"),
                                             ({"base": "tanh", "a": 2}, "above lipschitz")])
def test_a_claim_pinning_a_member_outside_the_analytic_class_is_a_claim_error(p3, member, problem):
    claim = p3["gain"]
    raw = copy.deepcopy(claim.raw)
    raw["inputs"]["activation"] = {"class": "analytic-non-polynomial", "lipschitz": 1, "member": member}
    with pytest.raises(ClaimError) as err:
        parse_claim(raw, claim.source)
    assert err.value.field == "inputs.activation.member" and problem in err.value.problem
    raw["inputs"]["activation"]["member"] = "softplus"
    assert parse_claim(raw, claim.source).inputs["activation"]["member"] == "softplus"


# ------------------------------------------------------------------------------------------- value shifts


def _planted_far(p3, name: str, bound: str):
    """A planted claim whose bound ignores phi(0) but is far from the catalogue's own shifts (|phi(0)| <= 1.4):
    the statement fails only for a member moved in value by tens or more (as du2018 Lemma E.2 from about 22)."""
    claim = p3[name]
    raw = copy.deepcopy(claim.raw)
    raw["check"]["bound"] = bound
    return parse_claim(raw, claim.source)


@pytest.mark.parametrize("name, bound, role", [("gain", "40", "activation"), ("loss-floor", "-50", "loss")])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_hunt_searches_the_value_shift_where_the_class_leaves_phi0_free(p3, monkeypatch, name, bound, role, seed):
    import lemmacheck.hunt as hunt_module
    import lemmacheck.strategies as strategies_module

    claim = _planted_far(p3, name, bound)
    # every member of the catalogue meets the statement: without the searched shift no hunt can find it
    for m in members(claim.inputs[role]):
        assert probe(claim, _default(claim), 0, 50, functions={role: m.to_json()}).violations == 0, m.name
    res = hunt(claim, examples=6, seed=seed, replicates=4, max_probes=40, stratified=6)
    ce = res.counterexample
    assert ce is not None and ce.significant
    member = parse_member(ce.functions[role])
    assert abs(member.at_zero) > 10 and member not in members(claim.inputs[role])
    if ce.found_by == "stratified sweep":  # shrunk greedily: the next rounder, smaller shift no longer fails
        from lemmacheck.functions import shift_origin, shifted, smaller_shifts

        origin, shift = shift_origin(claim.inputs[role], member)
        assert abs(shift) in smaller_shifts(2000.0) and smaller_shifts(shift)  # a round size (1, 2, 5 x 10^k)
        assert not probe(claim, ce.params, 0, ce.replicates, points=ce.points, labels=ce.labels,
                         functions={role: shifted(origin, smaller_shifts(shift)[-1])}).significant
    # the same hunt with the shift no longer searched (the catalogue alone) finds nothing
    monkeypatch.setattr(strategies_module, "shifts_value", lambda spec: False)
    monkeypatch.setattr(hunt_module, "shifts_value", lambda spec: False)
    assert hunt(claim, examples=6, seed=seed, replicates=4, max_probes=40, stratified=6).counterexample is None


def test_classes_that_bound_phi0_are_never_shifted(p3):
    from lemmacheck.functions import shifts_value
    from lemmacheck.strategies import strata

    assert shifts_value({"class": "lipschitz", "lipschitz": 1})
    assert not shifts_value({"class": "lipschitz", "lipschitz": 1, "bound": 3})
    assert not shifts_value({"class": "lipschitz-smooth", "lipschitz": 1, "smooth": 1, "at_zero": 0})
    claim = p3["gain-at-zero"]
    listed = {member_key(m) for m in members(claim.inputs["activation"])}
    res = hunt(claim, examples=6, seed=0, replicates=4, max_probes=18, stratified=6)
    assert {member_key(p.functions["activation"]) for p in res.probes} <= listed
    # where phi(0) is free, the sweep probes every listed member first, then shifted ones of both signs
    free = p3["gain"]
    listed = [member_key(m) for m in members(free.inputs["activation"])]
    swept = [member_key(c.functions["activation"]) for c in strata(free, len(listed) + 4, 0,
                                                                     functions=("activation",))]
    assert set(swept[:len(listed)]) == set(listed)
    shifts = [json.loads(k)["e"] for k in swept[len(listed):]]
    assert all(k not in listed for k in swept[len(listed):]) and min(shifts) < -1 and max(shifts) > 1
