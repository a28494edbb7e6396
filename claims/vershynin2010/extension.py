"""Worked example of extending lemmacheck without touching src/: a setting and a quantity for
Vershynin (2010), "Introduction to the non-asymptotic analysis of random matrices", Corollary 5.35.

lemmacheck imports this file (claims/<paper>/extension.py) before it validates the claims beside it.
"""

import torch

from lemmacheck.context import Context, Observation
from lemmacheck.linalg import spectral_norm
from lemmacheck.registry import NETWORKS, QUANTITIES

NETWORKS.register("gaussian-matrix", "an N x n matrix with iid N(0, 1) entries (Vershynin 2010, §5.2)")(__name__)


@QUANTITIES.register("gaussian-smax-excess", "s_max(A) - sqrt(N) - sqrt(n) for A an N x n iid N(0,1) matrix "
                     "(exact singular values)", networks=("gaussian-matrix",))
def smax_excess(ctx: Context) -> Observation:
    N, n = ctx.i("N"), ctx.i("n")
    A = torch.randn(ctx.replicates, N, n, generator=ctx.generator, dtype=ctx.dtype)
    smax, method = spectral_norm(A)
    return Observation(smax - N ** 0.5 - n ** 0.5, method=method)
