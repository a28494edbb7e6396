"""Zou et al.'s setting-free lemmas and embedded claims (Lemmas A.3, A.11, C.1, C.5; embedded claims E5-E8): scalar
inequalities and probability tools on the engine's `scalar` setting, checked by random and boundary-seeking draws."""

from __future__ import annotations

import math

import torch

from lemmacheck.context import Context, Observation
from lemmacheck.errors import EstimatorError
from lemmacheck.registry import QUANTITIES


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


_ASIN_SERIES = (1 / 6, 3 / 40, 5 / 112, 35 / 1152, 63 / 2816, 231 / 13312, 143 / 10240)  # asin(s) = s + sum c_k s^(2k+1)


def arcsin_tail(s: torch.Tensor, start: int = 1) -> torch.Tensor:
    """asin(s) - s - sum_{k < start} c_k s^(2k+1), computed without cancellation: the Maclaurin tail for s < 0.05
    (truncation error < 1e-17 relative), direct subtraction above (where the tail is >= 1e-9 of asin(s))."""
    small = s.abs() < 0.05
    ser = torch.zeros_like(s)
    for k, c in enumerate(_ASIN_SERIES, 1):
        if k >= start:
            ser = ser + c * s ** (2 * k + 1)
    direct = torch.asin(s) - s
    for k, c in enumerate(_ASIN_SERIES[: start - 1], 1):
        direct = direct - c * s ** (2 * k + 1)
    return torch.where(small, ser, direct)


def arccos_kernel(alpha: torch.Tensor) -> torch.Tensor:
    """E[sigma(Z1) sigma(Z2)] for standard jointly Gaussian Z1, Z2 with correlation alpha (Cho & Saul degree 1):
    (sqrt(1 - alpha^2) + (pi - arccos(alpha)) alpha) / (2 pi)."""
    return (torch.sqrt((1 - alpha ** 2).clamp_min(0)) + (math.pi - torch.arccos(alpha)) * alpha) / (2 * math.pi)


def relu_excess_at_boundary(theta: torch.Tensor) -> torch.Tensor:
    """E[sigma(Z1)sigma(Z2)] - 1/2 + theta^2/4 at alpha = 1 - theta^2/2, stably.

    With psi = arccos(1 - theta^2/2) = 2 asin(theta/2): excess = (sin psi - psi cos psi) / (2 pi). For small psi
    the difference cancels, so use sin psi - psi cos psi = sum_{k>=1} (-1)^(k+1) 2k psi^(2k+1) / (2k+1)!."""
    psi = 2 * torch.asin(theta / 2)
    ser = torch.zeros_like(psi)
    term_sign = 1.0
    for k in range(1, 9):
        ser = ser + term_sign * 2 * k * psi ** (2 * k + 1) / math.factorial(2 * k + 1)
        term_sign = -term_sign
    direct = torch.sin(psi) - psi * torch.cos(psi)
    return torch.where(psi < 0.5, ser, direct) / (2 * math.pi)


@QUANTITIES.register("relu-correlation-excess", "Lemma A.3: sup over correlations alpha <= 1 - theta^2/2 of "
                     "E[sigma(Z1)sigma(Z2)] - 1/2 + theta^2/4 (closed form; the boundary alpha plus random alphas "
                     "below it, so the paper's monotonicity step is checked too)", networks=("scalar",))
def relu_correlation_excess(ctx: Context) -> Observation:
    R = ctx.replicates
    theta = torch.full((R,), ctx.p("theta"), dtype=torch.float64)
    boundary = relu_excess_at_boundary(theta)
    amax = 1 - theta ** 2 / 2
    alphas = -1 + (amax.unsqueeze(-1) + 1) * torch.rand(R, 16, generator=ctx.generator, dtype=torch.float64)
    others = arccos_kernel(alphas) - 0.5 + theta.unsqueeze(-1) ** 2 / 4
    value = torch.maximum(boundary, others.amax(-1))
    return Observation(value, extras={"interior_beats_boundary": (others.amax(-1) > boundary).to(torch.float64)},
                       method="closed form (arc-cosine kernel), cancellation-free series at the boundary")


def relu_integrals_quadrature(a: float) -> tuple[float, float]:
    """The printed double integrals I_1, I_2 of the proof of Lemma A.3 by 2-D quadrature, in polar coordinates.

    The domain {u_1 >= 0, u_2 >= a u_1 / sqrt(1 - a^2)} is the wedge t in [asin a, pi/2] (u = r (cos t, sin t),
    Jacobian r), so the quadrature runs over a rectangle with a smooth integrand. In Cartesian coordinates the inner
    lower limit a u_1 / sqrt(1 - a^2) has slope -7 at a = -0.99 (-22 at -0.999) and dblquad misses by 2e-6 (0.2)."""
    from scipy import integrate

    c = math.sqrt(1 - a * a)

    def g1(r: float, t: float) -> float:  # u_1 u_2 exp(-|u|^2/2) r
        return r ** 3 * math.cos(t) * math.sin(t) * math.exp(-0.5 * r * r)

    def g2(r: float, t: float) -> float:  # u_1^2 exp(-|u|^2/2) r
        return r ** 3 * math.cos(t) ** 2 * math.exp(-0.5 * r * r)

    t0 = math.asin(a)
    q1 = c / (2 * math.pi) * integrate.dblquad(g1, t0, math.pi / 2, 0, math.inf, epsabs=1e-13, epsrel=1e-12)[0]
    q2 = -a / (2 * math.pi) * integrate.dblquad(g2, t0, math.pi / 2, 0, math.inf, epsabs=1e-13, epsrel=1e-12)[0]
    return q1, q2


@QUANTITIES.register("relu-integral-quadrature-error", "E7: max absolute error between numerical quadrature of the "
                     "printed integrals I_1, I_2 (proof of Lemma A.3) and their closed forms, and of alpha/2 + I_1 + "
                     "I_2 against the arc-cosine kernel, at random alpha in (-1, 1)", networks=("scalar",))
def relu_integral_quadrature_error(ctx: Context) -> Observation:
    R = ctx.replicates
    lo = ctx.p("alpha_min", -0.99)
    alphas = lo + (0.999 - lo) * torch.rand(R, generator=ctx.generator, dtype=torch.float64)
    out = torch.empty(R, dtype=torch.float64)
    for r, a in enumerate(alphas.tolist()):
        c = math.sqrt(1 - a * a)
        q1, q2 = relu_integrals_quadrature(a)
        c1 = c ** 3 / (2 * math.pi)
        c2 = -a * math.acos(a) / (2 * math.pi) + a * a * c / (2 * math.pi)
        k = float(arccos_kernel(torch.tensor(a, dtype=torch.float64)))
        out[r] = max(abs(q1 - c1), abs(q2 - c2), abs(a / 2 + q1 + q2 - k))
    return Observation(out, extras={"alpha": alphas},
                       method="scipy dblquad in polar coordinates (epsabs 1e-13) vs closed forms")


@QUANTITIES.register("arccos-series-residual", "E7: |arccos(1 - x) - sqrt(2x) - (sqrt(2)/12) x^{3/2}| at x (the "
                     "expansion in the proof of Lemma A.3), computed without cancellation as 2 asin(sqrt(x/2)) minus "
                     "its first two Maclaurin terms", networks=("scalar",))
def arccos_series_residual(ctx: Context) -> Observation:
    R = ctx.replicates
    x = torch.full((R,), ctx.p("x"), dtype=torch.float64)
    s = torch.sqrt(x / 2)
    # arccos(1 - x) = 2 asin(sqrt(x/2)); sqrt(2x) = 2 s; (sqrt2/12) x^{3/2} = s^3/3 = 2 (s^3 / 6)
    return Observation((2 * arcsin_tail(s, start=2)).abs(), method="Maclaurin tail of asin (no cancellation)")


def _subset_means(u: torch.Tensor, B: int) -> torch.Tensor:
    """(1/B) sum_{i in S} u_i for every size-B subset S of [n]: u (R, n) -> (R, C(n, B))."""
    from .network import all_minibatches

    S = all_minibatches(u.shape[-1], B, u.dtype)
    return u @ S.T / B


def _no_minibatch(ctx: Context) -> Observation | None:
    """B > n: no minibatch of size B exists, so the statement (which requires B <= n) says nothing there; every
    draw is reported as outside its hypotheses rather than computed over an empty set."""
    if ctx.i("B") <= ctx.i("n"):
        return None
    R = ctx.replicates
    return Observation(torch.full((R,), float("nan"), dtype=torch.float64), valid=torch.zeros(R, dtype=torch.bool),
                       method="exact enumeration of all minibatches (none of size B > n)")


def _zero_sum_draws(ctx: Context, R: int, n: int) -> torch.Tensor:
    """Vectors with sum 0 from several shapes (Gaussian, one spike, two-point, heavy-tailed), mixed per replicate."""
    g = ctx.generator
    kind = torch.randint(0, 4, (R, 1), generator=g)
    gauss = torch.randn(R, n, generator=g, dtype=torch.float64)
    spike = torch.zeros(R, n, dtype=torch.float64)
    spike[:, 0] = 1.0
    two = (torch.rand(R, n, generator=g, dtype=torch.float64) < 0.5).to(torch.float64)
    two[:, 0], two[:, 1] = 1.0, 0.0  # never constant
    heavy = torch.randn(R, n, generator=g, dtype=torch.float64) / torch.rand(
        R, n, generator=g, dtype=torch.float64).clamp_min(1e-6)
    u = torch.where(kind == 0, gauss, torch.where(kind == 1, spike, torch.where(kind == 2, two, heavy)))
    u = u * log_uniform(ctx, 1e-6, 1e6, R).unsqueeze(-1)
    return u - u.mean(-1, keepdim=True)


@QUANTITIES.register("minibatch-variance-ratio", "Lemma C.5: E_B[((1/B) sum_{i in B} u_i)^2] / ((1/B)(1/n) sum_i u_i^2)"
                     " for sum_i u_i = 0, the expectation over all C(n, B) subsets enumerated exactly",
                     networks=("scalar",))
def minibatch_variance_ratio(ctx: Context) -> Observation:
    if (none := _no_minibatch(ctx)) is not None:
        return none
    n, B = ctx.i("n"), ctx.i("B")
    u = _zero_sum_draws(ctx, ctx.replicates, n)
    lhs = (_subset_means(u, B) ** 2).mean(-1)
    rhs = (u ** 2).mean(-1) / B
    return Observation(lhs / rhs, method="exact enumeration of all minibatches")


@QUANTITIES.register("minibatch-chain-ratio", "E5 ((C.15)-(C.16)): max of LHS/middle and middle/RHS in "
                     "E_B[((1/B) sum_B z_i)^2] <= (1/(nB)) sum z_i^2 + ((1/n) sum z_i)^2 <= (2/(nB)) (sum z_i)^2 for "
                     "z_i = -l'_i >= 0, exact enumeration of minibatches", networks=("scalar",))
def minibatch_chain_ratio(ctx: Context) -> Observation:
    if (none := _no_minibatch(ctx)) is not None:
        return none
    n, B, R = ctx.i("n"), ctx.i("B"), ctx.replicates
    g = ctx.generator
    margins = torch.randn(R, n, generator=g, dtype=torch.float64) * log_uniform(ctx, 1e-2, 30, R).unsqueeze(-1)
    z = torch.sigmoid(-margins)  # -l'(margin) for the logistic loss, in (0, 1)
    sparse = torch.rand(R, 1, generator=g) < 0.3  # also: one dominant term (the near-equality case of sum z^2 <= (sum z)^2)
    z = torch.where(sparse, z * (torch.arange(n) == 0).to(z.dtype) + 1e-12 * z, z)
    lhs = (_subset_means(z, B) ** 2).mean(-1)
    mid = (z ** 2).sum(-1) / (n * B) + z.mean(-1) ** 2
    rhs = 2 / (n * B) * z.sum(-1) ** 2
    return Observation(torch.maximum(lhs / mid, mid / rhs), method="exact enumeration of all minibatches")


@QUANTITIES.register("flip-count-ratio", "E6: #{j : 1{z~_j > 0} != 1{z_j > 0}} / (#{j : |z_j| <= beta} + ||z~ - z||^2 "
                     "/ beta^2) over random and boundary-seeking (z, z~, beta), exact zeros included (0/0 := 0)",
                     networks=("scalar",))
def flip_count_ratio(ctx: Context) -> Observation:
    R, m = ctx.replicates, ctx.i("m")
    g = ctx.generator
    beta = log_uniform(ctx, 1e-3, 1.0, R).unsqueeze(-1)
    z = torch.randn(R, m, generator=g, dtype=torch.float64) * log_uniform(ctx, 1e-3, 10, R).unsqueeze(-1)
    z = torch.where(torch.rand(R, m, generator=g) < 0.1, torch.zeros_like(z), z)  # exact zeros
    mode = torch.randint(0, 3, (R, 1), generator=g)
    noise = torch.randn(R, m, generator=g, dtype=torch.float64) * beta * log_uniform(ctx, 1e-3, 10, R).unsqueeze(-1)
    # boundary-seeking: entries just outside [-beta, beta] pushed exactly across 0 (each costs ~beta^2), and
    # exact zeros nudged positive (free flips inside the band)
    edge = torch.sign(z) * beta * (1 + 1e-12 + log_uniform(ctx, 1e-12, 1e-3, R).unsqueeze(-1))
    z_edge = torch.where(torch.rand(R, m, generator=g) < 0.5, edge, z)
    zt_edge = torch.where(z_edge.abs() > beta, -1e-300 * torch.sign(z_edge), torch.where(z_edge == 0, 1e-300, z_edge))
    zz = torch.where(mode == 2, z_edge, z)
    zt = torch.where(mode == 0, z + noise, torch.where(mode == 1, -z, zt_edge))
    flips = ((zt > 0) != (zz > 0)).sum(-1).to(torch.float64)
    denom = (zz.abs() <= beta).sum(-1).to(torch.float64) + ((zt - zz) ** 2).sum(-1) / beta.squeeze(-1) ** 2
    return Observation(torch.where(flips == 0, torch.zeros_like(flips), flips / denom),
                       method="random + boundary-seeking draws")


def smoothed_hinge(x: torch.Tensor) -> torch.Tensor:
    """l(x) = 1/2 - x (x <= 0), (1 - x)^2 / 2 (0 < x < 1), 0 (x >= 1): continuous, non-increasing, l -> 0, 1-Lipschitz,
    1-smooth, and A3.2 holds with x_0 = 0, alpha_0 = 1, alpha_1 = sqrt(2), p = 1/2. It reaches 0 at x = 1."""
    return torch.where(x <= 0, 0.5 - x, torch.where(x < 1, (1 - x) ** 2 / 2, torch.zeros_like(x)))


def _loss_minus_loss_at_zero(x: torch.Tensor, kind: int) -> torch.Tensor:
    """l(x) - l(0) without cancellation: logistic log1p(expm1(-x)/2); smoothed hinge -x, x(x-2)/2, -1/2."""
    if kind == 1:
        return torch.where(x <= 0, -x, torch.where(x < 1, x * (x - 2) / 2, torch.full_like(x, -0.5)))
    return torch.log1p(torch.expm1(-x) / 2)


@QUANTITIES.register("zero-error-margin", "E8: min_i y_i ŷ_i over margin vectors with L_S <= l(0)/n (others are "
                     "not valid), boundary-seeking draws; loss = 0 logistic, 1 smoothed hinge (both satisfy A3.1-3.4)",
                     networks=("scalar",))
def zero_error_margin(ctx: Context) -> Observation:
    """The hypothesis L_S <= l(0)/n is decided as (l(m_1) - l(0)) + sum_{i>=2} l(m_i) <= 0 with the first term computed
    stably, and margins capped at 700 so that every logistic loss is a representable positive number: forming
    mean(l) - l(0)/n in float64 would call l(0) + 1e-18 "equal" to l(0) and fake counterexamples for the logistic loss."""
    R, n = ctx.replicates, ctx.i("n")
    g = ctx.generator
    kind = ctx.i("loss")
    loss = smoothed_hinge if kind == 1 else (lambda x: torch.nn.functional.softplus(-x))
    rest = log_uniform(ctx, 1.0, 700.0, R * n).reshape(R, n)  # margins >= 1 (l = 0 for the hinge); l > 0 representable
    first = torch.where(torch.rand(R, generator=g) < 0.5, torch.zeros(R, dtype=torch.float64),
                        torch.randn(R, generator=g, dtype=torch.float64) * log_uniform(ctx, 1e-9, 1.0, R))
    marg = torch.cat([first.unsqueeze(-1), rest[:, 1:]], -1)
    excess = _loss_minus_loss_at_zero(marg[:, 0], kind) + loss(marg[:, 1:]).sum(-1)  # n (L_S - l(0)/n)
    valid = excess < 0 if ctx.arg("strict", False) else excess <= 0  # args.strict: the hypothesis L_S < l(0)/n
    return Observation(marg.amin(-1), valid=valid, extras={"n_times_excess": excess},
                       method="boundary-seeking margin vectors; hypothesis decided without cancellation")


def li_liang_probabilities(Z: torch.Tensor, A: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """Exact P_w[||h(w)|| >= threshold] in d = 2, h(w) = sum_i a_i 1{<w, z_i> > 0} z_i, w ~ N(0, I_2).

    The direction of w is uniform and h is constant on each arc between the 2n angles theta_i +- pi/2, so the
    probability is a sum of arc lengths. Arcs shorter than 1e-12 (coincident boundaries, e.g. of antipodal points) have
    probability 0 and are dropped: their midpoint sits on a boundary, where rounding would count a spurious h.
    Z (R, n, 2), A (R, K, n), threshold (R, K) -> (R, K)."""
    ang = torch.atan2(Z[..., 1], Z[..., 0])  # (R, n)
    bnd = torch.cat([ang + math.pi / 2, ang - math.pi / 2], -1).remainder(2 * math.pi).sort(-1).values
    nxt = torch.cat([bnd[:, 1:], bnd[:, :1] + 2 * math.pi], -1)
    mid = (bnd + nxt) / 2  # (R, 2n)
    length = nxt - bnd
    length = torch.where(length > 1e-12, length, torch.zeros_like(length))
    w = torch.stack([torch.cos(mid), torch.sin(mid)], -1)  # (R, 2n, 2)
    act = ((w @ Z.transpose(-1, -2)) > 0).to(Z.dtype)  # (R, 2n, n)
    h = (act.unsqueeze(1) * A.unsqueeze(2)) @ Z.unsqueeze(1)  # (R, K, 2n, 2)
    big = (h.norm(dim=-1) >= threshold.unsqueeze(-1)).to(Z.dtype)
    return (big * length.unsqueeze(1)).sum(-1) / (2 * math.pi)


@QUANTITIES.register("li-liang-probability", "Lemma A.11: min over a (structured search plus ctx.coefficients) of "
                     "P_w[||h(w)|| >= t max|a_i| phi/n] for the claim's n unit vectors in d = 2 (ctx.inputs, "
                     "separation phi); exact arc enumeration", networks=("scalar",))
def li_liang_probability(ctx: Context) -> Observation:
    """The points z_i are the claim's datasets (ctx.inputs: any geometry, or a hunt's pinned dataset, in d = 2) and
    the coefficient vector ctx.coefficients(n, Z) joins the structured search over "every a", so runs and hunts move
    both "for all" objects; the probability is exact in d = 2 only."""
    from .quantities import _candidate_coefficients

    n, t = ctx.i("n"), ctx.p("t")
    phi = ctx.p("phi") if "phi" in ctx.params else 1.0 / ctx.p("iphi")
    if "geometry" in ctx.args:
        raise EstimatorError("args.geometry is not read: the points are ctx.inputs(), declare inputs.geometry")
    Z = ctx.inputs().to(torch.float64)
    R = Z.shape[0]
    if Z.shape[-1] != 2 or Z.shape[-2] != n:
        raise EstimatorError(f"Lemma A.11's probability is exact in d = 2: the inputs are {tuple(Z.shape[1:])}, "
                             f"expected ({n}, 2) (inputs d = \"2\", n = \"n\")")
    A = _candidate_coefficients(ctx.generator, R, n, Z @ Z.transpose(-1, -2))
    A = torch.cat([A, ctx.coefficients(n, Z).to(torch.float64).unsqueeze(1)], 1)
    thr = t * A.abs().amax(-1) * phi / n
    p = li_liang_probabilities(Z, A, thr)
    return Observation(p.amin(-1), extras={"candidate": p.argmin(-1).to(torch.float64)},
                       method="exact arc enumeration (d = 2), structured search over a")
