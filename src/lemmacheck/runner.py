"""Plan configurations, shard replicates, run shards on an Executor, evaluate verdicts from the store.

Seeding: a configuration's seed is drawn from numpy.random.SeedSequence([run seed, profile, claim id, params])
(128-bit hashes of the strings, so no two of them share a stream by truncation); its shards are that
SeedSequence's children, and a shard's torch generator gets its whole mt19937 state from the shard seed
(`seeded_generator`: manual_seed would keep only 32 of its 64 bits). Shard sizes are fixed by the claim, never
by the worker count, and every shard runs with one BLAS thread, so results are bit-identical whatever the
executor or worker count.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import json
import multiprocessing
import os
import platform
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .claims import Claim, in_regime
from .corpus import HuntTask, run_hunt_task
from .errors import LemmacheckError
from .hunt import Probe, apply_pins, pins_of
from .registry import QUANTITIES
from .shards import (
    ConfigPlan,
    ShardTask,
    _crc,
    config_seed,
    current_device,
    device_min_cost,
    execute_shard,
    explore_configs,
    placement,
    shard_seed,
)
from .stats import draws_to_decide
from .store import ShardRecord, Store
from .store import now as now_utc
from .verdicts import ClaimResult, claim_result, config_result


def plan(claim: Claim, profile: str, seed: int,
         hunted: list[tuple[dict[str, float], int, str]] | None = None) -> list[ConfigPlan]:
    """The corpus's saved counterexamples first (each replayed with its recorded seed, as one shard), then the
    profile's bounded hunt (its counterexample or worst case, pinned; the full profile hunts every claim by
    default, corpus.hunt_budget), then the profile's configurations. `hunted`: the hunt's outcome when it already
    ran elsewhere (run_claims hunts on the worker pool); None hunts here."""
    from . import corpus

    prof = claim.profiles[profile]
    replayed = [ConfigPlan(p, s, r, r, False, definition) for p, s, r, definition in corpus.plans(claim)]
    examples = corpus.hunt_budget(claim, profile)  # the full profile hunts by default (corpus.hunt_budget)
    if examples and hunted is None:
        hunted = corpus.hunted(claim, examples, seed, profile=profile)
    # early stop needs a second shard to save anything; a one-shard configuration keeps the fixed-size interval
    # (and is charged alpha/2, not the sequence's alpha as well: false_violation_bound). It draws the claim's
    # replicates shard by shard, then on in waves up to the profile's max_replicates while undecided: the hunt's
    # configuration too (where the statement came closest to failing, the draws matter most).
    early = prof.early_stop and claim.mode == "probabilistic" and prof.max_replicates > prof.shard_size
    budget = prof.max_replicates if early else 0
    if examples:
        replayed += [ConfigPlan(p, s, prof.replicates, prof.shard_size, early, definition, budget)
                     for p, s, definition in hunted or []]
    cfgs = list(prof.configs)
    if prof.explore:
        cfgs += [c for c in explore_configs(claim, prof.explore, seed ^ _crc(claim.id)) if c not in cfgs]
    plans = replayed + [ConfigPlan(c, config_seed(seed, claim.id, c, profile), prof.replicates, prof.shard_size,
                                   early, budget=budget) for c in cfgs]
    return _pursue_where_decided(claim, plans)


def _pursue_where_decided(claim: Claim, plans: list[ConfigPlan]) -> list[ConfigPlan]:
    """Draws until decided go where the verdict rests. With a configuration inside the stated regime, one outside
    it decides nothing (verdicts.claim_result: at most the flag violated-out-of-regime), so it draws its planned
    replicates, stopping early within them, and no more; readout says what would decide it. With none inside,
    the configurations outside decide the (flagged) verdict and draw on as usual."""
    if all(p.cap <= p.replicates for p in plans):
        return plans
    inside = [in_regime(claim, p.params) for p in plans]
    if not any(inside):
        return plans
    return [p if ok or p.cap <= p.replicates else dataclasses.replace(p, budget=0) for p, ok in zip(plans, inside)]


class InProcessExecutor(Executor):
    """Runs each task at submit time, in this process: the reference executor (and pytest's)."""

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            f.set_exception(exc)
        return f


MAX_WORKER_DEATHS = 3  # a shard whose worker dies this often is refused, not retried forever


def _worker_died(exc: BaseException) -> bool:
    """A worker process died under the shard (OOM killer, signal): the process pool breaks, Dask gives up with
    KilledWorker once its own retries are spent. The shard's row was never written, so it is simply run again."""
    return isinstance(exc, cf.BrokenExecutor) or type(exc).__name__ == "KilledWorker"


class _Pool:
    """The executor a run uses, replaced by a fresh one when a process pool breaks under a dying worker."""

    def __init__(self, ex: Executor, make: Callable[[], Executor] | None):
        self.ex, self.make = ex, make

    def restart(self) -> None:
        if self.make is None:  # a borrowed executor (Dask) reschedules by itself: resubmit to it
            return
        self.ex.shutdown(wait=False, cancel_futures=True)
        self.ex = self.make()


def _drain(pool: _Pool, tasks: list[ShardTask | HuntTask], store: Store, run_id: int, progress: Any = None,
           hunted: Callable[[HuntTask, tuple], list[ShardTask]] | None = None,
           followed: Callable[[ShardTask], list[ShardTask]] | None = None) -> None:
    """Run tasks with a bounded number in flight and commit each shard as soon as it completes, so a kill
    loses at most the shards in flight (one, in-process). A shard whose worker process died is run again on a
    fresh pool: only completed shards are written, each once (the store's key refuses a second row). A HuntTask's
    outcome (run_hunt_task's) goes to `hunted`, which plans its claim and returns that claim's shards to run
    after the rest. `followed` gives the shards that follow a stored one (an early-stopping configuration's next
    wave, while undecided), run next: a chain of sequential shards never waits for the rest of the queue."""
    window = 1 if isinstance(pool.ex, InProcessExecutor) else 2 * max(1, getattr(pool.ex, "_max_workers", 1))
    pending = collections.deque(tasks)
    retry: list[ShardTask | HuntTask] = []
    deaths: dict[tuple[str, int, int], int] = {}
    inflight: dict[Future, ShardTask | HuntTask] = {}

    def refill(n: int) -> None:
        for _ in range(n):
            if not retry and not pending:
                break
            t = retry.pop(0) if retry else pending.popleft()
            inflight[pool.ex.submit(run_hunt_task if isinstance(t, HuntTask) else execute_shard, t)] = t

    def hunt_done(task: HuntTask, returned: tuple) -> None:
        assert hunted is not None
        more = hunted(task, returned)  # the claim's shards, queued after the rest
        pending.extend(more)
        if progress is not None:
            progress.planned(more)
            progress.hunt_done(task)

    refill(window)
    while inflight:
        done, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
        broken = False
        for fut in done:
            task = inflight.pop(fut)
            try:
                rec = fut.result()
            except BaseException as exc:
                if isinstance(task, HuntTask) and isinstance(exc, Exception) and not _worker_died(exc):
                    # a hunt that raised (a bug) never sinks the run: the claim runs its profile unhunted, the
                    # traceback is recorded, and the run exits 70 naming it (--resume hunts again)
                    hunt_done(task, ([], [], None, 0.0, "".join(traceback.format_exception(exc))))
                    continue
                if not _worker_died(exc):
                    raise
                key = (task.claim_id, -1, -1) if isinstance(task, HuntTask) else (
                    task.claim_id, task.config_index, task.shard_index)
                deaths[key] = deaths.get(key, 0) + 1
                if deaths[key] >= MAX_WORKER_DEATHS:
                    raise LemmacheckError(
                        f"{task.source}: the worker process died {deaths[key]} times running {task.claim_id} "
                        + ("hunt" if isinstance(task, HuntTask) else f"config {task.params} shard {task.shard_index}")
                        + " (out of memory?); completed shards are saved: lower the configuration's width or "
                        "shard_size (or the profile's hunt), then --resume") from exc
                retry.append(task)
                broken = broken or isinstance(exc, cf.BrokenExecutor)
                continue
            if isinstance(task, HuntTask):
                hunt_done(task, rec)
                continue
            store.write_shard(run_id, rec)
            after = followed(task) if followed is not None else []
            pending.extendleft(reversed(after))  # a wave runs next, in shard order
            if progress is not None:
                progress.planned(after)  # before shard_done: the claim goes on
                progress.shard_done(task, rec)
        if broken:
            # every other in-flight future of a broken pool fails too: collect them, then start a fresh pool
            retry.extend(inflight.values())
            inflight.clear()
            pool.restart()
        refill(window - len(inflight))


def _stop(ex: Executor) -> None:
    """End an interrupted run's own pool: queued work cancelled, and its worker processes terminated, since a worker
    in the middle of a shard or a hunt would otherwise run on, orphaned, after the run has stopped (nothing it
    computes could be stored)."""
    workers = list((getattr(ex, "_processes", None) or {}).values())
    if hasattr(ex, "shutdown"):
        ex.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        if proc.is_alive():
            proc.terminate()


def _task(claim: Claim, j: int, p: ConfigPlan, k: int, device: str | None = None) -> ShardTask:
    """Shard k of configuration j, on `device` (where its stored shards ran, on resume) or its placement."""
    return ShardTask(str(claim.source), p.definition or claim.snapshot, claim.id, j, k, p.params,
                     shard_seed(p.seed, k), p.shard_replicates(k), device or placement(claim, p.params, p.shard_size))


def shard_extra(shards: list[ShardRecord], name: str) -> np.ndarray | None:
    """A per-replicate diagnostic the verdict reads, None unless every shard reports it: "scale" (operand
    magnitude, verdicts.comparison_tolerance), "reached" and "budget" (trajectories: target reached within how
    many steps)."""
    if not shards or not all(name in s.extras for s in shards):
        return None
    return np.concatenate([np.asarray(s.extras[name], dtype=float) for s in shards])


def shard_scale(shards: list[ShardRecord]) -> np.ndarray | None:
    return shard_extra(shards, "scale")


def _next_sequential(store: Store, run_id: int, claim: Claim, j: int, p: ConfigPlan,
                     stored: ShardTask | None = None) -> list[ShardTask]:
    """The shards an early-stopping configuration draws next: none once it is decided or its budget is spent,
    else the wave up to its next look (ConfigPlan.looks). "Decided" is the verdict `evaluate` would give from the
    stored prefix of shards with the confidence sequence (holds or violated), so a configuration never stops on a
    count that the verdict then reads otherwise (misses, NaN, errors). `stored`: the shard just stored (the run
    goes on from it): only the shard that completes a look's prefix starts the next wave (a wave's other shards
    are in flight); None (admitting a claim, or a resumed run): every missing shard of the current wave."""
    shards = sorted(store.shards(run_id, claim.id, j), key=lambda r: r.shard_index)
    if any(s.error for s in shards):
        return []
    have = {s.shard_index for s in shards}
    done = 0
    while done in have:
        done += 1
    looks = p.looks()
    if stored is not None and (done not in looks or max(have) >= done or stored.shard_index >= done):
        return []  # the wave is still being drawn (or this shard is not the one that completed it)
    at = max([n for n in looks if n <= done], default=0)
    if at and at == done:
        prefix = shards[:done]
        cr, _ = _shards_result(claim, j, p.params, p.seed, prefix, p.shard_size, p.cap, True, anytime=True)
        if cr.verdict in ("holds", "violated") or done >= p.n_shards:
            return []
        if done * p.shard_size >= p.replicates and (
                cr.errors or cr.at_bound or not reachable(cr.violations, cr.replicates, cr.delta, p.cap)):
            # past its replicates: a NaN draw keeps the verdict undecided whatever follows (config_result), the
            # rate is known to sit at delta (verdicts.RATE_RESOLUTION), or, with no violation, "holds" is out of
            # the budget's reach (delta too small for it): more draws would be spent in vain; the verdict says why
            return []
    upto = next(n for n in looks if n > at)
    return [_task(claim, j, p, k, shards[0].device if shards else None) for k in range(at, upto) if k not in have]


def reachable(k: int, n: int, delta: float, cap: int) -> bool:
    """Whether `cap` draws could decide a configuration with `k` violations in `n`. With no violation, exactly:
    whether "holds" comes within `cap` draws if none ever comes (delta too small for it otherwise). With one, yes:
    its rate may lie anywhere near delta, and only more draws tell (a rate at delta spends the budget; its cost is
    the profile's max_replicates to set)."""
    if k or not n or not 0.0 < delta < 1.0:
        return True
    need = draws_to_decide(0, n, delta)
    return need is not None and need <= cap


def _shards_result(claim: Claim, index: int, params: dict[str, float], seed: int, shards: list[ShardRecord],
                   shard_size: int, planned: int, sequential: bool, anytime: bool):
    """One configuration's verdict from its stored shards (in shard order), and its finite valid draws (what a
    scaling fit reads)."""
    value = np.concatenate([s.value for s in shards])
    valid = np.concatenate([s.valid for s in shards])
    shard_of = np.concatenate([np.full(len(s.value), s.shard_index) for s in shards])
    pos = np.concatenate([np.arange(len(s.value)) for s in shards])
    errors = [s.error for s in shards if s.error]
    methods = sorted({s.method for s in shards if s.method})
    cr = config_result(claim, index, params, seed, value, valid, shard_of, pos, "; ".join(methods),
                       float(sum(s.seconds for s in shards)), errors, shard_size=shard_size, anytime=anytime,
                       dtype=shards[0].dtype, scale=shard_scale(shards), reached=shard_extra(shards, "reached"),
                       budget=shard_extra(shards, "budget"), planned=planned, sequential=sequential)
    return cr, value[valid & np.isfinite(value)]


def _worker_init() -> None:
    torch.set_num_threads(1)


def make_executor(workers: int) -> Executor:
    if workers <= 1:
        return InProcessExecutor()
    import os

    # One BLAS thread per worker in every library, not only torch's pool (_worker_init): numpy/scipy's OpenBLAS
    # reads these when the spawned worker imports it; workers x 2 threads on 2 cores would oversubscribe.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # spawn, not fork: forking a process that already holds torch's thread pools can deadlock.
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init)


def available_memory(device: str | None = None) -> int:
    """Bytes this machine can give a run now (MemAvailable, or the GPU's free memory for `device`, by default the
    run's: --device cuda); LEMMACHECK_MEMORY_LIMIT (bytes) overrides it, for a shared machine or a container whose
    limit /proc does not show."""
    env = os.environ.get("LEMMACHECK_MEMORY_LIMIT")
    if env:
        return int(float(env))
    device = device or current_device()
    if device.startswith("cuda") and torch.cuda.is_available():  # shards allocate on the GPU: its free memory
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_estimate(claim: Claim, params: dict[str, float], replicates: int) -> int:
    """Bytes one shard of this configuration needs at least. A quantity may register `memory=fn(params,
    replicates, itemsize) -> bytes` (its weights, perturbations, workspaces); without one, a floor every
    estimator pays: one layer's activations (R x n x max(m, d)) and the dataset (R x n x d), twice over for the
    copies torch makes. Only a floor, so a refusal is never wrong; a declared estimate makes it sharper."""
    chk = claim.check
    assert chk is not None
    itemsize = 8 if chk.dtype == "float64" else 4
    values = {**chk.regime_constants, **params}
    declared = QUANTITIES.get(chk.quantity).extra.get("memory") if chk.quantity in QUANTITIES else None
    if declared is not None:
        return int(declared(values, replicates, itemsize))
    n, m, d = (max(1.0, float(values.get(k, 1))) for k in ("n", "m", "d"))
    return int(2 * replicates * n * (max(m, d) + d) * itemsize)


def check_memory(plans: dict[str, tuple[Claim, list[ConfigPlan]]], profile: str, workers: int) -> None:
    """Refuse, before any shard runs, a configuration whose shard needs more memory than each worker can have,
    rather than let the OS kill the run half-way."""
    budgets: dict[str, int] = {}  # per device a shard is placed on (the GPU's memory, or the host's)
    for claim, plans_ in plans.values():
        for p in plans_:
            need = memory_estimate(claim, p.params, p.shard_replicates(0))
            device = placement(claim, p.params, p.shard_size)
            if device not in budgets:
                budgets[device] = available_memory(device) // max(1, workers)
            budget = budgets[device]
            if need > budget:
                raise LemmacheckError(
                    f"{claim.source}: configuration {p.params} needs about {need / 2**30:.3g} GiB per shard "
                    f"({p.shard_replicates(0)} replicates) but {budget / 2**30:.3g} GiB are available per worker "
                    f"({max(1, workers)} worker(s)); nothing was run (fix: a smaller shard_size in "
                    f"[profiles.{profile}], fewer --workers, or a smaller configuration)")


def versions() -> dict[str, str]:
    from importlib.metadata import version  # not `import hypothesis`: a repro would pay ~1 s to import it

    from . import __version__

    out = {"lemmacheck": __version__, "python": platform.python_version(), "torch": torch.__version__,
           "numpy": np.__version__, "scipy": version("scipy"), "sympy": version("sympy"),
           "hypothesis": version("hypothesis")}
    commit = _source_commit()
    if commit:
        out["lemmacheck_commit"] = commit
    return out


def _source_commit() -> str | None:
    """The git commit of an editable checkout ("+dirty" with uncommitted changes), so a stored run names the
    exact estimator code; None for an installed wheel or without git."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                "src"], capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def device_description() -> str:
    device = current_device()
    if device != "cpu" and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))}), {platform.system()}"
    return f"{platform.machine()} cpu, {torch.get_num_threads()} threads, {platform.system()}"


def run_claims(claims: list[Claim], store: Store, *, profile: str = "quick", seed: int = 0, workers: int = 1,
               resume: bool = False, update: bool = False, rerun: Iterable[str] = (),
               paths: list[str] | None = None, executor: Executor | None = None,
               progress: Any = None) -> int:
    """Run every claim's planned shards that are not yet in the store; return the run id.

    `resume` continues the last unfinished run with the same seed, profile and paths (refusing a claim
    whose file changed since). `update` brings the latest such run, finished or not, up to date with the
    claim files: changed claims are re-run from scratch, new ones added, deleted ones dropped, untouched
    ones kept. Neither notices changes to estimator code: start a new run after changing one, or name the
    claims it affects in `rerun` (with `update`: their stored shards are dropped and drawn again).
    `progress` (a progress.RunProgress) hears of every planned wave and every stored shard."""
    from . import corpus

    paths = paths if paths is not None else sorted(c.id for c in claims)
    # hunted configurations stay within the profile's own sizes (corpus.affordable): the profile's plan bounds memory
    check_memory({c.id: (c, [] if c.mode == "infeasible" else plan(c, profile, seed, hunted=[])) for c in claims},
                 profile, workers)
    run_id = None
    if update:
        run_id = store.find_latest(seed, profile, paths)
        if run_id is not None:
            _update_run(store, run_id, claims, set(rerun))
    elif resume:
        # an unfinished run goes on; a finished one whose shards recorded errors (an estimator bug, since fixed)
        # redraws exactly those shards, from the same seeds
        run_id = store.find_resumable(seed, profile, paths)
        if run_id is None:
            run_id = store.find_with_errors(seed, profile, paths)
        if run_id is not None:
            store.forget_error_shards(run_id)
    if run_id is None:
        from .yardstick import describe, measure

        run_id = store.begin_run(seed, profile, versions(), device_description(), paths)
        # the box's speed beside its cost: the run's estimator-seconds compare across machines in these units
        store.note_run(run_id, "yardstick", describe(measure()))
        if current_device() != "cpu":  # each shard's row names its device; this says how they were placed
            store.note_run(run_id, "placement", f"{current_device()} from an estimated {device_min_cost():g} "
                           "multiply-adds a shard (shards.shard_cost), else cpu")
    # Every shard of a fixed-size configuration is queued at once; an early-stopping configuration draws one shard
    # at a time, in index order, the next queued first as soon as the last is stored, until its confidence
    # sequence decides. The decision reads only that configuration's stored prefix of shards, so it is the same
    # for any executor and any order of completion.
    # Hunts go to the pool first, beside the shards of claims that need none; a claim that hunts is planned (and
    # its plan recorded) when its hunt returns, and a resumed run reads that recorded plan instead of hunting again.
    planner = _Planner(store, run_id, claims, profile, seed, workers)
    shards: list[ShardTask] = []
    hunts: list[HuntTask] = []
    for claim in claims:
        examples = 0 if claim.mode == "infeasible" else corpus.hunt_budget(claim, profile)
        recorded = recorded_plan(store, run_id, claim) if examples else None
        if examples and recorded is None:
            hunts.append(HuntTask(str(claim.source), claim.snapshot, claim.id, examples, seed, profile))
        else:
            shards.extend(planner.admit(claim, [] if claim.mode == "infeasible"
                                       else recorded or plan(claim, profile, seed)))
    # A claim redrawn by --update or --resume gets the counterexamples that claims sharing its setting found in
    # this run's earlier hunts replayed on it, as a fresh run would give it (claims that keep their plans have them)
    hunting = {t.claim_id for t in hunts}
    for cid, counterexample in store.counterexamples(run_id).items():
        if cid in planner.by_id and cid not in hunting:
            shards.extend(planner.replay(planner.by_id[cid], counterexample))
    # hunts first (a claim's plan waits for its own), then the chains of sequential shards (each is a path of
    # dependent shards, the longest in the run), then the fixed-size shards that fill in around them
    chains = [t for t in shards if planner.is_chain(t)]
    queue = hunts + chains + [t for t in shards if not planner.is_chain(t)]
    own = executor is None
    pool = _Pool(executor or make_executor(workers), (lambda: make_executor(workers)) if own else None)
    try:
        if progress is not None:
            progress.planned(queue)
        _drain(pool, queue, store, run_id, progress, planner.hunt_returned, planner.follow)
        # a scaling claim's sweep is extended as soon as its own shards are stored (planner.follow), beside the
        # rest of the run; what a resumed run finds already drawn is extended here
        while more := planner.extend_sweeps():
            if progress is not None:
                progress.planned(more)
            _drain(pool, more, store, run_id, progress, planner.hunt_returned, planner.follow)
    except BaseException:
        if own:
            _stop(pool.ex)
        raise
    if own:
        pool.ex.shutdown(wait=True)
    planner.note_costs()
    store.finish_run(run_id)
    return run_id


# Sweep extension. A scaling fit whose slope falls along the sweep without its top deciding (verdicts._persistence:
# growth that persists, or a plateau) names the doubled values that would decide it (scaling["extend"]); the run then
# adds, per such parameter, the claim's top configurations at the doubled value, at most EXTEND_ROUNDS times, while
# the added configurations' cost stays within EXTEND_COST times the claim's own sweep (the profile's cost), never
# beyond the parameter's declared range, and within memory. Cost is the work proxy memory_estimate gives (replicates
# times the declared or floor memory of one draw), not measured seconds: the plan, and so every verdict, stays the same
# whatever the executor, worker count or machine load. A claim still undecided reads inconclusive, its reason naming
# the sweep that would decide. A configuration's seed comes from its parameters, so a resumed run extends the same way.
# Each round starts when the claim's own shards so far are all stored, while the rest of the run goes on: a round
# reads only that claim's shards, so the rounds, and the verdict, are those of a run that extended at its end.
EXTEND_ROUNDS = 4
EXTEND_COST = 2.0


class _Planner:
    """A run's plans as they grow: a claim is admitted (its plan recorded, its shards queued) at once, or when its
    hunt returns on the pool; a hunted counterexample's dataset is then replayed on every claim of the run that
    shares its setting (corpus.replay_on), as one more configuration of that claim, appended to its plan."""

    def __init__(self, store: Store, run_id: int, claims: list[Claim], profile: str, seed: int, workers: int = 1):
        self.store, self.run_id, self.profile, self.seed, self.workers = store, run_id, profile, seed, workers
        self.by_id = {c.id: c for c in claims}
        # early-stopping configurations by (claim id, index): drawn one shard at a time
        self.sequential: dict[tuple[str, int], tuple[Claim, int, ConfigPlan]] = {}
        self.plans: dict[str, list[ConfigPlan]] = {}  # admitted claims' plans
        self.waiting: dict[str, list[ConfigPlan]] = {}  # replays for claims whose own hunt has not returned yet
        self.hunt_cost: dict[str, float] = {}
        self.sweep_cost: dict[str, tuple[int, int]] = {}  # a scaling claim's own sweep: (cost, configurations)
        self.rounds: dict[str, int] = {}  # a scaling claim's rounds of sweep extension so far
        self.extended: set[str] = set()  # scaling claims whose extension is over (no round left, or none needed)
        self.queued: collections.Counter[str] = collections.Counter()  # a claim's shards queued, not yet stored

    def admit(self, claim: Claim, claim_plans: list[ConfigPlan], first: int = 0) -> list[ShardTask]:
        """Record the claim's plan; the shards of its configurations from index `first` on that are not stored:
        every missing shard of a fixed-size configuration, the next shard of an undecided early-stopping one."""
        claim_plans = claim_plans + [p for p in self.waiting.pop(claim.id, []) if p not in claim_plans]
        self.store.record_plan(self.run_id, claim.id, str(claim.source), claim.snapshot,
                               [(p.params, p.seed, p.replicates, p.shard_size, _early_column(p),
                                 pins_of(claim, p.definition)) for p in claim_plans])
        self.plans[claim.id] = claim_plans
        done = self.store.done_shards(self.run_id, claim.id)
        tasks = []
        for j, p in enumerate(claim_plans[first:], start=first):
            if p.early_stop:
                self.sequential[(claim.id, j)] = (claim, j, p)
                tasks.extend(_next_sequential(self.store, self.run_id, claim, j, p))
                continue
            todo = [k for k in range(p.n_shards) if (j, k) not in done]
            # a resumed configuration's missing shards run where its stored ones did, whatever the placement now
            device = self.store.config_device(self.run_id, claim.id, j) if todo and len(todo) < p.n_shards else None
            tasks.extend(_task(claim, j, p, k, device) for k in todo)
        self.queued[claim.id] += len(tasks)
        return tasks

    def extend_sweeps(self) -> list[ShardTask]:
        """One round of sweep extension (see EXTEND_ROUNDS) for every admitted scaling claim whose shards are all
        stored and whose extension is not over (follow starts the rounds of the others as their shards land)."""
        return [t for cid in list(self.plans) if not self.queued[cid] for t in self._extend(cid)]

    def _extend(self, cid: str) -> list[ShardTask]:
        """The claim's next round of sweep extension, its own shards being stored: [] (and its extension over)
        for a claim that is not scaling, is violated, is out of rounds, or whose sweep needs no extension."""
        claim = self.by_id[cid]
        if claim.mode != "scaling" or cid in self.extended:
            return []
        tasks = self._extension_round(claim, self.plans[cid])
        self.rounds[cid] = self.rounds.get(cid, 0) + 1
        if not tasks or self.rounds[cid] >= EXTEND_ROUNDS:
            self.extended.add(cid)
        return tasks

    def _extension_round(self, claim: Claim, plans: list[ConfigPlan]) -> list[ShardTask]:
        """The shards of the configurations one round adds to the claim's sweep (see EXTEND_ROUNDS)."""
        cid = claim.id
        res = evaluate(self.store, self.run_id, [claim])[0]
        extend = (res.scaling or {}).get("extend") or {}
        if not extend or res.verdict == "violated":
            return []
        work = [memory_estimate(claim, p.params, p.replicates) for p in plans]
        base, spent = self.sweep_cost.setdefault(cid, (sum(work), len(plans)))
        spent = sum(work[spent:])  # what earlier rounds added
        extra: list[ConfigPlan] = []
        for k, value in extend.items():
            p_def = claim.params.get(k)
            if p_def is None or (p_def.high is not None and value > p_def.high) or (
                    p_def.low is not None and value < p_def.low):
                continue  # never beyond the declared range
            own = [p for p in plans if not p.definition and k in p.params]
            if not own:
                continue
            toward_zero = value < max(float(p.params[k]) for p in own)
            edge = (min if toward_zero else max)(float(p.params[k]) for p in own)
            for p in own:
                if float(p.params[k]) != edge:
                    continue
                params = dict(p.params, **{k: int(value) if float(value).is_integer() else value})
                if any(q.params == params for q in plans + extra):
                    continue
                cost = memory_estimate(claim, params, p.replicates)
                if spent + cost > EXTEND_COST * base:
                    continue
                # within the memory of the device the configuration is placed on, as check_memory asks of the plan
                budget = available_memory(placement(claim, params, p.shard_size)) // max(1, self.workers)
                if memory_estimate(claim, params, min(p.shard_size, p.replicates)) > budget:
                    continue
                spent += cost
                extra.append(ConfigPlan(params, config_seed(self.seed, claim.id, params, self.profile),
                                        p.replicates, p.shard_size, False))
        return self.admit(claim, plans + extra, first=len(plans)) if extra else []

    def is_chain(self, task: ShardTask) -> bool:
        """Whether the shard is one of an early-stopping configuration's."""
        return (task.claim_id, task.config_index) in self.sequential

    def follow(self, task: ShardTask) -> list[ShardTask]:
        """What follows a stored shard: the next wave of the early-stopping configuration `task` drew for, while it
        is undecided; the next round of its claim's sweep extension, when this was the claim's last queued shard."""
        self.queued[task.claim_id] -= 1
        chain = self.sequential.get((task.claim_id, task.config_index))
        after = [] if chain is None else _next_sequential(self.store, self.run_id, *chain, stored=task)
        self.queued[task.claim_id] += len(after)
        if not self.queued[task.claim_id] and task.claim_id in self.plans:
            after += self._extend(task.claim_id)
        return after

    def hunt_returned(self, task: HuntTask, returned: tuple) -> list[ShardTask]:
        """run_hunt_task's (configs, probe cells, counterexample, seconds), with an error text after them when
        the hunt raised."""
        outcome, cells, counterexample, self.hunt_cost[task.claim_id], *error = returned
        claim = self.by_id[task.claim_id]
        tasks = self.admit(claim, plan(claim, self.profile, self.seed, hunted=outcome))
        self.store.record_probes(self.run_id, claim.id, cells, self.hunt_cost[task.claim_id],
                                 error[0] if error else None, counterexample)
        if counterexample is not None:
            tasks += self.replay(claim, counterexample)
        return tasks

    def replay(self, source: Claim, counterexample: dict) -> list[ShardTask]:
        from . import corpus

        ce, key = Probe.from_json(counterexample), corpus.setting(source.raw)
        tasks: list[ShardTask] = []
        for sib in self.by_id.values():
            extra = replay_plan(sib, source.id, key, ce, self.profile)
            if extra is None:
                continue
            if sib.id not in self.plans:
                self.waiting.setdefault(sib.id, []).append(extra)
            elif extra not in self.plans[sib.id]:
                tasks += self.admit(sib, self.plans[sib.id] + [extra], first=len(self.plans[sib.id]))
        return tasks

    def note_costs(self) -> None:
        if self.hunt_cost:
            top = sorted(self.hunt_cost.items(), key=lambda kv: -kv[1])[:5]
            self.store.note_run(self.run_id, f"hunts {now_utc()}", f"{len(self.hunt_cost)} claims hunted, "
                                f"{sum(self.hunt_cost.values()):.0f} CPU-seconds; most: "
                                + ", ".join(f"{cid} {sec:.0f} s" for cid, sec in top))


def replay_plan(sib: Claim, source_id: str, setting: str, ce: Probe, profile: str) -> ConfigPlan | None:
    """The configuration a run adds to `sib` to replay the counterexample `ce` that claim `source_id` (of
    `setting`, corpus.setting) hunted, or None where a run does not replay it: `sib` is the source, draws from
    another setting, or cannot take the dataset."""
    from . import corpus

    if sib.id == source_id or sib.check is None or not sib.inputs or corpus.setting(sib.raw) != setting:
        return None
    if sib.mode == "scaling":  # one pinned dataset would enter the slope fit as if it were a sweep level
        return None
    case = corpus.replay_on(sib, ce)
    if case is None or profile not in sib.profiles:
        return None
    prof = sib.profiles[profile]
    return ConfigPlan(case[0], case[1], prof.replicates, prof.shard_size, False, case[2])


def recorded_plan(store: Store, run_id: int, claim: Claim) -> list[ConfigPlan] | None:
    """The plan this run recorded for the claim (its hunted and corpus configurations re-pinned from the stored
    pins), or None when the run has none for the claim's current definition."""
    if store.stored_definition(run_id, claim.id) != claim.snapshot:
        return None
    rows = store.configs(run_id, claim.id)
    if not rows:
        return None
    return [ConfigPlan(r["params"], r["seed"], r["replicates"], r["shard_size"], r["early_stop"],
                       apply_pins(claim, r["pinned"]).snapshot if r["pinned"] else "", r["budget"]) for r in rows]


def _early_column(p: ConfigPlan) -> int:
    """The store's early_stop column: 0 fixed size, 1 early stop within `replicates`, else the budget (draws up
    to it while undecided), so a store needs no new column and one written before budgets reads as before."""
    if not p.early_stop:
        return 0
    return p.cap if p.cap > p.replicates else 1


def _update_run(store: Store, run_id: int, claims: list[Claim], rerun: set[str]) -> None:
    unknown = rerun - {c.id for c in claims}
    if unknown:
        raise LemmacheckError(f"--rerun names claims that are not being run: {sorted(unknown)}")
    current = {c.id: c.snapshot for c in claims}
    stored = store.claim_ids(run_id)
    redo = [cid for cid in stored if cid in rerun or current.get(cid) != store.stored_definition(run_id, cid)]
    redo += _holding_replays_of(store, run_id, [c for c in claims if c.id in stored], redo)
    added = [cid for cid in current if cid not in stored]
    commit = versions().get("lemmacheck_commit", "unknown commit")
    note = f"{commit}: redrew {len(redo)} claim(s) {', '.join(redo) or '-'}; added {len(added)}"
    store.reopen_run(run_id, (f"update {now_utc()}", note))
    for cid in redo:
        store.forget_claim(run_id, cid)  # deleted, changed or asked for: its shards describe another claim


def _holding_replays_of(store: Store, run_id: int, kept: list[Claim], redo: list[str]) -> list[str]:
    """The claims of `kept` (stored in the run) that hold a replay of a counterexample hunted by a claim in `redo`
    (and so on, for the claims this adds). A redrawn claim hunts again and may find another counterexample, or
    none; its siblings are redrawn with it, so that each holds the replays a fresh run would give it."""
    from . import corpus

    profile = store.run_info(run_id)["profile"]
    found = store.counterexamples(run_id)
    out: list[str] = []
    todo = [cid for cid in redo if cid in found]
    while todo:
        cid = todo.pop()
        setting = corpus.setting(json.loads(store.stored_definition(run_id, cid) or "{}"))
        ce = Probe.from_json(found[cid])
        for sib in kept:
            if sib.id in redo or sib.id in out:
                continue
            extra = replay_plan(sib, cid, setting, ce, profile)
            if extra is not None and any((c["params"], c["seed"]) == (extra.params, extra.seed)
                                         for c in store.configs(run_id, sib.id)):
                out.append(sib.id)
                if sib.id in found:
                    todo.append(sib.id)
    return out


def evaluate(store: Store, run_id: int, claims: Iterable[Claim]) -> list[ClaimResult]:
    """Recompute every verdict from the stored shards (nothing is taken from memory)."""
    results = []
    profile = store.run_info(run_id)["profile"]  # which profile's `expect` the verdicts answer to
    for claim in claims:
        if claim.mode == "infeasible":
            results.append(claim_result(claim, [], profile=profile))
            continue
        cfgs, samples = [], []
        for c in store.configs(run_id, claim.id):
            shards = sorted(store.shards(run_id, claim.id, c["index"]), key=lambda r: r.shard_index)
            if not shards:
                continue
            # An early-stopping configuration that stopped before its budget's shards was decided by the
            # anytime-valid sequence (or stopped where "holds" was out of the budget's reach); one that spent them
            # all reads the fixed-size interval at the full size.
            early = bool(c["early_stop"])
            planned = ConfigPlan(c["params"], c["seed"], c["replicates"], c["shard_size"], early,
                                 budget=c["budget"])
            cr, sample = _shards_result(claim, c["index"], c["params"], c["seed"], shards, c["shard_size"],
                                        planned.cap, early, anytime=early and len(shards) < planned.n_shards)
            cr.pinned = c.get("pinned")  # a hunted or corpus configuration's dataset/labels/search: repro needs it
            cfgs.append(cr)
            samples.append(sample)
        res = claim_result(claim, cfgs, samples, profile=profile)
        res.probes = store.probes(run_id, claim.id)  # where the hunt reached: coverage, never the verdict
        res.hunt_error = store.hunt_error(run_id, claim.id)
        if res.hunt_error:
            res.flags.append("hunt-error")  # its domain was searched less than planned: a bug to fix, then --resume
        results.append(res)
    return results


def repro_command(claim: Claim, cfg_params: dict[str, float], cfg_seed: int, replicates: int,
                  shard_size: int, pinned: dict[str, Any] | None = None) -> str:
    """The command line that replays a configuration exactly; `pinned` (a hunted or corpus configuration's
    dataset, labels and search, hunt.pins_of) travels with it as --pinned."""
    cmd = (f"lemmacheck repro {claim.id} --params '{json.dumps(cfg_params, sort_keys=True)}' "
           f"--seed {cfg_seed} --replicates {replicates} --shard-size {shard_size}")
    if pinned:
        cmd += f" --pinned '{json.dumps(pinned, sort_keys=True, separators=(',', ':'))}'"
    root = claim.source.parent.parent
    try:
        rel = root.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        rel = root
    return cmd if str(rel) == "claims" else f"{cmd} --claims {rel}"


def repro(claim: Claim, params: dict[str, float], cfg_seed: int, replicates: int, shard_size: int,
          store: Store | None = None, pinned: dict[str, Any] | None = None) -> ClaimResult:
    """Re-run one configuration exactly (same config seed, same shard split, and for a hunted or corpus
    configuration the same pinned dataset, labels and search) and evaluate it alone."""
    store = store or Store(":memory:")
    run_id = store.begin_run(cfg_seed, "repro", versions(), device_description(), [claim.id])
    p = ConfigPlan(params, cfg_seed, replicates, shard_size)
    definition = apply_pins(claim, pinned).snapshot
    store.record_plan(run_id, claim.id, str(claim.source), claim.snapshot,
                      [(p.params, p.seed, replicates, shard_size, False, pinned or None)])
    device = placement(claim, params, shard_size)  # where a run with the same --device ran it
    for k in range(p.n_shards):
        store.write_shard(run_id, execute_shard(ShardTask(str(claim.source), definition, claim.id, 0, k, params,
                                                          shard_seed(cfg_seed, k), p.shard_replicates(k), device)))
    store.finish_run(run_id)
    return evaluate(store, run_id, [claim])[0]
