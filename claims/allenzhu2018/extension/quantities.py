"""Quantities of the allenzhu2018 setting (Elman ReLU RNN, W and A ~ N(0, 2/m), B ~ N(0, 1/d), only W trained).

Parameter names follow the paper: m (width), L (sequence length = number of RNN layers), n (sequences), dx (token
dimension d_x), d (output dimension, default 1), delta (Assumption 2.1 separation of the first tokens), tau0 (the
perturbation radius in the paper's units: ||W'||_2 ≤ tau0/√m). Claims draw inputs with
`inputs = { kind = "rnn-sequences", n = "n", L = "L", dx = "dx", separation = "delta", tail = "random" }`.
Labels y* (where a quantity needs them, args.labels) are iid N(0, 1) by default (catalogue S10).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
import torch

from lemmacheck.boundary import to_numpy
from lemmacheck.context import Context, Observation
from lemmacheck.errors import EstimatorError
from lemmacheck.expressions import parse
from lemmacheck.linalg import operator_norm, top_s_norm
from lemmacheck.registry import QUANTITIES
from lemmacheck.search import SEARCH_ORDER, greedy_flip_vector, maximise, random_perturbation

from . import network as net

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


def _given_vector(ctx: Context, size: int) -> torch.Tensor:
    """A vector a statement fixes before W, A, B ("for any a"), (R, size), from the claim's inputs.coefficients so that
    runs and hunts move it. The data-built family (null-vector) has no meaning for these vectors and is refused (an
    EstimatorError), rather than read off the input sequences."""
    return ctx.coefficients(size, torch.empty(ctx.replicates, 0, 0, dtype=ctx.dtype)).to(ctx.dtype)


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
    """max over i and L ≥ ℓ2 ≥ ℓ1 ≥ 1 of ||[W_lead] D_{ℓ2} W_in ⋯ D_{ℓ1} W_in||_2 (exact: linalg.operator_norm)."""
    if not leading_w:
        return _compact_segment_norms(W_in, D)
    L = D.shape[2] - 1
    best = torch.zeros(W_in.shape[0], dtype=W_in.dtype)
    shared = leading_w and W_lead is W_in  # then W_lead P_{l2} is the next segment's product before its mask
    for l1 in range(1, L + 1):
        P = D[:, :, l1].unsqueeze(-1) * W_in.unsqueeze(1)
        WP = None
        for l2 in range(l1, L + 1):
            if l2 > l1:
                P = D[:, :, l2].unsqueeze(-1) * (WP if WP is not None else net.left_mul(W_in, P))
            M = net.left_mul(W_lead, P) if leading_w else P
            WP = M if shared else None
            best = torch.maximum(best, operator_norm(M).amax(-1))
    return best


def _compact_segment_norms(W: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """max over i and L >= l2 >= l1 >= 1 of ||D_{l2} W ... D_{l1} W||_2, each product kept as its rows where D_{l2} = 1
    and built from the blocks W[S_l, S_{l-1}] (S_l the ones of D_l, padded with a zero row and column to the batch's
    largest count): the masked rows and columns hold exact zeros, which change no norm, and at about m/2 rows the
    products, the Grams and their eigensolver cost 3-4x less than at m (the same norms to rounding, ~1e-15)."""
    R, n, _, m = D.shape
    L = D.shape[2] - 1
    # per (replicate, sample, layer) the indices of D's ones, ascending, then m: the zero row / column of Wz
    idx = torch.where(D > 0, torch.arange(m), m).sort(-1).values
    counts = (D > 0).sum(-1).amax((0, 1)).tolist()
    S = [idx[:, :, l, :max(counts[l], 1)] for l in range(L + 1)]  # (R, n, k_l)
    Wz = torch.nn.functional.pad(W, (0, 1, 0, 1)).unsqueeze(1).expand(R, n, m + 1, m + 1)

    def rows(l: int) -> torch.Tensor:  # rows S_l of W (and its zero column), (R, n, k_l, m + 1)
        return Wz.gather(2, S[l].unsqueeze(-1).expand(-1, -1, -1, m + 1))

    blocks = [None, None] + [rows(l).gather(3, S[l - 1].unsqueeze(-2).expand(-1, -1, S[l].shape[-1], -1))
                             for l in range(2, L + 1)]  # W[S_l, S_{l-1}], (R, n, k_l, k_{l-1})
    best = torch.zeros(R, dtype=W.dtype)
    for l1 in range(1, L + 1):
        P = rows(l1)[..., :m]  # D_{l1} W, its nonzero rows
        for l2 in range(l1, L + 1):
            if l2 > l1:
                P = blocks[l2] @ P
            best = torch.maximum(best, operator_norm(P).amax(-1))
    return best


@QUANTITIES.register("rnn-segment-spectral-norm", "max over i and L >= l2 >= l1 >= 1 of ||D_{i,l2} W ... D_{i,l1} "
                     "W||_2, exact (linalg.operator_norm) (Lemma B.11; args.leading_w: the (4.4) form W D...DW); with tau0 and a search: "
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
            return Observation(target([W]), method="operator-norm (Gram top eigenvalue, rounded up) at initialisation")
    # With W~ kept, the target depends on W' only through the (piecewise constant) patterns: no gradient.
    search = "random" if variant == "patterns" else ctx.search
    value, found = maximise(target, [W], _radius(ctx), search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(value, extras={"found_by": found}, method=f"linalg.operator_norm; search={search}")


@QUANTITIES.register("rnn-backward-sparse-sup", "max over i, L >= l2 >= l1 >= 1 of sup over unit k-sparse y (k = "
                     "args.k, an expression) of |a^T B D_{l2} W ... D_{l1} W y|, exact: a the sup over unit a "
                     "(args.a='sup'; k = 1 or d = 1) or the given a, ctx.coefficients(d) normalised (args.a = 'fixed', "
                     "also read from 'random'; the claim's inputs.coefficients, Gaussian by default) (Lemma B.17, Cor. "
                     "B.18-B.19)", networks=NET)
def backward_sparse_sup(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    fwd = net.forward(W, A, B, X)
    D = fwd.mask()
    L, d = fwd.L, B.shape[-2]
    k = max(1, round(_expr_arg(ctx, "k", 1)))
    mode = ctx.arg("a", "sup")
    mode = "fixed" if mode == "random" else mode
    if mode == "fixed":  # "for any a in R^d", fixed before W, A, B: through the context, so runs and hunts move it
        a = _given_vector(ctx, d)
        an = a.norm(dim=-1, keepdim=True)
        if not bool((an > 0).all()):
            raise EstimatorError("Lemma B.17 with a = 0 is trivial: the coefficient vector a is zero")
        a = a / an
    elif mode != "sup":
        raise EstimatorError(f"args.a = {mode!r}: one of sup, fixed")
    elif k > 1 and d > 1:
        raise EstimatorError("sup over a with k > 1 and d > 1 has no exact form here: use args.a = 'random' or d = 1")
    best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
    R, n, m = W.shape[0], X.shape[1], W.shape[-1]
    # Every segment B D_{ℓ2} W ⋯ D_{ℓ1} W, (R, n, d, m): the chains of all ℓ2 >= ℓ1 advance together, one product
    # with W per ℓ1 (L passes over the m x m matrices instead of L(L+1)/2)
    chains = torch.empty(R, n, 0, d, m, dtype=W.dtype)
    for l1 in range(L, 0, -1):
        chains = torch.cat([chains, B.unsqueeze(1).unsqueeze(2).expand(-1, n, 1, -1, -1)], 2)  # ℓ2 = ℓ1 starts
        c = chains.shape[2]
        masked = (chains * D[:, :, l1, None, None, :]).reshape(R, n, c * d, m)
        chains = net.right_mul(masked, W).reshape(R, n, c, d, m)
        for M in chains.unbind(2):
            if mode == "fixed":
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
            M = net.left_mul(W, P)  # W ∏ D W, (R, n, m, m)
            best = torch.maximum(best, _sparse_sup(M, k, iters).amax(-1))
            if l2 + 1 < L:
                P = D[:, :, l2 + 1].unsqueeze(-1) * M  # the next segment reuses W P: one product per segment
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


def _change(which: str, f0: net.Forward, f: net.Forward, per_sample: bool = False) -> torch.Tensor:
    """max over layers l >= 1 (and sequences i, unless per_sample: then (R, n)) of the change `which`."""
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
    v = v[:, :, 1:].amax(dim=-1)
    return v if per_sample else v.amax(dim=-1)


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
    if f0.L == 1:  # W multiplies h_0 = 0 alone: no W' moves h_1 or g_1, the sup is 0 (what the search finds, at its cost)
        zero = torch.zeros(ctx.replicates, dtype=ctx.dtype)
        return Observation(zero, extras={"found_by": torch.zeros_like(zero)}, method=f"search={ctx.search}")
    value, found = maximise(lambda Ws: _change(which, f0, net.forward(Ws[0], A, B, X)), [W], _radius(ctx),
                            ctx.search, ctx.generator, steps=int(ctx.arg("steps", 20)))
    return Observation(value, extras={"found_by": found}, method=f"search={ctx.search}")


def _samples_arg(ctx: Context) -> int | None:
    """args.samples: 'all' (default: the worst case over i in [n]) or 'one' (sequence 1 alone, the adversary aimed at
    it: the per-sample statement the proofs prove "for a fixed i" before their union bound over [n]). Returns the
    number of sequences the value and the adversary range over (None: all)."""
    s = ctx.arg("samples", "all")
    if s not in ("all", "one"):
        raise EstimatorError(f"args.samples = {s!r}: one of all, one")
    return 1 if s == "one" else None


@QUANTITIES.register("rnn-pattern-changes", "sup over ||W'||_2 <= tau0/sqrt(m) of max_{i,l} ||D'_{i,l}||_0, by "
                     "random perturbations and, at search >= adversarial, the exact layer-2 flip adversary W' = u "
                     "h_{i,1}^T/||h_{i,1}|| for each i (Lemma C.2 (b), catalogue P4); args.samples 'one': sequence 1's count, "
                     "the adversary aimed at it alone (extras worst_over_i: the max over every i)", networks=NET)
def pattern_changes(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    tau = _radius(ctx)
    level = SEARCH_ORDER[ctx.search]
    k = _samples_arg(ctx)
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
        worst_all = torch.zeros_like(best)  # the worst case over every i under the same candidates (literal "for all i")
        found = torch.zeros_like(best)

        def counts(Wt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            c = _change("count", f0, net.forward(Wt, A, B, X), per_sample=True)  # (R, n): max over l
            return c[:, :k].amax(-1), c.amax(-1)

        if level >= 1:
            for _ in range(int(ctx.arg("random_draws", 4))):
                val, va = counts(W + random_perturbation(ctx.generator, [W], tau)[0])
                best, worst_all = torch.maximum(best, val), torch.maximum(worst_all, va)
        if level >= 3 and f0.L >= 2:
            for i in range(X.shape[1] if k is None else k):
                h1 = f0.h[:, i, 1]
                hn = h1.norm(dim=-1).clamp_min(1e-300)
                u = greedy_flip_vector(f0.g[:, i, 2], hn, tau)  # g'_{i,2} = tau u ||h_{i,1}|| exactly
                u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-300)  # ||W'|| = tau exactly, same layer-2 flips
                # W' = tau u h^T is zero outside the rows where u is not: only those rows, padded to the batch's
                # largest count with rows of u = 0, are perturbed (_rows_added)
                idx = u.abs().topk(int((u != 0).sum(-1).amax()), dim=-1).indices
                with _rows_added(W, idx, (tau * u.gather(-1, idx)).unsqueeze(-1)
                                 * (h1 / hn.unsqueeze(-1)).unsqueeze(-2)):
                    val, va = counts(W)
                found = torch.where(val > best, torch.full_like(found, 3), found)
                best, worst_all = torch.maximum(best, val), torch.maximum(worst_all, va)
    return Observation(best, extras={"found_by": found, "worst_over_i": worst_all}, method=f"search={ctx.search}"
                       + (" + layer-2 flip adversary" if level >= 3 else "") + ("; sequence 1" if k == 1 else ""))


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
                     "loss vectors fixed before W, A, B (Theorem 5): args.losses 'fixed' (ctx.coefficients over the "
                     "n (L-1) d entries: iid N(0,1) unless inputs.coefficients says otherwise; 'gaussian' reads the "
                     "same), 'single' "
                     "(one unit loss at i = 1, l = L), 'antipodal' (loss_{1,l} = -loss_{2,l}, others 0)",
                     networks=NET)
def fake_gradient_norm(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, n, L = X.shape[:3]
    d = B.shape[-2]
    kind = ctx.arg("losses", "fixed")
    lv = torch.zeros(R, n, L + 1, d, dtype=ctx.dtype)
    if kind in ("fixed", "gaussian"):
        # the n (L-1) d loss entries (i-major, then l, then the coordinate) as one vector fixed before W, A, B:
        # ctx.coefficients, Gaussian unless the claim declares inputs.coefficients (ones, parity, first, a list)
        lv[:, :, 2:] = _given_vector(ctx, n * (L - 1) * d).reshape(R, n, L - 1, d)
        if not bool(((lv ** 2).sum(-1).flatten(1).amax(-1) > 0).all()):
            raise EstimatorError("every loss vector is zero: the statement divides by max ||loss_{i,l}||")
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
        raise EstimatorError(f"args.losses = {kind!r}: one of fixed (also read from gaussian), single, antipodal")
    stat = ctx.arg("statistic", "fro")
    if stat not in ("fro", "per-sample", "row"):
        raise EstimatorError(f"args.statistic = {stat!r}: one of fro, per-sample, row")
    mx = (lv ** 2).sum(-1).flatten(1).amax(-1)

    def target(Ws: list[torch.Tensor]) -> torch.Tensor:
        fwd = net.forward(Ws[0], A, B, X)
        if stat == "per-sample":  # Lemma E.2 (ii): max_i ||fake grad f_i||_F^2
            return (net.per_sample_gradients(Ws[0], B, fwd, lv) ** 2).sum(dim=(-1, -2)).amax(-1) / mx
        G = net.gradient_from_losses(Ws[0], B, fwd, lv)
        if stat == "row":  # Lemma E.2 (iii): max_k ||fake grad_k f||_2 (row k), not squared
            return G.norm(dim=-1).amax(-1) / mx.sqrt()
        return (G ** 2).sum(dim=(-1, -2)) / mx

    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(target([W]), method="closed form (adjoint recursion)")
    # Lemma F.1: the same losses at W~ + W', ||W'||_2 <= tau0/sqrt(m); args.side 'min' for the lower bound
    sign = -1.0 if ctx.arg("side", "max") == "min" else 1.0
    val, found = maximise(lambda Ws: sign * target(Ws), [W], _radius(ctx), ctx.search, ctx.generator,
                          steps=int(ctx.arg("steps", 8)))
    return Observation(sign * val, extras={"found_by": found}, method=f"closed form; search={ctx.search}")



# ---------------------------------------------------------------- Appendix A tools and Prop 6.1 (no network)
# Closed-form probabilities (scipy) or vector-level Monte Carlo: the laws involved are chi-square, binomial and
# Gaussian, so the exact probability is compared with the printed bound wherever it exists (catalogue §5).

SCALAR = ("scalar",)


def _unif(ctx: Context, lo: float, hi: float, log: bool = False) -> torch.Tensor:
    u = torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    if log:
        return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    return lo + u * (hi - lo)


def _edges(ctx: Context, x: torch.Tensor, edges: list[float]) -> torch.Tensor:
    """The first len(edges) replicates sit exactly at the stated range's boundary values (when R allows)."""
    x = x.clone()
    for j, e in enumerate(edges[: x.shape[0]]):
        x[j] = e
    return x


def _binom_chi2_cdf(n: int, x: np.ndarray) -> np.ndarray:
    """P[chi^2_K <= x] with K ~ Bin(n, 1/2) (K = 0: the point mass at 0), for every x (vector): the law of
    ||phi(g)||^2 / sigma^2, g ~ N(0, sigma^2 I_n) (Fact A.11)."""
    from scipy import stats
    k = np.arange(n + 1)
    w = stats.binom.pmf(k, n, 0.5)
    F = np.where(k[:, None] == 0, 1.0, stats.chi2.cdf(x[None, :], np.maximum(k, 1)[:, None]))
    return (w[:, None] * F).sum(0)


def _binom_chi2_sf(n: int, x: np.ndarray) -> np.ndarray:
    from scipy import stats
    k = np.arange(n + 1)
    w = stats.binom.pmf(k, n, 0.5)
    S = np.where(k[:, None] == 0, (x[None, :] < 0).astype(float), stats.chi2.sf(x[None, :], np.maximum(k, 1)[:, None]))
    return (w[:, None] * S).sum(0)


def _good_failure(m: int, p: float, q: int) -> float:
    """P[not (N+ >= q and N- >= q)] for (N+, N-, N0) ~ Multinomial(m; p, p, 1 - 2p), exactly."""
    from scipy import stats
    a = np.arange(m + 1)
    pa = stats.binom.pmf(a, m, p)
    # given N+ = a, N- ~ Bin(m - a, p / (1 - p))
    both = (pa * np.where(a >= q, stats.binom.sf(q - 1, m - a, p / (1 - p)), 0.0)).sum()
    return float(max(0.0, 1.0 - both)) if both < 0.5 else float(
        stats.binom.cdf(q - 1, m, p) * 2 - (pa * np.where(a < q, stats.binom.cdf(q - 1, m - a, p / (1 - p)), 0.0)).sum())


_TAILS = ("A.3-upper", "A.3-lower", "A.4", "A.5-mean", "A.6", "A.7", "A.8", "A.12-one", "A.12-two", "A.13",
          "A.15", "A.18-printed-upper", "A.18-printed-lower", "A.18-textbook")


@QUANTITIES.register("az-tail-bound-ratio", "exact probability / printed bound for the Appendix A tail facts of "
                     "Allen-Zhu et al. (args.which: " + ", ".join(_TAILS) + "); the continuous parameter (t, b, eps, "
                     "alpha, t/sigma) is drawn per replicate over its stated range, boundaries included; <= 1 "
                     "means the printed inequality holds (>= 1 for the A.18 printed lower-bound forms)",
                     networks=SCALAR)
def tail_bound_ratio(ctx: Context) -> Observation:
    from scipy import stats
    which = ctx.arg("which")
    R = ctx.replicates
    out = np.empty(R)
    extras: dict[str, torch.Tensor] = {}
    if which in ("A.3-upper", "A.3-lower"):  # chi^2_k with sigma = 1 (the law is scale-free); k from params
        k = ctx.i("k")
        t = to_numpy(_edges(ctx, _unif(ctx, 1e-3, 1e3, log=True), [1e-3, 1e3]))
        if which == "A.3-upper":
            lp = stats.chi2.logsf(k + 2 * np.sqrt(k * t) + 2 * t, k)
        else:
            x = k - 2 * np.sqrt(k * t)
            lp = np.where(x > 0, stats.chi2.logcdf(np.maximum(x, 1e-300), k), -np.inf)
        out = np.exp(lp + t)  # P / e^{-t}
        extras["t"] = torch.from_numpy(t)
    elif which == "A.4":  # |chi^2_n - n| >= n/b, b >= 1
        n = ctx.i("n")
        b = to_numpy(_edges(ctx, _unif(ctx, 1.0, 100.0, log=True), [1.0, 100.0]))
        lp = np.logaddexp(stats.chi2.logcdf(n - n / b, n), stats.chi2.logsf(n + n / b, n))
        out = np.exp(lp + n / (8 * b ** 2)) / 2  # in log space: both sides underflow at large n
        extras["b"] = torch.from_numpy(b)
    elif which == "A.5-mean":  # E[max(x^2 - log m, 0)] <= 1/sqrt(m), natural log, m log-uniform in [2, 1e9]
        m = to_numpy(_edges(ctx, _unif(ctx, 2.0, 1e9, log=True), [2.0, 1e9]))
        g = np.sqrt(np.log(m))
        # E[(x^2 - g^2)_+] = 2 g phi(g) + 2 (1 - g^2) Phibar(g) (integration by parts; the proof prints
        # (g^2+1) Phibar(g) - g phi(g), which is 1/2 at g = 0 where E[x^2] = 1); cross-checked by quadrature in the tests
        ey = 2 * g * stats.norm.pdf(g) + 2 * (1 - g ** 2) * stats.norm.sf(g)
        if ctx.arg("printed", False):
            ey = (g ** 2 + 1) * stats.norm.sf(g) - g * stats.norm.pdf(g)
        out = ey * np.sqrt(m)
        extras["m"] = torch.from_numpy(m)
    elif which in ("A.6", "A.7", "A.8"):  # ||phi(x)||, x ~ N(0, I_n): sigma = 1 wlog (scale-free)
        n = ctx.i("n")
        eps = to_numpy(_edges(ctx, _unif(ctx, 1e-3, 1.0), [1e-3, 1.0]))
        up = _binom_chi2_sf(n, (1 + eps) ** 2 * n / 2)   # P[||phi|| >= (1+eps) sqrt(n/2)]
        lo = _binom_chi2_cdf(n, (1 - eps) ** 2 * n / 2)  # P[||phi|| <= (1-eps) sqrt(n/2)]
        fail = {"A.6": up, "A.7": lo, "A.8": up + lo}[which]
        out = fail / ((2 if which == "A.8" else 1) * np.exp(-eps ** 2 * n / 100))
        extras["eps"] = torch.from_numpy(eps)
    elif which in ("A.12-one", "A.12-two"):  # t/sigma in (0, 1]; A.12-two: mu/sigma in [-10, 10] (0 with args.mu0)
        t = to_numpy(_edges(ctx, _unif(ctx, 1e-6, 1.0), [1e-6, 1.0]))
        if which == "A.12-one":
            p, lo, hi = stats.norm.sf(t), 0.5 * (1 - 4 * t / 5), 0.5 * (1 - 2 * t / 3)
        else:
            mu = np.zeros(R) if ctx.arg("mu0", False) else to_numpy(_edges(ctx, _unif(ctx, -10.0, 10.0), [0.0, 10.0]))
            p = stats.norm.sf(t - mu) + stats.norm.cdf(-t - mu)
            lo, hi = 1 - 4 * t / 5, 1 - 2 * t / 3
            extras["mu"] = torch.from_numpy(mu)
        out = np.maximum(lo / p, p / hi)  # <= 1 iff lo <= P <= hi
        extras["t"] = torch.from_numpy(t)
    elif which in ("A.13", "A.15"):  # (alpha, c sigma): >= (1-alpha)/2 fraction on each side beyond c alpha sigma
        m = ctx.i("m")
        alpha = to_numpy(_edges(ctx, _unif(ctx, 1e-4, 0.5 - 1e-9), [1e-4, 0.5 - 1e-9]))
        c = 5 / 16 if which == "A.13" else 1 / 4
        q = np.ceil((1 - alpha) * m / 2 - 1e-12).astype(int)
        out = np.array([_good_failure(m, float(stats.norm.sf(c * a)), int(qq)) for a, qq in zip(alpha, q)])
        out = out / np.exp(-alpha ** 2 * m / 100)
        extras["alpha"] = torch.from_numpy(alpha)
    elif which.startswith("A.18"):  # f = mean of N iid Bernoulli(p): c_i = 1/N, sum c_i^2 = 1/N; exact binomial
        N = ctx.i("N")
        p = to_numpy(_unif(ctx, 0.05, 0.95))
        t = to_numpy(_unif(ctx, 1.0 / N, 1.0))
        lup = stats.binom.logsf(np.ceil(N * (p + t) - 1e-9) - 1, N, p)   # log P[f - Ef >= t]
        llo = stats.binom.logcdf(np.floor(N * (p - t) + 1e-9), N, p)     # log P[f - Ef <= -t]
        e = 2 * t ** 2 * N  # 2 t^2 / sum c_i^2; ratios in log space (exp(-e) underflows at large N)
        if which == "A.18-printed-upper":
            out = np.exp(lup + e)  # printed: P >= exp(-e), so the ratio should be >= 1
        elif which == "A.18-printed-lower":
            out = np.exp(llo - e)  # printed: P >= exp(+e)
        elif which == "A.18-textbook":
            out = np.exp(np.maximum(lup, llo) + e)  # <= 1 (McDiarmid / Hoeffding)
        else:
            raise EstimatorError(f"args.which = {which!r}")
        extras["t"] = torch.from_numpy(t)
        extras["p"] = torch.from_numpy(p)
    else:
        raise EstimatorError(f"args.which = {which!r}: one of {_TAILS}")
    return Observation(torch.from_numpy(np.asarray(out, dtype=np.float64)), extras=extras,
                       method="exact (scipy chi2/binom/norm)")


@QUANTITIES.register("az-truncated-squares", "Lemma A.5: sum_i max(x_i^2 - log m, 0) / (2 sqrt(m)) for x ~ N(0, I_m) "
                     "(natural log), Monte Carlo", networks=SCALAR)
def truncated_squares(ctx: Context) -> Observation:
    m = ctx.i("m")
    x = torch.randn(ctx.replicates, m, generator=ctx.generator, dtype=torch.float64)
    y = (x ** 2 - math.log(m)).clamp_min(0).sum(-1)
    return Observation(y / (2 * math.sqrt(m)), method="Monte Carlo")


def _relu_norm(v: torch.Tensor, squared: bool = False) -> torch.Tensor:
    r = torch.relu(v)
    return (r ** 2 if squared else r).norm(dim=-1)


@QUANTITIES.register("az-relu-norm-deviation", "Lemmas A.8-A.10 by Monte Carlo: | ||phi(v)|| / target - 1 | for "
                     "args.which 'A.8' (v ~ N(0, sigma^2 I_n), target sqrt(n/2) sigma; args.square: phi(a) = "
                     "max(a,0)^2 as printed in A.8), 'A.9' (v = A x, A m x n N(0, 2 sigma^2/m), target ||x|| sigma), "
                     "'A.10' (v = sum_i A_i x_i, blocks N(0, 2 sigma_i^2/m), target (sum ||x_i||^2 sigma_i^2)^(1/2))",
                     networks=SCALAR)
def relu_norm_deviation(ctx: Context) -> Observation:
    which = ctx.arg("which", "A.8")
    R, g = ctx.replicates, ctx.generator
    sigma = ctx.p("sigma", 1.0)
    if which == "A.8":
        n = ctx.i("n")
        v = torch.randn(R, n, generator=g, dtype=torch.float64) * sigma
        target = math.sqrt(n / 2) * sigma
    elif which == "A.9":
        m, n = ctx.i("m"), ctx.i("n")
        x = torch.randn(n, generator=g, dtype=torch.float64) * 3.0  # fixed before A, arbitrary scale
        A = torch.randn(R, m, n, generator=g, dtype=torch.float64) * math.sqrt(2 * sigma ** 2 / m)
        v = A @ x
        target = float(x.norm()) * sigma
    elif which == "A.10":
        m, k = ctx.i("m"), ctx.i("blocks", 3)
        sizes = [1 + (j % 3) for j in range(k)]
        sig = torch.rand(k, generator=g, dtype=torch.float64) * 2 + 0.1
        xs = [torch.randn(s, generator=g, dtype=torch.float64) for s in sizes]
        v = sum(torch.randn(R, m, s, generator=g, dtype=torch.float64) @ x * math.sqrt(2 * float(sg) ** 2 / m)
                for s, x, sg in zip(sizes, xs, sig))
        target = math.sqrt(sum(float(x.norm()) ** 2 * float(sg) ** 2 for x, sg in zip(xs, sig)))
    else:
        raise EstimatorError(f"args.which = {which!r}: one of A.8, A.9, A.10")
    val = _relu_norm(v, squared=bool(ctx.arg("square", False))) / target
    return Observation((val - 1).abs(), method="Monte Carlo")


def _tie_ranks(xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For rows sorted ascending (R, N): how many entries lie strictly below, and at or below, each entry (what
    searchsorted(xs, xs) gives left and right, int64), from the ends of the runs of equal values by a running max /
    min in one pass (searchsorted's N binary searches per row cost more than the sort at N = 10^5)."""
    N = xs.shape[-1]
    idx = torch.arange(N, device=xs.device).expand_as(xs)
    new = torch.ones_like(xs, dtype=torch.bool)
    new[..., 1:] = xs[..., 1:] != xs[..., :-1]  # a run of equal values starts here
    last = torch.ones_like(new)
    last[..., :-1] = new[..., 1:]  # ... or ends here
    below = (idx * new).cummax(-1).values  # the index of the run's first entry
    upto = torch.where(last, idx + 1, N).flip(-1).cummin(-1).values.flip(-1)  # one past the run's last entry
    return below, upto


def _ks_stat(x: torch.Tensor, cdf) -> torch.Tensor:
    """sqrt(N) sup_x |F_N(x) - F(x)| per row of x (R, N), evaluated at every sample point and just left of it, with
    ties counted properly (F may have atoms, e.g. the point mass at 0 of Fact A.11; the test is then conservative)."""
    xs, _ = x.sort(dim=-1)
    N = x.shape[-1]
    xs_np = to_numpy(xs)
    F = torch.as_tensor(cdf(xs_np), dtype=torch.float64, device=xs.device)
    F_left = torch.as_tensor(cdf(np.nextafter(xs_np, -np.inf)), dtype=torch.float64, device=xs.device)
    left, right = _tie_ranks(xs)
    right = right.to(torch.float64) / N  # F_N(x_i)
    left = left.to(torch.float64) / N  # F_N(x_i-)
    d = torch.maximum((right - F).abs(), (left - F_left).abs())
    return d.amax(-1) * math.sqrt(N)


@QUANTITIES.register("az-fact-a11-ks", "Fact A.11: sqrt(N) x Kolmogorov-Smirnov distance of v_i = 1{<W_i, h+q> >= 0} "
                     "<W_i, h> (W rows N(0, 2/m I_p)) from its stated law: args.part 'coords' (|v_i| half 0, half "
                     "|N(0, 2||h||^2/m)|, N = m coordinates of one draw) or 'norm' (m||v||^2/(2||h||^2) ~ chi^2_w, w ~ "
                     "Bin(m, 1/2), N = args.draws draws); h = e_1 and q from ctx.coefficients(p) (the claim's "
                     "inputs.coefficients: gaussian, ones, parity, first = h, null-vector = a q orthogonal to h, or a "
                     "list)", networks=SCALAR)
def fact_a11_ks(ctx: Context) -> Observation:
    """"For fixed h != 0 and q": the law of W (iid Gaussian entries) is invariant under rotations, and scaling h and q
    together leaves the indicator and the normalised statistics unchanged, so h = e_1 loses nothing; q is then the
    claim's coefficient vector in those coordinates (units of ||h||), drawn through ctx.coefficients so that runs and
    hunts move it. The data-built family null-vector reads h as p one-dimensional points: q is orthogonal to h."""
    from scipy import stats
    m, p = ctx.i("m"), ctx.i("p", 8)
    R, g = ctx.replicates, ctx.generator
    if "q" in ctx.args:
        raise EstimatorError("args.q is not read: q is drawn by ctx.coefficients, declare it as inputs.coefficients")
    h = torch.zeros(R, p, dtype=torch.float64)
    h[:, 0] = 1.0
    q = ctx.coefficients(p, h.unsqueeze(-1)).to(torch.float64)
    part = ctx.arg("part", "coords")
    K = 1 if part == "coords" else int(ctx.arg("draws", 200))
    Wr = torch.randn(R, K, m, p, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
    u = (h + q)[:, None, :, None]  # (R, 1, p, 1)
    v = ((Wr @ u).squeeze(-1) >= 0).to(torch.float64) * Wr[..., 0]  # <W_i, h> = W_i1
    if part == "coords":
        z = v[:, 0].abs() * math.sqrt(m / 2)
        value = _ks_stat(z, lambda x: np.where(x < 0, 0.0, 0.5 + 0.5 * (2 * stats.norm.cdf(x) - 1)))
    elif part == "norm":
        T = m * (v ** 2).sum(-1) / 2
        value = _ks_stat(T, lambda x: _binom_chi2_cdf(m, np.asarray(x).ravel()).reshape(np.shape(x)))
    else:
        raise EstimatorError(f"args.part = {part!r}: one of coords, norm")
    return Observation(value, method="Kolmogorov-Smirnov against the exact law")


@QUANTITIES.register("az-decomposition", "Prop 6.1 and Lemmas E.4-E.5 (g = sqrt(1-theta^2) g1 + theta g2, g3 = theta "
                     "g2 - (1 - sqrt(1-theta^2)) g1): args.part 'identity' max|g - g1 - g3|/max|g|; 'g3-ks' sqrt(m) "
                     "KS distance of g3 from N(0, theta^2/m) ('very close'); 'e4c' min over k and both signs of "
                     "P[+-u_k >= theta/(2 sqrt m) | W2] (exact given g1, variance 2/m); 'e4d' ||u||_inf 2 sqrt(m) / "
                     "(3 theta rho); 'w2-ks' sqrt(m) KS distance of sqrt(m/2) W2 z from N(0,1) for a probe z (E.4 (a), "
                     "E.5 with args.probe)", networks=SCALAR)
def decomposition(ctx: Context) -> Observation:
    from scipy import special, stats

    # the KS parts take special.ndtr: stats.norm.cdf's values without its argument handling (a third of a KS's time)
    m, R, g = ctx.i("m"), ctx.replicates, ctx.generator
    theta = ctx.p("theta")
    part = ctx.arg("part", "identity")
    var = float(ctx.arg("variance", 1.0))  # Prop 6.1: 1/m; Lemma E.4: 2/m
    s = math.sqrt(var / m)
    g1 = torch.randn(R, m, generator=g, dtype=torch.float64) * s
    g2 = torch.randn(R, m, generator=g, dtype=torch.float64) * s
    c = 1 - math.sqrt(1 - theta ** 2)
    gg = math.sqrt(1 - theta ** 2) * g1 + theta * g2
    u = theta * g2 - c * g1  # g3 of Prop 6.1, u of Lemma E.4
    if part == "identity":
        val = (gg - g1 - u).abs().amax(-1) / gg.abs().amax(-1)
    elif part == "g3-ks":
        val = _ks_stat(u * math.sqrt(m / var) / theta, special.ndtr)
    elif part == "e4c":
        sd = theta * s
        thr = theta / (2 * math.sqrt(m))
        up = stats.norm.sf(to_numpy((thr + c * g1) / sd))     # P[u_k >= thr | g1]
        dn = stats.norm.cdf(to_numpy((-thr + c * g1) / sd))   # P[u_k <= -thr | g1]
        val = torch.from_numpy(np.minimum(up, dn).min(-1)).to(g1.device)
    elif part == "e4d":
        rho = _expr_arg(ctx, "rho", "n * L * d * log(m)")
        val = u.abs().amax(-1) * 2 * math.sqrt(m) / (3 * theta * rho)
    elif part == "w2-ks":
        # W2 z = W (I - v v^T) z + (v.z) g1 for unit z; W(I - vv^T)z ~ N(0, var/m ||(I - vv^T) z||^2 I) independent of g1
        # (Lemma E.4: W2 = W U U^T + g1 v^T + W (I - UU^T)(I - vv^T)); the probe angle to v is args.probe in [0, 1]
        a = float(ctx.arg("probe", 0.5))  # |<v, z>|
        rest = torch.randn(R, m, generator=g, dtype=torch.float64) * s * math.sqrt(1 - a ** 2)
        val = _ks_stat((rest + a * g1) / s, special.ndtr)
    else:
        raise EstimatorError(f"args.part = {part!r}: one of identity, g3-ks, e4c, e4d, w2-ks")
    return Observation(val, method="Monte Carlo / exact conditional law")


@QUANTITIES.register("az-finite-table-fact", "Facts A.1/A.2 on random finite product spaces (args.which): A.1 "
                     "Pr_X[Pr_Y[f] >= 1 - sqrt(eps)] / (1 - sqrt(eps)); A.2 Pr_X[E_Y f >= a eps/2] / (eps/2) at eps = "
                     "Pr[f >= a] (args.nonnegative: f >= 0, else f of both signs); >= 1 means the fact holds",
                     networks=SCALAR)
def finite_table_fact(ctx: Context) -> Observation:
    R, g = ctx.replicates, ctx.generator
    a_sz, b_sz = ctx.i("nx", 6), ctx.i("ny", 6)
    px = torch.rand(R, a_sz, generator=g, dtype=torch.float64) + 1e-3
    px = px / px.sum(-1, keepdim=True)
    py = torch.rand(R, b_sz, generator=g, dtype=torch.float64) + 1e-3
    py = py / py.sum(-1, keepdim=True)
    which = ctx.arg("which", "A.1")
    if which == "A.1":
        dens = torch.rand(R, 1, 1, generator=g, dtype=torch.float64)
        f = torch.rand(R, a_sz, b_sz, generator=g, dtype=torch.float64) > dens * 0.3  # the event f(X, Y)
        fail_y = ((~f).to(torch.float64) * py.unsqueeze(1)).sum(-1)  # Pr_Y[not f] per x
        eps = (px * fail_y).sum(-1)
        se = eps.sqrt()
        good = (px * (fail_y <= se.unsqueeze(-1) * (1 + 1e-12)).to(torch.float64)).sum(-1)
        val = good / (1 - se).clamp_min(1e-300)
        valid = se < 1  # eps >= 1: the conclusion "Pr >= 1 - sqrt(eps) <= 0" is empty, no evidence either way
    elif which == "A.2":
        f = torch.rand(R, a_sz, b_sz, generator=g, dtype=torch.float64)
        if not ctx.arg("nonnegative", True):
            f = torch.where(torch.rand(R, a_sz, b_sz, generator=g, dtype=torch.float64) < 0.5, f,
                            -10 * torch.rand(R, a_sz, b_sz, generator=g, dtype=torch.float64))
        a = torch.rand(R, 1, 1, generator=g, dtype=torch.float64) * 0.9 + 0.05
        joint = px.unsqueeze(-1) * py.unsqueeze(1)
        eps = (joint * (f >= a).to(torch.float64)).sum(dim=(-1, -2))  # the hypothesis holds with equality
        ey = (f * py.unsqueeze(1)).sum(-1)
        lhs = (px * (ey >= a.squeeze(-1) * eps.unsqueeze(-1) / 2).to(torch.float64)).sum(-1)
        val = lhs / (eps / 2).clamp_min(1e-300)
        valid = eps > 0  # eps = 0: hypothesis and conclusion are both empty
    else:
        raise EstimatorError(f"args.which = {which!r}: one of A.1, A.2")
    return Observation(val, valid=valid, method="exact on a random finite product space")


# ---------------------------------------------------------------- exact identities (Fact 2.5, Prop G.3, Claim G.2)


@QUANTITIES.register("rnn-gradient-identity-error", "Fact 2.5: max relative discrepancy between the closed-form gradient "
                     "(adjoint recursion), the paper's triple sum over (i, a, l) with explicit Back matrices, and "
                     "autograd of f (float64)", networks=NET)
def gradient_identity_error(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    Y = _labels(ctx, X.shape[1], X.shape[2])
    G, _, fwd = net.loss_gradient(W, A, B, X, Y)
    lv = net.losses(fwd, Y)
    D = fwd.mask()
    n, L = X.shape[1], X.shape[2]
    trip = torch.zeros_like(W)
    for i in range(n):  # the printed triple sum, Back_{i,l+1->a} = B D_a W ... D_{l+2} W formed explicitly
        for a in range(2, L + 1):
            for l in range(1, a):
                back = B.clone()
                for k in range(a, l + 1, -1):
                    back = (back * D[:, i, k].unsqueeze(-2)) @ W
                col = D[:, i, l + 1] * (back.transpose(-1, -2) @ lv[:, i, a].unsqueeze(-1)).squeeze(-1)
                trip = trip + col.unsqueeze(-1) * fwd.h[:, i, l].unsqueeze(-2)
    Wg = W.clone().requires_grad_(True)
    with torch.enable_grad():
        f = net.objective(net.forward(Wg, A, B, X), Y).sum()
        auto = torch.autograd.grad(f, Wg)[0]
    scale = G.flatten(1).abs().amax(-1).clamp_min(1e-300)
    err = torch.maximum((G - trip).flatten(1).abs().amax(-1), (G - auto).flatten(1).abs().amax(-1)) / scale
    # torch's relu' is 1{g > 0}, the paper's 1{g >= 0}: they differ only on exact ties (probability 0)
    return Observation(err, method="closed form vs triple sum vs autograd")


def relu_difference_diag(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Proposition G.3's D'' (as a vector): b_k/(a_k - b_k) if a_k >= 0 > b_k, b_k/(b_k - a_k) if a_k < 0 <= b_k, else 0."""
    up = (a >= 0) & (b < 0)
    dn = (a < 0) & (b >= 0)
    diff = a - b
    safe = torch.where(diff == 0, torch.ones_like(diff), diff)
    return torch.where(up, b / safe, torch.where(dn, -b / safe, torch.zeros_like(a)))


@QUANTITIES.register("az-relu-difference-error", "Proposition G.3: max_k |phi(a) - phi(b) - D(a - b) - D''(a - b)| / "
                     "max(|a|, |b|), with +inf when D'' leaves [-1, 1] or is nonzero where the signs agree; a, b with "
                     "zeros, ties, equal entries and extreme magnitudes", networks=SCALAR)
def relu_difference_error(ctx: Context) -> Observation:
    R, g = ctx.replicates, ctx.generator
    m = ctx.i("m", 64)
    mag = torch.exp(torch.randn(R, m, generator=g, dtype=torch.float64) * 20)  # magnitudes 1e-17 .. 1e17
    a = torch.randn(R, m, generator=g, dtype=torch.float64) * mag
    b = torch.randn(R, m, generator=g, dtype=torch.float64) * mag
    pick = torch.rand(R, m, generator=g, dtype=torch.float64)
    b = torch.where(pick < 0.1, a, b)                                      # ties a = b
    a = torch.where((pick >= 0.1) & (pick < 0.2), torch.zeros_like(a), a)  # zeros
    b = torch.where((pick >= 0.2) & (pick < 0.3), torch.zeros_like(b), b)
    b = torch.where((pick >= 0.3) & (pick < 0.4), -a * 1e-12, b)           # sign flips barely across 0
    Dpp = relu_difference_diag(a, b)
    lhs = torch.relu(a) - torch.relu(b)
    rhs = (a >= 0).to(a.dtype) * (a - b) + Dpp * (a - b)
    err = (lhs - rhs).abs() / torch.maximum(a.abs(), b.abs()).clamp_min(1e-300)
    bad = (Dpp.abs() > 1) | ((Dpp != 0) & ((a >= 0) == (b >= 0)))
    val = torch.where(bad.any(-1), torch.full((R,), math.inf, dtype=a.dtype), err.amax(-1))
    return Observation(val, method="exact construction of D''")


@QUANTITIES.register("rnn-relu-expansion-error", "Claim G.2 (G.1): max over i, l of || (h_{i,l} - h^_{i,l}) - sum_{a<l} "
                     "(D^_l + D''_l) W^ ... W^ (D^_{a+1} + D''_{a+1}) W' h_{i,a} || / max(||h - h^||, ||h||) at W^ (init "
                     "plus a random perturbation of size args.check_radius/sqrt(m)) and a random W' of spectral norm "
                     "tau0/sqrt(m); +inf if some D'' entry leaves [-1, 1]", networks=NET)
def relu_expansion_error(ctx: Context) -> Observation:
    W0, A, B, X = _setup(ctx)
    Wc = W0 + random_perturbation(ctx.generator, [W0], float(ctx.arg("check_radius", 1.0)) / math.sqrt(ctx.i("m")))[0]
    Wp = random_perturbation(ctx.generator, [W0], _radius(ctx))[0]
    fc = net.forward(Wc, A, B, X)
    f = net.forward(Wc + Wp, A, B, X)
    Dpp = relu_difference_diag(fc.g, f.g)  # G.3 with a = g^ (check), b = g (perturbed): h - h^ = (D^ + D'')(g - g^)
    Mfull = fc.mask() + Dpp
    err = torch.zeros(W0.shape[0], dtype=W0.dtype)
    for l in range(1, fc.L + 1):
        rhs = torch.zeros_like(f.h[:, :, l])
        for a in range(1, l):  # the printed sum, each term propagated separately
            v = Mfull[:, :, a + 1] * (f.h[:, :, a] @ Wp.transpose(-1, -2))  # (D^ + D'')_{a+1} W' h_{i,a}
            for k in range(a + 2, l + 1):
                v = Mfull[:, :, k] * (v @ Wc.transpose(-1, -2))
            rhs = rhs + v
        lhs = f.h[:, :, l] - fc.h[:, :, l]
        rel = (lhs - rhs).norm(dim=-1) / torch.maximum(lhs.norm(dim=-1), f.h[:, :, l].norm(dim=-1)).clamp_min(1e-300)
        err = torch.maximum(err, rel.amax(-1))
    bad = (Dpp.abs() > 1).flatten(1).any(-1)
    return Observation(torch.where(bad, torch.full_like(err, math.inf), err), method="exact expansion (G.1)")


# ---------------------------------------------------------------- training (Theorems 1, 2 and the informal theorem)


@QUANTITIES.register("rnn-training", "f(W^(T)) / f(W^(0)) after T steps of GD (args.method 'gd', W <- W - eta grad f) or "
                     "SGD ('sgd', one uniformly random sequence i per step, W <- W - eta n grad f_i: Appendix I's unbiased "
                     "step with |S_t| = 1), eta = c/m (params c, T), N(0, 1) labels; extras: sqrt(m) ||W^(T) - W^(0)||_F "
                     "and the largest fraction of changed activation signs", networks=NET)
def training(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    n, L = X.shape[1], X.shape[2]
    if L < 2:
        raise EstimatorError("the objective needs L >= 2")
    Y = _labels(ctx, n, L)
    m = ctx.i("m")
    eta = ctx.p("c") / m
    T = ctx.i("T")
    method = ctx.arg("method", "gd")
    W0 = W.clone()
    f0 = net.forward(W0, A, B, X)
    obj0 = net.objective(f0, Y)
    ar = torch.arange(W.shape[0])
    for _ in range(T):
        fwd = net.forward(W, A, B, X)
        lv = net.losses(fwd, Y)
        if method == "gd":
            G = net.gradient_from_losses(W, B, fwd, lv)
        elif method == "sgd":
            i = torch.randint(0, n, (W.shape[0],), generator=ctx.generator)
            G = n * net.per_sample_gradients(W, B, fwd, lv)[ar, i]
        else:
            raise EstimatorError(f"args.method = {method!r}: one of gd, sgd")
        W = W - eta * G
    fT = net.forward(W, A, B, X)
    ratio = net.objective(fT, Y) / obj0
    move = (W - W0).flatten(1).norm(dim=-1) * math.sqrt(m)
    # a trajectory that overflowed (GD diverging past float range; inf - inf gives NaN in the forward pass) has
    # f(W^(T)) and its displacement beyond any bound, not unknown: +inf, which "f <= eps" reads as a violation
    diverged = ~torch.isfinite(ratio) | ~torch.isfinite(move)
    ratio, move = (torch.where(diverged, torch.full_like(v, math.inf), v) for v in (ratio, move))
    flips = ((fT.g >= 0) != (f0.g >= 0))[:, :, 1:].to(W.dtype).mean(-1).flatten(1).amax(-1)
    return Observation(ratio, extras={"sqrt_m_displacement": move, "flip_fraction": flips},
                       method=f"{method}, eta = {ctx.p('c')}/m, {T} steps")


# ---------------------------------------------------------------- semi-smoothness (Theorem 4)


def semismooth_remainder(W, A, B, X, Y, Wp, f0=None, G=None) -> torch.Tensor:
    """R = f(W + W') - f(W) - <grad f(W), W'> per replicate, f evaluated exactly (Theorem 4's left side minus its
    linear part)."""
    if f0 is None or G is None:
        G, f0, _ = net.loss_gradient(W, A, B, X, Y)
    f1 = net.objective(net.forward(W + Wp, A, B, X), Y)
    return f1 - f0 - (G * Wp).sum(dim=(-1, -2))


@QUANTITIES.register("rnn-semismooth-ratio", "Theorem 4 (Appendix G form): sup over ||W'||_2 <= tau0/sqrt(m) of R / "
                     "(rho^11 tau0^{1/3} m^{1/3} ||loss_{i*,l*}|| ||W'||_2 + L^18 n m ||W'||_2^2), R = f(W^ + W') - f(W^) - "
                     "<grad f(W^), W'>, at W^ = W~ plus a random perturbation of norm tau0/sqrt(m) (args.check = "
                     "'random'; 'init': W^ = W~); the search maximises the ratio", networks=NET)
def semismooth_ratio(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    n, L = X.shape[1], X.shape[2]
    m, d = ctx.i("m"), ctx.i("d", 1)
    Y = _labels(ctx, n, L)
    tau = _radius(ctx)
    if ctx.arg("check", "random") == "random":
        W = W + random_perturbation(ctx.generator, [W], tau)[0]
    G, f0, fwd = net.loss_gradient(W, A, B, X, Y)
    lstar = (net.losses(fwd, Y) ** 2).sum(-1).flatten(1).amax(-1).sqrt()
    rho = n * L * d * math.log(m)
    a = rho ** 11 * ctx.p("tau0") ** (1 / 3) * m ** (1 / 3)
    b = L ** 18 * n * m

    def ratio(Wp: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        rem = semismooth_remainder(W, A, B, X, Y, Wp, f0, G)
        return rem / (a * lstar * s + b * s ** 2).clamp_min(1e-300)

    # The remainder is second order at W' = 0, where a gradient search has no direction: candidates instead, each at
    # the full radius and at a tenth of it: random Gaussian directions, -grad f (the GD step) and +grad f, and the
    # layer-2 flip adversary for every i (kinks of the ReLU are where R is first order).
    with torch.no_grad():
        dirs = [random_perturbation(ctx.generator, [W], tau)[0] for _ in range(int(ctx.arg("random_draws", 2)))]
        if SEARCH_ORDER[ctx.search] >= 2:
            gs = G * (tau / torch.linalg.matrix_norm(G, ord=2).clamp_min(1e-300)).reshape(-1, 1, 1)
            dirs += [-gs, gs]
        if SEARCH_ORDER[ctx.search] >= 3:
            dirs += _flip_candidates(W, fwd, tau)
        val = torch.full((W.shape[0],), -math.inf, dtype=W.dtype)
        for Dd in dirs:
            s = torch.linalg.matrix_norm(Dd, ord=2)  # once per direction: ||frac W'||_2 = frac ||W'||_2
            for frac in (1.0, 0.1):
                val = torch.maximum(val, ratio(frac * Dd, frac * s))
    # R < 0 (a concave direction) satisfies the bound trivially; kept positive for the log-scale fit
    return Observation(val.clamp_min(1e-300), method=f"{len(dirs)} candidate directions x 2 radii (search={ctx.search})")


# ---------------------------------------------------------------- backward stability (Lemmas C.9, C.11)


def _segment_rows(a: torch.Tensor, B: torch.Tensor, D: torch.Tensor, Wm: torch.Tensor) -> dict[tuple[int, int], torch.Tensor]:
    """a^T B D_{l2} W ... D_{l1} W for every L >= l2 >= l1 >= 1, as (R, n, m) rows keyed (l1, l2)."""
    L = D.shape[2] - 1
    base = (a.unsqueeze(-2) @ B).squeeze(-2)  # (R, m)
    out = {}
    for l2 in range(1, L + 1):
        M = base.unsqueeze(1).expand(-1, D.shape[1], -1)
        for l1 in range(l2, 0, -1):
            M = (M * D[:, :, l1]) @ Wm  # (R, n, m) @ (R, m, m)
            out[(l1, l2)] = M
    return out


def _flip_candidates(W: torch.Tensor, f0: net.Forward, tau: float) -> list[torch.Tensor]:
    """The exact layer-2 flip adversary (catalogue P4) for every sequence i: W' = tau u h~_{i,1}^T / ||h~_{i,1}||."""
    out = []
    if f0.g.shape[2] <= 2:  # horizon L = 1: there is no layer 2 to flip, the adversary does not apply
        return out
    for i in range(f0.h.shape[1]):
        h1 = f0.h[:, i, 1]
        hn = h1.norm(dim=-1).clamp_min(1e-300)
        u = greedy_flip_vector(f0.g[:, i, 2], hn, tau)
        u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        out.append(tau * u.unsqueeze(-1) * (h1 / hn.unsqueeze(-1)).unsqueeze(-2))
    return out


_BACK = {"a": ("tilde", "tilde", "pert", "tilde"), "b": ("pert", "tilde", "pert", "pert"),
         "c": ("tilde", "tilde", "tilde", "pert"), "d": ("tilde", "pert", "pert", "pert")}


@QUANTITIES.register("rnn-backward-perturbation", "Lemma C.9 (args.which a-d): sup over ||W'||_2 <= tau0/sqrt(m) of max "
                     "over i and segments of ||a^T B prod D1 W1 - a^T B prod D2 W2||_2 with (D1, W1, D2, W2) = (a) (D~, W~, "
                     "D, W~), (b) (D, W~, D, W), (c) (D~, W~, D~, W), (d) (D~, W, D, W), a a fixed random unit vector; "
                     "random perturbations plus the layer-2 flip adversary for every i (args.kind 'coord': the max "
                     "|entry| instead of the norm, Lemma C.11 with the rank-one W' of rnn-rank-one-perturbation); args.samples "
                     "'one': sequence 1's value, the flip adversary aimed at it alone (extras worst_over_i)",
                     networks=NET)
def backward_perturbation(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    which = ctx.arg("which", "a")
    if which not in _BACK:
        raise EstimatorError(f"args.which = {which!r}: one of a, b, c, d")
    a = ctx.randn(ctx.replicates, B.shape[-2])
    a = a / a.norm(dim=-1, keepdim=True)
    tau = _radius(ctx)
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        k = _samples_arg(ctx)
        cands = [random_perturbation(ctx.generator, [W], tau)[0] for _ in range(int(ctx.arg("random_draws", 2)))]
        if SEARCH_ORDER[ctx.search] >= 3:
            cands += _flip_candidates(W, f0, tau)[:k]
        best = torch.zeros(W.shape[0], dtype=W.dtype)
        worst_all = torch.zeros_like(best)  # the worst case over every i under the same candidates (literal "for all i")
        for Wp in cands:
            per_i = _backward_diff(a, B, W, Wp, f0, net.forward(W + Wp, A, B, X), which, "norm", per_sample=True)
            best = torch.maximum(best, per_i[:, :k].amax(-1))
            worst_all = torch.maximum(worst_all, per_i.amax(-1))
    return Observation(best, extras={"worst_over_i": worst_all},
                       method=(f"random x {len(cands)} candidates incl. flip adversary" if SEARCH_ORDER[ctx.search] >= 3
                               else "random") + ("; sequence 1" if k == 1 else ""))


def _segment_rows_diff(a: torch.Tensor, B: torch.Tensor, D: torch.Tensor, W: torch.Tensor,
                       Wp: torch.Tensor, rank_one: tuple[torch.Tensor, torch.Tensor] | None = None
                       ) -> dict[tuple[int, int], torch.Tensor]:
    """a^T B D_{l2} (W + W') ... D_{l1} (W + W') - a^T B D_{l2} W ... D_{l1} W for every segment, by the telescoping
    recursion Delta <- (Delta o D) (W + W') + (row_W o D) W' (exact, every term carries W', so no cancellation of two
    O(1) products: the difference stays resolved at any ||W'||, where subtracting the two rows loses it below ~1e-16).
    `rank_one` = (y, z) with W' = y z^T: then Delta <- (Delta o D) W + ((Delta o D + row_W o D) y) z^T, the two rows
    through W in one product: one pass over the m x m matrices a step instead of three (Lemmas C.10-C.11)."""
    L = D.shape[2] - 1
    base = (a.unsqueeze(-2) @ B).squeeze(-2)
    Wt = W + Wp if rank_one is None else None
    y, z = rank_one if rank_one is not None else (None, None)
    out = {}
    for l2 in range(1, L + 1):
        M = base.unsqueeze(1).expand(-1, D.shape[1], -1)
        delta = torch.zeros_like(M)
        for l1 in range(l2, 0, -1):
            MD = M * D[:, :, l1]
            if rank_one is None:
                delta = (delta * D[:, :, l1]) @ Wt + MD @ Wp
                M = MD @ W
            else:
                dD = delta * D[:, :, l1]
                dW, M = (torch.cat([dD, MD], 1) @ W).split(MD.shape[1], 1)
                delta = dW + ((dD + MD) @ y.unsqueeze(-1)) * z.unsqueeze(-2)
            out[(l1, l2)] = delta
    return out


def _backward_diff(a, B, W, Wp, f0, f1, which, kind, per_sample=False, rank_one=None):
    D1, W1, D2, W2 = _BACK[which]
    pick_D = {"tilde": f0.mask(), "pert": f1.mask()}
    pick_W = lambda k: W if k == "tilde" else W + Wp  # W~ + W' formed only where a product uses it
    if D1 == D2 and W1 != W2:  # (b), (c): same patterns, W~ against W~ + W': the exact telescoped difference
        r1, r2 = _segment_rows_diff(a, B, pick_D[D1], W, Wp, rank_one), None
    else:
        r1 = _segment_rows(a, B, pick_D[D1], pick_W(W1))
        r2 = _segment_rows(a, B, pick_D[D2], pick_W(W2))
    best = torch.zeros(W.shape[0], f0.h.shape[1], dtype=W.dtype)  # (R, n): max over segments, per sequence
    for key, v in r1.items():
        diff = v if r2 is None else v - r2[key]
        val = diff.norm(dim=-1) if kind == "norm" else diff.abs().amax(-1)
        best = torch.maximum(best, val)
    return best if per_sample else best.amax(-1)


def _fresh_direction(fwd: net.Forward, i: int, l: int) -> torch.Tensor:
    """v_{i,l} = (I - U_{l-1} U_{l-1}^T) h_{i,l} / ||.|| (Def B.2), (R, m)."""
    v = fwd.h[:, i, l]
    if l > 1:
        v = _project_out(v.unsqueeze(1), _states(fwd, l - 1)).squeeze(1)
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300)


def _states(fwd: net.Forward, l: int) -> torch.Tensor:
    """The columns h_{i,l'} for l' = 1..l, i in [n] (R, m, l n): the span of U_l (Def B.1)."""
    R, n, _, m = fwd.h.shape
    return fwd.h[:, :, 1:l + 1].transpose(1, 2).reshape(R, l * n, m).transpose(-1, -2)


@contextlib.contextmanager
def _rows_added(W: torch.Tensor, idx: torch.Tensor, add: torch.Tensor):
    """W (R, m, m) with `add` (R, k, m) added in place to its rows idx (R, k, distinct) for the block, those rows put
    back exactly after it: W + M for an M zero outside those rows (W + 0 = W exactly), the same sums, without
    forming M or W + M (R m x m buffers and passes over them)."""
    rows = (torch.arange(W.shape[0]).unsqueeze(-1), idx)
    kept = W[rows]
    W[rows] = kept + add
    try:
        yield W
    finally:
        W[rows] = kept


def _rank_one_backward_coord(a: torch.Tensor, B: torch.Tensor, W: torch.Tensor, y: torch.Tensor, z: torch.Tensor,
                             Dt: torch.Tensor, D: torch.Tensor, which: str) -> torch.Tensor:
    """max over segments L >= l2 >= l1 >= 1 and sequences of the largest |entry| of Lemma C.11's difference, (R,):
    (a) a^T B prod D~ W~ - a^T B prod D W~, (b) a^T B prod D (W~ + W') - a^T B prod D W~ for W' = y z^T; what
    `_backward_diff(..., "coord", rank_one=(y, z))` computes, in fewer passes over W. Every segment ending at l2 is a
    step of the chain started at a^T B D_{l2}, so the L chains advance together, one product with W a step for all
    (L products, where one chain at a time took L(L+1)/2 for each of the two rows (a), for the pair (b)). Each chain
    carries its row M (patterns D) and the difference Delta, telescoped: (a) Delta <- (Delta o D~ + M o (D~ - D)) W~,
    (b) Delta <- (Delta o D) W~ + ((Delta o D + M o D) y) z^T, so a segment whose patterns agree gives exactly 0, as
    the subtraction of two equal rows did. The products' rows are batched otherwise, so values agree with the chain
    at a time to rounding (reordered sums)."""
    R, n, L1, m = D.shape
    L = L1 - 1
    M = (a.unsqueeze(-2) @ B).expand(R, L * n, m).reshape(R, L, n, m)  # chain c starts at l2 = L - c
    delta = torch.zeros_like(M)
    best = torch.zeros(R, dtype=W.dtype)
    yv, zr = y.reshape(R, 1, m, 1), z.reshape(R, 1, 1, m)
    for t in range(L):  # step t: chains c < L - t are active, chain c applies D_{l1}, l1 = L - c - t
        A = L - t
        M, delta = M[:, :A], delta[:, :A]
        Dm = D[:, :, 1:A + 1].flip(2).transpose(1, 2)  # (R, A, n, m): D_{A - c} for chain c
        MD = M * Dm
        if which == "a":
            Dtm = Dt[:, :, 1:A + 1].flip(2).transpose(1, 2)
            dD = delta * Dtm + M * (Dtm - Dm)
        else:
            dD = delta * Dm
        prod = (torch.cat([dD, MD], 1).reshape(R, 2 * A * n, m) @ W).reshape(R, 2 * A, n, m)
        delta, M = prod[:, :A], prod[:, A:]
        if which == "b":
            delta = delta + ((dD + MD) @ yv) * zr
        best = torch.maximum(best, delta.abs().amax(-1).flatten(1).amax(-1))
    return best


@QUANTITIES.register("rnn-rank-one-perturbation", "Lemmas C.10-C.11 for W' = y z^T, ||z|| = 1, y with N = args.N (an "
                     "expression) random coordinates +-tau0/sqrt(m) (W' independent of B): args.which 'forward' max "
                     "|((W~+W') h'_{i,l})_k| (C.10), 'back-a' max |(a^T B prod D W~ - a^T B prod D~ W~)_k| (C.11 (a)), "
                     "'back-b' max |(a^T B prod D W - a^T B prod D W~)_k| (C.11 (b)); args.z 'random', 'h1' (h~_{1,1} "
                     "normalised) or 'fresh' (v_{1,L-1} of Def B.2)", networks=NET)
def rank_one_perturbation(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, m = W.shape[0], W.shape[-1]
    N = max(1, min(m, round(_expr_arg(ctx, "N", 1))))
    tau = _radius(ctx)
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        zk = ctx.arg("z", "fresh")
        if zk == "random":
            z = ctx.randn(R, m)
        elif zk == "h1":
            z = f0.h[:, 0, 1]
        elif zk == "fresh":  # v_{1,L-1}: the fresh direction of the last h that W multiplies (h_{1,L} never is)
            z = _fresh_direction(f0, 0, max(1, f0.L - 1))
        else:
            raise EstimatorError(f"args.z = {zk!r}: one of random, h1, fresh")
        z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        idx = torch.rand(R, m, generator=ctx.generator).argsort(-1)[:, :N]
        sgn = torch.randint(0, 2, (R, N), generator=ctx.generator).to(W.dtype) * 2 - 1
        y = torch.zeros(R, m, dtype=W.dtype).scatter(-1, idx, sgn * tau)
        which = ctx.arg("which", "forward")
        if which not in ("forward", "back-a", "back-b"):
            raise EstimatorError(f"args.which = {which!r}: one of forward, back-a, back-b")
        # W~ + W' differs from W~ only in the N rows where y is nonzero: those rows, W[k] + y_k z (_rows_added)
        with _rows_added(W, idx, (sgn * tau).unsqueeze(-1) * z.unsqueeze(-2)):
            f1 = net.forward(W, A, B, X)  # at W~ + W'
            if which == "forward":
                hp = f1.h - f0.h  # h'_{i,l}, l = 0..L
                # one product per replicate over all (i, l) rows: a broadcast over i would copy W~ + W' n times
                val = (hp.flatten(1, 2) @ W.transpose(-1, -2)).abs().flatten(1).amax(-1)
        if which != "forward":  # at W~ again
            a = ctx.randn(R, B.shape[-2])
            a = a / a.norm(dim=-1, keepdim=True)
            val = _rank_one_backward_coord(a, B, W, y, z, f0.mask(), f1.mask(), which[-1])
    return Observation(val, method=f"rank-one W', N = {N}, z = {zk}")


# ---------------------------------------------------------------- backward coordinates (Lemma D.7)


@QUANTITIES.register("rnn-backward-coordinate-fraction", "Lemma D.7: fraction of k in [m] with |u_k| >= "
                     "||loss_{i*,l*}|| / (6 sqrt(d n L)), u = sum_{a >= l*} Back_{i*,l*->a}^T loss_{i*,a} (the adjoint "
                     "r_{i*,l*}), for loss vectors fixed before W, A, B: args.losses 'single' (one unit loss at i* = 1, "
                     "l* = args.lstar, default L) or 'gaussian' (iid N(0,1), (i*, l*) the argmax)", networks=NET)
def backward_coordinate_fraction(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, n, L = X.shape[:3]
    d = B.shape[-2]
    lv = torch.zeros(R, n, L + 1, d, dtype=ctx.dtype)
    kind = ctx.arg("losses", "single")
    if kind == "single":
        ls = int(_expr_arg(ctx, "lstar", L))
        if not 2 <= ls <= L:
            raise EstimatorError(f"args.lstar = {ls}: must lie in 2..L")
        v = ctx.randn(R, d)
        lv[:, 0, ls] = v / v.norm(dim=-1, keepdim=True)
    elif kind == "gaussian":
        lv[:, :, 2:] = ctx.randn(R, n, L - 1, d)
    else:
        raise EstimatorError(f"args.losses = {kind!r}: one of single, gaussian")
    norms = lv.norm(dim=-1).flatten(1)  # (R, n (L+1))
    star = norms.argmax(-1)
    istar, lstar = star // (L + 1), star % (L + 1)
    with torch.no_grad():
        r = net.adjoints(W, B, net.forward(W, A, B, X), lv)  # r_{i,l} = sum_{a >= l} Back_{i,l->a}^T loss_{i,a}
    ar = torch.arange(R)
    u = r[ar, istar, lstar]
    thr = norms[ar, star] / (6 * math.sqrt(d * n * L))
    return Observation((u.abs() >= thr.unsqueeze(-1)).to(ctx.dtype).mean(-1), method="exact adjoint recursion")


# ---------------------------------------------------------------- remaining tools (B.7, B.12, B.13, A.17, A.19, C.4)


@QUANTITIES.register("az-masked-column-norm", "Claim B.13: ||1{My + Ax >= 0} o Mz|| / ||z|| for fixed x, y, z (args.config "
                     "'random', 'parallel' y = z, 'x0' x = 0, 'zero' x = y = 0), M (m x k) and A (m x d) with N(0, 2/m) "
                     "entries",
                     networks=SCALAR)
def masked_column_norm(ctx: Context) -> Observation:
    m, k, dd = ctx.i("m"), ctx.i("k", 3), ctx.i("dxa", 3)
    R, g = ctx.replicates, ctx.generator
    x = torch.randn(dd, generator=g, dtype=torch.float64)
    y = torch.randn(k, generator=g, dtype=torch.float64)
    z = torch.randn(k, generator=g, dtype=torch.float64)
    cfg = ctx.arg("config", "random")
    if cfg == "parallel":
        y = z.clone()
    elif cfg == "x0":
        x = torch.zeros(dd, dtype=torch.float64)
    elif cfg == "zero":  # the statement admits x = y = 0: every mask entry is 1{0 >= 0} = 1
        x = torch.zeros(dd, dtype=torch.float64)
        y = torch.zeros(k, dtype=torch.float64)
    elif cfg != "random":
        raise EstimatorError(f"args.config = {cfg!r}: one of random, parallel, x0, zero")
    M = torch.randn(R, m, k, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
    A = torch.randn(R, m, dd, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
    mask = (M @ y + A @ x >= 0).to(torch.float64)
    return Observation((mask * (M @ z)).norm(dim=-1) / z.norm(), method="Monte Carlo")


@QUANTITIES.register("rnn-fixed-vector-product", "Claim B.12: max over i and L >= l > b >= 1 of ||D_{i,l} W ... D_{i,b} W "
                     "z|| / ((1 + 1/L)^{l-b+1} ||z||) for z fixed before W, drawn by ctx.coefficients(m) (the claim's "
                     "inputs.coefficients: gaussian, ones, parity, first = e_1, or a list)", networks=NET)
def fixed_vector_product(ctx: Context) -> Observation:
    if "z" in ctx.args:
        raise EstimatorError("args.z is not read: z is drawn by ctx.coefficients, declare it as inputs.coefficients")
    W, A, B, X = _setup(ctx)
    D = net.forward(W, A, B, X).mask()
    R, L, m = W.shape[0], X.shape[2], W.shape[-1]
    z = _given_vector(ctx, m).to(W.dtype)
    zn = z.norm(dim=-1, keepdim=True)
    if not bool((zn > 0).all()):
        raise EstimatorError("Claim B.12 needs z != 0: the coefficient vector is zero")
    z = z / zn
    best = torch.zeros(R, dtype=W.dtype)
    for b in range(1, L + 1):
        v = D[:, :, b] * (z.unsqueeze(1) @ W.transpose(-1, -2))  # D_b W z, (R, n, m)
        for l in range(b + 1, L + 1):
            v = D[:, :, l] * (v @ W.transpose(-1, -2))
            best = torch.maximum(best, (v.norm(dim=-1) / (1 + 1 / L) ** (l - b + 1)).amax(-1))
    return Observation(best, method="exact products")


@QUANTITIES.register("az-sign-change-layer2", "Claim C.4 at layer 2 (vector level): g~ ~ N(0, 2/m I); the exact greedy "
                     "adversary g' = g'_1 + g'_2, ||g'_1||_2 <= tau1/sqrt(m), ||g'_2||_inf <= tau2/m; args.which 'count': "
                     "flips / (tau4 m^{2/3}), tau4 = 10 tau1^{2/3}; 'mass': sqrt(m) ||D' g|| / tau5, tau5 = 3 tau1",
                     networks=SCALAR)
def sign_change_layer2(ctx: Context) -> Observation:
    m, R = ctx.i("m"), ctx.replicates
    tau1 = ctx.p("tau1")
    tau2 = _expr_arg(ctx, "tau2", 0.0)
    gt = torch.randn(R, m, generator=ctx.generator, dtype=torch.float64) * math.sqrt(2 / m)
    if ctx.arg("which", "count") == "count":
        flips = _greedy_flips(gt, (tau1 / math.sqrt(m)) ** 2, tau2 / m)
        return Observation(flips / (10 * tau1 ** (2 / 3) * m ** (2 / 3)), method="exact greedy flip count")
    # mass: ||D'g|| of explicit admissible g' = g'_1 + g'_2 (a lower estimate of the sup, never above it): g'_2 pushes
    # every coordinate by tau2/m toward (and, where |g~| < tau2/m, across) zero; g'_1 (||g'_1|| = B) is either spread
    # over those free coordinates proportionally to their overshoot b = tau2/m - |g~| (mass ||b|| + B, the best use of B
    # on them: <b, c> is largest for c parallel to b), or spent on the one coordinate of smallest remaining need. Every
    # flipped j has |g_j| <= (tau2/m - |g~_j|)_+ + |g'_1j|, so the sup is <= ||b|| + B: the spread candidate attains it
    # whenever a coordinate is free, so the value is then the exact sup.
    return Observation(_sign_change_mass(gt, tau1 / math.sqrt(m), tau2 / m) * math.sqrt(m) / (3 * tau1),
                       method="explicit mass adversary (spread over free coordinates, or one coordinate)")


def _row_blocks(gt: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # every computation here is row by row: blocks of about 2^20 entries stay in cache and reuse the same memory
    # instead of a dozen (R, m) temporaries (at R = 150, m = 10^5 most of the time went to page faults)
    return gt.split(max(1, 2 ** 20 // gt.shape[-1]))


def _greedy_flips(gt: torch.Tensor, budget: float, t: float) -> torch.Tensor:
    """The greedy (optimal) number of sign flips of g~ under ||g'_1||_2^2 <= budget, ||g'_2||_inf <= t, (R,) float64:
    the coordinates g'_2 flips alone (need 0), then the smallest remaining needs while their squares' running sum fits.
    Only a prefix of the sorted needs can fit, so only it is sorted: needs with need^2 within the budget, and of
    those only the ones below theta once the needs below theta / 2 already overrun the budget (a margin of 1e-6 over
    the summation order), so the sorted prefix and its running sums are those of the full sort."""
    cap = budget * (1 - 1e-12)
    out = []
    for need in (gt.abs() - t).clamp_min(0).unbind(0):
        cand, theta = need[(need > 0) & (need ** 2 <= cap)], math.sqrt(cap)
        while cand.numel() > 1024:
            half = cand[cand <= theta / 2]
            if float((half ** 2).sum()) <= cap * (1 + 1e-6):
                break
            cand, theta = half, theta / 2
        fits = (cand.sort().values ** 2).cumsum(-1) <= cap
        out.append(int((need == 0).sum()) + int(fits.sum()))
    return torch.tensor(out, dtype=torch.float64)


def _sign_change_mass(gt: torch.Tensor, B: float, t: float) -> torch.Tensor:
    """max over two explicit g' = g'_1 + g'_2 (||g'_1||_2 <= B, ||g'_2||_inf <= t) of ||D'g||, D' = 1{g >= 0} - 1{g~ >= 0},
    g = g~ + g': the sign-change mass of Claim C.4 at one layer, each candidate realised and measured, (R,)."""
    return torch.cat([_sign_change_mass_rows(rows, B, t) for rows in _row_blocks(gt)])


def _sign_change_mass_rows(gt: torch.Tensor, B: float, t: float) -> torch.Tensor:
    pos = gt >= 0
    s = torch.where(pos, -1.0, 1.0).to(gt.dtype)  # the direction that moves g~ across zero
    a = gt.abs()
    g2 = s * t
    b = (t - a).clamp_min(0)  # overshoot of the free coordinates (|g~| < t)
    bn = b.norm(dim=-1, keepdim=True)
    spread = s * B * b / bn.clamp_min(1e-300)
    need = torch.where(a < t, torch.full_like(a, float("inf")), a - t)  # coordinates g'_2 alone cannot flip
    j = need.argmin(-1, keepdim=True)
    one = torch.zeros_like(gt).scatter(-1, j, s.gather(-1, j) * B)

    def mass(g1: torch.Tensor) -> torch.Tensor:
        g = gt + g1 + g2
        return torch.where((g >= 0) != pos, g, 0.0).norm(dim=-1)  # |D'g| = |g| where the sign changed

    return torch.maximum(mass(spread), mass(one))


@QUANTITIES.register("az-split-sup", "Lemma A.17: sup over unit x of ||(|Wx| - t)_+||_2 (t = log(m)/sqrt(m): the optimal "
                     "split's l2 part) for W (m x n) N(0, 2/m), by projected gradient ascent from the largest rows and "
                     "random starts, 2 of each (a lower estimate of the sup)", networks=SCALAR)
def split_sup(ctx: Context) -> Observation:
    m, n, R = ctx.i("m"), ctx.i("n"), ctx.replicates
    W = torch.randn(R, m, n, generator=ctx.generator, dtype=torch.float64) * math.sqrt(2 / m)
    t = math.log(m) / math.sqrt(m)
    rows = W.norm(dim=-1).topk(min(2, m), dim=-1).indices
    starts = [W.gather(1, rows[:, j:j + 1, None].expand(-1, 1, n)).squeeze(1) for j in range(rows.shape[1])]
    starts += [torch.randn(R, n, generator=ctx.generator, dtype=torch.float64) for _ in range(2)]
    best = torch.zeros(R, dtype=torch.float64)
    for x in starts:
        x = x / x.norm(dim=-1, keepdim=True)
        for _ in range(int(ctx.arg("steps", 30))):
            y = (W @ x.unsqueeze(-1)).squeeze(-1)
            r = (y.abs() - t).clamp_min(0) * y.sign()
            best = torch.maximum(best, r.norm(dim=-1))
            x = (r.unsqueeze(-2) @ W).squeeze(-2)  # ascent direction of ||(|Wx| - t)_+||^2 / 2
            x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        y = (W @ x.unsqueeze(-1)).squeeze(-1)
        best = torch.maximum(best, (y.abs() - t).clamp_min(0).norm(dim=-1))
    return Observation(best, method="projected ascent, 4 starts (lower estimate)")


@QUANTITIES.register("az-toy-mean", "Lemma A.19 toy: f = mean of N iid Uniform[0,1] (E f = 1/2, bounded differences c = 1/N, "
                     "p = 0); the value of f", networks=SCALAR)
def toy_mean(ctx: Context) -> Observation:
    N = ctx.i("N")
    return Observation(torch.rand(ctx.replicates, N, generator=ctx.generator, dtype=torch.float64).mean(-1),
                       method="Monte Carlo")


@QUANTITIES.register("az-projected-relu-fresh", "Lemma B.7: ||(I - UU^T) phi(w + r v)|| for the extremal (alpha, "
                     "1/(8 sqrt m))-good w (half of (1-alpha) m coordinates at +alpha/(8 sqrt m), as many at -alpha/(8 "
                     "sqrt m), the rest 0), U (m x dtil) orthonormal (args.U 'random' or 'aligned': containing w and the "
                     "positive block's indicator), r = rfrac alpha/(16 log m), v ~ N(0, 2/m I)", networks=SCALAR)
def projected_relu_fresh(ctx: Context) -> Observation:
    m, R, g = ctx.i("m"), ctx.replicates, ctx.generator
    alpha, dt = ctx.p("alpha"), ctx.i("dtil")
    r = ctx.p("rfrac") * alpha / (16 * math.log(m))
    h = int((1 - alpha) * m / 2)
    w = torch.zeros(m, dtype=torch.float64)
    w[:h] = alpha / (8 * math.sqrt(m))
    w[h:2 * h] = -alpha / (8 * math.sqrt(m))
    cols = torch.randn(m, dt, generator=g, dtype=torch.float64)
    if ctx.arg("U", "random") == "aligned" and dt >= 2:
        cols[:, 0] = w
        cols[:, 1] = (w > 0).to(torch.float64)
    U, _ = torch.linalg.qr(cols)
    v = torch.randn(R, m, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
    p = torch.relu(w + r * v)
    p = p - (p @ U) @ U.T
    return Observation(p.norm(dim=-1), method="Monte Carlo (U fixed per shard)")


# ---------------------------------------------------------------- separability, first-type term, sparse splits, patterns


def _sep(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Def B.8: min(||(I - yy^T/||y||^2) x||, ||(I - xx^T/||x||^2) y||) over the last dim."""
    def perp(a, b):
        bn = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        return (a - (a * bn).sum(-1, keepdim=True) * bn).norm(dim=-1)
    return torch.minimum(perp(x, y), perp(y, x))


def _project_out(v: torch.Tensor, M: torch.Tensor | None) -> torch.Tensor:
    """(I - Q Q^T) v with Q an orthonormal basis of the columns of M (R, m, k) (Householder QR); v (R, n, m)."""
    if M is None or M.shape[-1] == 0:
        return v
    Q, _ = torch.linalg.qr(M)
    return v - (v @ Q) @ Q.transpose(-1, -2)


@QUANTITIES.register("rnn-projected-separation", "Lemma B.9 (args.which 'b9'): min over l = 0..L-1 and i != j of the Def B.8 "
                     "separability of (I - U_l U_l^T) h_{i,l+1} and (I - U_l U_l^T) h_{j,l+1}, divided by the measured "
                     "separability of the first tokens {x_{i,1}}; Claim B.10 ('b10'): min over l >= 1, i != j of "
                     "||(I - UU^T) h_{i,l+1}|| / sep_{l-1}(i, j), U = [U_l, the normalised projected h_{j,l+1}]; "
                     "'b10-paper': the same over the pairs that meet the hypothesis at the paper's delta_{l-1} = "
                     "delta (1 - 2 alpha - 1/(4L))^{l-1} of (B.10), alpha = 16 delta log m, divided by that delta_{l-1}; "
                     "a draw on which no pair meets the hypothesis is not valid (the claim's probability is "
                     "conditional on it)", networks=NET)
def projected_separation(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    fwd = net.forward(W, A, B, X)
    R, n, L, m = W.shape[0], X.shape[1], X.shape[2], W.shape[-1]
    if n < 2 or n * L >= m:
        raise EstimatorError(f"needs 2 <= n and n L < m (got n={n}, L={L}, m={m})")
    x1 = X[:, :, 0]
    d0 = torch.full((R,), math.inf, dtype=W.dtype)
    for i in range(n):
        for j in range(i + 1, n):
            d0 = torch.minimum(d0, _sep(x1[:, i], x1[:, j]))
    proj = []  # proj[l] = (I - U_l U_l^T) h_{., l+1}, (R, n, m)
    for l in range(L):
        proj.append(_project_out(fwd.h[:, :, l + 1], _states(fwd, l) if l > 0 else None))
    which = ctx.arg("which", "b9")
    best = torch.full((R,), math.inf, dtype=W.dtype)
    unmet = torch.full((R,), math.inf, dtype=W.dtype)  # 'b10-paper': over every pair, reported where none meets it
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if which == "b9":
                for l in range(L):
                    best = torch.minimum(best, _sep(proj[l][:, i], proj[l][:, j]) / d0)
            elif which in ("b10", "b10-paper"):
                if which == "b10-paper":
                    delta = ctx.p("delta")
                    base = 1 - 2 * 16 * delta * math.log(m) - 1 / (4 * L)
                    if base <= 0:
                        raise EstimatorError(f"(B.10)'s delta_l needs 1 - 2 alpha - 1/(4L) > 0 (got {base:.3g})")
                for l in range(1, L):
                    hat = proj[l][:, j] / proj[l][:, j].norm(dim=-1, keepdim=True).clamp_min(1e-300)
                    M2 = torch.cat([_states(fwd, l), hat.unsqueeze(-1)], dim=-1)
                    num = _project_out(fwd.h[:, i, l + 1].unsqueeze(1), M2).squeeze(1).norm(dim=-1)
                    sep = _sep(proj[l - 1][:, i], proj[l - 1][:, j])
                    if which == "b10":
                        best = torch.minimum(best, num / sep.clamp_min(1e-300))
                    else:
                        dl = delta * base ** (l - 1)
                        best = torch.minimum(best, torch.where(sep >= dl, num / dl, math.inf))
                        unmet = torch.minimum(unmet, num / dl)
            else:
                raise EstimatorError(f"args.which = {which!r}: one of b9, b10, b10-paper")
    if which == "b10-paper":  # a draw where no pair meets the hypothesis is a conditioning failure, not a success
        valid = torch.isfinite(best)
        return Observation(torch.where(valid, best, unmet), valid=valid, method="Householder QR projections, exact")
    return Observation(best, method="Householder QR projections, exact")


@QUANTITIES.register("rnn-first-type-term", "Claim C.3: max over i and l >= 2 of ||W' D_{l-1} g_{l-1}|| / ((tau0/sqrt m)(4l + 8 "
                     "+ (tau1 + tau2)/sqrt m)) with g' = g'_1 (tau1 = sqrt(m) ||g'_{l-1}||, tau2 = 0), W' the rank-one "
                     "perturbation aligned with D~ g~ (the case that makes the operator-norm step tight) and random ones; "
                     "valid where Lemma B.3's ||g~_{l-1}|| <= 4l holds", networks=NET)
def first_type_term(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    tau = _radius(ctx)
    m = W.shape[-1]
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        L = f0.L
        cands = [random_perturbation(ctx.generator, [W], tau)[0]]
        for i in range(X.shape[1]):  # W' = tau a b^T, b along D~_{i,L-1} g~_{i,L-1}
            v = f0.h[:, i, max(1, L - 1)]
            b = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300)
            a = ctx.randn(W.shape[0], m)
            a = a / a.norm(dim=-1, keepdim=True)
            cands.append(tau * a.unsqueeze(-1) * b.unsqueeze(-2))
        best = torch.zeros(W.shape[0], dtype=W.dtype)
        valid = torch.ones(W.shape[0], dtype=torch.bool)
        for l in range(2, L + 1):  # B.3: ||g~_{i,l-1}|| <= 4(l-2) + 8 = 4l
            valid &= (f0.g[:, :, l - 1].norm(dim=-1) <= 4 * l).all(-1)
        for Wp in cands:
            f1 = net.forward(W + Wp, A, B, X)
            for l in range(2, L + 1):
                Dg = f1.h[:, :, l - 1]  # D_{l-1} g_{l-1} = h_{l-1} at the perturbed W
                lhs = (Dg @ Wp.transpose(-1, -2)).norm(dim=-1)
                tau1 = math.sqrt(m) * (f1.g[:, :, l - 1] - f0.g[:, :, l - 1]).norm(dim=-1)
                rhs = tau * (4 * l + 8 + tau1 / math.sqrt(m))
                best = torch.maximum(best, (lhs / rhs).amax(-1))
    return Observation(best, valid=valid, method="random + aligned rank-one W'")


@QUANTITIES.register("rnn-sparse-split", "Claims C.5-C.6: ||(|y| - t)_+|| / (3 tau5 sqrt(tau4) log^2 m / m^{2/3}), t = 4 tau5 "
                     "log m / m (the optimal split's l2 part), y = W~ D~_l W~ ... D~_b W~ x, max over L >= l+1 >= b >= 1: "
                     "args.source 'random' (x with tau4 m^{2/3} random nonzeros, ||x|| = tau5/sqrt m; params tau4, tau5) "
                     "or 'flips' (x = D'_{i,1} g_{i,1}... the sign-change vector of the layer-2 flip adversary at radius "
                     "tau0/sqrt m, tau5 = 3 sqrt(m) ||g'||, tau4 = 10 (sqrt(m) ||g'||)^{2/3})", networks=NET)
def sparse_split(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, m = W.shape[0], W.shape[-1]
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        D = f0.mask()
        L = f0.L
        src = ctx.arg("source", "random")
        if src == "random":
            tau4, tau5 = ctx.p("tau4"), ctx.p("tau5")
            k = max(1, min(m, round(tau4 * m ** (2 / 3))))
            idx = torch.rand(R, m, generator=ctx.generator).argsort(-1)[:, :k]
            x = torch.zeros(R, m, dtype=W.dtype).scatter(-1, idx, torch.randn(R, k, generator=ctx.generator, dtype=W.dtype))
            x = x / x.norm(dim=-1, keepdim=True) * tau5 / math.sqrt(m)
            T5 = torch.full((R,), tau5, dtype=W.dtype)
            T4 = torch.full((R,), tau4, dtype=W.dtype)
            b0 = 1
        elif src == "flips":
            Wp = _flip_candidates(W, f0, _radius(ctx))[0]
            f1 = net.forward(W + Wp, A, B, X)
            x = (f1.mask()[:, 0, 2] - D[:, 0, 2]) * f1.g[:, 0, 2]  # D'_{1,2} g_{1,2}
            tau1 = math.sqrt(m) * (f1.g[:, 0, 2] - f0.g[:, 0, 2]).norm(dim=-1)
            T5, T4 = 3 * tau1, 10 * tau1 ** (2 / 3)
            b0 = 3
        else:
            raise EstimatorError(f"args.source = {src!r}: one of random, flips")
        t = 4 * T5 * math.log(m) / m
        bound = 3 * T5 * T4.sqrt() * math.log(m) ** 2 / m ** (2 / 3)
        # When the flip adversary cannot afford one flip at this radius (greedy_flip_vector returns u = 0, so W' = 0),
        # g' = 0, tau1 = 0 and x = D'g = 0: y = 0 splits as y1 = y2 = 0 and meets both zero bounds, so the ratio is
        # 0, not 0/0. bound = 0 only happens there (tau1 = 0 means W'h_1 = 0, i.e. W' = 0).
        safe = torch.where(bound > 0, bound, torch.ones_like(bound))

        def ratio(y: torch.Tensor) -> torch.Tensor:
            return torch.where(bound > 0, (y.abs() - t.unsqueeze(-1)).clamp_min(0).norm(dim=-1) / safe, 0.0)

        best = torch.zeros(R, dtype=W.dtype)
        for b in range(b0, L + 1):
            y = (x.unsqueeze(1) @ W.transpose(-1, -2)).squeeze(1)  # W~ x (l + 1 = b)
            best = torch.maximum(best, ratio(y))
            for l in range(b, L):
                y = ((D[:, 0, l] * y).unsqueeze(1) @ W.transpose(-1, -2)).squeeze(1)  # W~ D~_l ... (sequence 1's patterns)
                best = torch.maximum(best, ratio(y))
    return Observation(best, extras={"no_flip": (bound <= 0).to(W.dtype)}, method=f"x from {src}; exact optimal split")


@QUANTITIES.register("rnn-arbitrary-pattern-norm", "Claim C.8: max over i and segments of ||prod (D~_l + D'_l) W~||_2 for "
                     "D' with entries in {0, 1} on k = s^2 m^{2/3} coordinates per layer (args.s an expression), chosen by "
                     "an alternating heuristic: the top-k coordinates of |W~ z| along the current top singular vector's "
                     "path (3 rounds; exact SVD each round) - a lower estimate of the sup over arbitrary D'", networks=NET)
def arbitrary_pattern_norm(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, n, m = W.shape[0], X.shape[1], W.shape[-1]
    with torch.no_grad():
        D = net.forward(W, A, B, X).mask()
        L = D.shape[2] - 1
        k = max(1, min(m, round(_expr_arg(ctx, "s", 1.0) ** 2 * m ** (2 / 3))))
        best = torch.zeros(R, dtype=W.dtype)
        for i in range(n):
            for l1 in range(1, L + 1):
                for l2 in range(l1, L + 1):
                    Dp = torch.zeros(R, l2 - l1 + 1, m, dtype=W.dtype)
                    for _ in range(int(ctx.arg("rounds", 3))):
                        P = torch.eye(m, dtype=W.dtype).expand(R, m, m)
                        for j, l in enumerate(range(l1, l2 + 1)):
                            P = (D[:, i, l] + Dp[:, j]).unsqueeze(-1) * (W @ P)
                        best = torch.maximum(best, torch.linalg.matrix_norm(P, ord=2))
                        _, _, Vh = torch.linalg.svd(P)
                        z = Vh[:, 0]  # top right singular vector: follow its path and grow D' there
                        for j, l in enumerate(range(l1, l2 + 1)):
                            wz = (W @ z.unsqueeze(-1)).squeeze(-1)
                            idx = wz.abs().topk(k, dim=-1).indices
                            Dp[:, j] = torch.zeros(R, m, dtype=W.dtype).scatter(-1, idx, 1.0)
                            z = (D[:, i, l] + Dp[:, j]) * wz
                            z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return Observation(best, method=f"alternating heuristic, k = {k} (lower estimate)")


@QUANTITIES.register("rnn-fake-gradient-stability", "Lemma E.8 / Claim E.9: Delta_k = | ||fake grad_k f(W + W''_j)||^2 - ||fake "
                     "grad_k f(W)||^2 | / max ||loss||^2 for W''_j = s e_j v_{i*,l*}^T (s = theta sqrt(2) N(0, 2/m): a resampling "
                     "of u_j, Lemma E.5a), (i*, l*) the argmax of the fixed iid N(0,1) losses: args.which 'sum' (sum over a "
                     "random N containing j, |N| = args.Nset), 'max' (max over k), 'frac' (fraction of k with Delta_k > "
                     "args.thr, at least the round-off level)", networks=NET)
def fake_gradient_stability(ctx: Context) -> Observation:
    W, A, B, X = _setup(ctx)
    R, n, L = X.shape[:3]
    m, d = W.shape[-1], B.shape[-2]
    theta = ctx.p("theta")
    lv = torch.zeros(R, n, L + 1, d, dtype=ctx.dtype)
    lv[:, :, 2:] = ctx.randn(R, n, L - 1, d)
    norms = lv.norm(dim=-1)
    star = norms.flatten(1).argmax(-1)
    istar, lstar = (star // (L + 1)), (star % (L + 1))
    with torch.no_grad():
        f0 = net.forward(W, A, B, X)
        ar = torch.arange(R)
        v = torch.stack([_fresh_direction(f0, int(i), max(1, min(int(ls), L - 1)))[r] for r, (i, ls) in enumerate(zip(istar, lstar))])
        j = torch.randint(0, m, (R,), generator=ctx.generator)
        s = theta * math.sqrt(2) * torch.randn(R, generator=ctx.generator, dtype=W.dtype) * math.sqrt(2 / m)
        Wpp = torch.zeros_like(W)
        Wpp[ar, j] = s.unsqueeze(-1) * v
        g0 = (net.gradient_from_losses(W, B, f0, lv) ** 2).sum(-1)
        g1 = (net.gradient_from_losses(W + Wpp, B, net.forward(W + Wpp, A, B, X), lv) ** 2).sum(-1)
        mx = (norms ** 2).flatten(1).amax(-1)
        delta = (g1 - g0).abs() / mx.unsqueeze(-1)
        which = ctx.arg("which", "sum")
        if which == "sum":
            Ns = max(1, min(m, round(_expr_arg(ctx, "Nset", 16))))
            pick = torch.rand(R, m, generator=ctx.generator)
            pick[ar, j] = -1.0  # j is in N
            idx = pick.argsort(-1)[:, :Ns]
            val = delta.gather(-1, idx).sum(-1)
        elif which == "max":
            val = delta.amax(-1)
        elif which == "frac":  # fraction of k whose change exceeds args.thr (an expression; default: any change)
            thr = _expr_arg(ctx, "thr", 0.0)
            floor = 1e-12 * (g0.amax(-1) / mx).unsqueeze(-1)  # round-off of unchanged rows
            val = (delta > torch.clamp(floor, min=thr)).to(W.dtype).mean(-1)
        else:
            raise EstimatorError(f"args.which = {which!r}: one of sum, max, frac")
    return Observation(val, method="closed-form fake gradients")


@QUANTITIES.register("rnn-margin-fraction", "Lemmas D.3-D.5 with a threshold b/sqrt(m) (b = args.b, an expression): g_{i,l+1} = "
                     "W h_{i,l} + A x_{i,l+1}, (i*, l*) = (1, args.lstar); 'small' (D.3) |N2|/m, N2 = {k: |g_{i*,l*+1,k}| <= "
                     "b/sqrt m}; 'same-layer' (D.4) |N3|/|N2| with N2 from args.b2, N3 = {k in N2: |g_{i,l*+1,k}| >= b/sqrt m "
                     "for all i != i*}; 'later' (D.5) |N4|/|N3| with N4 = {k in N3: |g_{i,l+1,k}| >= b/sqrt m, all i, l > l*}",
                     networks=NET)
def margin_fraction(ctx: Context) -> Observation:
    fwd, method = _forward_at_init(ctx)
    n, L = fwd.h.shape[1], fwd.L
    m = fwd.h.shape[-1]
    ls = int(_expr_arg(ctx, "lstar", 1))
    if not 1 <= ls <= L - 1:
        raise EstimatorError(f"args.lstar = {ls}: must lie in 1..L-1 (g_{{l*+1}} must exist)")
    thr = _expr_arg(ctx, "b", 0.01) / math.sqrt(m)
    G = fwd.g  # G[:, i, l] = g_{i,l} = W h_{i,l-1} + A x_{i,l}
    which = ctx.arg("which", "small")
    small = G[:, 0, ls + 1].abs() <= (thr if which == "small" else _expr_arg(ctx, "b2", 0.1) / math.sqrt(m))
    if which == "small":
        return Observation(small.to(G.dtype).mean(-1), method=method)
    N3 = small & (G[:, 1:, ls + 1].abs() >= thr).all(1) if n > 1 else small
    if which == "same-layer":
        val = N3.sum(-1) / small.sum(-1).clamp_min(1)
        return Observation(val.to(G.dtype), valid=small.any(-1), method=method)
    if which == "later":
        N4 = N3 & (G[:, :, ls + 2:].abs() >= thr).all(-2).all(1) if ls + 2 <= L else N3
        val = N4.sum(-1) / N3.sum(-1).clamp_min(1)
        return Observation(val.to(G.dtype), valid=N3.any(-1), method=method)
    raise EstimatorError(f"args.which = {which!r}: one of small, same-layer, later")
