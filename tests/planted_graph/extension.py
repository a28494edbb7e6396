"""Planted quantities for tests/test_graph.py (a test-only extension); none is a real lemma.

pg-gram-least: lambda_min(X^T X / m) for Gaussian X (m x n) whose last column repeats its first: 0 at every width,
    so the planted Lemma C ("lambda_min >= 0.01") is false exactly.
pg-gram-condition: trace(G) / lambda_min(G) for the same G (capped at 1e12): infinite in exact arithmetic, so the
    planted Theorem A ("condition number <= 10^6"), which rests on Lemma C through Lemma B, fails at the witness.
"""

import torch

from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES


def _gram(ctx):
    m, n = ctx.i("m"), ctx.i("n")
    X = ctx.randn(ctx.replicates, m, n)
    X[..., -1] = X[..., 0]
    return X.transpose(1, 2) @ X / m


@QUANTITIES.register("pg-gram-least", "lambda_min(X^T X / m) for Gaussian X with a repeated column: 0",
                     networks=("scalar",))
def gram_least(ctx):
    lam = torch.linalg.eigvalsh(_gram(ctx))[..., 0]
    return Observation(lam.clamp_min(0.0), method="exact eigvalsh")


@QUANTITIES.register("pg-gram-condition", "trace(G)/lambda_min(G), G = X^T X / m with a repeated column (capped 1e12)",
                     networks=("scalar",))
def gram_condition(ctx):
    G = _gram(ctx)
    lam = torch.linalg.eigvalsh(G)[..., 0].abs()
    tr = G.diagonal(dim1=-2, dim2=-1).sum(-1)
    return Observation(torch.clamp(tr / lam.clamp_min(1e-300), max=1e12), method="exact eigvalsh")
