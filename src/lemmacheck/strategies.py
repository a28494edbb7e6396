"""Public Hypothesis strategies over what a claim quantifies over: parameters, datasets, labels.

Every dataset drawn keeps the assumptions of the `unit-sphere` generator (unit norm, the stated minimum
separation); it comes either from a structured geometry (inputs.GEOMETRIES, with a seed for its random
subspace) or from small integer coordinates normalised, so Hypothesis shrinks towards few points, low
dimension and simple coordinates. Labels are explicit +-1 patterns (every pattern reachable; for small n
`sampled_from` of all of them) or the patterns a label family gives on the drawn data.

    from lemmacheck import strategies as S
    @given(S.datasets(n=4, d=3, separation=0.1), S.labelings(4))
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import random
from dataclasses import dataclass, replace

import numpy as np
import torch
from hypothesis import strategies as st

from .claims import Claim, Param, config_values
from .expressions import Expr, ExpressionError, parse
from .functions import SHIFT_DECADES, member_key, members, shift_origin, shifted, shifts_value, smaller_shifts
from .inputs import (
    COEFFICIENTS,
    GEOMETRIES,
    LABELS,
    QUANTIFIED,
    all_patterns,
    check_premises,
    draw_labels,
    meets_premises,
    min_separation,
    unit_sphere,
)
from .shards import param_strategy

# Shrinking moves towards the front of a sampled_from: the simplest, most symmetric configurations first.
GEOMETRY_ORDER = ("cross-polytope", "polygon", "simplex", "lattice", "arc", "antipodal-pairs", "hypercube",
                  "duplicated-directions", "nearly-collinear", "nearly-orthogonal", "close-pair",
                  "symmetric-plus-close-pair", "clustered", "random")
ALL_PATTERNS_UP_TO = 8  # labels of n <= 8 points: sampled_from every pattern (2^(n-1) up to sign)


@dataclass
class Case:
    """One point of a hunt: parameters, and (when the claim quantifies over them) a pinned dataset, labels
    and the perturbation search used."""

    params: dict[str, float]
    points: list[list[float]] | None = None
    labels: list[int] | None = None
    geometry: str = ""  # where the dataset came from ("integer" for integer coordinates)
    data_seed: int | None = None  # a stratified case's dataset seed: the same geometry redrawn at another n
    label_family: str = ""  # a stratified case's label family (or "pattern")
    coefficients: str | None = None  # the coefficient family pinned (inputs.COEFFICIENTS), when one is searched
    functions: dict[str, dict] | None = None  # role -> the member of its function class pinned, when searched
    quantified: dict[str, str] | None = None  # role (weights, perturbation) -> the family its search starts from

    def key(self) -> str:
        import json
        fns = sorted((r, member_key(m)) for r, m in self.functions.items()) if self.functions else None
        qs = sorted(self.quantified.items()) if self.quantified else None
        return json.dumps([sorted(self.params.items()), self.points, self.labels, self.coefficients, fns]
                          + ([qs] if qs else []))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _separated(X: torch.Tensor, separation: float) -> bool:
    return separation <= 0 or X.shape[0] < 2 or float(min_separation(X[None])[0]) >= separation * (1 - 1e-12)


# The strategies below are built once per shape and reused (lru_cache): a hunt draws hundreds of cases, and a
# strategy built afresh for each is validated afresh by Hypothesis; the same strategy draws the same choices.


def parameters(claim: Claim) -> st.SearchStrategy[dict[str, float]]:
    """Configurations from the claim's declared parameter domain."""
    return _parameters(tuple(claim.params.items()))


@functools.lru_cache(maxsize=1024)
def _parameters(params: tuple[tuple[str, Param], ...]) -> st.SearchStrategy[dict[str, float]]:
    return st.fixed_dictionaries({k: param_strategy(p) for k, p in params})


@functools.lru_cache(maxsize=256)
def _placed(name: str, seed: int, n: int, d: int, separation: float) -> torch.Tensor | None:
    """unit_sphere's one dataset of geometry `name` from `seed` (None where it cannot place one), computed once: the
    shrinker and the replay of a hunt's examples draw the same (geometry, seed) again and again."""
    try:
        return unit_sphere(_gen(seed), 1, n=n, d=d, separation=separation, geometry=name)[0]
    except Exception:  # noqa: BLE001 - an iid family that cannot be redrawn apart in a crowded space
        return None


@functools.lru_cache(maxsize=1024)
def structured_datasets(n: int, d: int, separation: float = 0.0,
                        geometries: tuple[str, ...] = GEOMETRY_ORDER) -> st.SearchStrategy[tuple[str, torch.Tensor]]:
    """(geometry, (n, d) dataset) from the structured families that admit (n, d, separation)."""
    names = [g for g in geometries if GEOMETRIES[g].admits(n, d, separation) is None]
    if not names:
        return st.nothing()

    def build(args: tuple[str, int]) -> tuple[str, torch.Tensor] | None:
        name, seed = args
        X = _placed(name, seed, n, d, separation)
        return None if X is None else (name, X.clone())  # a copy: the cached dataset stays as drawn

    return st.tuples(st.sampled_from(names), st.integers(0, 2**32 - 1)).map(build).filter(lambda r: r is not None)


# Integer coordinates are the simple points of low dimensions; Hypothesis cannot draw a list of d >> 1000 entries
# (a hunt on d = 16384 inputs stopped with InvalidArgument), and a random sign vector there is no simpler than iid.
INTEGER_MAX_D = 64


@functools.lru_cache(maxsize=1024)
def integer_datasets(n: int, d: int, separation: float = 0.0, bound: int = 3) -> st.SearchStrategy[torch.Tensor]:
    """n normalised integer vectors of Z^d with entries in [-bound, bound], pairwise >= separation apart."""
    row = st.lists(st.integers(-bound, bound), min_size=d, max_size=d).filter(any)

    def build(rows: list[list[int]]) -> torch.Tensor:
        X = torch.tensor(rows, dtype=torch.float64)
        return X / X.norm(dim=-1, keepdim=True)

    return st.lists(row, min_size=n, max_size=n).map(build).filter(lambda X: _separated(X, separation))


@functools.lru_cache(maxsize=1024)
def datasets(n: int, d: int, separation: float = 0.0,
             premises: tuple[str, ...] = ()) -> st.SearchStrategy[tuple[str, torch.Tensor]]:
    """(origin, dataset) with unit-norm rows, pairwise >= separation apart, meeting the declared premises
    (inputs.PREMISES): one family drawn uniformly among the structured geometries that admit (n, d, separation)
    and integer coordinates (so each is tried about equally often; shrinking moves towards the simplest,
    GEOMETRY_ORDER's front)."""
    names = [g for g in GEOMETRY_ORDER if GEOMETRIES[g].admits(n, d, separation) is None]
    names += ["integer"] if d <= INTEGER_MAX_D else []

    def family(name: str) -> st.SearchStrategy[tuple[str, torch.Tensor]]:
        if name == "integer":
            return integer_datasets(n, d, separation).map(lambda X: ("integer", X))
        return structured_datasets(n, d, separation, (name,))

    out = st.sampled_from(names).flatmap(family)
    if premises:
        out = out.filter(lambda r: bool(meets_premises(r[1][None], premises)[0]))
    return out


def labelings(n: int, X: torch.Tensor | None = None) -> st.SearchStrategy[list[int]]:
    """Label patterns in {-1, +1}^n: all of them for n <= ALL_PATTERNS_UP_TO (first label +1, the rest
    enumerated), else any list; plus the patterns of the label families on X (half-space, by-cluster)."""
    explicit, fams = _labelings(n)
    if X is None:
        return explicit

    def family(args: tuple[str, int]) -> list[int]:
        name, seed = args
        y = draw_labels(_gen(seed), name, 1, n, X[None])
        return [int(v) for v in y[0].tolist()]

    return st.one_of(explicit, fams.map(family))


@functools.lru_cache(maxsize=64)
def _labelings(n: int) -> tuple[st.SearchStrategy[list[int]], st.SearchStrategy[tuple[str, int]]]:
    """labelings' explicit patterns and its (label family, seed) pairs; a drawn pattern is the cached strategy's own
    list: copy it before changing it."""
    if n <= ALL_PATTERNS_UP_TO:
        explicit = st.sampled_from(all_patterns(n))
    else:
        explicit = st.lists(st.sampled_from((1, -1)), min_size=n, max_size=n)
    return explicit, st.tuples(st.sampled_from([f for f in LABELS if f != "rademacher"]), st.integers(0, 2**32 - 1))


def dataset_shape(claim: Claim, params: dict[str, float]) -> tuple[int, int, float] | None:
    """(n, d, separation) of the claim's `unit-sphere` datasets at a configuration; None when the claim does not
    draw its data from that generator (nothing to search over)."""
    spec = claim.inputs
    if not spec or spec.get("kind") != "unit-sphere":
        return None
    vals = config_values(claim, params)

    def ev(key: str, default: float | None) -> float | None:
        if key in spec:
            return _parsed(str(spec[key]), frozenset(vals)).evaluate(vals)
        return params.get(key, default)

    n, d, sep = ev("n", 1), ev("d", None), ev("separation", 0.0)
    if n is None or d is None:
        return None
    return round(n), round(d), float(sep or 0.0)


@functools.lru_cache(maxsize=1024)
def _parsed(text: str, names: frozenset[str]) -> Expr:
    """An input expression parsed once (dataset_shape reads it at every case a hunt draws)."""
    return parse(text, names)


def quantified_families(role: str, claim: Claim | None = None) -> list[str]:
    """The families a searched weight or perturbation ball starts from (inputs.QUANTIFIED), its default first;
    "given" (a network's own initialisation) is the run's default and not a stratum; "zero" (in every ball) is one of
    the sweep's strata (`claim` given) unless the claim declares the role in inputs.nonzero, never a Hypothesis
    choice (an ascent cannot leave a start where the gradient vanishes)."""
    zero = claim is not None and role not in ((claim.inputs or {}).get("nonzero") or ())
    return [f for f in QUANTIFIED[role] if f != "given" and (f != "zero" or zero)]


def function_members(claim: Claim, role: str) -> list[dict]:
    """The members of the claim's function class `role` (inputs.<role>) as pins, the default first."""
    return [m.to_json() for m in members(claim.inputs[role])]


SHIFT_LEVELS = ("0", "+max", "-max", "+log", "-log")  # a sweep's value shifts: none, |s| = 1e3, log-uniform


def value_shifts() -> st.SearchStrategy[float]:
    """A value shift phi + s for a class that admits every one (functions.shifts_value): none, else a magnitude
    log-uniform over SHIFT_DECADES of either sign (shrinking: towards none, then towards |s| = 1)."""
    lo, hi = SHIFT_DECADES
    return st.one_of(st.just(0.0), st.builds(lambda sign, u: sign * 10.0 ** u, st.sampled_from([1.0, -1.0]),
                                             st.floats(lo, hi)))


def cases(claim: Claim, *, data: bool = True, labels: bool = True, coefficients: bool = False,
          functions: tuple[str, ...] = (), quantified: tuple[str, ...] = ()) -> st.SearchStrategy[Case]:
    """Parameters, then (data) a dataset of the configuration's shape and (labels) a labelling of it, a
    member of each searched function class (`functions`: roles; shrinking moves towards the class's default) and
    the family each searched weight/perturbation ball starts from (`quantified`: roles; towards the default)."""

    premises = check_premises(claim.inputs.get("premises", ())) if claim.inputs else ()

    @st.composite
    def build(draw) -> Case:
        params = dict(sorted(draw(parameters(claim)).items()))
        case = Case(params)
        shape = dataset_shape(claim, params) if (data or labels) else None
        X = None
        if data and shape is not None:
            n, d, sep = shape
            case.geometry, X = draw(datasets(n, d, sep, premises))
            case.points = X.tolist()
        n_labels = shape[0] if shape is not None else round(params["n"]) if "n" in params else None
        if labels and n_labels:
            case.labels = list(draw(labelings(n_labels, X)))
        if coefficients:
            # zero is a stratum of the sweep (strata), not a Hypothesis choice: the shrinker's families stay as they were
            case.coefficients = draw(st.sampled_from([c for c in COEFFICIENTS if c != "zero"]))
        if functions:
            case.functions = {r: draw(st.sampled_from(function_members(claim, r))) for r in functions}
            for r in functions:  # phi(0) free: the value shift is a searched parameter too
                if shifts_value(claim.inputs[r]):
                    case.functions[r] = shifted(case.functions[r], draw(value_shifts()))
        if quantified:
            case.quantified = {r: draw(st.sampled_from(quantified_families(r))) for r in quantified}
        return case

    return build()


def _snap(v: float, tol: float = 1e-9) -> float:
    """v snapped to the nearest p/q or sqrt(p/q) (q <= 12) within tol: cos/sin of the usual angles."""
    for q in range(1, 13):
        for cand in (round(v * q) / q, math.copysign(math.sqrt(round(v * v * q) / q), v)):
            if abs(v - cand) <= tol:
                return cand
    return v


def simplest_form(points: list[list[float]], separation: float = 0.0) -> list[list[float]] | None:
    """The dataset rotated to its principal axes (the first coordinates carry it), signs fixed and coordinates
    that are within 1e-9 of simple values (0, +-1/2, +-sqrt(1/2), ...) snapped to them, rows renormalised; a
    rotation of the sphere, so unit norm and separation are kept (checked). None when nothing got simpler."""
    X = torch.tensor(points, dtype=torch.float64)
    _, _, Vh = torch.linalg.svd(X, full_matrices=True)
    Y = X @ Vh.T
    first = Y.abs().argmax(0)
    sign = torch.sign(Y[first, torch.arange(Y.shape[1])])
    Y = Y * torch.where(sign != 0, sign, torch.ones_like(sign))
    Y = torch.tensor([[_snap(v) for v in row] for row in Y.tolist()], dtype=torch.float64)
    Y = Y / Y.norm(dim=-1, keepdim=True)
    if not _separated(Y, separation):
        return None
    out = Y.tolist()
    return None if out == points else out


# ------------------------------------------------------------------------------------------ stratified cases

EDGE_VALUES = 8  # an integer range with at most this many values is covered whole (small n: odd and even)
# Sets closed under x -> -x and families built from the data's symmetries: tried first among equally used cells.
DEGENERATE = frozenset({"cross-polytope", "hypercube", "antipodal-pairs", "polygon", "symmetric-plus-close-pair",
                        "parity", "null-vector", "ones", "zero", "aligned"})


def domain_values(p: Param) -> list[float]:
    """The values of one parameter a stratified sweep covers: every declared value; every integer of a short
    range (EDGE_VALUES), else its three smallest, its two largest and its (geometric, for log) middle; a
    continuous range's ends and middle."""
    if p.values is not None:
        return list(p.values)
    assert p.low is not None and p.high is not None
    lo, hi = p.low, p.high
    mid = math.sqrt(lo * hi) if p.log and lo > 0 else (lo + hi) / 2
    if p.integer:
        lo_i, hi_i = int(lo), int(hi)
        if hi_i - lo_i + 1 <= EDGE_VALUES:
            return list(range(lo_i, hi_i + 1))
        return sorted({lo_i, lo_i + 1, lo_i + 2, round(mid), hi_i - 1, hi_i})
    return [lo, mid, hi] if lo != hi else [lo]


def parity_params(claim: Claim) -> set[str]:
    """The integer parameters a statement's truth may turn on by parity: those inside a ceil or floor, or in the
    exponent of a negative base ((-1)^m), in the bound, the stated regime, the probability or an input expression."""
    import sympy

    exprs = []
    chk = claim.check
    if chk is not None:
        exprs += [e for e in (chk.bound, chk.requires, chk.prob_expr) if e is not None]
    names = set(claim.params)
    for v in (claim.inputs or {}).values():
        if isinstance(v, str):
            with contextlib.suppress(ExpressionError, SyntaxError, TypeError):  # a family name, not an expression
                exprs.append(parse(v, names))
    found: set[str] = set()
    for e in exprs:
        for node in sympy.preorder_traversal(e.sym):
            inside = None
            if isinstance(node, (sympy.floor, sympy.ceiling)):
                inside = node.args[0]
            elif isinstance(node, sympy.Pow) and node.base.is_number and bool(node.base < 0):
                inside = node.exp
            if inside is not None:
                found |= {str(s) for s in inside.free_symbols}
    return {k for k in found if k in claim.params and claim.params[k].integer}


def parity_values(p: Param, values: list[float]) -> list[float]:
    """`values` with each one's neighbour of the other parity inside the range (v + 1, else v - 1): an odd and an
    even value at every scale the sweep covers (the middle of a long range included). A declared list is kept."""
    if p.values is not None or p.low is None or p.high is None:
        return values
    out = set(values)
    for v in values:
        w = v + 1 if v + 1 <= p.high else v - 1
        if w >= p.low:
            out.add(w)
    return sorted(out)


SMALL_N = 10  # the smallest dataset sizes a sweep covers whole: odd and even, n = 2 mod 4 and 0 mod 4 alike


def dataset_sizes(p: Param) -> list[float]:
    """The values of a dataset-size parameter n a stratified sweep covers: domain_values plus every n among the
    SMALL_N smallest, where degenerate sets live (a regular polygon with alternating signs needs n = 2 mod 4, a set
    closed under x -> -x an even n)."""
    values = domain_values(p)
    if p.values is None and p.integer and p.low is not None and p.high is not None:
        values = sorted(set(values) | set(range(int(p.low), min(int(p.high), int(p.low) + SMALL_N - 1) + 1)))
    return values


def sweep_values(claim: Claim) -> dict[str, list[float]]:
    """Each parameter's domain_values, odd and even at every scale for a parameter the statement's truth may turn on
    by parity (parity_params)."""
    parity = parity_params(claim)
    return {k: parity_values(p, domain_values(p)) if k in parity else domain_values(p) for k, p in claim.params.items()}


def strata(claim: Claim, count: int, seed: int, *, data: bool = True, labels: bool = True,
           domain: dict[str, list[float]] | None = None, coefficients: bool = False,
           functions: tuple[str, ...] = (), quantified: tuple[str, ...] = ()) -> list[Case]:
    """`count` cases spread evenly over every stratum of the claim's domain: each parameter's domain_values,
    the dataset families (every structured geometry and integer coordinates), the label families and the members
    of each searched function class (`functions`: roles; every member once when `count` allows), chosen
    greedily so that every value of every dimension is used about equally often (no first-listed bias), the ties
    broken by a seeded shuffle. Cells whose geometry cannot place the configuration's dataset, or whose dataset
    breaks a declared premise, are skipped (not counted)."""
    rng = random.Random(seed)
    dims: dict[str, list] = {k: list(v) for k, v in (domain or sweep_values(claim)).items()}
    default = {k: p.default for k, p in claim.params.items()}
    has_data = data and dataset_shape(claim, default) is not None
    if has_data:
        dims["__geometry"] = [*GEOMETRY_ORDER, "integer"]
        n_name = (claim.inputs or {}).get("n")
        if domain is None and isinstance(n_name, str) and n_name in claim.params:
            dims[n_name] = dataset_sizes(claim.params[n_name])
    if labels:
        dims["__labels"] = ["pattern", *[f for f in LABELS if f != "rademacher"]]
    if coefficients:
        # the zero vector wherever the statement admits it (not declared in inputs.nonzero)
        nonzero = (claim.inputs or {}).get("nonzero", ())
        dims["__coefficients"] = [c for c in COEFFICIENTS if c != "zero" or "coefficients" not in nonzero]
    for role in functions:
        dims[f"__function:{role}"] = [member_key(m) for m in function_members(claim, role)]
        if shifts_value(claim.inputs[role]):  # none, the range's ends, and one log-uniform draw of each sign
            dims[f"__shift:{role}"] = list(SHIFT_LEVELS)
    for role in quantified:
        dims[f"__quantified:{role}"] = quantified_families(role, claim)
    premises = check_premises(claim.inputs.get("premises", ())) if claim.inputs else ()
    names, vals = list(dims), list(dims.values())
    fdims = {k for k in names if k.startswith("__function:")}
    total = math.prod(len(v) for v in vals)
    # each cell as its position in every dimension's values (the dict of values only for the cells picked)
    if total <= 4096:
        pool = list(itertools.product(*(range(len(v)) for v in vals)))
    else:
        pool = [tuple(rng.choice(range(len(v))) for v in vals) for _ in range(4096)]  # rng.choice(v)'s draws
    rng.shuffle(pool)
    at = np.array(pool, dtype=np.int64).reshape(len(pool), len(names))
    # each cell as one column index per dimension (values compared by repr, so 1 and 1.0 stay one value), so that
    # a pick is a vectorised argmin over the pool instead of a Python scan of every cell
    codes = {k: {r: j for j, r in enumerate(dict.fromkeys(map(repr, v)))} for k, v in dims.items()}
    index = np.zeros_like(at)
    for j, (k, v) in enumerate(dims.items()):
        index[:, j] = np.array([codes[k][repr(x)] for x in v], dtype=np.int64)[at[:, j]]
    used = np.zeros((len(names), max((len(c) for c in codes.values()), default=0)), dtype=np.int64)  # [dim, value]
    fcols = [j for j, k in enumerate(names) if k in fdims]
    # a shifted member only once every member of its class was probed as listed (the catalogue is swept first)
    shifts = [(names.index(f"__function:{k[8:]}"), j) for j, k in enumerate(names) if k.startswith("__shift:")]
    # the ends of continuous ranges (a step size at its largest); integer ones (n, widths) are balanced only
    ends = {k: (min(v), max(v)) for k, v in dims.items()
            if not k.startswith("__") and not all(float(x).is_integer() for x in v)}
    special = ("__geometry", "__labels", "__coefficients", "__quantified:weights", "__quantified:perturbation")

    def degenerate(k: str, x: object) -> int:
        """Whether the value x of dimension k is degenerate (a symmetric geometry, a data-built family, a range end):
        among equally used cells those with more such values come first, where statements break."""
        return int(x in DEGENERATE) if k in special else int(x in ends[k]) if k in ends else 0

    deg = np.zeros(len(pool), dtype=np.int64)
    for j, (k, v) in enumerate(dims.items()):
        deg += np.array([degenerate(k, x) for x in v], dtype=np.int64)[at[:, j]]
    alive = np.ones(len(pool), dtype=bool)
    # lexicographic key (unprobed function members first, least-used values, most degenerate) as one integer: the
    # first minimum is the cell the plain scan `min(pool, key=...)` picks
    span = (len(pool) + 1) * max(1, len(names))
    out: list[Case] = []
    while alive.any() and len(out) < count:
        uses = used[np.arange(len(names)), index]  # (cell, dim): how often each of the cell's values was used
        key = (uses[:, fcols].sum(axis=1) * span + uses.sum(axis=1)) * (len(names) + 4) + (len(names) + 3 - deg)
        for fj, sj in shifts:
            if (used[fj, :len(codes[names[fj]])] == 0).any():
                key = np.where(index[:, sj] != 0, key + int(key.max()) + 1, key)
        best = int(np.argmin(np.where(alive, key, np.iinfo(np.int64).max)))
        alive[best] = False
        cell = dict(zip(names, (v[i] for v, i in zip(vals, pool[best], strict=True)), strict=True))
        case = _stratum_case(claim, cell, rng, labels, premises)
        if case is None:
            continue
        used[np.arange(len(names)), index[best]] += 1
        out.append(case)
    return out


def _stratum_case(claim: Claim, cell: dict, rng: random.Random, labels: bool,
                  premises: tuple[str, ...]) -> Case | None:
    params = dict(sorted((k, v) for k, v in cell.items() if not k.startswith("__")))
    case = Case(params, coefficients=cell.get("__coefficients"))
    fns = {k.split(":", 1)[1]: json.loads(v) for k, v in cell.items() if k.startswith("__function:")}
    for role, level in ((k.split(":", 1)[1], v) for k, v in cell.items() if k.startswith("__shift:")):
        lo, hi = SHIFT_DECADES
        size = 10.0 ** (hi if level[1:] == "max" else rng.uniform(lo, hi)) if level != "0" else 0.0
        fns[role] = shifted(fns[role], -size if level[0] == "-" else size)
    case.functions = fns or None
    qs = {k.split(":", 1)[1]: v for k, v in cell.items() if k.startswith("__quantified:")}
    case.quantified = qs or None
    geometry = cell.get("__geometry")
    X = None
    if geometry is not None:
        case.data_seed = rng.getrandbits(32)
        X = dataset_at(claim, params, geometry, case.data_seed, premises)
        if X is None:
            return None
        case.geometry, case.points = geometry, X.tolist()
    shape = dataset_shape(claim, params) if (geometry is not None or labels) else None
    n = shape[0] if shape is not None else round(params["n"]) if "n" in params else None
    if labels and n:
        fam = cell.get("__labels", "pattern")
        case.label_family = fam
        if fam == "pattern" or (LABELS[fam].needs_data and X is None):
            case.labels = [1] + [rng.choice((1, -1)) for _ in range(n - 1)]
        else:
            gen = _gen(rng.getrandbits(32))
            y = draw_labels(gen, fam, 1, n, None if X is None else X[None])
            case.labels = [int(v) for v in y[0].tolist()]
    return case


def dataset_at(claim: Claim, params: dict[str, float], geometry: str, seed: int,
               premises: tuple[str, ...] = ()) -> torch.Tensor | None:
    """The (n, d) dataset of `geometry` (a GEOMETRIES name or "integer") for the configuration, from `seed`;
    None when the geometry cannot place it or it breaks a premise."""
    shape = dataset_shape(claim, params)
    if shape is None:
        return None
    n, d, sep = shape
    if geometry == "integer":
        if d > INTEGER_MAX_D:
            return None
        g = random.Random(seed)
        for _ in range(50):
            X = torch.tensor([[g.randint(-3, 3) for _ in range(d)] for _ in range(n)], dtype=torch.float64)
            if bool((X.abs().sum(-1) > 0).all()):
                X = X / X.norm(dim=-1, keepdim=True)
                if _separated(X, sep) and (not premises or bool(meets_premises(X[None], premises)[0])):
                    return X
        return None
    if GEOMETRIES[geometry].admits(n, d, sep) is not None:
        return None
    try:
        X = unit_sphere(_gen(seed), 1, n=n, d=d, separation=sep, geometry=geometry)[0]
    except Exception:  # noqa: BLE001 - an iid family that cannot be redrawn apart in a crowded space
        return None
    if premises and not bool(meets_premises(X[None], premises)[0]):
        return None
    return X


def smaller_cases(claim: Claim, case: Case, domain: dict[str, list[float]] | None = None) -> list[Case]:
    """Simpler neighbours of a stratified case, simplest first: each parameter moved to a smaller value of its
    stratum (the dataset redrawn in the same geometry from the same seed at the new shape), then the labels
    flipped to +1 one at a time, then each function class's earlier members (towards its default; a member shifted
    in value by a searched shift: the member itself, then round shifts of smaller size). A hunt keeps the first that
    still fails and repeats (a greedy shrink)."""
    out: list[Case] = []
    doms = domain or sweep_values(claim)
    premises = check_premises(claim.inputs.get("premises", ())) if claim.inputs else ()
    for k, vals in doms.items():
        for v in sorted(x for x in vals if x < case.params.get(k, -math.inf)):
            params = dict(sorted({**case.params, k: v}.items()))
            new = replace(case, params=params)
            if case.points is not None and case.data_seed is not None:
                X = dataset_at(claim, params, case.geometry, case.data_seed, premises)
                if X is None:
                    continue
                new.points = X.tolist()
            elif case.points is not None:
                continue
            if case.labels is not None:
                shape = dataset_shape(claim, params)
                n = shape[0] if shape is not None else round(params.get("n", len(case.labels)))
                if n != len(case.labels):
                    new.labels = case.labels[:n] if n < len(case.labels) else None
                    if new.labels is None:
                        continue
            out.append(new)
    if case.labels is not None:
        for i, v in enumerate(case.labels):
            if v < 0:
                out.append(replace(case, labels=[*case.labels[:i], 1, *case.labels[i + 1:]]))
    for role, member in (case.functions or {}).items():  # an earlier (simpler) member of the class
        listed = function_members(claim, role)
        keys = [member_key(m) for m in listed]
        here = keys.index(member_key(member)) if member_key(member) in keys else len(keys)
        origin = shift_origin(claim.inputs[role], member) if here == len(keys) else None
        if origin is not None:  # a searched value shift: its member unshifted, then round shifts of smaller size
            out += [replace(case, functions={**case.functions, role: shifted(origin[0], s)})
                    for s in [0.0, *smaller_shifts(origin[1])]]
        else:
            out += [replace(case, functions={**case.functions, role: m}) for m in listed[:here]]
    return out
