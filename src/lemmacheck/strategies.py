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

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from .claims import Claim, config_values
from .expressions import parse
from .inputs import (
    GEOMETRIES,
    LABELS,
    all_patterns,
    check_premises,
    draw_labels,
    meets_premises,
    min_separation,
    unit_sphere,
)
from .shards import param_strategy

# Shrinking moves towards the front of a sampled_from: the simplest, most symmetric configurations first.
GEOMETRY_ORDER = ("cross-polytope", "polygon", "simplex", "lattice", "arc", "antipodal-pairs",
                  "duplicated-directions", "nearly-collinear", "nearly-orthogonal", "close-pair", "clustered",
                  "random")
ALL_PATTERNS_UP_TO = 8  # labels of n <= 8 points: sampled_from every pattern (2^(n-1) up to sign)


@dataclass
class Case:
    """One point of a hunt: parameters, and (when the claim quantifies over them) a pinned dataset, labels
    and the perturbation search used."""

    params: dict[str, float]
    points: list[list[float]] | None = None
    labels: list[int] | None = None
    geometry: str = ""  # where the dataset came from ("integer" for integer coordinates)

    def key(self) -> str:
        import json
        return json.dumps([sorted(self.params.items()), self.points, self.labels])


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _separated(X: torch.Tensor, separation: float) -> bool:
    return separation <= 0 or X.shape[0] < 2 or float(min_separation(X[None])[0]) >= separation * (1 - 1e-12)


def parameters(claim: Claim) -> st.SearchStrategy[dict[str, float]]:
    """Configurations from the claim's declared parameter domain."""
    return st.fixed_dictionaries({k: param_strategy(p) for k, p in claim.params.items()})


def structured_datasets(n: int, d: int, separation: float = 0.0,
                        geometries: tuple[str, ...] = GEOMETRY_ORDER) -> st.SearchStrategy[tuple[str, torch.Tensor]]:
    """(geometry, (n, d) dataset) from the structured families that admit (n, d, separation)."""
    names = [g for g in geometries if GEOMETRIES[g].admits(n, d, separation) is None]
    if not names:
        return st.nothing()

    def build(args: tuple[str, int]) -> tuple[str, torch.Tensor] | None:
        name, seed = args
        try:
            return name, unit_sphere(_gen(seed), 1, n=n, d=d, separation=separation, geometry=name)[0]
        except Exception:  # noqa: BLE001 - an iid family that cannot be redrawn apart in a crowded space
            return None

    return st.tuples(st.sampled_from(names), st.integers(0, 2**32 - 1)).map(build).filter(lambda r: r is not None)


def integer_datasets(n: int, d: int, separation: float = 0.0, bound: int = 3) -> st.SearchStrategy[torch.Tensor]:
    """n normalised integer vectors of Z^d with entries in [-bound, bound], pairwise >= separation apart."""
    row = st.lists(st.integers(-bound, bound), min_size=d, max_size=d).filter(any)

    def build(rows: list[list[int]]) -> torch.Tensor:
        X = torch.tensor(rows, dtype=torch.float64)
        return X / X.norm(dim=-1, keepdim=True)

    return st.lists(row, min_size=n, max_size=n).map(build).filter(lambda X: _separated(X, separation))


def datasets(n: int, d: int, separation: float = 0.0,
             premises: tuple[str, ...] = ()) -> st.SearchStrategy[tuple[str, torch.Tensor]]:
    """(origin, dataset) with unit-norm rows, pairwise >= separation apart, meeting the declared premises
    (inputs.PREMISES): one family drawn uniformly among the structured geometries that admit (n, d, separation)
    and integer coordinates (so each is tried about equally often; shrinking moves towards the simplest,
    GEOMETRY_ORDER's front)."""
    names = [g for g in GEOMETRY_ORDER if GEOMETRIES[g].admits(n, d, separation) is None] + ["integer"]

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
    if n <= ALL_PATTERNS_UP_TO:
        explicit = st.sampled_from(all_patterns(n))
    else:
        explicit = st.lists(st.sampled_from((1, -1)), min_size=n, max_size=n)
    if X is None:
        return explicit

    def family(args: tuple[str, int]) -> list[int]:
        name, seed = args
        y = draw_labels(_gen(seed), name, 1, n, X[None])
        return [int(v) for v in y[0].tolist()]

    fams = st.tuples(st.sampled_from([f for f in LABELS if f != "rademacher"]), st.integers(0, 2**32 - 1))
    return st.one_of(explicit, fams.map(family))


def dataset_shape(claim: Claim, params: dict[str, float]) -> tuple[int, int, float] | None:
    """(n, d, separation) of the claim's `unit-sphere` datasets at a configuration; None when the claim does not
    draw its data from that generator (nothing to search over)."""
    spec = claim.inputs
    if not spec or spec.get("kind") != "unit-sphere":
        return None
    vals = config_values(claim, params)

    def ev(key: str, default: float | None) -> float | None:
        if key in spec:
            return parse(str(spec[key]), set(vals)).evaluate(vals)
        return params.get(key, default)

    n, d, sep = ev("n", 1), ev("d", None), ev("separation", 0.0)
    if n is None or d is None:
        return None
    return round(n), round(d), float(sep or 0.0)


def cases(claim: Claim, *, data: bool = True, labels: bool = True) -> st.SearchStrategy[Case]:
    """Parameters, then (data) a dataset of the configuration's shape and (labels) a labelling of it."""

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
            case.labels = draw(labelings(n_labels, X))
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
