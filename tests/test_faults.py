"""Fault injection: workers killed mid-shard (process pool, Dask), a whole run SIGKILLed at several moments
and resumed, a configuration too large for the machine's memory. In every case the store ends with exactly the
shards of an uninterrupted run, each once, with identical values."""

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fault_claims import write_fault_claim

from lemmacheck.claims import load_claims
from lemmacheck.errors import LemmacheckError
from lemmacheck.runner import evaluate, run_claims
from lemmacheck.store import Store


def _values(db: Path, run_id: int | None = None) -> dict[tuple[int, int], list[float]]:
    """Every stored shard's values, keyed (config, shard); asserts no shard is stored twice."""
    con = sqlite3.connect(db)
    rid = run_id or con.execute("SELECT max(run_id) FROM runs").fetchone()[0]
    rows = con.execute("SELECT config_index, shard_index, value FROM shards WHERE run_id=?", (rid,)).fetchall()
    con.close()
    out = {(a, b): np.frombuffer(v, dtype="<f8").tolist() for a, b, v in rows}
    assert len(out) == len(rows)
    return out


def _reference(claims_dir: Path, db: Path) -> dict[tuple[int, int], list[float]]:
    claims, errors = load_claims([claims_dir])
    assert not errors
    store = Store(db)
    run_claims(claims, store, paths=[str(claims_dir)])
    store.close()
    return _values(db)


def test_worker_killed_mid_shard_in_the_process_pool_is_rerun(tmp_path):
    marker = tmp_path / "killed"
    claims_dir = write_fault_claim(tmp_path, "test-fault-pool", configs=3, kill_at=1, marker=str(marker))
    claims, _ = load_claims([claims_dir])
    store = Store(tmp_path / "pool.db")
    rid = run_claims(claims, store, workers=2, paths=["x"])
    assert marker.exists(), "the worker was not killed: the test proves nothing"
    assert store.run_info(rid)["finished"]
    got = _values(tmp_path / "pool.db")
    # the same claim without the kill, in this process: the same shards, each once, the same draws
    write_fault_claim(tmp_path, "test-fault-pool", configs=3)
    assert got == _reference(claims_dir, tmp_path / "ref.db")
    assert len(got) == 3 * 4


def test_worker_killed_mid_shard_on_dask_is_rerun(tmp_path):
    distributed = pytest.importorskip("distributed")
    from lemmacheck.cluster import DaskExecutor

    marker = tmp_path / "killed"
    claims_dir = write_fault_claim(tmp_path, "test-fault-dask", configs=2, kill_at=0, marker=str(marker))
    claims, _ = load_claims([claims_dir])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        ex = DaskExecutor(client)
        store = Store(tmp_path / "dask.db")
        run_claims(claims, store, executor=ex, paths=["x"])
    assert marker.exists(), "the worker was not killed: the test proves nothing"
    write_fault_claim(tmp_path, "test-fault-dask", configs=2)
    assert _values(tmp_path / "dask.db") == _reference(claims_dir, tmp_path / "ref.db")


def test_a_shard_that_keeps_killing_its_worker_is_refused_with_a_message(tmp_path, monkeypatch):
    """A borrowed executor cannot be restarted; the shard's repeated deaths end the run with a clear error and the
    completed shards kept (an InProcessExecutor stands in for a pool whose worker dies every time)."""
    import concurrent.futures as cf

    from lemmacheck import runner

    claims_dir = write_fault_claim(tmp_path, "test-fault-always", configs=2)
    claims, _ = load_claims([claims_dir])
    real = runner.execute_shard

    def dying(task, device="cpu"):
        if task.config_index == 1:
            raise cf.process.BrokenProcessPool("worker died")
        return real(task, device)

    monkeypatch.setattr(runner, "execute_shard", dying)
    store = Store(tmp_path / "s.db")
    with pytest.raises(LemmacheckError, match=r"died 3 times running fault/fact-1/draws config \{'k': 1, .* shard 0"):
        run_claims(claims, store, executor=runner.InProcessExecutor(), paths=["x"])
    assert set(_values(tmp_path / "s.db")) == {(0, k) for k in range(4)}  # config 0's shards are all kept


def _cli(*args: str, cwd: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "LEMMACHECK_PROGRESS_INTERVAL": "3600"}
    return subprocess.Popen([sys.executable, "-m", "lemmacheck.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _stored(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM shards").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0  # not created yet (or its schema not yet written)


def test_run_sigkilled_at_several_moments_then_resumed_equals_an_uninterrupted_run(tmp_path):
    claims_dir = write_fault_claim(tmp_path, "test-fault-resume", configs=4, replicates=8, shard_size=2,
                                   sleep=0.05)
    db = tmp_path / "killed.db"
    rng = random.Random(16)
    total = 4 * 4
    # three SIGKILLs of one run: right after start (maybe during start-up), then after a random number of
    # stored shards each time; every restart is `--resume`
    targets = [None, *sorted(rng.sample(range(1, total - 1), 2))]
    kills = 0
    for target in targets:
        proc = _cli("run", str(claims_dir), "--db", str(db), "--resume", cwd=tmp_path)
        deadline = time.monotonic() + 120
        if target is None:
            time.sleep(rng.uniform(0.1, 1.0))
        else:
            while _stored(db) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
    assert kills >= 2 and _stored(db) < total, "the run finished before it could be killed"
    proc = _cli("run", str(claims_dir), "--db", str(db), "--resume", "--json", "-", cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    resumed = json.loads(out)
    ref = _reference(claims_dir, tmp_path / "ref.db")
    assert _values(db) == ref and len(ref) == total
    # and the verdict read from the store is the uninterrupted run's, configuration by configuration
    claims, _ = load_claims([claims_dir])
    ref_res = evaluate(Store(tmp_path / "ref.db", readonly=True), 1, claims)[0]
    assert [c["violations"] for c in resumed["claims"][0]["configs"]] == [c.violations for c in ref_res.configs]
    assert [c["slack_min"] for c in resumed["claims"][0]["configs"]] == [c.slack_min for c in ref_res.configs]


def test_a_configuration_needing_more_memory_than_available_is_refused_up_front(tmp_path):
    claims_dir = write_fault_claim(tmp_path, "test-fault-memory", configs=2)
    env = {**os.environ, "LEMMACHECK_MEMORY_LIMIT": "10"}  # 10 bytes: every configuration is too large
    db = tmp_path / "m.db"
    proc = subprocess.run([sys.executable, "-m", "lemmacheck.cli", "run", str(claims_dir), "--db", str(db)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and "needs about" in line[0] and "GiB per shard" in line[0] and "nothing was run" in line[0]
    assert _stored(db) == 0


def test_memory_estimate_uses_a_declared_estimate(tmp_path, monkeypatch):
    from lemmacheck import runner
    from lemmacheck.registry import QUANTITIES

    claims_dir = write_fault_claim(tmp_path, "test-fault-memdecl", configs=1)
    claim = load_claims([claims_dir])[0][0]
    entry = QUANTITIES.get("test-fault-memdecl")
    floor = runner.memory_estimate(claim, {"k": 0}, 10)
    assert floor == 2 * 10 * 1 * (1 + 1) * 8  # R x n x (max(m, d) + d) float64, twice: n = m = d = 1 here
    monkeypatch.setitem(entry.extra, "memory", lambda values, reps, itemsize: reps * 2**40)
    assert runner.memory_estimate(claim, {"k": 0}, 10) == 10 * 2**40
    monkeypatch.setenv("LEMMACHECK_MEMORY_LIMIT", str(2**40))
    with pytest.raises(LemmacheckError, match=r"needs about 2\.05e\+03 GiB per shard \(2 replicates\) but 1\.02e\+03 GiB"):
        run_claims([claim], Store(":memory:"), paths=["x"])


def _cli_done(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lemmacheck.cli", *args], check=False, capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_a_planted_estimator_bug_is_recorded_the_run_finishes_exits_70_and_resume_redraws_it(tmp_path):
    """An IndexError (not an error the estimator raises on purpose) in one configuration: its shards record the
    traceback, the claim reads inconclusive with `errors`, every other shard and claim completes, the run exits 70
    naming the bug; after the fix, `--resume` redraws exactly those shards, with the values a clean run draws."""
    fixed = tmp_path / "fixed"
    claims_dir = write_fault_claim(tmp_path / "bug", "planted-bug-draws", configs=3, bug_at=1, bug_fixed=str(fixed))
    clean_dir = write_fault_claim(tmp_path / "clean", "planted-bug-draws", configs=3)
    sibling = (claims_dir / "fault" / "draws.toml").read_text().replace('"fault/fact-1/draws"', '"fault/fact-2/draws"')
    (claims_dir / "fault" / "sibling.toml").write_text(sibling.replace("bug_at = 1", "bug_at = -1"))
    db, out = tmp_path / "r.db", tmp_path / "r.json"

    first = _cli_done("run", str(claims_dir), "--db", str(db), "--json", str(out), "-q", cwd=tmp_path)
    assert first.returncode == 70, first.stderr
    assert "estimator bugs: 1 configuration(s)" in first.stderr
    assert 'fault/fact-1/draws at {"B": 2.5, "delta": 0.5, "k": 1}: IndexError' in first.stderr
    assert "Traceback" in first.stderr and "planted estimator bug" in first.stderr
    assert "--resume" in first.stderr
    doc = {c["id"]: c for c in json.loads(out.read_text())["claims"]}
    buggy, sibling_ = doc["fault/fact-1/draws"], doc["fault/fact-2/draws"]
    assert buggy["verdict"] == "inconclusive" and "errors" in buggy["flags"]
    assert sibling_["verdict"] == sibling_["expect"] and "errors" not in sibling_["flags"]
    con = sqlite3.connect(db)
    errs = con.execute("SELECT claim_id, config_index, error FROM shards").fetchall()
    con.close()
    assert len(errs) == 2 * 3 * 4  # both claims' 3 configurations x 4 shards stored, the buggy ones included
    assert {(c, j) for c, j, e in errs if e} == {("fault/fact-1/draws", 1)}  # config k = 1 of the buggy claim

    still = _cli_done("run", str(claims_dir), "--db", str(db), "--resume", "-q", cwd=tmp_path)
    assert still.returncode == 70  # not fixed yet: the same shards fail again, nothing else is redrawn

    fixed.write_text("")
    second = _cli_done("run", str(claims_dir), "--db", str(db), "--json", str(out), "--resume", "-q", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    doc = {c["id"]: c for c in json.loads(out.read_text())["claims"]}
    assert "errors" not in doc["fault/fact-1/draws"]["flags"]
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1  # the same run, completed in place
    rows = con.execute("SELECT config_index, shard_index, value FROM shards WHERE claim_id=?",
                       ("fault/fact-1/draws",)).fetchall()
    con.close()
    resumed = {(a, b): np.frombuffer(v, dtype="<f8").tolist() for a, b, v in rows}
    assert len(resumed) == 12
    reference = _reference(clean_dir, tmp_path / "clean.db")
    assert resumed == reference  # the redrawn shards are exactly those of a run without the bug


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, then the parent's pid); None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _children(pid: int) -> set[int]:
    """Every live descendant process of `pid` (from /proc)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z":
            parent[int(entry.name)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parent.items() if pp == p}
        out |= kids
        todo += list(kids)
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
def test_a_terminated_run_stops_its_workers_and_resumes(tmp_path):
    # `kill` (SIGTERM) of a multi-worker run: it stops as Ctrl-C does (exit 130, completed shards kept) and ends
    # its worker processes, which would otherwise run on, orphaned, in the middle of a shard.
    claims_dir = write_fault_claim(tmp_path, "test-fault-term", configs=4, replicates=8, shard_size=2, sleep=0.5)
    db = tmp_path / "term.db"
    proc = _cli("run", str(claims_dir), "--db", str(db), "--workers", "2", cwd=tmp_path)
    deadline = time.monotonic() + 300  # spawned workers import torch: slow on a loaded machine
    while (len(_children(proc.pid)) < 2 or _stored(db) < 1) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = _children(proc.pid)
    assert proc.poll() is None and workers, "no worker processes seen"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in err
    deadline = time.monotonic() + 10
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _running(w)], "worker processes left running"
    done = _cli_done("run", str(claims_dir), "--db", str(db), "--resume", "--workers", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _stored(db) == 16
