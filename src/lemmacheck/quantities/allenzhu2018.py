"""Quantities of the allenzhu2018 setting (Elman ReLU RNN, W and A ~ N(0, 2/m), B ~ N(0, 1/d), only W trained).

Parameter names follow the paper: m (width), L (sequence length = number of RNN layers), n (sequences), dx (token
dimension d_x), d (output dimension, default 1), delta (Assumption 2.1 separation of the first tokens), tau0 (the
perturbation radius in the paper's units: ||W'||_2 ≤ tau0/√m). Claims draw inputs with
`inputs = { kind = "rnn-sequences", n = "n", L = "L", dx = "dx", separation = "delta", tail = "random" }`.
Labels y* (where a quantity needs them, args.labels) are iid N(0, 1) by default (catalogue S10).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..context import Context, Observation
from ..errors import EstimatorError
from ..expressions import parse
from ..linalg import top_s_norm
from ..nets import allenzhu2018 as net
from ..registry import QUANTITIES
from ..search import SEARCH_ORDER, greedy_flip_vector, maximise, random_perturbation

NET = (net.NAME,)


def _inputs(ctx: Context) -> torch.Tensor:
    X = ctx.inputs()
    L, dx = ctx.i("L"), ctx.i("dx")
    if X.dim() != 4 or X.shape[2] != L or X.shape[3] != dx:
        raise EstimatorError(f"inputs of shape {tuple(X.shape)}: expected (R, n, L={L}, dx={dx}); use the "
                             "rnn-sequences generator with L = \"L\" and dx = \"dx\"")
    return X


def _setup(ctx: Context) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    X = _inputs(ctx)
    W, A, B = net.init(ctx.generator, ctx.replicates, ctx.i("m"), X.shape[-1], ctx.i("d", 1), ctx.dtype)
    return W, A, B, X


def _forward_at_init(ctx: Context) -> tuple[net.Forward, str]:
    """Forward pass at random init: the exact-in-law lazy sampler (no W materialised) unless args.sampler = 'full'."""
    if ctx.arg("sampler", "conditional") == "full":
        W, A, B, X = _setup(ctx)
        return net.forward(W, A, B, X), "full forward pass"
    X = _inputs(ctx)
    return net.lazy_forward(ctx.generator, X, ctx.i("m"), ctx.i("d", 1)), "lazy Gaussian sampler (exact in law)"


def _expr_arg(ctx: Context, name: str, default: Any) -> float:
    """An estimator option that may be a number or an expression over the claim's parameters."""
    v = ctx.arg(name, default)
    if isinstance(v, str):
        return float(parse(v, set(ctx.params)).evaluate(ctx.params))
    return float(v)


def _radius(ctx: Context) -> float:
    return ctx.p("tau0") / math.sqrt(ctx.i("m"))


def _perturbed(ctx: Context) -> bool:
    # tau0 = 0 is the unperturbed W~ (a point of every ball): no search needed there.
    return "tau0" in ctx.params and ctx.p("tau0") > 0 and SEARCH_ORDER[ctx.search] > 0


# ---------------------------------------------------------------- forward at initialisation

_NORM_STATS = ("joint", "h-upper", "h-lower", "g-upper", "step-upper", "step-lower")


@QUANTITIES.register("rnn-forward-norm-ratio", "Lemma B.3 / Claims B.4-B.5 as a ratio to the layer-dependent bound, "
                     "over i and l: args.which 'h-upper' max ||h_{l+1}||/(2l+4), 'g-upper' max ||g_{l+1}||/(4l+8), "
                     "'h-lower' min ||h_{l+1}||/(1-1/(4L))^l, 'joint' min of the three slacks, 'step-upper', "
                     "'step-lower'; exact lazy Gaussian sampler unless args.sampler = 'full'", networks=NET)
def forward_norm_ratio(ctx: Context) -> Observation:
    fwd, method = _forward_at_init(ctx)
    L = fwd.L
    hn = fwd.h.norm(dim=-1)  # (R, n, L+1)
    gn = fwd.g.norm(dim=-1)
    ell = torch.arange(L, dtype=ctx.dtype)  # ℓ = 0..L-1 for h_{ℓ+1}
    h_up = (hn[:, :, 1:] / (2 * ell + 4)).amax(dim=(-1, -2))
    g_up = (gn[:, :, 1:] / (4 * ell + 8)).amax(dim=(-1, -2))
    h_lo = (hn[:, :, 1:] / (1 - 1 / (4 * L)) ** ell).amin(dim=(-1, -2))
    which = ctx.arg("which", "joint")
    if which == "joint":
        value = torch.minimum(h_lo, torch.minimum(1 / h_up, 1 / g_up))
    elif which == "h-upper":
        value = h_up
    elif which == "g-upper":
        value = g_up
    elif which == "h-lower":
        value = h_lo
    elif which == "step-upper":  # Claim B.4: ||h_{ℓ+1}|| ≤ (1 + 1/L)(||h_ℓ|| + 1), ℓ = 0..L-1
        value = (hn[:, :, 1:] / ((1 + 1 / L) * (hn[:, :, :-1] + 1))).amax(dim=(-1, -2))
    elif which == "step-lower":  # Claim B.5: ||h_{ℓ+1}|| ≥ (1 - 1/(4L)) ||h_ℓ||, ℓ = 1..L-1 (ℓ = 0 is trivial)
        if L < 2:
            raise EstimatorError("step-lower needs L >= 2")
        value = (hn[:, :, 2:] / ((1 - 1 / (4 * L)) * hn[:, :, 1:-1])).amin(dim=(-1, -2))
    else:
        raise EstimatorError(f"args.which = {which!r}: one of {_NORM_STATS}")
    return Observation(value, method=method)


@QUANTITIES.register("rnn-fresh-norm", "min over i and l in {0,...,L-1} of ||(I - U_l U_l^T) h_{i,l+1}||, U_l the "
                     "Gram-Schmidt basis of h_{.,1..l} (Lemma B.6), via Householder QR", networks=NET)
def fresh_norm(ctx: Context) -> Observation:
    fwd, method = _forward_at_init(ctx)
    F = net.fresh_norms(fwd)
    return Observation(F.amin(dim=(-1, -2)), extras={"worst_layer": F.amin(1).argmin(-1).to(ctx.dtype)},
                       method=method + "; householder-qr")


# ---------------------------------------------------------------- products of D W


def _all_segment_norms(W_lead: torch.Tensor, W_in: torch.Tensor, D: torch.Tensor, leading_w: bool) -> torch.Tensor:
    """max over i and L ≥ ℓ2 ≥ ℓ1 ≥ 1 of ||[W_lead] D_{ℓ2} W_in ⋯ D_{ℓ1} W_in||_2 (exact)."""
    L = D.shape[2] - 1
    best = torch.zeros(W_in.shape[0], dtype=W_in.dtype)
    for l1 in range(1, L + 1):
        P = D[:, :, l1].unsqueeze(-1) * W_in.unsqueeze(1)
        for l2 in range(l1, L + 1):
            if l2 > l1:
                P = D[:, :, l2].unsqueeze(-1) * net.left_mul(W_in, P)
            M = net.left_mul(W_lead, P) if leading_w else P
            best = torch.maximum(best, torch.linalg.matrix_norm(M, ord=2).amax(-1))
    return best


@QUANTITIES.register("rnn-segment-spectral-norm", "max over i and L >= l2 >= l1 >= 1 of ||D_{i,l2} W ... D_{i,l1} "
                     "W||_2, exact SVD (Lemma B.11; args.leading_w: the (4.4) form W D...DW); with tau0 and a search: "
                     "args.variant 'patterns' (perturbed D, W~) or 'all' (perturbed D and W), Lemma C.7",
                     networks=NET)
def segment_spectral_norm(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    lead = bool(ctx.arg("leading_w", False))
    variant = ctx.arg("variant", "all")
    if variant not in ("all", "patterns"):
        raise EstimatorError(f"args.variant = {variant!r}: one of all, patterns")

    def target(Ws: list[torch.Tensor]) -> torch.Tensor:
        Wt = Ws[0]
        D = net.forward(Wt, A, B, X).mask()
        return _all_segment_norms(W if variant == "patterns" else Wt, W if variant == "patterns" else Wt, D, lead)

    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(target([W]), method="exact-svd at initialisation")
    # With W~ kept, the target depends on W' only through the (piecewise constant) patterns: no gradient.
    search = "random" if variant == "patterns" else ctx.search
    value, found = maximise(target, [W], _radius(ctx), search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(value, extras={"found_by": found}, method=f"exact-svd; search={search}")


@QUANTITIES.register("rnn-backward-sparse-sup", "max over i, L >= l2 >= l1 >= 1 of sup over unit k-sparse y (k = "
                     "args.k, an expression) of |a^T B D_{l2} W ... D_{l1} W y|, exact: a the sup over unit a "
                     "(args.a='sup'; k = 1 or d = 1) or a fixed random unit a ('random') (Lemma B.17, Cor. "
                     "B.18-B.19)", networks=NET)
def backward_sparse_sup(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    fwd = net.forward(W, A, B, X)
    D = fwd.mask()
    L, d = fwd.L, B.shape[-2]
    k = max(1, round(_expr_arg(ctx, "k", 1)))
    mode = ctx.arg("a", "sup")
    if mode == "random":
        a = ctx.randn(ctx.replicates, d)
        a = a / a.norm(dim=-1, keepdim=True)
    elif mode != "sup":
        raise EstimatorError(f"args.a = {mode!r}: one of sup, random")
    elif k > 1 and d > 1:
        raise EstimatorError("sup over a with k > 1 and d > 1 has no exact form here: use args.a = 'random' or d = 1")
    best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
    for l2 in range(1, L + 1):
        M = B.unsqueeze(1).expand(-1, X.shape[1], -1, -1)
        for l1 in range(l2, 0, -1):
            M = net.right_mul(M * D[:, :, l1].unsqueeze(-2), W)  # B D_{ℓ2} W ⋯ D_{ℓ1} W, (R, n, d, m)
            if mode == "random":
                v = top_s_norm((a[:, None, :, None] * M).sum(-2), k)
            elif k == 1:
                v = M.norm(dim=-2).amax(-1)  # max column norm: sup over unit a and 1-sparse y
            else:
                v = top_s_norm(M[:, :, 0], k)  # d = 1: a = ±1
            best = torch.maximum(best, v.amax(-1))
    return Observation(best, method=f"exact top-{k} norm ({mode} a)")


@QUANTITIES.register("rnn-sparse-bilinear-sup", "max over i, L > l2 >= l1 >= 1 of sup over unit k-sparse y, z of "
                     "|z^T W D_{l2} W ... D_{l1} W y| (Lemma B.14, Cor. B.15-B.16): exact max entry for k = 1, a "
                     "truncated-power lower estimate for k > 1 (args.k, an expression)", networks=NET)
def sparse_bilinear_sup(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    D = net.forward(W, A, B, X).mask()
    L = D.shape[2] - 1
    k = max(1, round(_expr_arg(ctx, "k", 1)))
    iters = int(ctx.arg("iterations", 30))
    best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
    for l1 in range(1, L):
        P = D[:, :, l1].unsqueeze(-1) * W.unsqueeze(1)
        for l2 in range(l1, L):
            if l2 > l1:
                P = D[:, :, l2].unsqueeze(-1) * net.left_mul(W, P)
            M = net.left_mul(W, P)  # W ∏ D W, (R, n, m, m)
            best = torch.maximum(best, _sparse_sup(M, k, iters).amax(-1))
    method = "exact max entry" if k == 1 else f"truncated power method, k={k} (lower estimate of the sup)"
    return Observation(best, method=method)


def _topk_unit(v: torch.Tensor, k: int) -> torch.Tensor:
    idx = v.abs().topk(k, dim=-1).indices
    out = torch.zeros_like(v).scatter(-1, idx, v.gather(-1, idx))
    return out / out.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def _sparse_sup(M: torch.Tensor, k: int, iters: int) -> torch.Tensor:
    """sup over unit k-sparse z, y of |zᵀ M y|: exact for k = 1; else truncated power iterations started at the
    column holding the largest entry (a lower estimate, never above the true sup)."""
    flat = M.abs().flatten(-2)
    if k == 1:
        return flat.amax(-1)
    k = min(k, M.shape[-1])
    col = flat.argmax(-1) % M.shape[-1]
    y = torch.zeros(M.shape[:-1], dtype=M.dtype).scatter(-1, col.unsqueeze(-1), 1.0)
    for _ in range(iters):
        z = _topk_unit((M @ y.unsqueeze(-1)).squeeze(-1), k)
        y = _topk_unit((z.unsqueeze(-2) @ M).squeeze(-2), k)
    val = (z.unsqueeze(-2) @ M @ y.unsqueeze(-1)).squeeze(-1).squeeze(-1).abs()
    return torch.maximum(val, flat.amax(-1))


# ---------------------------------------------------------------- perturbations


def _change(which: str, f0: net.Forward, f: net.Forward) -> torch.Tensor:
    if which == "h":
        v = (f.h - f0.h).norm(dim=-1)
    elif which == "g":
        v = (f.g - f0.g).norm(dim=-1)
    elif which == "dg":  # ||D'_{i,ℓ} g_{i,ℓ}||, D' = D − D~, g at the perturbed W (Lemma C.2 (c))
        v = ((f.mask() - f0.mask()) * f.g).norm(dim=-1)
    elif which == "count":  # ||D'_{i,ℓ}||_0 (Lemma C.2 (b))
        v = ((f.g >= 0) != (f0.g >= 0)).sum(-1).to(f.g.dtype)
    else:
        raise EstimatorError(f"args.which = {which!r}: one of h, g, dg, count")
    return v[:, :, 1:].amax(dim=(-1, -2))


@QUANTITIES.register("rnn-forward-perturbation", "sup over ||W'||_2 <= tau0/sqrt(m) of max_{i,l} ||h_{i,l}(W~+W') - "
                     "h_{i,l}(W~)|| (args.which 'g': pre-activations, 'dg': ||D'_{i,l} g_{i,l}||), a lower estimate "
                     "by the claim's search (Lemma C.2 (a), (c))", networks=NET)
def forward_perturbation(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
    which = ctx.arg("which", "h")
    if which not in ("h", "g", "dg"):
        raise EstimatorError(f"args.which = {which!r}: one of h, g, dg (flip counts: rnn-pattern-changes)")
    value, found = maximise(lambda Ws: _change(which, f0, net.forward(Ws[0], A, B, X)), [W], _radius(ctx),
                            ctx.search, ctx.generator, steps=int(ctx.arg("steps", 20)))
    return Observation(value, extras={"found_by": found}, method=f"search={ctx.search}")


@QUANTITIES.register("rnn-pattern-changes", "sup over ||W'||_2 <= tau0/sqrt(m) of max_{i,l} ||D'_{i,l}||_0, by "
                     "random perturbations and, at search >= adversarial, the exact layer-2 flip adversary W' = u "
                     "h_{i,1}^T/||h_{i,1}|| for each i (Lemma C.2 (b), catalogue P4)", networks=NET)
def pattern_changes(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    tau = _radius(ctx)
    level = SEARCH_ORDER[ctx.search]
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
        found = torch.zeros_like(best)
        if level >= 1:
            for _ in range(int(ctx.arg("random_draws", 4))):
                Wt = W + random_perturbation(ctx.generator, [W], tau)[0]
                best = torch.maximum(best, _change("count", f0, net.forward(Wt, A, B, X)))
        if level >= 3 and f0.L >= 2:
            for i in range(X.shape[1]):
                h1 = f0.h[:, i, 1]
                hn = h1.norm(dim=-1).clamp_min(1e-300)
                u = greedy_flip_vector(f0.g[:, i, 2], hn, tau)  # g'_{i,2} = tau u ||h_{i,1}|| exactly
                u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-300)  # ||W'|| = tau exactly, same layer-2 flips
                Wt = W + tau * u.unsqueeze(-1) * (h1 / hn.unsqueeze(-1)).unsqueeze(-2)
                val = _change("count", f0, net.forward(Wt, A, B, X))
                found = torch.where(val > best, torch.full_like(found, 3), found)
                best = torch.maximum(best, val)
    return Observation(best, extras={"found_by": found}, method=f"search={ctx.search}"
                       + (" + layer-2 flip adversary" if level >= 3 else ""))


# ---------------------------------------------------------------- gradients


def _labels(ctx: Context, n: int, L: int) -> torch.Tensor:
    return net.label_sequences(ctx.generator, ctx.replicates, n, L, ctx.i("d", 1), ctx.dtype,
                               ctx.arg("labels", "gaussian"))


@QUANTITIES.register("rnn-gradient-pl-ratio", "||grad f(W)||_F^2 / f(W) (Theorem 3): args.labels 'worst' gives the "
                     "exact inf over labels 2 lambda_min(K) (args.side='sup': sup = 2 lambda_max(K)), other label "
                     "kinds the realised ratio (side 'sup-per-sample': max_i ||grad f_i||^2; args.normalise "
                     "'max-loss' divides by max ||loss_{i,l}||^2); at init or, with tau0, over the ball",
                     networks=NET)
def gradient_pl_ratio(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    n, L = X.shape[1], X.shape[2]
    if L < 2:
        raise EstimatorError("the objective needs L >= 2 (positions 2..L)")
    kind = ctx.arg("labels", "worst")
    side = ctx.arg("side", "inf")
    norm = ctx.arg("normalise", "f")
    if side not in ("inf", "sup", "sup-per-sample"):
        raise EstimatorError(f"args.side = {side!r}: one of inf, sup, sup-per-sample")
    if kind == "worst":
        if side == "sup-per-sample" or norm != "f":
            raise EstimatorError("labels = 'worst' is exact only for side inf/sup with normalise = 'f'")

        def target(Ws: list[torch.Tensor]) -> torch.Tensor:
            ev = torch.linalg.eigvalsh(net.ntk_gram(Ws[0], B, net.forward(Ws[0], A, B, X)))
            return 2 * (ev[..., 0] if side == "inf" else ev[..., -1])
        method = "exact: 2 lambda(K), K = J J^T"
    else:
        Y = _labels(ctx, n, L)

        def target(Ws: list[torch.Tensor]) -> torch.Tensor:
            fwd = net.forward(Ws[0], A, B, X)
            lv = net.losses(fwd, Y)
            if side == "sup-per-sample":
                g2 = (net.per_sample_gradients(Ws[0], B, fwd, lv) ** 2).sum(dim=(-1, -2)).amax(-1)
            else:
                g2 = (net.gradient_from_losses(Ws[0], B, fwd, lv) ** 2).sum(dim=(-1, -2))
            if norm == "f":
                den = 0.5 * (lv ** 2).sum(dim=(-1, -2, -3))
            elif norm == "max-loss":
                den = (lv ** 2).sum(-1).flatten(1).amax(-1)
            else:
                raise EstimatorError(f"args.normalise = {norm!r}: one of f, max-loss")
            return g2 / den
        method = f"closed-form gradient, {kind} labels"
    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(target([W]), method=method + " at initialisation")
    sign = -1.0 if side == "inf" else 1.0
    val, found = maximise(lambda Ws: sign * target(Ws), [W], _radius(ctx), ctx.search, ctx.generator,
                          steps=int(ctx.arg("steps", 10)))
    return Observation(sign * val, extras={"found_by": found}, method=f"{method}; search={ctx.search}")


@QUANTITIES.register("rnn-fake-gradient-norm", "||fake grad f(W)||_F^2 / max_{i,l} ||loss_{i,l}||^2 at random init for "
                     "loss vectors fixed before W, A, B (Theorem 5): args.losses 'gaussian' (iid N(0,1)), 'single' "
                     "(one unit loss at i = 1, l = L), 'antipodal' (loss_{1,l} = -loss_{2,l}, others 0)",
                     networks=NET)
def fake_gradient_norm(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, n, L = X.shape[:3]
    d = B.shape[-2]
    kind = ctx.arg("losses", "gaussian")
    lv = torch.zeros(R, n, L + 1, d, dtype=ctx.dtype)
    if kind == "gaussian":
        lv[:, :, 2:] = ctx.randn(R, n, L - 1, d)
    elif kind == "single":
        v = ctx.randn(R, d)
        lv[:, 0, L] = v / v.norm(dim=-1, keepdim=True)
    elif kind == "antipodal":
        if n < 2:
            raise EstimatorError("antipodal losses need n >= 2")
        v = ctx.randn(R, L - 1, d)
        lv[:, 0, 2:] = v
        lv[:, 1, 2:] = -v
    else:
        raise EstimatorError(f"args.losses = {kind!r}: one of gaussian, single, antipodal")
    fwd = net.forward(W, A, B, X)
    g2 = (net.gradient_from_losses(W, B, fwd, lv) ** 2).sum(dim=(-1, -2))
    return Observation(g2 / (lv ** 2).sum(-1).flatten(1).amax(-1), method="closed form (adjoint recursion)")
