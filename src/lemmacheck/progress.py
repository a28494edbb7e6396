"""Progress of long commands (`run`, `hunt`, `report`) on stderr.

On a terminal: a tqdm bar (done/total, rate, ETA) with claims finished and configurations with violations so
far beside it.
Off a terminal (CI logs, pipes): one plain line every `interval` seconds and one at the end, so a log shows
that the run is alive without a line per shard. Silent with `--quiet` or when stdout carries JSON and stderr
would be mixed into it. stdout is never written: it carries the command's result.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any, Self

import numpy as np

MODES = ("auto", "bar", "lines", "off")


def _interval() -> float:
    # LEMMACHECK_PROGRESS_INTERVAL: seconds between plain lines off a terminal (tests set 0: a line per step)
    try:
        return float(os.environ.get("LEMMACHECK_PROGRESS_INTERVAL", "10"))
    except ValueError:
        return 10.0


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """A counter with a bar (terminal) or periodic lines (elsewhere); `describe()` adds text after the counts."""

    def __init__(self, label: str, unit: str, *, mode: str = "auto", stream: IO[str] | None = None,
                 interval: float | None = None):
        self.stream = stream if stream is not None else sys.stderr
        if mode == "auto":
            isatty = getattr(self.stream, "isatty", lambda: False)
            mode = "bar" if isatty() else "lines"
        if mode not in MODES:
            raise ValueError(f"progress mode {mode!r}: expected one of {MODES}")
        self.mode, self.label, self.unit = mode, label, unit
        self.total = 0
        self.done = 0
        self.interval = _interval() if interval is None else interval
        self.t0 = time.monotonic()
        self._last_line = self.t0
        self._lined = -1  # `done` at the last plain line, so close() does not repeat it
        self._bar: Any = None

    # counting ------------------------------------------------------------------------------------------
    def add_total(self, n: int) -> None:
        self.total += n
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()
        elif self.mode == "lines" and self._lined < 0 and self.total:
            self._line()  # a log shows at once what was planned, before the first step finishes

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.done > self.total:  # an estimate ran over (a hunt probes as many cases as Hypothesis asks)
            self.add_total(self.done - self.total)
        if self.mode == "bar":
            if self._bar is None:
                self._open_bar()
            self._bar.set_postfix_str(self.describe(), refresh=False)
            self._bar.update(n)
        elif self.mode == "lines" and time.monotonic() - self._last_line >= self.interval:
            self._line()

    def describe(self) -> str:
        return ""

    # output --------------------------------------------------------------------------------------------
    def _open_bar(self) -> None:
        from tqdm import tqdm

        try:
            cols = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            cols = 0
        # a terminal that reports no width (a fresh pty, some CI containers) would get an empty bar
        size = {"dynamic_ncols": True} if cols > 0 else {"ncols": 100, "nrows": 24}
        self._bar = tqdm(total=self.total, initial=0, desc=self.label, unit=self.unit, file=self.stream,
                         leave=True, mininterval=0.2, **size)

    def _line(self) -> None:
        self._lined = self.done
        self._last_line = time.monotonic()
        elapsed = self._last_line - self.t0
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        eta = ""
        if 0 < self.done < self.total:
            eta = f", ETA {_clock(elapsed / self.done * (self.total - self.done))}"
        extra = self.describe()
        print(f"{self.label}: {self.done}/{self.total} {self.unit}s{pct}" + (f", {extra}" if extra else "")
              + f", elapsed {_clock(elapsed)}{eta}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        """A line that must not break the bar (tqdm.write) or the line log."""
        if self.mode == "off":
            return
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self.describe(), refresh=False)
            self._bar.close()
            self._bar = None
        elif self.mode == "lines" and self.done and self._lined != self.done:
            self._line()
        self.mode = "off"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunProgress(Progress):
    """The runner's hook: shards done/total, claims finished, configurations with a violation so far (a draw beyond
    the bound at the configuration's parameters). Hidden-constant (scaling) claims are left out: their bound at the
    constants' illustrative values (C = 1) refutes nothing, so counting its draws would only alarm."""

    def __init__(self, claims: list[Any], *, verbose: bool = False, **kw: Any):
        super().__init__("run", "task", **kw)  # a task: one shard, or one claim's hunt
        self.claims = {c.id: c for c in claims}
        self.outstanding: dict[str, int] = {c.id: 0 for c in claims}
        self.violating: set[tuple[str, int]] = set()  # (claim, configuration) with a draw beyond the bound
        self.errors = 0
        self.hunts_left = 0
        self.verbose = verbose

    def planned(self, tasks: list[Any]) -> None:
        """Shards and hunts (a task with `examples`) to come: a claim is finished when none of either is left."""
        for t in tasks:
            self.outstanding[t.claim_id] = self.outstanding.get(t.claim_id, 0) + 1
            self.hunts_left += hasattr(t, "examples")
        self.add_total(len(tasks))

    def hunt_done(self, task: Any) -> None:
        """A claim's hunt returned (its shards were planned just before): one unit of work done."""
        self.outstanding[task.claim_id] -= 1
        self.hunts_left -= 1
        self.advance()

    def shard_done(self, task: Any, rec: Any) -> None:
        self.outstanding[task.claim_id] -= 1
        if rec.error:
            self.errors += 1
        elif self._violations(task, rec):
            self.violating.add((task.claim_id, task.config_index))
        if self.verbose:
            self.note(f"{rec.claim_id} config {rec.config_index} shard {rec.shard_index}: {len(rec.value)} draws, "
                      f"{rec.seconds:.2f} s" + (f", error: {rec.error}" if rec.error else ""))
        self.advance()

    def _violations(self, task: Any, rec: Any) -> int:
        from .verdicts import violates

        claim = self.claims.get(task.claim_id)
        chk = getattr(claim, "check", None)
        if chk is None or chk.constants:  # a scaling claim: C = 1 is illustrative, not the claim
            return 0
        try:
            bound = chk.bound.evaluate({**chk.regime_constants, **task.params})
        except (ArithmeticError, ValueError, TypeError, KeyError):  # a display must never stop a run
            return 0
        ok = rec.valid & np.isfinite(rec.value)
        return int(violates(chk.relation, rec.value[ok], bound).sum())

    def describe(self) -> str:
        finished = sum(1 for n in self.outstanding.values() if n == 0)
        text = f"claims {finished}/{len(self.outstanding)} finished, {len(self.violating)} violating configs"
        text += f", {self.hunts_left} hunts to go" if self.hunts_left else ""
        return text + (f", {self.errors} shard errors" if self.errors else "")
