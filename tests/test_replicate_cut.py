"""scripts/replicate_cut.py: a run cut to its first shards reads exactly as a run at fewer replicates."""

import numpy as np
import pytest
from plugins import script

from lemmacheck.claims import load_claims
from lemmacheck.runner import evaluate, run_claims
from lemmacheck.store import Store

replicate_cut = script("replicate_cut")

GAUSS_EXT = '''
import torch
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES

@QUANTITIES.register("test-abs-gauss", "test only: |N(0, 1)| per draw", networks=("scalar",))
def abs_gauss(ctx):
    return Observation(torch.randn(ctx.replicates, generator=ctx.generator, dtype=torch.float64).abs())
'''

CLAIM = '''
id = "gauss/fact-1/abs"
paper = "gauss"
result = "Fact 1"
title = "|g| is at most t with probability 1 - delta"
statement = '|g| \\\\le t'
kind = "probability-tool"
network = "scalar"
[params]
t = {{ values = [1.0, 2.0, 3.5] }}
delta = {{ value = 0.05 }}
[check]
quantity = "test-abs-gauss"
relation = "<="
bound = "t"
probability = "1 - delta"
[profiles.quick]
replicates = {replicates}
shard_size = 40
early_stop = false
grid = {{ t = [1.0, 2.0, 3.5] }}
'''


@pytest.fixture(scope="module")
def gauss_dir(tmp_path_factory):
    """One folder for the module: its extension registers once; each run rewrites the claim file."""
    d = tmp_path_factory.mktemp("claims") / "gauss"
    d.mkdir()
    (d / "extension.py").write_text(GAUSS_EXT)
    return d


def _run(d, replicates: int):
    (d / "gauss.toml").write_text(CLAIM.format(replicates=replicates))
    claim = load_claims([d])[0][0]
    store = Store(":memory:")
    run_id = run_claims([claim], store, profile="quick", seed=3, workers=1)
    return claim, store, run_id


def test_a_run_cut_to_half_its_shards_equals_a_run_at_half_the_replicates(gauss_dir):
    """Same values draw for draw, same verdicts, configuration by configuration; the cut view saves the seconds of
    exactly the shards it drops. (It fails if shard draws depended on the replicate count.)"""
    claim, big, big_id = _run(gauss_dir, 320)
    _, small, small_id = _run(gauss_dir, 160)
    view = replicate_cut.TruncatedStore(big, 0.5)
    cut, ref = evaluate(view, big_id, [claim])[0], evaluate(small, small_id, [claim])[0]
    assert cut.verdict == ref.verdict
    assert len(cut.configs) == len(ref.configs) == 3
    for a, b in zip(cut.configs, ref.configs):
        assert (a.drawn, a.violations, a.violation_ci, a.value_max, a.verdict) == \
            (b.drawn, b.violations, b.violation_ci, b.value_max, b.verdict)
        assert a.drawn == 160
    for j in range(3):
        kept = np.concatenate([r.value for r in view.shards(big_id, claim.id, j)])
        drawn = np.concatenate([r.value for r in small.shards(small_id, claim.id, j)])
        np.testing.assert_array_equal(kept, drawn)
    dropped = sum(r.seconds for j in range(3) for r in big.shards(big_id, claim.id, j) if r.shard_index >= 4)
    assert abs(sum(view.saved.values()) - dropped) < 1e-9  # each dropped shard once, however often it was read
    full = evaluate(big, big_id, [claim])[0]
    assert [c.drawn for c in full.configs] == [320] * 3  # the view changed nothing in the store


def test_a_one_shard_configuration_is_kept_whole(gauss_dir):
    claim, store, run_id = _run(gauss_dir, 40)
    view = replicate_cut.TruncatedStore(store, 0.25)
    res = evaluate(view, run_id, [claim])[0]
    assert [c.drawn for c in res.configs] == [40] * 3 and not view.saved


def test_a_budget_cut_takes_the_costliest_savings_that_keep_their_verdict():
    rows = {c: {"claim": c, "verdict": v, "verdict_0.5": w, "saved_s_0.5": s}
            for c, v, w, s in [("a", "holds", "holds", 10.0), ("b", "holds", "inconclusive", 50.0),
                               ("c", "violated", "violated", 30.0), ("d", "holds", "holds", 5.0),
                               ("e", "holds", "holds", 0.0)]}
    assert replicate_cut.chosen(rows, 0.5, 35) == ["c", "a"]  # b would change its verdict; stops once 35 s are saved
    assert replicate_cut.chosen(rows, 0.5, 1e9) == ["c", "a", "d"]  # nothing that saves nothing
    assert replicate_cut.chosen(rows, 0.5, 35, frozenset({"c"})) == ["a", "d"]
    assert replicate_cut.cut_replicates(320, 40, 0.5) == 160
    assert replicate_cut.cut_replicates(100, 32, 0.5) == 64  # whole shards, as TruncatedStore keeps them
    assert replicate_cut.cut_replicates(40, 40, 0.25) == 40  # one shard: kept whole


def test_writing_a_cut_keeps_the_full_profiles_default_hunt(gauss_dir):
    """The edited file loads, draws the kept shards' replicates, and hunts with the examples the full replicates
    gave (the default budget scales with the draws, so a cut alone would hunt less and pin other configurations)."""
    from lemmacheck import corpus

    text = CLAIM.format(replicates=64) + "[profiles.full]\nreplicates = 1920\nshard_size = 40\n" \
        "configs = [{ t = 2.0 }]\n\n[edges_skipped]\n"
    path = gauss_dir / "gauss.toml"
    path.write_text(text)
    claim = load_claims([gauss_dir])[0][0]
    path.write_text(replicate_cut.write_cut(claim, 0.5, "full"))
    cut = load_claims([gauss_dir])[0][0]
    assert cut.profiles["full"].replicates == 960 and cut.profiles["quick"].replicates == 64
    assert corpus.hunt_budget(cut, "full") == corpus.hunt_budget(claim, "full") == 20
    assert "[edges_skipped]" in path.read_text()
