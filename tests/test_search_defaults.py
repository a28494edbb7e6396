"""Search by default (tests/planted_search2, a test-only extension of known truth): the hunt judges a case exactly
as the run does (rounding tolerance included), a hunted violation replays from its reproduce line, declared
premises on the data bind runs and hunts alike, and the full profile's default hunt finds what the grids miss.
Every hunt here is seeded (Hypothesis derandomised by its seed, Monte-Carlo draws by the configuration seed): the
outcomes are exact, not probable."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest
import torch
from plugins import cli_json, full_result, planted_copies

from lemmacheck.claims import load_claims, parse_claim
from lemmacheck.hunt import hunt

PLANTED2 = Path(__file__).parent / "planted_search2"


@pytest.fixture(scope="module")
def p2(tmp_path_factory):
    return planted_copies(PLANTED2, tmp_path_factory)


def _has_antipodal_pair(points) -> bool:
    X = torch.tensor(points, dtype=torch.float64)
    G = X @ X.T
    return bool((G <= -1 + 1e-9).any())


def test_hunt_honours_the_runs_rounding_tolerance(p2):
    # An identity: every draw is 0 up to rounding of the operands' size (extras scale = n^2). The run forgives
    # that; so must the hunt, or it "refutes" a true statement with -3e-17 slack and saves that.
    res = hunt(p2["rounding-identity"], examples=30, seed=0)
    assert res.probes and res.counterexample is None
    assert min(p.slack_min for p in res.probes) == 1.0  # tight: at the bound within rounding, as the run reads it


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hunt_finds_the_real_violation_behind_rounding_noise(p2, seed):
    # False only on a dataset with an antipodal pair (+0.01 there); rounding noise everywhere else must not stop
    # the hunt at a false counterexample.
    ce = hunt(p2["rounding-identity-planted"], examples=60, seed=seed).counterexample
    assert ce is not None and ce.significant and ce.points is not None and _has_antipodal_pair(ce.points)


def test_reproduce_line_of_a_hunted_violation_replays_it(p2, tmp_path, capsys, monkeypatch):
    # The full profile's hunt finds a symmetric set (n even, outside the grid's odd n); the run's reproduce line
    # must carry that dataset, and `lemmacheck repro` must read violated from it alone.
    monkeypatch.chdir(Path(__file__).parent.parent)
    src = str(PLANTED2 / "symmetric.toml")
    doc = cli_json(["run", src, "--profile", "full", "--db", str(tmp_path / "r.db"), "--json", "-", "-q"], capsys)
    res = doc["claims"][0]
    assert res["verdict"] == "violated"
    worst = next(c for c in res["configs"] if c["violations"])
    assert worst["pinned"] and "points" in worst["pinned"]  # the run's JSON names the dataset
    line = res["repro"]
    assert "--pinned" in line
    argv = shlex.split(line)[1:] + ["--json"]
    again = cli_json(argv, capsys)
    assert again["verdict"] == "violated" and again["configs"][0]["violations"] == worst["violations"]
    # without the dataset the same seed reads holds: the dataset is what refutes
    argv = shlex.split(line.split(" --pinned ")[0])[1:] + ["--claims", str(PLANTED2), "--json"]
    assert cli_json(argv, capsys)["verdict"] == "holds"


def test_repro_refuses_a_malformed_pinned_dataset(p2, capsys):
    from lemmacheck.cli import main

    base = ["repro", "planted2/fact-3/symmetric", "--params", '{"d": 2, "n": 4}', "--seed", "1", "--replicates",
            "4", "--shard-size", "4", "--claims", str(PLANTED2)]
    assert main(base + ["--pinned", '{"points": [[2.0, 0.0]]}']) != 0
    assert "unit norm" in capsys.readouterr().err
    assert main(base + ["--pinned", '{"dataset": []}']) != 0
    assert "unknown field" in capsys.readouterr().err


def _without_premises(claim):
    raw = copy.deepcopy(claim.raw)
    raw["inputs"].pop("premises")
    return parse_claim(raw, claim.source)


def _has_parallel_pair(points) -> bool:
    X = torch.tensor(points, dtype=torch.float64)
    C = X @ X.T
    return bool(((C.abs() >= 1 - 1e-9) & ~torch.eye(len(X), dtype=torch.bool)).any())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hunt_never_returns_a_dataset_that_breaks_a_declared_premise(p2, seed):
    claim = p2["pair-sum"]  # ||x_1 + x_2|| > 0 for non-parallel inputs: true; false only at x_2 = -x_1
    bare = hunt(_without_premises(claim), examples=40, seed=seed).counterexample
    assert bare is not None and _has_parallel_pair(bare.points)  # without the premise the hunt finds {x, -x}
    res = hunt(claim, examples=40, seed=seed)
    assert res.counterexample is None
    assert res.probes and not any(p.points is not None and _has_parallel_pair(p.points) for p in res.probes)


def test_runs_meet_declared_premises(p2):
    from lemmacheck.errors import EstimatorError
    from lemmacheck.hunt import probe

    claim = p2["pair-sum"]
    # In d = 1 every pair of unit inputs is parallel: the run cannot meet the premise and says so.
    with pytest.raises(RuntimeError, match="premise"):
        probe(claim, {"d": 1}, 0, 8)
    # A pinned dataset that breaks it is refused, never counted as a violation.
    with pytest.raises(RuntimeError, match="no-parallel-pair"):
        probe(claim, {"d": 2}, 0, 4, points=[[1.0, 0.0], [-1.0, 0.0]])
    # Datasets of a geometry that breaks it are redrawn: antipodal pairs cannot be redrawn apart, so the shard fails
    raw = copy.deepcopy(claim.raw)
    raw["inputs"]["geometry"] = "antipodal-pairs"
    with pytest.raises(RuntimeError, match="premise"):
        probe(parse_claim(raw, claim.source), {"d": 3}, 0, 8)
    # ... while iid draws meet it and the claim holds on them.
    assert probe(claim, {"d": 3}, 0, 50).violations == 0
    assert EstimatorError  # the error type a shard records (its message names the premise)


def test_unknown_premise_is_a_clear_error(p2):
    from lemmacheck.errors import ClaimError

    raw = copy.deepcopy(p2["pair-sum"].raw)
    raw["inputs"]["premises"] = ["no-parallel-pairs"]
    with pytest.raises(ClaimError, match="inputs.premises.*unknown premise"):
        parse_claim(raw, p2["pair-sum"].source)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_full_profile_hunts_by_default_and_finds_a_symmetric_set_off_the_grid(p2, seed):
    claim = p2["symmetric"]  # false only on sets closed under x -> -x; the full grid has odd n only
    assert "hunt" not in claim.raw["profiles"]["full"]
    assert all(cfg["n"] % 2 for cfg in claim.profiles["full"].configs)
    res = full_result(claim, seed)
    assert res.verdict == "violated"
    bad = [c for c in res.configs if c.violations]
    assert bad and all(c.pinned and c.params["n"] % 2 == 0 for c in bad)  # found by the hunt, replayed pinned


@pytest.mark.parametrize("name", ["rounding-identity", "pair-sum"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_true_controls_are_never_flagged_by_the_full_profile(p2, name, seed):
    # rounding-identity is tight (every draw at the bound within rounding); pair-sum is true under its premise
    assert full_result(p2[name], seed).verdict == "holds"


def test_default_hunt_budget_scales_with_the_profile():
    from lemmacheck.corpus import DEFAULT_HUNT_MAX, DEFAULT_HUNT_MIN, hunt_budget

    claims, _ = load_claims([Path(__file__).parents[1] / "claims"])
    budgets = [hunt_budget(c, "full") for c in claims if c.check is not None]
    assert budgets and all(DEFAULT_HUNT_MIN <= b <= DEFAULT_HUNT_MAX for b in budgets if b)
    # the quick profile: the claim's own `hunt`, else its sweep over degenerate datasets (a few probes at most)
    from lemmacheck.hunt import QUICK_CASES, quick_cells

    for c in (c for c in claims if "quick" in c.profiles):
        own = ((c.raw.get("profiles") or {}).get("quick")) or {}
        want = c.profiles["quick"].hunt if "hunt" in own or c.check is None else len(quick_cells(c))
        assert hunt_budget(c, "quick") == want <= max(QUICK_CASES, c.profiles["quick"].hunt)


@pytest.mark.parametrize("name", ["null-combination", "step-edge"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_full_profile_finds_what_the_grid_and_default_draws_miss(p2, name, seed):
    # null-combination: Gaussian coefficients never lie in the data's null space; the hunt moves them through
    # ctx.coefficients (its families) and the data to dependent points. step-edge: the grid stops short of h = 1.
    claim = p2[name]
    grid_only = copy.deepcopy(claim.raw)
    grid_only["profiles"]["full"]["hunt"] = 0
    assert full_result(parse_claim(grid_only, claim.source), seed).verdict == "holds"
    res = full_result(claim, seed)
    assert res.verdict == "violated"
    bad = [c for c in res.configs if c.violations]
    assert bad and all(c.pinned or name == "step-edge" for c in bad)
    if name == "null-combination":
        # a non-default coefficient family, on data where it lies in the null space (dependent points)
        for c in bad:
            assert c.pinned.get("coefficients") not in (None, "gaussian")
            X = torch.tensor(c.pinned["points"], dtype=torch.float64)
            assert torch.linalg.matrix_rank(X) < len(X)
    else:
        assert all(c.params["h"] == 1.0 for c in bad)


def test_a_refuting_dataset_is_replayed_on_every_claim_sharing_its_setting(p2):
    from lemmacheck import corpus
    from lemmacheck.runner import evaluate, plan, run_claims
    from lemmacheck.store import Store

    source, sibling = p2["symmetric"], p2["symmetric-sum"]  # same network and inputs, other quantities
    raw = copy.deepcopy(sibling.raw)
    raw["profiles"]["quick"]["hunt"] = 0  # the quick sweep off (its hexagon breaks it): only a replay can
    sibling = parse_claim(raw, sibling.source)
    assert corpus.plans(sibling) == []

    def quick(claim):
        store = Store(":memory:")
        return evaluate(store, run_claims([claim], store, profile="quick", seed=0), [claim])[0]

    assert quick(sibling).verdict == "holds"  # iid datasets of odd n: never balanced
    ce = hunt(source, examples=30, seed=0).counterexample
    assert ce is not None
    corpus.save(source, ce)
    try:
        first = plan(sibling, "quick", 0)[0]
        assert json.loads(first.definition)["inputs"]["points"] == ce.points
        res = quick(sibling)
        assert res.verdict == "violated"
        assert [c.pinned["points"] for c in res.configs if c.violations] == [ce.points]
    finally:
        corpus.corpus_path(source).unlink()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_out_of_regime_violation_is_measured_along_the_width(p2, seed):
    claim = p2["width-free"]  # requires m >= 1e9 (never met); symmetric sets fail at every width
    res = hunt(claim, examples=20, seed=seed)
    ce = res.counterexample
    assert ce is not None and not ce.in_regime
    assert res.persistence["trend"] == "persists" and [r["level"] for r in res.persistence["levels"]] == [16, 256, 4096]
    # the same dataset under a quantity whose failure needs m < 44: a finite-width effect
    raw = copy.deepcopy(claim.raw)
    raw["check"]["args"] = {"fading": True}
    fading = parse_claim(raw, claim.source)
    from lemmacheck.hunt import persistence, probe

    small = probe(fading, {**ce.params, "m": 4}, seed, 4, points=ce.points)
    assert small.significant
    assert persistence(fading, small, seed)["trend"] == "fades"
    # the full profile finds it too (its default hunt), flagged out of regime, the dataset pinned for repro
    run = full_result(claim, seed)
    bad = [c for c in run.configs if c.violations]
    assert bad and all(c.pinned and not c.in_regime for c in bad)
    assert "violated-out-of-regime" in run.flags or "out-of-regime" in run.flags


def test_hunts_run_on_the_worker_pool_and_a_resumed_run_never_hunts_again(tmp_path, monkeypatch):
    # The full profile's default hunts are units of work on the run's pool (beside other claims' shards), so a
    # 2-worker run plans exactly what the in-process run plans; the plan is recorded when the hunt returns, so a
    # run interrupted after its hunt resumes from the recorded plan without hunting again.
    from lemmacheck import corpus
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    claims, errors = load_claims([PLANTED2])  # the folder itself: spawned workers load its extension from there
    assert not errors
    claim = next(c for c in claims if c.id.endswith("/symmetric"))
    serial, pooled = Store(tmp_path / "serial.db"), Store(tmp_path / "pooled.db")
    r1 = run_claims([claim], serial, profile="full", seed=1, workers=1)
    r2 = run_claims([claim], pooled, profile="full", seed=1, workers=2)
    assert serial.configs(r1, claim.id) == pooled.configs(r2, claim.id)
    assert any(c["pinned"] for c in pooled.configs(r2, claim.id))  # the hunt's case is in the plan
    want = evaluate(serial, r1, [claim])[0]
    assert want.verdict == evaluate(pooled, r2, [claim])[0].verdict == "violated"

    # interrupted after the hunt: half the shards lost, the run unfinished
    serial.db.execute("DELETE FROM shards WHERE run_id=? AND config_index % 2 = 0", (r1,))
    serial.db.commit()
    serial.reopen_run(r1)

    def no_hunt(*a, **k):
        raise AssertionError("a resumed run hunted again")

    monkeypatch.setattr(corpus, "hunted", no_hunt)
    assert run_claims([claim], serial, profile="full", seed=1, workers=1, resume=True) == r1
    again = evaluate(serial, r1, [claim])[0]
    assert [(c.params, c.violations, c.replicates) for c in again.configs] == \
        [(c.params, c.violations, c.replicates) for c in want.configs]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_counterexample_hunted_in_a_run_is_replayed_on_its_siblings_in_that_run(p2, seed):
    # symmetric-sum shares symmetric's network and inputs; with its own hunt off, only the replay of symmetric's
    # hunted dataset (within the same run, no corpus file) can reach a set closed under x -> -x.
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    source = p2["symmetric"]
    raw = copy.deepcopy(p2["symmetric-sum"].raw)
    raw["profiles"]["full"]["hunt"] = 0
    sibling = parse_claim(raw, p2["symmetric-sum"].source)

    def full(claims):
        store = Store(":memory:")
        return {r.claim.id: r for r in evaluate(store, run_claims(claims, store, profile="full", seed=seed), claims)}

    assert full([sibling])[sibling.id].verdict == "holds"
    both = full([source, sibling])
    assert both[source.id].verdict == "violated"
    hunted = [c.pinned["points"] for c in both[source.id].configs if c.violations and c.pinned]
    replayed = [c for c in both[sibling.id].configs if c.pinned]
    assert both[sibling.id].verdict == "violated"
    assert replayed and all(c.pinned["points"] in hunted for c in replayed)


def test_a_sibling_redrawn_by_update_gets_the_counterexamples_hunted_earlier_in_the_run(p2, tmp_path):
    # --update redraws an edited claim without hunting the others again: the counterexamples their hunts found
    # (recorded with the probes) are replayed on it as in a fresh run; claims that keep their plans get no copies.
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    source = p2["symmetric"]
    raw = copy.deepcopy(p2["symmetric-sum"].raw)
    raw["profiles"]["full"]["hunt"] = 0
    sibling = parse_claim(raw, p2["symmetric-sum"].source)
    store = Store(tmp_path / "u.db")
    rid = run_claims([source, sibling], store, profile="full", seed=0)
    fresh = {r.claim.id: r for r in evaluate(store, rid, [source, sibling])}
    assert fresh[sibling.id].verdict == "violated" and any(c.pinned for c in fresh[sibling.id].configs)
    assert store.counterexamples(rid).keys() == {source.id}
    assert run_claims([source, sibling], store, profile="full", seed=0, update=True) == rid  # nothing changed
    assert [len(store.configs(rid, c.id)) for c in (source, sibling)] == \
        [len(fresh[c.id].configs) for c in (source, sibling)]
    raw["notes"] = "edited: the update redraws it"
    edited = parse_claim(raw, p2["symmetric-sum"].source)
    assert run_claims([source, edited], store, profile="full", seed=0, update=True) == rid
    redrawn = evaluate(store, rid, [edited])[0]
    assert redrawn.verdict == "violated"
    assert [(c.params, c.pinned, c.violations) for c in redrawn.configs] == \
        [(c.params, c.pinned, c.violations) for c in fresh[sibling.id].configs]


def test_siblings_of_a_claim_redrawn_by_update_hold_the_replays_a_fresh_run_gives(p2, tmp_path):
    # The source's edited file turns its hunt off: its counterexample is gone, so the sibling holding its replay
    # must be redrawn without it (a fresh run of the edited files gives it none), not keep the old replay.
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    raw = copy.deepcopy(p2["symmetric-sum"].raw)
    raw["profiles"]["full"]["hunt"] = 0
    sibling = parse_claim(raw, p2["symmetric-sum"].source)
    source = p2["symmetric"]
    store = Store(tmp_path / "u.db")
    rid = run_claims([source, sibling], store, profile="full", seed=0)
    assert any(c["pinned"] for c in store.configs(rid, sibling.id))  # the replay of source's counterexample
    src = copy.deepcopy(source.raw)
    src["profiles"]["full"]["hunt"] = 0
    unhunted = parse_claim(src, source.source)
    assert run_claims([unhunted, sibling], store, profile="full", seed=0, update=True) == rid
    fresh = Store(":memory:")
    fid = run_claims([unhunted, sibling], fresh, profile="full", seed=0)
    for claim in (unhunted, sibling):
        got, want = evaluate(store, rid, [claim])[0], evaluate(fresh, fid, [claim])[0]
        assert [(c.params, c.pinned, c.violations) for c in got.configs] == \
            [(c.params, c.pinned, c.violations) for c in want.configs]
        assert got.verdict == want.verdict
    assert evaluate(store, rid, [sibling])[0].verdict == "holds"
    assert sibling.id in store.run_info(rid)["versions"][next(k for k in store.run_info(rid)["versions"]
                                                               if k.startswith("update "))]


def test_a_hunt_that_raises_never_sinks_the_run_and_resume_hunts_again(tmp_path, monkeypatch):
    # A bug in a hunt (here: the hunt itself raising) is recorded with its traceback; the claim runs its profile
    # unhunted, flagged, and the other claims are unaffected. After the fix, --resume plans and hunts it afresh.
    from lemmacheck import corpus
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    claims, _ = load_claims([PLANTED2])
    claim = next(c for c in claims if c.id.endswith("/symmetric"))
    other = next(c for c in claims if c.id.endswith("/pair-sum"))
    real = corpus.hunt_outcome

    def buggy(c, *a, **k):
        if c.id == claim.id:
            raise ValueError("planted hunt bug")
        return real(c, *a, **k)

    monkeypatch.setattr(corpus, "hunt_outcome", buggy)
    store = Store(tmp_path / "r.db")
    rid = run_claims([claim, other], store, profile="full", seed=0)
    res = {r.claim.id: r for r in evaluate(store, rid, [claim, other])}
    assert "planted hunt bug" in res[claim.id].hunt_error and "hunt-error" in res[claim.id].flags
    assert not any(c.pinned for c in res[claim.id].configs)  # planned without its hunt
    assert res[other.id].hunt_error is None and res[other.id].verdict == "holds"
    assert store.hunt_errors(rid) == [claim.id]

    monkeypatch.setattr(corpus, "hunt_outcome", real)  # the fix
    assert run_claims([claim, other], store, profile="full", seed=0, resume=True) == rid
    res = {r.claim.id: r for r in evaluate(store, rid, [claim, other])}
    assert res[claim.id].hunt_error is None and res[claim.id].verdict == "violated"
    assert any(c.pinned for c in res[claim.id].configs)


def test_a_default_hunt_never_probes_a_case_dearer_than_the_profile_runs(p2):
    # Each integer parameter is capped at the profile's largest value, and a case whose parameters combine into a
    # larger size (their product) than any configuration of the profile is skipped: a hunt cannot cost more per
    # probe than the claim's own largest configuration.
    from lemmacheck.hunt import size

    claim = p2["symmetric"]
    sizes = [size(claim, c) for c in claim.profiles["full"].configs]
    cap = min(sizes)  # tighter than the profile's own, so the rule has to bite
    res = hunt(claim, examples=12, seed=0, max_size=cap)
    assert res.probes and all(size(claim, p.params) <= cap for p in res.probes)
    free = hunt(claim, examples=12, seed=0)
    assert any(size(claim, p.params) > cap for p in free.probes)
