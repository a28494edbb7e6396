"""Quantities of the zou2018 setting (deep ReLU FNN, fan-out He init, fixed ±1 output).

Parameter names follow the paper: m (min hidden width), L (depth), n, d, phi (separation), tau
(perturbation radius), s (sparsity); `alternate = 1` uses widths m, 2m, m, … (A3.7's extreme, M = 2m).
"""

from __future__ import annotations

import torch

from ..context import Context, Observation
from ..linalg import spectral_norm, top_s_norm
from ..nets import zou2018 as net
from ..registry import QUANTITIES
from ..search import maximise

NET = (net.NAME,)


def _dims(ctx: Context) -> list[int]:
    return net.widths(ctx.i("d"), ctx.i("m"), ctx.i("L"), bool(ctx.i("alternate", 0)))


def _init(ctx: Context) -> tuple[list[torch.Tensor], torch.Tensor]:
    X = ctx.inputs()
    return net.init(ctx.generator, ctx.replicates, _dims(ctx), ctx.dtype), X


def _theorem_5_1_i(Ws: list[torch.Tensor], fwd: net.Forward) -> torch.Tensor:
    """Per replicate: did Theorem 5.1(i) hold at this initialisation (all ||x_{l,i}|| <= 3/2, ||W_l|| <= 7/2)?"""
    xn = torch.stack([x.norm(dim=-1).amax(-1) for x in fwd.x[1:]], -1).amax(-1)
    wn = torch.stack([spectral_norm(W)[0] for W in Ws], -1).amax(-1)
    return (xn <= 1.5) & (wn <= 3.5)


@QUANTITIES.register("max-layer-output-norm", "max over l in [L], i in [n] of ||x_{l,i}||_2 at Gaussian "
                     "initialisation (exact Gaussian-conditioning sampler unless args.sampler = 'full')",
                     networks=NET)
def max_layer_output_norm(ctx: Context) -> Observation:
    X = ctx.inputs()
    dims = _dims(ctx)
    if ctx.arg("sampler", "conditional") == "full":
        Ws = net.init(ctx.generator, ctx.replicates, dims, ctx.dtype)
        norms = [x.norm(dim=-1) for x in net.forward(Ws, X).x]
        method = "full forward pass"
    else:
        norms = net.conditional_layer_norms(ctx.generator, X, dims)
        method = "Gaussian-conditioning sampler (exact in distribution)"
    value = torch.stack([nm.amax(-1) for nm in norms[1:]], -1).amax(-1)
    return Observation(value, method=method)


@QUANTITIES.register("max-weight-spectral-norm", "max over l in [L] of ||W_l||_2 at Gaussian initialisation "
                     "(exact SVD up to 2048, cross-checked Lanczos above)", networks=NET)
def max_weight_spectral_norm(ctx: Context) -> Observation:
    Ws = net.init(ctx.generator, ctx.replicates, _dims(ctx), ctx.dtype)
    norms, methods = zip(*(spectral_norm(W) for W in Ws))
    return Observation(torch.stack(norms, -1).amax(-1), method=",".join(sorted(set(methods))))


@QUANTITIES.register("forward-perturbation", "sup over ||W~_l - W_l||_2 <= tau of max_{l,i} ||x~_{l,i} - x_{l,i}||"
                     " (lower estimate by the claim's search), conditional on Theorem 5.1(i) at W",
                     networks=NET)
def forward_perturbation(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    valid = _theorem_5_1_i(Ws, fwd)
    base = [x.detach() for x in fwd.x[1:]]

    def target(Wt: list[torch.Tensor]) -> torch.Tensor:
        xt = net.forward(Wt, X).x[1:]
        return torch.stack([(a - b).norm(dim=-1).amax(-1) for a, b in zip(xt, base)], -1).amax(-1)

    value, found = maximise(target, Ws, ctx.p("tau"), ctx.search, ctx.generator,
                            steps=int(ctx.arg("steps", 20)))
    return Observation(value, valid=valid, extras={"found_by": found}, method=f"search={ctx.search}")


@QUANTITIES.register("sparse-backward-sup", "max over l, i of sup_{unit s-sparse a} v^T (prod_{r=l}^L "
                     "Sigma_{r,i} W_r^T) a, computed exactly as the top-s norm of u_{l,i} = dŷ_i/dx_{l-1,i}",
                     networks=NET)
def sparse_backward_sup(ctx: Context) -> Observation:
    Ws, X = _init(ctx)
    fwd = net.forward(Ws, X)
    us = net.input_gradients(Ws, net.backward_vectors(Ws, fwd))
    s = ctx.i("s")
    value = torch.stack([top_s_norm(u, s).amax(-1) for u in us], -1).amax(-1)
    return Observation(value, method="exact top-s norm")
