"""Regression corpus: counterexamples a hunt confirmed (parameters, pinned dataset, labels, perturbation
search, configuration seed, replicates), saved beside their claim as claims/<paper>/corpus/<claim file>.json
and replayed first by every later run, deterministically: the same seed and shard give the same draws, so a
replay reproduces the recorded slack exactly (tests/test_corpus.py).

The runner plans each entry as a configuration of its own (`plans`), run on the claim pinned to the entry's
dataset and labels, before the profile's configurations.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .claims import Claim
from .hunt import Probe, pinned, probe
from .inputs import closed_under_negation

CORPUS_DIR = "corpus"


def corpus_path(claim: Claim) -> Path:
    return claim.source.parent / CORPUS_DIR / f"{claim.source.stem}.json"


def load(claim: Claim) -> list[Probe]:
    """The claim's saved counterexamples, oldest first ([] when it has none)."""
    path = corpus_path(claim)
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
        entries = raw["entries"]
        if raw.get("claim") != claim.id:
            raise ValueError(f"corpus belongs to claim {raw.get('claim')!r}, not {claim.id!r}")
        return [Probe.from_json(e) for e in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: malformed corpus ({exc}); delete it or fix its 'entries'") from None


def _key(p: Probe) -> str:
    return json.dumps([sorted(p.params.items()), p.points, p.labels, p.search, p.seed, p.replicates, p.coefficients,
                       p.functions], sort_keys=True)


def hunts(claim: Claim) -> list[dict[str, Any]]:
    """Summaries of the hunts recorded for the claim (how hard it was hunted), oldest first."""
    path = corpus_path(claim)
    return list(json.loads(path.read_text()).get("hunts", [])) if path.is_file() else []


def _write(claim: Claim, entries: list[Probe], hunt_log: list[dict[str, Any]]) -> Path:
    path = corpus_path(claim)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"claim": claim.id, "entries": [e.to_json() for e in entries], "hunts": hunt_log}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def save(claim: Claim, found: Probe) -> Path:
    """Add a counterexample to the claim's corpus (once: an identical entry is not repeated)."""
    entries = load(claim)
    if _key(found) not in {_key(e) for e in entries}:
        entries.append(found)
    return _write(claim, entries, hunts(claim))


def record_hunt(claim: Claim, res: Any, *, seed: int, replicates: int) -> Path:
    """Record how hard the claim was hunted (a hunt.HuntResult): cases, dataset families and label patterns
    tried, the search, the best slack and whether a counterexample was found; one record per (seed, examples)."""
    worst = res.worst()
    summary = {"seed": seed, "examples": res.examples, "replicates": replicates, **res.tried(),
               "data": res.data, "labels": res.labels,
               "best_slack": None if worst is None or worst.slack_min == float("inf") else worst.slack_min,
               "best_params": None if worst is None else worst.params,
               "found": res.counterexample is not None, "notes": list(res.notes),
               "persistence": getattr(res, "persistence", None)}
    log = [h for h in hunts(claim) if (h.get("seed"), h.get("examples")) != (seed, res.examples)] + [summary]
    entries = load(claim)
    if res.counterexample is not None and _key(res.counterexample) not in {_key(e) for e in entries}:
        entries.append(res.counterexample)
    return _write(claim, entries, log)


def replay(claim: Claim) -> list[tuple[Probe, Probe]]:
    """(saved, replayed now) for every entry: the replay uses the recorded seed and replicates."""
    out = []
    for e in load(claim):
        again = probe(claim, e.params, 0, e.replicates, points=e.points, labels=e.labels, search=e.search or None,
                      seed=e.seed, geometry=e.geometry, coefficients=e.coefficients, functions=e.functions,
                      quantified=e.quantified)
        again.found_by = e.found_by
        out.append((e, again))
    return out


def plans(claim: Claim) -> list[tuple[dict[str, float], int, int, str]]:
    """(params, configuration seed, replicates, claim definition) of every corpus entry, for the runner: the
    definition is the claim pinned to the entry's dataset, labels and search, run as one shard. Then the datasets
    of sibling claims' corpora (propagated)."""
    return [(dict(e.params), e.seed, e.replicates,
             pinned(claim, e.points, e.labels, e.search or None, e.coefficients, e.functions, e.quantified).snapshot)
            for e in load(claim)] + propagated(claim)


def setting(raw: dict[str, Any]) -> str:
    """What claims that can replay each other's datasets share: the network and the input generator (the inputs
    table, pinned datasets aside), from a claim file's raw table."""
    inputs = {k: v for k, v in (raw.get("inputs") or {}).items() if k not in ("points", "labels", "coefficients")}
    return json.dumps([raw.get("network"), inputs], sort_keys=True, default=str)


def _shares_setting(claim: Claim, sibling_file: Path) -> bool:
    """Whether the claim file `sibling_file` draws from the same network and input generator."""
    try:
        st = sibling_file.stat()
    except OSError:
        return False
    return _file_setting(str(sibling_file), st.st_mtime_ns, st.st_size) == setting(claim.raw)


@functools.lru_cache(maxsize=4096)
def _file_setting(path: str, mtime_ns: int, size: int) -> str | None:
    """setting() of a claim file, parsed once per version of the file (a run plans every claim of a folder
    against every sibling corpus: without the cache it parsed each sibling once per claim)."""
    import tomllib

    try:
        return setting(tomllib.loads(Path(path).read_text()))
    except (OSError, ValueError):
        return None


def propagated(claim: Claim) -> list[tuple[dict[str, float], int, int, str]]:
    """A refuting dataset saved for one claim is replayed on every claim of the folder that shares its network and
    inputs: the entry's dataset (and labels, coefficients) pinned on this claim, its parameters where this claim
    declares them (the others at their defaults), when the dataset's shape fits this claim's configuration; seeded
    by this claim's own configuration seed from the entry's."""
    folder = claim.source.parent / CORPUS_DIR
    if not folder.is_dir() or not claim.inputs or claim.check is None:
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        if path.stem == claim.source.stem or not _shares_setting(claim, claim.source.parent / f"{path.stem}.toml"):
            continue
        try:
            entries = [Probe.from_json(e) for e in json.loads(path.read_text())["entries"]]
        except (ValueError, KeyError, TypeError):
            continue  # a malformed sibling corpus is its own claim's error, reported there
        for e in entries:
            case = replay_on(claim, e)
            if case is not None:
                out.append((case[0], case[1], e.replicates, case[2]))
    return out


def replay_on(claim: Claim, e: Probe) -> tuple[dict[str, float], int, str] | None:
    """(params, seed, pinned definition) replaying another claim's refuting dataset `e` on `claim` (which shares
    its setting): its parameters where this claim declares them (the others at their defaults), when they lie in
    this claim's domain and the dataset's shape fits; seeded by this claim's own configuration seed from e's."""
    from .shards import config_seed
    from .strategies import dataset_shape

    if e.points is None or not e.points:
        return None
    params = {k: e.params.get(k, p.default) for k, p in claim.params.items()}
    if not all(p.contains(params[k]) for k, p in claim.params.items()):
        return None
    shape = dataset_shape(claim, params)
    if shape is None or (shape[0], shape[1]) != (len(e.points), len(e.points[0])):
        return None
    return (params, config_seed(e.seed, claim.id, params),
            pinned(claim, e.points, e.labels, None, e.coefficients, e.functions).snapshot)


# The full profile hunts every claim that does not say otherwise (`hunt = N` in [profiles.full] sets the examples,
# `hunt = 0` turns it off). The default budget scales with what the profile itself draws: examples =
# clamp(profile draws / 96, DEFAULT_HUNT_MIN, DEFAULT_HUNT_MAX) Hypothesis examples plus as many stratified cases,
# at most 3 x examples probes of HUNT_REPLICATES draws: about an eighth of the profile's own draws (at least
# 6 x 3 x 4 = 72, at most 20 x 3 x 4 = 240), over the declared domain with every integer parameter (widths,
# depths, n, d) capped at the largest value the profile's configurations run (sizes it already affords). One
# violating draw breaks an "always" claim; a probabilistic one is confirmed on more draws (hunt's `confirm`).
# Hunts run on the run's worker pool beside other claims' shards (HuntTask); a claim's shards are planned when its
# hunt returns, and the plan is recorded, so a resumed run does not hunt again.
DEFAULT_HUNT_MIN, DEFAULT_HUNT_MAX = 6, 20
HUNT_REPLICATES = 4


def hunt_budget(claim: Claim, profile: str) -> int:
    """Hypothesis examples of the profile's hunt: its `hunt` when the claim file sets one; in the full profile
    otherwise the default scaled to the profile's draws (see above); in the quick profile the cases of its sweep over
    degenerate datasets (hunt.quick_cells: 0 for a claim that draws none); else 0."""
    if profile not in claim.profiles:
        return 0
    prof = claim.profiles[profile]
    raw = ((claim.raw.get("profiles") or {}).get(profile)) or {}
    if profile == "quick" and "hunt" not in raw and claim.check is not None and claim.mode != "infeasible":
        from .hunt import quick_cells

        return len(quick_cells(claim))
    if "hunt" in raw or profile != "full" or claim.check is None:
        return prof.hunt
    draws = prof.replicates * max(1, len(prof.configs))
    return min(DEFAULT_HUNT_MAX, max(DEFAULT_HUNT_MIN, draws // 96))


def affordable(claim: Claim, profile: str) -> Claim:
    """The claim with every integer parameter's domain capped at the largest value the profile's configurations
    run (a hunt then costs what the profile already affords); continuous parameters keep their whole range."""
    import copy

    from .claims import parse_claim

    cfgs = claim.profiles[profile].configs if profile in claim.profiles else ()
    raw = copy.deepcopy(claim.raw)
    # every profile becomes this one's configurations (within the caps by definition), so the capped claim validates
    own = [dict(c) for c in cfgs]
    raw["profiles"] = {name: {"configs": own, "replicates": prof.replicates, "shard_size": prof.shard_size}
                       for name, prof in claim.profiles.items()} if own else raw.get("profiles", {})
    changed = False
    for k, p in claim.params.items():
        cap = max((c[k] for c in cfgs if k in c), default=None)
        if cap is None:
            continue
        spec = raw["params"][k]
        if p.values is not None and all(float(v).is_integer() for v in p.values):
            kept = [v for v in p.values if v <= cap]
            if kept and len(kept) < len(p.values):
                spec["values"], changed = kept, True
        elif p.integer and p.high is not None and p.high > cap >= (p.low or 0):
            spec["max"], changed = type(spec.get("max", cap))(cap), True
    return parse_claim(raw, claim.source) if changed else claim


def hunted(claim: Claim, examples: int, seed: int, replicates: int = HUNT_REPLICATES,
           profile: str | None = None) -> list[tuple[dict[str, float], int, str]]:
    """A profile's bounded hunt: (params, seed, pinned definition) of its counterexample, else of its
    worst case (smallest slack), for the runner to run at the profile's replicates. [] when nothing was probed.
    With `profile`, the hunt searches the affordable part of the domain (affordable)."""
    return hunt_outcome(claim, examples, seed, replicates, profile)[0]


def hunt_outcome(claim: Claim, examples: int, seed: int, replicates: int = HUNT_REPLICATES,
                 profile: str | None = None) -> tuple[list[tuple[dict[str, float], int, str]], list[dict[str, Any]],
                                                      dict[str, Any] | None]:
    """`hunted`'s configurations, the cells its probes reached (probe_cells), which the run records for the
    coverage table (a probe's few draws are evidence of reach, never part of a verdict), and its counterexample
    (Probe.to_json, None without one), which the run replays on the claims that share the setting (replay_on)."""
    from .hunt import hunt, quick_hunt, size

    if profile == "quick" and "hunt" not in ((claim.raw.get("profiles") or {}).get("quick") or {}):
        # the quick sweep over degenerate datasets: only a counterexample joins the plan (the quick budget)
        res = quick_hunt(claim, seed=seed, replicates=replicates, count=examples)
        ce = res.counterexample
        if ce is None:
            return [], probe_cells(res.probes), None
        return ([(dict(ce.params), ce.seed, pinned(claim, ce.points, ce.labels, ce.search or None).snapshot)],
                probe_cells(res.probes), ce.to_json())
    target = affordable(claim, profile) if profile else claim
    stratified = examples  # the even sweep weighs as much as Hypothesis's targeted search
    cfgs = claim.profiles[profile].configs if profile and profile in claim.profiles else ()
    res = hunt(target, examples=examples, replicates=replicates, seed=seed, max_probes=2 * examples + stratified,
               stratified=stratified, max_size=max((size(claim, c) for c in cfgs), default=None))
    if res.counterexample is None and profile != "quick":
        # what the quick profile's sweep over degenerate datasets finds, a fuller profile finds too
        swept = quick_hunt(claim, seed=seed, replicates=replicates)
        res.probes += swept.probes
        res.counterexample = swept.counterexample
    cells = probe_cells(res.probes)
    ce = res.counterexample.to_json() if res.counterexample is not None else None
    best = res.counterexample or res.worst()
    if best is None or (res.counterexample is None and claim.mode == "scaling"):
        return [], cells, ce  # a scaling claim's fit reads only its sweep; a hunt adds only a refutation of every constant
    return [(dict(best.params), best.seed,
             pinned(claim, best.points, best.labels, best.search or None, best.coefficients,
                    best.functions, best.quantified).snapshot)], cells, ce


def probe_cells(probes: list[Probe]) -> list[dict[str, Any]]:
    """Where each probe of a hunt landed: its parameters, dataset geometry and size, whether its dataset is closed
    under x -> -x, its label/coefficient family and function members, and whether it violated."""
    out = []
    for p in probes:
        cell: dict[str, Any] = {"params": dict(p.params), "violations": int(p.violations)}
        if p.points is not None:
            cell["n"] = len(p.points)
            cell["geometry"] = p.geometry or "hunted"
            cell["symmetric"] = closed_under_negation(p.points)
        if isinstance(p.coefficients, str):
            cell["coefficients"] = p.coefficients
        if p.functions:
            cell["functions"] = p.functions
        out.append(cell)
    return out


@dataclass(frozen=True)
class HuntTask:
    """A claim's bounded hunt as a unit of work for the run's executor (a worker process, like a shard)."""
    source: str  # claim file: the worker loads its folder's extension from beside it
    definition: str  # the claim's snapshot as recorded with the run
    claim_id: str
    examples: int
    seed: int
    profile: str


def run_hunt_task(task: HuntTask) -> tuple[list[tuple[dict[str, float], int, str]], list[dict[str, Any]],
                                           dict[str, Any] | None, float]:
    """`hunt_outcome` for a HuntTask, in whichever process runs it, and its CPU seconds; seeded, so every process
    returns the same plan."""
    import time

    from .claims import claim_from_snapshot
    from .shards import retain_freed_memory

    retain_freed_memory()
    t0 = time.process_time()
    claim = claim_from_snapshot(task.source, task.definition)
    configs, cells, ce = hunt_outcome(claim, task.examples, task.seed, profile=task.profile)
    return configs, cells, ce, time.process_time() - t0
