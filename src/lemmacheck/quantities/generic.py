"""Setting-free quantities: scalar inequalities and probability tools, checked by random and adversarial draws."""

from __future__ import annotations

import math

import torch

from ..context import Context, Observation
from ..registry import NETWORKS, QUANTITIES

NETWORKS.register("scalar", "no network: a deterministic scalar or small-vector inequality, explored by "
                  "random and boundary-seeking draws")(__name__)


def log_uniform(ctx: Context, lo: float, hi: float, size: int) -> torch.Tensor:
    u = torch.rand(size, generator=ctx.generator, dtype=torch.float64)
    return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


@QUANTITIES.register(
    "telescoping-ratio",
    "Zou et al. Lemma C.1 as |LHS|/|RHS| for 0 < a <= b, p in [0,1]\\{1/2}: (b-a)/b^{2p} over "
    "(b^{1-2p}-a^{1-2p})/(1-2p), scale-free in b; the inequality holds iff the ratio <= 1",
    networks=("scalar",),
)
def telescoping_ratio(ctx: Context) -> Observation:
    """Both sides scale as b^(1-2p), so the ratio depends only on eps = 1 - a/b and p:
        ratio = eps * q / (-expm1(q * log1p(-eps))),  q = 1 - 2p.
    Drawing eps directly (never forming b - a) keeps full float64 precision as a -> b, where the
    inequality is tightest; forming b - a from a ~ b loses ~7 digits and fakes violations."""
    R = ctx.replicates
    near = torch.rand(R, generator=ctx.generator, dtype=torch.float64) < 0.5
    eps = torch.where(near, log_uniform(ctx, 1e-9, 1e-1, R), 1 - log_uniform(ctx, 1e-18, 1.0, R) * (1 - 1e-12))
    p = torch.rand(R, generator=ctx.generator, dtype=torch.float64)
    p = torch.where((p - 0.5).abs() < 1e-6, p + 2e-6, p)
    q = 1 - 2 * p
    ratio = eps * q / (-torch.expm1(q * torch.log1p(-eps)))
    return Observation(ratio, extras={"a_over_b": 1 - eps, "p": p}, method="closed form in (a/b, p)")
