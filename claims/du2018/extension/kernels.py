"""Du, Lee, Li, Wang, Zhai (2018): the infinite-width kernel recursions, eqs. (4), (5), (6), on the engine's pair
expectations (lemmacheck.kernels)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from lemmacheck.functions import Member
from lemmacheck.kernels import Activation, Engine, arccos_kernel, c_sigma, get_activation, lambda_min


def member_activation(m: Member) -> Activation:
    """A member of a claim's function class (ctx.activation()) as the kernels' Activation, so that every recursion
    here, c_sigma and the networks take any member by quadrature. Its constants are the member's own; `params`
    holds its (a, b, c, e) so that c_sigma's cache tells members apart."""
    def d2(z: torch.Tensor) -> torch.Tensor:
        return m.d2(z)  # an EstimatorError for a member whose derivative jumps, only when a proof's beta is used

    return Activation(m.name, m, m.d1, d2, m.lipschitz, math.inf if m.smooth is None else m.smooth,
                      m.smooth is not None, m.analytic,  # analytic: Gauss-Hermite converges spectrally
                      params=tuple(sorted(m.to_json().items() - {("base", m.base)})))


def claim_activation(ctx) -> Activation:
    """The σ of a claim: where it declares the class its statement quantifies over (inputs.activation), the member
    ctx.activation() draws (pinned, or the class's default; hunts move it); else args.activation by name (default
    softplus)."""
    if isinstance((ctx.inputs_spec or {}).get("activation"), Mapping):
        return member_activation(ctx.activation())
    return get_activation(str(ctx.arg("activation", "softplus")))


@dataclass
class DuKernels:
    """Infinite-width limits for one of Du et al.'s architectures, batched over datasets.

    layer[h]  (…, N, N), h = 0..H: lim ⟨x_a^{(h)}, x_b^{(h)}⟩ over points a = (i, l) (pixel-level for the CNN;
              N = n for FC/ResNet). For h ≤ H−1 this is the paper's K^{(h)} (FC, ResNet; CNN: pixel-level).
    cov[h]    (…, N, N), h = 0..H−1: covariance of the pre-activations of layer h+1 (the patch Gram of layer h;
              equal to layer[h] when q = 1). For the CNN cov[h] is the paper's patch-level K^{(h)}.
    b[h]      (…, N), h = 0..H: lim m^{-1/2} 1ᵀ x^{(h)} (b^{(0)} = 0; FC: unused and not computed).
    ntk       (…, n, n): the paper's K^{(H)}, the limit of G^{(H)} (the last layer's Gram matrix).
    lambda0   (…,): λ_min(K^{(H)}).
    K^{(H)} carries c_σ (FC, or H = 1) or s² (ResNet/CNN) in front."""

    layer: list[torch.Tensor]
    cov: list[torch.Tensor]
    b: list[torch.Tensor | None]
    ntk: torch.Tensor
    lambda0: torch.Tensor
    method: str
    quadrature_change: float


def patch_gram(P: torch.Tensor, n: int, p: int, q: int) -> torch.Tensor:
    """Patch-level Gram from a pixel-level one, stride 1, zero padding (q odd):
    Φ(P)_{(i,l),(j,k)} = Σ_o P_{(i,l+o),(j,k+o)} over offsets o ∈ [−(q−1)/2, (q−1)/2] with both pixels inside."""
    if q == 1:
        return P
    if q % 2 != 1:
        raise ValueError(f"patch size q = {q} must be odd (symmetric zero padding)")
    r = (q - 1) // 2
    Pb = P.reshape(*P.shape[:-2], n, p, n, p)
    out = torch.zeros_like(Pb)
    for o in range(-r, r + 1):
        lo, hi = max(0, -o), min(p, p - o)  # pixels l with l + o inside [0, p)
        if lo >= hi:
            continue
        out[..., lo:hi, :, lo:hi] += Pb[..., lo + o:hi + o, :, lo + o:hi + o]
    return out.reshape(P.shape)


def patch_gram_all_pairs(P: torch.Tensor, n: int, p: int, q: int) -> torch.Tensor:
    """The aggregation as printed in eq. (6): K_{ij,lr} = Σ_{s∈D_l} Σ_{t∈D_r} H_{ij,st} (all q² pixel pairs)."""
    if q == 1:
        return P
    r = (q - 1) // 2
    D = torch.zeros(p, p, dtype=P.dtype)
    for l in range(p):
        D[l, max(0, l - r):min(p, l + r + 1)] = 1.0  # D_l = pixels of patch l
    Pb = P.reshape(*P.shape[:-2], n, p, n, p)
    out = torch.einsum("ls,...isjt,rt->...iljr", D, Pb, D)
    return out.reshape(P.shape)


def _residual_kernels(X: torch.Tensor, act: Activation, H: int, s: torch.Tensor | float, q: int, *,
                      residual: bool, engine: Engine, cross: str, aggregation: str) -> DuKernels:
    """Shared recursion for all three architectures; X is (…, n, C, p) (FC/ResNet: p = 1, q = 1)."""
    if cross not in ("paired", "printed"):
        raise ValueError(f"cross = '{cross}': expected 'paired' or 'printed'")
    if aggregation not in ("matched", "all-pairs"):
        raise ValueError(f"aggregation = '{aggregation}': expected 'matched' or 'all-pairs'")
    if H < 1:
        raise ValueError(f"depth H = {H} must be >= 1")
    n, Cin, p = X.shape[-3:]
    batch = X.shape[:-3]
    pts = X.transpose(-1, -2).reshape(*batch, n * p, Cin)  # point (i, l) -> x_{i,:,l}
    agg = patch_gram if aggregation == "matched" else patch_gram_all_pairs
    cs = c_sigma(act)
    s_t = torch.as_tensor(s, dtype=torch.float64)
    s1 = s_t.reshape(*s_t.shape, 1) if s_t.dim() else s_t  # broadcasts against (…, N)
    s2 = s_t.reshape(*s_t.shape, 1, 1) if s_t.dim() else s_t  # against (…, N, N)
    layer: list[torch.Tensor] = [pts @ pts.transpose(-1, -2)]
    cov: list[torch.Tensor] = []
    bs: list[torch.Tensor | None] = [None]
    b: torch.Tensor | None = None
    for h in range(1, H + 1):
        # Covariance of layer h's pre-activations; K^{(0)} = φ_1(x_i)ᵀφ_1(x_j) is printed as the patch Gram.
        Cv = (patch_gram if h == 1 else agg)(layer[-1], n, p, q)
        cov.append(Cv)
        E = engine.pair(Cv)
        if h == 1 or not residual:
            P = cs * E
            b = math.sqrt(cs) * engine.mean(torch.diagonal(Cv, dim1=-2, dim2=-1)) if residual else None
        else:
            assert b is not None
            m1 = engine.mean(torch.diagonal(Cv, dim1=-2, dim2=-1))  # E σ(u_a), u_a ~ N(0, Cv_aa)
            if cross == "paired":  # ⟨x_a, σ(W x_b)⟩/√m → b_a E σ(u_b)
                crossterm = b.unsqueeze(-1) * m1.unsqueeze(-2) + m1.unsqueeze(-1) * b.unsqueeze(-2)
            else:  # as printed: s b_i σ(u) + s b_j σ(v), u with i's variance, v with j's
                crossterm = (b * m1).unsqueeze(-1) + (b * m1).unsqueeze(-2)
            P = layer[-1] + s2 * crossterm + s2 ** 2 * E
            b = b + s1 * m1
        layer.append(P)
        bs.append(b)
    # The last layer's Gram: lim ⟨∂u_i/∂W^{(H)}, ∂u_j/∂W^{(H)}⟩, summed over the p×p pixel block.
    Cv = cov[-1]
    D = engine.pair(Cv, derivative=True)
    scale = cs if (H == 1 or not residual) else s2 ** 2
    ntk = scale * (Cv * D).reshape(*batch, n, p, n, p).sum(dim=(-1, -3))
    return DuKernels(layer, cov, bs, ntk, lambda_min(ntk), engine.description, engine.max_change)


def fc_kernels(X: torch.Tensor, act: Activation, H: int, engine: Engine | None = None) -> DuKernels:
    """Eq. (4): K^{(0)} = ⟨x_i, x_j⟩, K^{(h)} = c_σ E[σ(u)σ(v)] (h ∈ [H−1]), K^{(H)} = c_σ K^{(H−1)} E[σ'(u)σ'(v)].

    X: (…, n, d) unit-norm inputs."""
    return _residual_kernels(X.unsqueeze(-1), act, H, 0.0, 1, residual=False,
                             engine=engine or Engine(act), cross="paired", aggregation="matched")


def resnet_kernels(X: torch.Tensor, act: Activation, H: int, s: torch.Tensor | float,
                   engine: Engine | None = None, cross: str = "paired") -> DuKernels:
    """Eq. (5) with s = c_λ λ^{3/2} / H (per dataset: a tensor over the batch):
        K^{(1)} = c_σ E[σ(u)σ(v)],  b^{(1)}_i = √c_σ E σ(u_i),
        K^{(h)} = K^{(h−1)} + E[s b_i σ(·) + s b_j σ(·) + s² σ(u)σ(v)],  b^{(h)} = b^{(h−1)} + s E σ(u_i),
        K^{(H)} = s² K^{(H−1)} E[σ'(u)σ'(v)].
    cross = "paired" (default) pairs b_i with σ(v) and b_j with σ(u), which is what expanding
    ⟨x_i^{(h−1)}, σ(W x_j^{(h−1)})⟩/√m gives (and Theorem D.1's general recursion); "printed" pairs b_i with
    σ(u) as eq. (5) is printed. With unit-norm inputs every K_ii and b_i is i-independent and the two
    coincide. For H = 1 the network has no residual layer and K^{(1)} = c_σ K^{(0)} E[σ'σ'] (as for FC)."""
    return _residual_kernels(X.unsqueeze(-1), act, H, s, 1, residual=True,
                             engine=engine or Engine(act), cross=cross, aggregation="matched")


def cnn_kernels(X: torch.Tensor, act: Activation, H: int, s: torch.Tensor | float, q: int = 3,
                engine: Engine | None = None, cross: str = "paired", aggregation: str = "matched") -> DuKernels:
    """Eq. (6), read so that it is the m → ∞ limit of the convolutional ResNet (X: (…, n, d0, p), ‖x_i‖_F = 1).

    Points are (input i, pixel l). Pixel-level Gram P^{(h)}, patch-level Gram C^{(h)} = Φ(P^{(h)}) (stride 1,
    zero padding: Φ(P)_{(i,l),(j,k)} = Σ_o P_{(i,l+o),(j,k+o)}); the paper's K^{(0)} = φ_1(x_i)ᵀφ_1(x_j) is C^{(0)}.
        P^{(1)} = c_σ E[σ(U)σ(V)ᵀ] under N(0, C^{(0)}),    b^{(1)} = √c_σ E σ(U),
        P^{(h)} = P^{(h−1)} + s (b_i E σ(V)ᵀ + E σ(U) b_jᵀ) + s² E[σ(U)σ(V)ᵀ] under N(0, C^{(h−1)}),
        K^{(H)}_{ij} = s² ⟨C^{(H−1)}_{ij}, E[σ'(U)σ'(V)ᵀ]⟩.
    Readings (catalogue §0.6 points 1–4): the paper's H^{(h)} is our P^{(h)} and its K^{(h)} (h ≥ 1) our C^{(h)};
    aggregation = "matched" sums pixel pairs at equal offsets (what the patch Gram is), "all-pairs" sums all
    q² pairs s ∈ D_l, t ∈ D_r as printed; the expectation in K^{(H)} is under K^{(H−1)} (printed "h−1");
    cross = "paired"/"printed" as for the ResNet, per point (i, l). With p = 1, q = 1 this is `resnet_kernels`."""
    return _residual_kernels(X, act, H, s, q, residual=True, engine=engine or Engine(act), cross=cross,
                             aggregation=aggregation)


def relu_fc_kernels_closed_form(X: torch.Tensor, H: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The FC recursion (4) for ReLU entirely by arc-cosine formulas (c_σ = 2): an independent reference.

    Returns ([K^{(0)}, …, K^{(H−1)}], K^{(H)})."""
    K = X @ X.transpose(-1, -2)
    Ks = [K]
    for _ in range(1, H):
        d = torch.diagonal(K, dim1=-2, dim2=-1)
        K = 2 * arccos_kernel(1, d.unsqueeze(-1), d.unsqueeze(-2), K)
        Ks.append(K)
    d = torch.diagonal(K, dim1=-2, dim2=-1)
    return Ks, 2 * K * arccos_kernel(0, d.unsqueeze(-1), d.unsqueeze(-2), K)
