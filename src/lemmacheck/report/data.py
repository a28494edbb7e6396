"""What the report shows, read back from the results store.

Claims are rebuilt from the definitions snapshotted in the store (not from the files on disk today), so a
report always describes the claims exactly as they were run, and a comparison of two runs judges each run by
its own bounds. Verdicts come from `runner.evaluate` (the single source of truth); per-replicate values and
slacks are then read again from the stored shards for the plots.

Comparison rule (`--compare OLD.db`), per claim id:
  * new / removed: the id is in only one of the two runs;
  * verdict changed: the verdicts differ; "started failing" when the old run was ok (verdict equal to the
    claim's `expect`, no estimator errors) and the new one is not, "fixed" for the reverse;
  * worst slack moved: s = worst slack (smallest per-replicate slack over all configurations). The new run's
    spread is the interquartile range of log(slack) over the replicates of its worst configuration (a floor
    of 1e-9 keeps it positive). The slack "moved" when |log s_new - log s_old| exceeds that spread, i.e. the
    change is larger than the typical replicate-to-replicate variation of the new run itself; "tighter" when
    s_new < s_old. An infinite or missing slack on one side only counts as moved.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..claims import Claim, load_extension, parse_claim
from ..coverage import coverage
from ..errors import LemmacheckError
from ..runner import evaluate, repro_command
from ..store import Store
from ..verdicts import ClaimResult, slack

SPREAD_FLOOR = 1e-9


# --------------------------------------------------------------------------------------------- runs

def open_store(path: str | Path) -> Store:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such results store")
    return Store(p, readonly=True)


def latest_finished(store: Store, before: int | None = None) -> int | None:
    sql = "SELECT max(run_id) FROM runs WHERE finished IS NOT NULL"
    args: tuple = ()
    if before is not None:
        sql += " AND run_id < ?"
        args = (before,)
    row = store.db.execute(sql, args).fetchone()
    return None if row[0] is None else int(row[0])


def pick_run(store: Store, run_id: int | None) -> int:
    if run_id is not None:
        store.run_info(run_id)  # raises KeyError naming the store when absent
        return run_id
    rid = latest_finished(store)
    if rid is None:
        raise LemmacheckError(f"{store.path}: no finished run to report (run `lemmacheck run` first, or pass "
                              "run_id= for an unfinished one)")
    return rid


# --------------------------------------------------------------------------------------------- claims

def _shown_path(source: str) -> str:
    """A published page names the claim file relative to the checkout, not the machine that ran it."""
    try:
        return str(Path(source).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return source


def rebuild_claim(source: str, definition: dict[str, Any]) -> Claim:
    """The claim as it was run: its stored definition, parsed with its folder's extension (if still there:
    `extension.py` or an `extension/` package; load_extension finds either and returns None without one)."""
    path = Path(source)
    if path.parent.is_dir():
        load_extension(path.parent)
    return parse_claim(definition, path)


def natural_key(s: str) -> tuple:
    """'Lemma A.2' < 'Lemma A.10'; roman numerals in parentheses ('(ii)' < '(iv)') count as numbers."""
    s = re.sub(r"\(([ivxlc]+)\)", lambda m: f"({_roman(m.group(1))})", s)
    parts = re.split(r"(\d+)", s)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts if p != "")


def _roman(r: str) -> int:
    vals = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
    total = 0
    for a, b in zip(r, r[1:] + " "):
        v = vals[a]
        total += -v if b != " " and vals.get(b, 0) > v else v
    return total


def label_key(label: str) -> tuple:
    """Paper order of result labels: by number first ('Theorem 5.1' < 'Lemma A.1' < 'Claim C.4'), because
    lemmas, theorems and claims usually share one counter; the kind word breaks ties."""
    number = re.sub(r"^(?:[A-Za-z]+\.?\s+)+", "", label.strip())
    return natural_key(number), natural_key(label)


def safe_name(claim_id: str, taken: set[str]) -> str:
    """A file name for a claim page: readable, portable, unique within the report."""
    base = re.sub(r"[^A-Za-z0-9.-]+", "_", claim_id).strip("._-")[:120] or "claim"
    name, k = base, 2
    while name.lower() in taken:
        name = f"{base}-{k}"
        k += 1
    taken.add(name.lower())
    return name


@dataclass
class ConfigData:
    index: int
    values: np.ndarray  # valid, finite per-replicate values
    slacks: np.ndarray  # their slacks (may contain inf)
    shard_size: int
    replicates: int


@dataclass
class ClaimView:
    claim_id: str
    slug: str
    source: str
    definition: dict[str, Any]
    claim: Claim | None = None
    res: ClaimResult | None = None
    error: str = ""  # the claim could not be rebuilt or evaluated
    data: dict[int, ConfigData] = field(default_factory=dict)
    change: Change | None = None
    _coverage: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def coverage(self) -> dict[str, Any] | None:
        """Which cells of the claim's domain ran and why the others did not (lemmacheck.coverage), from the
        stored configurations; computed once."""
        if self._coverage is None and self.claim is not None and self.res is not None:
            self._coverage = coverage(self.claim, self.res.configs, self.res.profile, self.res.probes) or {}
        return self._coverage or None

    @property
    def paper(self) -> str:
        return self.claim.paper if self.claim else str(self.definition.get("paper", self.claim_id.split("/")[0]))

    @property
    def label(self) -> str:
        return self.claim.result if self.claim else str(self.definition.get("result", ""))

    @property
    def title(self) -> str:
        return self.claim.title if self.claim else str(self.definition.get("title", ""))

    @property
    def verdict(self) -> str:
        return self.res.verdict if self.res else "error"

    @property
    def ok(self) -> bool:
        return bool(self.res and self.res.ok)

    @property
    def expect(self) -> str:
        """The verdict this run's profile expects ("" when the claim could not be rebuilt)."""
        if self.res:
            return self.res.expect
        return self.claim.expect if self.claim else ""

    @property
    def seconds(self) -> float:
        return float(sum(c.seconds for c in self.res.configs)) if self.res else 0.0

    def worst(self):
        if not self.res or self.res.worst_index is None:
            return None
        return next((c for c in self.res.configs if c.index == self.res.worst_index), None)

    def repro(self) -> str | None:
        """The worst configuration's repro command, with the shard size it was actually run with."""
        w = self.worst()
        if w is None or self.claim is None:
            return None
        d = self.data.get(w.index)
        shard = d.shard_size if d else self.claim.profiles["quick"].shard_size
        return repro_command(self.claim, w.params, w.seed, w.drawn, shard, w.pinned)


def load_claim_view(store: Store, run_id: int, claim_id: str, slug: str, with_data: bool) -> ClaimView:
    source, definition = store.claim_definition(run_id, claim_id)
    view = ClaimView(claim_id, slug, _shown_path(source), definition)
    try:
        view.claim = rebuild_claim(source, definition)
    except Exception as exc:  # noqa: BLE001  (a report must render whatever one claim does)
        view.error = f"cannot rebuild the claim from its stored definition: {type(exc).__name__}: {exc}"
        return view
    try:
        view.res = evaluate(store, run_id, [view.claim])[0]
    except Exception as exc:  # noqa: BLE001
        view.error = f"cannot evaluate the stored results: {type(exc).__name__}: {exc}"
        return view
    if with_data and view.claim.check is not None:
        rel = view.claim.check.relation
        meta = {c["index"]: c for c in store.configs(run_id, claim_id)}
        for cfg in view.res.configs:
            shards = sorted(store.shards(run_id, claim_id, cfg.index), key=lambda r: r.shard_index)
            if not shards:
                continue
            value = np.concatenate([s.value for s in shards])
            valid = np.concatenate([s.valid for s in shards])
            v = value[valid & np.isfinite(value)]
            m = meta.get(cfg.index, {})
            view.data[cfg.index] = ConfigData(cfg.index, v, slack(rel, v, cfg.bound),
                                              int(m.get("shard_size", len(value))), int(m.get("replicates", 0)))
    return view


# --------------------------------------------------------------------------------------------- compare

@dataclass
class Change:
    status: str  # "new" or "both"
    old_verdict: str | None = None
    new_verdict: str | None = None
    old_ok: bool | None = None
    new_ok: bool | None = None
    old_slack: float | None = None
    new_slack: float | None = None
    spread: float | None = None
    slack_moved: str = ""  # "", "tighter" or "looser"

    @property
    def verdict_changed(self) -> bool:
        return self.status == "both" and self.old_verdict != self.new_verdict

    @property
    def started_failing(self) -> bool:
        return self.status == "both" and bool(self.old_ok) and not self.new_ok

    @property
    def fixed(self) -> bool:
        return self.status == "both" and not self.old_ok and bool(self.new_ok)

    @property
    def any(self) -> bool:
        return self.status == "new" or self.verdict_changed or self.started_failing or self.fixed \
            or bool(self.slack_moved)


@dataclass
class OldClaim:
    claim_id: str
    paper: str
    label: str
    title: str
    verdict: str
    ok: bool
    worst_slack: float | None


@dataclass
class Comparison:
    path: str
    run_id: int
    info: dict[str, Any]
    old: dict[str, OldClaim]
    removed: list[OldClaim] = field(default_factory=list)


def load_old(path: str | Path, current_db: str | Path, current_run: int) -> Comparison:
    store = open_store(path)
    try:
        same = Path(path).resolve() == Path(current_db).resolve()
        rid = latest_finished(store, before=current_run if same else None)
        if rid is None:
            raise LemmacheckError(f"{path}: no finished run to compare with")
        old: dict[str, OldClaim] = {}
        for cid in store.claim_ids(rid):
            v = load_claim_view(store, rid, cid, "", with_data=False)
            w = v.worst()
            old[cid] = OldClaim(cid, v.paper, v.label, v.title, v.verdict, v.ok, w.slack_min if w else None)
        return Comparison(str(path), rid, store.run_info(rid), old)
    finally:
        store.close()


def log_spread(slacks: np.ndarray) -> float:
    s = slacks[np.isfinite(slacks) & (slacks > 0)]
    if len(s) < 2:
        return SPREAD_FLOOR
    q1, q3 = np.quantile(np.log(s), [0.25, 0.75])
    return max(float(q3 - q1), SPREAD_FLOOR)


def compare_view(view: ClaimView, cmp: Comparison) -> Change:
    old = cmp.old.get(view.claim_id)
    if old is None:
        return Change("new", new_verdict=view.verdict, new_ok=view.ok)
    w = view.worst()
    new_slack = w.slack_min if w else None
    ch = Change("both", old.verdict, view.verdict, old.ok, view.ok, old.worst_slack, new_slack)
    if w is not None and w.index in view.data:
        ch.spread = log_spread(view.data[w.index].slacks)
    la, lb = _xlog(old.worst_slack), _xlog(new_slack)
    if la is not None and lb is not None:
        if math.isfinite(la) and math.isfinite(lb):
            moved = abs(lb - la) > (ch.spread or SPREAD_FLOOR)
        else:
            moved = la != lb  # one side 0 or infinite
        if moved:
            ch.slack_moved = "tighter" if lb < la else "looser"
    return ch


def _xlog(x: float | None) -> float | None:
    """log on [0, inf]: 0 -> -inf, inf -> inf; None or NaN -> None."""
    if x is None or math.isnan(x) or x < 0:
        return None
    if x == 0:
        return -math.inf
    return math.log(x)
