"""A claim's configurations and their shards: what a worker runs, below the runner that schedules them.

Seeding: a configuration's seed is drawn from numpy.random.SeedSequence([run seed, profile, claim id, params])
(128-bit hashes of the strings, so no two of them share a stream by truncation); its shards are that
SeedSequence's children, and a shard's torch generator gets its whole mt19937 state from the shard seed
(`seeded_generator`: manual_seed would keep only 32 of its 64 bits). Shard sizes are fixed by the claim, never
by the worker count, and every shard runs with one BLAS thread, so results are bit-identical whatever the
executor or worker count. Configurations beyond a profile's list are explored by Hypothesis, reproducibly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
import traceback
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from .boundary import to_numpy
from .claims import Claim, Param, claim_from_snapshot, edges
from .context import DTYPES, Context
from .errors import EstimatorError
from .registry import QUANTITIES
from .search import search_quantified
from .store import ShardRecord


@dataclass(frozen=True)
class ConfigPlan:
    params: dict[str, float]
    seed: int
    replicates: int
    shard_size: int
    early_stop: bool = False
    definition: str = ""  # the claim as run, when not its own snapshot: a corpus entry's pinned claim
    # early stop: the most draws it may take (the profile's max_replicates; 0 or less than `replicates`: replicates)
    budget: int = 0

    @property
    def cap(self) -> int:
        """The draws this configuration may take: `replicates`, or its budget when it draws until decided."""
        return max(self.replicates, self.budget) if self.early_stop else self.replicates

    @property
    def n_shards(self) -> int:
        return math.ceil(self.cap / self.shard_size)

    def shard_replicates(self, k: int) -> int:
        return min(self.shard_size, self.cap - k * self.shard_size)

    def looks(self) -> list[int]:
        """Early stop: the shard counts after which the confidence sequence is read. Every shard of the first
        `replicates` draws (as before budgets existed), then waves that double the draws up to the budget: a
        wave's shards run in parallel, and the decision reads only the stored prefix at a look, so it is the same
        whatever the worker count or order of completion. Doubling keeps the draws within twice what the
        decision needed and the looks few (the sequence is valid at every look, however many)."""
        first = math.ceil(self.replicates / self.shard_size)
        out = list(range(1, min(first, self.n_shards) + 1))
        while out[-1] < self.n_shards:
            out.append(min(self.n_shards, math.ceil(min(2 * out[-1] * self.shard_size, self.cap) / self.shard_size)))
        return out


@dataclass(frozen=True)
class ShardTask:
    source: str  # claim file: workers load its folder's extension from beside it
    definition: str  # the claim's snapshot as recorded with the run: what the worker executes
    claim_id: str
    config_index: int
    shard_index: int
    params: dict[str, float]
    seed: int
    replicates: int
    device: str = ""  # where it runs (`placement`); "" places it when it runs (a hunt's probe, a test's shard)


def _crc(s: str) -> int:
    return zlib.crc32(s.encode())


def _entropy(s: str) -> int:
    # 128 bits of a string for SeedSequence: crc32 would let two claim ids (or parameter sets) collide.
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=16).digest(), "little")


def config_seed(run_seed: int, claim_id: str, params: dict[str, float], profile: str = "") -> int:
    """The configuration's seed: its own stream per (run seed, profile, claim, parameters). `profile` is ""
    outside a run's profiles (hunt)."""
    ss = np.random.SeedSequence([run_seed, _entropy(profile), _entropy(claim_id),
                                 _entropy(json.dumps(params, sort_keys=True))])
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))  # 63 bits: fits SQLite INTEGER


def shard_seed(cfg_seed: int, shard_index: int) -> int:
    child = np.random.SeedSequence(cfg_seed, spawn_key=(shard_index,))
    return int(child.generate_state(1, dtype=np.uint64)[0])


# torch's CPU generator state (CPUGeneratorImplState): int64 seed, int32 left, int32 seeded, uint64 next, then
# the 624 mt19937 words, one per uint64 slot.
_MT_OFFSET, _MT_WORDS = 24, 624


def seeded_generator(seed: int) -> torch.Generator:
    """A CPU generator whose whole mt19937 state comes from SeedSequence(seed): `manual_seed` keeps only the low
    32 bits (s and s + 2**32 would draw the same numbers), which makes distinct 64-bit shard seeds collide."""
    gen = torch.Generator().manual_seed(seed & 0xFFFFFFFF)  # a valid header: next word 0, twist on first draw
    state = to_numpy(gen.get_state()).copy()
    words = state[_MT_OFFSET:_MT_OFFSET + 8 * _MT_WORDS].view(np.uint64)
    if state.size < _MT_OFFSET + 8 * _MT_WORDS or int(words[0]) != seed & 0xFFFFFFFF:
        raise RuntimeError("torch's CPU generator state layout changed: update runner.seeded_generator")
    words[:] = np.random.SeedSequence(seed).generate_state(_MT_WORDS, dtype=np.uint32)
    gen.set_state(torch.from_numpy(state))
    return gen


def param_strategy(p: Param):
    from hypothesis import strategies as st

    if p.values is not None:
        return st.sampled_from(p.values)
    assert p.low is not None and p.high is not None
    if p.integer:
        if p.log:
            return st.floats(math.log(p.low), math.log(p.high)).map(lambda t: round(math.exp(t)))
        return st.integers(int(p.low), int(p.high))
    if p.log:
        return st.floats(math.log(p.low), math.log(p.high)).map(math.exp)
    return st.floats(p.low, p.high)


def reproducible_hypothesis() -> None:
    """Make a seeded Hypothesis draw depend on its seed alone.

    Hypothesis (6.131 on) mixes into generation, with probability 0.05 a draw, literals harvested from every *local*
    module imported so far: any file outside site-packages and the stdlib, so this engine when installed editable,
    the papers' extensions, a user's script. The same seed then explored other configurations, and hunted other
    cases, depending on the install, on which claims were loaded, and in a worker on which claims it ran before.
    This empties that pool (its fixed global constants stay). Private API: where it is gone there is nothing to do,
    and tests/test_runner.py checks that explored configurations no longer depend on the modules loaded."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover  (a Hypothesis without the providers module has no local constants)
        return
    if getattr(providers, "_get_local_constants", None) is None or getattr(providers, "_lemmacheck_empty", False):
        return
    none = type(providers.GLOBAL_CONSTANTS)()
    providers._get_local_constants = lambda: none
    providers._lemmacheck_empty = True
    providers.CONSTANTS_CACHE.cache.clear()  # permitted values cached from the local pool so far


def explore_configs(claim: Claim, count: int, seed: int) -> list[dict[str, float]]:
    """`count` configurations drawn by Hypothesis from the declared domain, reproducibly from `seed` (and from it
    alone: reproducible_hypothesis)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    if count <= 0:
        return []
    reproducible_hypothesis()
    out: list[dict[str, float]] = []
    strat = st.fixed_dictionaries({k: param_strategy(p) for k, p in claim.params.items()})

    @hseed(seed)
    @settings(max_examples=count, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=["generate"])
    @given(strat)
    def collect(cfg: dict[str, float]) -> None:
        if cfg not in out:
            out.append(cfg)

    collect()
    return out[:count]


# What an estimator raises on purpose, or what a configuration it cannot handle gives (a degenerate draw, a size
# it refuses): recorded as the configuration's error. Every other exception is a bug in the estimator: recorded
# with BUG_MARK and its traceback, and `lemmacheck run` exits 70 at the end naming it (`is_bug`).
EXPECTED_ERRORS = (EstimatorError, ValueError, RuntimeError, KeyError, ArithmeticError)
BUG_MARK = "estimator bug: "


def _traceback(exc: BaseException, frames: int = 8) -> str:
    """The exception's last `frames` frames outside torch's own modules (the estimator's lines, not dispatch)."""
    tb = [f for f in traceback.extract_tb(exc.__traceback__) if "/torch/" not in f.filename.replace("\\", "/")]
    return "Traceback (most recent call last):\n" + "".join(traceback.format_list(tb[-frames:])) + \
        "".join(traceback.format_exception_only(exc))


def is_bug(error: str | None) -> bool:
    """Whether a recorded shard error is an unexpected exception (a bug to fix, then `run --resume`)."""
    return bool(error) and BUG_MARK in error


def current_device() -> str:
    """The device a run was given: $LEMMACHECK_DEVICE (set by `lemmacheck run/repro --device`), else cpu. Each
    shard then runs there or on the CPU (`placement`)."""
    return os.environ.get("LEMMACHECK_DEVICE", "cpu")


# Placement (`--device cuda`): a shard goes to the device when its estimated work reaches this many multiply-adds,
# else it runs on the worker's CPU core. At small sizes a GPU costs more than it saves (kernel launches, host round
# trips: the quick profile took 131 s on an H200 with every shard there, 48 s on its 16 CPU cores). A guess until
# measured on a device (scripts/device_check.sh prints the threshold the measured shards favour);
# $LEMMACHECK_DEVICE_MIN_COST overrides it: 0 sends every shard to the device, inf none.
DEVICE_MIN_COST = 1e10


def device_min_cost() -> float:
    env = os.environ.get("LEMMACHECK_DEVICE_MIN_COST")
    return float(env) if env else DEVICE_MIN_COST


def shard_cost(claim: Claim, params: dict[str, float], replicates: int) -> float:
    """A shard's work, roughly, in multiply-adds. A quantity may register `cost=fn(params, replicates) -> float`
    (beside `memory`); without one, every input through dense m x m layers at every step: replicates x n x
    max(m, d)^2 x depth (L or H) x steps (T), a parameter absent counting 1. An over-estimate for estimators that
    never form the weights (Gaussian conditioning, bidiagonal norms), an under-estimate for O(m^3) searches."""
    chk = claim.check
    assert chk is not None
    values = {**chk.regime_constants, **params}
    declared = QUANTITIES.get(chk.quantity).extra.get("cost") if chk.quantity in QUANTITIES else None
    if declared is not None:
        return float(declared(values, replicates))

    def p(*names: str) -> float:
        return max([1.0] + [float(values[k]) for k in names if isinstance(values.get(k), (int, float))])

    return replicates * p("n") * p("m", "d") ** 2 * p("L", "H") * p("T")


def placement(claim: Claim, params: dict[str, float], shard_size: int, device: str | None = None) -> str:
    """Where a shard of this configuration runs: on the run's device (`device`, default `current_device()`) when
    `shard_cost` of a full shard reaches `device_min_cost()`, else on the CPU. A function of the configuration
    alone, never of load, so every shard of a configuration runs on one device whatever the worker count; the
    device draws other numbers than the CPU (Philox against mt19937), and each shard's row records where it ran."""
    device = device or current_device()
    if device == "cpu" or claim.check is None:
        return "cpu"
    return device if shard_cost(claim, params, shard_size) >= device_min_cost() else "cpu"


_RETAINING = False


def retain_freed_memory() -> None:
    """Keep the memory a shard frees inside the process (glibc's allocator; elsewhere nothing to do), once per
    process. By default glibc hands every large tensor's memory back to the kernel when it is freed (mmap for
    blocks above a threshold, trimming the heap's top), so the next tensor of that size faults its pages in again;
    on a virtual machine that reports free pages to its host that re-faulting took half of some estimators' time
    (a Gram least-eigenvalue shard at m = 1024, 200 draws: 5.4 s -> 2.7 s; docs/performance.md). The arithmetic
    is untouched, so draws are bit-identical; a worker's resident memory stays near its largest shard's peak."""
    global _RETAINING
    if _RETAINING:
        return
    _RETAINING = True
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl): their allocators keep their own policies
        return
    m_trim_threshold, m_mmap_max = -1, -4  # glibc's malloc.h
    mallopt(m_mmap_max, 0)  # every block from the heap, which is reused ...
    mallopt(m_trim_threshold, 2 ** 31 - 1)  # ... and never trimmed back to the kernel


def execute_shard(task: ShardTask, device: str | None = None) -> ShardRecord:
    """Run one shard; estimator failures become a recorded error, never a crash of the whole run.

    `device` defaults to the task's (`placement`, which `run` and `repro` fill in), else to its placement on
    $LEMMACHECK_DEVICE (what `--device` sets). On a GPU the shard's generator lives on the device (Philox: same
    law, other draws than the CPU's mt19937) and factory calls inside the estimator allocate there; an estimator
    that mixes devices records an error. The record names the device."""
    retain_freed_memory()
    claim = claim_from_snapshot(task.source, task.definition)
    chk = claim.check
    assert chk is not None
    device = device or task.device or placement(claim, task.params, task.replicates)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    gen = seeded_generator(task.seed) if device == "cpu" else torch.Generator(device).manual_seed(task.seed % 2 ** 63)
    ctx = Context(claim.id, dict(task.params), task.replicates, gen, DTYPES[chk.dtype], torch.device(device),
                  dict(chk.args), dict(claim.inputs), chk.search, claim.network)
    t0 = time.perf_counter()
    try:
        # factory calls allocate on the shard's device; on the CPU (the default device already) the mode would
        # only add a Python dispatch to every torch call (28% of a small-tensor GD hunt's time)
        with torch.device(device) if device != "cpu" else contextlib.nullcontext():
            # matrices drawn through ctx.weights / ctx.perturbation are searched as the claim's search says
            obs = search_quantified(QUANTITIES.get(chk.quantity).obj, ctx, 1 if chk.relation in ("<=", "<") else -1)
        value = to_numpy(obs.value, torch.float64).reshape(-1)
        if value.shape != (task.replicates,):
            raise EstimatorError(f"quantity '{chk.quantity}' returned {tuple(obs.value.shape)} values, "
                                 f"expected ({task.replicates},)")
        valid = (np.ones(task.replicates, bool) if obs.valid is None
                 else to_numpy(obs.valid).reshape(-1).astype(bool))
        extras = {k: to_numpy(v, torch.float64).reshape(-1).tolist() for k, v in obs.extras.items()}
        return ShardRecord(task.claim_id, task.config_index, task.shard_index, value, valid, extras, obs.method,
                           chk.dtype, time.perf_counter() - t0, device=device)
    except Exception as exc:  # noqa: BLE001  (a shard never sinks the run: its error is recorded, the run goes on)
        msg = f"{claim.source}: quantity '{chk.quantity}' at {task.params}: "
        if isinstance(exc, EXPECTED_ERRORS):
            msg += f"{type(exc).__name__}: {exc}"
        else:  # anything else is a bug in the estimator: keep where it happened, so the report can name it
            msg += f"{BUG_MARK}{type(exc).__name__}: {exc}\n" + _traceback(exc)
        return ShardRecord(task.claim_id, task.config_index, task.shard_index, np.full(task.replicates, np.nan),
                           np.zeros(task.replicates, bool), {}, "", chk.dtype, time.perf_counter() - t0, msg,
                           device=device)
    finally:
        torch.set_num_threads(threads)


def missed_edges(claim: Claim, profile: str = "full", seed: int = 0) -> list[tuple[str, str, float]]:
    """Declared edges that no configuration of the profile (its configs and grid, and the configurations its
    `explore` draws at run seed `seed`) reaches, and that the claim's `edges_skipped` does not explain."""
    if claim.check is None:
        return []
    prof = claim.profiles[profile]
    cfgs = list(prof.configs)
    if prof.explore:
        cfgs += explore_configs(claim, prof.explore, seed ^ _crc(claim.id))
    skipped = claim.raw.get("edges_skipped", {})
    return [(name, end, v) for name, end, v in edges(claim) if name not in skipped
            and not any(math.isclose(c[name], v, rel_tol=1e-9, abs_tol=1e-12) for c in cfgs)]


def edge_warnings(claims: list[Claim]) -> list[str]:
    """One line per claim whose full profile never reaches an edge of a declared parameter without saying why."""
    out = []
    for c in claims:
        miss = missed_edges(c)
        if miss:
            out.append(f"{c.source}: field 'profiles.full': never reaches the declared edge(s) "
                       + ", ".join(f"{n} = {v:g} ({end})" for n, end, v in miss)
                       + " (fix: add configurations there, or say why in `edges_skipped = { name = \"reason\" }`)")
    return out
