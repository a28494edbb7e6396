"""Settings and quantities that belong to no paper.

`scalar`: no network at all, for a deterministic scalar or small-vector inequality (a telescoping bound, a
series remainder) that a paper states along the way; its quantities explore the inequality by random and
boundary-seeking draws.

The `generic-*` quantities work on any setting whose module provides a protocol network
(`lemmacheck.protocol.Network`): a function `protocol_network(ctx, X)` in the module that registered the setting
(or `NETWORKS.register(..., protocol=builder)`), which draws the R networks of one shard from `ctx.generator` at the
claim's parameters; X is the (R, n, d) datasets the quantity has just drawn (None for a quantity that draws none),
for architectures that depend on the data. Each quantity draws the claim's inputs first (`ctx.inputs()`), then the
networks, then labels and search draws; the weight norms draw no inputs. They are the same computations as a paper's
own estimator wherever the paper's quantity is one of them (tests/test_generic_quantities.py checks the shipped
papers).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import torch

from .context import Context, Observation
from .errors import EstimatorError
from .linalg import low_rank_spectral_norm, spectral_norm
from .protocol import (
    ForwardPass,
    Network,
    check_forward,
    dense_gradients,
    frobenius_from_factors,
    gradient_factors,
    ntk_gram,
)
from .registry import NETWORKS, QUANTITIES
from .search import BALLS, SEARCH_ORDER, greedy_flip_vector, maximise

NETWORKS.register("scalar", "no network: a deterministic scalar or small-vector inequality, explored by "
                  "random and boundary-seeking draws")(__name__)

ANY = ("*",)


def network_for(ctx: Context, X: torch.Tensor | None = None) -> Network:
    """The claim's setting's protocol network for this shard, drawn for the datasets X: `extra["protocol"]` of its
    registration, else the `protocol_network(ctx, X)` function of the module (or object) it registered."""
    entry = NETWORKS.get(ctx.network)
    builder = entry.extra.get("protocol")
    if builder is None:
        owner = sys.modules.get(entry.obj) if isinstance(entry.obj, str) else entry.obj
        builder = getattr(owner, "protocol_network", None)
    if builder is None:
        raise EstimatorError(f"{ctx.claim_id}: setting '{ctx.network}' provides no protocol network (its module "
                             "defines no protocol_network(ctx, X)), so generic quantities cannot run on it")
    net = builder(ctx, X)
    if not isinstance(net, Network):
        raise EstimatorError(f"{ctx.claim_id}: protocol_network of setting '{ctx.network}' returned "
                             f"{type(net).__name__}, which lacks weights, layout, forward or backward")
    if "weights" in ctx.inputs_spec:  # "for all W": the declared ball's draw, or a search's iterate (ctx.weights)
        net.weights = ctx.weights(net.weights, layout=net.layout)
    return net


def _forward(ctx: Context, net: Network, X: torch.Tensor, weights: list[torch.Tensor] | None = None) -> ForwardPass:
    fwd = net.forward(X, weights)
    check_forward(fwd, X, f"{ctx.claim_id} (setting '{ctx.network}')")
    return fwd


def _choice(ctx: Context, name: str, default: str, options: tuple[str, ...]) -> str:
    value = ctx.arg(name, default)
    if value not in options:
        raise EstimatorError(f"{ctx.claim_id}: args.{name} = {value!r}: one of {', '.join(options)}")
    return value


def _reduce(values: torch.Tensor, how: str) -> torch.Tensor:
    """(R, ...) -> (R,) by max or min over everything but the replicate dimension."""
    flat = values.flatten(1)
    return flat.amax(-1) if how == "max" else flat.amin(-1)


# ------------------------------------------------------------------------------------------ forward at init


@QUANTITIES.register("generic-layer-output-norm", "max over layers l and inputs i of ||x_{l,i}|| at initialisation "
                     "(args.layers 'hidden' = 1..L or 'all' = 0..L; args.center c gives | ||x_{l,i}|| - c |; "
                     "args.reduce 'min' the minimum); any protocol network", networks=ANY)
def layer_output_norm(ctx: Context) -> Observation:
    layers = _choice(ctx, "layers", "hidden", ("hidden", "all"))
    how = _choice(ctx, "reduce", "max", ("max", "min"))
    X = ctx.inputs()
    net = network_for(ctx, X)
    with torch.no_grad():
        fwd = _forward(ctx, net, X)
    xs = fwd.outputs if layers == "all" else fwd.outputs[1:]
    norms = torch.stack([x.norm(dim=-1) for x in xs], -1)  # (R, n, layers)
    center = ctx.arg("center")
    if center is not None:
        norms = (norms - float(center)).abs()
    return Observation(_reduce(norms, how), method="forward pass")


@QUANTITIES.register("generic-weight-spectral-norm", "max over l of ||W_l||_2 of the trained weights at "
                     "initialisation (args.reduce 'min' the minimum); exact Gram eigenvalue rounded up (never power "
                     "iteration); any protocol network", networks=ANY)
def weight_spectral_norm(ctx: Context) -> Observation:
    how = _choice(ctx, "reduce", "max", ("max", "min"))
    net = network_for(ctx)
    norms, methods = zip(*(spectral_norm(W.detach()) for W in net.weights))
    return Observation(_reduce(torch.stack(norms, -1), how), method=",".join(sorted(set(methods))))


# ------------------------------------------------------------------------------------------ gradients


def _loss(kind: str, out: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L per replicate (R,), ∂L/∂f (R, n, k)) for labels y (R, n) in {-1, +1}.

    square:   L = ½ Σ_i ||f(x_i) − y_i 1/√k||²
    logistic: L = (1/n) Σ_i log(1 + exp(−y_i f(x_i)))   (scalar outputs)"""
    k = out.shape[-1]
    if kind == "square":
        target = y.unsqueeze(-1).expand_as(out) / math.sqrt(k)
        resid = out - target
        return 0.5 * (resid ** 2).sum(dim=(-1, -2)), resid
    if k != 1:
        raise EstimatorError(f"the logistic loss needs a scalar output, the network has k = {k}")
    margin = y * out[..., 0]
    n = out.shape[1]
    value = torch.nn.functional.softplus(-margin).mean(-1)
    return value, (-torch.sigmoid(-margin) * y / n).unsqueeze(-1)


def loss_gradient_factors(net: Network, X: torch.Tensor, y: torch.Tensor, loss: str,
                          weights: list[torch.Tensor] | None = None
                          ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]], ForwardPass]:
    """(L (R,), the factors (P_l, Q_l) of ∇_{W_l} L = P_lᵀ Q_l, the forward pass) at `weights`."""
    fwd = net.forward(X, weights)
    value, dout = _loss(loss, fwd.out, y)
    return value, gradient_factors(net, fwd, net.backward(fwd, dout, weights)), fwd


def _factor_norm(P: torch.Tensor, Q: torch.Tensor, norm: str) -> torch.Tensor:
    return frobenius_from_factors(P, Q) if norm == "frobenius" else low_rank_spectral_norm(P, Q)


@QUANTITIES.register("generic-loss-gradient-norm", "||grad_{W_l} L(W)|| at initialisation, closed form from the "
                     "backward vectors (args.loss 'square' = 1/2 sum_i ||f(x_i) - y_i||^2 or 'logistic' mean; "
                     "args.norm 'frobenius' or 'spectral'; args.layer 'max' over l, 'min', or 'total' = "
                     "sqrt(sum_l ||grad_l||^2)); args.per_loss divides by L(W); labels from inputs.labels",
                     networks=ANY)
def loss_gradient_norm(ctx: Context) -> Observation:
    loss = _choice(ctx, "loss", "square", ("square", "logistic"))
    norm = _choice(ctx, "norm", "frobenius", ("frobenius", "spectral"))
    layer = _choice(ctx, "layer", "max", ("max", "min", "total"))
    X = ctx.inputs()
    net = network_for(ctx, X)
    y = ctx.labels(X.shape[1], X)
    with torch.no_grad():
        value, factors, fwd = loss_gradient_factors(net, X, y, loss)
        check_forward(fwd, X, f"{ctx.claim_id} (setting '{ctx.network}')")
        per = torch.stack([_factor_norm(P, Q, norm) for P, Q in factors], -1)  # (R, L)
    if layer == "total":
        out = per.pow(2).sum(-1).sqrt()
    else:
        out = _reduce(per, layer)
    if ctx.arg("per_loss", False):
        out = out / value
    return Observation(out, method=f"closed form from backward vectors ({norm})")


@QUANTITIES.register("generic-sample-gradient-norm", "max over l and i of ||d<v, f(x_i)>/dW_l||_F = ||x_{l-1,i}|| "
                     "||delta_{l,i}(v)|| (rank one) at initialisation, v = 1 for a scalar output, else a uniform "
                     "unit vector per input; args.reduce 'min' the minimum", networks=ANY)
def sample_gradient_norm(ctx: Context) -> Observation:
    how = _choice(ctx, "reduce", "max", ("max", "min"))
    X = ctx.inputs()
    net = network_for(ctx, X)
    with torch.no_grad():
        fwd = _forward(ctx, net, X)
        R, n, k = fwd.out.shape
        V = torch.ones(R, n, 1, dtype=fwd.out.dtype, device=fwd.out.device) if k == 1 else \
            torch.nn.functional.normalize(ctx.randn(R, n, k), dim=-1)
        factors = gradient_factors(net, fwd, net.backward(fwd, V))
        per = torch.stack([P.norm(dim=-1) * Q.norm(dim=-1) for P, Q in factors], -1)  # (R, n, L)
    return Observation(_reduce(per, how), method="closed form (rank-one per-sample gradients)")


@QUANTITIES.register("generic-ntk-lambda-min", "lambda_min of the neural tangent kernel of the trained weights on the "
                     "claim's inputs at initialisation, K[(i,a),(j,b)] = sum_l <df_a(x_i)/dW_l, df_b(x_j)/dW_l> "
                     "(args.layer 'min': min over l of lambda_min(K_l); 'last': K_L alone); exact eigvalsh; "
                     "args.scale divides K",
                     networks=ANY)
def ntk_lambda_min(ctx: Context) -> Observation:
    layer = _choice(ctx, "layer", "sum", ("sum", "min", "last"))
    X = ctx.inputs()
    net = network_for(ctx, X)
    with torch.no_grad():
        _forward(ctx, net, X)
        Ks = ntk_gram(net, X)
        if layer == "sum":
            ev = torch.linalg.eigvalsh(sum(Ks))
            lam, top = ev[..., 0], ev[..., -1]
        elif layer == "last":
            ev = torch.linalg.eigvalsh(Ks[-1])
            lam, top = ev[..., 0], ev[..., -1]
        else:
            evs = [torch.linalg.eigvalsh(K) for K in Ks]
            lam, which = torch.stack([ev[..., 0] for ev in evs], -1).min(-1)
            top = torch.stack([ev[..., -1] for ev in evs], -1).gather(-1, which[..., None])[..., 0]
    scale = ctx.arg("scale")
    if scale is not None:
        s = _param_or_number(ctx, scale, "scale")
        lam, top = lam / s, top / s
    # An eigenvalue is accurate to rounding of the matrix's size, not its own: a singular K (a symmetric dataset)
    # gives lambda_min ~ 1e-16 of either sign. extras["scale"] = lambda_max lets "lambda_min > 0" read it as 0.
    return Observation(lam, extras={"scale": top.abs()}, method="exact eigvalsh")


def _param_or_number(ctx: Context, value: Any, name: str) -> float:
    if isinstance(value, str):
        if value not in ctx.params:
            raise EstimatorError(f"{ctx.claim_id}: args.{name} = {value!r} names no parameter of the claim")
        return float(ctx.params[value])
    return float(value)


# ------------------------------------------------------------------------------------------ perturbations


@QUANTITIES.register("generic-forward-perturbation", "sup over per-layer balls ||W~_l - W_l|| <= r (args.ball "
                     "'spectral' or 'frobenius'; r the parameter named by args.radius, default tau) of max_{l,i} "
                     "||x~_{l,i} - x_{l,i}|| (args.which 'preacts': z; 'out': f), a lower estimate by the claim's "
                     "search; extras.scale = the unperturbed terms' size", networks=ANY)
def forward_perturbation(ctx: Context) -> Observation:
    ball = _choice(ctx, "ball", "spectral", ("spectral", "frobenius"))
    which = _choice(ctx, "which", "outputs", ("outputs", "preacts", "out"))
    radius = ctx.p(str(ctx.arg("radius", "tau")))
    X = ctx.inputs()
    net = network_for(ctx, X)
    with torch.no_grad():
        fwd0 = _forward(ctx, net, X)

    def pick(fwd: ForwardPass) -> list[torch.Tensor]:
        return fwd.outputs[1:] if which == "outputs" else fwd.preacts if which == "preacts" else [fwd.out]

    base = [t.detach() for t in pick(fwd0)]

    def target(Wt: list[torch.Tensor]) -> torch.Tensor:
        diffs = [(a - b).norm(dim=-1).amax(-1) for a, b in zip(pick(net.forward(X, Wt)), base)]
        return torch.stack(diffs, -1).amax(-1)

    value, found = maximise(target, [W.detach() for W in net.weights], radius, ctx.search, ctx.generator,
                            steps=int(ctx.arg("steps", 20)), norm=ball)
    scale = torch.stack([b.norm(dim=-1).amax(-1) for b in base], -1).amax(-1)
    return Observation(value, extras={"found_by": found, "scale": scale}, method=f"search={ctx.search} ({ball} ball)")


@QUANTITIES.register("generic-pattern-changes", "sup over per-layer balls ||W~_l - W_l|| <= r (args.ball, args.radius "
                     "as generic-forward-perturbation) of max_{l,i} #{j : 1{z~_{l,i,j} > 0} != 1{z_{l,i,j} > 0}} "
                     "(activation-pattern changes), a lower estimate: args.draws random perturbations, and at search "
                     ">= gradient the exact greedy rank-one flip of each layer and input", networks=ANY)
def pattern_changes(ctx: Context) -> Observation:
    """Random perturbations (search >= random) and, at search >= gradient, for every layer l and input i the rank-one
    W~_l = W_l + r u x̂_{l-1,i}ᵀ (other layers unperturbed) that moves z_{l,i} by r ||x_{l-1,i}|| u with the unit u
    flipping the most signs (`search.greedy_flip_vector`; the exact supremum for one layer and one input). Its
    spectral and Frobenius norms are both r, so it lies in either ball. found_by: 0 random, 1 greedy."""
    ball = _choice(ctx, "ball", "spectral", ("spectral", "frobenius"))
    radius = ctx.p(str(ctx.arg("radius", "tau")))
    level = SEARCH_ORDER[ctx.search]
    X = ctx.inputs()
    net = network_for(ctx, X)
    Ws = [W.detach() for W in net.weights]
    with torch.no_grad():
        fwd0 = _forward(ctx, net, X)
        signs = [z > 0 for z in fwd0.preacts]

        def count(Wt: list[torch.Tensor]) -> torch.Tensor:
            zs = net.forward(X, Wt).preacts
            return torch.stack([((z > 0) != s).sum(-1).amax(-1) for z, s in zip(zs, signs)], -1).amax(-1).to(X.dtype)

        best = torch.zeros(X.shape[0], dtype=X.dtype, device=X.device)
        found = torch.zeros_like(best)
        scale_to = BALLS[ball][0]
        for _ in range(int(ctx.arg("draws", 2)) if level >= 1 else 0):
            Ds = [scale_to(torch.randn(W.shape, generator=ctx.generator, dtype=W.dtype).to(W.device), radius)
                  for W in Ws]
            best = torch.maximum(best, count([W + D for W, D in zip(Ws, Ds)]))
        for l in range(len(Ws)) if level >= 2 else ():
            for i in range(X.shape[1]):
                x = fwd0.outputs[l][:, i]  # (R, a): what W_{l+1} reads at input i
                nrm = x.norm(dim=-1)
                u = greedy_flip_vector(fwd0.preacts[l][:, i], nrm, radius)  # (R, m_l), ||u|| <= 1
                xhat = x / nrm.clamp_min(1e-300).unsqueeze(-1)
                if net.layout == "in-out":
                    D = xhat.unsqueeze(-1) * u.unsqueeze(-2)
                else:
                    D = u.unsqueeze(-1) * xhat.unsqueeze(-2)
                Wt = list(Ws)
                Wt[l] = Ws[l] + radius * D
                c = count(Wt)
                found = torch.where(c > best, torch.ones_like(found), found)
                best = torch.maximum(best, c)
    method = "random" + (" + greedy rank-one flips" if level >= 2 else "") if level >= 1 else "none (unperturbed)"
    return Observation(best, extras={"found_by": found}, method=f"search={ctx.search}: {method} ({ball} ball)")


# ------------------------------------------------------------------------------------------ training


def gd_trajectory(net: Network, X: torch.Tensor, y: torch.Tensor, loss: str, eta: float | torch.Tensor, steps: int,
                  norm: str = "frobenius", on_step: Callable[[int, list[torch.Tensor]], None] | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-batch gradient descent W ← W − η ∇L(W) on the trained weights for `steps` steps from the network's
    own, η a number or one per replicate (R,); returns (losses (R, steps + 1), max over k, l of ||W_l(k) − W_l(0)||
    in `norm`)."""
    if isinstance(eta, torch.Tensor):
        eta = eta.reshape(-1, 1, 1)
    W0 = [W.detach() for W in net.weights]
    Ws = list(W0)
    losses = []
    disp = torch.zeros(W0[0].shape[0], dtype=W0[0].dtype, device=W0[0].device)
    for k in range(steps + 1):
        value, factors, _ = loss_gradient_factors(net, X, y, loss, Ws)
        losses.append(value)
        if k == steps:
            break
        Ws = [W - eta * G for W, G in zip(Ws, dense_gradients(factors))]
        moves = [W - V for W, V in zip(Ws, W0)]
        if norm == "frobenius":
            d = torch.stack([M.flatten(1).norm(dim=-1) for M in moves], -1).amax(-1)
        else:
            d = torch.stack([spectral_norm(M)[0] for M in moves], -1).amax(-1)
        disp = torch.maximum(disp, d)
        if on_step is not None:
            on_step(k + 1, Ws)
    return torch.stack(losses, -1), disp


@QUANTITIES.register("generic-gd-trajectory", "full-batch GD from initialisation for K steps (parameter K) at step "
                     "size eta (parameter eta): args.output 'loss-ratio' = L(W_K)/L(W_0) or 'displacement' = max "
                     "over k, l of ||W_l(k) - W_l(0)|| (args.norm 'frobenius' or 'spectral'); args.loss as "
                     "generic-loss-gradient-norm", networks=ANY)
def gd_trajectory_quantity(ctx: Context) -> Observation:
    loss = _choice(ctx, "loss", "square", ("square", "logistic"))
    output = _choice(ctx, "output", "loss-ratio", ("loss-ratio", "displacement"))
    norm = _choice(ctx, "norm", "frobenius", ("frobenius", "spectral"))
    steps = ctx.i("K")
    if steps < 1:
        raise EstimatorError(f"{ctx.claim_id}: K = {steps}: GD needs at least one step")
    X = ctx.inputs()
    net = network_for(ctx, X)
    y = ctx.labels(X.shape[1], X)
    with torch.no_grad():
        _forward(ctx, net, X)
        losses, disp = gd_trajectory(net, X, y, loss, ctx.p("eta"), steps, norm)
    if output == "loss-ratio":
        return Observation(losses[:, -1] / losses[:, 0], method="closed-form gradients, full batch")
    return Observation(disp, method=f"closed-form gradients, full batch ({norm})")

