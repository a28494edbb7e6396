"""Runner and store: bit-identical results across executors, resume after a hard kill, seeding."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import NORM_CLAIM
from lemmacheck.claims import load_claim, load_claims
from lemmacheck.cli import main
from lemmacheck.errors import ClaimError, LemmacheckError
from lemmacheck.runner import evaluate, plan, run_claims
from lemmacheck.shards import ShardTask, config_seed, execute_shard, shard_seed
from lemmacheck.stats import DEFAULT_ALPHA
from lemmacheck.store import Store
from lemmacheck.summary import run_json

SLOW_EXTENSION = '''
import os, time, torch
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES

CALLS = [0]

@QUANTITIES.register("test-slow-uniform", "uniform draws, slowly (for kill/resume tests)", networks=("scalar",))
def slow(ctx):
    CALLS[0] += 1
    # The kill test makes the run hang after N shards, so the kill always lands mid-run.
    if CALLS[0] > int(os.environ.get("LEMMACHECK_TEST_HANG_AFTER", "1000000000")):
        time.sleep(600)
    time.sleep(float(ctx.arg("sleep", 0.0)))
    return Observation(torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64))
'''

SLOW_CLAIM = '''
id = "slow/fact-1/uniform"
paper = "slow"
result = "Fact 1"
title = "a uniform draw is at most q"
statement = 'u \\le q'
kind = "probability-tool"
network = "scalar"
[params]
q = { values = [0.9, 0.99, 0.999] }
[check]
quantity = "test-slow-uniform"
relation = "<="
bound = "q"
probability = "1 - q"
args = { sleep = 0.02 }
[profiles.quick]
early_stop = false
replicates = 200
shard_size = 5
grid = { q = [0.9, 0.99, 0.999] }
'''


def _stable(doc: dict) -> dict:
    """The run JSON without what legitimately differs between runs: timestamps, ids, timings and the box's speed."""
    doc = json.loads(json.dumps(doc))
    for k in ("started", "finished", "run_id", "cost"):
        doc["run"].pop(k, None)
    doc["run"].get("versions", {}).pop("yardstick", None)  # the box's measured speed, like a timing
    for c in doc["claims"]:
        c.pop("source", None)
        for cfg in c["configs"]:
            cfg.pop("seconds")
    return doc


def _run(paths, db, workers=1, seed=0):
    claims, errors = load_claims(paths)
    assert not errors
    store = Store(db)
    run_id = run_claims(claims, store, seed=seed, workers=workers, paths=[str(p) for p in paths])
    return run_json(store.run_info(run_id), evaluate(store, run_id, claims))


def test_in_process_and_process_pool_give_identical_json(tmp_path, claims_dir):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    (claims_dir / "ext").mkdir()
    a = _run([claims_dir], tmp_path / "a.db", workers=1)
    b = _run([claims_dir], tmp_path / "b.db", workers=2)
    assert _stable(a) == _stable(b)
    assert a["claims"][0]["configs"][0]["replicates"] == 100


def test_dask_cluster_gives_the_same_json_as_in_process(tmp_path, claims_dir):
    """Shards shipped to a Dask cluster (two worker processes) come back bit-identical."""
    import distributed  # a dev dependency: CI installs it, so this test never skips

    from lemmacheck.cluster import DaskExecutor

    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    ref = _run([claims_dir], tmp_path / "ref.db")
    claims, _ = load_claims([claims_dir])
    store = Store(tmp_path / "dask.db")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        ex = DaskExecutor(client)
        assert ex._max_workers == 2
        run_id = run_claims(claims, store, executor=ex, paths=[str(claims_dir)])
        ex.shutdown()
        # the CLI connects by address, as a user would to a real cluster
        out = tmp_path / "cli.json"
        assert main(["run", str(claims_dir), "--db", str(tmp_path / "cli.db"), "--json", str(out),
                     "--scheduler", cluster.scheduler_address]) == 0
    got = run_json(store.run_info(run_id), evaluate(store, run_id, claims))
    assert _stable(got) == _stable(ref)
    cli = json.loads(out.read_text())
    assert _stable(cli)["claims"] == _stable(ref)["claims"]


def test_seed_changes_draws_and_repeats_exactly(tmp_path, claims_dir):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    a = _run([claims_dir], tmp_path / "a.db", seed=1)
    b = _run([claims_dir], tmp_path / "b.db", seed=1)
    c = _run([claims_dir], tmp_path / "c.db", seed=2)
    assert _stable(a) == _stable(b)
    assert a["claims"][0]["configs"][0]["slack_min"] != c["claims"][0]["configs"][0]["slack_min"]


def test_config_seeds_do_not_depend_on_other_configs(claims_dir):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    claim = load_claims([claims_dir])[0][0]
    # A configuration's seed is a function of (run seed, profile, claim id, params) alone: adding or removing
    # other configurations never changes it.
    for profile in ("quick", "full"):
        for p in plan(claim, profile, 3):
            if not p.definition:  # the full profile's hunted case carries its hunt's seed (and its dataset)
                assert p.seed == config_seed(3, claim.id, p.params, profile)
    assert len({p.seed for p in plan(claim, "full", 3) if not p.definition}) == 4


def _count_shards(db: Path) -> int:
    try:
        con = sqlite3.connect(db)
        try:
            return con.execute("SELECT count(*) FROM shards").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_resume_after_kill_gives_the_uninterrupted_result(tmp_path):
    d = tmp_path / "claims" / "slow"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(SLOW_EXTENSION)
    (d / "uniform.toml").write_text(SLOW_CLAIM)
    total = 3 * 200 // 5
    db = tmp_path / "killed.db"
    cmd = [sys.executable, "-m", "lemmacheck.cli", "run", str(d), "--db", str(db), "--seed", "7"]
    proc = subprocess.Popen(cmd + ["--json", str(tmp_path / "never.json")], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "LEMMACHECK_TEST_HANG_AFTER": "30"})
    deadline = time.time() + 120
    while _count_shards(db) < 30 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the 31st shard is now hanging inside the estimator
    os.killpg(proc.pid, signal.SIGKILL)  # a hard kill: no cleanup code runs
    proc.wait()
    done = _count_shards(db)
    assert done == 30, done
    assert not (tmp_path / "never.json").exists()

    out = tmp_path / "resumed.json"
    r = subprocess.run(cmd + ["--resume", "--json", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert _count_shards(db) == total  # nothing lost, nothing duplicated (PRIMARY KEY would refuse)
    ref = tmp_path / "ref.json"
    r2 = subprocess.run([*cmd[:3], "run", str(d), "--db", str(tmp_path / "ref.db"), "--seed", "7", "--json",
                         str(ref)], capture_output=True, text=True, timeout=300, check=False)
    assert r2.returncode == 0, r2.stderr
    assert _stable(json.loads(out.read_text())) == _stable(json.loads(ref.read_text()))


def test_resume_refuses_a_claim_file_changed_since_the_run_started(tmp_path, claims_dir):
    """Shards drawn under the old definition must not be pooled with new ones under one verdict."""
    path = claims_dir / "norm.toml"
    path.write_text(NORM_CLAIM)
    store = Store(tmp_path / "r.db")
    claim = load_claims([claims_dir])[0][0]
    run_id = store.begin_run(0, "quick", {}, "cpu", [str(claims_dir)])  # a run that never finished
    store.record_plan(run_id, claim.id, str(path), claim.snapshot, [])
    store.record_plan(run_id, claim.id, str(path), claim.snapshot, [])  # same file: idempotent
    path.write_text(NORM_CLAIM.replace('bound       = "B"', 'bound       = "1.01*B"'))
    changed = load_claims([claims_dir])[0][0]
    with pytest.raises(ClaimError, match=r"norm.toml: field 'check': changed since run 1 .*without --resume"):
        run_claims([changed], store, resume=True, paths=[str(claims_dir)])


def test_workers_run_the_recorded_definition_not_the_file_as_edited_later(claims_dir):
    path = claims_dir / "norm.toml"
    path.write_text(NORM_CLAIM)
    claim = load_claims([claims_dir])[0][0]
    p = plan(claim, "quick", 0)[0]
    task = ShardTask(str(path), claim.snapshot, claim.id, 0, 0, p.params, shard_seed(p.seed, 0), 4)
    before = execute_shard(task)
    path.write_text("this is not TOML any more")
    after = execute_shard(task)
    assert after.error is None and np.array_equal(before.value, after.value)


def test_update_reruns_changed_claims_only_and_tracks_added_and_deleted_files(tmp_path, claims_dir):
    a, b = claims_dir / "a.toml", claims_dir / "b.toml"
    a.write_text(NORM_CLAIM)
    b.write_text(NORM_CLAIM.replace('id        = "toy/lemma-1/norm"', 'id        = "toy/lemma-2/norm"'))
    store = Store(tmp_path / "u.db")
    paths = [str(claims_dir)]

    def shard_rows(cid):
        return store.db.execute("SELECT config_index, shard_index, value, seconds FROM shards WHERE claim_id=? "
                                "ORDER BY 1, 2", (cid,)).fetchall()

    run_id = run_claims(load_claims([claims_dir])[0], store, paths=paths)
    kept = shard_rows("toy/lemma-1/norm")
    b.write_text(b.read_text().replace('bound       = "B"', 'bound       = "1.01*B"'))
    c = claims_dir / "c.toml"
    c.write_text(NORM_CLAIM.replace('id        = "toy/lemma-1/norm"', 'id        = "toy/lemma-3/norm"'))
    assert run_claims(load_claims([claims_dir])[0], store, update=True, paths=paths) == run_id
    assert shard_rows("toy/lemma-1/norm") == kept  # untouched: not re-run (same timings)
    assert '"1.01*B"' in store.stored_definition(run_id, "toy/lemma-2/norm")
    assert len(shard_rows("toy/lemma-2/norm")) == len(shard_rows("toy/lemma-3/norm")) == len(kept)
    assert store.run_info(run_id)["finished"] is not None
    notes = [v for k, v in store.run_info(run_id)["versions"].items() if k.startswith("update ")]
    assert len(notes) == 1 and "redrew 1 claim(s) toy/lemma-2/norm; added 1" in notes[0]  # provenance kept
    # --rerun: a fixed estimator's claim is drawn again although its file did not change
    run_claims(load_claims([claims_dir])[0], store, update=True, rerun=["toy/lemma-1/norm"], paths=paths)
    redrawn = shard_rows("toy/lemma-1/norm")
    assert [r[:3] for r in redrawn] == [r[:3] for r in kept] and redrawn != kept  # same draws, new timings
    with pytest.raises(LemmacheckError, match="not being run"):
        run_claims(load_claims([claims_dir])[0], store, update=True, rerun=["toy/nope"], paths=paths)
    a.unlink()
    run_claims(load_claims([claims_dir])[0], store, update=True, paths=paths)
    assert store.claim_ids(run_id) == ["toy/lemma-2/norm", "toy/lemma-3/norm"] and not shard_rows("toy/lemma-1/norm")


EARLY = SLOW_CLAIM.replace("args = { sleep = 0.02 }", "args = { sleep = 0.0 }").replace("early_stop = false\n", "") \
                  .replace("replicates = 200\nshard_size = 5", "replicates = 4000\nshard_size = 100\nearly_stop = true") \
                  .replace('probability = "1 - q"', 'probability = "1 - delta"') \
                  .replace("q = { values = [0.9, 0.99, 0.999] }", "q = { values = [0.9, 0.5] }\ndelta = { values = [0.1, 0.3] }") \
                  .replace("grid = { q = [0.9, 0.99, 0.999] }", "grid = { q = [0.9, 0.5], delta = [0.1, 0.3] }")


def test_early_stopping_decides_with_an_anytime_valid_interval(tmp_path):
    """P(u > q) = 1 - q against delta: far from delta the sequence stops early, at delta it runs to the end;
    verdicts use the confidence sequence, and any worker count gives the same result."""
    d = tmp_path / "claims" / "slow"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(SLOW_EXTENSION)
    (d / "uniform.toml").write_text(EARLY)
    a = _run([d], tmp_path / "a.db")
    cfgs = {(c["params"]["q"], c["params"]["delta"]): c for c in a["claims"][0]["configs"]}
    assert all(c["sequential"] and c["planned"] == 4000 for c in cfgs.values())
    holds, violated, at_delta = cfgs[(0.9, 0.3)], cfgs[(0.5, 0.1)], cfgs[(0.9, 0.1)]
    assert holds["verdict"] == "holds" and holds["drawn"] < 4000       # rate 0.1 vs delta 0.3: stops early
    assert violated["verdict"] == "violated" and violated["drawn"] <= 200  # rate 0.5 vs 0.1: stops at once
    assert violated["violation_ci"][0] > 0.1
    assert holds["interval"] == violated["interval"] == "confidence-sequence"  # decided early: anytime-valid
    assert at_delta["drawn"] == 4000                                   # rate = delta: never decided
    # spent its budget: the fixed-size interval at the full size, as a run without early stop reads it
    assert at_delta["interval"] == "clopper-pearson"
    draws = a["claims"][0]["draws"]
    assert draws["planned"] == 4 * 4000 and draws["drawn"] == sum(c["drawn"] for c in cfgs.values()) < 4 * 4000
    assert draws["stopped_early"] >= 2 and draws["early_stop_configs"] == 4
    # each early-stopping configuration is charged for both looks (sequence, alpha; full-size interval, alpha/2)
    assert a["claims"][0]["false_violation_bound"] == pytest.approx(4 * 1.5 * DEFAULT_ALPHA)
    b = _run([d], tmp_path / "b.db", workers=2)
    assert _stable(a) == _stable(b)


def test_an_undecided_early_stopping_configuration_draws_its_next_shard_without_waiting_for_the_queue(tmp_path):
    """A sequential configuration's next shard is queued first as soon as its last is stored: with one worker and
    120 fixed-size shards of another claim queued, the undecided configuration (rate = delta) has drawn several
    shards before the fixed claim's last one (not one shard per pass over the whole queue). Its draws and verdict are those of a run with two workers (the decision reads only the stored prefix)."""
    d = tmp_path / "claims" / "slow"
    d.mkdir(parents=True)
    own = "test-slow-uniform-chain"  # its own name: the registry refuses one quantity from two extension folders
    (d / "extension.py").write_text(SLOW_EXTENSION.replace("test-slow-uniform", own))
    (d / "uniform.toml").write_text(EARLY.replace("test-slow-uniform", own))
    (d / "fixed.toml").write_text(SLOW_CLAIM.replace('"slow/fact-1/uniform"', '"slow/fact-2/fixed"')
                                  .replace("sleep = 0.02", "sleep = 0.0").replace("Fact 1", "Fact 2")
                                  .replace("test-slow-uniform", own))

    class Order:
        def __init__(self):
            self.done = []

        def planned(self, tasks):
            pass

        def hunt_done(self, task):
            pass

        def shard_done(self, task, rec):
            self.done.append((task.claim_id, task.config_index, task.shard_index))

    claims, errors = load_claims([d])
    assert not errors
    order, store = Order(), Store(tmp_path / "a.db")
    run_id = run_claims(claims, store, paths=[str(d)], progress=order)
    last_fixed = max(i for i, (cid, _, _) in enumerate(order.done) if cid == "slow/fact-2/fixed")
    chain = [i for i, (cid, j, k) in enumerate(order.done) if cid == "slow/fact-1/uniform" and k >= 1]
    assert len([i for i in chain if i < last_fixed]) >= 5
    a = run_json(store.run_info(run_id), evaluate(store, run_id, claims))
    assert _stable(a) == _stable(_run([d], tmp_path / "b.db", workers=2))


def test_early_stop_is_the_default_for_probabilistic_claims_and_a_claim_may_opt_out(tmp_path):
    d = tmp_path / "claims" / "slow"
    d.mkdir(parents=True)
    f = d / "uniform.toml"
    f.write_text(EARLY.replace("early_stop = true\n", ""))
    assert all(p.early_stop for p in plan(load_claim(f), "quick", 0))
    f.write_text(EARLY.replace("early_stop = true", "early_stop = false"))
    assert not any(p.early_stop for p in plan(load_claim(f), "quick", 0))
    # a deterministic claim never stops early: one counterexample decides it, so every draw is wanted
    f.write_text(EARLY.replace("early_stop = true\n", "").replace('probability = "1 - delta"', 'probability = "always"'))
    assert not any(p.early_stop for p in plan(load_claim(f), "quick", 0))


MODE_EXT = '''
import torch
from torch.overrides import _get_current_function_mode_stack
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES

@QUANTITIES.register("test-function-modes", "test only: how many torch function modes wrap the estimator",
                     networks=("scalar",))
def modes(ctx):
    return Observation(torch.full((ctx.replicates,), float(len(_get_current_function_mode_stack())),
                                  dtype=torch.float64))
'''


def test_a_cpu_shard_runs_without_a_torch_function_mode(tmp_path):
    """On the CPU the estimator runs outside torch.device's function mode, which would put a Python dispatch in
    front of every torch call (28% of a small-tensor GD hunt); off the CPU the mode routes factory calls."""
    d = tmp_path / "claims" / "modes"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(MODE_EXT)
    (d / "modes.toml").write_text(SLOW_CLAIM.replace("slow/", "modes/").replace('paper = "slow"', 'paper = "modes"')
                                  .replace("test-slow-uniform", "test-function-modes"))
    claim = load_claims([d])[0][0]
    p = plan(claim, "quick", 0)[0]
    task = ShardTask(str(d / "modes.toml"), claim.snapshot, claim.id, 0, 0, p.params, shard_seed(p.seed, 0), 3)
    rec = execute_shard(task, device="cpu")
    assert rec.error is None and list(rec.value) == [0.0, 0.0, 0.0]


PAGE_FAULTS = '''
import resource, sys, torch
from lemmacheck.shards import retain_freed_memory
if sys.argv[1] == "retain":
    retain_freed_memory()
torch.ones(8 << 20, dtype=torch.float64)  # 64 MiB, allocated and freed once
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.ones(8 << 20, dtype=torch.float64)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_shard_process_reuses_the_memory_it_freed():
    """shards.retain_freed_memory: a large tensor allocated again after one of its size was freed reuses that memory
    (page faults counted, not timed); by default glibc hands it back to the kernel and faults it in again."""
    faults = {how: int(subprocess.run([sys.executable, "-c", PAGE_FAULTS, how], capture_output=True, text=True,
                                      check=True).stdout) for how in ("default", "retain")}
    assert faults["default"] >= 10  # each of the ten allocations faulted its memory in again
    assert faults["retain"] * 4 < faults["default"], faults  # (measured: 16,384 pages against 163,840)


def test_explored_configurations_depend_on_the_seed_alone(tmp_path):
    """Hypothesis draws literals from every local module imported so far (a user's script, a paper's extension):
    the same seed explored other configurations once another module with constants in range was imported.
    shards.reproducible_hypothesis empties that pool; this fails without it (checked)."""
    import importlib.util

    from lemmacheck.shards import explore_configs

    p = tmp_path / "c.toml"
    p.write_text(NORM_CLAIM.replace("delta = { value = 0.1 }",
                                    "delta = { value = 0.1 }\nk = { min = 1, max = 1000000 }\nt = { min = 0.0, max = 1.0 }"))
    claim = load_claim(p)
    before = explore_configs(claim, 60, seed=11)
    mod = tmp_path / "lemmacheck_test_constants.py"
    mod.write_text("VALUES = [" + ", ".join(str(v) for v in range(271828, 271828 + 400, 7)) + "]\n"
                   "FRACTIONS = [" + ", ".join(f"0.{v}" for v in range(5772, 5772 + 400, 7)) + "]\n")
    spec = importlib.util.spec_from_file_location("lemmacheck_test_constants", mod)
    module = importlib.util.module_from_spec(spec)
    sys.modules["lemmacheck_test_constants"] = module
    try:
        spec.loader.exec_module(module)
        after = explore_configs(claim, 60, seed=11)
    finally:
        del sys.modules["lemmacheck_test_constants"]
    assert len(before) == 60 and after == before
