"""Quantities of the chatterji2021 setting (Chatterji, Long, Bartlett 2021: deep smoothed-ReLU nets, logistic loss).

Parameters (the paper's symbols): p (input dimension = width), L (hidden layers), n (samples, ≥ 3), h (the
activation's smoothing), delta, kappa (step-size multiple), T (GD steps), scale (multiplies every layer of the
He initialisation). Options (check.args): activation ("huberized-relu" default, or "scaled-swish"); weights
("init": He initialisation times `scale`; "small-loss": trained until separated, then scaled so that
J = target_fraction · n^{−(1+24L)} (catalogue §1.8: train-then-scale), the way to reach Theorem 3.1's regime);
train_lr, train_steps, target_fraction.

Statements about EVERY V (Lemmas 4.3, 4.5, 4.4, 4.2, Definition 2.1) are checked as "always" claims over the
instance generator: a violation is one counterexample. Their hypotheses (‖V‖ ≥ √(L+½), J < n^{−(1+24L)},
h ≤ h_max, h ≤ 1) are evaluated per replicate and returned as the `valid` mask.
"""

from __future__ import annotations

import math

import torch

from ..context import Context, Observation
from ..errors import EstimatorError
from ..kernels import Activation
from ..nets import chatterji2021 as net
from ..registry import QUANTITIES

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
    raise EstimatorError(f"args.weights = '{kind}': expected 'init' or 'small-loss'")


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
    # Partners at distance h·10^{U(−7, 1)}: never so close that float64 rounding of φ' dominates the quotient.
    sign = torch.where(torch.rand(R, k, generator=ctx.generator) < 0.5, -1.0, 1.0)
    w = z + sign * h[:, None] * _log_uniform(ctx, 1e-7, 10.0, R, k)

    def ratio(act: Activation, r: int) -> torch.Tensor:
        pairs = (h[r] * (act.df(z[r]) - act.df(w[r])).abs() / (z[r] - w[r]).abs()).max()
        return torch.maximum(pairs, (h[r] * act.d2f(z[r]).abs()).max())

    return Observation(_per_replicate(ctx, h, ratio), extras={"h": h},
                       method="random pairs at distances h 1e-7..h 10, and h |phi''| on the test points")


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
    return Observation(val, extras={"h": h}, method="random vector pairs")


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
    R = X.shape[0]
    lip = torch.empty(R, dtype=X.dtype)
    for r in range(R):
        flat = torch.cat([V[r].reshape(-1) for V in Vs])

        def J_of(theta: torch.Tensor, r: int = r) -> torch.Tensor:
            parts, k = [], 0
            for V, sz in zip(Vs, sizes):
                parts.append(theta[k:k + sz].reshape(1, *V.shape[1:]))
                k += sz
            return net.loss(net.forward(parts, X[r:r + 1], act).out, y[r:r + 1]).sum()

        Hm = torch.autograd.functional.hessian(J_of, flat)
        lip[r] = torch.linalg.eigvalsh(0.5 * (Hm + Hm.T)).abs().max()
    J = net.loss(net.forward(Vs, X, act).out, y)
    nV = net.collective_norm(Vs)
    bound = 256 * (L + 1) * math.sqrt(p) * nV ** (3 * L + 5) * J / h
    valid = ok & (nV >= math.sqrt(L + 0.5)) & (h <= 1)
    return Observation(lip / bound, valid=valid, extras={"lip": lip, "J": J, "norm_V": nV},
                       method="exact Hessian (autograd), largest |eigenvalue|; a.e. for the Huberized ReLU")


# ------------------------------------------------------------------------------------------- at initialisation

@QUANTITIES.register("chatterji2021-init-layer-norm-deviation", "Lemma E.1(a)/E.2: max over l in [L], s of "
                     "| ||x_{l,s}|| - 1 | at He initialisation (the window [9/10, 11/10] is <= 1/10)", networks=NET)
def init_layer_norm_deviation(ctx: Context) -> Observation:
    X = ctx.inputs()
    Vs = net.init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("L"), ctx.dtype)
    fwd = net.forward(Vs, X, _act(ctx))
    dev = torch.stack([(x.norm(dim=-1) - 1).abs().amax(-1) for x in fwd.x[1:]], -1).amax(-1)
    return Observation(dev, method="full forward pass")


@QUANTITIES.register("chatterji2021-init-weight-norm-ratio", "Lemma E.12: ||V^(1)|| / sqrt(5 p L) at He "
                     "initialisation (<= 1)", networks=NET)
def init_weight_norm_ratio(ctx: Context) -> Observation:
    Vs = net.init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("L"), ctx.dtype)
    return Observation(net.collective_norm(Vs) / math.sqrt(5 * ctx.i("p") * ctx.i("L")), method="exact")


@QUANTITIES.register("chatterji2021-init-output-magnitude", "Lemma E.11: max_s |f_{V^(1)}(x_s)| / sqrt(log(2n/delta)) "
                     "at He initialisation (the lemma: <= c, c hidden)", networks=NET)
def init_output_magnitude(ctx: Context) -> Observation:
    X = ctx.inputs()
    Vs = net.init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("L"), ctx.dtype)
    out = net.forward(Vs, X, _act(ctx)).out
    return Observation(out.abs().amax(-1) / math.sqrt(math.log(2 * X.shape[1] / ctx.p("delta"))),
                       method="full forward pass")


# ------------------------------------------------------------------------------------------------ trajectories

@QUANTITIES.register("chatterji2021-gd-loss-ratio", "Theorem 3.1: max over t <= T of J_t (Q (t-1) + 1) / J_1 along GD "
                     "with alpha = kappa * alpha_max(h), Q = Q~(alpha), from a small-loss V^(1) (<= 1)", networks=NET)
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
    value = ((1 + rel) * (Q.unsqueeze(-1) * t + 1))[:, 1:].amax(-1)  # t = 1 is equality by definition
    hyp = ok & (logJ1 < net.log_threshold(n, L)) & (h < net.h_max(logJ1, n1, L, p))
    return Observation(value, valid=hyp, extras={"alpha": alpha, "Q": Q, "log_J1": logJ1,
                                                 "final_rel_change": rel[:, -1]},
                       method="full-batch GD, compensated (V^(1) + D_t, outputs by difference propagation)")
