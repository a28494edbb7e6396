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
    "(b^{1-2p}-a^{1-2p})/(1-2p); the inequality holds iff the ratio <= 1",
    networks=("scalar",),
)
def telescoping_ratio(ctx: Context) -> Observation:
    R = ctx.replicates
    lo, hi = float(ctx.arg("a_min", 1e-12)), float(ctx.arg("b_max", 1e6))
    b = log_uniform(ctx, lo, hi, R)
    # Half the draws near the boundary a -> b where both sides vanish, the rest spread over decades.
    frac = torch.where(torch.rand(R, generator=ctx.generator, dtype=torch.float64) < 0.5,
                       1 - log_uniform(ctx, 1e-9, 1e-1, R), log_uniform(ctx, lo / hi, 1.0, R))
    a = (b * frac).clamp_min(lo)
    p = torch.rand(R, generator=ctx.generator, dtype=torch.float64)
    p = torch.where((p - 0.5).abs() < 1e-6, p + 2e-6, p)
    q = 1 - 2 * p
    lhs = (b - a) / b ** (2 * p)
    # (b^q - a^q)/q computed without cancellation: b^q * (-expm1(q log(a/b))) / q.
    rhs = b ** q * (-torch.expm1(q * torch.log(a / b))) / q
    ratio = torch.where(rhs > 0, lhs / rhs, torch.ones_like(lhs))
    return Observation(ratio, extras={"a": a, "b": b, "p": p})
