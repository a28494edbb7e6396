"""Quantities of the guo2024 setting (deep leaky-ReLU FNN, rescaled σ̃_α, Algorithm 1 initialisation).

Parameter names follow the paper: m (width), L (number of trained hidden layers), n, p (input dimension), d (output
dimension, default 1), alpha (α < 1), delta (separation of Assumption 2.1), omega (perturbation radius ω: every
layer's ||W'_l||_2 ≤ ω, i.e. the appendix's ||W'||_2 = max_l ||W'_l||_2 ≤ ω). Claims draw inputs with
`inputs = { kind = "unit-sphere", n = "n", d = "p", separation = "delta" }` (d = "p": the generator's d is the
input dimension). Losses use the Appendix-B ½ convention unless `args.half = false`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lemmacheck.context import Context, Observation
from lemmacheck.errors import EstimatorError
from lemmacheck.inputs import min_separation
from lemmacheck.linalg import operator_norm
from lemmacheck.registry import QUANTITIES
from lemmacheck.search import SEARCH_ORDER, greedy_flip_vector, maximise, random_perturbation
from lemmacheck.verdicts import ROUNDING_ULPS

from . import network as net

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
    """y_i ∈ R^d with E||y_i||² = 1 (the paper asks ||y_i|| ≤ O(1)): args.labels fixed | gaussian | rademacher | zero |
    antipodal-odd (y_{2k+1} = -y_{2k}, for datasets of antipodal pairs x_{2k+1} = -x_{2k}). 'fixed' takes the n d
    entries (i-major) from ctx.coefficients, divided by sqrt(d): Gaussian (the same draw as 'gaussian') unless the
    claim declares inputs.coefficients, so runs and hunts move the labels (ones, parity, first; at d = 1 also a null
    vector of the data, sum_i y_i x_i = 0)."""
    d = ctx.i("d", 1)
    kind = ctx.arg("labels", "gaussian")
    shape = (ctx.replicates, n, d)
    if kind == "fixed":
        return ctx.coefficients(n * d).to(ctx.dtype).reshape(shape) / math.sqrt(d)
    if kind == "gaussian":
        return ctx.randn(*shape) / math.sqrt(d)
    if kind == "rademacher":
        return (torch.randint(0, 2, shape, generator=ctx.generator).to(ctx.dtype) * 2 - 1) / math.sqrt(d)
    if kind == "zero":
        return torch.zeros(shape, dtype=ctx.dtype)
    if kind == "antipodal-odd":  # Rademacher with y_{2k+1} = -y_{2k}: odd labels on geometry = "antipodal-pairs"
        y = (torch.randint(0, 2, shape, generator=ctx.generator).to(ctx.dtype) * 2 - 1) / math.sqrt(d)
        y[:, 1::2] = -y[:, 0:n - 1:2]
        return y
    raise EstimatorError(f"args.labels = {kind!r}: one of fixed, gaussian, rademacher, zero, antipodal-odd")


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


def _omega(ctx: Context) -> float:
    """The radius ω: parameter `omega`, or `iomega` = 1/ω (claims sweep ω inverted so that ω → 0, the statements'
    asymptotic direction, is parameter → ∞ for the scaling fit)."""
    return ctx.p("omega") if "omega" in ctx.params else 1.0 / ctx.p("iomega")


def _perturbed(ctx: Context) -> bool:
    """Whether the claim evaluates at W = W^(0) + W' with ||W'_l||_2 ≤ omega found by its search."""
    return ("omega" in ctx.params or "iomega" in ctx.params) and SEARCH_ORDER[ctx.search] > 0


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
    """max over i, 0 <= a <= b <= L-1 of ||W_{b+1} D_b W_b ... W_{a+1} D_a||_2 (D_0 = I), exact (linalg.operator_norm).

    Built by extending each product on the left, so all L(L+1)/2 segments cost L(L+1)/2 batched matmuls."""
    L = len(Ws)
    best = torch.zeros(Ws[0].shape[0], dtype=Ws[0].dtype)
    for a in range(L):
        P = Ws[a].unsqueeze(1) * D[a].unsqueeze(-2)  # W_{a+1} D_a, (R, n, m, m)
        for b in range(a, L):
            if b > a:
                P = net.left_mul(Ws[b], D[b].unsqueeze(-1) * P)
            best = torch.maximum(best, operator_norm(P).amax(-1))
    return best


@QUANTITIES.register("guo2024-product-spectral-norm", "max over i and 0 <= a <= b <= L-1 of ||W_{b+1} D_{i,b} W_b "
                     "... W_{a+1} D_{i,a}||_2 (D_0 = I), exact (linalg.operator_norm) (Lemma B.3 item 1); with omega and a search: "
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
            return Observation(norms(Ws), method="operator-norm (Gram top eigenvalue, rounded up) at initialisation")
    # With W^(0) kept, the target depends on W' only through the (piecewise constant) patterns: no gradient.
    search = "random" if variant == "patterns" else ctx.search
    value, found = maximise(norms, Ws, _omega(ctx), search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(value, extras={"found_by": found}, method=f"linalg.operator_norm; search={search}")


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
    vals = torch.stack([operator_norm(M).amax(-1) for M in backs], -1)
    return Observation(vals.amax(-1), extras={"worst_a": vals.argmax(-1).to(ctx.dtype) + 1}, method="operator-norm (Gram top eigenvalue, rounded up)")


@QUANTITIES.register("guo2024-sample-gradient-norm", "max (args.reduce='min': min) over i, l of ||G_{i,l}(v; W0)||_F^2"
                     " / ||v||^2 = ||h_{i,l-1}||^2 ||D_{i,l} Back_{i,l+1}^T v||^2/||v||^2 with v the worst "
                     "(args.v='sup', Lemma B.6), the best ('inf') or a random direction ('random', E11)",
                     networks=NET)
def sample_gradient_norm(ctx: Context) -> Observation:
    X = _inputs(ctx)
    mode = ctx.arg("v", "sup")
    if mode not in ("sup", "inf", "random"):
        raise EstimatorError(f"args.v = {mode!r}: one of sup, inf, random")
    if ctx.arg("sampler", "conditional") == "full":
        A, Ws, B = _init(ctx, X)
        fwd = net.forward(A, Ws, B, X, _alpha(ctx))
        hs, J, how = fwd.h, net.back_operators(Ws, B, fwd), "full network"
    else:  # the value depends on the W_l only through the forward and the back operators: no m x m draw
        hs, J = net.conditional_back_operators(ctx.generator, X, ctx.i("m"), ctx.i("d", 1), ctx.i("L"), _alpha(ctx))
        how = "Gaussian-conditioning sampler (exact in law)"
    if mode == "random":
        v = ctx.randn(ctx.replicates, X.shape[1], ctx.i("d", 1))
        gains = [(j @ v.unsqueeze(-1)).squeeze(-1).norm(dim=-1) ** 2 / (v.norm(dim=-1) ** 2) for j in J]
    else:
        sv = [torch.linalg.svdvals(j) for j in J]  # J (R, n, m, d)
        gains = [(s[..., 0] if mode == "sup" else s[..., -1]) ** 2 for s in sv]
    G = torch.stack([gains[l] * hs[l - 1].norm(dim=-1) ** 2 for l in range(1, len(hs))], -1)  # (R, n, L)
    G = G.flatten(1)
    value = G.amin(-1) if ctx.arg("reduce", "max") == "min" else G.amax(-1)
    return Observation(value, method=f"exact ({mode} over v); {how}")


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
    # `+ 0·ΣW` keeps the graph when K depends on W only through the activation patterns (L = 1: K_1 = K_1(A, D_1, B)),
    # where the gradient search then has nothing to follow and reduces to its random starts.
    neg, found = maximise(lambda Wt: -_lambda_min(_grams(A, Wt, B, X, alpha), layer) + 0 * Wt[0].sum(dim=(-1, -2)),
                          Ws, _omega(ctx),
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
    with torch.no_grad():
        Y = _targets(ctx, X, net.forward(A, Ws, B, X, alpha), alpha)
    half = bool(ctx.arg("half", True))
    squared = bool(ctx.arg("squared", True))  # False: ||grad||_F / L (the unsquared norm printed in (164))
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
        return (agg if squared else agg.sqrt()) / net.loss(fwd.out, Y, half)

    if not _perturbed(ctx):
        with torch.no_grad():
            return Observation(ratio(Ws), method="closed form at init")
    sign = 1.0 if layer == "max" else -1.0
    val, found = maximise(lambda Wt: sign * ratio(Wt), Ws, _omega(ctx), ctx.search, ctx.generator,
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


def _forward_change(which: str, fwd0: net.Forward, fwd: net.Forward, tau: float = 0.0) -> torch.Tensor:
    if which == "h":
        diffs = [(a - b).norm(dim=-1) for a, b in zip(fwd.h[1:], fwd0.h[1:])]
    elif which == "g":
        diffs = [(a - b).norm(dim=-1) for a, b in zip(fwd.g[1:], fwd0.g[1:])]
    elif which == "Bh":
        diffs = [(fwd.out - fwd0.out).norm(dim=-1)]
    elif which == "split":  # min ||g'_1|| over g' = g'_1 + g'_2 with ||g'_2||_inf <= tau: soft-thresholding
        diffs = [torch.relu((a - b).abs() - tau).norm(dim=-1) for a, b in zip(fwd.g[1:], fwd0.g[1:])]
    else:
        raise EstimatorError(f"args.which = {which!r}: one of h, g, Bh, split")
    return torch.stack(diffs, -1).amax(dim=(-1, -2))


@QUANTITIES.register("guo2024-forward-perturbation", "sup over ||W'_l||_2 <= omega of max_{l,i} ||h_{i,l}(W0+W') - "
                     "h_{i,l}(W0)|| (args.which 'g': pre-activations; 'Bh': ||B h'_{i,L}||; 'split': min ||g'_1|| with "
                     "||g'_2||_inf <= C2 omega L^{5/2} sqrt(ln m/m)), a lower estimate by the claim's search (Lemma "
                     "B.4 items 2-3, Lemma B.8)", networks=NET)
def forward_perturbation(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    with torch.no_grad():
        fwd0 = net.forward(A, Ws, B, X, alpha)
    which = ctx.arg("which", "h")
    # Lemma B.4 item 2: the l_inf part's allowance tau = C2 omega L^{5/2} sqrt(ln m / m), C2 = args.C2 (default 1).
    m, L = ctx.i("m"), ctx.i("L")
    tau = float(ctx.arg("C2", 1.0)) * _omega(ctx) * L ** 2.5 * math.sqrt(math.log(m) / m)
    value, found = maximise(lambda Wt: _forward_change(which, fwd0, net.forward(A, Wt, B, X, alpha), tau), Ws,
                            _omega(ctx), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 20)))
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
    omega = _omega(ctx)
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
                    if stat == "dg-norm":
                        # D6 stops each flipped unit just past 0, where D'g is small; for ||D'g|| the whole budget on
                        # the one unit closest to 0 is stronger: it lands at ≈ -sign(g_j) (ω||h|| - |g_j|).
                        g = fwd0.g[l][:, i]
                        j = g.abs().argmin(-1, keepdim=True)
                        sgn = torch.where(g.gather(-1, j) >= 0, 1.0, -1.0).to(g.dtype)
                        u1 = torch.zeros_like(g).scatter(-1, j, -sgn)
                        Wt[l - 1] = Ws[l - 1] + omega * u1.unsqueeze(-1) * (hprev / hn.unsqueeze(-1)).unsqueeze(-2)
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
        e = (out - fwd0.out - lin).abs()
        # An error within rounding of the three terms it is the difference of is 0, not data: at L = 1 the network
        # is linear in W_1 between pattern flips, and residue ~1e-16 entered the scaling fit as an implied constant.
        floor = ROUNDING_ULPS * torch.finfo(e.dtype).eps * (out.abs() + fwd0.out.abs() + lin.abs())
        return torch.where(e > floor, e, torch.zeros_like(e)).amax(dim=(-1, -2))

    value, found = maximise(err, Ws, _omega(ctx), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 20)))
    return Observation(value, extras={"found_by": found}, method=f"search={ctx.search}; rounding floor")


# ---------------------------------------------------------------- targets: the paper's synthetic task, B.13 data


def synthetic_target(X: torch.Tensor) -> torch.Tensor:
    """The noise-free regression function of §5.1 (L248) on the first five coordinates, (R, n, 1):
    sin(10x_1 + 20x_2³) + cos(3x_3 + 5x_4²) + 2/(1 + ReLU(0.05 + x_5))^{1/2} + 2x_1x_5."""
    if X.shape[-1] < 5:
        raise EstimatorError(f"the synthetic target of §5.1 needs inputs of dimension p >= 5, got {X.shape[-1]}")
    x1, x2, x3, x4, x5 = (X[..., k] for k in range(5))
    y = (torch.sin(10 * x1 + 20 * x2 ** 3) + torch.cos(3 * x3 + 5 * x4 ** 2)
         + 2 / torch.sqrt(1 + torch.relu(0.05 + x5)) + 2 * x1 * x5)
    return y.unsqueeze(-1)


_T_GRID = torch.linspace(0.0, 12.0, 4801, dtype=torch.float64)  # N(0,1) mass beyond 12 is < 1e-32
_SIMPSON = torch.ones(4801, dtype=torch.float64)  # composite Simpson weights on the grid (odd point count)
_SIMPSON[1:-1:2], _SIMPSON[2:-1:2] = 4.0, 2.0
_SIMPSON *= (12.0 / 4800) / 3


def rf_mean(hnorm: torch.Tensor, rho: torch.Tensor, phase: torch.Tensor, alpha: float) -> torch.Tensor:
    """E_z[cos(⟨a, z⟩ + φ) σ̃_α(⟨z, h⟩)] for z ~ N(0, I), ||a|| = 1, ρ = ⟨a, ĥ⟩ (elementwise over the inputs).

    With t = ⟨z, ĥ⟩ and s = ⟨a, z⟩ = ρt + √(1-ρ²) w: E[cos(s + φ) | t] = cos(ρt + φ) e^{-(1-ρ²)/2}, so the mean is
    ||h|| e^{-(1-ρ²)/2}/√(1+α²) ∫ φ(t) t cos(ρt + φ) (1{t ≥ 0} + α 1{t < 0}) dt: two half-line integrals, by the
    composite Simpson rule on [0, 12] (integrand smooth there; error below 1e-10)."""
    t = _T_GRID.to(rho.device, rho.dtype)  # module constants live on the CPU: move them to the draws' device
    simpson = _SIMPSON.to(rho.device)
    w = torch.exp(-t ** 2 / 2) / math.sqrt(2 * math.pi) * t
    r, ph = rho.unsqueeze(-1), phase.unsqueeze(-1)
    pos = (w * torch.cos(r * t + ph) * simpson).sum(-1)
    neg = -(w * torch.cos(-r * t + ph) * simpson).sum(-1)  # ∫_{-∞}^0 φ(t) t cos(ρt+φ) dt, t -> -t
    return hnorm * torch.exp(-(1 - rho ** 2) / 2) * (pos + alpha * neg) / math.sqrt(1 + alpha ** 2)


def b13_directions(gen: torch.Generator, hprev: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """c_j(z) = cos(⟨a_j, z⟩ + φ_j), |c_j| ≤ 1 (a member of the class (135)): a_j a random unit vector in the span of
    the features ĥ_{i,L-2} (so f varies across the inputs), φ_j uniform on [0, 2π). Returns a (R, d, m), φ (R, d)."""
    R, n, _ = hprev.shape
    hh = hprev / hprev.norm(dim=-1, keepdim=True)
    xi = torch.randn(R, d, n, generator=gen, dtype=hprev.dtype)
    a = xi @ hh
    a = a / a.norm(dim=-1, keepdim=True)
    phase = 2 * math.pi * torch.rand(R, d, generator=gen, dtype=hprev.dtype)
    return a, phase


def b13_residual(gen: torch.Generator, fwd: net.Forward, d: int, alpha: float
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A dataset meeting Assumption B.13 exactly (λ-approximation error 0): the residual target y_i - ŷ_i :=
    f(x_i) with f_j(x) = E_z c_j(z) σ̃_α(zᵀ h_{L-2}(x)), z ~ N(0, I_m) (the proof of Lemma B.17's u-scale: its
    u_j uses c_j(√(m/2) w_k), w_k ~ N(0, 2/m)). Returns f (R, n, d), a (R, d, m), φ (R, d)."""
    if fwd.L < 2:
        raise EstimatorError("Assumption B.13 uses the (L-1)-layer class F_{L-1}: it needs L >= 2")
    hprev = fwd.h[fwd.L - 2]
    a, phase = b13_directions(gen, hprev, d)
    hn = hprev.norm(dim=-1)  # (R, n)
    rho = torch.einsum("rdm,rnm->rnd", a, hprev) / hn.unsqueeze(-1)
    f = rf_mean(hn.unsqueeze(-1).expand_as(rho), rho, phase.unsqueeze(1).expand_as(rho), alpha)
    return f, a, phase


def _targets(ctx: Context, X: torch.Tensor, fwd0: net.Forward, alpha: float) -> torch.Tensor:
    """Labels y (R, n, d) for training claims: args.labels fixed | gaussian | rademacher | zero (as `_labels`), 'synthetic'
    (§5.1's function plus N(0, args.noise²) noise, d = 1) or 'b13' (y = ŷ(W^(0)) + f(x), Assumption B.13)."""
    kind = ctx.arg("labels", "gaussian")
    n = X.shape[1]
    if kind == "synthetic":
        if ctx.i("d", 1) != 1:
            raise EstimatorError("labels = 'synthetic' is the scalar regression task of §5.1: it needs d = 1")
        return synthetic_target(X) + float(ctx.arg("noise", 0.1)) * ctx.randn(ctx.replicates, n, 1)
    if kind == "b13":
        f, _, _ = b13_residual(ctx.generator, fwd0, ctx.i("d", 1), alpha)
        return fwd0.out + f
    return _labels(ctx, n)


# ---------------------------------------------------------------- training (Algorithms 2 and 3, Algorithm 1 init)


def loss_and_dout(out: torch.Tensor, Y: torch.Tensor, kind: str, lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(L(W) per replicate, ∂L/∂ŷ (R, n, d)) for kind 'square' (§2: Σ||y - ŷ||², no ½), 'half' (Appendix B.1's ½)
    or 'exp' ((137): ½ Σ exp(λ||y - ŷ||²))."""
    e = out - Y
    if kind == "square":
        return (e ** 2).sum(dim=(-1, -2)), 2 * e
    if kind == "half":
        return 0.5 * (e ** 2).sum(dim=(-1, -2)), e
    if kind == "exp":
        ex = torch.exp(lam * (e ** 2).sum(-1, keepdim=True))
        return 0.5 * ex.sum(dim=(-1, -2)), lam * ex * e
    raise EstimatorError(f"args.loss = {kind!r}: one of square, half, exp")


@dataclass
class Trajectory:
    losses: torch.Tensor  # (R, T+1): full-batch L(W^(t)), t = 0..T
    drift: torch.Tensor  # (R,): max over checkpoints t and layers l of ||W_l^(t) - W_l^(0)||_2
    Ws: list[torch.Tensor]  # final weights
    test: torch.Tensor | None = None  # (R, T+1) test MSE when test inputs are given


def train(A: torch.Tensor, Ws: list[torch.Tensor], B: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, alpha: float,
          *, eta: float, steps: int, loss: str = "square", lam: float = 1.0, batch: int | None = None,
          gen: torch.Generator | None = None, drift_every: int = 0, Xtest: torch.Tensor | None = None,
          Ytest: torch.Tensor | None = None) -> Trajectory:
    """GD (Algorithm 2: W ← W - η ∇L(W)) or, with `batch` = b, SGD (Algorithm 3: a uniform b-subset of [n] per
    step, drawn without replacement, W ← W - η ∇L_B(W) with L_B the same sum restricted to the batch, no 1/b),
    on the trained W_l only (A, B fixed), in the Algorithm-1 parametrisation. Gradients in closed form
    (Σ_i z_{i,l}(∂L/∂ŷ_i) h_{i,l-1}ᵀ). `drift_every` > 0 records max_l ||W_l^(t) - W_l^(0)||_2 (exact) every that
    many steps and at the end."""
    from lemmacheck.linalg import spectral_norm

    R, n = X.shape[:2]
    W0 = Ws
    Ws = [W.clone() for W in Ws]
    losses = torch.empty(R, steps + 1, dtype=X.dtype)
    test = torch.empty(R, steps + 1, dtype=X.dtype) if Xtest is not None else None
    drift = torch.zeros(R, dtype=X.dtype)
    for t in range(steps + 1):
        fwd = net.forward(A, Ws, B, X, alpha)
        val, dout = loss_and_dout(fwd.out, Y, loss, lam)
        losses[:, t] = val
        if test is not None:
            out_t = net.forward(A, Ws, B, Xtest, alpha).out
            test[:, t] = ((out_t - Ytest) ** 2).sum(-1).mean(-1)
        if drift_every and t > 0 and (t % drift_every == 0 or t == steps):
            dn = torch.stack([spectral_norm(W - W0_)[0] for W, W0_ in zip(Ws, W0)], -1).amax(-1)
            drift = torch.maximum(drift, dn)
        if t == steps:
            break
        if batch is not None:
            assert gen is not None
            keep = torch.rand(R, n, generator=gen, dtype=X.dtype).argsort(-1)[:, :batch]
            mask = torch.zeros(R, n, dtype=X.dtype).scatter(-1, keep, 1.0)
            dout = dout * mask.unsqueeze(-1)
        zs = net.backward_vectors(Ws, B, fwd, dout)
        for l, W in enumerate(Ws, start=1):  # in place (Ws are this function's copies): W_l -= η Σ_i z_{i,l} h_{i,l-1}ᵀ
            W.baddbmm_(zs[l].transpose(1, 2), fwd.h[l - 1], alpha=-eta)
    return Trajectory(losses, drift, Ws, test)


def envelope_rate(losses: torch.Tensor, C0: float = 1.0) -> torch.Tensor:
    """1 - γ̂ with γ̂ = max_{1 ≤ t ≤ T} (L_t / (C0 L_0))^{1/t}: the smallest γ with L_t ≤ C0 γ^t L_0 for every t ≤ T
    (statements (3) and (5)); negative when the loss ever rises above C0 L_0."""
    T = losses.shape[-1] - 1
    t = torch.arange(1, T + 1, dtype=losses.dtype)
    ratio = (losses[:, 1:] / (C0 * losses[:, :1])).clamp_min(1e-300)
    return 1 - torch.exp(torch.log(ratio) / t).amax(-1)


def _train_eta(ctx: Context) -> float:
    """η = eta0 · d/(n L² m): the step-size scale of Theorems 3.1, B.14 and B.16 (η ≤ O(d/(nL²m))), eta0 swept."""
    return ctx.p("eta0") * ctx.i("d", 1) / (ctx.i("n") * ctx.i("L") ** 2 * ctx.i("m"))


@QUANTITIES.register("guo2024-training", "GD/SGD (Algorithms 2-3, args.batch = 'b' for SGD) from Algorithm-1 init, "
                     "eta = eta0 d/(n L^2 m), T steps, args.loss square|half|exp, args.labels incl. synthetic|b13; "
                     "args.statistic: rate (1 - max_t (L_t/(C0 L_0))^{1/t}), paper-rate (Fig. 2's (L_T2/L_T1)^{1/(T2-T1)}), "
                     "drift (max_t max_l ||W_l^t - W_l^0||_2), final (L_T/L_0), final-loss (L_T), exp-kappa (min_t (E_t - E_t+1)/E_t^2, "
                     "E_t = L_exp - n/2)", networks=NET)
def training(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    fwd0 = net.forward(A, Ws, B, X, alpha)
    Y = _targets(ctx, X, fwd0, alpha)
    stat = ctx.arg("statistic", "rate")
    loss = ctx.arg("loss", "square")
    eta = float(ctx.arg("eta", 0.0)) or _train_eta(ctx)
    batch = ctx.i("b") if ctx.arg("batch") else None
    T = ctx.i("T")
    if batch is not None and ctx.arg("epochs", False):  # T counts epochs: T n/b steps, the same horizon for every b
        T = round(T * X.shape[1] / batch)
    with torch.no_grad():
        tr = train(A, Ws, B, X, Y, alpha, eta=eta, steps=T, loss=loss, lam=float(ctx.arg("lam", 1.0)), batch=batch,
                   gen=ctx.generator, drift_every=int(ctx.arg("drift_every", max(T // 10, 1))) if stat == "drift" else 0)
    L = tr.losses
    extras = {"delta_realised": min_separation(X), "loss0": L[:, 0], "lossT": L[:, -1]}
    if stat == "rate":
        value = envelope_rate(L, float(ctx.arg("C0", 1.0)))
    elif stat == "paper-rate":
        t1, t2 = int(ctx.arg("t1", T // 10)), T
        value = 1 - (L[:, t2] / L[:, t1]).clamp_min(1e-300) ** (1.0 / (t2 - t1))
    elif stat == "drift":
        value = tr.drift
    elif stat == "final":
        value = L[:, -1] / L[:, 0]
    elif stat == "final-loss":
        value = L[:, -1]
    elif stat == "exp-kappa":
        if loss != "exp":
            raise EstimatorError("args.statistic = 'exp-kappa' needs args.loss = 'exp'")
        E = L - X.shape[1] / 2  # L_exp(W*) = n/2 at a perfect fit (the overparameterised minimiser)
        # Steps from an E^(t) already at round-off level (E ≤ 1e-9 n: the fit is exact to float64) say nothing about
        # κ and would divide 0 by 0; they are left out (+inf), the others give the largest κ valid up to T.
        live = E[:, :-1] > 1e-9 * X.shape[1]
        ratio = (E[:, :-1] - E[:, 1:]) / torch.where(live, E[:, :-1], torch.ones_like(E[:, :-1])) ** 2
        value = torch.where(live, ratio, torch.full_like(ratio, math.inf)).amin(-1)
        extras["E_T"] = E[:, -1]
    else:
        raise EstimatorError(f"args.statistic = {stat!r}: one of rate, paper-rate, drift, final, final-loss, exp-kappa")
    bad = ~torch.isfinite(L).all(-1)
    value = torch.where(bad, torch.full_like(value, math.nan), value)
    return Observation(value, extras=extras, method=f"{'SGD' if batch else 'GD'} {T} steps, eta={eta:.3g}, "
                       f"loss={loss}, closed-form gradients")


# ---------------------------------------------------------------- Lemma 4.1: semi-smoothness


def _loss_value(A, Ws, B, X, Y, alpha, kind="square"):
    return loss_and_dout(net.forward(A, Ws, B, X, alpha).out, Y, kind)[0]


@QUANTITIES.register("guo2024-semismoothness", "Lemma 4.1 implied constant: sup over ||W'_l||_2 <= s (or rho omega) of r / S, r = "
                     "L(W+W') - L(W) - <grad L(W), W'> (main-text loss), S = n L^2 m s^2/d + sqrt(c(alpha)) "
                     "omega^{1/3} L^2 sqrt(m n L(W) ln m / d) s, at base W = W0 + a random per-layer spectral-omega "
                     "perturbation (args.term = 'quadratic': S = n L^2 m s^2/d alone); W' by the claim's search", networks=NET)
def semismoothness(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, W0, B = _init(ctx, X)
    Y = _labels(ctx, X.shape[1])
    m, L, n, d = ctx.i("m"), ctx.i("L"), X.shape[1], ctx.i("d", 1)
    omega = _omega(ctx)
    # The step radius: `s` itself, or `rho` = s/ω, its fraction of the radius (||W'||_2 < ω ties the step to ω,
    # so a fit along ω → 0 has to move s with it; a fixed s only lets ω fall to s).
    s = ctx.p("s") if "s" in ctx.params else ctx.p("rho") * omega
    if s > omega:
        raise EstimatorError(f"the step radius s = {s} must be <= omega = {omega} (||W'||_2 < omega)")
    # Base point strictly inside the ball: radius args.base * omega (default 0.99).
    base = float(ctx.arg("base", 0.99))
    Ws = [W + P for W, P in zip(W0, random_perturbation(ctx.generator, W0, base * omega))]
    with torch.no_grad():
        grads, LW, _ = net.loss_gradients(A, Ws, B, X, Y, alpha, half=False)
    S = n * L ** 2 * m * s ** 2 / d + math.sqrt(net.c_alpha(alpha)) * omega ** (1 / 3) * L ** 2 \
        * torch.sqrt(m * n * LW * math.log(m) / d) * s
    if ctx.arg("term", "both") == "quadratic":  # r against the first term alone (a stronger statement)
        S = torch.full_like(LW, n * L ** 2 * m * s ** 2 / d)

    def resid(Wt: list[torch.Tensor]) -> torch.Tensor:
        lin = sum((G * (Wn - W)).sum(dim=(-1, -2)) for G, Wn, W in zip(grads, Wt, Ws))
        return (_loss_value(A, Wt, B, X, Y, alpha) - LW - lin) / S

    value, found = maximise(resid, Ws, s, ctx.search, ctx.generator, steps=int(ctx.arg("steps", 10)))
    return Observation(value, extras={"found_by": found, "loss": LW}, method=f"exact residual; search={ctx.search}")


# ---------------------------------------------------------------- Lemma 4.3: generalization gap near init


@QUANTITIES.register("guo2024-generalization-gap", "Lemma 4.3: sup over the omega-ball (per-layer spectral, or "
                     "args.norm = 'frobenius') of R(W) - L(W)/n on the synthetic task of §5.1 (inputs on the sphere), "
                     "R estimated on args.n_test fresh points; the search maximises (test MSE - train MSE)",
                     networks=NET)
def generalization_gap(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, W0, B = _init(ctx, X)
    n = X.shape[1]
    noise = float(ctx.arg("noise", 0.0))  # the noise-free F of R(W) = E||F(x) - N(x; W)||² by default
    Y = synthetic_target(X) + (noise * ctx.randn(ctx.replicates, n, 1) if noise else 0.0)
    spec = dict(ctx.inputs_spec, n=str(int(ctx.arg("n_test", 1000))), separation="0", geometry="random")
    Xt = Context(ctx.claim_id, ctx.params, ctx.replicates, ctx.generator, ctx.dtype, ctx.device,
                 inputs_spec=spec).inputs()
    Yt = synthetic_target(Xt)
    if ctx.i("d", 1) != 1:
        raise EstimatorError("Lemma 4.3's check uses the scalar synthetic task: d = 1")

    def gap(Wt: list[torch.Tensor]) -> torch.Tensor:
        tr = ((net.forward(A, Wt, B, X, alpha).out - Y) ** 2).sum(-1).mean(-1)
        te = ((net.forward(A, Wt, B, Xt, alpha).out - Yt) ** 2).sum(-1).mean(-1)
        return te - tr

    value, found = maximise(gap, W0, _omega(ctx), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 10)),
                            norm=ctx.arg("norm", "spectral"))
    return Observation(value, extras={"found_by": found}, method=f"test set {Xt.shape[1]}; search={ctx.search}")


# ---------------------------------------------------------------- Lemma B.3 items 3-4: sparse vectors


def _sparse_sup(M: torch.Tensor, s: int, swaps: int) -> torch.Tensor:
    """max over supports S, |S| = s, of σ_max(M[..., :, S]) (a lower estimate except for one row, where it is exact:
    the s largest |entries|). Candidates: the s largest column norms, the s largest entries of the top right
    singular vector, then `swaps` greedy single swaps from the better one."""
    if M.shape[-2] == 1:
        return M.abs().squeeze(-2).topk(s, dim=-1).values.norm(dim=-1)
    coln = M.norm(dim=-2)

    def smax(S: torch.Tensor) -> torch.Tensor:
        idx = S.unsqueeze(-2).expand(*M.shape[:-1], s)
        return torch.linalg.matrix_norm(M.gather(-1, idx), ord=2)

    S1 = coln.topk(s, dim=-1).indices
    # Top right singular vector by 30 power iterations on MᵀM (it only proposes a support; the value is exact).
    v = M.norm(dim=-2)
    for _ in range(30):
        v = (M.transpose(-1, -2) @ (M @ v.unsqueeze(-1))).squeeze(-1)
        v = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    S2 = v.abs().topk(s, dim=-1).indices
    v1, v2 = smax(S1), smax(S2)
    best = torch.maximum(v1, v2)
    S = torch.where((v1 >= v2).unsqueeze(-1), S1, S2)
    for _ in range(swaps):  # swap the weakest support column for the strongest outside column, keep if better
        inside = torch.zeros_like(coln, dtype=torch.bool).scatter(-1, S, True)
        out_best = coln.masked_fill(inside, -1.0).argmax(-1)
        weak = coln.gather(-1, S).argmin(-1)
        S_new = S.scatter(-1, weak.unsqueeze(-1), out_best.unsqueeze(-1))
        v = smax(S_new)
        better = v > best
        best = torch.where(better, v, best)
        S = torch.where(better.unsqueeze(-1), S_new, S)
    return best


@QUANTITIES.register("guo2024-sparse-gain", "Lemma B.3 items 3-4 at init: sup over s-sparse v of ||W_b D_{b-1} ... "
                     "D_a W_a v||/||v|| over 1 <= a <= b <= L (args.target 'W', item 3) or of ||B D_L W_L ... D_a "
                     "W_a v||/||v|| = sup_u |u^T Back_a v|/(||u|| ||v||) over a in [L] ('Back', item 4; exact for d = 1)",
                     networks=NET)
def sparse_gain(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    s = ctx.i("s")
    swaps = int(ctx.arg("swaps", 4))
    fwd = net.forward(A, Ws, B, X, alpha)
    target = ctx.arg("target", "W")
    best = torch.zeros(ctx.replicates, dtype=ctx.dtype)
    if target == "Back":
        for M in net.back_matrices(Ws, B, fwd)[:-1]:  # Back_a, a = 1..L, (R, n, d, m)
            best = torch.maximum(best, _sparse_sup(M, s, swaps).amax(-1))
        return Observation(best, method="exact top-s entries" if ctx.i("d", 1) == 1 else "greedy supports")
    if target != "W":
        raise EstimatorError(f"args.target = {target!r}: one of W, Back")
    L = len(Ws)
    for a in range(1, L + 1):
        P = Ws[a - 1].unsqueeze(1).expand(-1, X.shape[1], -1, -1)  # W_a, then W_b D_{b-1} ... D_a W_a
        for b in range(a, L + 1):
            if b > a:
                P = net.left_mul(Ws[b - 1], fwd.slope(b - 1).unsqueeze(-1) * P)
            best = torch.maximum(best, _sparse_sup(P, s, swaps).amax(-1))
    return Observation(best, method="greedy supports (lower estimate)")


# ---------------------------------------------------------------- Lemma B.5 items 3-4: perturbed products


def _chain(Ws: list[torch.Tensor], D: list[torch.Tensor], a: int, b: int) -> torch.Tensor:
    """W_b D_{b-1} W_{b-1} ... W_{a+1} D_a as (R, n, m, m) (D indexed by layer; D[0] = I)."""
    P = torch.diag_embed(D[a])
    for k in range(a + 1, b + 1):
        P = net.left_mul(Ws[k - 1], P)
        if k < b:
            P = D[k].unsqueeze(-1) * P
    return P


@QUANTITIES.register("guo2024-product-change", "Lemma B.5 items 3-4: sup over ||W'_l||_2 <= omega of max_i, a of "
                     "||W0_{b+1}(D0_b+D'_b)(W0_b+W'_b)...(D0_a+D'_a) - W0_{b+1} D0_b W0_b ... D0_a||_2 over "
                     "1 <= a < b <= L-1 (args.item 3) or of ||B(D_L)(W_L)...(D_a) - B D0_L W0_L ... D0_a||_2 over "
                     "a in [L] (item 4); the claim's search", networks=NET)
def product_change(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, W0, B = _init(ctx, X)
    item = int(ctx.arg("item", 4))
    L = len(W0)
    with torch.no_grad():
        fwd0 = net.forward(A, W0, B, X, alpha)
    D0 = [fwd0.slope(l) for l in range(L + 1)]
    if item == 3 and L < 3:
        raise EstimatorError("Lemma B.5 item 3 (1 <= a < b, W_{b+1} with b+1 <= L) needs L >= 3")

    def change(Wt: list[torch.Tensor]) -> torch.Tensor:
        fwd = net.forward(A, Wt, B, X, alpha)
        D = [fwd.slope(l) for l in range(L + 1)]
        vals = []
        if item == 3:
            for a in range(1, L - 1):
                for b in range(a + 1, L):
                    Wmix = list(Wt)
                    Wmix[b] = W0[b]  # W_{b+1} stays at initialisation, as printed
                    diff = _chain(Wmix, D, a, b + 1) - _chain(W0, D0, a, b + 1)
                    vals.append(operator_norm(diff).amax(-1))
        elif item == 4:
            for a in range(1, L + 1):
                Wx = Wt + [B]
                Wx0 = W0 + [B]
                diff = _chain(Wx, D + [None], a, L + 1) - _chain(Wx0, D0 + [None], a, L + 1)  # (R, n, d, m)
                vals.append(operator_norm(diff).amax(-1))
        else:
            raise EstimatorError(f"args.item = {item}: 3 or 4")
        # + 0·ΣW: at L = 1 item 4 (B D_1) depends on W' only through the pattern (no gradient to follow)
        return torch.stack(vals, -1).amax(-1) + 0 * Wt[0].sum(dim=(-1, -2))

    value, found = maximise(change, W0, _omega(ctx), ctx.search, ctx.generator, steps=int(ctx.arg("steps", 5)))
    return Observation(value, extras={"found_by": found}, method=f"exact spectral norms; search={ctx.search}")


# ---------------------------------------------------------------- Lemma B.8: secant-slope representation


def secant_slopes(g: torch.Tensor, gs: torch.Tensor, alpha: float) -> torch.Tensor:
    """Diagonal of D*_l + D''_l: (σ̃(g) - σ̃(g*))/(g - g*) where g ≠ g*, D*'s slope where equal."""
    diff = g - gs
    same = diff == 0
    sec = (net.act(g, alpha) - net.act(gs, alpha)) / torch.where(same, torch.ones_like(diff), diff)
    return torch.where(same, net.slope(gs, alpha), sec)


def secant_expansion(Ws: list[torch.Tensor], Wp: list[torch.Tensor], fs: net.Forward, f: net.Forward, alpha: float
                     ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Lemma B.8's sum for every l: Σ_{a=1}^l (D*_l+D''_l) W*_l ... W*_{a+1} (D*_a+D''_a) W'_a h_{a-1} (h perturbed),
    returned with the D'' diagonals; W = W* + W', `fs`/`f` the forward passes at W* and W."""
    L = len(Ws)
    S = [secant_slopes(f.g[l], fs.g[l], alpha) for l in range(1, L + 1)]  # S[l-1]: D*_l + D''_l
    Dpp = [S[l - 1] - fs.slope(l) for l in range(1, L + 1)]
    out, acc = [], torch.zeros_like(f.h[0])
    for l in range(1, L + 1):  # acc_l = S_l (W*_l acc_{l-1} + W'_l h_{l-1}): the sum's recursion in l
        acc = S[l - 1] * (acc @ Ws[l - 1].transpose(-1, -2) + f.h[l - 1] @ Wp[l - 1].transpose(-1, -2))
        out.append(acc)
    return out, Dpp


@QUANTITIES.register("guo2024-secant-identity", "Lemma B.8 deterministic part at arbitrary W* and W' (random, "
                     "args.scale): args.part 'identity' = max_l ||h'_l - secant sum||/||h'_l|| (0 up to round-off), "
                     "'range' = max |D''_jj| (printed range [-sqrt 2, sqrt 2])", networks=NET)
def secant_identity(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    A, Ws, B = _init(ctx, X)
    scale = float(ctx.arg("scale", 1.0))
    Wp = [scale * ctx.randn(*W.shape) * math.sqrt(2.0 / W.shape[-1]) for W in Ws]
    W = [a + b for a, b in zip(Ws, Wp)]
    fs, f = net.forward(A, Ws, B, X, alpha), net.forward(A, W, B, X, alpha)
    sums, Dpp = secant_expansion(Ws, Wp, fs, f, alpha)
    part = ctx.arg("part", "identity")
    if part == "identity":
        errs = [((f.h[l] - fs.h[l]) - sums[l - 1]).norm(dim=-1) / (f.h[l] - fs.h[l]).norm(dim=-1).clamp_min(1e-300)
                for l in range(1, len(Ws) + 1)]
        return Observation(torch.stack(errs, -1).amax(dim=(-1, -2)), method="exact, float64")
    if part == "range":
        return Observation(torch.stack([d.abs().amax(dim=(-1, -2)) for d in Dpp], -1).amax(-1), method="exact")
    raise EstimatorError(f"args.part = {part!r}: one of identity, range")


# ---------------------------------------------------------------- Corollary 3.3: the rate factor in alpha


@QUANTITIES.register("guo2024-rate-factor-order", "Corollary 3.3 on gamma(alpha) = 1 - K c(alpha) (K > 0): args.part "
                     "'argmin' = gamma(alpha) - gamma(-1) at random alpha < 1; 'decreasing' = gamma(a1) - gamma(a2) "
                     "for a1 < a2 < -1; 'increasing' = gamma(a2) - gamma(a1) for -1 < a1 < a2 < 1 (all > 0 as "
                     "printed); draws reach the ends of every interval", networks=("scalar",))
def rate_factor_order(ctx: Context) -> Observation:
    R = ctx.replicates
    K = ctx.p("K")
    gen = ctx.generator

    def gamma(a: torch.Tensor) -> torch.Tensor:
        return 1 - K * (1 - a) ** 2 / (1 + a ** 2)

    def u(size: int) -> torch.Tensor:
        return torch.rand(size, generator=gen, dtype=torch.float64)

    def logu(lo: float, hi: float) -> torch.Tensor:
        return torch.exp(math.log(lo) + u(R) * (math.log(hi) - math.log(lo)))

    part = ctx.arg("part", "argmin")
    if part == "argmin":  # alpha = -1 ± a gap from 1e-4 to 1e4 (both sides), and up to 1 - 1e-9
        gap = logu(1e-4, 1e4)
        left = u(R) < 0.5
        a = torch.where(left, -1 - gap, (-1 + gap).clamp(max=1 - 1e-9))
        return Observation(gamma(a) - gamma(torch.full_like(a, -1.0)), extras={"alpha": a}, method="closed form")
    if part == "decreasing":  # a1 < a2 < -1: a2 = -1 - x, a1 = a2 - y
        a2 = -1 - logu(1e-4, 1e4)
        a1 = a2 - logu(1e-4, 1e4) * a2.abs()
        return Observation(gamma(a1) - gamma(a2), extras={"alpha1": a1, "alpha2": a2}, method="closed form")
    if part == "increasing":  # -1 < a1 < a2 < 1
        a1 = -1 + 2 * u(R) * (1 - logu(1e-6, 1.0))
        a2 = a1 + (1 - a1) * logu(1e-4, 1.0) * 0.999
        return Observation(gamma(a2) - gamma(a1), extras={"alpha1": a1, "alpha2": a2}, method="closed form")
    raise EstimatorError(f"args.part = {part!r}: one of argmin, decreasing, increasing")


# ---------------------------------------------------------------- Lemma B.17: random-feature approximation


@QUANTITIES.register("guo2024-rf-approximation", "Lemma B.17 on B.13 data built exactly (residual y - yhat = f(x), "
                     "c_j(z) = cos(<a_j, z> + phi_j)): max_{i,j} |<u_j, h_{i,L-1}> - (y_{i,j} - yhat_{i,j})| with "
                     "u_j = (1/sqrt(2m)) (c_j(sqrt(m/2) (W_{L-1})_{k,.}))_k, as the proof builds it", networks=NET)
def rf_approximation(ctx: Context) -> Observation:
    X = _inputs(ctx)
    alpha = _alpha(ctx)
    m, L = ctx.i("m"), ctx.i("L")
    if L < 2:
        raise EstimatorError("Lemma B.17 uses h_{L-1} and W_{L-1}: it needs L >= 2")
    # Only A, W_1 .. W_{L-1} enter (h_{L-1} and the rows of W_{L-1}): W_L and B are not drawn (at m = 1024 and
    # 200 draws W_L alone would be 2e8 normals); this is the same law as a full Algorithm-1 draw restricted to them.
    A = ctx.randn(ctx.replicates, m, X.shape[-1]) * math.sqrt(1.0 / m)
    Ws = [ctx.randn(ctx.replicates, m, m) * math.sqrt(2.0 / m) for _ in range(L - 1)]
    fwd = net.forward(A, Ws, torch.zeros(ctx.replicates, 1, m, dtype=ctx.dtype), X, alpha)
    fwd_l = net.Forward(fwd.h + [fwd.h[-1]], fwd.g + [fwd.g[-1]], fwd.out, alpha)  # index L-1, L-2 as the full net
    f, a, phase = b13_residual(ctx.generator, fwd_l, ctx.i("d", 1), alpha)
    fwd = fwd_l
    Wl = Ws[L - 2]  # W_{L-1}: its rows w_k ~ N(0, 2/m I), and √(m/2) w_k ~ N(0, I)
    c = torch.cos(math.sqrt(m / 2) * torch.einsum("rdm,rkm->rdk", a, Wl) + phase.unsqueeze(-1))  # c_j(z_k), (R, d, m)
    u = c / math.sqrt(2 * m)
    approx = torch.einsum("rdk,rnk->rnd", u, fwd.h[L - 1])
    return Observation((approx - f).abs().amax(dim=(-1, -2)), extras={"u_norm": u.norm(dim=-1).amax(-1)},
                       method="exact construction; f by quadrature")


# ---------------------------------------------------------------- the paper's synthetic experiment (Table 1, Fig. 2)


def _kendall_tau(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Kendall's tau between the rows of x and y (R, k), no ties assumed (continuous values)."""
    dx = torch.sign(x.unsqueeze(-1) - x.unsqueeze(-2))
    dy = torch.sign(y.unsqueeze(-1) - y.unsqueeze(-2))
    k = x.shape[-1]
    return (dx * dy).sum(dim=(-1, -2)) / (k * (k - 1))


@QUANTITIES.register("guo2024-alpha-experiment", "§5 synthetic experiment at small scale: one Algorithm-1 init per "
                     "replicate shared by every alpha in args.alphas (Algorithm 1's weights do not depend on alpha), "
                     "GD with the same eta = eta0/(n L m) on the sum-of-squares loss, synthetic labels; args.statistic "
                     "'order' = Kendall tau between -final training MSE and c(alpha) (Table 1's ranking; 1 = identical "
                     "order), 'rate-order' = the same for Fig. 2's rate 1 - (L_T/L_T1)^{1/(T-T1)}", networks=NET)
def alpha_experiment(ctx: Context) -> Observation:
    X = _inputs(ctx)
    A, Ws, B = _init(ctx, X)
    n = X.shape[1]
    if ctx.i("d", 1) != 1:
        raise EstimatorError("the synthetic experiment is scalar regression: d = 1")
    Y = synthetic_target(X) + float(ctx.arg("noise", 0.1)) * ctx.randn(ctx.replicates, n, 1)
    alphas = [float(a) for a in ctx.arg("alphas", [-2.0, -1.0, 0.0, 0.05])]
    T = ctx.i("T")
    eta = ctx.p("eta0") / (n * ctx.i("L") * ctx.i("m"))
    finals, rates = [], []
    with torch.no_grad():
        for a in alphas:
            tr = train(A, Ws, B, X, Y, net.check_alpha(a), eta=eta, steps=T, loss="square")
            L = tr.losses
            finals.append(L[:, -1] / n)  # final training MSE
            t1 = T // 10
            rates.append(1 - (L[:, -1] / L[:, t1]).clamp_min(1e-300) ** (1.0 / (T - t1)))
    F, Rt = torch.stack(finals, -1), torch.stack(rates, -1)
    c = torch.tensor([net.c_alpha(a) for a in alphas], dtype=ctx.dtype).expand_as(F)
    stat = ctx.arg("statistic", "order")
    if stat == "order":
        value = _kendall_tau(-F, c)
    elif stat == "rate-order":
        value = _kendall_tau(Rt, c)
    else:
        raise EstimatorError(f"args.statistic = {stat!r}: one of order, rate-order")
    extras = {f"final_mse[{a:g}]": F[:, k] for k, a in enumerate(alphas)}
    extras.update({f"rate[{a:g}]": Rt[:, k] for k, a in enumerate(alphas)})
    return Observation(value, extras=extras, method=f"GD {T} steps, eta={eta:.3g}, coupled init across alpha")
