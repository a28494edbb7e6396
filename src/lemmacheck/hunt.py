"""Hunting for violations: Hypothesis searches what a claim quantifies over (its parameters, and, when its
quantity draws them, the dataset, the labels, the coefficients, the members of a function class and the
perturbation direction), targeted at the smallest slack,
and shrinks a confirmed violation to a minimal example (fewest points, lowest dimension, simplest
coordinates, smallest parameters).

A case with a dataset or labels is run as the claim *pinned* to them (`inputs.points`, `inputs.labels`: every
replicate uses that dataset; networks and perturbations are still drawn), through the runner's own shard code,
so a counterexample replays exactly with its seed and is saved to the claim's corpus (corpus.py).
Determinism: Hypothesis runs from a fixed seed without a database, and every probe's Monte-Carlo draws come
from the seeded generator of its configuration (runner.config_seed), the same for every dataset tried (common
random numbers). A probabilistic claim is broken at a case only when its violation rate there is significant
(the lower end of the Clopper-Pearson interval at the run's alpha above delta, on `confirm` replicates), never
for k > 0. Scaling claims have hidden constants: a case breaks one only where a draw refutes every constant (a
value <= 0 against a positive lower bound, as the run reads it); otherwise their hunts report slack.
A hunt that finds nothing proves nothing: it is a search, not a certificate.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .claims import Claim, claim_from_snapshot
from .context import DTYPES, Context
from .functions import ROLES as FUNCTION_ROLES
from .functions import members, parse_member, shifts_value
from .inputs import QUANTIFIED, all_patterns
from .registry import QUANTITIES
from .search import move_points
from .shards import ShardTask, config_seed, execute_shard, reproducible_hypothesis, shard_seed
from .verdicts import config_result, violation_trend

# Perturbation searches a hunt escalates to: the linearised worst direction and projected ascent from it.
ESCALATE = {"random": "adversarial", "gradient": "adversarial"}
EXHAUSTIVE_LABELS_UP_TO = 6  # every labelling of the worst case's points is tried when n <= this
# Hypothesis stops once the probe budget is spent and the outcome can no longer change (hunt's Spent); tests turn
# it off to check that the outcome is the one of the whole search
STOP_WHEN_SPENT = True


@dataclass
class Probe:
    params: dict[str, float]
    seed: int
    slack_min: float
    violations: int
    in_regime: bool
    replicates: int = 0
    points: list[list[float]] | None = None
    labels: list[int] | None = None
    geometry: str = ""
    search: str = ""
    significant: bool = False  # a violation by the claim's own standard (see module doc)
    violation_ci: tuple[float, float] = (0.0, 1.0)
    found_by: str = "hypothesis"
    coefficients: str | list[float] | None = None  # a pinned coefficient family or vector (ctx.coefficients)
    functions: dict[str, dict[str, Any]] | None = None  # a pinned member per function role (ctx.function)
    quantified: dict[str, str] | None = None  # the family a searched weight/perturbation ball starts from

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["violation_ci"] = list(self.violation_ci)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Probe:
        d = dict(d)
        d["violation_ci"] = tuple(d.get("violation_ci", (0.0, 1.0)))
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class HuntResult:
    claim_id: str
    examples: int
    probes: list[Probe] = field(default_factory=list)
    counterexample: Probe | None = None  # the shrunk, minimal confirmed violation
    data: bool = False
    labels: bool = False
    search: str = ""
    notes: list[str] = field(default_factory=list)
    persistence: dict[str, Any] | None = None  # an out-of-regime counterexample along the regime path (persistence)

    def worst(self, in_regime_only: bool = False) -> Probe | None:
        cands = [p for p in self.probes if p.in_regime or not in_regime_only]
        return min(cands, key=lambda p: p.slack_min) if cands else None

    def tried(self) -> dict[str, Any]:
        """How hard it was hunted: cases probed, dataset families, label patterns and function members tried."""
        fns = Counter(f"{r}: {parse_member(m).name}" for p in self.probes for r, m in (p.functions or {}).items())
        return {"cases": len(self.probes),
                "geometries": dict(Counter(p.geometry for p in self.probes if p.geometry)),
                **({"functions": dict(fns)} if fns else {}),
                "label_patterns": len({json.dumps(p.labels) for p in self.probes if p.labels is not None}),
                "search": self.search}


def pinned(claim: Claim, points: list[list[float]] | None = None, labels: list[int] | str | None = None,
           search: str | None = None, coefficients: str | list[float] | None = None,
           functions: dict[str, Any] | None = None, quantified: dict[str, str] | None = None) -> Claim:
    """The claim with its dataset and/or labels fixed (every replicate uses them), its functions pinned to one
    member of their class (`functions`: role -> member, functions.parse_member's form), the family its weights or
    perturbation start from (`quantified`: role -> family) and its perturbation search replaced: an ordinary claim
    the runner executes and a corpus entry replays. The search is seeded, so the weights it reaches replay exactly."""
    if (points is None and labels is None and not search and coefficients is None and not functions
            and not quantified):
        return claim
    raw = dict(claim.raw)  # only these top-level copies change: the rest is read, by json.dumps
    inputs = raw["inputs"] = dict(raw.get("inputs", {}))
    if points is not None:
        inputs["points"] = points
    if labels is not None:
        inputs["labels"] = labels if isinstance(labels, str) else "".join("+" if v > 0 else "-" for v in labels)
    if coefficients is not None:
        inputs["coefficients"] = coefficients
    for role, member in (functions or {}).items():
        if role not in FUNCTION_ROLES or not isinstance(inputs.get(role), dict):
            raise ValueError(f"pinned: the claim declares no function class '{role}' (inputs.{role})")
        inputs[role] = {**inputs[role], "member": member}
    for role, family in (quantified or {}).items():
        if role not in QUANTIFIED or not isinstance(inputs.get(role), dict):
            raise ValueError(f"pinned: the claim declares no searched {role} (inputs.{role})")
        inputs[role] = {**inputs[role], "family": family}
    if search:
        raw["check"] = {**raw.get("check", {}), "search": search}
    # parsed from its snapshot, as the shard that runs it parses it (claim_from_snapshot caches the parse): once
    text = json.dumps(raw, sort_keys=True, default=str)
    run = claim_from_snapshot(str(claim.source), text)
    run.__dict__.setdefault("snapshot", text)  # what Claim.snapshot would encode again: json.dumps(json.loads(text))
    return run


def pins_of(claim: Claim, definition: str) -> dict[str, Any] | None:
    """What a pinned definition (a hunted or corpus configuration's claim, `pinned`) fixes beyond the claim itself:
    {"points": rows, "labels": "+-..", "search": name}, or None for the claim's own definition. Stored with the
    configuration, it makes the reproduce line replay the dataset exactly (`lemmacheck repro --pinned`)."""
    if not definition or definition == claim.snapshot:
        return None
    raw = json.loads(definition)
    inputs, own = raw.get("inputs", {}) or {}, claim.raw.get("inputs", {}) or {}
    out = {k: inputs[k] for k in ("points", "labels", "coefficients") if k in inputs and inputs[k] != own.get(k)}
    for role in FUNCTION_ROLES:  # a pinned member of a function class: {"activation": {"base": ..., ...}}
        member = (inputs.get(role) or {}).get("member") if isinstance(inputs.get(role), dict) else None
        if member is not None and member != ((own.get(role) or {}).get("member")):
            out[role] = member
    for role in QUANTIFIED:  # the family a weight/perturbation search starts from: {"weights": {"family": ...}}
        fam = (inputs.get(role) or {}).get("family") if isinstance(inputs.get(role), dict) else None
        if fam is not None and fam != ((own.get(role) or {}).get("family")):
            out[role] = {"family": fam}
    search = (raw.get("check") or {}).get("search")
    if search and search != (claim.raw.get("check") or {}).get("search"):
        out["search"] = search
    return out or None


def apply_pins(claim: Claim, pins: dict[str, Any] | None) -> Claim:
    """The claim pinned as `pins` (pins_of's form) says; unknown keys are refused by name."""
    if not pins:
        return claim
    extra = set(pins) - {"points", "labels", "search", "coefficients", *FUNCTION_ROLES, *QUANTIFIED}
    if extra:
        raise ValueError(f"pinned: unknown field(s) {sorted(extra)}; expected points, labels, search, coefficients, "
                         + ", ".join((*FUNCTION_ROLES, *QUANTIFIED)))
    bad = [r for r in QUANTIFIED if r in pins and not (isinstance(pins[r], dict) and set(pins[r]) == {"family"})]
    if bad:
        raise ValueError(f"pinned: {bad[0]} must be {{\"family\": name}}")
    return pinned(claim, pins.get("points"), pins.get("labels"), pins.get("search"), pins.get("coefficients"),
                  {r: pins[r] for r in FUNCTION_ROLES if r in pins},
                  {r: pins[r]["family"] for r in QUANTIFIED if r in pins})


def probe(claim: Claim, params: dict[str, float], run_seed: int, replicates: int, *,
          points: list[list[float]] | None = None, labels: list[int] | None = None, search: str | None = None,
          seed: int | None = None, geometry: str = "", coefficients: str | list[float] | None = None,
          functions: dict[str, Any] | None = None, quantified: dict[str, str] | None = None) -> Probe:
    """Run one case through the runner's shard code: seed = the configuration's (run seed, claim, params)
    seed unless given (a corpus replay passes the recorded one)."""
    chk = claim.check
    assert chk is not None
    run = pinned(claim, points, labels, search, coefficients, functions, quantified)
    seed = config_seed(run_seed, claim.id, params) if seed is None else seed
    rec = execute_shard(ShardTask(str(claim.source), run.snapshot, claim.id, 0, 0, params, shard_seed(seed, 0),
                                  replicates))
    if rec.error:
        raise RuntimeError(rec.error)
    # Judged exactly as the run judges a configuration (verdicts.config_result): the same rounding tolerance (the
    # shard's dtype and the estimator's extras["scale"]), the same reading of misses and, for a scaling claim, of
    # draws <= 0 against a positive lower bound (violations for every hidden constant).
    n = len(rec.value)

    def extra(name: str) -> np.ndarray | None:
        return np.asarray(rec.extras[name], dtype=float) if name in rec.extras else None

    cr = config_result(claim, 0, dict(params), seed, rec.value, rec.valid, np.zeros(n, int), np.arange(n),
                       rec.method, rec.seconds, [], dtype=rec.dtype, scale=extra("scale"),
                       reached=extra("reached"), budget=extra("budget"), planned=replicates)
    k = cr.nonpositive if claim.mode == "scaling" else cr.violations
    sl = cr.slack_min if cr.slack_min is not None and not math.isnan(cr.slack_min) else math.inf
    return Probe(dict(params), seed, float(sl), int(k), bool(cr.in_regime), replicates, points, labels, geometry,
                 search or "", cr.verdict == "violated", tuple(cr.violation_ci), coefficients=coefficients,
                 functions=dict(functions) if functions else None, quantified=dict(quantified) if quantified else None)


def _context(claim: Claim, params: dict[str, float], replicates: int, gen: torch.Generator,
             dataset: torch.Tensor | None = None) -> Context:
    chk = claim.check
    assert chk is not None
    return Context(claim.id, dict(params), replicates, gen, DTYPES[chk.dtype], torch.device("cpu"), dict(chk.args),
                   dict(claim.inputs), chk.search, claim.network, dataset=dataset)


class _Recorder(Context):
    """A Context that notes what the quantity draws (does it use datasets? labels?)."""

    drew: set[str]

    def inputs(self) -> torch.Tensor:
        self.drew.add("inputs")
        return super().inputs()

    def labels(self, n: int, X: torch.Tensor | None = None) -> torch.Tensor:
        self.drew.add("labels")
        return super().labels(n, X)

    def coefficients(self, n: int, X: torch.Tensor | None = None) -> torch.Tensor:
        self.drew.add("coefficients")
        return super().coefficients(n, X)

    def function(self, role: str = "activation") -> Any:
        self.drew.add(f"function:{role}")
        return super().function(role)

    def weights(self, layers: list[Any], layout: str = "in-out") -> list[torch.Tensor]:
        if "weights" in self.inputs_spec:
            self.drew.add("weights")
        return super().weights(layers, layout)

    def perturbation(self, Ws: list[torch.Tensor]) -> list[torch.Tensor]:
        self.drew.add("perturbation")
        return super().perturbation(Ws)


def draws(claim: Claim, params: dict[str, float]) -> set[str]:
    """What the claim's quantity draws at a configuration ("inputs", "labels", "coefficients", "function:<role>",
    "weights", "perturbation"),
    by one small dry run."""
    chk = claim.check
    assert chk is not None
    ctx = _context(claim, params, 2, torch.Generator().manual_seed(0))
    rec = _Recorder(**{f: getattr(ctx, f) for f in ctx.__dataclass_fields__ if not f.startswith("_")})
    rec.drew = set()
    # The dry run only asks what is drawn; estimator errors surface in the hunt itself.
    with contextlib.suppress(Exception):
        QUANTITIES.get(chk.quantity).obj(rec)
    return rec.drew


def adversary(claim: Claim, start: Probe, run_seed: int, *, steps: int = 30, lr: float = 0.1,
              separation: float = 0.0) -> Probe | None:
    """The gradient adversary: move the points of `start`'s dataset on the sphere (projected back onto the
    separation constraint) to shrink the slack, for a quantity differentiable in its inputs; the Monte-Carlo
    draws are the same at every step (common random numbers). None when the quantity is not differentiable."""
    chk = claim.check
    assert chk is not None and start.points is not None
    sign = 1.0 if chk.relation in ("<=", "<") else -1.0
    sseed = shard_seed(start.seed, 0)
    R = start.replicates or 8
    q = QUANTITIES.get(chk.quantity).obj
    run = pinned(claim, None, start.labels, start.search or None, start.coefficients, start.functions,
                 start.quantified)

    def objective(X: torch.Tensor) -> torch.Tensor:
        gen = torch.Generator().manual_seed(sseed & 0xFFFFFFFFFFFF)
        obs = q(_context(run, start.params, R, gen, dataset=X))  # ctx.inputs() keeps X's autograd graph
        return sign * obs.value.mean()

    X0 = torch.tensor(start.points, dtype=torch.float64)
    try:
        with torch.enable_grad():
            test = objective(X0.clone().requires_grad_(True))
        if not test.requires_grad:
            return None
        X, _ = move_points(objective, X0, separation, steps=steps, lr=lr)
    except (RuntimeError, ValueError):
        return None
    try:  # a moved dataset that breaks a declared premise is refused by the estimator: no result
        p = probe(claim, start.params, run_seed, R, points=X.tolist(), labels=start.labels,
                  search=start.search or None, seed=start.seed, geometry=f"gradient-moved {start.geometry}",
                  coefficients=start.coefficients, functions=start.functions, quantified=start.quantified)
    except RuntimeError:
        return None
    p.found_by = "gradient adversary"
    return p


def hunt(claim: Claim, *, examples: int = 50, replicates: int = 8, seed: int = 0, in_regime_only: bool = False,
         data: bool | None = None, labels: bool | None = None, search: str | None = None, confirm: int = 400,
         adversary_steps: int = 0, max_probes: int | None = None, progress: Any = None,
         stratified: int | None = None, domain: dict[str, list[float]] | None = None,
         max_size: float | None = None) -> HuntResult:
    """Search the claim's parameters and (data/labels: None = whatever its quantity draws) datasets and labels;
    a perturbation-searching claim is hunted with the stronger search (ESCALATE) unless `search` is given.
    Probabilistic claims confirm a case with k > 0 on `confirm` replicates before calling it broken.
    When Hypothesis finds nothing, `stratified` more cases (default examples // 2) sweep the domain evenly
    (strategies.strata: every parameter's edge values, every dataset family, every label family, each used about
    equally often, so no first-listed geometry or smallest n dominates), and a violation they find is shrunk
    greedily (strategies.smaller_cases). `domain` replaces the per-parameter values of that sweep. `max_size`
    skips cases whose integer parameters' product exceeds it (each parameter within its range can still combine
    into a case far dearer than any the claim's profile runs).
    max_probes bounds the work (default 4 x examples + stratified): past it every new case is refused, and
    Hypothesis is stopped as soon as no case it could still try can change the outcome (Spent).
    `progress` (progress.Progress) advances once per case probed."""
    from hypothesis import HealthCheck, Phase, assume, given, settings, target
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable

    from .strategies import SHIFT_LEVELS, cases, dataset_shape, simplest_form, smaller_cases, strata

    reproducible_hypothesis()  # the seed alone decides what is probed, not the modules this process has imported
    chk = claim.check
    if chk is None:
        raise ValueError(f"{claim.id} is infeasible: nothing to hunt")
    default = {k: p.default for k, p in claim.params.items()}
    drawn = draws(claim, default) if (data is None or labels is None) else set()
    has_shape = dataset_shape(claim, default) is not None
    data = ("inputs" in drawn and has_shape) if data is None else data
    labels = ("labels" in drawn) if labels is None else labels
    coefficients = "coefficients" in drawn and "coefficients" not in (claim.inputs or {})
    # function classes the quantity draws (ctx.function) and the claim does not pin: every admitted member is a case
    functions = tuple(r for r in FUNCTION_ROLES if f"function:{r}" in drawn and "member" not in claim.inputs[r])
    # weight / perturbation balls the quantity draws and the claim does not pin: every starting family is a case
    quantified = tuple(r for r in QUANTIFIED if r in drawn and "family" not in claim.inputs[r])
    search = search if search is not None else ESCALATE.get(chk.search, "")
    result = HuntResult(claim.id, examples, data=bool(data), labels=bool(labels), search=search or chk.search)
    seen: dict[str, Probe] = {}
    stratified = examples // 2 if stratified is None else stratified
    # every admitted member of a searched function class gets probed: the sweep has at least one case per member,
    # and one per value shift level (strategies.SHIFT_LEVELS) where the class leaves phi(0) free
    extra = max([len(members(claim.inputs[r])) + (len(SHIFT_LEVELS) - 1) * shifts_value(claim.inputs[r])
                 - stratified for r in functions] + [0]) if stratified else 0
    stratified += extra
    budget = (max_probes if max_probes is not None else 4 * examples + stratified) + extra

    class Found(AssertionError):
        pass

    class Spent(BaseException):
        """Ends Hypothesis's search once the probe budget is spent and at most one case broke the claim: a case it
        could still try is probed already (the same Probe again) or refused, so neither the probes nor the
        counterexample (that one case, which the shrinker can only return to, or none) can change. Not an
        Exception: Hypothesis does not take it for a failing example, and leaves the engine at once."""

    def breaks(p: Probe | None) -> bool:
        return p is not None and p.significant and (p.in_regime or not in_regime_only)

    def run_case(case) -> Probe | None:
        key = case.key()
        if key not in seen:
            if len(seen) >= budget or (max_size is not None and size(claim, case.params) > max_size):
                return None
            if vacuous(claim, case.params):
                return None  # the statement says nothing there: never a counterexample nor a worst case
            try:
                p = probe(claim, case.params, seed, replicates, points=case.points, labels=case.labels,
                          search=search or None, geometry=case.geometry, coefficients=case.coefficients,
                          functions=case.functions, quantified=case.quantified)
                if claim.mode == "probabilistic" and p.violations and not p.significant and confirm > replicates:
                    p = probe(claim, case.params, seed, confirm, points=case.points, labels=case.labels,
                              search=search or None, geometry=case.geometry, coefficients=case.coefficients,
                              functions=case.functions, quantified=case.quantified)
            except RuntimeError:
                p = None  # configurations the estimator cannot handle (e.g. odd width) are skipped
            seen[key] = p  # type: ignore[assignment]
            if p is not None:
                result.probes.append(p)
            if progress is not None:  # the CLI's progress.Progress: one step per case probed
                progress.advance()
        return seen[key]

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.target, Phase.shrink])
    @given(cases(claim, data=bool(data), labels=bool(labels), coefficients=coefficients, functions=functions,
                 quantified=quantified))
    def search_cases(case) -> None:
        if STOP_WHEN_SPENT and len(seen) >= budget and sum(map(breaks, seen.values())) <= 1:
            raise Spent  # past the budget Hypothesis shrinks or generates hundreds more cases, each refused
        p = run_case(case)
        if p is None:
            assume(False)
            return
        if in_regime_only:
            assume(p.in_regime)
        target(-math.log(max(p.slack_min, 1e-300)) if math.isfinite(p.slack_min) else -1e9, label="-log slack")
        if p.significant and (p.in_regime or not in_regime_only):
            result.counterexample = p  # the last one raised is Hypothesis's shrunk example, replayed last
            raise Found(f"violation at {case.params}")

    try:
        search_cases()
    except (Found, Unsatisfiable, Spent):
        pass

    if result.counterexample is None and stratified:
        for case in strata(claim, stratified, seed, data=bool(data), labels=bool(labels), domain=domain,
                           coefficients=coefficients, functions=functions, quantified=quantified):
            p = run_case(case)
            if breaks(p):
                assert p is not None
                p.found_by = "stratified sweep"
                # greedy shrink: the first simpler neighbour that still fails, until none does
                for _ in range(50):
                    for smaller in smaller_cases(claim, case, domain):
                        q = run_case(smaller)
                        if breaks(q):
                            assert q is not None
                            q.found_by = "stratified sweep"
                            case, p = smaller, q
                            break
                    else:
                        break
                result.counterexample = p
                result.notes.append(f"found by the stratified sweep, shrunk greedily to {p.params}")
                break
    ce = result.counterexample
    if ce is not None and ce.points is not None:
        # Hypothesis shrinks the choice of geometry and seed, not the coordinates of a rotated configuration:
        # the same dataset in its principal axes, simple values snapped, is the minimal example when it still fails.
        shape = dataset_shape(claim, ce.params)
        simple = simplest_form(ce.points, shape[2] if shape else 0.0)
        try:  # None when the simplified dataset breaks a declared premise (the estimator refuses it)
            p = None if simple is None else probe(claim, ce.params, seed, ce.replicates, points=simple,
                                                  labels=ce.labels, search=ce.search or None,
                                                  geometry=f"{ce.geometry} (principal axes)",
                                                  coefficients=ce.coefficients, functions=ce.functions, quantified=ce.quantified)
        except RuntimeError:
            p = None
        if p is not None and p.significant:
            p.found_by = ce.found_by
            result.probes.append(p)
            result.counterexample = p
    if result.counterexample is None and labels:
        _exhaust_labels(claim, result, seed, replicates, search or None, in_regime_only)
    if result.counterexample is None and data and adversary_steps:
        worst = result.worst(in_regime_only)
        sep = dataset_shape(claim, worst.params)[2] if worst and worst.points else 0.0
        moved = adversary(claim, worst, seed, steps=adversary_steps, separation=sep) if worst and worst.points else None
        if moved is None:
            result.notes.append("gradient adversary: quantity not differentiable in its inputs (not run)")
        else:
            result.probes.append(moved)
            if moved.significant:
                result.counterexample = moved
    ce = result.counterexample
    if ce is not None and not ce.in_regime:
        result.persistence = persistence(claim, ce, seed)
        if result.persistence is not None:
            per = result.persistence
            what = {"persists": "persists to the widest level: evidence that it does not depend on the width "
                                "condition",
                    "fades": "fades (a significant decrease): a finite-width effect",
                    "undecided": "stops before the widest level, too rarely to call it a decrease (undecided)",
                    "no violation": "does not recur on replay", "unknown": "could not be run"}
            result.notes.append(f"out of regime; along {per['param']} = "
                                f"{[r['level'] for r in per['levels']]} the violation {what[per['trend']]}")
    return result


def vacuous(claim: Claim, params: dict[str, float]) -> bool:
    """A configuration where the statement says nothing: stated probability 1 - delta <= 0, or a bound that is not
    a finite number (log(1/delta) at delta >= 1, a division by zero). A hunt never probes one: its "violation"
    (slack 0, rate [1, 1]) would be the hunt's worst case and headline the report while refuting nothing."""
    chk = claim.check
    assert chk is not None
    try:
        bound = chk.bound.evaluate({**chk.regime_constants, **params} if chk.constants else params)
        return claim.delta(params) >= 1.0 or not math.isfinite(bound)
    except (ArithmeticError, ValueError, TypeError):
        return True  # no bound to compare with at all


def size(claim: Claim, params: dict[str, float]) -> float:
    """The product of a configuration's integer parameters (widths, depths, n, d): the scale of its cost."""
    return math.prod(float(params.get(k, p.default) or 1) for k, p in claim.params.items() if p.integer)


def persistence(claim: Claim, found: Probe, run_seed: int, *, param: str | None = None,
                levels: list[float] | None = None) -> dict[str, Any] | None:
    """Whether a violation found where a width condition fails persists as the width grows: the counterexample
    (its dataset, labels and coefficients pinned) replayed with `param` at each of `levels` (default: the claim's
    regime path: the full profile's, else check.regime_path), judged by the same rule as a run's regime path
    (verdicts.violation_trend): "fades" (a significant decrease: a finite-width effect), "persists" (evidence that
    the failure does not depend on the width condition; the findings rules decide the rest), "undecided" or
    "no violation". None without a path."""
    if param is None or levels is None:
        prof = claim.profiles.get("full")
        path = prof.regime_path if prof is not None else None  # the profile's own path, else the check's
        if path is None:
            return None
        param, levels = path.param, list(path.levels)
    rows = []
    for v in levels:
        if param not in claim.params or not claim.params[param].contains(v):
            continue
        try:
            p = probe(claim, {**found.params, param: v}, run_seed, found.replicates or 8, points=found.points,
                      labels=found.labels, search=found.search or None, coefficients=found.coefficients,
                      functions=found.functions, quantified=found.quantified)
        except RuntimeError as exc:
            rows.append({"level": v, "error": str(exc)[:200]})
            continue
        rows.append({"level": v, "violations": p.violations, "replicates": p.replicates, "slack_min": p.slack_min,
                     "in_regime": p.in_regime, "violated": p.significant})
    seen = [r for r in rows if "violated" in r]
    if not seen:
        return {"param": param, "levels": rows, "trend": "unknown"}
    trend = violation_trend([r["violations"] for r in seen], [r["replicates"] for r in seen],
                            [r["level"] for r in seen])
    return {"param": param, "levels": rows, "trend": trend["trend"], "p_decrease": trend["p_decrease"]}


def _exhaust_labels(claim: Claim, result: HuntResult, seed: int, replicates: int, search: str | None,
                    in_regime_only: bool) -> None:
    """Every labelling (up to a global sign) of the worst case found, when it has at most
    EXHAUSTIVE_LABELS_UP_TO points."""
    worst = result.worst(in_regime_only)
    if worst is None or worst.labels is None or len(worst.labels) > EXHAUSTIVE_LABELS_UP_TO:
        return
    for pattern in all_patterns(len(worst.labels)):
        for y in (pattern, [-v for v in pattern]):
            try:
                p = probe(claim, worst.params, seed, replicates, points=worst.points, labels=y, search=search,
                          geometry=worst.geometry, coefficients=worst.coefficients, functions=worst.functions,
                          quantified=worst.quantified)
            except RuntimeError:
                continue
            p.found_by = "every labelling"
            result.probes.append(p)
            if p.significant and (p.in_regime or not in_regime_only):
                result.counterexample = p
                return


# ------------------------------------------------------------------ the quick profile: where statements break
# The quick profile (what pytest runs) hunts "for every dataset" claims over a few degenerate datasets: regular
# polygons, sets closed under x -> -x (antipodal pairs, cross-polytopes, hypercubes), duplicated directions, each
# still meeting the stated separation and premises, at small even and odd n, labels alternating along the set (where
# the claim's labels are the default Rademacher family, which hunts search). The cells, most degenerate first; the
# claim's first quick configuration gives every other parameter.
QUICK_CELLS = (("polygon", 6), ("antipodal-pairs", 4), ("duplicated-directions", 3), ("symmetric-plus-close-pair", 5),
               ("cross-polytope", 4), ("polygon", 4), ("hypercube", 4), ("polygon", 5))
QUICK_CASES = 4  # probes per claim at most (each a few draws), and at most half the quick profile's own draws
QUICK_REPLICATES = 4  # draws per probe (corpus.HUNT_REPLICATES)
QUICK_MAX_N = 8  # a quick hunt's datasets reach this n even when the quick grid stops below it (cheap at small n)


def quick_cells(claim: Claim, count: int = QUICK_CASES, seed: int = 0) -> list[Any]:
    """The quick hunt's cases (strategies.Case): QUICK_CELLS in order, those the claim's datasets admit (its n a
    free parameter within its domain and at most QUICK_MAX_N, else the configuration's own n; the geometry places
    it at the configuration's d and separation; the declared premises hold), at most `count`."""
    import random as _random

    from .inputs import GEOMETRIES, check_premises
    from .strategies import Case, dataset_at, dataset_shape

    prof = claim.profiles.get("quick")
    if claim.check is None or prof is None or not prof.configs or (claim.inputs or {}).get("kind") != "unit-sphere":
        return []
    count = min(count, max(1, prof.replicates * len(prof.configs) // (2 * QUICK_REPLICATES)))
    base = dict(prof.configs[0])
    premises = check_premises(claim.inputs.get("premises", ())) if claim.inputs else ()
    n_name = (claim.inputs or {}).get("n")
    rng = _random.Random(seed)
    out: list[Any] = []
    for geometry, n in QUICK_CELLS:
        params = dict(base)
        if isinstance(n_name, str) and n_name in claim.params:
            p = claim.params[n_name]
            if n > QUICK_MAX_N or not p.contains(n):
                continue
            params[n_name] = n
        shape = dataset_shape(claim, params)
        if shape is None or shape[0] < 2 or GEOMETRIES[geometry].admits(*shape) is not None:
            continue
        X = dataset_at(claim, params, geometry, rng.getrandbits(32), premises)
        if X is None:
            continue
        case = Case(dict(sorted(params.items())), X.tolist(), geometry=geometry)
        key = case.key()
        if all(c.key() != key for c in out):
            out.append(case)
        if len(out) == count:
            break
    return out


def quick_hunt(claim: Claim, *, seed: int = 0, replicates: int = 4, count: int = QUICK_CASES,
               confirm: int | None = None) -> HuntResult:
    """The quick profile's hunt: quick_cells probed in order (labels alternating where the quantity draws them),
    stopping at the first in-regime case that breaks the claim by its own standard (a probabilistic one confirmed
    on `confirm` draws, default the quick profile's replicates). No Hypothesis, no shrinking: the cells are small
    already."""
    from .strategies import dataset_shape

    result = HuntResult(claim.id, 0, search=claim.check.search if claim.check else "")
    cells = quick_cells(claim, count, seed)
    if not cells:
        return result
    # no dry run (draws): a claim with unit-sphere inputs draws them, and labels pinned where the quantity draws
    # none are never read
    result.data = True
    result.labels = (claim.inputs or {}).get("labels", "rademacher") == "rademacher"
    confirm = confirm if confirm is not None else claim.profiles["quick"].replicates
    for case in cells:  # the claim's own search: escalating it (hunt.ESCALATE) is the full profile's cost
        n = dataset_shape(claim, case.params)[0]
        labels = [1 if i % 2 == 0 else -1 for i in range(n)] if result.labels else None
        kw: dict[str, Any] = {"points": case.points, "labels": labels, "geometry": case.geometry}
        try:
            p = probe(claim, case.params, seed, replicates, **kw)
            if claim.mode == "probabilistic" and p.violations and not p.significant and confirm > replicates:
                p = probe(claim, case.params, seed, confirm, **kw)
        except RuntimeError:
            continue
        p.found_by = "quick sweep"
        result.probes.append(p)
        if p.significant and p.in_regime:
            result.counterexample = p
            break
    return result
