"""Input generators: batched datasets (R, n, d) drawn from a seeded torch generator.

Each generator declares its options: "expr" options are expressions over the claim's parameters, tuples
list the allowed strings. Labels are Rademacher unless a claim's quantity decides otherwise.
"""

from __future__ import annotations

import math

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
    D = torch.cdist(X, X)
    D = D + torch.diag(torch.full((n,), math.inf, dtype=X.dtype))
    return D.amin(dim=(-1, -2))


@INPUTS.register(
    "unit-sphere",
    "n points on the unit sphere S^{d-1}: iid uniform, a planted close pair at distance exactly phi, or "
    "tight clusters; every dataset meets the stated minimum separation",
    fields={"n": "expr", "d": "expr", "separation": "expr",
            "geometry": ("random", "close-pair", "clustered", "antipodal-pairs")},
)
def unit_sphere(gen: torch.Generator, R: int, *, n: int, d: int, separation: float = 0.0,
                geometry: str = "random", dtype: torch.dtype = torch.float64) -> torch.Tensor:
    n, d = int(n), int(d)
    X = _place(gen, R, n, d, separation, geometry, dtype)
    if separation > 0 and n >= 2:
        # Replicates whose points came out closer than the separation are redrawn whole, in the same
        # geometry (the other replicates keep their draws), until every dataset meets it.
        bad = min_separation(X) < separation * (1 - 1e-9)
        tries = 0
        while bool(bad.any()) and tries <= 100:
            X[bad] = _place(gen, int(bad.sum()), n, d, separation, geometry, dtype)
            bad = min_separation(X) < separation
            tries += 1
        if bool((min_separation(X) < separation * (1 - 1e-6)).any()):
            raise EstimatorError(
                f"cannot place n={n} points on S^{d - 1} with separation {separation} ({geometry}); "
                "lower n or the separation, or raise d"
            )
    return X


def _place(gen: torch.Generator, R: int, n: int, d: int, separation: float, geometry: str,
           dtype: torch.dtype) -> torch.Tensor:
    """One draw of R datasets in the geometry; the separation is only used to plant the close points."""
    if geometry == "close-pair" and n >= 2:
        X = _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))
        # Catalogue D2: x_2 = cos(t) x_1 + sin(t) u with u a random unit direction orthogonal to x_1.
        theta = 2 * math.asin(min(separation, 2.0) / 2)
        u = torch.randn(R, d, generator=gen, dtype=dtype)
        x1 = X[:, 0]
        u = _unit(u - (u * x1).sum(-1, keepdim=True) * x1)
        X[:, 1] = math.cos(theta) * x1 + math.sin(theta) * u
        return X
    if geometry == "clustered" and n >= 2:
        # Two clusters of nearly collinear points, each pair still at least `separation` apart.
        centers = _unit(torch.randn(R, 2, d, generator=gen, dtype=dtype))
        X = torch.empty(R, n, d, dtype=dtype)
        step = max(separation, 1e-3) * 1.01
        for i in range(n):
            c = centers[:, i % 2]
            u = torch.randn(R, d, generator=gen, dtype=dtype)
            u = _unit(u - (u * c).sum(-1, keepdim=True) * c)
            t = 2 * math.asin(min((i // 2) * step, 2.0) / 2)
            X[:, i] = math.cos(t) * c + math.sin(t) * u
        return X
    X = _unit(torch.randn(R, n, d, generator=gen, dtype=dtype))
    if geometry == "antipodal-pairs":
        X[:, 1::2] = -X[:, 0:n - 1:2]
    return X


def rademacher(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randint(0, 2, shape, generator=gen).to(dtype) * 2 - 1
