"""Input generators and label families: batched datasets (R, n, d) and labels (R, n) from a seeded torch
generator.

Each generator declares its options: "expr" options are expressions over the claim's parameters, tuples
list the allowed strings. The `unit-sphere` generator offers structured geometries (GEOMETRIES) besides iid
draws, each guaranteeing unit norm and the stated minimum separation for every n it admits (and saying which
other assumptions it keeps); low-dimensional configurations are placed in a random subspace of R^d. Labels
come from a claim's `inputs.labels` (LABELS: Rademacher by default, or an explicit +-1 pattern) through
`Context.labels`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .errors import EstimatorError
from .registry import INPUTS


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def min_separation(X: torch.Tensor) -> torch.Tensor:
    """min_{i != j} ||x_i - x_j|| per replicate, X of shape (R, n, d); +inf when n == 1."""
    n = X.shape[-2]
    if n < 2:
        return torch.full(X.shape[:-2], math.inf, dtype=X.dtype)
    # the direct difference, not cdist's matrix-product form (which it takes above 25 points): that form loses
    # ~eps/phi^2 relatively, so n > 25 points placed exactly phi = 0.02 apart read closer than phi (1 - tol)
    D = torch.cdist(X, X, compute_mode="donot_use_mm_for_euclid_dist")
    D = D + torch.diag(torch.full((n,), math.inf, dtype=X.dtype))
    return D.amin(dim=(-1, -2))


def chord_angle(separation: float) -> float:
    """Angle between two unit vectors at distance `separation`: 2 asin(phi / 2)."""
    return 2 * math.asin(min(max(separation, 0.0), 2.0) / 2)


def closed_under_negation(points: list[list[float]]) -> bool:
    """Whether a dataset is closed under x -> -x (every point's antipode is in it, within 1e-9)."""
    if not points or len(points) % 2:
        return False
    return all(any(max(abs(a + b) for a, b in zip(x, y)) <= 1e-9 for y in points) for x in points)


def random_frame(gen: torch.Generator, R: int, d: int, k: int, dtype: torch.dtype) -> torch.Tensor:
    """R random orthonormal k-frames of R^d, shape (R, d, k): the random subspace a low-dimensional
    configuration is placed in (Haar-distributed: QR of a Gaussian matrix with the signs of diag(R) fixed)."""
    if k > d:
        raise EstimatorError(f"a {k}-dimensional configuration does not fit in R^{d}")
    G = torch.randn(R, d, k, generator=gen, dtype=dtype)
    Q, Rm = torch.linalg.qr(G)
    return Q * torch.sign(torch.diagonal(Rm, dim1=-2, dim2=-1)).unsqueeze(-2)


def _embed(gen: torch.Generator, R: int, Y: torch.Tensor, d: int) -> torch.Tensor:
    """A fixed (n, k) configuration of unit vectors, rotated into a random k-subspace of R^d per replicate."""
    Q = random_frame(gen, R, d, Y.shape[-1], Y.dtype)
    return _unit(torch.einsum("nk,rdk->rnd", Y, Q))


# ---------------------------------------------------------------------------------------------- geometries


@dataclass(frozen=True)
class Geometry:
    """A dataset family: how it places n points and which assumptions every dataset it returns keeps.

    keeps: "unit-norm" and "separation" always (the generator checks both on every draw); "margin" when the
    points admit a positive-margin linear separation of any labelling (linearly independent points).
    admits(n, d, separation) -> None, or the reason this family cannot give such a dataset.
    """

    name: str
    description: str
    place: Callable[[torch.Generator, int, int, int, float, torch.dtype], torch.Tensor]
    keeps: frozenset[str]
    admits: Callable[[int, int, float], str | None]
    deterministic_shape: bool = False  # the configuration is fixed up to a rotation (no redraw helps)


GEOMETRIES: dict[str, Geometry] = {}
_BASE = frozenset({"unit-norm", "separation"})


def _geometry(name: str, description: str, *, keeps: Sequence[str] = (), fixed: bool = False,
              admits: Callable[[int, int, float], str | None] = lambda n, d, s: None):
    def deco(fn):
        GEOMETRIES[name] = Geometry(name, description, fn, _BASE | frozenset(keeps), admits, fixed)
        return fn
    return deco


@_geometry("random", "iid uniform on S^{d-1}; pairs closer than the separation are redrawn")
def _random(gen, R, n, d, sep, dtype):
    return _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))


def _orthogonal_unit(gen: torch.Generator, x: torch.Tensor) -> torch.Tensor:
    """A random unit direction orthogonal to each row of x (R, d)."""
    u = torch.randn(x.shape, generator=gen, dtype=x.dtype)
    return _unit(u - (u * x).sum(-1, keepdim=True) * x)


def _needs_a_tangent(n: int, d: int, sep: float) -> str | None:
    """Geometries that move a point along a direction orthogonal to another: S^0 (d = 1) has none."""
    return f"needs d >= 2 to move a point off another (d={d})" if d < 2 and n > 1 else None


@_geometry("close-pair", "iid, with x_2 planted at distance exactly phi from x_1 (catalogue D2)",
           admits=_needs_a_tangent)
def _close_pair(gen, R, n, d, sep, dtype):
    X = _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))
    if n >= 2:
        # Catalogue D2: x_2 = cos(t) x_1 + sin(t) u with u a random unit direction orthogonal to x_1.
        theta = chord_angle(sep)
        x1 = X[:, 0]
        X[:, 1] = math.cos(theta) * x1 + math.sin(theta) * _orthogonal_unit(gen, x1)
    return X


@_geometry("clustered", "two tight clusters of nearly collinear points, consecutive points just over phi apart",
           admits=lambda n, d, s: f"needs d >= 2 (d={d})" if d < 2 else None)
def _clustered(gen, R, n, d, sep, dtype):
    centers = _unit(torch.randn(R, 2, d, generator=gen, dtype=dtype))
    X = torch.empty(R, n, d, dtype=dtype)
    step = max(sep, 1e-3) * 1.01
    for i in range(n):
        c = centers[:, i % 2]
        t = chord_angle((i // 2) * step)
        X[:, i] = math.cos(t) * c + math.sin(t) * _orthogonal_unit(gen, c)
    return X


@_geometry("antipodal-pairs", "iid directions, each followed by its antipode (x_{2k+1} = -x_{2k})")
def _antipodal(gen, R, n, d, sep, dtype):
    X = _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))
    X[:, 1::2] = -X[:, 0:n - 1:2]
    return X


def _collinear_admits(n: int, d: int, sep: float) -> str | None:
    rings = math.ceil(n / max(2 * (d - 1), 1))
    if d < 2 and n > 2:
        return "needs d >= 2"
    if rings * chord_angle(sep) > math.pi / 2 and n > 1:
        return f"{rings} rings of angular step {chord_angle(sep):.3g} exceed pi/2"
    return None


@_geometry("nearly-collinear", "all points in a narrow cap around one direction c: rings at angles k*t from c "
           "(t = 2 asin(phi/2)) along +-orthogonal directions, so the closest pairs sit at exactly phi",
           admits=_collinear_admits)
def _nearly_collinear(gen, R, n, d, sep, dtype):
    # Frame: c = column 0, u_1..u_{d-1} the rest. Point i uses direction +-u_j (cycling over 2(d-1) of them) on
    # ring r at angle (r+1)t: same-direction points are >= phi apart; points on orthogonal/opposite directions
    # are >= sqrt(2) sin(t) >= phi apart while t <= pi/2.
    if d == 1:
        Y = torch.tensor([[1.0], [-1.0]], dtype=dtype)[:n]
        return _embed(gen, R, Y, d)
    t = chord_angle(sep) if sep > 0 else 1e-3
    dirs = 2 * (d - 1)
    # only c and the first ceil(min(n, dirs) / 2) orthogonal directions carry points: the configuration lives in
    # that many dimensions, and a random frame of all d columns would cost a d x d QR (hours at d = 16384)
    k = 1 + (min(n, dirs) + 1) // 2
    Y = torch.zeros(n, k, dtype=dtype)
    for i in range(n):
        ring, j = divmod(i, dirs)
        ang = (ring + 1) * t
        Y[i, 0] = math.cos(ang)
        Y[i, 1 + j // 2] = math.sin(ang) * (1 if j % 2 == 0 else -1)
    return _embed(gen, R, Y, d)


@_geometry("nearly-orthogonal", "n <= d orthonormal directions tilted slightly (by ~0.1/sqrt(d)) at random, "
           "in a random frame", keeps=("margin",),
           admits=lambda n, d, s: None if n <= d else f"needs n <= d (n={n}, d={d})")
def _nearly_orthogonal(gen, R, n, d, sep, dtype):
    Q = random_frame(gen, R, d, n, dtype).transpose(-1, -2)  # (R, n, d) orthonormal rows
    return _unit(Q + 0.1 / math.sqrt(d) * torch.randn(R, n, d, generator=gen, dtype=dtype))


def _polygon_admits(n: int, d: int, sep: float) -> str | None:
    if d < 2 and n > 2:
        return "needs d >= 2"
    if n >= 2 and 2 * math.sin(math.pi / n) < sep * (1 - 1e-12):
        return f"a regular {n}-gon has sides 2 sin(pi/{n}) = {2 * math.sin(math.pi / n):.4g} < phi = {sep:g}"
    return None


@_geometry("polygon", "the vertices of a regular n-gon in a random 2-plane (sides 2 sin(pi/n))", fixed=True,
           admits=_polygon_admits)
def _polygon(gen, R, n, d, sep, dtype):
    a = 2 * math.pi * torch.arange(n, dtype=dtype) / n
    Y = torch.stack([torch.cos(a), torch.sin(a)], -1)
    return _embed(gen, R, Y[:, :min(2, d)], d)


def simplex_vertices(n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The n vertices of a regular simplex on S^{n-2} as an (n, n-1) matrix (pairwise distance sqrt(2n/(n-1)))."""
    if n == 1:
        return torch.ones(1, 1, dtype=dtype)
    E = torch.eye(n, dtype=dtype) - 1.0 / n
    # Coordinates in an orthonormal basis of the hyperplane orthogonal to (1, ..., 1).
    B = torch.linalg.qr(E)[0][:, : n - 1]
    return _unit(E @ B)


@_geometry("simplex", "the vertices of a regular simplex (n <= d + 1) in a random subspace", fixed=True, admits=lambda n, d, s: None if n <= d + 1 else f"needs n <= d + 1 (n={n}, d={d})")
def _simplex(gen, R, n, d, sep, dtype):
    return _embed(gen, R, simplex_vertices(n, dtype), d)


@_geometry("cross-polytope", "+-e_1, +-e_2, ... (n <= 2d points, orthogonal or antipodal) in a random frame",
           fixed=True, admits=lambda n, d, s: None if n <= 2 * d else f"needs n <= 2d (n={n}, d={d})")
def _cross_polytope(gen, R, n, d, sep, dtype):
    k = math.ceil(n / 2)
    Y = torch.zeros(n, k, dtype=dtype)
    for i in range(n):
        Y[i, i // 2] = 1.0 if i % 2 == 0 else -1.0
    return _embed(gen, R, Y, d)


def lattice_directions(n: int, k: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The first n primitive integer vectors of Z^k (gcd 1, one of +-v), simplest first (by norm, then
    lexicographically), normalised: an (n, k) matrix."""
    out: list[tuple[int, ...]] = []
    m = 1
    while True:
        cands = [v for v in itertools.product(range(-m, m + 1), repeat=k)
                 if any(v) and math.gcd(*v) == 1 and next(x for x in v if x) > 0]
        if len(cands) >= n or m > 64:
            cands.sort(key=lambda v: (sum(x * x for x in v), tuple(-x for x in v)))
            out = cands[:n]
            break
        m += 1
    if len(out) < n:
        raise EstimatorError(f"lattice: fewer than {n} primitive directions in Z^{k}")
    return _unit(torch.tensor(out, dtype=dtype))


def _lattice_admits(n: int, d: int, sep: float) -> str | None:
    k = min(d, 3)
    if k == 1 and n > 1:
        return "needs d >= 2"
    if n >= 2 and float(min_separation(lattice_directions(n, k)[None])[0]) < sep * (1 - 1e-12):
        return f"the {n} simplest lattice directions of Z^{k} are closer than phi = {sep:g}"
    return None


@_geometry("lattice", "the n simplest primitive directions of the integer lattice Z^k (k = min(d, 3)), normalised, "
           "in a random subspace", fixed=True, admits=_lattice_admits)
def _lattice(gen, R, n, d, sep, dtype):
    return _embed(gen, R, lattice_directions(n, min(d, 3), dtype), d)


def _arc_admits(n: int, d: int, sep: float) -> str | None:
    if d < 2 and n > 1:
        return "needs d >= 2"
    if n >= 2 and n * chord_angle(sep) > 2 * math.pi * (1 + 1e-12):
        return f"n * 2 asin(phi/2) = {n * chord_angle(sep):.4g} > 2 pi"
    return None


@_geometry("arc", "n points along a great circle of a random 2-plane, consecutive ones exactly phi apart "
           "(the tightest configuration of Lemma A.11's proof)", fixed=True, admits=_arc_admits)
def _arc(gen, R, n, d, sep, dtype):
    t = chord_angle(sep) if sep > 0 else 2 * math.pi / max(n, 1)
    a = t * torch.arange(n, dtype=dtype)
    return _embed(gen, R, torch.stack([torch.cos(a), torch.sin(a)], -1), d)


@_geometry("duplicated-directions", "floor(n/2) iid directions, each duplicated at distance exactly phi (every "
           "pair at the separation limit; the pairs themselves redrawn until phi apart)",
           admits=lambda n, d, s: "needs phi > 0" if s <= 0 and n > 1 else None)
def _duplicated(gen, R, n, d, sep, dtype):
    X = _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))
    theta = chord_angle(sep)
    for i in range(1, n, 2):
        x = X[:, i - 1]
        X[:, i] = math.cos(theta) * x + math.sin(theta) * _orthogonal_unit(gen, x)
    return X


def hypercube_vertices(n: int, d: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The first n vertices of the k-cube {+-1}^k / sqrt(k) (k = min(d, smallest k with 2^k >= n)) in antipodal
    pairs (v, -v), v with first coordinate +1 in lexicographic order: an (n, k) matrix closed under x -> -x for
    even n."""
    k = 1
    while 2 ** k < n and k < d:
        k += 1
    half = [v for v in itertools.product((1.0, -1.0), repeat=k) if v[0] > 0]
    rows = [r for v in half for r in (v, tuple(-x for x in v))][:n]
    return torch.tensor(rows, dtype=dtype) / math.sqrt(k)


def _hypercube_admits(n: int, d: int, sep: float) -> str | None:
    if n > 2 ** d:
        return f"needs n <= 2^d (n={n}, d={d})"
    if n >= 2 and float(min_separation(hypercube_vertices(n, d)[None])[0]) < sep * (1 - 1e-12):
        return f"cube vertices are closer than phi = {sep:g}"
    return None


@_geometry("hypercube", "vertices of the cube {+-1}^k / sqrt(k) in antipodal pairs, in a random frame: closed under "
           "x -> -x for even n", fixed=True, admits=_hypercube_admits)
def _hypercube(gen, R, n, d, sep, dtype):
    return _embed(gen, R, hypercube_vertices(n, d, dtype), d)


@_geometry("symmetric-plus-close-pair", "n - 2 points in antipodal pairs (closed under x -> -x) plus a close pair "
           "at distance exactly phi (1e-3 when phi = 0): a symmetric set and a near-collision at once",
           admits=lambda n, d, s: None if n >= 4 and d >= 2 else f"needs n >= 4 and d >= 2 (n={n}, d={d})")
def _symmetric_plus_close(gen, R, n, d, sep, dtype):
    X = _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))
    k = n - 2
    X[:, 1:k:2] = -X[:, 0:k - 1:2]
    theta = chord_angle(sep) if sep > 0 else 1e-3
    x = X[:, n - 2]
    X[:, n - 1] = math.cos(theta) * x + math.sin(theta) * _orthogonal_unit(gen, x)
    return X


def separation_tolerance(separation: float, dtype: torch.dtype) -> float:
    """A dataset meets the separation when min ||x_i - x_j|| >= phi (1 - tol): tol covers the rounding of a
    configuration built exactly at the limit (a few hundred ulps of the dtype)."""
    return 256 * torch.finfo(dtype).eps


@INPUTS.register(
    "unit-sphere",
    "n points on the unit sphere S^{d-1} in a geometry (`lemmacheck list --inputs`: "
    + ", ".join(GEOMETRIES) + "); every dataset has unit norm and meets the stated minimum separation",
    fields={"n": "expr", "d": "expr", "separation": "expr", "geometry": tuple(GEOMETRIES)},
)
def unit_sphere(gen: torch.Generator, R: int, *, n: int, d: int, separation: float = 0.0,
                geometry: str = "random", dtype: torch.dtype = torch.float64) -> torch.Tensor:
    n, d = int(n), int(d)
    if geometry not in GEOMETRIES:
        raise EstimatorError(f"unknown geometry {geometry!r}: one of {list(GEOMETRIES)}")
    geo = GEOMETRIES[geometry]
    why = geo.admits(n, d, separation)
    if why:
        raise EstimatorError(f"geometry {geometry!r} cannot place n={n} points on S^{d - 1} with separation "
                             f"{separation}: {why}")
    X = geo.place(gen, R, n, d, separation, dtype)
    if separation > 0 and n >= 2:
        tol = separation * (1 - separation_tolerance(separation, dtype))
        # Replicates whose points came out closer than the separation are redrawn whole, in the same
        # geometry (the other replicates keep their draws), until every dataset meets it.
        bad = min_separation(X) < tol
        tries = 0
        while bool(bad.any()) and tries <= 100 and not geo.deterministic_shape:
            X[bad] = geo.place(gen, int(bad.sum()), n, d, separation, dtype)
            bad = min_separation(X) < tol
            tries += 1
        if bool(bad.any()):
            raise EstimatorError(
                f"cannot place n={n} points on S^{d - 1} with separation {separation} ({geometry}); "
                "lower n or the separation, or raise d"
            )
    return X


def check_points(points: Any) -> tuple[int, int]:
    """A pinned dataset: a non-empty list of equal-length rows of numbers, each of unit norm; returns (n, d)."""
    try:
        X = torch.tensor(points, dtype=torch.float64)
    except (TypeError, ValueError):
        raise ValueError("expected a list of rows of numbers, e.g. [[1.0, 0.0], [0.0, 1.0]]") from None
    if X.dim() != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"expected an n x d list of rows, got shape {tuple(X.shape)}")
    norms = X.norm(dim=-1)
    if not bool(((norms - 1).abs() <= 1e-9).all()):
        raise ValueError(f"rows must have unit norm; row {int((norms - 1).abs().argmax())} has norm "
                         f"{float(norms[(norms - 1).abs().argmax()]):.12g}")
    return X.shape[0], X.shape[1]


def pinned_dataset(points: Any, shape: dict[str, float]) -> torch.Tensor:
    """The (n, d) tensor of a pinned dataset, checked against the configuration's n and d (where given)."""
    n, d = check_points(points)
    for name, have in (("n", n), ("d", d)):
        if name in shape and round(shape[name]) != have:
            raise EstimatorError(f"pinned dataset has {name}={have} but the configuration has {name}={shape[name]:g}")
    return torch.tensor(points, dtype=torch.float64)


# ------------------------------------------------------------------------------------------------ premises


@dataclass(frozen=True)
class Premise:
    """A hypothesis on the data that a claim declares (`inputs.premises`): every dataset a run draws or a hunt
    tries meets it (runs redraw a dataset that breaks it; hunts never propose one; a pinned dataset that breaks it
    is refused). holds(X) -> (R,) bool for datasets X (R, n, d)."""

    name: str
    description: str
    holds: Callable[[torch.Tensor], torch.Tensor]


PREMISES: dict[str, Premise] = {}
PARALLEL_TOL = 1e-9  # |cos(x_i, x_j)| within this of 1: parallel (or antipodal / equal)


def _premise(name: str, description: str):
    def deco(fn):
        PREMISES[name] = Premise(name, description, fn)
        return fn
    return deco


def _cosines(X: torch.Tensor) -> torch.Tensor:
    """Pairwise cosines (R, n, n) with the diagonal set to 0."""
    U = X / X.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(X.dtype).tiny)
    C = U @ U.transpose(-1, -2)
    return C - torch.diag_embed(torch.diagonal(C, dim1=-2, dim2=-1))


@_premise("no-parallel-pair", "no two inputs parallel: x_j != c x_i for i != j (neither equal nor antipodal)")
def _no_parallel(X):
    return (_cosines(X).abs() < 1 - PARALLEL_TOL).flatten(1).all(-1)


@_premise("no-antipodal-pair", "no input is a negative multiple of another (x_j != -c x_i, c > 0)")
def _no_antipodal(X):
    return (_cosines(X) > -1 + PARALLEL_TOL).flatten(1).all(-1)


@_premise("distinct", "no two inputs equal")
def _distinct(X):
    return ~(torch.cdist(X, X) + torch.diag(torch.full((X.shape[-2],), math.inf, dtype=X.dtype)) <= 1e-12).flatten(1).any(-1)


def _rank(X: torch.Tensor) -> torch.Tensor:
    s = torch.linalg.svdvals(X)
    return (s > s[..., :1] * max(X.shape[-2:]) * torch.finfo(X.dtype).eps * 1e3).sum(-1)


@_premise("linearly-independent", "the n inputs are linearly independent (rank n; needs n <= d)")
def _independent(X):
    return _rank(X) == X.shape[-2]


@_premise("full-rank", "the n x d data matrix has rank min(n, d)")
def _full_rank(X):
    return _rank(X) == min(X.shape[-2:])


def check_premises(spec: Any) -> tuple[str, ...]:
    """A claim's `inputs.premises`: a list of PREMISES names; returns them as a tuple."""
    if isinstance(spec, str):
        spec = [spec]
    if not isinstance(spec, (list, tuple)) or not all(isinstance(v, str) for v in spec):
        raise ValueError(f"expected a list of premise names, e.g. [\"no-parallel-pair\"]; one of {list(PREMISES)}")
    unknown = [v for v in spec if v not in PREMISES]
    if unknown:
        raise ValueError(f"unknown premise(s) {unknown}: one of {list(PREMISES)}")
    return tuple(spec)


def meets_premises(X: torch.Tensor, premises: Sequence[str]) -> torch.Tensor:
    """(R,) bool on the CPU: which datasets X (R, n, d) meet every premise."""
    ok = torch.ones(X.shape[0], dtype=torch.bool, device="cpu")  # not the shard's default device: a GPU's
    for name in premises:
        ok &= PREMISES[name].holds(X.detach()).cpu()
    return ok


def broken_premises(X: torch.Tensor, premises: Sequence[str]) -> list[str]:
    """The premises one dataset X (n, d) breaks."""
    return [p for p in premises if not bool(PREMISES[p].holds(X.detach()[None])[0])]


def rademacher(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randint(0, 2, shape, generator=gen).to(dtype) * 2 - 1


# -------------------------------------------------------------------------------------------------- labels


@dataclass(frozen=True)
class LabelFamily:
    """How labels y in {-1, +1}^n are drawn; needs_data: uses the datasets X (R, n, d)."""

    name: str
    description: str
    draw: Callable[[torch.Generator, int, int, torch.Tensor | None, torch.dtype], torch.Tensor]
    needs_data: bool = False


LABELS: dict[str, LabelFamily] = {}


def _label(name: str, description: str, needs_data: bool = False):
    def deco(fn):
        LABELS[name] = LabelFamily(name, description, fn, needs_data)
        return fn
    return deco


@_label("rademacher", "iid uniform signs (the default)")
def _rademacher_labels(gen, R, n, X, dtype):
    return rademacher(gen, (R, n), dtype)


@_label("constant", "every label +1")
def _constant_labels(gen, R, n, X, dtype):
    return torch.ones(R, n, dtype=dtype)


@_label("by-cluster", "two clusters of the data (the two farthest points as seeds, one nearest-seed pass): "
        "+1 on one, -1 on the other", needs_data=True)
def _cluster_labels(gen, R, n, X, dtype):
    assert X is not None
    if n < 2:
        return torch.ones(R, n, dtype=dtype)
    D = torch.cdist(X, X)
    flat = D.flatten(1).argmax(-1)
    i, j = flat // n, flat % n
    ar = torch.arange(R)
    di, dj = D[ar, i], D[ar, j]  # (R, n) distances to both seeds
    return torch.where(di <= dj, 1.0, -1.0).to(dtype)


@_label("half-space", "sign(<w, x_i>) for a random direction w (ties +1): linearly separable through the origin",
        needs_data=True)
def _halfspace_labels(gen, R, n, X, dtype):
    assert X is not None
    w = torch.randn(R, X.shape[-1], generator=gen, dtype=X.dtype)
    return torch.where(torch.einsum("rnd,rd->rn", X, w) >= 0, 1.0, -1.0).to(dtype)


@_label("parity", "(-1)^i in the data's order: on data listed in antipodal pairs y(-x) = -y(x)")
def _parity_labels(gen, R, n, X, dtype):
    return torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(n)], dtype=dtype).expand(R, n).clone()


def null_vectors(X: torch.Tensor) -> torch.Tensor:
    """Unit vectors a (R, n) with X^T a = sum_i a_i x_i as small as the data allow (exactly 0 when the n points
    are linearly dependent: n > d, or a symmetric set): the last left singular vector of each X (R, n, d), its
    largest entry made positive."""
    U, _, _ = torch.linalg.svd(X.detach().to(torch.float64), full_matrices=True)
    a = U[..., -1]
    sign = torch.sign(a.gather(-1, a.abs().argmax(-1, keepdim=True)))
    return (a * torch.where(sign == 0, 1.0, sign)).to(X.dtype)


@_label("null-vector", "signs of a null vector a of the data (sum_i a_i x_i = 0 when the points are dependent), "
        "ties +1", needs_data=True)
def _null_labels(gen, R, n, X, dtype):
    assert X is not None
    return torch.where(null_vectors(X) >= 0, 1.0, -1.0).to(dtype)


def label_pattern(spec: Any) -> list[int] | None:
    """An explicit labelling: a list of +-1 or a string of '+'/'-' ("+-+"); None for a family name."""
    if isinstance(spec, str):
        if spec in LABELS:
            return None
        if spec and set(spec) <= {"+", "-"}:
            return [1 if c == "+" else -1 for c in spec]
        raise ValueError(f"labels {spec!r}: one of {list(LABELS)}, or an explicit pattern of '+'/'-' such as '+-+'")
    if isinstance(spec, (list, tuple)) and spec and all(v in (1, -1) for v in spec):
        return [int(v) for v in spec]
    raise ValueError(f"labels {spec!r}: one of {list(LABELS)}, a '+'/'-' string or a list of +1/-1")


def draw_labels(gen: torch.Generator, spec: Any, R: int, n: int, X: torch.Tensor | None = None,
                dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Labels (R, n) of the family or explicit pattern `spec` for the datasets X (R, n, d)."""
    pattern = label_pattern(spec)
    if pattern is not None:
        if len(pattern) != n:
            raise EstimatorError(f"labels pattern {spec!r} has {len(pattern)} entries for n={n} points")
        return torch.tensor(pattern, dtype=dtype).expand(R, n).clone()
    fam = LABELS[spec]
    if fam.needs_data and (X is None or X.shape[-2] != n):
        raise EstimatorError(f"labels {spec!r} depend on the data: call ctx.labels(n, X) with the (R, n, d) datasets")
    return fam.draw(gen, R, n, X, dtype)


# ---------------------------------------------------------------------------------------------- coefficients
# Coefficient vectors a statement quantifies over ("for any a in R^n", "q != 0"), drawn through ctx.coefficients
# from the claim's `inputs.coefficients`: a family below or an explicit list of numbers.

COEFFICIENTS: dict[str, tuple[str, bool]] = {  # name -> (description, needs data)
    "gaussian": ("iid N(0, 1) entries (the default)", False),
    "ones": ("every entry 1", False),
    "parity": ("(-1)^i", False),
    "first": ("e_1: all weight on the first point", False),
    "null-vector": ("a unit null vector of the data, sum_i a_i x_i = 0 when the points are dependent", True),
    "zero": ("the zero vector (a hunt's stratum unless the claim declares inputs.nonzero = [\"coefficients\"])", False),
}
# What a statement may require to be nonzero (`inputs.nonzero`): hunts then never try the zero stratum there.
NONZERO = ("coefficients", "weights", "perturbation")


def coefficient_spec(spec: Any) -> list[float] | None:
    """A claim's `inputs.coefficients`: a family name (None) or an explicit non-empty list of numbers."""
    if isinstance(spec, str):
        if spec in COEFFICIENTS:
            return None
        raise ValueError(f"coefficients {spec!r}: one of {list(COEFFICIENTS)}, or a list of numbers")
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        for v in spec):
        return [float(v) for v in spec]
    raise ValueError(f"coefficients {spec!r}: one of {list(COEFFICIENTS)}, or a list of numbers")


def draw_coefficients(gen: torch.Generator, spec: Any, R: int, n: int, X: torch.Tensor | None = None,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Coefficient vectors (R, n) of the family or explicit list `spec` for the datasets X (R, n, d)."""
    explicit = coefficient_spec(spec)
    if explicit is not None:
        if len(explicit) != n:
            raise EstimatorError(f"coefficients {spec!r} have {len(explicit)} entries for n={n}")
        return torch.tensor(explicit, dtype=dtype).expand(R, n).clone()
    if spec == "gaussian":
        return torch.randn(R, n, generator=gen, dtype=dtype)
    if spec == "zero":
        return torch.zeros(R, n, dtype=dtype)
    if spec == "ones":
        return torch.ones(R, n, dtype=dtype)
    if spec == "parity":
        return torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(n)], dtype=dtype).expand(R, n).clone()
    if spec == "first":
        a = torch.zeros(R, n, dtype=dtype)
        a[:, 0] = 1.0
        return a
    if X is None or X.shape[-2] != n:
        raise EstimatorError(f"coefficients {spec!r} depend on the data: call ctx.coefficients(n, X)")
    return null_vectors(X).to(dtype)


def all_patterns(n: int) -> list[list[int]]:
    """Every labelling of n points up to a global sign flip (2^(n-1) patterns; the first label is +1)."""
    return [[1, *p] for p in itertools.product((1, -1), repeat=n - 1)] if n else [[]]


def describe_families() -> dict[str, dict[str, str]]:
    """Geometries and label families with what each keeps (for `lemmacheck list --inputs` and reports)."""
    return {
        "geometries": {g.name: f"{g.description} [keeps: {', '.join(sorted(g.keeps))}]" for g in GEOMETRIES.values()},
        "labels": {f.name: f.description for f in LABELS.values()},
        "premises": {p.name: p.description for p in PREMISES.values()},
        "coefficients": {k: v[0] for k, v in COEFFICIENTS.items()},
    }


# ------------------------------------------------------------------ "for all W": weights and perturbations
# A statement "for all W with ||W_l|| <= r_l" or "for every perturbation with ||U_l|| <= r ||W_l||" quantifies over
# matrices. The claim declares each ball (`inputs.weights`, `inputs.perturbation`); estimators draw through
# ctx.weights / ctx.perturbation, and a search (search.search_quantified) moves what they returned. A family is
# where a draw starts: the run's default, or what a hunt's stratified sweep pins.
WEIGHT_FAMILIES = {
    "gaussian": "each layer a Gaussian matrix scaled onto the sphere of its ball (the default)",
    "given": "the network's own draw (a protocol network's initialisation), projected into the ball",
    "rank-one": "u v^T with Gaussian u, v, on the sphere of the ball",
    "non-negative": "|G| for a Gaussian G, on the sphere of the ball",
    "aligned": "a chain of rank-one non-negative layers, each reading the previous one's output direction (every "
               "ReLU the identity on a non-negative input)",
    "zero": "every layer 0 (in every ball: a hunt's stratum unless the claim declares inputs.nonzero = [\"weights\"])",
}
PERTURBATION_FAMILIES = {
    "random": "a Gaussian direction per layer on the sphere of its ball (the default)",
    "aligned": "each layer along its weights: U_l = r_l W_l / ||W_l|| (the direction that scales the layer)",
    "rank-one": "u v^T with Gaussian u, v, on the sphere of the ball",
    "zero": "U = 0 (in every ball: a hunt's stratum unless the claim declares inputs.nonzero = [\"perturbation\"])",
}
QUANTIFIED = {"weights": WEIGHT_FAMILIES, "perturbation": PERTURBATION_FAMILIES}
BALL_NORMS = ("spectral", "frobenius")


def check_quantified(role: str, spec: Any) -> list[tuple[str, str]]:
    """Problems of an `inputs.weights` / `inputs.perturbation` table as (field, problem); the expressions of
    `radius` are left to the caller (they need the claim's parameters). A perturbation needs a radius; weights
    without one are unconstrained (drawn at scale 1, never projected)."""
    if not isinstance(spec, dict):
        return [("", 'expected a table, e.g. { radius = "1/d", relative = true, norm = "spectral" }')]
    out = []
    allowed = {"radius", "norm", "family", *(("relative",) if role == "perturbation" else ())}
    out += [(k, f"unknown field; fields: {sorted(allowed)}") for k in spec if k not in allowed]
    if role == "perturbation" and "radius" not in spec:
        out.append(("radius", "missing (an expression, or one per layer)"))
    r = spec.get("radius")
    if r is not None and not (isinstance(r, (str, int, float)) and not isinstance(r, bool)
                              or isinstance(r, list) and r and all(isinstance(x, (str, int, float)) for x in r)):
        out.append(("radius", f"{r!r}: an expression, or a list of expressions (one per layer)"))
    if spec.get("norm", "spectral") not in BALL_NORMS:
        out.append(("norm", f"{spec['norm']!r}: one of {list(BALL_NORMS)}"))
    if spec.get("family", next(iter(QUANTIFIED[role]))) not in QUANTIFIED[role]:
        out.append(("family", f"{spec['family']!r}: one of {list(QUANTIFIED[role])}"))
    if not isinstance(spec.get("relative", False), bool):
        out.append(("relative", "true (||U_l|| <= r ||W_l||) or false (||U_l|| <= r)"))
    return out


def matrix_norm(W: torch.Tensor, norm: str) -> torch.Tensor:
    """||W||_2 or ||W||_F per matrix of a batch (R, a, b) -> (R,), differentiable."""
    return torch.linalg.matrix_norm(W, ord=2 if norm == "spectral" else "fro")


def ball_radius(W: torch.Tensor, r: float, norm: str, relative: bool = False) -> torch.Tensor:
    """The radius (R,) of a layer's ball per replicate: r, or r ||W|| (in `norm`) when the radius is relative to the
    weights W (R, a, b)."""
    if relative:
        return matrix_norm(W, norm) * r
    return torch.full((W.shape[0],), r, dtype=W.dtype, device=W.device)


def onto_sphere(D: torch.Tensor, radius: torch.Tensor, norm: str) -> torch.Tensor:
    """D (R, a, b) rescaled to norm `radius` (R,) per replicate."""
    return D * (radius / matrix_norm(D, norm).clamp_min(1e-300)).reshape(-1, 1, 1)


def into_ball(D: torch.Tensor, radius: torch.Tensor, norm: str) -> torch.Tensor:
    """The Euclidean projection of D (R, a, b) onto {||D|| <= radius} (R,): singular values clipped (spectral) or
    a rescaling (Frobenius)."""
    r = radius.reshape(-1, 1)
    if norm == "spectral":
        U, S, Vh = torch.linalg.svd(D, full_matrices=False)
        return (U * torch.minimum(S, r).unsqueeze(-2)) @ Vh
    return D * torch.clamp(r.unsqueeze(-1) / matrix_norm(D, norm).clamp_min(1e-300).reshape(-1, 1, 1), max=1.0)


def _nonneg_unit(gen: torch.Generator, R: int, k: int, dtype: torch.dtype) -> torch.Tensor:
    u = torch.randn(R, k, generator=gen, dtype=dtype).abs()
    return u / u.norm(dim=-1, keepdim=True)


def draw_weights(gen: torch.Generator, family: str, shapes: Sequence[tuple[int, int]], radii: Sequence[float] | None,
                 norm: str, layout: str, R: int, dtype: torch.dtype,
                 given: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """R draws of the layers' weights (R, a_l, b_l) of `family` (WEIGHT_FAMILIES) in the ball of radius r_l (None:
    unconstrained, drawn at norm 1). `layout` "in-out" (z = x W: a layer reads its rows) or "out-in" (z = W x)
    decides which side of W_l reads W_{l-1}'s output, for the aligned chain."""
    if family == "given":
        if given is None:
            raise EstimatorError("weights family 'given' needs the network's own weights (ctx.weights(Ws))")
        return [W if radii is None else into_ball(W, ball_radius(W, radii[i], norm), norm) for i, W in enumerate(given)]
    out = []
    prev = None  # the aligned chain's direction in the space the next layer reads
    for i, (a, b) in enumerate(shapes):
        inside, outside = (a, b) if layout == "in-out" else (b, a)
        if family == "gaussian":
            W = torch.randn(R, a, b, generator=gen, dtype=dtype)
        elif family == "non-negative":
            W = torch.randn(R, a, b, generator=gen, dtype=dtype).abs()
        elif family == "rank-one":
            W = torch.randn(R, a, 1, generator=gen, dtype=dtype) * torch.randn(R, 1, b, generator=gen, dtype=dtype)
        elif family == "zero":
            out.append(torch.zeros(R, a, b, dtype=dtype))
            continue
        elif family == "aligned":
            u = prev if prev is not None and prev.shape[-1] == inside else _nonneg_unit(gen, R, inside, dtype)
            v = _nonneg_unit(gen, R, outside, dtype)
            W = u.unsqueeze(-1) * v.unsqueeze(-2) if layout == "in-out" else v.unsqueeze(-1) * u.unsqueeze(-2)
            prev = v
        else:
            raise EstimatorError(f"weights family {family!r}: one of {list(WEIGHT_FAMILIES)}")
        out.append(onto_sphere(W, torch.full((R,), 1.0 if radii is None else radii[i], dtype=dtype), norm))
    return out


def draw_perturbation(gen: torch.Generator, family: str, Ws: Sequence[torch.Tensor], radii: Sequence[torch.Tensor],
                      norm: str) -> list[torch.Tensor]:
    """One perturbation per layer of `family` (PERTURBATION_FAMILIES) on the sphere of radius radii[l] (R,)."""
    out = []
    for W, r in zip(Ws, radii):
        R, a, b = W.shape
        if family == "random":
            U = torch.randn(R, a, b, generator=gen, dtype=W.dtype)
        elif family == "aligned":
            U = W.detach().clone()
        elif family == "rank-one":
            U = torch.randn(R, a, 1, generator=gen, dtype=W.dtype) * torch.randn(R, 1, b, generator=gen, dtype=W.dtype)
        elif family == "zero":
            out.append(torch.zeros_like(W))
            continue
        else:
            raise EstimatorError(f"perturbation family {family!r}: one of {list(PERTURBATION_FAMILIES)}")
        out.append(onto_sphere(U, r.to(W.dtype), norm))
    return out
