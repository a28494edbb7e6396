"""Planted quantities of known truth for the search tests (test-only extension, tests/test_search_defaults.py);
none is a real lemma. Each false one fails only where a default search does not look: on exact equality up to
rounding, on a symmetric set (x -> -x), for a pair of parallel inputs, for a non-default member of a function class,
for a coefficient vector in a null space, at the end of a step-size range, or out of a width regime at every
width."""

import torch

from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES


def _gram_residual(X):
    """||sum_i x_i||^2 - sum_ij <x_i, x_j>: zero in exact arithmetic, a few ulps of n^2 in floating point."""
    s = X.sum(1)
    return (s * s).sum(-1) - (X @ X.transpose(1, 2)).sum((-1, -2))


@QUANTITIES.register("p2-rounding-identity", "||sum x_i||^2 - sum_ij <x_i, x_j>: 0 up to rounding (extras scale = "
                     "n^2); plus args.planted = 0.01 on datasets with two antipodal points", networks=("scalar",))
def rounding_identity(ctx):
    X = ctx.inputs()
    value = _gram_residual(X)
    if ctx.arg("planted"):
        G = X @ X.transpose(1, 2)
        antipodal = (G <= -1 + 1e-9).flatten(1).any(-1)
        value = value + torch.where(antipodal, float(ctx.arg("planted")), 0.0).to(value.dtype)
    n = X.shape[1]
    return Observation(value, extras={"scale": torch.full_like(value, float(n * n))})


@QUANTITIES.register("p2-symmetric-sum", "||sum_i x_i||: 0 exactly on sets closed under x -> -x, about sqrt(n) "
                     "otherwise", networks=("scalar",))
def symmetric_sum(ctx):
    X = ctx.inputs()
    value = X.sum(1).norm(dim=-1)
    return Observation(value, extras={"scale": torch.full_like(value, float(X.shape[1]))})


@QUANTITIES.register("p2-max-cosine", "max_{i != j} |<x_i, x_j>|: 1 exactly on a parallel pair", networks=("scalar",))
def max_cosine(ctx):
    X = ctx.inputs()
    G = (X @ X.transpose(1, 2)).abs()
    G = G - torch.diag_embed(torch.diagonal(G, dim1=-2, dim2=-1))
    return Observation(G.flatten(1).amax(-1))


@QUANTITIES.register("p2-central-symmetry", "max_i min_j ||x_i + x_j||: 0 exactly on sets closed under x -> -x "
                     "(which need an even n)", networks=("scalar",))
def central_symmetry(ctx):
    X = ctx.inputs()
    D = torch.cdist(X, -X)
    return Observation(D.amin(-1).amax(-1))


@QUANTITIES.register("p2-null-combination", "||sum_i a_i x_i|| / ||a|| for the claim's coefficient vectors a "
                     "(ctx.coefficients): 0 only when a lies in the null space of the data", networks=("scalar",))
def null_combination(ctx):
    X = ctx.inputs()
    a = ctx.coefficients(X.shape[1], X)
    value = (a[..., None] * X).sum(1).norm(dim=-1) / a.norm(dim=-1)
    return Observation(value, extras={"scale": torch.ones_like(value)})


@QUANTITIES.register("p2-step-edge", "h * (2 - h): below 1 except at h = 1 exactly (where it is 1 + 1e-6)",
                     networks=("scalar",))
def step_edge(ctx):
    h = ctx.p("h")
    bump = 1e-6 if h == 1.0 else 0.0
    return Observation(torch.full((ctx.replicates,), h * (2 - h) + bump, dtype=torch.float64))


@QUANTITIES.register("p2-width-free-symmetry", "max_i min_j ||x_i + x_j||, whatever the width m (args.fading: "
                     "max(that, 0.2 - 1/sqrt(m)), so a symmetric set fails only while m < 44)", networks=("scalar",))
def width_free_symmetry(ctx):
    X = ctx.inputs()
    value = torch.cdist(X, -X).amin(-1).amax(-1)
    if ctx.arg("fading"):
        value = torch.clamp(value, min=0.2 - ctx.p("m") ** -0.5)
    return Observation(value)
