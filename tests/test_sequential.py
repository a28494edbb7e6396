"""Draws until decided: an undecided probabilistic configuration draws on past its replicates, in waves, up to
the profile's max_replicates; the decision reads the stored prefix at each look, so any worker count gives the
same draws and verdicts. Undecided configurations state the draws their rate implies would decide them."""

import numpy as np
import pytest

from lemmacheck.claims import load_claim, load_claims
from lemmacheck.errors import ClaimError
from lemmacheck.runner import evaluate, plan, run_claims
from lemmacheck.shards import ConfigPlan
from lemmacheck.stats import bernoulli_confidence_sequence, draws_to_decide
from lemmacheck.store import Store
from lemmacheck.summary import failure_text, run_json

EXTENSION = '''
import torch
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES

@QUANTITIES.register("test-seq-uniform", "test only: a uniform draw", networks=("scalar",))
def uniform(ctx):
    return Observation(torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64))
'''

# u <= q fails with probability 1 - q; stated: with probability 1 - delta
CLAIM = '''
id = "seq/fact-1/uniform"
paper = "seq"
result = "Fact 1"
title = "a uniform draw is at most q"
statement = 'u \\\\le q'
kind = "probability-tool"
network = "scalar"
[params]
q = { values = [0.87, 1.0] }
delta = { values = [0.1, 1e-6] }
[check]
quantity = "test-seq-uniform"
relation = "<="
bound = "q"
probability = "1 - delta"
[profiles.quick]
replicates = 200
shard_size = 100
grid = { q = [0.87], delta = [0.1] }
[profiles.full]
replicates = 200
shard_size = 100
max_replicates = 20000
configs = [{ q = 0.87, delta = 0.1 }, { q = 1.0, delta = 1e-6 }]
'''


def _write(tmp_path, text=CLAIM, name="a"):
    # a quantity name per folder: the registry refuses one name from two extension folders
    d = tmp_path / "claims" / "seq"
    d.mkdir(parents=True, exist_ok=True)
    (d / "extension.py").write_text(EXTENSION.replace("test-seq-uniform", f"test-seq-uniform-{name}"))
    (d / "uniform.toml").write_text(text.replace("test-seq-uniform", f"test-seq-uniform-{name}"))
    return d


def _run(d, db, profile, workers=1):
    claims, errors = load_claims([d])
    assert not errors
    store = Store(db)
    run_id = run_claims(claims, store, profile=profile, workers=workers, paths=[str(d)])
    res = evaluate(store, run_id, claims)
    return res, run_json(store.run_info(run_id), res)


def test_a_rate_near_delta_is_decided_by_drawing_past_the_replicates_and_any_worker_count_agrees(tmp_path):
    """Rate 0.13 against delta 0.1 needs a few thousand draws: the quick profile (no budget past its 200
    replicates) reads inconclusive and states the draws that would decide it; the full profile draws on in
    doubling waves and reads violated, with the anytime-valid sequence, well before its 20,000."""
    d = _write(tmp_path)
    quick, qdoc = _run(d, tmp_path / "q.db", "quick")
    (cfg,) = quick[0].configs
    assert cfg.verdict == "inconclusive" and cfg.drawn == cfg.planned == 200
    assert cfg.draws_needed == draws_to_decide(cfg.violations, 200, 0.1) and 200 < cfg.draws_needed < 20000
    assert f"{cfg.draws_needed:,} draws" in failure_text(quick[0])
    assert qdoc["claims"][0]["configs"][0]["draws_needed"] == cfg.draws_needed
    full, fdoc = _run(d, tmp_path / "f.db", "full")
    near = next(c for c in full[0].configs if c.params["q"] == 0.87)
    assert near.verdict == "violated" and near.interval == "confidence-sequence"
    assert 200 < near.drawn < 20000 and near.planned == 20000
    # looks at 200 draws shard by shard, then at doubling draws: the stop is at a look
    assert near.drawn in {100 * n for n in ConfigPlan({}, 0, 200, 100, True, budget=20000).looks()}
    assert bernoulli_confidence_sequence(near.violations, near.drawn)[0] > 0.1
    _, again = _run(d, tmp_path / "f2.db", "full", workers=2)
    strip = [{k: v for k, v in c.items() if k != "seconds"} for c in fdoc["claims"][0]["configs"]]
    assert strip == [{k: v for k, v in c.items() if k != "seconds"} for c in again["claims"][0]["configs"]]


def test_no_violation_and_holds_out_of_the_budgets_reach_stops_at_the_replicates(tmp_path):
    """delta = 1e-6 with no violation: "holds" would take ~2e7 draws, beyond max_replicates, so the configuration
    stops after its replicates instead of spending the budget in vain, and says how many it would take."""
    d = _write(tmp_path, name="b")
    full, _ = _run(d, tmp_path / "f.db", "full")
    tiny = next(c for c in full[0].configs if c.params["q"] == 1.0)
    assert tiny.violations == 0 and tiny.drawn == 200 and tiny.verdict == "inconclusive"
    assert tiny.draws_needed == draws_to_decide(0, 200, 1e-6) > 20000


def test_max_replicates_defaults_and_validation(tmp_path):
    d = _write(tmp_path, name="c")
    claim = load_claim(d / "uniform.toml")
    assert claim.profiles["quick"].max_replicates == 200  # quick: its replicates, as before budgets
    assert all(p.cap == 200 for p in plan(claim, "quick", 0))
    assert all(p.cap == 20000 for p in plan(claim, "full", 0))
    from lemmacheck.claims import DRAW_BUDGET
    d2 = _write(tmp_path / "b", CLAIM.replace("max_replicates = 20000\n", ""), name="d")
    assert load_claim(d2 / "uniform.toml").profiles["full"].max_replicates == DRAW_BUDGET
    d3 = _write(tmp_path / "c", CLAIM.replace("max_replicates = 20000", "max_replicates = 100"), name="e")
    with pytest.raises(ClaimError, match=r"profiles\.full\.max_replicates"):
        load_claim(d3 / "uniform.toml")


def test_a_killed_wave_resumes_to_the_same_draws(tmp_path):
    """A run that lost the shards of a wave (killed mid-wave) draws exactly the missing ones on --resume: the
    result equals an uninterrupted run's."""
    d = _write(tmp_path, name="f")
    _, whole = _run(d, tmp_path / "a.db", "full")
    claims, _ = load_claims([d])
    store = Store(tmp_path / "b.db")
    run_id = run_claims(claims, store, profile="full", paths=[str(d)])
    near = next(c for c in store.configs(run_id, claims[0].id) if c["params"]["q"] == 0.87)
    n = max(r.shard_index for r in store.shards(run_id, claims[0].id, near["index"]))
    # drop the last wave's first and last shards, as a kill would leave it (shards commit one by one)
    store.db.execute("DELETE FROM shards WHERE run_id=? AND config_index=? AND shard_index IN (?, ?)",
                     (run_id, near["index"], n, n // 2 + 1))
    store.db.execute("UPDATE runs SET finished=NULL WHERE run_id=?", (run_id,))
    run_claims(claims, store, profile="full", paths=[str(d)], resume=True)
    again = run_json(store.run_info(run_id), evaluate(store, run_id, claims))
    strip = [{k: v for k, v in c.items() if k != "seconds"} for c in whole["claims"][0]["configs"]]
    assert strip == [{k: v for k, v in c.items() if k != "seconds"} for c in again["claims"][0]["configs"]]



def test_a_rate_at_delta_stops_once_its_interval_lies_within_the_resolution(tmp_path):
    """Rate exactly delta (q = 0.9, delta = 0.1): no budget decides it. The configuration stops, undecided, at the
    first look whose interval lies within delta (1 -+ RATE_RESOLUTION), well before its 20,000 draws, and says so;
    the rate 0.13 configuration (outside the band) is still drawn on until violated."""
    from lemmacheck.verdicts import RATE_RESOLUTION, at_the_bound

    text = CLAIM.replace("configs = [{ q = 0.87, delta = 0.1 }, { q = 1.0, delta = 1e-6 }]",
                         "configs = [{ q = 0.87, delta = 0.1 }, { q = 0.9, delta = 0.1 }]").replace(
        "q = { values = [0.87, 1.0] }", "q = { values = [0.87, 0.9] }")
    d = _write(tmp_path, text, name="g")
    full, doc = _run(d, tmp_path / "f.db", "full")
    at = next(c for c in full[0].configs if c.params["q"] == 0.9)
    assert at.verdict == "inconclusive" and at.at_bound and 200 < at.drawn < 20000
    lo, hi = at.violation_ci
    assert 0.1 * (1 - RATE_RESOLUTION) <= lo and hi <= 0.1 * (1 + RATE_RESOLUTION)
    # it stopped at the first look that lay within the band: the previous look's interval did not
    looks = [100 * n for n in ConfigPlan({}, 0, 200, 100, True, budget=20000).looks()]
    assert at.drawn in looks
    assert "sits at the bound" in failure_text(full[0])
    assert next(c for c in doc["claims"][0]["configs"] if c["params"]["q"] == 0.9)["at_bound"] is True
    assert next(c for c in full[0].configs if c.params["q"] == 0.87).verdict == "violated"
    assert not at_the_bound((0.05, 0.13), 0.1) and at_the_bound((0.08, 0.12), 0.1) and not at_the_bound((0, 0), 0)


def test_draws_until_decided_go_where_the_verdict_rests(tmp_path):
    """With a configuration inside the stated regime, one outside it decides nothing (at most a flag), so it draws
    only its planned replicates: the rate-0.13 configuration outside `requires` stops undecided at 200 draws,
    and the failure text says why. With none inside, the same configuration decides the flagged verdict and
    draws on to "violated" as before (fails if the out-of-regime budget is cut regardless)."""
    base = CLAIM.replace('probability = "1 - delta"', 'probability = "1 - delta"\nrequires = "q >= 0.9"')
    both = base.replace("configs = [{ q = 0.87, delta = 0.1 }, { q = 1.0, delta = 1e-6 }]",
                        "configs = [{ q = 0.87, delta = 0.1 }, { q = 0.95, delta = 0.1 }]").replace(
        "q = { values = [0.87, 1.0] }", "q = { values = [0.87, 0.95] }")
    d = _write(tmp_path, both, name="h")
    claim = load_claim(d / "uniform.toml")
    # the profile's two configurations, and the full profile's hunted one (pinned, outside the regime too)
    assert all(p.cap == (20000 if p.params["q"] >= 0.9 else 200) for p in plan(claim, "full", 0))
    full, doc = _run(d, tmp_path / "f.db", "full")
    out = next(c for c in full[0].configs if c.params["q"] == 0.87)
    inside = next(c for c in full[0].configs if c.params["q"] == 0.95)
    assert not out.in_regime and out.drawn == 200 and out.verdict == "inconclusive"
    assert inside.in_regime and inside.verdict == "holds" and inside.drawn > 200
    assert full[0].verdict == "holds"
    assert "outside the stated regime left undecided" in failure_text(full[0])
    assert all(c["planned"] == 200 for c in doc["claims"][0]["configs"] if not c["in_regime"])
    alone = base.replace("configs = [{ q = 0.87, delta = 0.1 }, { q = 1.0, delta = 1e-6 }]",
                         "configs = [{ q = 0.87, delta = 0.1 }]").replace(
        "q = { values = [0.87, 1.0] }", "q = { values = [0.87, 0.88] }")  # the hunt, too, stays outside
    d2 = _write(tmp_path / "b", alone, name="i")
    full2, _ = _run(d2, tmp_path / "g.db", "full")
    only = next(c for c in full2[0].configs if c.params == {"q": 0.87, "delta": 0.1} and not c.pinned)
    assert not only.in_regime and only.verdict == "violated" and only.drawn > 200
    assert full2[0].verdict == "violated" and "out-of-regime" in full2[0].flags


NAN_EXTENSION = EXTENSION.replace(
    "    return Observation(torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64))",
    "    u = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64)\n"
    "    bad = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64) < 1 / 200\n"
    "    return Observation(torch.where(bad, torch.nan, u))")


def test_a_nan_draw_stops_the_draws_past_the_replicates(tmp_path):
    """A NaN draw (an estimator's error, about one in 200 draws here) keeps a configuration undecided whatever
    follows (config_result: errors read inconclusive), so past its replicates it stops at the first look whose
    prefix holds one, instead of spending its 20,000-draw budget (fails without the stop: the rate-0.13
    configuration never decides and draws all 20,000)."""
    d = tmp_path / "claims" / "seq"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(NAN_EXTENSION.replace("test-seq-uniform", "test-seq-uniform-nan"))
    (d / "uniform.toml").write_text(CLAIM.replace("test-seq-uniform", "test-seq-uniform-nan"))
    full, _ = _run(d, tmp_path / "f.db", "full")
    near = next(c for c in full[0].configs if c.params["q"] == 0.87 and c.pinned is None)
    assert near.verdict == "inconclusive" and near.errors and near.sequential
    claims, _ = load_claims([d])
    shards = sorted(Store(tmp_path / "f.db").shards(1, claims[0].id, near.index), key=lambda r: r.shard_index)
    first_nan = next(s.shard_index for s in shards if not np.isfinite(s.value).all())
    looks = [100 * n for n in ConfigPlan({}, 0, 200, 100, True, budget=20000).looks()]
    assert near.drawn == min(n for n in looks if n >= max(200, 100 * (first_nan + 1))) < 20000
