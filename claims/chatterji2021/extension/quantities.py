"""Quantities of the chatterji2021 setting (Chatterji, Long, Bartlett 2021: deep smoothed-ReLU nets, logistic loss).

Parameters (the paper's symbols): p (input dimension = width), L (hidden layers), n (samples, ≥ 3), h (the
activation's smoothing), delta, kappa (step-size multiple), T (GD steps), scale (multiplies every layer of the
He initialisation). Options (check.args): activation ("huberized-relu" default, or "scaled-swish"); weights
("init": He initialisation times `scale`; "small-loss": trained until separated, then scaled so that
J = target_fraction · n^{−(1+24L)} (catalogue §1.8: train-then-scale), the way to reach Theorem 3.1's regime;
"chain": a width-1 chain of k_lead layers b_lead then the rest a_trail, the shape where Lemma B.6 (1) fails);
train_lr, train_steps, target_fraction.

Statements about EVERY V (Lemmas 4.3, 4.5, 4.4, 4.2, Definition 2.1) are checked as "always" claims over the
instance generator: a violation is one counterexample. Their hypotheses (‖V‖ ≥ √(L+½), J < n^{−(1+24L)},
h ≤ h_max, h ≤ 1) are evaluated per replicate and returned as the `valid` mask.
"""

from __future__ import annotations

import math

import torch

from lemmacheck import linalg
from lemmacheck.boundary import to_numpy
from lemmacheck.context import Context, Observation
from lemmacheck.errors import EstimatorError
from lemmacheck.kernels import Activation
from lemmacheck.registry import QUANTITIES

from . import network as net

NET = (net.NAME,)


# ------------------------------------------------------------------------------------------------ set-up

def _act(ctx: Context, h: float | None = None) -> Activation:
    return net.activation(str(ctx.arg("activation", "huberized-relu")), float(ctx.p("h") if h is None else h))


def _weights(ctx: Context, X: torch.Tensor, y: torch.Tensor, act: Activation) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Weights per args.weights, and the mask of replicates where the construction succeeded."""
    L, p, n = ctx.i("L"), ctx.i("p"), X.shape[1]
    Vs = net.init(ctx.generator, ctx.replicates, p, L, ctx.dtype)
    kind = ctx.arg("weights", "init")
    if kind == "init":
        c = float(ctx.p("scale", 1.0))
        return [c * V for V in Vs], torch.ones(ctx.replicates, dtype=torch.bool)
    if kind == "small-loss":
        target = net.log_threshold(n, L) + math.log(float(ctx.arg("target_fraction", 0.1)))
        return net.train_then_scale(Vs, X, y, act, log_target=target, lr=float(ctx.arg("train_lr", 0.5)),
                                    steps=int(ctx.arg("train_steps", 300)))
    if kind == "chain":
        return _chain_weights(ctx, X, y)
    raise EstimatorError(f"args.weights = '{kind}': expected 'init', 'small-loss' or 'chain'")


def _chain_weights(ctx: Context, X: torch.Tensor, y: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Width p = 1: layers 1..k_lead are b_lead, layers k_lead+1..L+1 are a_trail (the shape where Lemma B.6 (1)'s
    middle bound fails: a heavy tail of trailing layers). V_1's sign follows the data and V_{L+1}'s the labels, so
    every point is active and correctly classified; a dataset whose points (or labels) differ in sign admits no
    such chain and is not valid."""
    L, p = ctx.i("L"), ctx.i("p")
    if p != 1:
        raise EstimatorError(f"args.weights = 'chain' is a width-1 network: p = {p}")
    k, b, a = ctx.i("k_lead"), float(ctx.p("b_lead")), float(ctx.p("a_trail"))
    if not 1 <= k <= L:
        raise EstimatorError(f"k_lead = {k}: expected 1 <= k_lead <= L = {L}")
    sx, sy = torch.sign(X[:, 0, 0]), torch.sign(y[:, 0])
    ok = (torch.sign(X[:, :, 0]) == sx.unsqueeze(-1)).all(-1) & (torch.sign(y) == sy.unsqueeze(-1)).all(-1)
    one = torch.ones(ctx.replicates, 1, 1, dtype=ctx.dtype)
    Vs = [one * (b if j < k else a) for j in range(L + 1)]
    Vs[0] = Vs[0] * sx.view(-1, 1, 1)
    Vs[-1] = Vs[-1] * sy.view(-1, 1, 1)
    return Vs, ok


def _problem(ctx: Context):
    X = ctx.inputs()
    if X.shape[-1] != ctx.i("p"):
        raise EstimatorError(f"inputs have dimension {X.shape[-1]} but the width is p = {ctx.i('p')} (the paper "
                             "takes the input dimension equal to the width)")
    y = ctx.labels(X.shape[1])
    act = _act(ctx)
    Vs, ok = _weights(ctx, X, y, act)
    return X, y, act, Vs, ok


def _log_uniform(ctx: Context, lo: float, hi: float, *shape: int) -> torch.Tensor:
    u = torch.rand(*shape, generator=ctx.generator, dtype=torch.float64)
    return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


# --------------------------------------------------------------------------- Definition 2.1 (activations)

def _h_and_points(ctx: Context, k: int = 512, top: float = 1e4) -> tuple[torch.Tensor, torch.Tensor]:
    """Per replicate an h (the claim's, or log-uniform in [args.h_min, args.h_max]) and k test points z spread
    over scales h·10^{−6}..h·top with random signs, plus the kinks 0 and ±h and points just beside them."""
    R = ctx.replicates
    if "h" in ctx.params:
        h = torch.full((R,), float(ctx.p("h")), dtype=torch.float64)
    else:
        h = _log_uniform(ctx, float(ctx.arg("h_min", 1e-6)), float(ctx.arg("h_max", 10.0)), R)
    t = _log_uniform(ctx, 1e-6, top, R, k) * torch.where(torch.rand(R, k, generator=ctx.generator) < 0.5, -1.0, 1.0)
    special = torch.tensor([0.0, 1.0, -1.0, 1 - 1e-9, 1 + 1e-9, 1e-9, -1e-9, 0.5, 2.0, 1.2], dtype=torch.float64)
    z = torch.cat([t, special.expand(R, -1)], -1) * h[:, None]
    return h, z


def _per_replicate(ctx: Context, h: torch.Tensor, fn) -> torch.Tensor:
    """Evaluate fn(act, row) per replicate (each has its own h)."""
    name = str(ctx.arg("activation", "huberized-relu"))
    return torch.stack([fn(net.activation(name, float(h[r])), r) for r in range(h.shape[0])])


@QUANTITIES.register("chatterji2021-activation-derivative-bound", "Definition 2.1: max over z of |phi'(z)| for the "
                     "Huberized ReLU / scaled Swish at h (random scales, kinks); the definition needs <= 1",
                     networks=NET)
def activation_derivative_bound(ctx: Context) -> Observation:
    h, z = _h_and_points(ctx)
    val = _per_replicate(ctx, h, lambda act, r: act.df(z[r]).abs().max())
    zero = _per_replicate(ctx, h, lambda act, r: act.f(torch.zeros(1, dtype=torch.float64)).abs()[0])
    return Observation(val, extras={"h": h, "abs_phi_at_0": zero}, method="random scales and kinks")


@QUANTITIES.register("chatterji2021-activation-derivative-lipschitz", "Definition 2.1: max of h |phi'(a) - phi'(b)| "
                     "/ |a - b| over random pairs and of h |phi''(z)| (phi' must be (1/h)-Lipschitz: <= 1)",
                     networks=NET)
def activation_derivative_lipschitz(ctx: Context) -> Observation:
    h, z = _h_and_points(ctx)
    R, k = z.shape
    # Partners at distance h·10^{U(−1.3, 1)}: φ'(z) = clip(z/h) carries a rounding error eps·|z/h| (<= eps in the
    # Huber band, where it is not constant), so the quotient's relative error is ~eps h/|a − b|: at 1e-7 h that was
    # 1e-9, far above the comparison tolerance (2.8e-14): false violations of an exact equality in the band. φ'' at the
    # test points covers the small scales.
    sign = torch.where(torch.rand(R, k, generator=ctx.generator) < 0.5, -1.0, 1.0)
    w = z + sign * h[:, None] * _log_uniform(ctx, 0.05, 10.0, R, k)

    def ratio(act: Activation, r: int) -> torch.Tensor:
        pairs = (h[r] * (act.df(z[r]) - act.df(w[r])).abs() / (z[r] - w[r]).abs()).max()
        return torch.maximum(pairs, (h[r] * act.d2f(z[r]).abs()).max())

    return Observation(_per_replicate(ctx, h, ratio), extras={"h": h},
                       method="random pairs at distances h 0.05..h 10, and h |phi''| on the test points")


@QUANTITIES.register("chatterji2021-activation-taylor-defect", "Definition 2.1: max over z of |phi'(z) z - phi(z)| / h "
                     "(the definition needs <= 1/2)", networks=NET)
def activation_taylor_defect(ctx: Context) -> Observation:
    # |z| ≤ 100 h: beyond, φ'(z) z − φ(z) cancels in float64 (Huber: z − (z − h/2)) while the defect is
    # constant (Huber: h/2 for z ≥ h; scaled Swish: → 0), so larger z add rounding, not information.
    h, z = _h_and_points(ctx, top=100.0)
    val = _per_replicate(ctx, h, lambda act, r: ((act.df(z[r]) * z[r] - act.f(z[r])).abs() / h[r]).max())
    return Observation(val, extras={"h": h}, method="random scales and kinks")


@QUANTITIES.register("chatterji2021-activation-contraction", "Lemma B.9: ||phi(v1) - phi(v2)|| / ||v1 - v2|| for "
                     "random v1, v2 in R^p at scales around h (<= 1)", networks=NET)
def activation_contraction(ctx: Context) -> Observation:
    h, _ = _h_and_points(ctx, 1)
    p = ctx.i("p", 16)
    R = ctx.replicates
    v1 = torch.randn(R, p, generator=ctx.generator, dtype=torch.float64) * h[:, None] * _log_uniform(ctx, 1e-3, 1e3, R, 1)
    v2 = v1 + torch.randn(R, p, generator=ctx.generator, dtype=torch.float64) * h[:, None] * _log_uniform(ctx, 1e-4, 1e2, R, 1)
    val = _per_replicate(ctx, h, lambda act, r: (act.f(v1[r]) - act.f(v2[r])).norm() / (v1[r] - v2[r]).norm())
    # phi(v1) - phi(v2) cancels: each phi(v_i) carries rounding eps |v_i| (Huber: v - h/2 past h), so the ratio's
    # error is ~eps (|v1| + |v2|) / |v1 - v2|, up to 1e7 eps here. Reported as the comparison scale: the full run's
    # 6 "violations" (ratio 1 + 1e-13..5.6e-12, both points past h) have exact ratio 1 in 50-digit arithmetic.
    scale = (v1.norm(dim=-1) + v2.norm(dim=-1)) / (v1 - v2).norm(dim=-1)
    return Observation(val, extras={"h": h, "scale": scale}, method="random vector pairs")


# ------------------------------------------------------------------------------------- gradient bounds

@QUANTITIES.register("chatterji2021-gradient-upper-ratio", "Lemma 4.3: ||grad J(V)|| / (sqrt((L+1)p) ||V||^{L+1} "
                     "min{J(V), 1}), valid where ||V|| >= sqrt(L + 1/2)", networks=NET)
def gradient_upper_ratio(ctx: Context) -> Observation:
    X, y, act, Vs, ok = _problem(ctx)
    L = ctx.i("L")
    ratio, log_j, nV = lemma_4_3_ratio(Vs, X, y, act)
    valid = ok & (nV >= math.sqrt(L + 0.5))
    return Observation(ratio, valid=valid, extras={"log_J": log_j, "norm_V": nV},
                       method=f"closed-form gradient, ratio in log space; weights = {ctx.arg('weights', 'init')}")


def lemma_4_3_ratio(Vs: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor,
                    act: net.Activation) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(||grad J|| / (sqrt((L+1)p) ||V||^{L+1} min{J, 1}), log J, ||V||). Large ||V|| makes every margin huge, so
    J and the gradient both underflow (0/0): the ratio is formed in log space, ||grad J|| = e^s ||G|| and
    log min{J, 1} = min{log J, 0}."""
    L, p = len(Vs) - 1, X.shape[-1]
    grads, s, fwd = net.scaled_loss_gradients(Vs, X, y, act)
    nV = net.collective_norm(Vs)
    log_j = net.log_loss(fwd.out, y)
    log_ratio = (s + torch.log(net.collective_norm(grads)) - 0.5 * math.log((L + 1) * p)
                 - (L + 1) * torch.log(nV) - torch.clamp(log_j, max=0.0))
    return torch.exp(log_ratio), log_j, nV


def _small_loss_state(ctx: Context):
    """A small-loss instance V (V plays V^{(1)} = V^{(t)} in Lemma 4.5's standalone form) with its hypotheses."""
    X, y, act, Vs, ok = _problem(ctx)
    L, p, n = ctx.i("L"), ctx.i("p"), X.shape[1]
    grads, fwd, _ = net.loss_gradients(Vs, X, y, act)
    logJ = net.log_loss(fwd.out, y)
    nV = net.collective_norm(Vs)
    hyp = ok & (logJ < net.log_threshold(n, L)) & (float(ctx.p("h")) <= net.h_max(logJ, nV, L, p))
    return X, y, act, Vs, grads, fwd, logJ, nV, hyp


@QUANTITIES.register("chatterji2021-alignment-ratio", "Lemma 4.5 (alignment form): (-grad J . V) / ((L + 3/4) J "
                     "log(1/J)) (>= 1), valid where J < n^{-(1+24L)} and h <= h_max(V)", networks=NET)
def alignment_ratio(ctx: Context) -> Observation:
    _X, y, _act, Vs, grads, fwd, logJ, nV, hyp = _small_loss_state(ctx)
    L = ctx.i("L")
    # float64 J: fine while J > 1e-300 (n = 3: L <= 9); g_s ≈ J_s there, so the ratio is O(1).
    w = net.g_weights(fwd.out, y)
    align = -net.inner(grads, Vs)
    value = align / ((L + 0.75) * torch.exp(logJ) * (-logJ))
    return Observation(value, valid=hyp, extras={"log_J": logJ, "norm_V": nV, "sum_g": w.sum(-1)},
                       method=f"closed-form gradient; weights = {ctx.arg('weights', 'init')}")


@QUANTITIES.register("chatterji2021-gradient-lower-ratio", "Lemma 4.5 (eq. 6): ||grad J|| ||V|| / ((L + 3/4) J "
                     "log(1/J)) (>= 1), valid where J < n^{-(1+24L)} and h <= h_max(V)", networks=NET)
def gradient_lower_ratio(ctx: Context) -> Observation:
    _X, _y, _act, _Vs, grads, _fwd, logJ, nV, hyp = _small_loss_state(ctx)
    L = ctx.i("L")
    value = net.collective_norm(grads) * nV / ((L + 0.75) * torch.exp(logJ) * (-logJ))
    return Observation(value, valid=hyp, extras={"log_J": logJ, "norm_V": nV},
                       method=f"closed-form gradient; weights = {ctx.arg('weights', 'init')}")


# ------------------------------------------------------------------------------------ one GD step, smoothness

@QUANTITIES.register("chatterji2021-descent-ratio", "Lemma 4.4: (J_t - J_{t+1}) / (alpha L ||grad J_t||^2/(L+1/2)) "
                     "for one GD step at alpha = kappa * h/(1024 (L+1)^2 sqrt(p) ||V||^{3L+5} J_t) (>= 1)",
                     networks=NET)
def descent_ratio(ctx: Context) -> Observation:
    X, y, act, Vs, ok = _problem(ctx)
    L, p, n = ctx.i("L"), ctx.i("p"), X.shape[1]
    h = float(ctx.p("h"))
    grads, fwd, _ = net.loss_gradients(Vs, X, y, act)
    J = net.loss(fwd.out, y)
    nV = net.collective_norm(Vs)
    alpha = float(ctx.p("kappa", 1.0)) * net.alpha_lemma_4_4(h, J, nV, L, p)
    steps = [-alpha.reshape(-1, 1, 1) * g for g in grads]
    # The step is far below float64 resolution of V at kappa ~ 1: difference the outputs layer by layer.
    dout = net.forward_difference(Vs, steps, X, act, fwd)
    drop = -net.margin_loss_change(net.margins(fwd.out, y), y * dout)
    gsq = net.collective_norm(grads) ** 2
    promised = alpha * L * gsq / (L + 0.5)
    valid = ok & (net.log_loss(fwd.out, y) < net.log_threshold(n, L)) & (h <= 1)
    return Observation(drop / promised, valid=valid,
                       extras={"alpha": alpha, "log_J": net.log_loss(fwd.out, y), "relative_drop": drop / J},
                       method="one GD step; output and loss changes propagated as differences (no cancellation)")


@QUANTITIES.register("chatterji2021-smoothness-ratio", "Lemma 4.2: ||Hessian of J at V||_op / (256 (L+1) sqrt(p) "
                     "||V||^{3L+5} J(V) / h), exact Hessian (small p), valid where ||V|| >= sqrt(L+1/2), h <= 1",
                     networks=NET)
def smoothness_ratio(ctx: Context) -> Observation:
    X, y, act, Vs, ok = _problem(ctx)
    L, p = ctx.i("L"), ctx.i("p")
    h = float(ctx.p("h"))
    sizes = [V[0].numel() for V in Vs]
    if sum(sizes) > 600:
        raise EstimatorError(f"exact Hessian of {sum(sizes)} parameters is too large here (use p <= 16, L <= 2)")
    # Every replicate's Hessian at once: J's replicates are independent, so the Hessian of their sum is
    # block-diagonal and one batched double backward along e_j in every block gives column j of all R Hessians
    # (torch.autograd.functional.hessian, one replicate at a time, cost 4x more at p = 8).
    R, P = X.shape[0], sum(sizes)
    with torch.enable_grad():
        theta = torch.cat([V.flatten(1) for V in Vs], 1).detach().requires_grad_(True)
        parts = [t.reshape(V.shape) for t, V in zip(theta.split(sizes, dim=1), Vs)]
        (g,) = torch.autograd.grad(net.loss(net.forward(parts, X, act).out, y).sum(), theta, create_graph=True)
        basis = torch.eye(P, dtype=theta.dtype).unsqueeze(1).expand(P, R, P)
        (Hm,) = torch.autograd.grad(g, theta, grad_outputs=basis, is_grads_batched=True)  # (P, R, P)
    Hm = Hm.detach().transpose(0, 1)
    lip = torch.linalg.eigvalsh(0.5 * (Hm + Hm.transpose(-1, -2))).abs().amax(-1)
    J = net.loss(net.forward(Vs, X, act).out, y)
    nV = net.collective_norm(Vs)
    bound = 256 * (L + 1) * math.sqrt(p) * nV ** (3 * L + 5) * J / h
    valid = ok & (nV >= math.sqrt(L + 0.5)) & (h <= 1)
    return Observation(lip / bound, valid=valid, extras={"lip": lip, "J": J, "norm_V": nV},
                       method="exact Hessian (autograd, vectorised rows), largest |eigenvalue|; a.e. for the Huberized ReLU")


# ------------------------------------------------------------------------------------------- at initialisation

@QUANTITIES.register("chatterji2021-init-layer-norm-deviation", "Lemma E.1(a)/E.2: max over l in [L], s of "
                     "| ||x_{l,s}|| - 1 | at He initialisation (the window [9/10, 11/10] is <= 1/10)", networks=NET)
def init_layer_norm_deviation(ctx: Context) -> Observation:
    X = ctx.inputs()
    act = _act(ctx)
    if ctx.arg("sampler", "full") == "exact":
        us, _ = net.init_preactivations_exact(ctx.generator, X, ctx.i("L"), act)
        xs = [act.f(u) for u in us]
    else:
        Vs = net.init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("L"), ctx.dtype)
        xs = net.forward(Vs, X, act).x[1:]
    dev = torch.stack([(x.norm(dim=-1) - 1).abs().amax(-1) for x in xs], -1).amax(-1)
    return Observation(dev, method=f"{ctx.arg('sampler', 'full')} sampler")


@QUANTITIES.register("chatterji2021-init-weight-norm-ratio", "Lemma E.12: ||V^(1)|| / sqrt(5 p L) at He "
                     "initialisation (<= 1)", networks=NET)
def init_weight_norm_ratio(ctx: Context) -> Observation:
    p, L = ctx.i("p"), ctx.i("L")
    if ctx.arg("sampler", "full") == "exact":
        # ||V_l||_F^2 = (2/p) chi^2_{p^2} (l in [L]) and ||V_{L+1}||^2 = chi^2_p, independent: exact chi-square
        # draws (numpy, seeded from ctx.generator) instead of p^2 L Gaussians per replicate.
        import numpy as np
        rng = np.random.default_rng(int(torch.randint(0, 2 ** 62, (1,), generator=ctx.generator)))
        sq = (2.0 / p) * rng.chisquare(p * p, size=(ctx.replicates, L)).sum(-1) + rng.chisquare(p, ctx.replicates)
        norm = torch.from_numpy(np.sqrt(sq))
    else:
        norm = net.collective_norm(net.init(ctx.generator, ctx.replicates, p, L, ctx.dtype))
    return Observation(norm / math.sqrt(5 * p * L), method=f"{ctx.arg('sampler', 'full')} sampler")


@QUANTITIES.register("chatterji2021-init-output-magnitude", "Lemma E.11: max_s |f_{V^(1)}(x_s)| / sqrt(log(2n/delta)) "
                     "at He initialisation (the lemma: <= c, c hidden)", networks=NET)
def init_output_magnitude(ctx: Context) -> Observation:
    X = ctx.inputs()
    if ctx.arg("sampler", "full") == "exact":
        _, out = net.init_preactivations_exact(ctx.generator, X, ctx.i("L"), _act(ctx))
    else:
        Vs = net.init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("L"), ctx.dtype)
        out = net.forward(Vs, X, _act(ctx)).out
    return Observation(out.abs().amax(-1) / math.sqrt(math.log(2 * X.shape[1] / ctx.p("delta"))),
                       method=f"{ctx.arg('sampler', 'full')} sampler")


# ------------------------------------------------------------------------------------------------ trajectories

@QUANTITIES.register("chatterji2021-gd-loss-ratio", "Theorem 3.1: max over t <= T of J_t (Q (t-1) + 1) / J_1 along GD "
                     "with alpha = kappa * alpha_max(h), Q = Q~(alpha), from a small-loss V^(1) (<= 1); args.statistic "
                     "'normalised-margin' (I2, Lemma 4.7), 'normalised-margin-step', 'step-size' (I3, Lemma 4.8), "
                     "'rate-t33' (Theorem 3.3 (2), explicit form) along the same trajectory", networks=NET)
def gd_loss_ratio(ctx: Context) -> Observation:
    X, y, act, Vs, ok = _problem(ctx)
    L, p, n, T = ctx.i("L"), ctx.i("p"), X.shape[1], ctx.i("T")
    if T < 1:
        raise EstimatorError("T must be >= 1 GD steps")
    h = float(ctx.p("h"))
    with torch.no_grad():
        logJ1 = net.log_loss(net.forward(Vs, X, act).out, y)
        n1 = net.collective_norm(Vs)
        alpha = float(ctx.p("kappa", 1.0)) * net.alpha_max(h, logJ1, n1, L, p)
        Q = net.q_tilde(alpha, logJ1, n1, L)
        tr = net.gradient_descent(Vs, X, y, act, alpha, T)
    t = torch.arange(T + 1, dtype=X.dtype)  # index k holds t = k + 1
    rel = tr.rel_change  # J_t / J_1 − 1, accurate although each step is below float64 resolution of V
    hyp = ok & (logJ1 < net.log_threshold(n, L)) & (h < net.h_max(logJ1, n1, L, p))
    stat = str(ctx.arg("statistic", "loss"))
    # Each inequality is compared in log form, d_t = log LHS_t - log RHS_t, divided by the size of the loss change
    # itself, scale = max_t |log(J_t/J_1)| (~1e-14 at L = 1): value = 1 + d/scale (<= 1 iff d <= 0 for the upper
    # bounds; >= 1 iff d >= 0 for the lower ones). Without this the comparison would happen at 1 + 1e-14 against a
    # relative tolerance of 1e-12 and could not fail. Trajectories whose loss did not move in float64 (scale = 0,
    # L >= 2 at alpha_max) carry no evidence and are not valid.
    log_rel = torch.log1p(rel)  # log(J_t / J_1), exact to the relative precision of the change
    scale = log_rel.abs().amax(-1)
    hyp = hyp & (scale > 0)
    scale = scale.clamp_min(1e-300).unsqueeze(-1)
    # log(r_t / r_1), r_t = log(1/J_t)/||V^(t)||^L (I2), from the exact changes of log J and of ||V||^2
    log_r = (torch.log1p(log_rel / logJ1.unsqueeze(-1))
             - (L / 2) * torch.log1p(tr.norm_sq_change / n1.unsqueeze(-1) ** 2))
    if stat == "loss":  # (I1) / Theorem 3.1 / Lemma 4.6: J_t (Q(t-1) + 1) / J_1 <= 1
        d = log_rel + torch.log1p(Q.unsqueeze(-1) * t)
        value = 1 + (d[:, 1:] / scale).amax(-1)  # t = 1 is equality by definition
    elif stat == "normalised-margin":  # (I2) / Lemma 4.7: r_t >= r_1
        value = 1 + (log_r[:, 1:] / scale).amin(-1)
    elif stat == "normalised-margin-step":  # the proof's per-step form r_{t+1} >= r_t
        value = 1 + ((log_r[:, 1:] - log_r[:, :-1]) / scale).amin(-1)
    elif stat == "step-size":  # (I3) / Lemma 4.8: alpha J_t 1024 (L+1)^2 p ||V^(t)||^{3L+5} / h <= 1
        # at t = 1 the product is alpha/a_1 with a_1 the first term of (3b): log(alpha/a_1) = log kappa + min(0, ...)
        a1 = h / (1024 * (L + 1) ** 2 * p * torch.exp(logJ1) * n1 ** (3 * L + 5))
        log_i3_1 = torch.log(alpha / a1).clamp_max(math.log(float(ctx.p("kappa", 1.0))))
        d = log_i3_1.unsqueeze(-1) + log_rel + (3 * L + 5) / 2 * torch.log1p(tr.norm_sq_change / n1.unsqueeze(-1) ** 2)
        value = 1 + (d / scale).amax(-1)
    elif stat == "rate-t33":  # Theorem 3.3 (2), the proof's explicit form, with V^(T+1) := V^(1): k = t - T - 1
        k = t[1:]
        log_bound = (math.log(50) + (3 * L + 7) / 2 * math.log(L) + 2 * math.log(L + 1) + (2 * L + 5) * math.log(6 * p)
                     + net.log_threshold(n, L) - torch.log(k))
        value = torch.exp((tr.log_loss[:, 1:] - log_bound).amax(-1))
    else:
        raise EstimatorError(f"args.statistic = '{stat}': expected loss, normalised-margin, normalised-margin-step, "
                             "step-size or rate-t33")
    return Observation(value, valid=hyp, extras={"alpha": alpha, "Q": Q, "log_J1": logJ1,
                                                 "final_rel_change": rel[:, -1]},
                       method="full-batch GD, compensated (V^(1) + D_t, outputs by difference propagation)")


# ============================================================================ scalar and small-matrix facts
# Lemmas B.3, B.4, B.6, B.7, B.8 and the Appendix-F tools hold for every argument in their domain: the draws
# below mix random points with the structured ones where each inequality is tightest (its equality cases and the
# edges of the stated ranges), so a violation, where one exists, is found by construction, not by luck.

def _signs(ctx: Context, *shape: int) -> torch.Tensor:
    return torch.where(torch.rand(*shape, generator=ctx.generator) < 0.5, -1.0, 1.0).to(torch.float64)


@QUANTITIES.register("chatterji2021-logistic-inequality", "Lemma B.3: part 1 sigma(-z)/log(1+e^{-z}) (<= 1); part 2 "
                     "the larger of [e^z/(1+e^z)^2]/[1/(1+e^z)] and [1/(1+e^z)]/log(1+e^{-z}) (<= 1), z = y f over "
                     "all of R (log domain)", networks=NET)
def logistic_inequality(ctx: Context) -> Observation:
    R, k = ctx.replicates, 256
    z = _log_uniform(ctx, 1e-9, float(ctx.p("zmax", 740.0)), R, k) * _signs(ctx, R, k)
    special = torch.tensor([0.0, 1e-300, -1e-300, 740.0, -740.0, 36.0, 37.0, -36.0], dtype=torch.float64)
    z = torch.cat([z, special.expand(R, -1)], -1)
    logsig = torch.nn.functional.logsigmoid
    # log[1/(1+e^z)] - log log(1+e^{-z}): _log_softplus_neg(m) = log log(1 + e^{-m}) without underflow.
    r1 = torch.exp(logsig(-z) - net._log_softplus_neg(z))
    # Both logs are ~ -z: their difference carries rounding eps |z|, so the ratio's error is ~ eps |z| r1 (|z| up
    # to 740): reported as the comparison scale (extras["scale"], read by the verdicts) instead of a looser bound.
    scale = (r1 * (1 + z.abs()) / 16).amax(-1)
    part = str(ctx.arg("part", "1"))
    if part == "1":
        val = r1.amax(-1)
    elif part == "2":
        val = torch.maximum(torch.exp(logsig(z)).amax(-1), r1.amax(-1))  # [e^z/(1+e^z)^2]/[1/(1+e^z)] = sigmoid(z)
    else:
        raise EstimatorError(f"args.part = '{part}': expected '1' or '2'")
    return Observation(val, extras={"scale": scale},
                       method="log-domain closed forms at random z in +-[1e-9, zmax] and the extremes")


def _concave_family(kind: torch.Tensor, a: torch.Tensor, b: torch.Tensor, M: torch.Tensor, z: torch.Tensor):
    """ψ(z) per replicate (broadcast over the last dim) for the concave families with ψ(0) = 0 of Lemma B.4's
    search: 0 min(a z, b z + a M) (piecewise linear), 1 z^a (a in (0,1)), 2 log(1 + b z / M), 3 the ψ of Lemma 4.5
    (1 - e^{-z}) log(1/(e^z - 1)) (concave on (0, 1], AUX-5), 4 -b z^2 / M (concave, negative), 5 a z (linear)."""
    k = kind[:, None]
    zz = z.clamp_min(0.0)
    vals = [
        torch.minimum(a[:, None] * zz, b[:, None] * zz + a[:, None] * M[:, None] / 2),
        zz ** a[:, None],
        torch.log1p(b[:, None] * zz / M[:, None]),
        torch.where(zz > 0, -torch.expm1(-zz) * -torch.log(torch.expm1(zz.clamp_min(1e-300))), torch.zeros_like(zz)),
        -b[:, None] * zz ** 2 / M[:, None],
        a[:, None] * zz,
    ]
    out = torch.zeros_like(zz)
    for i, v in enumerate(vals):
        out = torch.where(k == i, v, out)
    return out


@QUANTITIES.register("chatterji2021-concave-sum-min", "Lemma B.4: 1 + (sum_i psi(z_i) - psi(M)) / (sum_i |psi(z_i)| + "
                     "|psi(M)|) over concave psi with psi(0) = 0 and z on the simplex sum z_i = M (>= 1)",
                     networks=NET)
def concave_sum_min(ctx: Context) -> Observation:
    R, n = ctx.replicates, ctx.i("n")
    kind = torch.randint(0, 6, (R,), generator=ctx.generator)
    M = _log_uniform(ctx, 1e-30, 1.0, R)
    a = torch.rand(R, generator=ctx.generator, dtype=torch.float64).clamp(1e-3, 1 - 1e-3)
    b = _log_uniform(ctx, 1e-3, 1e3, R)
    # z: random simplex points with random sparsity, a vertex (the minimiser) and the barycentre (the maximiser).
    w = -torch.log(torch.rand(R, n, generator=ctx.generator, dtype=torch.float64).clamp_min(1e-300))
    w = w * (torch.rand(R, n, generator=ctx.generator) < torch.rand(R, 1, generator=ctx.generator)).to(w.dtype)
    w[:, 0] += 1e-3
    pick = torch.randint(0, 4, (R, 1), generator=ctx.generator)
    w = torch.where(pick == 1, torch.nn.functional.one_hot(torch.zeros(R, dtype=torch.long), n).to(w.dtype), w)
    w = torch.where(pick == 2, torch.ones_like(w), w)
    z = M[:, None] * w / w.sum(-1, keepdim=True)
    lhs = _concave_family(kind, a, b, M, z).sum(-1)
    rhs = _concave_family(kind, a, b, M, M[:, None]).squeeze(-1)
    val = 1 + (lhs - rhs) / (_concave_family(kind, a, b, M, z).abs().sum(-1) + rhs.abs()).clamp_min(1e-300)
    return Observation(val, extras={"family": kind.to(torch.float64), "M": M},
                       method="six concave families x random / vertex / barycentre simplex points")


def trailing_products_max(a: torch.Tensor) -> torch.Tensor:
    """max_{k in [L]} prod_{j=k+1}^{L+1} a_j for profiles a (R, L+1): suffix products of a_2..a_{L+1}."""
    return torch.flip(torch.cumprod(torch.flip(a[:, 1:], [-1]), -1), [-1]).amax(-1)


def _norm_profiles(ctx: Context, L: int, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """(R, L+1) non-negative layer norms with collective norm eta in [lo, hi] (log-uniform): half random, half the
    AM-GM extremals (the last m layers equal, the others 0, m uniform in [1, L+1])."""
    R = ctx.replicates
    eta = torch.exp(torch.log(lo) + torch.rand(R, generator=ctx.generator, dtype=torch.float64) * torch.log(hi / lo))
    a = torch.rand(R, L + 1, generator=ctx.generator, dtype=torch.float64) ** 2
    m = torch.randint(1, L + 2, (R, 1), generator=ctx.generator)
    idx = torch.arange(L + 1).expand(R, -1)
    ext = (idx >= (L + 1 - m)).to(torch.float64)
    a = torch.where(torch.rand(R, 1, generator=ctx.generator) < 0.5, ext, a)
    return eta[:, None] * a / a.norm(dim=-1, keepdim=True)


@QUANTITIES.register("chatterji2021-norm-profile-ratio", "Lemmas B.6/B.7 as LHS/RHS over layer-norm profiles: "
                     "args.part 'b6-1' max_k prod_{j>k} ||V_j|| / (||V||/sqrt L)^L at ||V|| > sqrt(L+1); 'b6-1-outer' "
                     "the same over ||V||^L; 'b6-2' over ||V||^L at ||V|| > 1; 'b7' prod_{i in I} ||A_i||_op ||M_i||_op / "
                     "max{||A||^{L+1}/(L+1)^{(L+1)/2}, ||A||} for matrices (<= 1)", networks=NET)
def norm_profile_ratio(ctx: Context) -> Observation:
    L, R = ctx.i("L"), ctx.replicates
    part = str(ctx.arg("part", "b6-1"))
    top = float(ctx.arg("eta_max_factor", 4.0))
    if part in ("b6-1", "b6-1-outer", "b6-2"):
        lo = math.sqrt(L + 1) * (1 + 1e-9) if part != "b6-2" else 1 + 1e-9
        a = _norm_profiles(ctx, L, torch.full((R,), lo, dtype=torch.float64),
                           torch.full((R,), top * math.sqrt(L + 1), dtype=torch.float64))
        eta = a.norm(dim=-1)
        lhs = trailing_products_max(a)
        rhs = (eta / math.sqrt(L)) ** L if part == "b6-1" else eta ** L
        return Observation(lhs / rhs, extras={"norm_V": eta}, method="random and AM-GM-extremal norm profiles")
    if part != "b7":
        raise EstimatorError(f"args.part = '{part}': expected b6-1, b6-1-outer, b6-2 or b7")
    d = ctx.i("dim", 3)
    a = _norm_profiles(ctx, L, torch.full((R,), 0.05, dtype=torch.float64),
                       torch.full((R,), top * math.sqrt(L + 1), dtype=torch.float64))
    # A_i: rank one (||A_i||_op = ||A_i||_F, the AM-GM equality case) or Gaussian, scaled to Frobenius a_i;
    # M_i: Gaussian scaled to operator norm 1 (the largest allowed).
    g = torch.randn(R, L + 1, d, d, generator=ctx.generator, dtype=torch.float64)
    u = torch.randn(R, L + 1, d, 1, generator=ctx.generator, dtype=torch.float64)
    v = torch.randn(R, L + 1, 1, d, generator=ctx.generator, dtype=torch.float64)
    rank1 = (torch.rand(R, 1, 1, 1, generator=ctx.generator) < 0.7).to(torch.float64)
    A = rank1 * (u @ v) + (1 - rank1) * g
    A = A / torch.linalg.matrix_norm(A)[..., None, None] * a[..., None, None]
    Mm = torch.randn(R, L + 1, d, d, generator=ctx.generator, dtype=torch.float64)
    Mm = Mm / torch.linalg.matrix_norm(Mm, ord=2)[..., None, None]
    terms = torch.linalg.matrix_norm(A, ord=2) * torch.linalg.matrix_norm(Mm, ord=2)
    # I: the support of the profile (the extremal choice) or a random nonempty subset
    inI = torch.where(torch.rand(R, 1, generator=ctx.generator) < 0.5, a > 0,
                      torch.rand(R, L + 1, generator=ctx.generator) < 0.5)
    inI[:, -1] |= ~inI.any(-1)
    lhs = torch.where(inI, terms, torch.ones_like(terms)).prod(-1)
    nA = torch.linalg.matrix_norm(A).norm(dim=-1)
    rhs = torch.maximum(nA ** (L + 1) / (L + 1) ** ((L + 1) / 2), nA)
    return Observation(lhs / rhs, extras={"norm_A": nA, "size_I": inI.sum(-1).to(torch.float64)},
                       method="rank-one / Gaussian blocks on random and AM-GM-extremal norm profiles; exact op norms")


def _b8_ratio(A, E, Mr, Nr, L: int):
    """Lemma B.8's LHS/RHS for raw tensors (R, L+1, d, d): M, N scaled to operator norm <= 1, A scaled up to
    ||A|| >= sqrt(L+1/2), B = A + E, kappa = max_i ||M_i - N_i||_op (the smallest kappa the hypotheses allow)."""
    M = Mr / torch.linalg.matrix_norm(Mr, ord=2).clamp_min(1.0)[..., None, None]
    N = Nr / torch.linalg.matrix_norm(Nr, ord=2).clamp_min(1.0)[..., None, None]
    nA = torch.linalg.matrix_norm(A).norm(dim=-1)
    A = A * (math.sqrt(L + 0.5) / nA).clamp_min(1.0)[:, None, None, None]
    B = A + E
    kappa = torch.linalg.matrix_norm(M - N, ord=2).amax(-1)
    P, Q = A[:, 0] @ M[:, 0], B[:, 0] @ N[:, 0]
    for i in range(1, L + 1):
        P, Q = P @ A[:, i] @ M[:, i], Q @ B[:, i] @ N[:, i]
    lhs = torch.linalg.matrix_norm(P - Q, ord=2)
    nA, nD = torch.linalg.matrix_norm(A).norm(dim=-1), torch.linalg.matrix_norm(E).norm(dim=-1)
    rhs = 1.5 * (nA + nD) ** (L + 1) * (kappa * nA + nD)
    return lhs / rhs


@QUANTITIES.register("chatterji2021-product-perturbation-ratio", "Lemma B.8: ||prod A_i M_i - prod B_i N_i||_op / "
                     "(3/2 (||A|| + ||A-B||)^{L+1} (kappa ||A|| + ||A-B||)) for d x d blocks (<= 1); search "
                     "'gradient'/'adversarial' adds projected Adam ascent on the ratio", networks=NET)
def product_perturbation_ratio(ctx: Context) -> Observation:
    L, d, R = ctx.i("L"), ctx.i("dim", 3), ctx.replicates

    def draw(scale_lo: float, scale_hi: float) -> torch.Tensor:
        return ctx.randn(R, L + 1, d, d) * _log_uniform(ctx, scale_lo, scale_hi, R)[:, None, None, None]

    A, E = draw(0.3, 3.0), draw(1e-4, 1.0)
    Mr = ctx.randn(R, L + 1, d, d)
    Nr = Mr + draw(1e-4, 1.0)
    val = _b8_ratio(A, E, Mr, Nr, L)
    if ctx.search in ("gradient", "adversarial"):
        params = [t.clone().requires_grad_(True) for t in (A, E, Mr, Nr)]
        opt = torch.optim.Adam(params, lr=0.05)
        r = _b8_ratio(*params, L)
        for _ in range(int(ctx.arg("ascent_steps", 60))):
            opt.zero_grad()
            (-torch.log(r.clamp_min(1e-300)).sum()).backward()
            opt.step()
            r = _b8_ratio(*params, L)  # the new point's ratio: kept, and differentiated by the next step
            val = torch.maximum(val, r.detach())
    return Observation(val.detach(), method=f"random blocks; search {ctx.search}")


# ------------------------------------------------------------------------------ Appendix F probability tools

def _orlicz(x: torch.Tensor, logd: torch.Tensor, w: torch.Tensor, power: float) -> float:
    """Orlicz norm inf{t > 0 : E exp(|W|^power / t^power) <= 2}, W = w(x), x with log density logd on the grid x
    (Jacobian included), by log-bisection over [1e-3, 1e3] (70 halvings reach float64 resolution) of the
    trapezoidal rule."""
    lo, hi = 1e-3, 1e3
    aw = w.abs() ** power
    for _ in range(70):
        mid = math.sqrt(lo * hi)
        if float(torch.trapezoid(torch.exp(logd + aw / mid ** power), x)) > 2.0:
            lo = mid
        else:
            hi = mid
    return hi


@QUANTITIES.register("chatterji2021-psi-norm-square", "Lemma F.3: | ||theta^2||_psi1 / ||theta||_psi2^2 - 1 |, each "
                     "Orlicz norm computed separately by quadrature from the densities of theta and of theta^2 "
                     "(theta = sigma N(0,1) or uniform on [-sigma, sigma]; equality, so ~0 up to quadrature error)",
                     networks=NET)
def psi_norm_square(ctx: Context) -> Observation:
    R = ctx.replicates
    sig = torch.full((R,), float(ctx.p("sigma")), dtype=torch.float64) if "sigma" in ctx.params \
        else _log_uniform(ctx, 0.1, 10.0, R)
    kind = torch.randint(0, 2, (R,), generator=ctx.generator)
    out = torch.empty(R, dtype=torch.float64)
    for r in range(R):
        s = float(sig[r])
        if kind[r] == 0:  # theta ~ N(0, s^2); W = theta^2 has density e^{-w/(2s^2)} / (s sqrt(2 pi w))
            th = torch.linspace(-12 * s, 12 * s, 40001, dtype=torch.float64)
            psi2 = _orlicz(th, -th ** 2 / (2 * s * s) - math.log(s * math.sqrt(2 * math.pi)), th, 2.0)
            lw = torch.linspace(math.log(1e-14 * s * s), math.log(150 * s * s), 40001, dtype=torch.float64)
            logd = -torch.exp(lw) / (2 * s * s) + 0.5 * lw - math.log(s * math.sqrt(2 * math.pi))  # in x = log w
        else:  # theta ~ U[-s, s]; W = theta^2 has density 1/(2 s sqrt(w)) on (0, s^2)
            th = torch.linspace(-s, s, 40001, dtype=torch.float64)
            psi2 = _orlicz(th, torch.full_like(th, -math.log(2 * s)), th, 2.0)
            lw = torch.linspace(math.log(1e-16 * s * s), math.log(s * s), 40001, dtype=torch.float64)
            logd = 0.5 * lw - math.log(2 * s)
        psi1 = _orlicz(lw, logd, torch.exp(lw), 1.0)
        out[r] = abs(psi1 / psi2 ** 2 - 1)
    return Observation(out, extras={"sigma": sig, "family": kind.to(torch.float64)},
                       method="log-bisection on trapezoidal quadrature (Gaussian; uniform)")


def _lipschitz_family(h: float) -> list:
    """1-Lipschitz g for Lemma F.4: identity, ReLU, |.|, the Huberized ReLU and scaled Swish at h, sin, clip."""
    hub, sw = net.activation("huberized-relu", h), net.activation("scaled-swish", h)
    return [lambda x: x, torch.relu, torch.abs, hub.f, sw.f, torch.sin, lambda x: x.clamp(-h, h)]


@QUANTITIES.register("chatterji2021-lipschitz-psi2", "Lemma F.4: max over a family of 1-Lipschitz g (identity, ReLU, "
                     "|.|, Huberized ReLU_h, scaled Swish_h, sin, clip_h) of ||g(theta) - E g(theta)||_psi2, theta ~ "
                     "N(0,1), by quadrature (the lemma: <= c, c absolute)", networks=NET)
def lipschitz_psi2(ctx: Context) -> Observation:
    h = float(ctx.p("h"))
    th = torch.linspace(-30, 30, 12001, dtype=torch.float64)
    logphi = -th ** 2 / 2 - 0.5 * math.log(2 * math.pi)
    best = 0.0
    for g in _lipschitz_family(h):
        v = g(th)
        v = v - torch.trapezoid(v * torch.exp(logphi), th)
        best = max(best, _orlicz(th, logphi, v, 2.0))
    return Observation(torch.full((ctx.replicates,), best, dtype=torch.float64),
                       method="trapezoidal quadrature on [-30, 30], log-bisection for the Orlicz norm")


def _log_binom_two_sided(m: int, eta: torch.Tensor) -> torch.Tensor:
    """log P[|sum of m Rademacher| >= eta], exact to float64: log-sum-exp of the binomial log-masses (no underflow).

    The event is the tails k <= kl and k >= ku of K ~ Bin(m, 1/2) (2K - m the sum), each tail's masses largest at
    its inner end. Going outwards by d the log-mass falls by >= 2 d^2 / m (log-concavity), so past W = 5 sqrt(m)
    terms a tail's remaining masses sum to < e^{-50} m / W of its largest, far below float64's resolution: only
    the W innermost masses of each tail are summed (m = 10^5, 500 draws: 3,200 masses each, not 100,001).
    Where 2 W covers all m + 1 masses, all are summed as before."""
    k = torch.arange(m + 1, dtype=torch.float64)
    logmass = (torch.lgamma(torch.tensor(m + 1.0, dtype=torch.float64)) - torch.lgamma(k + 1)
               - torch.lgamma(m - k + 1) - m * math.log(2))
    thr = eta * (1 - 1e-12)
    W = math.ceil(5 * math.sqrt(m))
    if 2 * W >= m + 1:
        inside = (2 * k - m).abs()[None, :] >= thr[:, None]
        return torch.logsumexp(torch.where(inside, logmass[None, :], torch.full_like(inside, -math.inf, dtype=torch.float64)), -1)
    s = 2 * k - m  # ascending: the lower tail is s <= -thr (its first n_low masses), the upper s >= thr
    n_low = torch.searchsorted(s, -thr, right=True)
    up = torch.maximum(torch.searchsorted(s, thr), n_low)  # the upper tail starts here (no overlap at thr <= 0)
    j = torch.arange(W)
    idx = torch.cat([n_low[:, None] - W + j, up[:, None] + j], -1)  # the W innermost masses of each tail
    ok = torch.cat([n_low[:, None] - W + j >= 0, up[:, None] + j <= m], -1)
    vals = torch.where(ok, logmass[idx.clamp(0, m)], torch.full(idx.shape, -math.inf, dtype=torch.float64))
    return torch.logsumexp(vals, -1)


def _log_chi2_sf(x: torch.Tensor, m: int) -> torch.Tensor:
    """log P[chi^2_m >= x]: scipy where representable, mpmath (50 digits) where the tail is below float64's range."""
    import mpmath
    from scipy.stats import chi2
    xn = to_numpy(x)
    out = torch.from_numpy(chi2.logsf(xn, m))
    for i in torch.nonzero(~torch.isfinite(out)).flatten().tolist():
        with mpmath.workdps(50):
            out[i] = float(mpmath.log(mpmath.gammainc(m / 2, float(xn[i]) / 2, mpmath.inf, regularized=True)))
    return out.to(x.device)


@QUANTITIES.register("chatterji2021-concentration-constant", "Lemmas F.5-F.7: the implied constant of the tail bound "
                     "at (m, eta), from the EXACT tail probability: args.part 'f5-rademacher' / 'f5-gaussian' "
                     "log(2/P) sum||theta_i||_psi2^2 / eta^2; 'f6' log(2/P) / min{eta^2/(m K^2), eta/K} for "
                     "theta = g^2 - 1, K = ||g^2 - 1||_psi1; 'f7' -log P / (m eta^2) (the lemma: >= c > 0); "
                     "'f7-half' P exp(m eta^2 / 2) (c = 1/2: <= 1)", networks=NET)
def concentration_constant(ctx: Context) -> Observation:
    import numpy as np
    from scipy.stats import chi2, norm
    m, R = ctx.i("m"), ctx.replicates
    part = str(ctx.arg("part", "f7"))
    lo, hi = float(ctx.arg("eta_min", 1e-2)), float(ctx.arg("eta_max", 10.0))
    if part == "f5-rademacher":
        eta = _log_uniform(ctx, max(lo, 1.0), float(m), R)  # |sum| <= m: beyond, P = 0 and any c works
        logP = _log_binom_two_sided(m, eta)
        val = (math.log(2) - logP) * (m / math.log(2)) / eta ** 2  # ||Rademacher||_psi2^2 = 1/log 2
    elif part == "f5-gaussian":
        eta = _log_uniform(ctx, lo * math.sqrt(m), hi * math.sqrt(m), R)
        logP = torch.from_numpy(math.log(2) + norm.logsf(to_numpy(eta) / math.sqrt(m))).to(eta.device)
        val = (math.log(2) - logP) * (8 * m / 3) / eta ** 2  # ||N(0,1)||_psi2^2 = 8/3
    elif part == "f6":
        K = _psi1_chi2_minus_one()
        eta = _log_uniform(ctx, lo * math.sqrt(m), hi * m, R)
        e = to_numpy(eta)
        up = to_numpy(_log_chi2_sf(m + eta, m))
        low = np.where(m - e > 0, chi2.logcdf(np.maximum(m - e, 1e-300), m), -np.inf)
        logP = torch.from_numpy(np.logaddexp(up, low)).to(eta.device)
        val = (math.log(2) - logP) / torch.minimum(eta ** 2 / (m * K * K), eta / K)
    elif part in ("f7", "f7-half"):
        eta = _log_uniform(ctx, lo, hi, R)
        logP = _log_chi2_sf(m * (1 + eta) ** 2, m)
        val = -logP / (m * eta ** 2) if part == "f7" else torch.exp(logP + m * eta ** 2 / 2)
    else:
        raise EstimatorError(f"args.part = '{part}': expected f5-rademacher, f5-gaussian, f6, f7 or f7-half")
    # A tail below float64's range (log P = -inf) says nothing about c: such draws are out of the estimator's
    # reach, not counted (extras keep eta).
    return Observation(val, valid=torch.isfinite(logP) & torch.isfinite(val), extras={"eta": eta, "log_P": logP},
                       method="exact tail (scipy binom/norm/chi2)")


_PSI1_CACHE: dict[str, float] = {}


def _psi1_chi2_minus_one() -> float:
    """||g^2 - 1||_psi1, g ~ N(0,1), by quadrature over g (deterministic, cached)."""
    if "k" not in _PSI1_CACHE:
        th = torch.linspace(-40, 40, 80001, dtype=torch.float64)
        _PSI1_CACHE["k"] = _orlicz(th, -th ** 2 / 2 - 0.5 * math.log(2 * math.pi), th ** 2 - 1, 1.0)
    return _PSI1_CACHE["k"]


def _greedy_net(points: torch.Tensor, eps: float) -> torch.Tensor:
    """A maximal eps-separated subset of the rows of `points` (greedy): every row is within eps of it."""
    chosen = [0]
    for i in range(1, points.shape[0]):
        if (points[chosen] - points[i]).norm(dim=-1).min() > eps:
            chosen.append(i)
    return points[chosen]


@QUANTITIES.register("chatterji2021-net-size-ratio", "Lemmas F.9/F.10: size of a greedy maximal 1/4-separated set "
                     "(hence a 1/4-net of the candidates) of S^{p-1} over 9^p, or of the k-sparse unit vectors "
                     "(one net per support) over C(p,k) 9^k (<= 1)", networks=NET)
def net_size_ratio(ctx: Context) -> Observation:
    p, k = ctx.i("p"), ctx.i("k", 0)
    cand = int(ctx.arg("candidates", 3000))
    out = torch.empty(ctx.replicates, dtype=torch.float64)
    for r in range(ctx.replicates):
        if k == 0:  # F.9: the sphere
            pts = ctx.randn(cand, p)
            size = _greedy_net(pts / pts.norm(dim=-1, keepdim=True), 0.25).shape[0]
            out[r] = size / 9.0 ** p
        else:  # F.10: per support S of size k, a net of the unit vectors supported on S (zeta(s) shares s's support)
            size = 0
            for _S in __import__("itertools").combinations(range(p), k):
                pts = ctx.randn(max(cand // math.comb(p, k), 50), k)
                size += _greedy_net(pts / pts.norm(dim=-1, keepdim=True), 0.25).shape[0]
            out[r] = size / (math.comb(p, k) * 9.0 ** k)
    return Observation(out, method=f"greedy maximal 1/4-separated sets of {cand} random candidates")


# ===================================================== Appendix B: perturbations of one layer / of all layers
# Lemmas B.10-B.17 hold for EVERY pair (V, W) meeting their hypotheses: V is drawn (He initialisation times
# `scale`, or small-loss by train-then-scale), W = V + Delta with Delta on one layer l (B.10-B.16) or on all layers
# (B.17). Delta: half Gaussian, half rank one a b^T with b = x_{l-1,s}/||x_{l-1,s}|| for a random sample s (the
# direction that moves u_{l,s} most per unit of operator norm) and a a random unit vector or a coordinate vector
# at a unit whose pre-activation sits inside the Huber band (0, h) (where phi' moves fastest: Lemma B.11). Its size
# is log-uniform over [eps_min, eps_max] * (the largest size the hypotheses allow). Hypotheses that cannot be met by
# construction (||V||, ||W|| > sqrt(L+1/2); the segment condition J_s(W~) <= 2 J_s(V), checked at 16 points) are
# evaluated per replicate and returned as the valid mask.

def _op_norm(M: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(M, ord=2)


def _perturbation(ctx: Context, Vs: list[torch.Tensor], fwd: net.Forward, layer: torch.Tensor,
                  act: Activation) -> list[torch.Tensor]:
    """Unit-operator-norm Delta per replicate, nonzero on layer[r] only (index 0..L)."""
    R, n = fwd.out.shape
    L = len(Vs) - 1
    Ds = [torch.zeros_like(V) for V in Vs]
    h = act.param("h")
    for r in range(R):
        l = int(layer[r])
        shape = Vs[l].shape[1:]
        s = int(torch.randint(0, n, (1,), generator=ctx.generator))
        b = fwd.x[l][r, s]
        # Gaussian half the time, and whenever x_{l-1,s} = 0 (every unit of a narrow layer off): no aligned direction
        if torch.rand(1, generator=ctx.generator).item() < 0.5 or b.norm() == 0:
            D = torch.randn(*shape, generator=ctx.generator, dtype=Vs[0].dtype)
        else:
            b = b / b.norm()
            a = torch.randn(shape[0], generator=ctx.generator, dtype=b.dtype)
            if l < L:  # a hidden layer: aim at a unit in the Huber band of sample s when there is one
                band = torch.nonzero((fwd.u[l][r, s] > 0) & (fwd.u[l][r, s] < h)).flatten()
                if band.numel() and torch.rand(1, generator=ctx.generator).item() < 0.5:
                    a = torch.zeros_like(a)
                    a[band[int(torch.randint(0, band.numel(), (1,), generator=ctx.generator))]] = 1.0
            D = torch.outer(a / a.norm(), b)
        Ds[l][r] = D / _op_norm(D)
    return Ds


def _per_sample_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(-net.margins(out, y))


def _per_sample_log_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log J_s, finite where J_s underflows float64 (small-loss weights: margins of thousands, J_s ~ e^{-2000})."""
    return net._log_softplus_neg(net.margins(out, y))


def _segment_ok(Vs, Ds, X, y, act, logJ0: torch.Tensor, points: int = 16, factor: float = 2.0) -> torch.Tensor:
    """J_s(V + t D) <= factor J_s(V) for all s at t = 1/points .. 1 (the convex-combination hypothesis), compared in
    log form: compared raw, J_s = 0 = J_s(V + t D) after underflow passed unchecked."""
    ok = torch.ones(X.shape[0], dtype=torch.bool)
    for t in torch.linspace(1.0 / points, 1.0, points).tolist():
        logJt = _per_sample_log_loss(net.forward([v + t * d for v, d in zip(Vs, Ds)], X, act).out, y)
        ok &= (logJt <= math.log(factor) + logJ0 + 1e-12).all(-1)
    return ok


def g_lipschitz_ratio(out_v: torch.Tensor, out_w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|g_s(V) - g_s(W)| / J_s(V) per sample, from the outputs, without underflow. g_s = sigma(-m_s) and J_s
    underflow to 0 past margins ~745 (train-then-scale reaches thousands), where the direct quotient is 0/0 = NaN.
    Here g(V)/J(V) = exp(log sigma(-m) - log softplus(-m)) (<= 1, Lemma B.3) times
    |g(W)/g(V) - 1| = |expm1(log sigma(-m_W) - log sigma(-m_V))|, and log sigma(-m) = -m - softplus(-m), so the
    exponent is -(m_W - m_V) - (softplus(-m_W) - softplus(-m_V)), formed from the margin change itself."""
    mv, mw = net.margins(out_v, y), net.margins(out_w, y)
    sp = torch.nn.functional.softplus
    g_over_j = torch.exp(torch.nn.functional.logsigmoid(-mv) - net._log_softplus_neg(mv))
    return g_over_j * torch.expm1(-(mw - mv) - (sp(-mw) - sp(-mv))).abs()


def _sample_gradients(Vs, X, y, act):
    """Per-sample loss gradients grad J_s = -y_s g_s grad f_s, per layer (R, n, *shape), with the forward pass."""
    fwd = net.forward(Vs, X, act)
    deltas, _ = net.backward(Vs, fwd)
    c = (-y * net.g_weights(fwd.out, y))
    return [c[..., None, None] * G for G in net.output_gradients(fwd, deltas)], fwd, deltas


PERTURBATION_PARTS = ("b10-u-norm", "b10-x-norm", "b10-u-diff", "b10-x-diff", "b11", "b12", "b13", "b14", "b15", "b16",
                      "b17")


@QUANTITIES.register("chatterji2021-perturbation-ratio", "Lemmas B.10-B.17 as LHS/RHS (<= 1) for V and W = V + Delta "
                     "(one layer; all layers for b17), max over samples, layers j and (B.14-B.16) differentiated layers "
                     "k; args.part one of " + ", ".join(PERTURBATION_PARTS) + "; hypotheses per replicate in the valid "
                     "mask", networks=NET)
def perturbation_ratio(ctx: Context) -> Observation:
    part = str(ctx.arg("part", "b10-u-diff"))
    if part not in PERTURBATION_PARTS:
        raise EstimatorError(f"args.part = '{part}': expected one of {PERTURBATION_PARTS}")
    X, y, act, Vs, ok = _problem(ctx)
    L, p, R = ctx.i("L"), ctx.i("p"), X.shape[0]
    h = float(ctx.p("h"))
    fwd = net.forward(Vs, X, act)
    nV = net.collective_norm(Vs)
    lo_layer = 1 if part == "b11" else 0  # B.11 perturbs a hidden layer (l in [L])
    layer = torch.randint(lo_layer, L + 1, (R,), generator=ctx.generator) if part != "b17" else torch.zeros(R, dtype=torch.long)
    if part == "b17":
        Ds = [torch.randn(V.shape, generator=ctx.generator, dtype=V.dtype) for V in Vs]
        unit = net.collective_norm(Ds)
        Ds = [D / unit.reshape(-1, 1, 1) for D in Ds]  # unit collective norm
    else:
        Ds = _perturbation(ctx, Vs, fwd, layer, act)
    # size: the largest the hypotheses allow, times a log-uniform factor in [eps_min, 1]
    if part in ("b12", "b14", "b15"):
        cap = 1 / nV ** (L + 1)
    elif part in ("b13", "b16"):
        size_of_unit = net.collective_norm(Ds)  # ||Delta||_F for ||Delta||_op = 1
        cap = torch.minimum(torch.ones_like(nV), nV / (2 * (L + 1) * size_of_unit))
    elif part == "b17":
        cap = nV / (6 * L + 10)
    else:
        cap = torch.ones_like(nV)
    eps = cap * _log_uniform(ctx, float(ctx.arg("eps_min", 1e-6)), 1.0, R)
    Ds = [D * eps.reshape(-1, 1, 1) for D in Ds]
    Ws = [v + d for v, d in zip(Vs, Ds)]
    fwdW = net.forward(Ws, X, act)
    nW = net.collective_norm(Ws)
    valid = ok & (nV > math.sqrt(L + 0.5)) & (nW > math.sqrt(L + 0.5))
    dop = torch.stack([_op_norm(D) for D in Ds], -1).amax(-1)  # ||V_l - W_l||_op (one nonzero layer)
    dfro = net.collective_norm(Ds)
    J0 = _per_sample_loss(fwd.out, y)
    logJ0 = _per_sample_log_loss(fwd.out, y)
    extras = {"norm_V": nV, "eps": eps, "layer": layer.to(torch.float64)}

    def per_layer_max(vals: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([v.amax(-1) for v in vals], -1).amax(-1)

    if part.startswith("b10") or part == "b11":
        uV, uW = fwd.u + [fwd.out.unsqueeze(-1)], fwdW.u + [fwdW.out.unsqueeze(-1)]
        if part == "b10-u-norm":
            val = per_layer_max([u.norm(dim=-1) for u in uV]) / nV ** (L + 1)
        elif part == "b10-x-norm":
            val = per_layer_max([x.norm(dim=-1) for x in fwd.x]) / nV ** (L + 1)
        elif part == "b10-u-diff":
            val = per_layer_max([(a - b).norm(dim=-1) for a, b in zip(uV, uW)]) / (dop * nV ** (L + 1))
        elif part == "b10-x-diff":
            val = per_layer_max([(a - b).norm(dim=-1) for a, b in zip(fwd.x, fwdW.x)]) / (dop * nV ** (L + 1))
        else:
            val = per_layer_max([(a - b).abs().amax(-1) for a, b in zip(fwd.dphi, fwdW.dphi)]) / (dop * nV ** (L + 1) / h)
        return Observation(val, valid=valid, extras=extras, method="rank-one aligned and Gaussian one-layer perturbations")
    if part == "b17":
        ok_path = torch.ones(R, dtype=torch.bool)
        for j in range(L + 1):  # T(j) -> T(j+1) swaps layer j+1 (index j)
            Tj = [w if i < j else v for i, (v, w) in enumerate(zip(Vs, Ws))]
            Dj = [d if i == j else torch.zeros_like(d) for i, d in enumerate(Ds)]
            logJj = _per_sample_log_loss(net.forward(Tj, X, act).out, y)
            ok_path &= (_segment_ok(Tj, Dj, X, y, act, logJj, points=8)
                        & (logJj <= math.log(2) + logJ0 + 1e-12).all(-1))
        gV, _, _ = net.loss_gradients(Vs, X, y, act)
        gW, _, _ = net.loss_gradients(Ws, X, y, act)
        diff = net.collective_norm([a - b for a, b in zip(gV, gW)])
        J = J0.mean(-1)
        val = diff / (256 * (L + 1) * math.sqrt(p) * J * nV ** (3 * L + 5) * dfro / h)
        return Observation(val, valid=valid & ok_path & (h <= 1), extras=extras, method="Gaussian all-layer perturbations")
    seg = _segment_ok(Vs, Ds, X, y, act, logJ0)
    if part == "b12":
        val = (g_lipschitz_ratio(fwd.out, fwdW.out, y) / (2 * dop * nV ** (L + 1))[:, None]).amax(-1)
        return Observation(val, valid=valid & seg & (dop * nV ** (L + 1) <= 1 + 1e-12), extras=extras,
                           method="rank-one aligned and Gaussian one-layer perturbations")
    hyp13 = valid & seg & (dop <= 1 + 1e-12) & (dfro <= nV / (2 * (L + 1)) * (1 + 1e-12)) & (h <= 1)
    if part == "b13":
        gV, _, _ = _sample_gradients(Vs, X, y, act)
        gW, _, _ = _sample_gradients(Ws, X, y, act)
        diff = torch.stack([(a - b).flatten(2).pow(2).sum(-1) for a, b in zip(gV, gW)], -1).sum(-1).sqrt()  # (R, n)
        val = (diff / (64 * math.sqrt((L + 1) * p) * J0 * (nV ** (3 * L + 5) * dfro / h)[:, None])).amax(-1)
        return Observation(val, valid=hyp13, extras=extras, method="per-sample closed-form gradients")
    # B.14-B.16: the three terms of the proof of B.13 for each hidden layer k (rank one: products of vector norms)
    gW = net.g_weights(fwdW.out, y)
    gV = net.g_weights(fwd.out, y)
    mixed, _ = net.backward(Vs[:-1] + [Ws[-1]], fwd)  # Sigma^V_k prod V_j^T Sigma^V_j W_{L+1}^T
    dV, _ = net.backward(Vs, fwd)
    dW, _ = net.backward(Ws, fwdW)
    vals = []
    for k in range(L):
        if part == "b14":
            xi = gW * mixed[k].norm(dim=-1) * (fwdW.x[k] - fwd.x[k]).norm(dim=-1)
            rhs = 4 * J0 * (dop * nV ** (2 * (L + 1)))[:, None]
        elif part == "b15":
            xi = (gW[..., None] * mixed[k] - gV[..., None] * dV[k]).norm(dim=-1) * fwd.x[k].norm(dim=-1)
            rhs = 4 * J0 * (nV ** (3 * (L + 1)) * dop)[:, None]
        else:
            xi = gW * (dW[k] - mixed[k]).norm(dim=-1) * fwdW.x[k].norm(dim=-1)
            rhs = 56 * J0 * (nV ** (3 * L + 5) * dfro / h)[:, None]
        vals.append((xi / rhs).amax(-1))
    return Observation(torch.stack(vals, -1).amax(-1), valid=hyp13, extras=extras,
                       method="exact rank-one norms under one-layer perturbations")


@QUANTITIES.register("chatterji2021-small-loss-norm", "Lemma B.5: ||V|| / sqrt(L+1) (args.form 'statement', > 1) or "
                     "||V|| / (sqrt(L+1) log^{1/(L+1)}(n^{1+24L}/4)) (args.form 'proof', > 1) over V with "
                     "J(V) <= 2/n^{1+24L} (others not valid)", networks=NET)
def small_loss_norm(ctx: Context) -> Observation:
    X, y, act, Vs, ok = _problem(ctx)
    L, n = ctx.i("L"), X.shape[1]
    logJ = net.log_loss(net.forward(Vs, X, act).out, y)
    nV = net.collective_norm(Vs)
    val = nV / math.sqrt(L + 1)
    if str(ctx.arg("form", "statement")) == "proof":
        val = val / (-net.log_threshold(n, L) - math.log(4)) ** (1 / (L + 1))
    valid = ok & (logJ <= math.log(2) + net.log_threshold(n, L))
    return Observation(val, valid=valid, extras={"log_J": logJ, "norm_V": nV},
                       method=f"weights = {ctx.arg('weights', 'init')}")


@QUANTITIES.register("chatterji2021-layer-alignment-ratio", "Lemma B.18: min over l in [L] of (grad_{V_l} J . (-V_l)) / "
                     "((1/n) sum_s g_s [y_s f_s - sqrt(p) h ||V||^L / (2 L^{L/2-1})]) (>= 1) under Lemma 4.5's "
                     "conditions (J < n^{-(1+24L)}, h <= h_max)", networks=NET)
def layer_alignment_ratio(ctx: Context) -> Observation:
    _X, y, _act, Vs, grads, fwd, logJ, nV, hyp = _small_loss_state(ctx)
    L, p, h = ctx.i("L"), ctx.i("p"), float(ctx.p("h"))
    g = net.g_weights(fwd.out, y)
    rhs = (g * (net.margins(fwd.out, y) - (math.sqrt(p) * h * nV ** L / (2 * L ** (L / 2 - 1)))[:, None])).mean(-1)
    lhs = torch.stack([-(G * V).flatten(1).sum(1) for G, V in zip(grads[:-1], Vs[:-1])], -1)  # (R, L)
    val = (lhs / rhs[:, None]).amin(-1)
    return Observation(val, valid=hyp & (rhs > 0), extras={"log_J": logJ, "norm_V": nV},
                       method=f"closed-form gradient; weights = {ctx.arg('weights', 'init')}")


# ====================================================== Appendix E: products of Jacobian factors at init
# M_s(l1, l2) = V_{l2} Sigma_{l2-1,s} V_{l2-1} ... Sigma_{l1,s} V_{l1} (1 <= l1 <= l2 <= L), and the output rows
# w_s(l1) = V_{L+1} Sigma_{L,s} ... Sigma_{l1,s} V_{l1}. Operator norms never under-estimate (linalg.spectral_norm:
# the Gram's top eigenvalue rounded up, or SVD): an upper-bound claim is never
# decided by an under-estimator except where the statement's sup is over sparse vectors (E.5-E.7 at k > 1), where the
# greedy + truncated-power search is a named lower estimate of the sup (it can refute, never certify).

def _chain_mats(Vs: list[torch.Tensor], fwd: net.Forward) -> list[tuple[int, int, torch.Tensor]]:
    """(l1, l2, M) with M (R, n, p, p) for every 1 <= l1 <= l2 <= L (at l1 = l2 a view of V_{l1}, no copy)."""
    L = len(Vs) - 1
    n = fwd.out.shape[-1]
    mats = []
    for l1 in range(1, L + 1):
        M = Vs[l1 - 1].unsqueeze(1).expand(-1, n, -1, -1)
        mats.append((l1, l1, M))
        for l2 in range(l1 + 1, L + 1):
            M = Vs[l2 - 1].unsqueeze(1) @ (fwd.dphi[l2 - 2].unsqueeze(-1) * M)
            mats.append((l1, l2, M))
    return mats


def _chains(Vs: list[torch.Tensor], fwd: net.Forward):
    """`_chain_mats`, and (l1, w) output rows (R, n, p) from the explicit chains (the reference for `_chain_rows`)."""
    L = len(Vs) - 1
    mats = _chain_mats(Vs, fwd)
    rows = [(l1, (Vs[-1].unsqueeze(1) @ (fwd.dphi[L - 1].unsqueeze(-1) * M)).squeeze(-2))
            for l1, l2, M in mats if l2 == L]
    return mats, rows


def _chain_rows(Vs: list[torch.Tensor], fwd: net.Forward) -> list[tuple[int, torch.Tensor]]:
    """The output rows of `_chains` without its p x p products: row_{l1} = V_{L+1} Sigma_L V_L ... Sigma_{l1} V_{l1}
    (R, n, p) by one backward sweep, row_{l1} = (row_{l1+1} * Sigma_{l1}) V_{l1}: O(L n p^2) instead of O(L^2 n p^3)."""
    L = len(Vs) - 1
    rows = []
    g = Vs[-1] * fwd.dphi[L - 1]  # (R, n, p): V_{L+1} Sigma_L per sample
    for l1 in range(L, 0, -1):
        row = g @ Vs[l1 - 1]
        rows.append((l1, row))
        if l1 > 1:
            g = row * fwd.dphi[l1 - 2]
    return rows[::-1]


def _topk_norm(v: torch.Tensor, k: int) -> torch.Tensor:
    """sup over unit k-sparse a of |v . a| = the norm of the k largest |v_i| (exact)."""
    return v.abs().topk(min(k, v.shape[-1]), dim=-1).values.norm(dim=-1)


def _mv(M: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """M v for a batch, written as the row v^T M^T: torch's batched matrix-vector product is 2-4x slower on one
    thread than the vector-matrix one, for M and for a transposed view alike (p = 128-512)."""
    return (v.unsqueeze(-2) @ M.transpose(-1, -2)).squeeze(-2)


def _vm(v: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """v^T M for a batch."""
    return (v.unsqueeze(-2) @ M).squeeze(-2)


def _top_right_vector(G: torch.Tensor, iters: int = 50) -> torch.Tensor:
    """Approximate top eigenvector of the PSD G = M^T M by power iteration (only a starting point for the sparse
    searches, so its accuracy does not bound anything)."""
    v = torch.ones(G.shape[:-1], dtype=G.dtype)
    for _ in range(iters):
        v = _mv(G, v)
        v = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return v


# The searches below keep their k-sparse iterates as (support, values): G a, M a and a^T M are then k rows of G^T,
# M^T and M, O(p k) instead of a dense O(p^2) product over p - k exact zeros (the same sums in another order). Rows,
# not columns: each search makes the matrices it reads contiguous once, and a row gather copies whole rows (a
# column gather, 4 ms at 100 x 256 x 46, cost more than the dense product).

def _support(v: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest |v_i| of each vector: their indices (..., k) and the unit vector's values there (..., k)."""
    keep = v.abs().topk(k, dim=-1).indices
    vals = v.gather(-1, keep)
    return keep, vals / vals.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def _sparse_times(M: torch.Tensor, keep: torch.Tensor, vals: torch.Tensor) -> torch.Tensor:
    """a^T M for a contiguous batch M (..., a, b) and a with values `vals` at rows `keep` (zero elsewhere)."""
    flat = M.view(-1, *M.shape[-2:])
    rows = flat[torch.arange(flat.shape[0]).unsqueeze(-1), keep.reshape(flat.shape[0], -1)]  # (B, k, b)
    return _vm(vals, rows.view(*keep.shape, M.shape[-1]))


def _sparse_op(M: torch.Tensor, k: int, iters: int = 30) -> torch.Tensor:
    """Lower estimate of sup over unit k-sparse a of ||M a|| (batched): exact at k = 1 (largest column norm);
    otherwise truncated power iteration a <- trunc_k(M^T M a) started from the k largest columns' support (greedy)
    and from the top right singular vector, the better of the two."""
    cols = M.norm(dim=-2)
    if k == 1:
        return cols.amax(-1)
    p = M.shape[-1]
    k = min(k, p)
    best = torch.zeros(M.shape[:-2], dtype=M.dtype)
    G = M.transpose(-1, -2) @ M
    GT, MT = G.transpose(-1, -2).contiguous(), M.transpose(-1, -2).contiguous()
    top = cols.topk(k, dim=-1).indices
    # G a for each start: the indicator of the greedy support (sparse), the top right singular vector (dense)
    for g in (_sparse_times(GT, top, torch.ones(top.shape, dtype=M.dtype)), _mv(G, _top_right_vector(G))):
        for i in range(iters):
            keep, vals = _support(g, k)
            if i < iters - 1:
                g = _sparse_times(GT, keep, vals)
        best = torch.maximum(best, _sparse_times(MT, keep, vals).norm(dim=-1))
    return best


def _sparse_bilinear(M: torch.Tensor, k: int, iters: int = 30) -> torch.Tensor:
    """Lower estimate of sup over unit k-sparse a, b of |a^T M b|: exact max |M_ij| at k = 1; otherwise alternating
    truncated power iteration from the largest entry and from the top singular pair."""
    flat = M.abs().flatten(-2)
    if k == 1:
        return flat.amax(-1)
    p = M.shape[-1]
    k = min(k, p)
    best = torch.zeros(M.shape[:-2], dtype=M.dtype)
    idx = flat.argmax(-1)
    b0 = torch.nn.functional.one_hot(idx % p, p).to(M.dtype)
    starts = (b0, _top_right_vector(M.transpose(-1, -2) @ M))
    M, MT = M.contiguous(), M.transpose(-1, -2).contiguous()
    for b in starts:
        bkeep, bvals = _support(b, k)
        for _ in range(iters):
            akeep, avals = _support(_sparse_times(MT, bkeep, bvals), k)  # a = trunc(M b)
            aM = _sparse_times(M, akeep, avals)
            bkeep, bvals = _support(aM, k)
        best = torch.maximum(best, (aM.gather(-1, bkeep) * bvals).sum(-1).abs())
    return best


CHAIN_PARTS = ("e3-op", "e3-out", "e4-op", "e4-out", "e5", "e6", "e7", "e8", "e10-a", "e10-b")


@QUANTITIES.register("chatterji2021-init-chain", "Lemmas E.3-E.8, E.10 at He initialisation, max over samples and "
                     "1 <= l1 <= l2 <= L: 'e3-op' max_l ||V_l||_op; 'e3-out' ||V_{L+1}||^2/(2p); 'e4-op' "
                     "||V_{l2} Sigma ... Sigma V_{l1}||_op; 'e4-out' ||V_{L+1} Sigma_L ... V_{l1}||; 'e5'/'e6' sup over unit "
                     "k-sparse a of ||M a|| / ||a^T M||; 'e7' sup |a^T M b|; 'e8' sup |w a| (exact top-k); 'e10-a'/'e10-b' "
                     "||Sigma V ... Sigma V z|| / ||V Sigma ... V z|| for a fixed unit z (ctx.coefficients(p) normalised); k = args.k (expression); args.normalise "
                     "divides e7 by sqrt(k log(p)/p) and e8 by sqrt(k log p)",
                     networks=NET)
def init_chain(ctx: Context) -> Observation:
    from lemmacheck.expressions import parse
    part = str(ctx.arg("part", "e4-op"))
    if part not in CHAIN_PARTS:
        raise EstimatorError(f"args.part = '{part}': expected one of {CHAIN_PARTS}")
    X = ctx.inputs()
    L, p, R = ctx.i("L"), ctx.i("p"), X.shape[0]
    if part in ("e3-op", "e3-out") and str(ctx.arg("sampler", "exact")) == "exact":
        # E.3 reads each layer alone: ||V_l||_op of (2/p)^{1/2} x (p x p Gaussian) from the exact bidiagonal model
        # (linalg.gaussian_spectral_norm), ||V_{L+1}||^2 = chi^2_p, without drawing the p^2 L weights
        if part == "e3-op":
            norms, how = linalg.gaussian_spectral_norm(ctx.generator, (R, L), p, p, scale=math.sqrt(2.0 / p))
            return Observation(norms.to(ctx.dtype).amax(-1), method=how)
        out = torch.randn(R, p, generator=ctx.generator, dtype=ctx.dtype)
        return Observation(out.pow(2).sum(1) / (2 * p), method="exact (output layer only)")
    Vs = net.init(ctx.generator, R, p, L, ctx.dtype)
    if part == "e3-op":
        return Observation(torch.stack([_op_norm(V) for V in Vs[:-1]], -1).amax(-1), method="exact SVD")
    if part == "e3-out":
        return Observation(Vs[-1].flatten(1).pow(2).sum(1) / (2 * p), method="exact")
    act = _act(ctx)
    fwd = net.forward(Vs, X, act)
    if part.startswith("e10"):
        # "z in S^{p-1} fixed": drawn independently of V^(1), as the lemma requires, through ctx.coefficients (the
        # claim's inputs.coefficients; null-vector: a z orthogonal to every input point), so runs and hunts move it
        z = ctx.coefficients(p, X.detach().transpose(-1, -2)).to(X.dtype)
        zn = z.norm(dim=-1, keepdim=True)
        if not bool((zn > 0).all()):
            raise EstimatorError("Lemma E.10 needs a unit z: the coefficient vector is zero")
        z = z / zn
        best = torch.zeros(R, dtype=X.dtype)
        n = X.shape[1]
        for l1 in range(1, L + 1):
            v = z.unsqueeze(1).expand(-1, n, -1)  # (R, n, p)
            if part == "e10-a":
                best = torch.maximum(best, v.norm(dim=-1).amax(-1))  # l2 = l1: the empty product
            for l2 in range(l1, L + 1):
                v = v @ Vs[l2 - 1].transpose(-1, -2)  # V_{l2} (...)
                if part == "e10-b":
                    best = torch.maximum(best, v.norm(dim=-1).amax(-1))
                v = fwd.dphi[l2 - 1] * v  # Sigma_{l2} V_{l2} (...)
                if part == "e10-a" and l2 + 1 <= L:
                    best = torch.maximum(best, v.norm(dim=-1).amax(-1))
        return Observation(best, method="exact products with a fixed random unit z")
    k = 1
    if part in ("e5", "e6", "e7", "e8"):
        k = max(1, int(parse(str(ctx.arg("k", "1")), set(ctx.params)).evaluate(ctx.params)))
    if part in ("e4-out", "e8"):
        rows = _chain_rows(Vs, fwd)
        if part == "e4-out":
            val = torch.stack([w.norm(dim=-1).amax(-1) for _, w in rows], -1).amax(-1)
        else:
            val = torch.stack([_topk_norm(w, k).amax(-1) for _, w in rows], -1).amax(-1)
    else:
        fn = {"e4-op": lambda M: linalg.spectral_norm(M)[0], "e5": lambda M: _sparse_op(M, k),
              "e6": lambda M: _sparse_op(M.transpose(-1, -2), k), "e7": lambda M: _sparse_bilinear(M, k)}[part]
        mats = _chain_mats(Vs, fwd)  # not _chains: its output rows were an (R, n, p, p) copy per l1, unread here
        # l1 = l2: the chain is V_{l1} itself, the same for every sample: evaluate it once, not n times
        val = torch.stack([fn(M[:, 0]) if l1 == l2 else fn(M).amax(-1) for l1, l2, M in mats], -1).amax(-1)
    if ctx.arg("normalise", False):
        # divide by the statement's k-dependent shape at the INTEGER k used (k = max(1, floor(...))), so that a
        # scaling claim fits the implied constant directly
        val = val / math.sqrt(k * math.log(p) / p) if part == "e7" else val / math.sqrt(k * math.log(p))
    exact = part in ("e4-op", "e4-out", "e8") or k == 1
    return Observation(val, extras={"k": torch.full((R,), float(k), dtype=X.dtype)},
                       method="exact" if exact else "greedy + truncated power iteration (lower estimate of the sparse sup)")


@QUANTITIES.register("chatterji2021-near-zero-count", "Lemma E.9: max over l, s of |S_{l,s}(beta)| / (p^{3/2} beta), "
                     "S = {j : |u_{l,s,j}| <= beta}, beta = L^{args.beta_power} tau^{2/3} / sqrt(p) (the proof: <= 3), "
                     "exact sampler of the pre-activations at He initialisation", networks=NET)
def near_zero_count(ctx: Context) -> Observation:
    X = ctx.inputs()
    L, p = ctx.i("L"), ctx.i("p")
    beta = L ** float(ctx.arg("beta_power", 2.0)) * ctx.p("tau") ** (2 / 3) / math.sqrt(p)
    us, _ = net.init_preactivations_exact(ctx.generator, X, L, _act(ctx))
    count = torch.stack([(u.abs() <= beta).sum(-1).amax(-1) for u in us], -1).amax(-1).to(X.dtype)
    return Observation(count / (p ** 1.5 * beta), extras={"beta": torch.full_like(count, beta), "count": count},
                       method="exact Gaussian-conditioning sampler")


# =================================================== Appendix C: two-layer net on r-clustered data
def _clustered(ctx: Context, p: int, n: int, r: torch.Tensor, parts: bool = False):
    """mu uniform on S^{p-1}, labels y_s Rademacher, x_s = y_s (sqrt(1 - rho^2) mu + rho w_s) with w_s a unit vector
    orthogonal to mu and rho chosen so that ||x_s - y_s mu|| = r exactly (the largest radius the data may have).
    Returns (X, y, mu), and with parts=True also w (R, n, p) and c = sqrt(1 - rho^2) = 1 - r^2/2 (R, 1, 1)."""
    R = ctx.replicates
    mu = torch.randn(R, p, generator=ctx.generator, dtype=torch.float64)
    mu = mu / mu.norm(dim=-1, keepdim=True)
    w = torch.randn(R, n, p, generator=ctx.generator, dtype=torch.float64)
    w = w - (w * mu[:, None]).sum(-1, keepdim=True) * mu[:, None]
    w = w / w.norm(dim=-1, keepdim=True)
    # ||x - y mu||^2 = 2 - 2 sqrt(1 - rho^2) = r^2
    c = (1 - r ** 2 / 2)[:, None, None]
    y = ctx.labels(n)
    X = y[..., None] * (c * mu[:, None] + (1 - c ** 2).clamp_min(0).sqrt() * w)
    return (X, y, mu, w, c) if parts else (X, y, mu)


@QUANTITIES.register("chatterji2021-clustered-margin", "Proposition C.1 / Lemma C.2 for f = V_2 phi(V_1 x) on r-clustered "
                     "data (r = sqrt(p) h / (c' sqrt(log(3pn/delta))) capped at 1/16, h = sqrt(pi)/(2p)): args.part "
                     "'c1' min_s y_s grad f(x_s) . W* / sqrt(p) for the proof's W*; 'c2-plus'/'c2-minus' the worst "
                     "deviation of |S_+-|/p outside [1/4, 1/2] in units of p^{-1/4}; 'c2-c' max_{s,i} |V_{1,i}.(x_s - "
                     "y_s mu)| / (2h)", networks=NET)
def clustered_margin(ctx: Context) -> Observation:
    p, n, R = ctx.i("p"), ctx.i("n"), ctx.replicates
    delta, cprime = float(ctx.p("delta")), float(ctx.p("cprime"))
    h = math.sqrt(math.pi) / (2 * p) * float(ctx.p("h_frac", 1.0))
    r = torch.full((R,), min(1 / 16, math.sqrt(p) * h / (cprime * math.sqrt(math.log(3 * p * n / delta)))),
                   dtype=torch.float64)
    X, y, mu, w, c = _clustered(ctx, p, n, r, parts=True)
    sampler = str(ctx.arg("sampler", "exact"))
    if sampler == "exact":
        # V_1 enters only through V_1 mu and V_1 x_s. mu is orthogonal to every w_s, so the rows' projections
        # a_i = V_{1,i} . mu ~ N(0, 2/p) are independent of (V_{1,i} . w_s)_s ~ N(0, (2/p) Gram(w)), iid over i:
        # O(p n^2) per replicate instead of p^2 Gaussians and a p x p product (p = 2048 costs what p = 64 did).
        Z = torch.randn(R, p, n + 1, generator=ctx.generator, dtype=torch.float64)
        proj = Z[..., 0] * math.sqrt(2.0 / p)  # (R, p): V_{1,i} . mu
        Vw = (Z[..., 1:] @ net._psd_sqrt(2.0 / p * (w @ w.transpose(-1, -2)))).transpose(-1, -2)  # (R, n, p)
        sq, a = (1 - c ** 2).clamp_min(0).sqrt(), proj[:, None, :]
        U = y[..., None] * (c * a + sq * Vw)  # (R, n, p): u_{1,s} = V_1 x_s
        D = y[..., None] * (-(r ** 2 / 2)[:, None, None] * a + sq * Vw)  # V_1 (x_s - y_s mu), c - 1 = -r^2/2
    elif sampler == "full":
        V1 = torch.randn(R, p, p, generator=ctx.generator, dtype=torch.float64) * math.sqrt(2.0 / p)
        proj = (V1 @ mu.unsqueeze(-1)).squeeze(-1)  # V_{1,i} . mu
        U = X @ V1.transpose(-1, -2)  # (R, n, p): u_{1,s}
        D = (X - y[..., None] * mu[:, None]) @ V1.transpose(-1, -2)
    else:
        raise EstimatorError(f"args.sampler = '{sampler}': expected exact or full")
    V2 = torch.randn(R, p, generator=ctx.generator, dtype=torch.float64)
    part = str(ctx.arg("part", "c1"))
    S = (V2.abs() >= 0.5) & (V2.abs() <= 2)
    Sp, Sm = S & (proj >= 4 * h), S & (-proj >= 4 * h)
    extras = {"r": r, "S_plus": Sp.sum(-1).to(torch.float64) / p, "S_minus": Sm.sum(-1).to(torch.float64) / p}
    method = f"{sampler} sampler"
    if part == "c2-c":
        return Observation(D.abs().flatten(1).amax(-1) / (2 * h), extras=extras, method=method)
    if part in ("c2-plus", "c2-minus"):
        frac = (Sp if part == "c2-plus" else Sm).sum(-1).to(torch.float64) / p
        dev = torch.maximum(0.25 - frac, frac - 0.5) / p ** -0.25
        return Observation(dev, extras=extras, method=method)
    if part != "c1":
        raise EstimatorError(f"args.part = '{part}': expected c1, c2-plus, c2-minus or c2-c")
    act = net.activation("huberized-relu", h)
    N = (Sp | Sm).sum(-1).clamp_min(1).to(torch.float64)
    # W*_1 rows: sign(V_{2,i}) mu / sqrt(|S_+| + |S_-|) on S_+ u S_-, 0 elsewhere; W*_2 = 0 (so ||W*|| = 1)
    Wrow = ((Sp | Sm).to(torch.float64) * torch.sign(V2) / N.sqrt()[:, None])  # (R, p): coefficient of mu per row
    # grad_{V_1} f(x_s) . W*_1 = sum_i V_{2,i} phi'(u_i) (W*_{1,i} . x_s) = sum_i V_{2,i} phi'(u_i) Wrow_i (mu . x_s)
    mux = (X * mu[:, None]).sum(-1)  # (R, n)
    g = (act.df(U) * (V2 * Wrow)[:, None, :]).sum(-1) * mux
    return Observation((y * g).amin(-1) / math.sqrt(p), extras=extras, method=f"the proof's explicit W*, {method}")


# ================================================== Appendices D and E: the neighbourhood of initialisation
def _ball_point(ctx: Context, Vs: list[torch.Tensor], fwd: net.Forward, tau: float, norm: str) -> list[torch.Tensor]:
    """A point of the ball {max_l ||V_l - V^(1)_l|| <= tau} (norm 'op' over hidden layers, Frobenius on V_{L+1}, as
    E.13-E.15; or 'fro' on every layer, Definition D.1) on its boundary: per layer half Gaussian, half rank one
    a x_{l-1,s}^T aimed along the sample's input to that layer (the direction that moves u_{l,s} most)."""
    R, n = fwd.out.shape
    out = []
    for l, V in enumerate(Vs):
        G = torch.randn(V.shape, generator=ctx.generator, dtype=V.dtype)
        s = torch.randint(0, n, (R,), generator=ctx.generator)
        b = fwd.x[l][torch.arange(R), s]
        b = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        a = torch.randn(R, V.shape[1], generator=ctx.generator, dtype=V.dtype)
        rank1 = a.unsqueeze(-1) * b.unsqueeze(-2)
        gauss = torch.rand(R, 1, 1, generator=ctx.generator) < 0.5
        D = torch.where(gauss, G, rank1)
        if norm == "op" and l < len(Vs) - 1:
            # ||a b^T||_2 = ||a|| ||b||: an SVD only for the Gaussian directions
            size = a.norm(dim=-1) * b.norm(dim=-1)
            pick = gauss.flatten()
            size[pick] = _op_norm(G[pick])
        else:
            size = torch.linalg.matrix_norm(D)
        out.append(V + tau * D / size.clamp_min(1e-300).reshape(-1, 1, 1))
    return out


BALL_PARTS = ("e13", "e14-flips", "e14-x", "e15", "d7-app", "d7-gamma")


@QUANTITIES.register("chatterji2021-ball-perturbation", "Lemmas E.13-E.15, D.7 near He initialisation, max over samples "
                     "and layers, by the claim's search over points of the tau-ball (random + rank-one aligned; "
                     "lower estimates of the sups): 'e13' ||prod_{j=l1}^{l2} V~_j^T Sigma~_j||_op with k-sparse Sigma "
                     "changes in [-3,3]; 'e14-flips' ||Sigma^V~ - Sigma^V^||_0; 'e14-x' ||x^V~ - x^V^||; 'e15' the "
                     "output-row difference with O(p L^2 tau^{2/3})-sparse Sigma-bar; 'd7-app' the Taylor remainder "
                     "eps_app; 'd7-gamma' max_l ||grad_{V_l} f||", networks=NET)
def ball_perturbation(ctx: Context) -> Observation:
    from lemmacheck.expressions import parse
    part = str(ctx.arg("part", "e14-x"))
    if part not in BALL_PARTS:
        raise EstimatorError(f"args.part = '{part}': expected one of {BALL_PARTS}")
    X = ctx.inputs()
    L, p, R = ctx.i("L"), ctx.i("p"), X.shape[0]
    tau = float(ctx.p("tau"))
    # h <= tau / sqrt(p) (E.14, E.15, D.7): args.h_frac sets h = h_frac tau / sqrt(p); otherwise the claim's h
    act = _act(ctx, float(ctx.arg("h_frac")) * tau / math.sqrt(p) if ctx.arg("h_frac") is not None else None)
    Vs = net.init(ctx.generator, R, p, L, ctx.dtype)
    fwd = net.forward(Vs, X, act)
    norm = "fro" if part.startswith("d7") else "op"
    best = torch.zeros(R, dtype=X.dtype)
    for _ in range(int(ctx.arg("points", 4))):
        Vt = _ball_point(ctx, Vs, fwd, tau, norm)
        Vh = _ball_point(ctx, Vs, fwd, tau, norm) if ctx.arg("second", "ball") == "ball" else Vs
        ft, fh = net.forward(Vt, X, act), net.forward(Vh, X, act)
        if part == "e14-flips":
            val = torch.stack([(a != b).sum(-1).amax(-1) for a, b in zip(ft.dphi, fh.dphi)], -1).amax(-1).to(X.dtype)
        elif part == "e14-x":
            val = torch.stack([(a - b).norm(dim=-1).amax(-1) for a, b in zip(ft.x[1:], fh.x[1:])], -1).amax(-1)
        elif part == "d7-gamma":
            dt, _ = net.backward(Vt, ft)
            grads = net.output_gradients(ft, dt)
            val = torch.stack([G.flatten(2).norm(dim=-1).amax(-1) for G in grads], -1).amax(-1)
        elif part == "d7-app":
            dt, _ = net.backward(Vt, ft)
            lin = sum((G * (a - b).unsqueeze(1)).flatten(2).sum(-1)
                      for G, a, b in zip(net.output_gradients(ft, dt), Vh, Vt))
            val = (fh.out - ft.out - lin).abs().amax(-1)
        elif part == "e13":
            k = max(1, int(parse(str(ctx.arg("k", "1")), set(ctx.params)).evaluate(ctx.params)))
            vals = []
            for s in range(X.shape[1]):
                # Sigma~: Sigma^{V1} with k coordinates per layer set to +-3 (random coordinates, random signs)
                sig = []
                for l in range(L):
                    d = fwd.dphi[l][:, s].clone()
                    idx = torch.rand(R, p, generator=ctx.generator).argsort(-1)[:, :k]
                    d.scatter_(-1, idx, 3.0 * _signs(ctx, R, k))
                    sig.append(d)
                for l1 in range(L):
                    M = Vt[l1].transpose(-1, -2) * sig[l1].unsqueeze(-2)
                    vals.append(linalg.operator_norm(M))
                    for l2 in range(l1 + 1, L):
                        M = M @ (Vt[l2].transpose(-1, -2) * sig[l2].unsqueeze(-2))
                        vals.append(linalg.operator_norm(M))
            val = torch.stack(vals, -1).amax(-1)
        else:  # e15
            sparsity = max(1, min(p, math.ceil(p * L ** 2 * tau ** (2 / 3) * float(ctx.arg("sparsity_constant", 1.0)))))
            vals = []
            for s in range(X.shape[1]):
                wt, wh = Vt[-1][:, 0], Vh[-1][:, 0]  # rows (R, p)
                for r_ in range(L, 0, -1):
                    d = ft.dphi[r_ - 1][:, s].clone()
                    # Sigma-bar: +-1 at the coordinates where the backward row is largest (adversarial placement)
                    idx = wt.abs().topk(sparsity, dim=-1).indices
                    d = d + torch.zeros_like(d).scatter(-1, idx, torch.sign(wt.gather(-1, idx)))
                    wt = ((wt * d).unsqueeze(-2) @ Vt[r_ - 1]).squeeze(-2)
                    wh = ((wh * fh.dphi[r_ - 1][:, s]).unsqueeze(-2) @ Vh[r_ - 1]).squeeze(-2)
                    vals.append((wt - wh).norm(dim=-1))
            val = torch.stack(vals, -1).amax(-1)
        best = torch.maximum(best, val)
    return Observation(best, method=f"max over {ctx.arg('points', 4)} random / rank-one aligned ball points (lower "
                       "estimate of the sup)")


# ================================================================= Appendix D: the neural-tangent stage
def _nt_features(Vs, X, act):
    """f_{V1}(x_s) (R, n) and the per-layer feature tensors grad_{V_l} f_{V1}(x_s) (R, n, *shape)."""
    fwd = net.forward(Vs, X, act)
    deltas, _ = net.backward(Vs, fwd)
    return fwd.out, net.output_gradients(fwd, deltas)


def _features_dot(feats, Ds):
    """sum_l grad_{V_l} f(x_s) . D_l per sample (R, n): one batched matrix-vector product per layer (an elementwise
    product and sum made an (R, n, *shape) temporary, at every iteration of nt_solve)."""
    return sum(_mv(G.flatten(2), D.flatten(1)) for G, D in zip(feats, Ds))


def _features_combination(c, G):
    """sum_s c_s grad_{V_l} f(x_s) per replicate (R, *shape)."""
    return _vm(c, G.flatten(2)).view(G.shape[0], *G.shape[2:])


def _nt_loss(f1, FD, y):
    """The NT loss (1/n) sum_s log(1 + exp(-y_s F_s)) from F = f1 + _features_dot(feats, D)."""
    return torch.nn.functional.softplus(-y * (f1 + FD)).mean(-1)


def _project_ball(Ds, rho):
    """Per-layer Frobenius projection onto radius rho (a float or one radius per replicate)."""
    rho = torch.as_tensor(rho, dtype=Ds[0].dtype)
    return [D * (rho / torch.linalg.matrix_norm(D).clamp_min(1e-300)).clamp_max(1.0).reshape(-1, 1, 1) for D in Ds]


def nt_solve(f1, feats, y, rho, start=None, iters: int = 400):
    """eps_NT(V1, rho) = min over max_l ||D_l||_F <= rho of (1/n) sum_s log(1 + exp(-y_s F_{V1, V1+D}(x_s))) (Definition
    D.3), by accelerated projected gradient (FISTA, step 1/M with M = (1/(4n)) sum_s ||grad f_s||^2 >= the Hessian's
    norm). Returns (loss, D). Every iterate is feasible, so the loss is an upper estimate of eps_NT."""
    n = y.shape[-1]
    M = sum(G.flatten(2).pow(2).sum(-1) for G in feats).sum(-1) / (4 * n)  # (R,)
    step = (1 / M.clamp_min(1e-300)).reshape(-1, 1, 1)
    D = [torch.zeros_like(G[:, 0]) for G in feats] if start is None else _project_ball(start, rho)
    Z, t = D, 1.0
    FD = FZ = _features_dot(feats, D)
    best = _nt_loss(f1, FD, y)
    bestD = D
    for _ in range(iters):
        c = -y * torch.sigmoid(-y * (f1 + FZ)) / n
        grads = [_features_combination(c, G) for G in feats]
        Dn = _project_ball([z - step * g for z, g in zip(Z, grads)], rho)
        tn = (1 + math.sqrt(1 + 4 * t * t)) / 2
        Z = [a + (t - 1) / tn * (a - b) for a, b in zip(Dn, D)]
        FDn = _features_dot(feats, Dn)
        FZ = FDn + (t - 1) / tn * (FDn - FD)  # the features' products are linear in D: Z's from Dn's and D's
        D, FD, t = Dn, FDn, tn
        cur = _nt_loss(f1, FD, y)
        better = cur < best
        bestD = [torch.where(better.reshape(-1, 1, 1), a, b) for a, b in zip(D, bestD)]
        best = torch.minimum(best, cur)
    return best, bestD


def _nt_margin(feats, y):
    """gamma-hat sqrt(p) = max_{||W|| = 1} min_s y_s grad f_s . W = min over the simplex of ||sum_s lambda_s y_s grad f_s||
    (when positive; Frank-Wolfe on the Gram matrix), and the maximiser W* (R, per layer)."""
    R, n = y.shape
    A = [y.reshape(R, n, *([1] * (G.dim() - 2))) * G for G in feats]
    K = sum(torch.einsum("rs...,rt...->rst", a, a) for a in A)
    lam = torch.full((R, n), 1.0 / n, dtype=K.dtype)
    for k in range(2000):
        g = (K @ lam.unsqueeze(-1)).squeeze(-1)
        i = g.argmin(-1)
        e = torch.nn.functional.one_hot(i, n).to(K.dtype)
        d = e - lam
        num = -(d * g).sum(-1)
        den = (d.unsqueeze(-2) @ K @ d.unsqueeze(-1)).squeeze(-1).squeeze(-1)
        gam = (num / den.clamp_min(1e-300)).clamp(0.0, 1.0)
        lam = lam + gam.unsqueeze(-1) * d
    W = [torch.einsum("rn,rn...->r...", lam, a) for a in A]
    nW = net.collective_norm(W).clamp_min(1e-300)
    W = [w / nW.reshape(-1, 1, 1) for w in W]
    margin = torch.stack([sum((a[:, s] * w).flatten(1).sum(-1) for a, w in zip(A, W)) for s in range(n)], -1).amin(-1)
    return margin, W


def _taylor_remainder(VA, VB, X, act):
    """max_s |f_{VA}(x_s) - f_{VB}(x_s) - grad f_{VB}(x_s) . (VA - VB)|."""
    fB, gB = _nt_features(VB, X, act)
    fA = net.forward(VA, X, act).out
    lin = sum((G * (a - b).unsqueeze(1)).flatten(2).sum(-1) for G, a, b in zip(gB, VA, VB))
    return (fA - fB - lin).abs().amax(-1)


@QUANTITIES.register("chatterji2021-ntk-stage", "Appendix D at He initialisation: 'd9' eps_NT(V1, rho)/eps at rho = "
                     "c [sqrt(log(n/delta)) + log(1/(e^eps - 1))]/(sqrt(p) gamma-hat) (<= 1; gamma-hat the NT-feature "
                     "margin of Assumption 3.2 by Frank-Wolfe); 'd8' min_{t<=T} J_t / eps_NT(V1, rho) for GD at alpha = "
                     "c_alpha/(p L^5), T = ceil((L+1) rho^2/(4 alpha eps_NT)), rho = tau/(3L) (<= 6); 'd6' LHS/RHS of the "
                     "average-loss bound at alpha = c_alpha/(L Gamma^2)", networks=NET)
def ntk_stage(ctx: Context) -> Observation:
    X = ctx.inputs()
    L, p, n, R = ctx.i("L"), ctx.i("p"), X.shape[1], X.shape[0]
    y = ctx.labels(n)
    part = str(ctx.arg("part", "d9"))
    tau = float(ctx.p("tau", 0.0))
    h = float(ctx.arg("h_frac")) * tau / math.sqrt(p) if ctx.arg("h_frac") is not None else float(ctx.p("h"))
    act = net.activation(str(ctx.arg("activation", "huberized-relu")), h)
    Vs = net.init(ctx.generator, R, p, L, ctx.dtype)
    f1, feats = _nt_features(Vs, X, act)
    if part == "d9":
        eps, delta, c = float(ctx.p("eps")), float(ctx.p("delta")), float(ctx.p("c"))
        margin, W = _nt_margin(feats, y)
        gamma = margin / math.sqrt(p)
        rho = c * (math.sqrt(math.log(n / delta)) + math.log(1 / math.expm1(eps))) / (math.sqrt(p) * gamma.clamp_min(1e-300))
        rho_fin = torch.where(torch.isfinite(rho), rho, torch.zeros_like(rho))  # gamma <= 0: not valid anyway
        loss, _ = nt_solve(f1, feats, y, rho_fin, start=[rho_fin.reshape(-1, 1, 1) * w for w in W],
                           iters=int(ctx.arg("iters", 200)))
        out = loss / eps
        valid = (gamma > 0) & (gamma <= 1)
        return Observation(out, valid=valid, extras={"gamma": gamma, "rho": rho},
                           method="Frank-Wolfe margin; accelerated projected gradient from rho W* (upper estimate)")
    c_alpha = float(ctx.p("c_alpha"))
    if part == "d8":
        rho = tau / (3 * L)
        eps_nt, _ = nt_solve(f1, feats, y, rho)
        alpha = c_alpha / (p * L ** 5)
        T = torch.ceil((L + 1) * rho ** 2 / (4 * alpha * eps_nt))
        Tmax = int(ctx.arg("max_steps", 3000))
        steps = int(min(T.max().item(), Tmax))
        tr = net.gradient_descent(Vs, X, y, act, alpha, steps)
        t_idx = torch.arange(steps + 1)
        in_T = t_idx.unsqueeze(0) < T.unsqueeze(-1)  # t = 1..T is index 0..T-1
        minJ = torch.where(in_T, tr.log_loss, torch.full_like(tr.log_loss, math.inf)).amin(-1).exp()
        drift = max(torch.linalg.matrix_norm(d).amax() for d in tr.displacement)
        return Observation(minJ / eps_nt, valid=T <= Tmax, extras={"eps_nt": eps_nt, "T": T,
                                                                  "final_drift_over_tau": torch.full_like(minJ, float(drift) / tau)},
                           method="accelerated projected gradient for eps_NT (upper estimate), then full-batch GD")
    if part != "d6":
        raise EstimatorError(f"args.part = '{part}': expected d9, d8 or d6")
    rho, T = float(ctx.p("rho")), ctx.i("T")
    eps_nt, Dstar = nt_solve(f1, feats, y, rho)
    Vstar = [v + d for v, d in zip(Vs, Dstar)]
    gamma_hat = torch.stack([G.flatten(2).norm(dim=-1).amax(-1) for G in feats], -1).amax(-1)
    alpha = c_alpha / (L * gamma_hat ** 2)
    V = [v.clone() for v in Vs]
    losses, iterates = [], []
    for t in range(T + 1):
        grads, fwd, _ = net.loss_gradients(V, X, y, act)
        if t < T:
            losses.append(net.loss(fwd.out, y))
        iterates.append(V)
        V = [v - alpha.reshape(-1, 1, 1) * g for v, g in zip(V, grads)]
    VT1 = iterates[-1]
    dist = lambda A, B: torch.stack([torch.linalg.matrix_norm(a - b) for a, b in zip(A, B)], -1).amax(-1)
    tau_hat = torch.maximum(torch.stack([dist(I, Vs) for I in iterates], -1).amax(-1), dist(Vstar, Vs))
    probe = [iterates[0], iterates[len(iterates) // 2], iterates[-1], Vstar]
    eps_app = torch.stack([_taylor_remainder(a, b, X, act) for a in probe for b in probe if a is not b], -1).amax(-1)
    sq = lambda A, B: net.collective_norm([a - b for a, b in zip(A, B)]) ** 2
    lhs = torch.stack(losses, -1).mean(-1)
    rhs = (sq(Vs, Vstar) - sq(VT1, Vstar) + 2 * T * alpha * eps_nt) / (T * alpha * (1.5 - 4 * eps_app))
    return Observation(lhs / rhs, valid=eps_app < 3 / 8, extras={"eps_nt": eps_nt, "eps_app": eps_app, "tau": tau_hat},
                       method="V* by accelerated projected gradient; eps_app over iterate/V* pairs (lower estimate)")


@QUANTITIES.register("chatterji2021-descent-lemma-ratio", "Lemma 4.1 on functions with a known global bound M on "
                     "||Hessian||: (J_t - J_{t+1}) / (alpha L ||grad J_t||^2 / (L + 1/2)) for one GD step at alpha = "
                     "kappa/((L + 1/2) M) (>= 1); args.family 'quadratic' (one eigenvalue exactly M; half the starts on "
                     "its eigenvector, the equality case) or 'logistic' (logistic regression, M = lambda_max(Z^T Z)/(4n))",
                     networks=NET)
def descent_lemma_ratio(ctx: Context) -> Observation:
    R, d, L = ctx.replicates, ctx.i("p"), ctx.i("L")
    kappa = float(ctx.p("kappa"))
    fam = str(ctx.arg("family", "quadratic"))
    if fam == "quadratic":
        Q, _ = torch.linalg.qr(torch.randn(R, d, d, generator=ctx.generator, dtype=torch.float64))
        ev = torch.rand(R, d, generator=ctx.generator, dtype=torch.float64)
        ev[:, 0] = 1.0  # M = 1: the top eigenvalue attains the smoothness bound
        A = Q @ torch.diag_embed(ev) @ Q.transpose(-1, -2)
        x = torch.randn(R, d, generator=ctx.generator, dtype=torch.float64)
        x = torch.where(torch.rand(R, 1, generator=ctx.generator) < 0.5, Q[:, :, 0] * x.norm(dim=-1, keepdim=True), x)
        g = (A @ x.unsqueeze(-1)).squeeze(-1)
        alpha = kappa / (L + 0.5)
        # f(x) - f(x - alpha g) = alpha g.g - alpha^2/2 g^T A g exactly (no cancellation)
        drop = alpha * (g * g).sum(-1) - alpha ** 2 / 2 * (g.unsqueeze(-2) @ A @ g.unsqueeze(-1)).squeeze(-1).squeeze(-1)
        gsq = (g * g).sum(-1)
    elif fam == "logistic":
        n = ctx.i("n")
        Z = torch.randn(R, n, d, generator=ctx.generator, dtype=torch.float64)
        yv = ctx.labels(n)
        M = torch.linalg.eigvalsh(Z.transpose(-1, -2) @ Z)[:, -1] / (4 * n)
        w = torch.randn(R, d, generator=ctx.generator, dtype=torch.float64) * _log_uniform(ctx, 0.01, 10.0, R)[:, None]
        m = yv * (Z @ w.unsqueeze(-1)).squeeze(-1)
        g = (Z * (-yv * torch.sigmoid(-m)).unsqueeze(-1)).mean(1)
        alpha = kappa / ((L + 0.5) * M)
        dm = -alpha[:, None] * yv * (Z @ g.unsqueeze(-1)).squeeze(-1)
        drop = -net.margin_loss_change(m, dm)
        gsq = (g * g).sum(-1)
    else:
        raise EstimatorError(f"args.family = '{fam}': expected quadratic or logistic")
    return Observation(drop / (alpha * L * gsq / (L + 0.5)), method=f"{fam}; exact one-step decrease")
