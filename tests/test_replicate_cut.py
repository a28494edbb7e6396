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
