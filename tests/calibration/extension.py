"""Quantities whose law is known exactly, for calibrating verdicts. Test-only: imported by the
calibration tests and scripts/calibration.py, never by the product, so the product's registry stays clean.

Every quantity draws from ctx.generator only (the runner's seeded stream), so a calibration run replays exactly.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lemmacheck.context import Context, Observation
from lemmacheck.registry import QUANTITIES

NET = ("scalar",)


def _memory(params, replicates, itemsize):
    # a few vectors per replicate (calib-tight: d = 64 entries): the runner's generic floor reads the swept m as
    # a network width, which these quantities do not have
    return 8 * replicates * 64 * itemsize


@QUANTITIES.register("calib-bernoulli", "calibration: 1 with probability args.rate (else 0); a claim 'value <= 0.5 "
                     "w.p. 1 - delta' is violated at exactly that rate", networks=NET, memory=_memory)
def bernoulli(ctx: Context) -> Observation:
    u = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    return Observation((u < float(ctx.arg("rate"))).to(torch.float64))


# a logistic rise in log10 m over two decades: C goes 10% -> 90% of its limit 2 between m = 10^0.5 and 10^2.5
LOGISTIC_MID = 1.5
LOGISTIC_K = math.log(81.0) / 2.0


def _constant(kind: str, m: torch.Tensor | float) -> float:
    m = float(m)
    table = {"flat": lambda: 2.0, "pow0.1": lambda: 2.0 * m ** 0.1, "pow0.2": lambda: 2.0 * m ** 0.2,
             "sqrtlog": lambda: math.sqrt(math.log(m)), "converge": lambda: 2.0 * (1.0 - m ** -0.5),
             # logarithmic growth and convergence from below (1 - c g(m), c = 1, g -> 0)
             "log": lambda: math.log(m), "loglog": lambda: math.log(math.log(m)),
             "conv-sqrt": lambda: 1.0 - m ** -0.5, "conv-m": lambda: 1.0 - 1.0 / m,
             "conv-log": lambda: 1.0 - 1.0 / math.log(m),
             # rising from far below their limit and saturating (true bounds), and slow growth defined from m = 1
             "sat-sqrt": lambda: 2.0 - m ** -0.5,
             "sat-logistic": lambda: 2.0 / (1.0 + math.exp(-LOGISTIC_K * (math.log10(m) - LOGISTIC_MID))),
             "sqrtlog-e": lambda: math.sqrt(1.0 + math.log(m)), "loglog-e": lambda: 1.0 + math.log1p(math.log(m))}
    return table[kind]() if kind in table else 2.0


@QUANTITIES.register("calib-scaling", "calibration: C(m) m^power exp(sigma Z) (power: args.power, default 1/2) with C(m) = "
                     "args.growth (flat, pow0.1, pow0.2, sqrtlog, converge, log, loglog, and 1 - 1/sqrt(m), 1 - 1/m, "
                     "1 - 1/log m as conv-sqrt, conv-m, conv-log); 'widening' puts m^0.3 on 30% of draws (flat median, growing "
                     "1 - delta tail); 'zeros' makes 30% of draws 0; 'thinning-zeros' (flat) and 'pow0.2-zero-top' put zeros "
                     "where a mean or a stand-in would mislead an upper-bound fit; 'nan-above' is NaN for m >= args.threshold",
                     networks=NET, memory=_memory)
def scaling(ctx: Context) -> Observation:
    m = ctx.p("m")
    kind = str(ctx.arg("growth", "flat"))
    sigma = float(ctx.arg("sigma", 0.05))
    z = torch.randn(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    u = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    value = _constant(kind, m) * m ** float(ctx.arg("power", 0.5)) * torch.exp(sigma * z)
    if kind == "widening":
        value = torch.where(u < 0.3, value * m ** 0.3, value)
    elif kind == "zeros":
        value = torch.where(u < 0.3, torch.zeros_like(value), value)
    elif kind == "thinning-zeros":  # flat C(m); the share of exact zeros falls from 30% at m = 64 to 0 at 32768
        share = 0.3 * max(0.0, 1.0 - math.log(m / 64) / math.log(32768 / 64))
        value = torch.where(u < share, torch.zeros_like(value), value)
    elif kind == "pow0.2-zero-top":  # C(m) ~ m^0.2, and 70% exact zeros at the largest m
        value = value * m ** 0.2
        value = torch.where(u < (0.7 if m >= 32768 else 0.0), torch.zeros_like(value), value)
    elif kind == "nan-above" and m >= float(ctx.arg("threshold")):
        value = torch.full_like(value, math.nan)
    return Observation(value)


def gauss_norm_draws(h: int, u: torch.Tensor) -> torch.Tensor:
    """||G||_2 for h x h standard Gaussian G, one per row of u (uniforms, shape (R, 2h - 1)), exactly in law and
    in O(h) per draw: G's singular values are those of the bidiagonal matrix with diagonal chi_h, ..., chi_1 and
    superdiagonal chi_(h-1), ..., chi_1 (Householder bidiagonalisation of a Gaussian matrix; Silverstein 1985,
    Dumitriu and Edelman 2002). The chi draws come from the uniforms by inversion; the top eigenvalue of the
    tridiagonal B^T B by bisection (scipy)."""
    from scipy import linalg, special

    dof = np.r_[np.arange(h, 0, -1), np.arange(h - 1, 0, -1)].astype(float)
    chi = np.sqrt(2.0 * special.gammaincinv(dof / 2.0, u.numpy()))  # (R, 2h - 1)
    out = np.empty(len(chi))
    for r, row in enumerate(chi):
        a, b = row[:h], row[h:]
        if h == 1:
            out[r] = a[0]
            continue
        diag = a ** 2 + np.r_[0.0, b ** 2]
        off = a[:-1] * b
        out[r] = math.sqrt(linalg.eigvalsh_tridiagonal(diag, off, select="i", select_range=(h - 1, h - 1))[0])
    return torch.from_numpy(out)


@QUANTITIES.register("calib-gauss-norm", "calibration: ||G||_2 of an h x h standard Gaussian matrix (h = params.m), "
                     "exact in law through its chi-bidiagonal form; E||G||_2 <= 2 sqrt(h) (Gordon), and "
                     "E||G||_2 / sqrt(h) rises from 0.8 at h = 1 to 2", networks=NET, memory=_memory)
def gauss_norm(ctx: Context) -> Observation:
    h = int(ctx.p("m"))
    u = torch.rand(ctx.replicates, max(2 * h - 1, 1), generator=ctx.generator, dtype=torch.float64)
    return Observation(gauss_norm_draws(h, u.clamp(1e-300, 1.0 - 1e-16)))


@QUANTITIES.register("calib-max-abs", "calibration: max of n = params.m iid |N(0, 1)|, exact by inversion (its CDF is "
                     "(2 Phi(x) - 1)^n); it grows like sqrt(2 log n)", networks=NET, memory=_memory)
def max_abs(ctx: Context) -> Observation:
    n = float(ctx.p("m"))
    u = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64).clamp_min(1e-300)
    tail = -torch.expm1(torch.log(u) / n)  # 1 - U^(1/n) = P(|g| > max), without cancellation
    return Observation(-torch.special.ndtri(tail / 2.0))


@QUANTITIES.register("calib-tight", "calibration: args.form = 'triangle' (||a + b|| - ||a|| - ||b|| for parallel a, b: "
                     "<= 0 exactly, extras scale = ||a + b||), 'ratio' (sum x^2 / x.x: = 1 exactly), 'excess' "
                     "(1 + args.excess: a real violation of <= 1), in the claim's dtype", networks=NET, memory=_memory)
def tight(ctx: Context) -> Observation:
    d = ctx.i("d", 64)
    a = ctx.randn(ctx.replicates, d)
    form = str(ctx.arg("form"))
    if form == "triangle":
        b = a * torch.exp(ctx.randn(ctx.replicates, 1))  # parallel, positive multiple: equality in exact arithmetic
        s = torch.linalg.vector_norm(a + b, dim=-1)
        value = s - torch.linalg.vector_norm(a, dim=-1) - torch.linalg.vector_norm(b, dim=-1)
        return Observation(value, extras={"scale": s})
    if form == "ratio":
        return Observation((a * a).sum(-1) / torch.einsum("ri,ri->r", a, a))
    return Observation(torch.ones(ctx.replicates, dtype=ctx.dtype) * (1 + float(ctx.arg("excess"))))


@QUANTITIES.register("calib-negative", "calibration: -2 exp(sigma Z) - args.shift; against 'value <= -1' it holds "
                     "for shift = 0 and is violated with probability P(2 exp(sigma Z) < 1 - shift) otherwise",
                     networks=NET, memory=_memory)
def negative(ctx: Context) -> Observation:
    z = torch.randn(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    return Observation(-2.0 * torch.exp(float(ctx.arg("sigma", 0.1)) * z) + float(ctx.arg("shift", 0.0)))


@QUANTITIES.register("calib-hitting", "calibration: a 'trajectory' that reaches its target (value 1) with probability "
                     "args.reach and otherwise stops at the budget args.kmax (value kmax, extras reached = 0)",
                     networks=NET, memory=_memory)
def hitting(ctx: Context) -> Observation:
    u = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    reached = u < float(ctx.arg("reach"))
    kmax = float(ctx.arg("kmax", 100))
    return Observation(torch.where(reached, torch.ones_like(u), torch.full_like(u, kmax)),
                       extras={"reached": reached.to(torch.float64), "budget": torch.full_like(u, kmax)})
