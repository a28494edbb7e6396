"""Planted quantities of known truth for tests/test_findings.py (a test-only extension); none is a real lemma.

pf-chi2-ratio: ||g||^2 / m for g ~ N(0, I_m). "||g||^2/m <= 3/2 with probability >= 0.95" is true for every
    m >= 64 (P = 0.005 at m = 64) and false at small m (P = 0.2 at m = 4): a whp statement whose width condition
    the small widths miss. Its violation rate fades as m grows: a finite-width effect, never a finding.
pf-duplicate-gram: the least eigenvalue of X^T X / m for a data matrix X (m x n) whose last column repeats its
    first: 0 for every draw and every width, an exact obstruction to "lambda_min >= 0.01".
"""

import torch

from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES


@QUANTITIES.register("pf-chi2-ratio", "||g||^2 / m for g ~ N(0, I_m) (a chi-square over its degrees of freedom)",
                     networks=("scalar",))
def chi2_ratio(ctx):
    m = ctx.i("m")
    g = ctx.randn(ctx.replicates, m)
    return Observation((g * g).sum(-1) / m)


@QUANTITIES.register("pf-duplicate-gram", "lambda_min(X^T X / m) for Gaussian X (m x n) with a repeated column: 0",
                     networks=("scalar",))
def duplicate_gram(ctx):
    m, n = ctx.i("m"), ctx.i("n")
    X = ctx.randn(ctx.replicates, m, n)
    X[..., -1] = X[..., 0]
    G = X.transpose(1, 2) @ X / m
    lam = torch.linalg.eigvalsh(G)[..., 0]
    return Observation(lam.clamp_min(0.0), method="exact eigvalsh")
