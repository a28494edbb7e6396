"""Quantities of the du2018 settings (Du, Lee, Li, Wang, Zhai 2018): three architectures, smooth activations.

Perturbation suprema (Lemmas A.3/A.4, B.3/B.4, C.3/C.4) are over the paper's per-layer FROBENIUS balls
‖W^{(h)} − W^{(h)}(0)‖_F ≤ √m R, searched by `search.maximise(..., norm="frobenius")` (random, gradient-aligned, projected ascent;
the analogue of search.maximise, whose balls are spectral). A search only ever gives a lower estimate.

Every estimator is registered once, as `du2018-<quantity>`, for the three networks du2018-fc, du2018-resnet and
du2018-cnn-resnet; the claim's `network` (ctx.network) picks the architecture.

Parameters (the paper's symbols): m (width), H (depth), n, d (input dimension; CNN: d0 channels and p pixels,
the claim's inputs use d = "d0 * p", and q the patch size, default 3), c_lambda (ResNet/CNN, in (0, 1)),
R (perturbation radius: ‖W^{(h)} − W^{(h)}(0)‖_F ≤ √m R per layer), kappa (step-size constant), T (GD steps).
The activation: where a claim declares the class its statement quantifies over (inputs.activation, e.g.
{ class = "lipschitz", lipschitz = 1, member = "linear" }), the member ctx.activation() draws, which every network,
kernel quadrature and constant here takes (du_kernels.member_activation); else check.args.activation by name.
Options (check.args): activation (default "softplus", any smooth name in kernels.ACTIVATIONS), sampler
("conditional": exact-in-distribution features at init without weights, or "full"), labels ("rademacher" or
"uniform" on [−1, 1]; |y_i| ≤ 1), step ("paper" or "practical"; see `_step_size`), nodes (Gauss–Hermite,
default NODES), cross / aggregation (kernel readings, see du_kernels.cnn_kernels).

λ₀ = λ_min(K^{(H)}) is computed per replicate's dataset by 2-D Gauss–Hermite quadrature and re-checked with
twice the nodes (method strings record the change); replicates whose λ₀ is not positive beyond that error
(Assumptions 3.1/4.1/5.1 fail) are conditioning failures, never violations.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lemmacheck import kernels
from lemmacheck.context import Context, Observation
from lemmacheck.errors import EstimatorError
from lemmacheck.linalg import gaussian_spectral_norm, spectral_norm
from lemmacheck.registry import QUANTITIES
from lemmacheck.search import maximise

from . import kernels as du_kernels
from . import network as net

KINDS = {net.FC: "fc", net.RESNET: "resnet", net.CNN: "cnn"}  # registered network name -> architecture
# Gauss–Hermite nodes for λ₀, re-checked with twice as many: softplus, sigmoid, Swish and GELU converge to
# ~1e-15 by 48 nodes; tanh/erf need ~128 (set args.nodes); the recorded change says which was reached.
NODES = 64


# ------------------------------------------------------------------------------------------------ set-up

def _activation(ctx: Context, smooth: bool = True) -> kernels.Activation:
    """The σ of the statement: where the claim declares the class it quantifies over (inputs.activation), its member
    drawn through ctx.activation() (pinned, or the class's default; hunts move it), as a kernels.Activation so
    the networks and kernel quadratures take it; else args.activation by name (default softplus)."""
    act = du_kernels.claim_activation(ctx)
    if smooth and not act.smooth:
        raise EstimatorError(f"activation '{act.name}' is not smooth (the paper assumes β-smooth σ)")
    return act


def _data(ctx: Context, kind: str) -> torch.Tensor:
    X = ctx.inputs()
    if kind == "cnn":
        return net.as_images(X, ctx.i("d0"), ctx.i("p"))
    return net.as_images(X)


def _labels(ctx: Context, n: int) -> torch.Tensor:
    if ctx.arg("labels", "rademacher") == "uniform":
        return 2 * torch.rand(ctx.replicates, n, generator=ctx.generator, dtype=ctx.dtype) - 1
    return ctx.labels(n)


def _net(ctx: Context, kind: str, X: torch.Tensor) -> net.DuNet:
    q = ctx.i("q", 3) if kind == "cnn" else 1
    try:
        return net.make_net(kind, X, ctx.i("m"), ctx.i("H"), _activation(ctx), float(ctx.p("c_lambda", 0.5)), q)
    except ValueError as exc:  # e.g. q*d0 < 2p: refused, never computed with a vanished residual scale
        raise EstimatorError(str(exc)) from exc


def _ok(dn: net.DuNet, R: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Replicates whose data meet the architecture's assumption (λ > 0 for ResNet/CNN), and `mask`."""
    ok = torch.as_tensor(dn.assumption_holds).expand(R).clone()
    return ok if mask is None else ok & mask


@torch.no_grad()
def _kernels(ctx: Context, dn: net.DuNet, X: torch.Tensor) -> tuple[du_kernels.DuKernels, torch.Tensor, str]:
    """K^{(·)} and λ₀ per replicate, with twice-the-nodes check; also the mask of replicates whose
    Assumption (λ₀ > 0 and λ > 0, beyond the quadrature change) holds."""
    eng = kernels.Engine(dn.act, Q=int(ctx.arg("nodes", NODES)), check=True)
    K = net.limit_kernels(dn, X, eng, cross=str(ctx.arg("cross", "paired")),
                          aggregation=str(ctx.arg("aggregation", "matched")))
    tol = 100 * eng.max_change + 1e-13
    ok = K.lambda0 > tol
    return K, _ok(dn, X.shape[0], ok), f"lambda0: {eng.description}"


def _c_w0(Ws: list[torch.Tensor], m: int) -> torch.Tensor:
    """The tightest c_{w,0} of the sample: max_h ‖W^{(h)}(0)‖₂ / √m (the Grams' top eigenvalues, rounded up)."""
    return torch.stack([spectral_norm(W)[0] for W in Ws], -1).amax(-1) / math.sqrt(m)


def _geometric(alpha: torch.Tensor, h: int) -> torch.Tensor:
    """g_α(h) = Σ_{i=0}^{h−1} α^i."""
    return sum(alpha ** i for i in range(h))  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------- estimators

def _features_at_init(ctx: Context, dn: net.DuNet, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, str]:
    """(‖x_i^{(h)}‖ as (R, H, n), G^{(H)}(0), method) by the exact conditional sampler or a full forward pass."""
    if ctx.arg("sampler", "conditional") == "full":
        Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
        fwd = net.forward(dn, Ws, a, X)
        return fwd.norms(), net.last_layer_gram(dn, Ws, a, X), "full forward pass"
    smp = net.sample_init(ctx.generator, dn, X)
    return smp.norms(), smp.gram_last, "Gaussian-conditioning sampler (exact in distribution)"


def layer_norm_max(kind: str, ctx: Context) -> Observation:
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    norms, _, method = _features_at_init(ctx, dn, X)
    return Observation(norms.amax(dim=(-1, -2)), valid=_ok(dn, X.shape[0]), extras={"min": norms.amin(dim=(-1, -2))},
                       method=method)


def layer_norm_min(kind: str, ctx: Context) -> Observation:
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    norms, _, method = _features_at_init(ctx, dn, X)
    return Observation(norms.amin(dim=(-1, -2)), valid=_ok(dn, X.shape[0]), extras={"max": norms.amax(dim=(-1, -2))},
                       method=method)


def layer_norm_deviation(kind: str, ctx: Context) -> Observation:
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    norms, _, method = _features_at_init(ctx, dn, X)
    return Observation((norms - 1).abs().amax(dim=(-1, -2)), valid=_ok(dn, X.shape[0]), method=method)


def _gram_at_init(ctx: Context, kind: str):
    """The data, network, limiting kernels (with their validity mask) and the last layer's Gram G^(H)(0)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    K, ok, kmethod = _kernels(ctx, dn, X)
    _, G, method = _features_at_init(ctx, dn, X)
    return dn, K, ok, G, f"{method}; {kmethod}"


def gram_least_eigenvalue_ratio(kind: str, ctx: Context) -> Observation:
    _dn, K, ok, G, method = _gram_at_init(ctx, kind)
    lam = kernels.lambda_min(G)
    return Observation(lam / K.lambda0, valid=ok, extras={"lambda0": K.lambda0, "lambda_min_G": lam}, method=method)


def gram_deviation_ratio(kind: str, ctx: Context) -> Observation:
    _dn, K, ok, G, method = _gram_at_init(ctx, kind)
    dev = torch.linalg.matrix_norm(G - K.ntk, ord=2)
    return Observation(dev / K.lambda0, valid=ok, extras={"lambda0": K.lambda0, "deviation": dev},
                       method=f"{method}; exact spectral norm")


def gram_deviation_max(kind: str, ctx: Context) -> Observation:
    dn, K, _ok, G, method = _gram_at_init(ctx, kind)
    dev = (G - K.ntk).abs().amax(dim=(-1, -2))
    if ctx.arg("normalise", "none") == "sqrt-m":
        dev = dev * math.sqrt(dn.m)
    return Observation(dev, extras={"lambda0": K.lambda0}, method=method)


def layer_gram_deviation(kind: str, ctx: Context) -> Observation:
    """Theorem D.1 (9)/(10): max_h max_{(i,l),(j,k)} |⟨x^{(h)}, x^{(h)}⟩ − K^{(h)}| (and, for residual nets,
    max |m^{-1/2} 1ᵀx^{(h)} − b^{(h)}| in extras, and in the value when args.include_b)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    K, _, kmethod = _kernels(ctx, dn, X)
    if ctx.arg("sampler", "conditional") == "full":
        Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
        xs, method = net.forward(dn, Ws, a, X).x, "full forward pass"
    else:
        xs, method = net.sample_init(ctx.generator, dn, X).x, "Gaussian-conditioning sampler"
    R = X.shape[0]
    dK = torch.stack([(net.point_gram(xs[h]) - K.layer[h]).abs().amax(dim=(-1, -2)) for h in range(1, dn.H + 1)], -1)
    value = dK.amax(-1)
    extras = {"worst_layer": dK.argmax(-1).to(X.dtype) + 1}
    if dn.residual:
        db = torch.stack([(xs[h].sum(2).reshape(R, -1) / math.sqrt(dn.m) - K.b[h]).abs().amax(-1)
                          for h in range(1, dn.H + 1)], -1).amax(-1)
        extras["b_deviation"] = db
        if ctx.arg("include_b", False):
            value = torch.maximum(value, db)
        if ctx.arg("which", "K") == "b":  # Theorem D.1 (10) alone
            value = db
    elif ctx.arg("which", "K") == "b":
        raise EstimatorError("which = 'b' (Theorem D.1 (10)) needs a residual architecture: FC has b = 0 and no b-recursion")
    if ctx.arg("normalise", "none") == "sqrt-m":
        value = value * math.sqrt(dn.m)
    return Observation(value, valid=_ok(dn, R), extras=extras, method=f"{method}; {kmethod}")


def lambda0(kind: str, ctx: Context) -> Observation:
    """λ₀ = λ_min(K^{(H)}) of each replicate's dataset. args.normalise = "depth" gives H²λ₀/(c_λ²λ³) = λ₀/(s²H⁰)
    for the residual nets (Proposition D.1's κ-type constant: λ₀ ≥ c_H κ)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    K, ok, kmethod = _kernels(ctx, dn, X)
    value = K.lambda0
    if ctx.arg("normalise", "none") == "depth":
        if not dn.residual or dn.H < 2:
            raise EstimatorError("normalise = 'depth' is for the residual architectures with H >= 2 "
                                 "(K^(H) carries s^2 = c_lambda^2 lambda^3 / H^2)")
        value = value * dn.H ** 2 / (dn.c_lambda ** 2 * dn.lam ** 3)
    elif ctx.arg("normalise", "none") == "depth-printed":  # Proposition D.1's printed c_H = c_λ λ^{3/2} / H²
        value = value * dn.H ** 2 / (dn.c_lambda * dn.lam ** 1.5)
    elif ctx.arg("normalise", "none") == "iterations":
        # §1.2: T(ε) = log(1/ε) / (η λ₀ / 2) at Theorem 4.1's η = λ₀ H² / n², over n² log(1/ε): 2 / (λ₀² H²)
        value = 2 / (value ** 2 * dn.H ** 2)
    elif ctx.arg("normalise", "none") == "width":
        # §1.2: Theorem 4.1's width max{n⁴/(λ₀⁴H⁶), n²/(λ₀²H²), n/δ, n² log(Hn²/δ)/λ₀²} over the claimed n⁴ H²
        n, H, delta = X.shape[1], dn.H, float(ctx.p("delta", 0.1))
        terms = torch.stack([n ** 4 / (value ** 4 * H ** 6), n ** 2 / (value ** 2 * H ** 2),
                             torch.full_like(value, n / delta), n ** 2 * math.log(H * n ** 2 / delta) / value ** 2], -1)
        value = terms.amax(-1) / (n ** 4 * H ** 2)
    extras = {"quadrature_change": torch.full_like(value, K.quadrature_change)}
    if dn.lam is not None:
        extras["lambda"] = dn.lam
    return Observation(value, valid=ok, extras=extras, method=kmethod)


def gram_drift(kind: str, ctx: Context) -> Observation:
    """A.4/B.4/C.4: sup over ‖W^{(h)} − W^{(h)}(0)‖_F ≤ √m R of ‖G^{(H)}(W) − G^{(H)}(W(0))‖₂ (lower estimate by the
    claim's search); args.normalise = "lambda0" divides by λ₀ (the lemmas' conclusions are ≤ λ₀/4, ≤ λ₀/2)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    G0 = net.last_layer_gram(dn, Ws, a, X)

    def target(Wt: list[torch.Tensor]) -> torch.Tensor:
        return torch.linalg.matrix_norm(net.last_layer_gram(dn, Wt, a, X) - G0, ord=2)

    value, found = maximise(target, Ws, math.sqrt(dn.m) * ctx.p("R"), ctx.search, ctx.generator,
                            steps=int(ctx.arg("steps", 20)), norm="frobenius")
    extras = {"found_by": found}
    valid = _ok(dn, X.shape[0])
    method = f"search={ctx.search} (Frobenius balls)"
    if ctx.arg("normalise", "none") == "lambda0":
        K, valid, kmethod = _kernels(ctx, dn, X)
        value = value / K.lambda0
        extras["lambda0"] = K.lambda0
        method += f"; {kmethod}"
    return Observation(value, valid=valid, extras=extras, method=method)


def _forward_bound(kind: str, dn: net.DuNet, ctx: Context, c_w0: torch.Tensor, c_x0: torch.Tensor,
                   R: float) -> list[torch.Tensor]:
    """Per-layer bounds on ‖x^{(h)}(k) − x^{(h)}(0)‖ of Lemmas A.3 / B.3 / C.3, h = 1..H, each (R,)."""
    Lip = dn.act.lipschitz
    cs = dn.c_sigma
    if kind == "fc":  # A.3: √c_σ L c_{x,0} g_{c_x}(h) R, c_x = 2√c_σ L c_{w,0}
        cx = 2 * math.sqrt(cs) * Lip * c_w0
        return [math.sqrt(cs) * Lip * c_x0 * _geometric(cx, h) * R for h in range(1, dn.H + 1)]
    version = ctx.arg("version", "proof")
    if kind == "resnet":
        if version == "statement":  # B.3 as stated: (√c_{x,0} L + c_{x,0}/c_{w,0}) e^{2 c_{x,0} c_{w,0} L} R
            b = (c_x0.sqrt() * Lip + c_x0 / c_w0) * torch.exp(2 * c_x0 * c_w0 * Lip) * R
        else:  # B.3's proof: (√c_σ L + c_{x,0}/c_{w,0}) e^{2 c_λ c_{w,0} L} R
            b = (math.sqrt(cs) * Lip + c_x0 / c_w0) * torch.exp(2 * dn.c_lambda * c_w0 * Lip) * R
        return [b] * dn.H
    sq = math.sqrt(dn.q)  # C.3: (√c_σ L √q + c_{x,0}/c_{w,0}) e^{2 c_{w,0} L √q c_λ} R
    return [(math.sqrt(cs) * Lip * sq + c_x0 / c_w0) * torch.exp(2 * c_w0 * Lip * sq * dn.c_lambda) * R] * dn.H


def forward_perturbation_ratio(kind: str, ctx: Context) -> Observation:
    """A.3/B.3/C.3 as a ratio: sup over the ball of max_{h,i} ‖x_i^{(h)}(W) − x_i^{(h)}(W(0))‖ / bound_h, with the
    sample's tightest constants ĉ_{w,0} = max_h ‖W^{(h)}(0)‖₂/√m, ĉ_{x,0} = max(1, max_{h,i} ‖x_i^{(h)}(0)‖)
    (CNN: c_{x,0} > 1 required). Valid when the hypothesis R ≤ c_{w,0} holds. args.version = "proof" |
    "statement" selects B.3's two printed constants."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    R = float(ctx.p("R"))
    with torch.no_grad():
        fwd0 = net.forward(dn, Ws, a, X)
    base = [x.detach() for x in fwd0.x[1:]]
    c_w0 = _c_w0(Ws, dn.m)
    c_x0 = fwd0.norms().amax(dim=(-1, -2)).clamp_min(1.0)
    bounds = _forward_bound(kind, dn, ctx, c_w0, c_x0, R)

    def target(Wt: list[torch.Tensor]) -> torch.Tensor:
        xs = net.forward(dn, Wt, a, X).x[1:]
        return torch.stack([(x - b).flatten(-2).norm(dim=-1).amax(-1) / bd
                            for x, b, bd in zip(xs, base, bounds)], -1).amax(-1)

    value, found = maximise(target, Ws, math.sqrt(dn.m) * R, ctx.search, ctx.generator,
                            steps=int(ctx.arg("steps", 20)), norm="frobenius")
    return Observation(value, valid=_ok(dn, X.shape[0], R <= c_w0), extras={"found_by": found, "c_w0": c_w0, "c_x0": c_x0},
                       method=f"search={ctx.search} (Frobenius balls); c_w0 from the Grams' top eigenvalues")


def gradient_norm(kind: str, ctx: Context) -> Observation:
    """max_h ‖∂L/∂W^{(h)}‖_F at initialisation (closed form), per layer in extras; args.normalise = "residual"
    divides by √n ‖y − u(0)‖ (the shape of the Q′ bounds of Lemmas A.5/B.5/C.5)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    y = _labels(ctx, X.shape[1])
    grads, fwd, _ = net.loss_gradients(dn, Ws, a, X, y)
    per = torch.stack([g.flatten(1).norm(dim=1) for g in grads], -1)
    value = per.amax(-1)
    if ctx.arg("normalise", "none") == "residual":
        value = value / (math.sqrt(X.shape[1]) * (y - fwd.out).norm(dim=-1))
    extras = {f"layer_{h + 1}": per[:, h] for h in range(dn.H)}
    return Observation(value, valid=_ok(dn, X.shape[0]), extras=extras, method="closed-form gradient")


def _c_sigma_c0(act: kernels.Activation, c0: float, grid: int = 201) -> float:
    """c_{σ,c0} = (min_{c0 ≤ α ≤ 1} E σ(αX)²)^{-1} (Appendix C), on a grid of α by 1-D quadrature."""
    alphas = torch.linspace(c0, 1.0, grid, dtype=torch.float64)
    vals = kernels.expect_1d(lambda z: act.f(z) ** 2, alphas ** 2, 200)
    return float(1.0 / vals.min())


def _q_prime(kind: str, ctx: Context, dn: net.DuNet, c_w0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(c_{x,0}, k) with Q′(s) = k √n ‖y − u(s)‖ in Lemmas A.5/B.5/C.5 (per replicate):
      FC   k = 2 c_{x,0} c_x^H, c_x = max{2√c_σ L c_{w,0}, 1}, c_{x,0} = 2 (Lemma A.1);
      Res  statement: k = 2 c_{x,0} c_{w,0} L e^{2 c_{x,0} c_{w,0} L} / H;  proof: k = 2 c_λ c_{x,0} L e^{2 c_λ c_{w,0} L} / H,
           c_{x,0} = 2 e^{c_λ c_{w,0} L} (B.1's proof);
      CNN  k = 2 c_λ c_{x,0} L √(pq) e^{2 c_λ c_{w,0} L √q} / H, c_{x,0} from C.1's proof."""
    Lip, cl, H = dn.act.lipschitz, dn.c_lambda, dn.H
    if kind == "fc":
        c_x0 = torch.full_like(c_w0, 2.0)
        cx = torch.clamp(2 * math.sqrt(dn.c_sigma) * Lip * c_w0, min=1.0)
        return c_x0, 2 * c_x0 * cx ** H
    if kind == "resnet":
        c_x0 = 2 * torch.exp(cl * c_w0 * Lip)
        if ctx.arg("version", "proof") == "statement":
            return c_x0, 2 * c_x0 * c_w0 * Lip * torch.exp(2 * c_x0 * c_w0 * Lip) / H
        return c_x0, 2 * cl * c_x0 * Lip * torch.exp(2 * cl * c_w0 * Lip) / H
    p, q = ctx.i("p"), dn.q
    csp = _c_sigma_c0(dn.act, 1 / math.sqrt(p))
    c_x0 = torch.maximum(math.sqrt(q) * Lip * math.sqrt(dn.c_sigma) * c_w0,
                         torch.full_like(c_w0, math.sqrt(2 * csp / dn.c_sigma))) \
        * torch.exp(math.sqrt(q) * cl * c_w0 * Lip)
    return c_x0, 2 * cl * c_x0 * Lip * math.sqrt(p * q) * torch.exp(2 * cl * c_w0 * Lip * math.sqrt(q)) / H


def gradient_norm_ratio(kind: str, ctx: Context) -> Observation:
    """Lemmas A.5/B.5/C.5 at s = 0: max_h ‖∂L/∂W^{(h)}(0)‖_F / Q′(0) (so ‖W(1) − W(0)‖_F ≤ η Q′(0) ⟺ ratio ≤ 1), Q′ as in
    `_q_prime` with the sample's ĉ_{w,0}; valid when the norm hypothesis 1/c_{x,0} ≤ ‖x^{(h)}(0)‖ ≤ c_{x,0} holds."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    y = _labels(ctx, X.shape[1])
    grads, fwd, _ = net.loss_gradients(dn, Ws, a, X, y)
    per = torch.stack([g.flatten(1).norm(dim=1) for g in grads], -1)
    n = X.shape[1]
    c_w0 = _c_w0(Ws, dn.m)
    c_x0, coef = _q_prime(kind, ctx, dn, c_w0)
    Q = coef * math.sqrt(n) * (y - fwd.out).norm(dim=-1)
    norms = fwd.norms()
    valid = _ok(dn, X.shape[0], (norms.amax(dim=(-1, -2)) <= c_x0) & (norms.amin(dim=(-1, -2)) >= 1 / c_x0))
    return Observation(per.amax(-1) / Q, valid=valid, extras={"c_w0": c_w0, "c_x0": c_x0},
                       method="closed-form gradient; c_w0 from the Grams' top eigenvalues")


# ------------------------------------------------------------------------------------ gradient descent

def _step_size(ctx: Context, kind: str, dn: net.DuNet, lam0: torch.Tensor, G0: torch.Tensor) -> torch.Tensor:
    """args.step = "paper": η = κ λ₀ / n² (FC: Theorem 3.1's O(λ₀/(n² 2^{O(H)})) with the 2^{O(H)} in κ) or
    η = κ λ₀ H² / n² (ResNet, Theorem 4.1; CNN, Theorem 5.1 with poly(p) in κ); "practical": η = κ / λ_max(G(0))."""
    kappa = float(ctx.p("kappa", 1.0))
    n = G0.shape[-1]
    if ctx.arg("step", "paper") == "practical":
        return kappa / torch.linalg.eigvalsh(G0)[..., -1]
    if kind == "fc":
        return kappa * lam0 / n ** 2
    return kappa * lam0 * dn.H ** 2 / n ** 2


def _trajectory(kind: str, ctx: Context, track_movement: bool = False, c_w0: list | None = None,
                track_gram: bool = False, track_terms: bool = False, track_du: bool = True):
    """GD from a fresh initialisation; `c_w0`, when a list, receives the sample's ĉ_{w,0} of W(0). Each quantity
    asks only for what it reads (losses and residual norms always; movement, per-step Grams and λ_min(G^{(H)}),
    gradient/step norms and the eq. (7) terms du, I_1 on request): the trajectory is the same either way."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    K, ok, kmethod = _kernels(ctx, dn, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    if c_w0 is not None:
        c_w0.append(_c_w0(Ws, dn.m))
    y = _labels(ctx, X.shape[1])
    with torch.no_grad():
        fwd = net.forward(dn, Ws, a, X)
        G0 = sum(net.grams(fwd, net.backward(dn, Ws, a, fwd)))
        eta = _step_size(ctx, kind, dn, K.lambda0, G0)
        tr = net.gradient_descent(dn, Ws, a, X, y, eta, ctx.i("T"), track_gram=track_gram,
                                   track_movement=track_movement, track_terms=track_terms, track_du=track_du)
    return dn, K, ok, eta, tr, f"full-batch GD, T = {ctx.i('T')}, step = {ctx.arg('step', 'paper')}; {kmethod}"


def _rate(eta: torch.Tensor, lam0: torch.Tensor, T: int) -> torch.Tensor:
    """(1 − ηλ₀/2)^k for k = 0..T, (R, T+1)."""
    k = torch.arange(T + 1, dtype=eta.dtype)
    return (1 - eta * lam0 / 2).unsqueeze(-1) ** k


def gd_loss_ratio(kind: str, ctx: Context) -> Observation:
    """Theorems 3.1/4.1/5.1: max_{k ≤ T} L(w(k)) / ((1 − ηλ₀/2)^k L(w(0))) (≤ 1 is the conclusion)."""
    _dn, K, ok, eta, tr, method = _trajectory(kind, ctx)
    T = ctx.i("T")
    if T < 1:
        raise EstimatorError("T must be >= 1 GD steps")
    # k = 1, 2, … as stated (k = 0 is equality by definition)
    ratio = (tr.loss / (_rate(eta, K.lambda0, T) * tr.loss[:, :1]))[:, 1:].amax(-1)
    emp_rate = -torch.log(tr.loss[:, -1] / tr.loss[:, 0]) / max(T, 1)
    return Observation(ratio, valid=ok, extras={"eta": eta, "lambda0": K.lambda0, "empirical_rate": emp_rate,
                                                "final_loss_ratio": tr.loss[:, -1] / tr.loss[:, 0]},
                       method=method)


def _condition_6_1(tr: net.Trajectory, eta: torch.Tensor, lam0: torch.Tensor, T: int) -> torch.Tensor:
    """Condition 6.1 along the whole trajectory: ‖y − u(k)‖² ≤ (1 − ηλ₀/2)^k ‖y − u(0)‖² for all k ≤ T."""
    bound = _rate(eta, lam0, T) * tr.residual_norm[:, :1] ** 2
    return (tr.residual_norm ** 2 <= bound * (1 + 1e-12)).all(-1)


def gd_weight_movement(kind: str, ctx: Context) -> Observation:
    """S6.3 / Lemmas A.5, B.5, C.5: max_{k ≤ T, h} ‖W^{(h)}(k) − W^{(h)}(0)‖_F ("≲ 1" in m); args.normalise =
    "sqrt-m" divides by √m (the per-neuron average, "≲ 1/√m")."""
    dn, K, ok, eta, tr, method = _trajectory(kind, ctx, track_movement=True)
    value = tr.movement.amax(dim=(-1, -2))
    if ctx.arg("normalise", "none") == "sqrt-m":
        value = value / math.sqrt(dn.m)
    return Observation(value, valid=ok, extras={"eta": eta, "lambda0": K.lambda0}, method=method)


def gd_movement_bound_ratio(kind: str, ctx: Context) -> Observation:
    """Lemmas A.5/B.5/C.5 along GD: args.which = "movement": max_{s ≤ T, h} ‖W^{(h)}(s) − W^{(h)}(0)‖_F / (R′√m) with
    R′√m = 4 Q′(0)/λ₀ (the printed R′: 8 c_{x,0} c_x^H √n ‖y − u(0)‖/(λ₀√m) for FC, etc.); "step": max_{s, h}
    ‖W^{(h)}(s) − W^{(h)}(s−1)‖_F / (η Q′(s−1)). Q′ from `_q_prime` (args.version for B.5). Valid under Condition 6.1 along
    the run (the lemmas' hypothesis) and the sample's Assumption."""
    cw: list[torch.Tensor] = []
    dn, K, ok, eta, tr, method = _trajectory(kind, ctx, track_movement=True, c_w0=cw, track_terms=True, track_du=False)
    _c_x0, coef = _q_prime(kind, ctx, dn, cw[0])
    n = tr.i1.shape[-1]
    Q = coef.unsqueeze(-1) * math.sqrt(n) * tr.residual_norm  # (R, T+1): Q′(s)
    which = ctx.arg("which", "movement")
    if which == "movement":
        value = tr.movement.amax(dim=(-1, -2)) / (4 * Q[:, 0] / K.lambda0)
    elif which == "step":
        value = (tr.step.amax(-1) / (eta.unsqueeze(-1) * Q[:, :-1])).amax(-1)
    else:
        raise EstimatorError(f"which = '{which}': expected 'movement' or 'step'")
    valid = ok & _condition_6_1(tr, eta, K.lambda0, ctx.i("T"))
    return Observation(value, valid=valid, extras={"eta": eta, "lambda0": K.lambda0, "c_w0": cw[0]},
                       method=f"{method}; c_w0 from the Grams' top eigenvalues")


def gd_second_order_ratio(kind: str, ctx: Context) -> Observation:
    """Lemmas A.6/B.6/C.6: max_k ‖I_2(k)‖ / (η λ₀ ‖y − u(k)‖), I_2 = u(k+1) − u(k) − I_1(k), I_1 = −ηG(k)(u(k) − y)
    (eq. 7; bound 1/8). Valid when Condition 6.1 held along the run (the lemmas' hypothesis).

    Δu = u(k+1) − u(k) is the exact step from W(k) propagated as differences (`net.output_step`): the difference of
    two forward passes carries the rounding of u (~1e-16 |u|), which at the paper's steps (η λ₀ ~ 1e-15 for small
    λ₀) exceeded I_2 itself and read up to 0.19 in place of ~1e-5. What is left is I_2 = Δu − I_1, a difference of
    two ~equal terms accurate to their own rounding: extras["scale"] is their size in units of the ratio."""
    _dn, K, ok, eta, tr, method = _trajectory(kind, ctx, track_terms=True)
    i2 = (tr.du - tr.i1).norm(dim=-1)
    unit = (eta * K.lambda0).unsqueeze(-1) * tr.residual_norm[:, :-1]
    value = (i2 / unit).amax(-1)
    scale = (torch.maximum(tr.du.norm(dim=-1), tr.i1.norm(dim=-1)) / unit).amax(-1)
    valid = ok & _condition_6_1(tr, eta, K.lambda0, ctx.i("T"))
    return Observation(value, valid=valid, extras={"eta": eta, "lambda0": K.lambda0, "scale": scale},
                       method=f"{method}; output change by difference propagation")


def gd_quadratic_term_ratio(kind: str, ctx: Context) -> Observation:
    """Lemmas A.7/B.7/C.7: max_k ‖u(k+1) − u(k)‖² / (η λ₀ ‖y − u(k)‖²) (bound 1/8); valid under Condition 6.1."""
    _dn, K, ok, eta, tr, method = _trajectory(kind, ctx, track_terms=True)
    value = (tr.du.norm(dim=-1) ** 2 / (eta * K.lambda0).unsqueeze(-1) / tr.residual_norm[:, :-1] ** 2).amax(-1)
    valid = ok & _condition_6_1(tr, eta, K.lambda0, ctx.i("T"))
    return Observation(value, valid=valid, extras={"eta": eta, "lambda0": K.lambda0}, method=method)


def gd_gram_eigenvalue_ratio(kind: str, ctx: Context) -> Observation:
    """§6 ("it suffices to prove λ_min(G^{(H)}(k)) ≥ λ₀/2"): min_{k ≤ T} λ_min(G^{(H)}(k)) / λ₀ along GD."""
    _dn, K, ok, eta, tr, method = _trajectory(kind, ctx, track_gram=True)
    value = tr.lam_min_gram_last.amin(-1) / K.lambda0
    return Observation(value, valid=ok, extras={"eta": eta, "lambda0": K.lambda0}, method=method)


ESTIMATORS: tuple[tuple[str, str, Callable[[str, Context], Observation]], ...] = (
    ("max-layer-norm", ("max over h in [H], i in [n] of ||x_i^(h)(0)|| (Frobenius for the CNN) at initialisation "
     "(Lemmas A.1/B.1/C.1 upper side)"), layer_norm_max),
    ("min-layer-norm", ("min over h in [H], i in [n] of ||x_i^(h)(0)|| at initialisation (Lemmas A.1/B.1/C.1 "
     "lower side)"), layer_norm_min),
    ("layer-norm-deviation", "max over h, i of | ||x_i^(h)(0)|| - 1 | at initialisation (A.1's proof range)",
     layer_norm_deviation),
    ("gram-least-eigenvalue-ratio", ("lambda_min(G^(H)(0)) / lambda_0, lambda_0 = lambda_min(K^(H)) by 2-D "
     "Gauss-Hermite (Lemmas A.2/B.2/C.2: >= 3/4)"), gram_least_eigenvalue_ratio),
    ("gram-deviation-ratio", "||G^(H)(0) - K^(H)||_2 / lambda_0 (exact spectral norm; section 6 needs <= 1/4)",
     gram_deviation_ratio),
    ("gram-deviation-max", ("max_ij |G^(H)_ij(0) - K^(H)_ij| (entrywise; args.normalise = 'sqrt-m' multiplies by "
     "sqrt(m))"), gram_deviation_max),
    ("layer-gram-deviation", ("Theorem D.1 (9): max over h, points of |<x^(h), x^(h)> - K^(h)| at init (b^(h) "
     "deviation (10) in extras)"), layer_gram_deviation),
    ("lambda0", ("lambda_0 = lambda_min(K^(H)) of each dataset by quadrature checked with 2x nodes (args.normalise "
     "= 'depth': H^2 lambda_0 / (c_lambda^2 lambda^3))"), lambda0),
    ("gram-drift", ("sup over ||W^(h) - W^(h)(0)||_F <= sqrt(m) R of ||G^(H)(W) - G^(H)(W(0))||_2 by the claim's "
     "search (args.normalise = 'lambda0' divides by lambda_0)"), gram_drift),
    ("forward-perturbation-ratio", ("sup over the sqrt(m) R Frobenius balls of max_{h,i} ||x^(h)(W) - x^(h)(0)|| "
     "over the Lemma A.3/B.3/C.3 bound with the sample's c_w0, c_x0"), forward_perturbation_ratio),
    ("gradient-norm", ("max over h of ||dL/dW^(h)||_F at initialisation (closed form; squared loss, sum over "
     "samples)"), gradient_norm),
    ("gradient-norm-ratio", ("max over h of ||dL/dW^(h)(0)||_F / Q'(0) of Lemmas A.5/B.5/C.5 (args.version "
     "'proof'/'statement' for B.5)"), gradient_norm_ratio),
    ("gd-loss-ratio", ("max over k <= T of L(w(k)) / ((1 - eta lambda_0/2)^k L(w(0))) along full-batch GD "
     "(Theorems 3.1/4.1/5.1)"), gd_loss_ratio),
    ("gd-weight-movement", ("max over k <= T, h of ||W^(h)(k) - W^(h)(0)||_F along GD (section 6 lazy-training "
     "claim; args.normalise = 'sqrt-m')"), gd_weight_movement),
    ("gd-movement-bound-ratio", ("Lemmas A.5/B.5/C.5 along GD: max ||W^(h)(s) - W^(h)(0)||_F / (R' sqrt(m)) (args.which "
     "'movement') or max ||W^(h)(s) - W^(h)(s-1)||_F / (eta Q'(s-1)) ('step'), valid under Condition 6.1"),
     gd_movement_bound_ratio),
    ("gd-second-order-ratio", ("max over k of ||I_2(k)|| / (eta lambda_0 ||y - u(k)||) along GD, valid under "
     "Condition 6.1 (Lemmas A.6/B.6/C.6: <= 1/8)"), gd_second_order_ratio),
    ("gd-quadratic-term-ratio", ("max over k of ||u(k+1) - u(k)||^2 / (eta lambda_0 ||y - u(k)||^2) along GD, "
     "valid under Condition 6.1 (Lemmas A.7/B.7/C.7: <= 1/8)"), gd_quadratic_term_ratio),
    ("gd-gram-eigenvalue-ratio", ("min over k <= T of lambda_min(G^(H)(k)) / lambda_0 along GD (section 6: "
     ">= 1/2)"), gd_gram_eigenvalue_ratio),
)


def _bind(fn: Callable[[str, Context], Observation]) -> Callable[[Context], Observation]:
    def estimator(ctx: Context) -> Observation:
        kind = KINDS.get(ctx.network)
        if kind is None:
            raise EstimatorError(f"du2018 quantities need one of the networks {sorted(KINDS)}, got '{ctx.network}'")
        return fn(kind, ctx)

    estimator.__name__ = fn.__name__
    estimator.__doc__ = fn.__doc__
    estimator.__module__ = __name__
    return estimator


for _name, _description, _fn in ESTIMATORS:
    QUANTITIES.register(f"du2018-{_name}", _description, networks=tuple(KINDS))(_bind(_fn))


# ----------------------------------------------------------------------------- more du2018 estimators

def init_residual(kind: str, ctx: Context) -> Observation:
    """‖y − u(0)‖₂ / √n at initialisation ("‖y − u(0)‖₂ = O(√n)", used in Lemmas A.6/B.6/C.6)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    y = _labels(ctx, X.shape[1])
    with torch.no_grad():
        out = net.forward(dn, Ws, a, X).out
    return Observation((y - out).norm(dim=-1) / math.sqrt(X.shape[1]), valid=_ok(dn, X.shape[0]),
                       method="full forward pass")


def data_lambda_value(kind: str, ctx: Context) -> Observation:
    """λ of Assumption 4.1/5.1 of each dataset (min over i ≠ j of the 2×2 / 2p×2p blocks of K^{(0)}); extras: the
    closed form 1 − max_{i≠j} |⟨x_i, x_j⟩| (FC/ResNet) and its absolute difference from λ."""
    X = _data(ctx, kind)
    q = ctx.i("q", 3) if kind == "cnn" else 1
    lam = net.data_lambda(X, q)
    extras = {}
    if kind != "cnn":
        G = X[..., 0] @ X[..., 0].transpose(-1, -2)
        off = (G - torch.diag_embed(torch.diagonal(G, dim1=-2, dim2=-1))).abs().amax(dim=(-1, -2))
        extras = {"closed_form": 1 - off, "closed_form_error": (lam - (1 - off)).abs()}
    return Observation(lam, extras=extras, method="eigenvalues of the 2x2 blocks (closed form)")


def kernel_block_lambda_ratio(kind: str, ctx: Context) -> Observation:
    """Lemma D.1: min over h = 2..H of λ_min of the 2-blocks of 𝒲(K^{(h−1)}) (the covariance of layer h's
    pre-activations; 𝒲 is the identity here) over λ(K^{(0)}) = min_{i≠j} λ_min(Σ_ij(K^{(0)})); ≥ 1 is the lemma (Theorem
    D.1's λ is the min over h ∈ [H], whose h = 1 term is λ(K^{(0)}) itself)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    base = 1 if ctx.arg("base", "K0") == "K1" else 0  # "K1": only the layers whose a^{(h)} is the identity (h >= 2)
    if dn.H < base + 2:
        raise EstimatorError(f"Lemma D.1 compares later layers with base layer {base}: need H >= {base + 2}")
    K, _ok_k, kmethod = _kernels(ctx, dn, X)
    n, p = X.shape[1], X.shape[3]
    lam = [kernels.block_lambda_min(C, n, p) for C in K.cov]
    value = torch.stack(lam[base + 1:], -1).amin(-1) / lam[base]
    # a block's λ_min errs by ~eps times the block's entries, i.e. eps max|K| / λ_base in the ratio: that is the
    # operands' magnitude for the rounding tolerance (a nearly collinear pair puts λ_base near 1e-6, where the
    # telescoped ratio's rounding alone reads 1 - 2e-10)
    scale = torch.stack([C.abs().amax(dim=(-1, -2)) for C in K.cov[base:]], -1).amax(-1) / lam[base]
    return Observation(value, valid=_ok(dn, X.shape[0]), extras={"lambda_K0": lam[0], "scale": scale}, method=kmethod)


def kernel_max_entry(kind: str, ctx: Context) -> Observation:
    """Remark D.4: max over h and entries of |𝒲(K^{(h−1)})| (M/100) and, for residual nets, of |b^{(h)}| (B/100, in
    extras and in the value when args.include_b): O(1) in the depth for ResNet/CNN."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    K, _ok_k, kmethod = _kernels(ctx, dn, X)
    value = torch.stack([C.abs().amax(dim=(-1, -2)) for C in K.cov], -1).amax(-1)
    extras = {}
    if dn.residual:
        bmax = torch.stack([b.abs().amax(-1) for b in K.b[1:] if b is not None], -1).amax(-1)
        extras["b_max"] = bmax
        if ctx.arg("include_b", False):
            value = torch.maximum(value, bmax)
    return Observation(value, valid=_ok(dn, X.shape[0]), extras=extras, method=kmethod)


def one_step_descent_ratio(kind: str, ctx: Context) -> Observation:
    """Section 6, eq. (7) and after: one GD step from initialisation; (y − u)ᵀ I_1 / (η λ_min(G^{(H)}) ‖y − u‖²) ≥ 1
    (I_1 = −η G (u − y), G = Σ_h G^{(h)} ⪰ G^{(H)}: the printed chain read with the factor η). extras: λ_min(G − G^{(H)}) ≥ 0
    up to rounding, and the relative error of I_1 + I_2 = u(1) − u(0) (I_2 := Δu − I_1, so eq. (7)'s split is exact)."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    K, ok, kmethod = _kernels(ctx, dn, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    y = _labels(ctx, X.shape[1])
    with torch.no_grad():
        fwd = net.forward(dn, Ws, a, X)
        Gs = net.grams(fwd, net.backward(dn, Ws, a, fwd))
        G, GH = sum(Gs), Gs[-1]
        eta = _step_size(ctx, kind, dn, K.lambda0, G)
        r = y - fwd.out
        i1 = eta[:, None] * (G @ r.unsqueeze(-1)).squeeze(-1)  # −η G (u − y) = η G (y − u)
        value = (r * i1).sum(-1) / (eta * kernels.lambda_min(GH) * (r * r).sum(-1))
        gap = kernels.lambda_min(G - GH) / kernels.lambda_min(G).abs().clamp_min(1e-300)
    return Observation(value, valid=ok, extras={"lambda_min_G_minus_GH_rel": gap, "eta": eta},
                       method=f"closed-form layer Grams; {kmethod}")


def gradient_autograd_error(kind: str, ctx: Context) -> Observation:
    """Appendix A/B/C gradient and Gram closed forms against autograd: max relative error of ∂L/∂W^{(h)} (args.which
    "gradient") or of G^{(H)}_{ij} = ⟨∂u_i/∂W^{(H)}, ∂u_j/∂W^{(H)}⟩ from per-example autograd gradients ("gram")."""
    X = _data(ctx, kind)
    dn = _net(ctx, kind, X)
    Ws, a = net.init(ctx.generator, ctx.replicates, dn, X.shape[2], ctx.dtype)
    y = _labels(ctx, X.shape[1])
    Wg = [W.clone().requires_grad_(True) for W in Ws]
    fwd = net.forward(dn, Wg, a, X)
    which = ctx.arg("which", "gradient")
    if which == "gradient":
        auto = torch.autograd.grad(net.loss(fwd.out, y).sum(), Wg)
        with torch.no_grad():
            closed, _, _ = net.loss_gradients(dn, Ws, a, X, y)
        err = torch.stack([(c - g).flatten(1).norm(dim=1) / g.flatten(1).norm(dim=1) for c, g in zip(closed, auto)], -1)
        value = err.amax(-1)
    elif which == "gram":
        rows = [torch.autograd.grad(fwd.out[:, i].sum(), Wg[-1], retain_graph=True)[0].flatten(1)
                for i in range(X.shape[1])]
        J = torch.stack(rows, 1)  # (R, n, params of W^(H))
        auto_G = J @ J.transpose(-1, -2)
        with torch.no_grad():
            closed_G = net.last_layer_gram(dn, Ws, a, X)
        value = (closed_G - auto_G).abs().amax(dim=(-1, -2)) / auto_G.abs().amax(dim=(-1, -2))
    else:
        raise EstimatorError(f"which = '{which}': expected 'gradient' or 'gram'")
    return Observation(value.detach(), valid=_ok(dn, X.shape[0]), method="torch.autograd (float64) vs closed form")


for _name, _description, _fn in (
    ("init-residual", "||y - u(0)|| / sqrt(n) at initialisation ('||y - u(0)|| = O(sqrt n)')", init_residual),
    ("data-lambda", "lambda of Assumption 4.1/5.1 of each dataset (closed form 1 - max |<x_i, x_j>| in extras)",
     data_lambda_value),
    ("kernel-block-lambda-ratio", ("Lemma D.1: min over h >= 2 of the 2-block lambda_min of W(K^(h-1)) over "
     "lambda(K^(0)) (>= 1)"), kernel_block_lambda_ratio),
    ("kernel-max-entry", "Remark D.4: max over h of |W(K^(h-1))| entries (M / 100); b in extras", kernel_max_entry),
    ("one-step-descent-ratio", ("section 6 / eq. (7): (y - u)^T I_1 / (eta lambda_min(G^(H)) ||y - u||^2) for one GD "
     "step (>= 1)"), one_step_descent_ratio),
    ("gradient-autograd-error", ("max relative error of the closed-form dL/dW^(h) (args.which 'gradient') or "
     "G^(H) ('gram') against torch.autograd"), gradient_autograd_error),
):
    QUANTITIES.register(f"du2018-{_name}", _description, networks=tuple(KINDS))(_bind(_fn))


# ------------------------------------------------------------ setting-free du2018 lemmas (network "scalar")

def _spd2(ctx: Context, R: int, lo: float, hi: float) -> torch.Tensor:
    """R random symmetric positive definite 2×2 matrices, eigenvalues log-uniform on [lo, hi], random rotation."""
    g = ctx.generator
    ev = torch.exp(math.log(lo) + torch.rand(R, 2, generator=g, dtype=torch.float64) * (math.log(hi) - math.log(lo)))
    th = torch.rand(R, generator=g, dtype=torch.float64) * math.pi
    Qm = torch.stack([torch.stack([th.cos(), -th.sin()], -1), torch.stack([th.sin(), th.cos()], -1)], -2)
    return Qm @ torch.diag_embed(ev) @ Qm.transpose(-1, -2)


def _pair_F(act: kernels.Activation, S: torch.Tensor, Q: int = 96) -> torch.Tensor:
    """F(S) = E_{(u,v)~N(0,S)} ρ(u)ρ(v) by 2-D Gauss–Hermite (Lemmas E.2/E.3)."""
    return kernels.expect_2d(act.f, act.f, S[..., 0, 0], S[..., 1, 1], S[..., 0, 1], Q)


def _sqrtm(S: torch.Tensor) -> torch.Tensor:
    ev, V = torch.linalg.eigh(S)
    return V @ torch.diag_embed(ev.clamp_min(0).sqrt()) @ V.transpose(-1, -2)


@QUANTITIES.register("du2018-pair-expectation-lipschitz", (
    "Lemmas E.2/E.3: |F(A^2) - F(B^2)| / (10 L max{||A||,||B||} ||A - B||) (args.form 'e2'), |F(A) - F(B)| / ((40 L / "
    "sqrt(lambda)) sqrt(max ||.||) ||A - B||_inf) ('e3'), ||sqrt A - sqrt B|| / ((2/sqrt(lambda)) ||A - B||) ('sqrt'); "
    "F(S) = E rho(u) rho(v), (u, v) ~ N(0, S); args.constant 'c-rho' puts sqrt(rho(0)^2 + sup|rho'|^2) (the preamble's "
    "C_rho / 10) for L"), networks=("scalar",))
def pair_expectation_lipschitz(ctx: Context) -> Observation:
    """Random SPD pairs at scales 1e-3..1e2, small and large perturbations (half of the draws perturb by ~1e-4 of the
    scale, half by O(1)); ρ = the claim's class member or args.activation (default softplus, whose Lipschitz and
    smoothness constants ≤ L = 1)."""
    R = ctx.replicates
    act = _activation(ctx)
    Lc = max(act.lipschitz, act.smoothness)  # "Lipschitz and smoothness constants bounded by L"
    if ctx.arg("constant", "printed") == "c-rho":  # the preamble's C_rho / 10 = sqrt(rho(0)^2 + sup|rho'|^2) for L
        Lc = math.sqrt(float(act.f(torch.zeros((), dtype=torch.float64))) ** 2 + act.lipschitz ** 2)
    form = ctx.arg("form", "e2")
    A = _spd2(ctx, R, 1e-3, 1e2)
    small = torch.rand(R, generator=ctx.generator, dtype=torch.float64) < 0.5
    D = _spd2(ctx, R, 1e-3, 1e2) * torch.where(small, 1e-4, 1.0).reshape(-1, 1, 1)
    sign = torch.where(torch.rand(R, generator=ctx.generator, dtype=torch.float64) < 0.5, -1.0, 1.0).reshape(-1, 1, 1)
    B = A + sign * D
    ok = torch.linalg.eigvalsh(B)[..., 0] > 0
    B = torch.where(ok.reshape(-1, 1, 1), B, A + D)  # keep B ≻ 0
    nA, nB = (torch.linalg.matrix_norm(M, ord=2) for M in (A, B))
    if form == "e2":  # A, B are the square roots: covariances A², B²
        lhs = (_pair_F(act, A @ A) - _pair_F(act, B @ B)).abs()
        rhs = 10 * Lc * torch.maximum(nA, nB) * torch.linalg.matrix_norm(A - B, ord=2)
    elif form in ("e3", "sqrt"):
        lam = torch.minimum(torch.linalg.eigvalsh(A)[..., 0], torch.linalg.eigvalsh(B)[..., 0])
        if form == "e3":
            lhs = (_pair_F(act, A) - _pair_F(act, B)).abs()
            rhs = 40 * Lc / lam.sqrt() * torch.maximum(nA, nB).sqrt() * (A - B).abs().amax(dim=(-1, -2))
        else:
            lhs = torch.linalg.matrix_norm(_sqrtm(A) - _sqrtm(B), ord=2)
            rhs = 2 / lam.sqrt() * torch.linalg.matrix_norm(A - B, ord=2)
    else:
        raise EstimatorError(f"form = '{form}': expected 'e2', 'e3' or 'sqrt'")
    return Observation(lhs / rhs, extras={"norm_max": torch.maximum(nA, nB)},
                       method="2-D Gauss-Hermite (96 nodes) for F; eigh for square roots")


@QUANTITIES.register("du2018-product-perturbation-ratio", (
    "Lemma E.1: ||prod A_i - prod B_i||_F / ((sum alpha_i) prod M_i), M_i = max(||A_i||_2, ||B_i||_2), alpha_i = "
    "||A_i - B_i||_F / M_i, over random conformable chains (random and rank-one aligned perturbations)"),
    networks=("scalar",))
def product_perturbation_ratio(ctx: Context) -> Observation:
    """Chains of k = params k matrices, each draw its own dimensions in [1, dmax] (a chain drawn per replicate, not
    per shard: a shard's draws are then i.i.d., and a quick configuration explores thousands of shapes, not one);
    the matrices are zero-padded to dmax x dmax, which leaves products, Frobenius and spectral norms exactly as they
    are. Half the perturbations are rank one along the top singular pair of A_i (where ‖XY‖_F ≤ ‖X‖₂‖Y‖_F is
    tightest)."""
    R, k, dmax = ctx.replicates, ctx.i("k"), ctx.i("dmax", 16)
    g = ctx.generator
    dims = torch.randint(1, dmax + 1, (R, k + 1), generator=g)
    inside = torch.arange(dmax, device=dims.device)[None, :] < dims[..., None]  # (R, k + 1, dmax)
    PA = PB = None
    alpha_sum = torch.zeros(R, dtype=torch.float64)
    Mprod = torch.ones(R, dtype=torch.float64)
    scale = torch.exp(torch.randn(R, k, generator=g, dtype=torch.float64) * 2)  # perturbation sizes over 4 decades
    for i in range(k):
        mask = (inside[:, i, :, None] & inside[:, i + 1, None, :]).to(torch.float64)
        A = torch.randn(R, dmax, dmax, generator=g, dtype=torch.float64) * mask
        U, S, Vh = torch.linalg.svd(A, full_matrices=False)
        rank_one = U[..., :, :1] @ Vh[..., :1, :] * S[..., :1].unsqueeze(-1)
        E = torch.where(torch.rand(R, 1, 1, generator=g, dtype=torch.float64) < 0.5, rank_one,
                        torch.randn(R, dmax, dmax, generator=g, dtype=torch.float64) * mask)
        B = A + E / torch.linalg.matrix_norm(E).reshape(-1, 1, 1) * (0.1 * scale[:, i] * S[..., 0]).reshape(-1, 1, 1)
        M = torch.maximum(S[..., 0], torch.linalg.matrix_norm(B, ord=2))  # ||A||_2 from A's SVD, not a second one
        alpha_sum = alpha_sum + torch.linalg.matrix_norm(A - B) / M
        Mprod = Mprod * M
        PA = A if PA is None else PA @ A
        PB = B if PB is None else PB @ B
    value = torch.linalg.matrix_norm(PA - PB) / (alpha_sum * Mprod)
    return Observation(value, method="exact SVD norms")


@QUANTITIES.register("du2018-tensor-power-conditioning", (
    "Lemma D.3: lambda_min / lambda_max of the Gram matrix of vec(v_i^{(x) n}) (entries <v_i, v_j>^n) for n unit, "
    "non-parallel v_i in R^d; rank n iff > 0"), networks=("scalar",))
def tensor_power_conditioning(ctx: Context) -> Observation:
    """⟨vec(v^{⊗n}), vec(w^{⊗n})⟩ = ⟨v, w⟩ⁿ, so the Gram matrix of the d^n × n matrix is [(v_iᵀv_j)ⁿ] and its rank is the
    matrix's rank, without forming d^n entries. Points: random unit vectors, with a pair at angle args-free 1e-2..0.3."""
    R, n, d = ctx.replicates, ctx.i("n"), ctx.i("d")
    V = torch.randn(R, n, d, generator=ctx.generator, dtype=torch.float64)
    V = V / V.norm(dim=-1, keepdim=True)
    C = V @ V.transpose(-1, -2)  # the cosines <v_i, v_j>
    G = C ** n
    ev = torch.linalg.eigvalsh(G)
    ratio = ev[..., 0] / ev[..., -1]
    # float64 eigvalsh cannot tell a ratio within its rounding (~n eps) from 0 or a negative: the rare draws with a
    # nearly parallel pair land there (1 in 20,000 at n = 4, d = 2), so those are recomputed from the same vectors
    # in 60-digit arithmetic, which resolves ratios down to ~1e-55
    low = (ratio.abs() <= TENSOR_POWER_EXACT_BELOW).nonzero().flatten().tolist()
    if low:
        ratio = ratio.clone()
        for r in low:
            ratio[r] = _tensor_power_ratio_exact(V[r].cpu().tolist(), n)
    offd = C.abs() - torch.eye(n, dtype=torch.float64, device=V.device)
    return Observation(ratio, extras={"max_abs_cos": offd.amax(dim=(-1, -2))},
                       method="Gram of tensor powers, eigvalsh (float64; 60 digits where the ratio is below 1e-10)")


TENSOR_POWER_EXACT_BELOW = 1e-10


def _tensor_power_ratio_exact(vectors: list[list[float]], n: int) -> float:
    """lambda_min / lambda_max of [<v_i, v_j>^n] for the given (float64) vectors, in 60-digit arithmetic."""
    import mpmath

    with mpmath.workdps(60):
        v = [[mpmath.mpf(x) for x in row] for row in vectors]
        M = mpmath.matrix([[mpmath.fdot(a, b) ** n for b in v] for a in v])
        ev = mpmath.eigsy(M, eigvals_only=True)
        return float(min(ev) / max(ev))


@QUANTITIES.register("du2018-activation-constants", (
    "Section 2: max of sup|sigma'|, sup|sigma''| and the secant slopes |sigma(a) - sigma(b)|/|a - b|, |sigma'(a) - "
    "sigma'(b)|/|a - b| of softplus over random points (scales 1e-3..700, exact 0); 'bounded by 1' is <= 1"),
    networks=("scalar",))
def activation_constants(ctx: Context) -> Observation:
    R = ctx.replicates
    act = kernels.get_activation(str(ctx.arg("activation", "softplus")))
    g = ctx.generator
    scale = torch.exp(torch.rand(R, 1, generator=g, dtype=torch.float64) * math.log(7e5)) * 1e-3
    z = torch.randn(R, 64, generator=g, dtype=torch.float64) * scale
    z[:, 0] = 0.0
    w = z + torch.randn(R, 64, generator=g, dtype=torch.float64) * scale * 1e-3
    slope1 = ((act.f(z) - act.f(w)) / (z - w)).abs()
    slope2 = ((act.df(z) - act.df(w)) / (z - w)).abs()
    parts = torch.stack([act.df(z).abs().amax(-1), act.d2f(z).abs().amax(-1), slope1.amax(-1), slope2.amax(-1)], -1)
    return Observation(parts.amax(-1), extras={"sup_d2": parts[:, 1]}, method="closed-form derivatives")


@QUANTITIES.register("du2018-patch-norm-ratio", (
    "Section 2.2: ||phi(x)||_F / ||x||_F (args.side 'lower': >= 1) or ||phi(x)||_F / (sqrt(q) ||x||_F) ('upper': <= 1) "
    "for random images with mass on interior or boundary pixels"), networks=("scalar",))
def patch_norm_ratio(ctx: Context) -> Observation:
    R, C, p, q = ctx.replicates, ctx.i("C"), ctx.i("p"), ctx.i("q")
    g = ctx.generator
    x = torch.randn(R, C, p, generator=g, dtype=torch.float64)
    mode = torch.randint(0, 3, (R, 1, 1), generator=g)  # 0: spread, 1: boundary pixels only, 2: interior only
    pix = torch.arange(p).reshape(1, 1, p)
    r = (q - 1) // 2
    boundary = (pix < r) | (pix >= p - r)
    # q = 1 has no boundary pixels: its "boundary" third stays spread (zeroing every pixel gave 0/0)
    x = torch.where((mode == 1) & ~boundary & bool(boundary.any()), 0.0, x)
    x = torch.where((mode == 2) & boundary & (p > 2 * r), 0.0, x)
    ratio = net.patches(x, q).flatten(1).norm(dim=1) / x.flatten(1).norm(dim=1)
    side = ctx.arg("side", "upper")
    value = ratio if side == "lower" else ratio / math.sqrt(q)
    return Observation(value, method="explicit patch operator")


@QUANTITIES.register("du2018-weyl-ratio", (
    "Section 6: lambda_min(K + E) / lambda_0 for PSD K (lambda_0 = lambda_min(K)) and symmetric ||E||_2 <= lambda_0/4 "
    "(args.part 'init': >= 3/4); 'along': two perturbations of norm <= lambda_0/4 each (>= 1/2); random and worst "
    "(-lambda_0/4 v v^T) directions"), networks=("scalar",))
def weyl_ratio(ctx: Context) -> Observation:
    R, n = ctx.replicates, ctx.i("n")
    g = ctx.generator
    Z = torch.randn(R, n, 2 * n, generator=g, dtype=torch.float64)
    K = Z @ Z.transpose(-1, -2) / (2 * n) + 1e-3 * torch.eye(n, dtype=torch.float64)
    ev, V = torch.linalg.eigh(K)
    lam0 = ev[..., 0]
    reps = 2 if ctx.arg("part", "init") == "along" else 1
    total = K.clone()
    for _ in range(reps):
        S = torch.randn(R, n, n, generator=g, dtype=torch.float64)
        S = S + S.transpose(-1, -2)
        S = S / torch.linalg.matrix_norm(S, ord=2).reshape(-1, 1, 1)
        v = V[..., :, :1]
        worst = -(v @ v.transpose(-1, -2))
        pick = torch.rand(R, 1, 1, generator=g, dtype=torch.float64) < 0.5
        u = torch.rand(R, 1, 1, generator=g, dtype=torch.float64) ** 0.25  # mostly near the boundary of the ball
        total = total + torch.where(pick, worst, S * u) * (lam0 / 4).reshape(-1, 1, 1)
    # eigvalsh errs by ~eps ‖K‖, i.e. eps ‖K‖/λ₀ in the ratio: that is the operands' magnitude for the rounding tolerance
    # (the worst direction attains the bound exactly, where rounding alone decides the sign)
    return Observation(kernels.lambda_min(total) / lam0, extras={"scale": ev[..., -1] / lam0}, method="eigvalsh (float64)")


@QUANTITIES.register("du2018-lemma-a1-aux-ratio", (
    "Proof of Lemma A.1, alpha in [1/2, 2]: args.which 'first': |E sigma(aX)^2 - E sigma(X)^2| / (L|a-1|(2|sigma(0)| "
    "sqrt(2/pi) + L|a+1|)); 'chain': the same LHS / ((C/c_sigma)|a-1|); 'step': the middle expression / ((C/c_sigma)|a-1|)"),
    networks=("scalar",))
def lemma_a1_aux_ratio(ctx: Context) -> Observation:
    R = ctx.replicates
    act = _activation(ctx, smooth=False)  # Lemma A.1 assumes only an L-Lipschitz sigma
    g = ctx.generator
    a = 0.5 + 1.5 * torch.rand(R, generator=g, dtype=torch.float64)
    a[: min(R, 2)] = torch.tensor([0.5, 2.0], dtype=torch.float64)[: min(R, 2)]  # the interval's ends
    Lc, s0 = act.lipschitz, abs(float(act.f(torch.zeros(1, dtype=torch.float64))))
    lhs = (kernels.expect_1d(lambda z: act.f(z) ** 2, a ** 2, 200)
           - kernels.expect_1d(lambda z: act.f(z) ** 2, torch.ones_like(a), 200)).abs()
    middle = Lc * (a - 1).abs() * (2 * s0 * math.sqrt(2 / math.pi) + Lc * (a + 1).abs())
    final = Lc * (2 * s0 * math.sqrt(2 / math.pi) + 2 * Lc) * (a - 1).abs()  # (C / c_σ)|α − 1|
    which = ctx.arg("which", "first")
    num, den = {"first": (lhs, middle), "chain": (lhs, final), "step": (middle, final)}[which]
    return Observation(num / den, extras={"alpha": a}, method="1-D Gauss-Hermite (200 nodes)")


@QUANTITIES.register("du2018-c-sigma-c0", (
    "Appendix C: c_{sigma,c0} = (min over c0 <= alpha <= 1 of E sigma(alpha X)^2)^{-1} at c0 = 1/sqrt(p), by quadrature "
    "on a grid of alpha (args.activation; 'softplus-centred' = softplus - log 2, zero at the origin)"),
    networks=("scalar",))
def c_sigma_c0_value(ctx: Context) -> Observation:
    name = str(ctx.arg("activation", "softplus"))
    base = kernels.get_activation("softplus" if name == "softplus-centred" else name)
    shift = math.log(2) if name == "softplus-centred" else 0.0
    alphas = torch.linspace(1 / math.sqrt(ctx.i("p")), 1.0, 401, dtype=torch.float64)
    vals = kernels.expect_1d(lambda z: (base.f(z) - shift) ** 2, alphas ** 2, 200)
    return Observation(torch.full((ctx.replicates,), float(1 / vals.min()), dtype=torch.float64),
                       method="1-D Gauss-Hermite (200 nodes), 401-point alpha grid")


@QUANTITIES.register("du2018-gaussian-operator-norm", (
    "Lemma E.4: ||W||_2 / sqrt(m) for W in R^{m x cm} with iid N(0, 1) entries (cm rounded); by default drawn exactly "
    "in distribution from the Gaussian bidiagonal model (linalg.gaussian_spectral_norm, rounded up); args.sampler = "
    "'full' draws W and takes its norm (Gram eigvalsh, rounded up)"),
    networks=("scalar",))
def gaussian_operator_norm(ctx: Context) -> Observation:
    m = ctx.i("m")
    cols = max(1, round(float(ctx.p("c")) * m))
    sampler = ctx.arg("sampler", "bidiagonal")
    if sampler == "bidiagonal":  # only s_max of W matters: O(min(m, cm)) chi draws and a bisection per replicate
        smax, method = gaussian_spectral_norm(ctx.generator, (ctx.replicates,), m, cols)
    elif sampler == "full":  # the slow path the tests compare with
        W = torch.randn(ctx.replicates, m, cols, generator=ctx.generator, dtype=torch.float64)
        smax, method = spectral_norm(W)
    else:
        raise EstimatorError(f"sampler = '{sampler}': expected 'bidiagonal' or 'full'")
    return Observation(smax / math.sqrt(m), method=method)
