"""Chatterji, Long & Bartlett (2021): fixed-width bias-free deep net, smoothed ReLUs, logistic loss, all layers trained.

Exactly as the paper (§2.2, eqs. (1), (2a), (2b); catalogue chatterji2021 §1):
    p = input dimension = width of every hidden layer; L ≥ 1 hidden layers; V = (V_1, …, V_{L+1}),
    V_ℓ ∈ R^{p×p} (ℓ ∈ [L]), V_{L+1} ∈ R^{1×p}; no biases; no output scaling; ALL L+1 layers are trained.
    x_{0,s} = u_{0,s} = x_s ∈ S^{p−1},  u_{ℓ,s} = V_ℓ x_{ℓ−1,s},  x_{ℓ,s} = φ(u_{ℓ,s}),  f_V(x_s) = V_{L+1} x_{L,s},
    Σ_{ℓ,s} = diag(φ'(u_{ℓ,s})).
    ∂f/∂V_ℓ = (Σ_ℓ Π_{j=ℓ+1}^{L} (V_jᵀ Σ_j)) V_{L+1}ᵀ x_{ℓ−1}ᵀ = δ_ℓ x_{ℓ−1}ᵀ (ℓ ∈ [L]),   ∂f/∂V_{L+1} = x_Lᵀ,
    with δ_L = Σ_L V_{L+1}ᵀ, δ_ℓ = Σ_ℓ V_{ℓ+1}ᵀ δ_{ℓ+1}; b_ℓ := ∂f/∂x_ℓ = V_{ℓ+1}ᵀ δ_{ℓ+1} (b_L = V_{L+1}ᵀ), δ_ℓ = Σ_ℓ b_ℓ.
Activation φ: h-smoothly approximately ReLU (Definition 2.1): differentiable, φ(0) = 0, φ' is (1/h)-Lipschitz,
    |φ'| ≤ 1, |φ'(z) z − φ(z)| ≤ h/2. Examples: the Huberized ReLU (eq. 1) and the scaled Swish
    φ(z) = z / (1.1 (1 + e^{−2z/h})) (kernels.huberized_relu, kernels.scaled_swish).
Initialisation (§3.2, App. C–E): (V_ℓ)_{ij} ~ N(0, 2/p) (ℓ ∈ [L], He), (V_{L+1})_j ~ N(0, 1). Theorem 3.1
    allows ANY V^{(1)}.
Loss: J(V) = (1/n) Σ_s log(1 + exp(−y_s f_V(x_s))), y_s ∈ {±1}; g_s = 1/(1 + exp(y_s f_V(x_s)));
    ∇J = (1/n) Σ_s (−y_s g_s) ∇f_V(x_s). GD: V^{(t+1)} = V^{(t)} − α_t ∇J(V^{(t)}), t ≥ 1.
Norms: ‖M‖ is Frobenius; ‖V‖ = (Σ_ℓ ‖V_ℓ‖²)^{1/2} (collective).
Batched over R replicates: V_ℓ (R, p, p), V_{L+1} (R, 1, p), inputs (R, n, p), float64. Tiny losses (the
small-loss regime J < n^{−(1+24L)}) are handled in log space where it matters (`log_loss`, `loss_change`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lemmacheck import kernels
from lemmacheck.kernels import Activation
from lemmacheck.registry import NETWORKS

NAME = "chatterji2021"
NETWORKS.register(NAME, "bias-free width-p deep net f = V_{L+1} phi(V_L ... phi(V_1 x)), all L+1 layers trained, "
                  "N(0,2/p) hidden / N(0,1) output init, Huberized ReLU or scaled Swish (h), logistic loss "
                  "(Chatterji, Long, Bartlett 2021)")(__name__)
ACTIVATIONS = ("huberized-relu", "scaled-swish")


def activation(name: str, h: float) -> Activation:
    if name not in ACTIVATIONS:
        raise ValueError(f"activation '{name}': the paper's examples are {ACTIVATIONS}")
    return kernels.get_activation(name, h=h)


def init(gen: torch.Generator, R: int, p: int, L: int, dtype=torch.float64) -> list[torch.Tensor]:
    Vs = [torch.randn(R, p, p, generator=gen, dtype=dtype) * math.sqrt(2.0 / p) for _ in range(L)]
    Vs.append(torch.randn(R, 1, p, generator=gen, dtype=dtype))
    return Vs


def collective_norm(Vs: list[torch.Tensor]) -> torch.Tensor:
    """‖V‖ = (Σ_ℓ ‖V_ℓ‖_F²)^{1/2}, per replicate."""
    return torch.stack([V.flatten(1).pow(2).sum(1) for V in Vs], -1).sum(-1).sqrt()


def inner(A: list[torch.Tensor], B: list[torch.Tensor]) -> torch.Tensor:
    """A · B = Σ_ℓ vec(A_ℓ)·vec(B_ℓ), per replicate."""
    return sum((a * b).flatten(1).sum(1) for a, b in zip(A, B))  # type: ignore[return-value]


@dataclass
class Forward:
    x: list[torch.Tensor]  # x[0..L], (R, n, p): x_{ℓ,s}
    u: list[torch.Tensor]  # u[ℓ−1] = u_{ℓ,s} = V_ℓ x_{ℓ−1,s}, ℓ = 1..L
    dphi: list[torch.Tensor]  # dphi[ℓ−1] = φ'(u_ℓ): the diagonal of Σ_{ℓ,s}
    out: torch.Tensor  # (R, n): f_V(x_s)


def forward(Vs: list[torch.Tensor], X: torch.Tensor, act: Activation) -> Forward:
    xs, us, ds = [X], [], []
    h = X
    for V in Vs[:-1]:
        u = h @ V.transpose(-1, -2)
        h = act.f(u)
        us.append(u)
        ds.append(act.df(u))
        xs.append(h)
    out = (h @ Vs[-1].transpose(-1, -2)).squeeze(-1)
    return Forward(xs, us, ds, out)


def backward(Vs: list[torch.Tensor], fwd: Forward) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(δ_ℓ, b_ℓ) for ℓ = 1..L (index ℓ−1), each (R, n, p): b_ℓ = ∂f/∂x_ℓ, δ_ℓ = ∂f/∂u_ℓ = φ'(u_ℓ) ⊙ b_ℓ."""
    L = len(Vs) - 1
    n = fwd.out.shape[-1]
    b = Vs[-1].expand(-1, n, -1)  # b_L = V_{L+1}ᵀ, per sample
    deltas: list[torch.Tensor] = [torch.empty(0)] * L
    bs: list[torch.Tensor] = [torch.empty(0)] * L
    for l in range(L, 0, -1):
        bs[l - 1] = b
        d = fwd.dphi[l - 1] * b
        deltas[l - 1] = d
        b = d @ Vs[l - 1]  # b_{ℓ−1} = V_ℓᵀ δ_ℓ (rows: δ_ℓᵀ V_ℓ)
    return deltas, bs


def output_gradients(fwd: Forward, deltas: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per-sample ∇_{V_ℓ} f(x_s): (R, n, p, p) for ℓ ∈ [L] (rank one: δ_ℓ x_{ℓ−1}ᵀ), (R, n, 1, p) for V_{L+1}."""
    grads = [d.unsqueeze(-1) * x.unsqueeze(-2) for d, x in zip(deltas, fwd.x[:-1])]
    grads.append(fwd.x[-1].unsqueeze(-2))
    return grads


def margins(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return y * out


def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """J = (1/n) Σ_s log(1 + exp(−y_s f_s)) (stable softplus), per replicate."""
    return torch.nn.functional.softplus(-margins(out, y)).mean(-1)


def _log_softplus_neg(mg: torch.Tensor) -> torch.Tensor:
    """log log(1 + e^{−m}) without underflow: for large m it is −m + log(log1p(t)/t), t = e^{−m}."""
    t = torch.exp(-mg)
    small = torch.log(torch.logaddexp(torch.zeros_like(mg), -mg))  # softplus() is linear past 20: 1e-11 off
    safe_t = torch.where(t > 0, t, torch.ones_like(t))
    # log(log1p(t)/t) = -t/2 + O(t^2); the series also avoids subnormal t, where log1p(t)/t loses every bit.
    corr = torch.where(safe_t < 1e-8, -safe_t / 2, torch.log(torch.log1p(safe_t) / safe_t))
    large = -mg + torch.where(t > 0, corr, torch.zeros_like(t))
    return torch.where(mg > 20, large, small)


def log_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log J, accurate even where J underflows float64 (deep nets at n^{−(1+24L)})."""
    return torch.logsumexp(_log_softplus_neg(margins(out, y)), dim=-1) - math.log(out.shape[-1])


def g_weights(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """g_s = 1/(1 + exp(y_s f_s)) = sigmoid(−y_s f_s) (Def. B.1)."""
    return torch.sigmoid(-margins(out, y))


def loss_change(out_old: torch.Tensor, out_new: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """J(new) − J(old) without cancellation: per sample log((1 + e^{−m'})/(1 + e^{−m})) =
    log1p(e^{−m} expm1(m − m') / (1 + e^{−m}))."""
    m0, m1 = margins(out_old, y), margins(out_new, y)
    e0 = torch.exp(-m0)
    return torch.log1p(e0 * torch.expm1(m0 - m1) / (1 + e0)).mean(-1)


def loss_gradients(Vs: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor,
                   act: Activation) -> tuple[list[torch.Tensor], Forward, list[torch.Tensor]]:
    """Closed-form ∇_{V_ℓ} J = (1/n) Σ_s (−y_s g_s) δ_{ℓ,s} x_{ℓ−1,s}ᵀ and ∇_{V_{L+1}} J = (1/n) Σ_s (−y_s g_s) x_{L,s}ᵀ.
    Returns (gradients, forward pass, δ)."""
    fwd = forward(Vs, X, act)
    deltas, _ = backward(Vs, fwd)
    return _weighted_gradients(-y * g_weights(fwd.out, y) / X.shape[-2], fwd, deltas), fwd, deltas


def _weighted_gradients(c: torch.Tensor, fwd: Forward, deltas: list[torch.Tensor]) -> list[torch.Tensor]:
    """Σ_s c_s ∇_V f(x_s), per layer: c_s δ_{ℓ,s} x_{ℓ−1,s}ᵀ summed over s, and c_s x_{L,s}ᵀ for V_{L+1}."""
    # (c δ)ᵀ x as one batched product: einsum's own path (the same products, bit for bit) with less dispatch
    cs = c.unsqueeze(-1)
    grads = [(cs * d).transpose(-1, -2) @ x for d, x in zip(deltas, fwd.x[:-1])]
    grads.append(c.unsqueeze(-2) @ fwd.x[-1])
    return grads


def scaled_loss_gradients(Vs: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor,
                          act: Activation) -> tuple[list[torch.Tensor], torch.Tensor, Forward]:
    """∇J = e^{s} G per replicate, returned as (G, s, forward pass), for the tiny-loss regime where the weights
    g_s = sigmoid(−m_s) (and so ∇J itself) underflow float64: s = max_s log g_s is kept in log space
    (log g_s = logsigmoid(−m_s) is exact) and G uses g_s e^{−s} ∈ (0, 1]."""
    fwd = forward(Vs, X, act)
    deltas, _ = backward(Vs, fwd)
    log_g = torch.nn.functional.logsigmoid(-margins(fwd.out, y))
    s = log_g.amax(-1)
    c = -y * torch.exp(log_g - s.unsqueeze(-1)) / X.shape[-2]
    return _weighted_gradients(c, fwd, deltas), s, fwd


# ----------------------------------------------------------------------------------- the paper's constants

def threshold(n: int, L: int) -> float:
    """The small-loss threshold 1/n^{1+24L} of Theorem 3.1 (as a float; may underflow to 0 for large L)."""
    return float(math.exp(-(1 + 24 * L) * math.log(n)))


def log_threshold(n: int, L: int) -> float:
    return -(1 + 24 * L) * math.log(n)


def h_max(logJ1: torch.Tensor, norm1: torch.Tensor, L: int, p: int) -> torch.Tensor:
    """(3a) h_max = min{ L^{L/2−3} log(1/J_1) / (24 √p ‖V^{(1)}‖^L), 1 }."""
    return torch.clamp(L ** (L / 2 - 3) * (-logJ1) / (24 * math.sqrt(p) * norm1 ** L), max=1.0)


def alpha_max(h: float, logJ1: torch.Tensor, norm1: torch.Tensor, L: int, p: int) -> torch.Tensor:
    """(3b) α_max(h) = min{ h / (1024 (L+1)² p J_1 ‖V^{(1)}‖^{3L+5}),
                          (L+½) ‖V^{(1)}‖² / (2L (L+¾)² J_1 log^{2/L}(1/J_1)) }."""
    J1 = torch.exp(logJ1)
    a1 = h / (1024 * (L + 1) ** 2 * p * J1 * norm1 ** (3 * L + 5))
    a2 = (L + 0.5) * norm1 ** 2 / (2 * L * (L + 0.75) ** 2 * J1 * (-logJ1) ** (2 / L))
    return torch.minimum(a1, a2)


def q_tilde(alpha: torch.Tensor, logJ1: torch.Tensor, norm1: torch.Tensor, L: int) -> torch.Tensor:
    """(3c) Q̃(α) = L (L+¾)² α J_1 log^{2/L}(1/J_1) / ((L+½) ‖V^{(1)}‖²)."""
    return L * (L + 0.75) ** 2 * alpha * torch.exp(logJ1) * (-logJ1) ** (2 / L) / ((L + 0.5) * norm1 ** 2)


def alpha_lemma_4_4(h: float, J: torch.Tensor, norm: torch.Tensor, L: int, p: int) -> torch.Tensor:
    """Lemma 4.4's step-size condition at equality: α J_t = h / (1024 (L+1)² √p ‖V^{(t)}‖^{3L+5}) (√p as printed)."""
    return h / (1024 * (L + 1) ** 2 * math.sqrt(p) * norm ** (3 * L + 5) * J)


# ------------------------------------------------------------- differences without cancellation (small steps)

def phi_difference(act: Activation, u: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """φ(u + d) − φ(u) computed so that its relative accuracy does not degrade when |d| ≪ |u| (GD steps in the
    small-loss regime are below float64 resolution of the weights).

    Huberized ReLU: φ(z) = q(clamp(z, 0, h)) + max(z − h, 0), q(t) = t²/(2h); each part's difference uses d itself
    when both points lie in the same piece. Scaled Swish: φ(z) = z σ(2z/h)/1.1 and
    σ(a + δ) − σ(a) = σ(a + δ) σ(−a) (−expm1(−δ)), which is exact."""
    v = u + d
    if act.name == "huberized-relu":
        h = act.param("h")
        cu, cv = u.clamp(0.0, h), v.clamp(0.0, h)
        inside = (u >= 0) & (u <= h) & (v >= 0) & (v <= h)
        dc = torch.where(inside, d, cv - cu)
        above = (u > h) & (v > h)
        dr = torch.where(above, d, torch.relu(v - h) - torch.relu(u - h))
        return dc * (cu + cv) / (2 * h) + dr
    if act.name == "scaled-swish":
        h = act.param("h")
        a, delta = 2 * u / h, 2 * d / h
        sv = torch.sigmoid(a + delta)
        dsig = sv * torch.sigmoid(-a) * (-torch.expm1(-delta))
        return (d * sv + u * dsig) / SWISH
    return act.f(v) - act.f(u)


SWISH = kernels.SWISH_SCALE


def forward_difference(Vs: list[torch.Tensor], Ds: list[torch.Tensor], X: torch.Tensor, act: Activation,
                       fwd: Forward | None = None) -> torch.Tensor:
    """f_{V+D}(x_s) − f_V(x_s), (R, n), propagated layer by layer as differences:
    Δu_ℓ = D_ℓ x'_{ℓ−1} + V_ℓ Δx_{ℓ−1},  Δx_ℓ = φ(u_ℓ + Δu_ℓ) − φ(u_ℓ) (phi_difference),  x' = x + Δx."""
    fwd = fwd or forward(Vs, X, act)
    dx = torch.zeros_like(X)
    for l, (V, D) in enumerate(zip(Vs[:-1], Ds[:-1]), start=1):
        xprev = fwd.x[l - 1] + dx
        du = xprev @ D.transpose(-1, -2) + dx @ V.transpose(-1, -2)
        dx = phi_difference(act, fwd.u[l - 1], du)
    xL = fwd.x[-1] + dx
    return (xL @ Ds[-1].transpose(-1, -2) + dx @ Vs[-1].transpose(-1, -2)).squeeze(-1)


def margin_loss_change(m: torch.Tensor, dm: torch.Tensor) -> torch.Tensor:
    """J(m + dm) − J(m) per replicate from per-sample margins and margin changes (no cancellation)."""
    e0 = torch.exp(-m)
    return torch.log1p(e0 * torch.expm1(-dm) / (1 + e0)).mean(-1)


# --------------------------------------------------------------------------------------- gradient descent

@dataclass
class Trajectory:
    log_loss: torch.Tensor  # (R, T+1): log J_t, t = 1..T+1 (index 0 is V^{(1)})
    rel_change: torch.Tensor  # (R, T+1): J_t / J_1 − 1, accurate to float64 relative precision of the change
    loss_drop: torch.Tensor  # (R, T): J_t − J_{t+1}, computed without cancellation
    norm: torch.Tensor  # (R, T+1): ‖V^{(t)}‖
    grad_sq: torch.Tensor  # (R, T+1): ‖∇J_t‖²
    displacement: list[torch.Tensor]  # D_T = V^{(T+1)} − V^{(1)}, kept separately (compensated)
    weights: list[torch.Tensor]  # V^{(1)} + D_T rounded to float64
    norm_sq_change: torch.Tensor | None = None  # (R, T+1): ‖V^{(t)}‖² − ‖V^{(1)}‖² = 2 V^{(1)}·D_t + ‖D_t‖², exact to
    # float64 relative precision of the CHANGE (‖V^{(t)}‖ itself rounds the change away at tiny steps)


def gradient_descent(Vs: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, act: Activation,
                     alpha: torch.Tensor | float, steps: int) -> Trajectory:
    """V^{(t+1)} = V^{(t)} − α ∇J(V^{(t)}) with constant α (per replicate (R,) or a float).

    Compensated: the iterate is held as V^{(1)} + D_t with the displacement D_t accumulated separately, and the
    outputs as f_{V^{(1)}} + (f_{V^{(1)}+D_t} − f_{V^{(1)}}) by `forward_difference`, so losses and their changes
    stay accurate even when a step is below float64 resolution of the weights (Theorem 3.1's α_max)."""
    R = X.shape[0]
    a = torch.as_tensor(alpha, dtype=X.dtype).reshape(-1)
    a = a.expand(R) if a.numel() == 1 else a
    fwd1 = forward(Vs, X, act)
    m1 = margins(fwd1.out, y)
    J1 = loss(fwd1.out, y)
    D = [torch.zeros_like(v) for v in Vs]
    logs, rels, drops, norms, gsq, nsq = [], [], [], [], [], []
    prev_rel = torch.zeros_like(J1)
    for t in range(steps + 1):
        V = [v + d for v, d in zip(Vs, D)]
        nsq.append(2 * inner(Vs, D) + collective_norm(D) ** 2)
        # The margin change is kept as a difference: m1 + dm would round it to ulp(m1) (~1e-15 relative at margins
        # ~30), which is the size of a whole step at alpha_max.
        dm = y * forward_difference(Vs, D, X, act, fwd1) if t else torch.zeros_like(m1)
        rel = margin_loss_change(m1, dm) / J1
        rels.append(rel)
        logs.append(torch.log(J1) + torch.log1p(rel))
        norms.append(collective_norm(V))
        if t:
            drops.append(J1 * (prev_rel - rel))  # two accurate small changes: no cancellation against J
        prev_rel = rel
        grads, _, _ = loss_gradients(V, X, y, act)
        gsq.append(collective_norm(grads) ** 2)
        if t == steps:
            break
        D = [d - a.reshape(-1, 1, 1) * g for d, g in zip(D, grads)]
    empty = torch.zeros(R, 0, dtype=X.dtype)
    return Trajectory(torch.stack(logs, 1), torch.stack(rels, 1), torch.stack(drops, 1) if drops else empty,
                      torch.stack(norms, 1), torch.stack(gsq, 1), D, [v + d for v, d in zip(Vs, D)],
                      torch.stack(nsq, 1))


def _descend(Vs: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, act: Activation, lr: float,
             steps: int) -> list[torch.Tensor]:
    """`gradient_descent(...).weights` (the same iterates V^{(1)} + D_t, bit for bit) without its per-step
    diagnostics (losses by difference propagation, norms), which cost more than the gradients themselves."""
    a = torch.as_tensor(lr, dtype=X.dtype).reshape(-1).expand(X.shape[0]).reshape(-1, 1, 1)
    D = [torch.zeros_like(v) for v in Vs]
    for _ in range(steps):
        grads, _, _ = loss_gradients([v + d for v, d in zip(Vs, D)], X, y, act)
        D = [d - a * g for d, g in zip(D, grads)]
    return [v + d for v, d in zip(Vs, D)]


def train_then_scale(Vs: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, act: Activation, *,
                     log_target: torch.Tensor | float, lr: float = 0.5, steps: int = 300,
                     max_log_scale: float = 12.0) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Reach the small-loss regime (catalogue §1.8): GD until the data are separated (every margin > 0), then
    multiply ALL layers by one c ≥ 1 per replicate, found by bisection on log c, so that log J(cV) ≈ log_target.
    Returns (scaled weights, separated mask). Replicates that do not separate keep c = 1."""
    R = X.shape[0]
    V = _descend(Vs, X, y, act, lr, steps)
    with torch.no_grad():
        sep = (margins(forward(V, X, act).out, y) > 0).all(-1)
        lo = torch.zeros(R, dtype=X.dtype)
        hi = torch.full((R,), max_log_scale, dtype=X.dtype)
        target = torch.as_tensor(log_target, dtype=X.dtype).expand(R)

        def logJ(logc: torch.Tensor) -> torch.Tensor:
            c = torch.exp(logc).reshape(-1, 1, 1)
            return log_loss(forward([c * v for v in V], X, act).out, y)

        for _ in range(60):  # J(cV) decreases in c once the data are separated (for these activations)
            mid = (lo + hi) / 2
            above = logJ(mid) > target
            lo = torch.where(above, mid, lo)
            hi = torch.where(above, hi, mid)
        logc = torch.where(sep, hi, torch.zeros_like(hi))
        c = torch.exp(logc).reshape(-1, 1, 1)
    return [c * v for v in V], sep


# ------------------------------------------------------------------- exact sampler of the features at init

def _psd_sqrt(G: torch.Tensor) -> torch.Tensor:
    """Symmetric square root of a batch of PSD matrices (eigh; tiny negative eigenvalues from rounding clipped)."""
    w, Q = torch.linalg.eigh(0.5 * (G + G.transpose(-1, -2)))
    return Q @ torch.diag_embed(w.clamp_min(0).sqrt()) @ Q.transpose(-1, -2)


def init_preactivations_exact(gen: torch.Generator, X: torch.Tensor, L: int, act: Activation
                              ) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The pre-activations u_{ℓ,s} (ℓ = 1..L) and outputs f_{V^{(1)}}(x_s) at He initialisation, drawn EXACTLY without
    materialising V: given x_{ℓ−1,·} (Gram G), the p rows of V_ℓ [x_{ℓ−1,1} … x_{ℓ−1,n}] are iid N(0, (2/p) G), and
    f = V_{L+1} x_L ~ N(0, G_L) jointly over s. Cost O(p n² L) instead of O(p² n L). Returns ([u_ℓ (R, n, p)], f (R, n))."""
    R, n, p = X.shape
    G = X @ X.transpose(-1, -2)
    us = []
    for _ in range(L):
        Z = torch.randn(R, p, n, generator=gen, dtype=X.dtype)
        u = (Z @ _psd_sqrt(2.0 / p * G)).transpose(-1, -2)  # (R, n, p): column j of V_ℓ x is row j here
        us.append(u)
        x = act.f(u)
        G = x @ x.transpose(-1, -2)
    f = (torch.randn(R, 1, n, generator=gen, dtype=X.dtype) @ _psd_sqrt(G)).squeeze(1)
    return us, f


# ----------------------------------------------------------------------------------- the network protocol


class ProtocolNet:
    """The network as a lemmacheck.protocol.Network, through `forward` and `backward` above. All L+1 layers are
    trained, so the output layer is the protocol's last layer, linear: weights V_1..V_{L+1} (layout "out-in"),
    preacts u_1..u_L and u_{L+1} = f, outputs x_0..x_L and x_{L+1} = f, patterns φ'(u_ℓ) and 1, out f (R, n, 1)."""

    layout = "out-in"

    def __init__(self, weights: list[torch.Tensor], act: Activation):
        self.weights, self.act = weights, act

    def forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None = None):
        from lemmacheck.protocol import ForwardPass

        f = forward(self.weights if weights is None else weights, X, self.act)
        out = f.out.unsqueeze(-1)
        return ForwardPass([*f.x, out], [*f.u, out], [*f.dphi, torch.ones_like(out)], out)

    def backward(self, fwd, V: torch.Tensor, weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """δ_ℓ = V_s ∂f/∂u_ℓ for ℓ ∈ [L], and V_s for the output layer."""
        L = len(fwd.preacts) - 1
        cf = Forward(fwd.outputs[:-1], fwd.preacts[:-1], fwd.patterns[:-1], fwd.out[..., 0])
        deltas, _ = backward(self.weights if weights is None else weights, cf)
        assert len(deltas) == L
        return [V * d for d in deltas] + [V]


def protocol_network(ctx, X: torch.Tensor | None = None) -> ProtocolNet:
    """R networks at the claim's p and L, He initialisation, activation args.activation (default huberized-relu)
    at h, drawn as the setting's estimators draw them (the architecture does not depend on the datasets X)."""
    act = activation(str(ctx.arg("activation", "huberized-relu")), float(ctx.p("h")))
    return ProtocolNet(init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("L"), ctx.dtype), act)
