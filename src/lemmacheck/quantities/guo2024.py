"""Quantities of the guo2024 setting (deep leaky-ReLU FNN, rescaled σ̃_α, Algorithm 1 initialisation).

Parameter names follow the paper: m (width), L (number of trained hidden layers), n, p (input dimension), d (output
dimension, default 1), alpha (α < 1), delta (separation of Assumption 2.1), omega (perturbation radius ω: every
layer's ||W'_l||_2 ≤ ω, i.e. the appendix's ||W'||_2 = max_l ||W'_l||_2 ≤ ω). Claims draw inputs with
`inputs = { kind = "unit-sphere", n = "n", d = "p", separation = "delta" }` (d = "p": the generator's d is the
input dimension). Losses use the Appendix-B ½ convention unless `args.half = false`.
"""

from __future__ import annotations

import math

import torch

from ..context import Context, Observation
from ..errors import EstimatorError
from ..nets import guo2024 as net
from ..registry import QUANTITIES
from ..search import SEARCH_ORDER, greedy_flip_vector, maximise, random_perturbation

NET = (net.NAME,)


def _alpha(ctx: Context) -> float:
    return net.check_alpha(ctx.p("alpha"))


def _inputs(ctx: Context) -> torch.Tensor:
    X = ctx.inputs()
    p = ctx.i("p")
    if X.shape[-1] != p:
        raise EstimatorError(f"inputs have dimension {X.shape[-1]}, expected p = {p}: the claim's inputs table needs "
                             "d = \"p\" (the generator's d is the input dimension)")
    return X


def _init(ctx: Context, X: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    return net.init(ctx.generator, ctx.replicates, X.shape[-1], ctx.i("m"), ctx.i("d", 1), ctx.i("L"), ctx.dtype)


def _labels(ctx: Context, n: int) -> torch.Tensor:
    """y_i ∈ R^d with E||y_i||² = 1 (the paper asks ||y_i|| ≤ O(1)): args.labels gaussian | rademacher | zero."""
    d = ctx.i("d", 1)
    kind = ctx.arg("labels", "gaussian")
    shape = (ctx.replicates, n, d)
    if kind == "gaussian":
        return ctx.randn(*shape) / math.sqrt(d)
    if kind == "rademacher":
        return (torch.randint(0, 2, shape, generator=ctx.generator).to(ctx.dtype) * 2 - 1) / math.sqrt(d)
    if kind == "zero":
        return torch.zeros(shape, dtype=ctx.dtype)
    raise EstimatorError(f"args.labels = {kind!r}: one of gaussian, rademacher, zero")


def _features(ctx: Context, X: torch.Tensor, alpha: float) -> tuple[list[torch.Tensor], str]:
    m, L = ctx.i("m"), ctx.i("L")
    if ctx.arg("sampler", "conditional") == "full":
        A, Ws, B = _init(ctx, X)
        return net.forward(A, Ws, B, X, alpha).h, "full forward pass"
    return net.conditional_features(ctx.generator, X, m, L, alpha), "Gaussian-conditioning sampler (exact in law)"


def _offdiag_max(M: torch.Tensor) -> torch.Tensor:
    n = M.shape[-1]
    if n < 2:
        raise EstimatorError("this quantity needs n >= 2 inputs")
    eye = torch.eye(n, dtype=torch.bool)
    return M.masked_fill(eye, -torch.inf).amax(dim=(-1, -2))


def _perturbed(ctx: Context) -> bool:
    """Whether the claim evaluates at W = W^(0) + W' with ||W'_l||_2 ≤ omega found by its search."""
    return "omega" in ctx.params and SEARCH_ORDER[ctx.search] > 0


# ---------------------------------------------------------------- at initialisation: forward


@QUANTITIES.register("guo2024-layer-norm-deviation", "max over l in {0,...,L}, i in [n] of | ||h_{i,l}|| - 1 | at "
                     "Algorithm-1 initialisation (Lemma B.1); args.squared uses | ||h||^2 - 1 |; exact "
                     "Gaussian-conditioning sampler unless args.sampler = 'full'", networks=NET)
def layer_norm_deviation(ctx: Context) -> Observation:
    X = _inputs(ctx)
    hs, method = _features(ctx, X, _alpha(ctx))
    norms = torch.stack([h.norm(dim=-1) for h in hs], -1)  # (R, n, L+1)
    dev = (norms ** 2 - 1).abs() if ctx.arg("squared", False) else (norms - 1).abs()
    worst_layer = dev.amax(dim=1).argmax(dim=-1).to(ctx.dtype)
    return Observation(dev.amax(dim=(-1, -2)), extras={"worst_layer": worst_layer}, method=method)


@QUANTITIES.register("guo2024-feature-decorrelation", "min over l in [L] of 1 - max_{i != j} <h_{i,l}/||h_{i,l}||, "
                     "h_{j,l}/||h_{j,l}||>^2 at initialisation (Lemma B.2); args.weight = 'proof' multiplies layer "
                     "l by 32 (l+1)^2 (the proof's explicit form: >= delta^2)", networks=NET)
def feature_decorrelation(ctx: Context) -> Observation:
    X = _inputs(ctx)
    hs, method = _features(ctx, X, _alpha(ctx))
    proof = ctx.arg("weight", "none") == "proof"
    vals = []
    for l in range(1, len(hs)):
        hh = hs[l] / hs[l].norm(dim=-1, keepdim=True)
        v = 1 - _offdiag_max((hh @ hh.transpose(-1, -2)) ** 2)
        vals.append(v * 32 * (l + 1) ** 2 if proof else v)
    V = torch.stack(vals, -1)
    return Observation(V.amin(-1), extras={"worst_layer": V.argmin(-1).to(ctx.dtype) + 1}, method=method)


@QUANTITIES.register("guo2024-layer-separation", "min over l in {0,...,L} of 2(l+1) min_{i != j} ||h_{i,l} - "
                     "h_{j,l}|| at initialisation (eq. (34): >= delta)", networks=NET)
def layer_separation(ctx: Context) -> Observation:
    X = _inputs(ctx)
    hs, method = _features(ctx, X, _alpha(ctx))
    vals = []
    for l, h in enumerate(hs):
        D = torch.cdist(h, h)
        vals.append(2 * (l + 1) * (-_offdiag_max(-D)))
    V = torch.stack(vals, -1)
    return Observation(V.amin(-1), extras={"worst_layer": V.argmin(-1).to(ctx.dtype)}, method=method)


# ---------------------------------------------------------------- operator norms


def _product_norms(Ws: list[torch.Tensor], D: list[torch.Tensor]) -> torch.Tensor:
    """max over i, 0 <= a <= b <= L-1 of ||W_{b+1} D_b W_b ... W_{a+1} D_a||_2 (D_0 = I), exact singular values.

    Built by extending each product on the left, so all L(L+1)/2 segments cost L(L+1)/2 batched matmuls."""
    L = len(Ws)
    best = torch.zeros(Ws[0].shape[0], dtype=Ws[0].dtype)
    for a in range(L):
        P = Ws[a].unsqueeze(1) * D[a].unsqueeze(-2)  # W_{a+1} D_a, (R, n, m, m)
        for b in range(a, L):
            if b > a:
                P = net.left_mul(Ws[b], D[b].unsqueeze(-1) * P)
            best = torch.maximum(best, torch.linalg.matrix_norm(P, ord=2).amax(-1))
    return best


@QUANTITIES.register("guo2024-product-spectral-norm", "max over i and 0 <= a <= b <= L-1 of ||W_{b+1} D_{i,b} W_b "
                     "... W_{a+1} D_{i,a}||_2 (D_0 = I), exact SVD (Lemma B.3 item 1); with omega and a search: "
                     "args.variant 'patterns' (B.5 item 1) or 'all' (B.5 item 2) at perturbed W", networks=NET)
def product_spectral_norm(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    variant = ctx.arg("variant", "all")

    def norms(Wt: list[torch.Tensor]) -> torch.Tensor:
        fwd = net.forward(A, Wt, B, X, alpha)
        D = [fwd.slope(l) for l in range(len(Wt))]
        if variant == "patterns":  # W^(0) with the perturbed patterns D^(0) + D' (Lemma B.5 item 1)
            return _product_norms(Ws, D)
        if variant != "all":
            raise EstimatorError(f"args.variant = {variant!r}: one of all, patterns")
        return _product_norms(Wt, D)

    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(norms(Ws), method="exact-svd at initialisation")
    # With W^(0) kept, the target depends on W' only through the (piecewise constant) patterns: no gradient.
    search = "random" if variant == "patterns" else ctx.search
    value, found = maximise(norms, Ws, ctx.p("omega"), search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(value, extras={"found_by": found}, method=f"exact-svd; search={search}")


@QUANTITIES.register("guo2024-back-operator-norm", "max over i, a in [L] of ||Back_{i,a}||_2 = ||B D_{i,L} W_L ... "
                     "D_{i,a} W_a||_2 at initialisation, exact (Lemma B.3 item 2); args.include_B adds a = L+1 "
                     "(Back = B)", networks=NET)
def back_operator_norm(ctx: Context) -> Observation:
    X = _inputs(ctx)
    A, Ws, B = _init(ctx, X)
    fwd = net.forward(A, Ws, B, X, _alpha(ctx))
    backs = net.back_matrices(Ws, B, fwd)  # a = 1..L+1
    if not ctx.arg("include_B", False):
        backs = backs[:-1]
    vals = torch.stack([torch.linalg.matrix_norm(M, ord=2).amax(-1) for M in backs], -1)
    return Observation(vals.amax(-1), extras={"worst_a": vals.argmax(-1).to(ctx.dtype) + 1}, method="exact-svd")


@QUANTITIES.register("guo2024-sample-gradient-norm", "max (args.reduce='min': min) over i, l of ||G_{i,l}(v; W0)||_F^2"
                     " / ||v||^2 = ||h_{i,l-1}||^2 ||D_{i,l} Back_{i,l+1}^T v||^2/||v||^2 with v the worst "
                     "(args.v='sup', Lemma B.6), the best ('inf') or a random direction ('random', E11)",
                     networks=NET)
def sample_gradient_norm(ctx: Context) -> Observation:
    X = _inputs(ctx)
    A, Ws, B = _init(ctx, X)
    fwd = net.forward(A, Ws, B, X, _alpha(ctx))
    mode = ctx.arg("v", "sup")
    if mode == "random":
        v = ctx.randn(ctx.replicates, X.shape[1], ctx.i("d", 1))
        zs = net.backward_vectors(Ws, B, fwd, v)
        gains = [z.norm(dim=-1) ** 2 / (v.norm(dim=-1) ** 2) for z in zs]
    elif mode in ("sup", "inf"):
        J = net.back_operators(Ws, B, fwd)  # (R, n, m, d)
        sv = [torch.linalg.svdvals(j) for j in J]
        gains = [(s[..., 0] if mode == "sup" else s[..., -1]) ** 2 for s in sv]
    else:
        raise EstimatorError(f"args.v = {mode!r}: one of sup, inf, random")
    G = torch.stack([gains[l] * fwd.h[l - 1].norm(dim=-1) ** 2 for l in range(1, fwd.L + 1)], -1)  # (R, n, L)
    G = G.flatten(1)
    value = G.amin(-1) if ctx.arg("reduce", "max") == "min" else G.amax(-1)
    return Observation(value, method=f"exact ({mode} over v)")


# ---------------------------------------------------------------- gradients and Gram matrices


def _grams(A: torch.Tensor, Ws: list[torch.Tensor], B: torch.Tensor, X: torch.Tensor, alpha: float) -> list[torch.Tensor]:
    fwd = net.forward(A, Ws, B, X, alpha)
    J = net.back_operators(Ws, B, fwd)
    return [net.layer_gram(fwd, J, l) for l in range(1, fwd.L + 1)]


def _lambda_min(Ks: list[torch.Tensor], layer: str) -> torch.Tensor:
    if layer == "sum":
        return torch.linalg.eigvalsh(sum(Ks))[..., 0]
    if layer == "min":
        return torch.stack([torch.linalg.eigvalsh(K)[..., 0] for K in Ks], -1).amin(-1)
    raise EstimatorError(f"args.layer = {layer!r}: one of min, sum")


@QUANTITIES.register("guo2024-gram-lambda-min", "lambda_min of the per-layer gradient Gram K_l (args.layer='min': "
                     "min over l, Lemma B.7 worst {v_i}) or of K = sum_l K_l ('sum': inf over residuals of "
                     "||grad L||_F^2/L = 2 lambda_min, Lemma 4.2 (10)); at init, or minimised over ||W'|| <= omega",
                     networks=NET)
def gram_lambda_min(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    layer = ctx.arg("layer", "min")
    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(_lambda_min(_grams(A, Ws, B, X, alpha), layer), method="exact eigvalsh at init")
    neg, found = maximise(lambda Wt: -_lambda_min(_grams(A, Wt, B, X, alpha), layer), Ws, ctx.p("omega"),
                          ctx.search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(-neg, extras={"found_by": found}, method=f"exact eigvalsh; search={ctx.search} (minimised)")


@QUANTITIES.register("guo2024-gradient-loss-ratio", "||grad_{W_l} L(W)||_F^2 / L(W) for labels args.labels: max over "
                     "l (args.layer='max', Lemma 4.2 (9)) or summed over l ('sum', (10)); at init or, with omega "
                     "and a search, at the W' of the ball that maximises ('max') or minimises ('sum') it",
                     networks=NET)
def gradient_loss_ratio(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    Y = _labels(ctx, X.shape[1])
    half = bool(ctx.arg("half", True))
    layer = ctx.arg("layer", "max")
    if layer not in ("max", "sum"):
        raise EstimatorError(f"args.layer = {layer!r}: one of max, sum")

    def ratio(Wt: list[torch.Tensor]) -> torch.Tensor:
        fwd = net.forward(A, Wt, B, X, alpha)
        zs = net.backward_vectors(Wt, B, fwd, fwd.out - Y)
        c = 1.0 if half else 2.0
        # ||z h^T summed over i||_F^2 via the n x n Grams: no m x m gradient is formed.
        per = torch.stack([c ** 2 * ((zs[l] @ zs[l].transpose(-1, -2)) * (fwd.h[l - 1] @ fwd.h[l - 1].transpose(-1, -2)))
                           .sum(dim=(-1, -2)) for l in range(1, fwd.L + 1)], -1)
        agg = per.amax(-1) if layer == "max" else per.sum(-1)
        return agg / net.loss(fwd.out, Y, half)

    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(ratio(Ws), method="closed form at init")
    sign = 1.0 if layer == "max" else -1.0
    val, found = maximise(lambda Wt: sign * ratio(Wt), Ws, ctx.p("omega"), ctx.search, ctx.generator,
                          steps=int(ctx.arg("steps", 10)))
    return Observation(sign * val, extras={"found_by": found}, method=f"closed form; search={ctx.search}")


@QUANTITIES.register("guo2024-ntk-limit-lambda-min", "lambda_min of the infinite-width NTK (closed-form leaky-ReLU "
                     "arc-cosine recursion, per output coordinate, in units of m/(2d)) on the claim's inputs: "
                     "sum over layers (args.layer='sum') or min over l", networks=NET)
def ntk_limit_lambda_min(ctx: Context) -> Observation:
    X = _inputs(ctx)
    thetas = net.limit_layer_ntks(X, ctx.i("L"), _alpha(ctx))
    return Observation(_lambda_min(thetas, ctx.arg("layer", "sum")), method="closed form (m -> infinity)")


# ---------------------------------------------------------------- perturbations


def _forward_change(which: str, fwd0: net.Forward, fwd: net.Forward) -> torch.Tensor:
    if which == "h":
        diffs = [(a - b).norm(dim=-1) for a, b in zip(fwd.h[1:], fwd0.h[1:])]
    elif which == "g":
        diffs = [(a - b).norm(dim=-1) for a, b in zip(fwd.g[1:], fwd0.g[1:])]
    elif which == "Bh":
        diffs = [(fwd.out - fwd0.out).norm(dim=-1)]
    else:
        raise EstimatorError(f"args.which = {which!r}: one of h, g, Bh")
    return torch.stack(diffs, -1).amax(dim=(-1, -2))


@QUANTITIES.register("guo2024-forward-perturbation", "sup over ||W'_l||_2 <= omega of max_{l,i} ||h_{i,l}(W0+W') - "
                     "h_{i,l}(W0)|| (args.which 'g': pre-activations; 'Bh': ||B h'_{i,L}||), a lower estimate by "
                     "the claim's search (Lemma B.4 item 3, Lemma B.8)", networks=NET)
def forward_perturbation(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    with torch.no_grad():
        fwd0 = net.forward(A, Ws, B, X, alpha)
    which = ctx.arg("which", "h")
    value, found = maximise(lambda Wt: _forward_change(which, fwd0, net.forward(A, Wt, B, X, alpha)), Ws,
                            ctx.p("omega"), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 20)))
    return Observation(value, extras={"found_by": found}, method=f"search={ctx.search}")


def _pattern_stat(stat: str, fwd0: net.Forward, fwd: net.Forward) -> torch.Tensor:
    vals = []
    for l in range(1, fwd.L + 1):
        flip = (fwd.g[l] >= 0) != (fwd0.g[l] >= 0)
        if stat == "count":
            vals.append(flip.sum(-1).to(fwd.g[l].dtype))
        elif stat == "dg-norm":  # ||D'_l g_l||, D' = D - D^(0) (entries ±√c(α) on flips), g_l perturbed
            Dp = fwd.slope(l) - fwd0.slope(l)
            vals.append((Dp * fwd.g[l]).norm(dim=-1))
        else:
            raise EstimatorError(f"args.statistic = {stat!r}: one of count, dg-norm")
    return torch.stack(vals, -1).amax(dim=(-1, -2))


@QUANTITIES.register("guo2024-pattern-changes", "sup over ||W'_l||_2 <= omega of max_{l,i} ||D'_{i,l}||_0 (number of "
                     "activation-pattern changes; args.statistic 'dg-norm': ||D'_{i,l} g_{i,l}||), by random "
                     "perturbations and, at search >= adversarial, the rank-one sign-flip adversary (Lemma B.4 item 1)",
                     networks=NET)
def pattern_changes(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    omega = ctx.p("omega")
    stat = ctx.arg("statistic", "count")
    with torch.no_grad():
        fwd0 = net.forward(A, Ws, B, X, alpha)
    level = SEARCH_ORDER[ctx.search]
    with torch.no_grad():
        best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
        found = torch.zeros_like(best)
        if level >= 1:
            draws = int(ctx.arg("random_draws", 4))
            for _ in range(draws):
                Wt = [W + P for W, P in zip(Ws, random_perturbation(ctx.generator, Ws, omega))]
                best = torch.maximum(best, _pattern_stat(stat, fwd0, net.forward(A, Wt, B, X, alpha)))
        if level >= 3:  # D6: for each layer l and input i, W'_l = ω u ĥ_{i,l-1}ᵀ flipping the smallest |g_{i,l,j}|
            n = X.shape[1]
            for l in range(1, fwd0.L + 1):
                for i in range(n):
                    hprev = fwd0.h[l - 1][:, i]
                    hn = hprev.norm(dim=-1)
                    u = greedy_flip_vector(fwd0.g[l][:, i], hn, omega)
                    u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-300)  # ||W'_l|| = ω exactly, same flips
                    Wt = list(Ws)
                    Wt[l - 1] = Ws[l - 1] + omega * u.unsqueeze(-1) * (hprev / hn.unsqueeze(-1)).unsqueeze(-2)
                    val = _pattern_stat(stat, fwd0, net.forward(A, Wt, B, X, alpha))
                    found = torch.where(val > best, torch.full_like(found, 3), found)
                    best = torch.maximum(best, val)
    return Observation(best, extras={"found_by": found}, method=f"search={ctx.search}"
                       + (" + rank-one sign-flip adversary" if level >= 3 else ""))


@QUANTITIES.register("guo2024-linearization-error", "sup over ||W - W0||_2 <= omega (per layer) of max_{i,k} |f_k(x_i;"
                     " W) - f_k(x_i; W0) - <grad f_k(x_i; W0), W - W0>| (Lemma B.11), a lower estimate by the "
                     "claim's search", networks=NET)
def linearization_error(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    with torch.no_grad():
        fwd0 = net.forward(A, Ws, B, X, alpha)
        J = net.back_operators(Ws, B, fwd0)  # J[l] = D_l Back_{l+1}^T, (R, n, m, d)

    def err(Wt: list[torch.Tensor]) -> torch.Tensor:
        out = net.forward(A, Wt, B, X, alpha).out
        # <∇_{W_l} f_k(x_i), W'_l> = z_{i,l}(e_k)^T W'_l h_{i,l-1}
        lin = sum(torch.einsum("rnmk,rmj,rnj->rnk", J[l], Wt[l - 1] - Ws[l - 1], fwd0.h[l - 1])
                  for l in range(1, len(Ws) + 1))
        return (out - fwd0.out - lin).abs().amax(dim=(-1, -2))

    value, found = maximise(err, Ws, ctx.p("omega"), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 20)))
    return Observation(value, extras={"found_by": found}, method=f"search={ctx.search}")
