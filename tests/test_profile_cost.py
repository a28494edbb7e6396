"""scripts/profile_cost.py: the shards it counts are the shards a run draws."""

from plugins import script

from lemmacheck.claims import load_claims
from lemmacheck.runner import plan, run_claims
from lemmacheck.store import Store

profile_cost = script("profile_cost")

ZERO_EXT = '''
import torch
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES

@QUANTITIES.register("test-zero", "test only: 0 on every draw", networks=("scalar",))
def zero(ctx):
    return Observation(torch.zeros(ctx.replicates, dtype=torch.float64))
'''

CLAIM = '''
id = "zero/fact-1/zero"
paper = "zero"
result = "Fact 1"
title = "zero is at most one, with probability 1 - delta"
statement = '0 \\\\le 1'
kind = "probability-tool"
network = "scalar"
[params]
delta = { values = [0.05, 0.2, 0.0001] }
[check]
quantity = "test-zero"
relation = "<="
bound = "1"
probability = "1 - delta"
[profiles.quick]
replicates = 2000
shard_size = 20
grid = { delta = [0.05, 0.2, 0.0001] }
'''


def test_expected_shards_of_early_stopping_configurations_are_those_a_run_draws(tmp_path):
    """A configuration that holds stops at the first shard where the confidence sequence decides: profile_cost
    counts those shards, not all planned ones (it counted every planned shard, 3x the drawn on the full profile);
    one whose delta is below what its replicates can show draws them all."""
    d = tmp_path / "claims" / "zero"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(ZERO_EXT)
    (d / "zero.toml").write_text(CLAIM)
    claim = load_claims([d])[0][0]
    store = Store(":memory:")
    run_id = run_claims([claim], store, profile="quick", seed=0, workers=1)
    plans = plan(claim, "quick", 0)
    drawn = [len(list(store.shards(run_id, claim.id, j))) for j in range(len(plans))]
    expected = [profile_cost.expected_shards(claim, p) for p in plans]
    assert all(p.early_stop for p in plans)
    assert expected == drawn
    assert drawn[0] < plans[0].n_shards and drawn[2] == plans[2].n_shards  # stopped early; never decided
