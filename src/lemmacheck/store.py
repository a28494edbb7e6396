"""Results store: SQLite, append-only, one transaction per shard.

A shard's row is written whole or not at all, so a run killed at any point resumes (`--resume`) by running
exactly the shards that have no row, and ends with the results of an uninterrupted run. Per-replicate values
are kept (as float64 blobs) so every statistic, plot and verdict can be recomputed from the store.
"""

from __future__ import annotations

import calendar
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ClaimError, StoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    seed        INTEGER NOT NULL,
    profile     TEXT NOT NULL,
    started     TEXT NOT NULL,
    finished    TEXT,
    versions    TEXT NOT NULL,   -- JSON
    device      TEXT NOT NULL,
    paths       TEXT NOT NULL    -- JSON list of claim paths given to `run`
);
CREATE TABLE IF NOT EXISTS claims (
    run_id      INTEGER NOT NULL REFERENCES runs(run_id),
    claim_id    TEXT NOT NULL,
    source      TEXT NOT NULL,
    definition  TEXT NOT NULL,   -- JSON snapshot of the claim file as run
    PRIMARY KEY (run_id, claim_id)
);
CREATE TABLE IF NOT EXISTS configs (
    run_id      INTEGER NOT NULL,
    claim_id    TEXT NOT NULL,
    config_index INTEGER NOT NULL,
    params      TEXT NOT NULL,   -- JSON
    seed        INTEGER NOT NULL,
    replicates  INTEGER NOT NULL,
    shard_size  INTEGER NOT NULL,
    early_stop  INTEGER NOT NULL DEFAULT 0,  -- 1: shards ran in waves until the confidence sequence decided;
                                             -- above 1: so, up to that many draws (the profile's max_replicates)
    pinned      TEXT,            -- JSON {points, labels, search} of a hunted or corpus configuration, else NULL
    PRIMARY KEY (run_id, claim_id, config_index)
);
CREATE TABLE IF NOT EXISTS shards (
    run_id      INTEGER NOT NULL,
    claim_id    TEXT NOT NULL,
    config_index INTEGER NOT NULL,
    shard_index INTEGER NOT NULL,
    replicates  INTEGER NOT NULL,
    value       BLOB NOT NULL,   -- float64 little-endian, one per replicate
    valid       BLOB NOT NULL,   -- uint8
    extras      TEXT NOT NULL,   -- JSON {name: [floats]}
    method      TEXT NOT NULL,
    dtype       TEXT NOT NULL,
    seconds     REAL NOT NULL,
    error       TEXT,            -- estimator error message, if the shard failed
    device      TEXT,            -- where it ran (cpu, cuda:0; its draws depend on it); NULL: written before this
    PRIMARY KEY (run_id, claim_id, config_index, shard_index)
);
CREATE TABLE IF NOT EXISTS probes (
    run_id      INTEGER NOT NULL,
    claim_id    TEXT NOT NULL,
    cells       TEXT NOT NULL,   -- JSON list: where a hunt's probes landed (corpus.probe_cells), for coverage
    seconds     REAL NOT NULL,   -- the hunt's CPU seconds
    error       TEXT,            -- the hunt's unexpected exception with its traceback, if it raised
    counterexample TEXT,         -- JSON (hunt.Probe.to_json) of the hunt's counterexample, replayed on its siblings
    PRIMARY KEY (run_id, claim_id)
);
"""


@dataclass
class ShardRecord:
    claim_id: str
    config_index: int
    shard_index: int
    value: np.ndarray
    valid: np.ndarray
    extras: dict[str, list[float]]
    method: str
    dtype: str
    seconds: float
    error: str | None = None
    device: str = "cpu"  # where it ran; "" when a store written before shards recorded it does not say


TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # a run's started / finished, UTC


def now() -> str:
    return time.strftime(TIME_FORMAT, time.gmtime())


def duration_seconds(started: str | None, finished: str | None) -> float | None:
    """Seconds from one TIME_FORMAT stamp to another; None when either is missing or malformed."""
    if not started or not finished:
        return None
    try:
        return float(calendar.timegm(time.strptime(finished, TIME_FORMAT))
                     - calendar.timegm(time.strptime(started, TIME_FORMAT)))
    except ValueError:
        return None


APPLICATION_ID = 0x4C4D4348  # "LMCH" in the SQLite header: marks a file as a lemmacheck results store
_TABLES = {"runs", "claims", "configs", "shards"}
BUSY_TIMEOUT_S = 60  # a reader (report, show) or a short write waits this long for another writer's commit


class Store:
    def __init__(self, path: str | Path, readonly: bool = False):
        """`readonly` opens an existing store without creating or changing anything (reports, show).

        A file that is not a lemmacheck store (another program's database, a truncated or damaged copy, a file
        that is not SQLite at all) is refused here with one clear StoreError, before anything is read or written."""
        self.path = str(path)
        self._lock_fd: int | None = None
        try:
            if readonly:
                self.db = sqlite3.connect(f"file:{Path(self.path).resolve()}?mode=ro", uri=True,
                                          isolation_level=None, timeout=BUSY_TIMEOUT_S)
                self._check(readonly=True)
                return
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
            self._check(readonly=False)
            self.db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            if "pinned" not in self._config_columns():  # a store written before configurations recorded it
                self.db.execute("ALTER TABLE configs ADD COLUMN pinned TEXT")
            if "device" not in self._shard_columns():  # a store written before shards recorded their device
                self.db.execute("ALTER TABLE shards ADD COLUMN device TEXT")
            probe_columns = {r[1] for r in self.db.execute("PRAGMA table_info(probes)")}
            for column in ("error", "counterexample"):  # stores written before probes kept them
                if column not in probe_columns:
                    self.db.execute(f"ALTER TABLE probes ADD COLUMN {column} TEXT")
            if self.db.execute("PRAGMA application_id").fetchone()[0] == 0:
                self.db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a readable lemmacheck results store ({exc}); it may be truncated "
                             "or damaged, or another kind of file: restore it from a copy or pass another --db") \
                from None

    def _check(self, readonly: bool) -> None:
        """Refuse a foreign or damaged database: our application id (or, for stores written before it existed,
        our tables), and SQLite's quick structural check (milliseconds for a store of megabytes)."""
        if self.path == ":memory:":
            return
        app = self.db.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ours = app == APPLICATION_ID or (app == 0 and _TABLES <= tables)
        if not ours and (tables or app != 0 or readonly):
            what = f"tables {sorted(tables)}" if tables else "no tables"
            raise StoreError(f"{self.path}: not a lemmacheck results store (application id {app:#x}, {what}); "
                             "refusing to read or add to it: pass another --db")
        problems = [r[0] for r in self.db.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise StoreError(f"{self.path}: the results store is damaged ({'; '.join(problems)}): restore it from "
                             "a copy, or start a new one with another --db")

    def _has_probes(self) -> bool:
        """A read-only store written before hunts recorded their probes has no such table."""
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='probes'").fetchone() is not None

    def _config_columns(self) -> set[str]:
        return {r[1] for r in self.db.execute("PRAGMA table_info(configs)")}

    def _shard_columns(self) -> set[str]:
        return {r[1] for r in self.db.execute("PRAGMA table_info(shards)")}

    @contextmanager
    def run_lock(self) -> Iterator[None]:
        """Hold the store for one writing run. A second run on the same store stops at once with an error naming
        the holder, instead of drawing the same shards twice (resume) or interleaving its writes; the OS drops
        the lock when the holder exits, even when it is killed."""
        if self.path == ":memory:":
            yield
            return
        lock = f"{self.path}.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreError(f"{self.path}: another run is writing this store ({holder}); wait for it to finish, "
                             "or give this run its own --db") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} since {now()}".encode(), 0)
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def close(self) -> None:
        self.db.close()

    def _tx(self, statements: list[tuple[str, tuple]]) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements:
                self.db.execute(sql, args)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    # runs -------------------------------------------------------------------------------------------
    def begin_run(self, seed: int, profile: str, versions: dict, device: str, paths: list[str]) -> int:
        cur = self.db.execute(
            "INSERT INTO runs(seed, profile, started, versions, device, paths) VALUES (?,?,?,?,?,?)",
            (seed, profile, now(), json.dumps(versions, sort_keys=True), device, json.dumps(paths)))
        return int(cur.lastrowid)

    def find_resumable(self, seed: int, profile: str, paths: list[str]) -> int | None:
        row = self.db.execute(
            "SELECT run_id FROM runs WHERE seed=? AND profile=? AND paths=? AND finished IS NULL "
            "ORDER BY run_id DESC LIMIT 1", (seed, profile, json.dumps(paths))).fetchone()
        return None if row is None else int(row[0])

    def find_latest(self, seed: int, profile: str, paths: list[str]) -> int | None:
        """The newest run with this seed, profile and paths, finished or not (for `run --update`)."""
        row = self.db.execute("SELECT run_id FROM runs WHERE seed=? AND profile=? AND paths=? "
                              "ORDER BY run_id DESC LIMIT 1", (seed, profile, json.dumps(paths))).fetchone()
        return None if row is None else int(row[0])

    def find_with_errors(self, seed: int, profile: str, paths: list[str]) -> int | None:
        """The newest finished run with this seed, profile and paths if it has shards that recorded an error (what
        `run --resume` redoes after a fix), else None."""
        latest = self.find_latest(seed, profile, paths)
        if latest is None or not (self.error_shards(latest) or self.hunt_errors(latest)):
            return None
        return latest

    def error_shards(self, run_id: int) -> int:
        return int(self.db.execute("SELECT count(*) FROM shards WHERE run_id=? AND error IS NOT NULL",
                                   (run_id,)).fetchone()[0])

    def hunt_errors(self, run_id: int) -> list[str]:
        """Claims whose hunt raised in this run (what `run --resume` plans and hunts again after a fix)."""
        if not self._has_probes():
            return []
        return [r[0] for r in self.db.execute("SELECT claim_id FROM probes WHERE run_id=? AND error IS NOT NULL "
                                              "ORDER BY claim_id", (run_id,))]

    def forget_error_shards(self, run_id: int) -> int:
        """Drop a run's shards that recorded an error (all at once), so that they are drawn again; their count."""
        n = self.error_shards(run_id)
        stmts = [("DELETE FROM shards WHERE run_id=? AND error IS NOT NULL", (run_id,))] if n else []
        for claim_id in self.hunt_errors(run_id):  # planned without its hunt: planned (and hunted) afresh
            stmts += self._forget_statements(run_id, claim_id)
        if stmts:
            self._tx([*stmts, ("UPDATE runs SET finished=NULL WHERE run_id=?", (run_id,))])
        return n

    def reopen_run(self, run_id: int, note: tuple[str, str] | None = None) -> None:
        """Mark a run unfinished again (`run --update`); `note` (key, text) is added to its recorded versions,
        so the run says which code redrew which claims."""
        stmts: list[tuple[str, tuple]] = [("UPDATE runs SET finished=NULL WHERE run_id=?", (run_id,))]
        if note is not None:
            stmts.append(self._note_statement(run_id, *note))
        self._tx(stmts)

    def note_run(self, run_id: int, key: str, text: str) -> None:
        """Add a fact (key: text) to the run's recorded versions, e.g. what its hunts cost."""
        self._tx([self._note_statement(run_id, key, text)])

    def _note_statement(self, run_id: int, key: str, text: str) -> tuple[str, tuple]:
        versions = json.loads(self.db.execute("SELECT versions FROM runs WHERE run_id=?", (run_id,)).fetchone()[0])
        versions[key] = text
        return "UPDATE runs SET versions=? WHERE run_id=?", (json.dumps(versions, sort_keys=True), run_id)

    def stored_definition(self, run_id: int, claim_id: str) -> str | None:
        row = self.db.execute("SELECT definition FROM claims WHERE run_id=? AND claim_id=?",
                              (run_id, claim_id)).fetchone()
        return None if row is None else str(row[0])

    def forget_claim(self, run_id: int, claim_id: str) -> None:
        """Drop a claim's definition, plan and shards from a run, all or nothing."""
        self._tx(self._forget_statements(run_id, claim_id))

    def _forget_statements(self, run_id: int, claim_id: str) -> list[tuple[str, tuple]]:
        return [(f"DELETE FROM {t} WHERE run_id=? AND claim_id=?", (run_id, claim_id))
                for t in ("shards", "configs", "probes", "claims")]

    def finish_run(self, run_id: int) -> None:
        self._tx([("UPDATE runs SET finished=? WHERE run_id=?", (now(), run_id))])

    def run_info(self, run_id: int) -> dict[str, Any]:
        row = self.db.execute("SELECT run_id, seed, profile, started, finished, versions, device FROM runs "
                              "WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"{self.path}: no run {run_id}")
        return {"run_id": row[0], "seed": row[1], "profile": row[2], "started": row[3], "finished": row[4],
                "versions": json.loads(row[5]), "device": row[6]}

    def cost(self, run_id: int) -> dict[str, Any]:
        """Where a run's time went: estimator seconds of its shards (wall seconds inside each shard, summed over
        workers) split into the configurations' planned draws, the draws past them (early-stopping configurations
        drawing on until decided) and hunted or replayed configurations; its hunts' CPU seconds; the run's wall
        seconds once finished. With the yardstick in its versions, what a profile costs compares across boxes."""
        rows = self.db.execute(
            "SELECT s.seconds, s.shard_index * c.shard_size >= c.replicates, c.pinned IS NOT NULL FROM shards s "
            "JOIN configs c ON c.run_id = s.run_id AND c.claim_id = s.claim_id AND c.config_index = s.config_index "
            "WHERE s.run_id=?", (run_id,)).fetchall()
        parts = {"planned draws": 0.0, "draws past the planned (until decided)": 0.0,
                 "hunted and replayed configurations": 0.0}
        for seconds, past, pinned in rows:
            key = ("hunted and replayed configurations" if pinned else
                   "draws past the planned (until decided)" if past else "planned draws")
            parts[key] += seconds
        hunts = self.db.execute("SELECT count(*), coalesce(sum(seconds), 0) FROM probes WHERE run_id=?",
                                (run_id,)).fetchone() if self._has_probes() else (0, 0.0)
        info = self.db.execute("SELECT started, finished FROM runs WHERE run_id=?", (run_id,)).fetchone()
        wall = duration_seconds(*info) if info else None
        return {"wall_s": wall, "shards": len(rows), "estimator_s": round(sum(parts.values()), 1),
                "estimator_s_by_part": {k: round(v, 1) for k, v in parts.items()},
                "hunts": int(hunts[0]), "hunt_cpu_s": round(float(hunts[1]), 1)}

    def latest_run(self) -> int | None:
        row = self.db.execute("SELECT max(run_id) FROM runs").fetchone()
        return None if row[0] is None else int(row[0])

    # plan -------------------------------------------------------------------------------------------
    def record_plan(self, run_id: int, claim_id: str, source: str, definition: str,
                    configs: list[tuple[dict, int, int, int, bool]]) -> None:
        """Claim snapshot and its configurations (params, seed, replicates, shard_size, early_stop[, pinned]),
        idempotently; `pinned` ({points, labels, search}, or None) is what a hunted or corpus configuration fixed.

        Resuming a run whose claim file has changed since would mix shards of two different claims under one
        verdict, so a changed definition is refused, naming the fields that differ."""
        text = definition
        stored = self.stored_definition(run_id, claim_id)
        if stored is not None and stored != text:
            old = json.loads(stored)
            new = json.loads(text)
            changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            raise ClaimError(source, ", ".join(changed),
                             f"changed since run {run_id} in {self.path} started; its stored shards belong to the "
                             "old definition",
                             "restore the file as it was, rerun with --update to redo just the changed claims, "
                             "or start a new run (without --resume)")
        stmts = [("INSERT OR IGNORE INTO claims VALUES (?,?,?,?)", (run_id, claim_id, source, text))]
        for j, (params, seed, reps, shard, early, *rest) in enumerate(configs):
            pinned = json.dumps(rest[0], sort_keys=True) if rest and rest[0] else None
            sql = ("INSERT OR IGNORE INTO configs (run_id, claim_id, config_index, params, seed, replicates, "
                   "shard_size, early_stop, pinned) VALUES (?,?,?,?,?,?,?,?,?)")
            stmts.append((sql,
                          (run_id, claim_id, j, json.dumps(params, sort_keys=True), seed, reps, shard, int(early),
                           pinned)))
        self._tx(stmts)

    def record_probes(self, run_id: int, claim_id: str, cells: list[dict[str, Any]], seconds: float,
                      error: str | None = None, counterexample: dict[str, Any] | None = None) -> None:
        """Where a claim's hunt probed (written once, with the plan the hunt gave), the exception it raised, and
        its counterexample (what the run replays on the claims that share its setting)."""
        sql = "INSERT OR IGNORE INTO probes (run_id, claim_id, cells, seconds, error, counterexample) VALUES (?,?,?,?,?,?)"
        ce = json.dumps(counterexample) if counterexample is not None else None
        self._tx([(sql, (run_id, claim_id, json.dumps(cells), seconds, error, ce))])

    def counterexamples(self, run_id: int) -> dict[str, dict[str, Any]]:
        """claim id -> the counterexample its hunt found in this run (none recorded in stores from before probes
        kept them)."""
        if not self._has_probes():
            return {}
        rows = self.db.execute("SELECT claim_id, counterexample FROM probes WHERE run_id=? AND counterexample "
                               "IS NOT NULL", (run_id,))
        return {cid: json.loads(ce) for cid, ce in rows}

    def hunt_error(self, run_id: int, claim_id: str) -> str | None:
        """The exception the claim's hunt raised in this run (its traceback), else None."""
        if not self._has_probes():
            return None
        row = self.db.execute("SELECT error FROM probes WHERE run_id=? AND claim_id=?", (run_id, claim_id)).fetchone()
        return row[0] if row else None

    def probes(self, run_id: int, claim_id: str) -> list[dict[str, Any]]:
        """The hunt's probe cells for the claim ([] when it did not hunt, or a store from before probes were kept)."""
        if not self._has_probes():
            return []
        row = self.db.execute("SELECT cells FROM probes WHERE run_id=? AND claim_id=?", (run_id, claim_id)).fetchone()
        return json.loads(row[0]) if row else []

    def config_device(self, run_id: int, claim_id: str, config_index: int) -> str | None:
        """Where the configuration's stored shards ran (one device per configuration); None when none is stored or
        the store predates shards recording it."""
        row = self.db.execute("SELECT device FROM shards WHERE run_id=? AND claim_id=? AND config_index=? LIMIT 1",
                              (run_id, claim_id, config_index)).fetchone()
        return row[0] if row and row[0] else None

    def done_shards(self, run_id: int, claim_id: str) -> set[tuple[int, int]]:
        rows = self.db.execute("SELECT config_index, shard_index FROM shards WHERE run_id=? AND claim_id=?",
                               (run_id, claim_id))
        return {(int(a), int(b)) for a, b in rows}

    def write_shard(self, run_id: int, rec: ShardRecord) -> None:
        sql = ("INSERT INTO shards (run_id, claim_id, config_index, shard_index, replicates, value, valid, extras, "
               "method, dtype, seconds, error, device) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
        self._tx([(sql, (run_id, rec.claim_id, rec.config_index, rec.shard_index, len(rec.value),
                         np.asarray(rec.value, dtype="<f8").tobytes(), np.asarray(rec.valid, dtype=np.uint8).tobytes(),
                         json.dumps(rec.extras), rec.method, rec.dtype, rec.seconds, rec.error, rec.device))])

    # read back --------------------------------------------------------------------------------------
    def claim_ids(self, run_id: int) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT claim_id FROM claims WHERE run_id=? ORDER BY claim_id",
                                              (run_id,))]

    def claim_definition(self, run_id: int, claim_id: str) -> tuple[str, dict]:
        row = self.db.execute("SELECT source, definition FROM claims WHERE run_id=? AND claim_id=?",
                              (run_id, claim_id)).fetchone()
        return row[0], json.loads(row[1])

    def configs(self, run_id: int, claim_id: str) -> list[dict[str, Any]]:
        pinned = "pinned" if "pinned" in self._config_columns() else "NULL"  # a read-only store from before it
        rows = self.db.execute(f"SELECT config_index, params, seed, replicates, shard_size, early_stop, {pinned} "
                               "FROM configs WHERE run_id=? AND claim_id=? ORDER BY config_index", (run_id, claim_id))
        return [{"index": r[0], "params": json.loads(r[1]), "seed": r[2], "replicates": r[3], "shard_size": r[4],
                 "early_stop": bool(r[5]), "budget": r[5] if r[5] > 1 else r[3],
                 "pinned": json.loads(r[6]) if r[6] else None} for r in rows]

    def shards(self, run_id: int, claim_id: str, config_index: int) -> Iterator[ShardRecord]:
        device = "device" if "device" in self._shard_columns() else "NULL"  # a read-only store from before it
        rows = self.db.execute(
            f"SELECT shard_index, value, valid, extras, method, dtype, seconds, error, {device} FROM shards "
            "WHERE run_id=? AND claim_id=? AND config_index=? ORDER BY shard_index",
            (run_id, claim_id, config_index))
        for r in rows:
            yield ShardRecord(claim_id, config_index, r[0], np.frombuffer(r[1], dtype="<f8"),
                              np.frombuffer(r[2], dtype=np.uint8).astype(bool), json.loads(r[3]), r[4], r[5],
                              r[6], r[7], r[8] or "")
