"""Guo, Li & Lerman (2024): deep leaky-ReLU FNN in the paper's RESCALED parametrisation (Algorithm 1).

Exactly as the paper (§2, Algorithm 1, Appendix B.1 eqs. (18)-(19); catalogue guo2024 §1.2), for an input x ∈ R^p:
    h_0 = g_0 = A x                      A ∈ R^{m×p}, entries iid N(0, 1/m)   FIXED (linear input layer)
    g_l = W_l h_{l-1},  h_l = σ̃_α(g_l)    W_l ∈ R^{m×m}, entries iid N(0, 2/m) TRAINED, l = 1..L
    ŷ = g_{L+1} = B h_L                  B ∈ R^{d×m}, entries iid N(0, 1/d)   FIXED (linear output layer)
    σ̃_α(x) = x/√(1+α²) if x ≥ 0,  αx/√(1+α²) if x < 0,    any α < 1 (α = 0: ReLU; α = −1: |x|/√2).
The second argument of N(·,·) is the VARIANCE (the χ² arguments at L488/L531 confirm it): 1/m for A and 2/m for
W_l are 1/fan-out resp. 2/fan-in (= 2/fan-out, W_l is square); 1/d for B is 1/fan-out. No biases, no output
scaling. The factor 1/√(1+α²) sits in the activation, not in the weights: the "He" parametrisation
σ_α with W_l ~ N(0, 2/(m(1+α²))) has the same forward map (W_He = W/√(1+α²), `forward_he`) but a GD step η there
equals a step (1+α²)η here (catalogue §1.4.1); everything in this module is Algorithm 1.

Notation (18)-(19), L439-L462:  D_{i,l} = Diag((1{g_{i,l} ≥ 0} + α 1{g_{i,l} < 0})/√(1+α²)), so h_{i,l} = D_{i,l} g_{i,l}
(ties at 0 take the slope 1/√(1+α²), as (18); D_0 = I);  Back_{i,L+1} = B,  Back_{i,l} = B D_{i,L} W_L ⋯ D_{i,l} W_l;
z_{i,l}(v) = D_{i,l} Back_{i,l+1}^T v  and  G_{i,l}(v) = z_{i,l}(v) h_{i,l-1}^T  ((61) read with Back_{i,l+1}, as L461
and the proof of Lemma 4.2 use it); e_i = ŷ_i − y_i;  ∇_{W_l} loss_i = G_{i,l}(e_i).
Loss: Appendix B.1 L(W) = ½ Σ_i ||e_i||² (`half=True`, the default: the form the proofs manipulate); the main
text's L(W) = Σ_i ||y_i − ŷ_i||² is `half=False` (gradients twice as large). Inputs: ||x_i|| = 1, and
min_{i≠j} ||x_i − x_j|| ≥ δ (Assumption 2.1), drawn by the `unit-sphere` generator with d = p.

Everything is batched over a leading replicate dimension R: A (R, m, p), W_l (R, m, m), B (R, d, m), inputs
(R, n, p), layer vectors (R, n, m), outputs (R, n, d). Weights are stored in the paper's orientation (g = W h),
so a layer is h @ W^T. Randomness only from the generator passed in; float64 by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lemmacheck.linalg import psd_sqrt
from lemmacheck.registry import NETWORKS

NAME = "guo2024"
NETWORKS.register(NAME, "deep leaky-ReLU FNN, rescaled σ̃_α = σ_α/√(1+α²) (Algorithm 1): fixed A ~ N(0,1/m), "
                  "trained W_l ~ N(0,2/m), fixed B ~ N(0,1/d), no biases (Guo, Li, Lerman 2024)")(__name__)


def c_alpha(alpha: float) -> float:
    """c(α) = (1−α)²/(1+α²) = (σ̃'(0+) − σ̃'(0−))²: the α-factor of every rate bound (c(−1) = 2, c(0) = 1)."""
    return (1.0 - alpha) ** 2 / (1.0 + alpha ** 2)


def check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not alpha < 1:
        raise ValueError(f"guo2024 needs a leaky-ReLU parameter α < 1, got {alpha}")
    return alpha


# torch.where and masked_fill cost 8x an arithmetic op on float64 CPU tensors (150 vs 20 us at 24 x 30 x 64): the
# activation and its slope, recomputed at every GD step, are written without them (the same values)


def act(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """σ̃_α(x) of (2), implemented as the catalogue asks (x ≥ 0 takes the slope 1/√(1+α²)): leaky_relu gives x where
    x > 0 and α x elsewhere, the same numbers (at x = 0 a zero of either sign)."""
    return torch.nn.functional.leaky_relu(x, alpha) / math.sqrt(1.0 + alpha ** 2)


def slope(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Diagonal of D_x in (18): (1{x ≥ 0} + α 1{x < 0})/√(1+α²)."""
    b = torch.ge(x, 0, out=torch.empty_like(x))  # 1{x >= 0} in x's dtype: a bool tensor's cast costs 4x the compare
    return (b + (1 - b) * alpha) / math.sqrt(1.0 + alpha ** 2)  # exactly 1 or α before the scaling


def init(gen: torch.Generator, R: int, p: int, m: int, d: int, L: int,
         dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """Algorithm 1: (A, [W_1..W_L], B), drawn in that order, with variances 1/m, 2/m, 1/d."""
    A = torch.randn(R, m, p, generator=gen, dtype=dtype) * math.sqrt(1.0 / m)
    Ws = [torch.randn(R, m, m, generator=gen, dtype=dtype) * math.sqrt(2.0 / m) for _ in range(L)]
    B = torch.randn(R, d, m, generator=gen, dtype=dtype) * math.sqrt(1.0 / d)
    return A, Ws, B


@dataclass
class Forward:
    h: list[torch.Tensor]  # h[0..L], each (R, n, m): h[0] = A x, h[l] = σ̃_α(g_l)
    g: list[torch.Tensor]  # g[0..L]: g[0] = h_0 (paper B.2), g[l] = W_l h_{l-1}
    out: torch.Tensor  # (R, n, d): ŷ = g_{L+1} = B h_L
    alpha: float

    @property
    def L(self) -> int:
        return len(self.h) - 1

    def slope(self, l: int) -> torch.Tensor:
        """D_l diagonal (R, n, m) for l = 1..L; D_0 = I."""
        if l == 0:
            return torch.ones_like(self.h[0])
        return slope(self.g[l], self.alpha)


def forward(A: torch.Tensor, Ws: list[torch.Tensor], B: torch.Tensor, X: torch.Tensor, alpha: float) -> Forward:
    alpha = check_alpha(alpha)
    h = X @ A.transpose(-1, -2)
    hs, gs = [h], [h]
    for W in Ws:
        g = h @ W.transpose(-1, -2)
        h = act(g, alpha)
        gs.append(g)
        hs.append(h)
    return Forward(hs, gs, h @ B.transpose(-1, -2), alpha)


def he_weights(Ws: list[torch.Tensor], alpha: float) -> list[torch.Tensor]:
    """The He-parametrisation weights with the same forward map: W_He = W/√(1+α²) (paper L72)."""
    return [W / math.sqrt(1.0 + alpha ** 2) for W in Ws]


def forward_he(A: torch.Tensor, Ws_he: list[torch.Tensor], B: torch.Tensor, X: torch.Tensor,
               alpha: float) -> torch.Tensor:
    """ŷ under the plain leaky ReLU σ_α (the He parametrisation of L72); only for the E1 equivalence."""
    h = X @ A.transpose(-1, -2)
    for W in Ws_he:
        g = h @ W.transpose(-1, -2)
        h = torch.where(g >= 0, g, alpha * g)
    return h @ B.transpose(-1, -2)


def left_mul(M: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """M (R, a, b) applied to every one of n stacks Z (R, n, b, k) -> (R, n, a, k), as ONE batched GEMM (plain
    broadcasting would copy M n times)."""
    R, n, b, k = Z.shape
    out = M @ Z.transpose(1, 2).reshape(R, b, n * k)
    return out.reshape(R, M.shape[-2], n, k).transpose(1, 2)


def left_mul_t(W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """`left_mul(W^T, Z)` contracted against W as stored, Z first: a batched GEMM with a transposed operand pays a
    strided copy of every W on each call (about 5x the whole product at m = 256, n = 30, k = 1 on two cores);
    equal to it to rounding (the sums run in another order)."""
    R, n, b, k = Z.shape
    out = Z.transpose(-1, -2).reshape(R, n * k, b) @ W
    return out.reshape(R, n, k, W.shape[-1]).transpose(-1, -2)


def _backprop(Ws: list[torch.Tensor], B: torch.Tensor, fwd: Forward, V: torch.Tensor) -> list[torch.Tensor]:
    """z[l] = D_l Back_{l+1}^T V for l = 0..L (D_0 = I), V of shape (R, n, d, k); each z[l] is (R, n, m, k)."""
    L = fwd.L
    z = fwd.slope(L).unsqueeze(-1) * left_mul_t(B, V)
    zs = [z]
    for l in range(L - 1, -1, -1):
        z = fwd.slope(l).unsqueeze(-1) * left_mul_t(Ws[l], z)  # W_{l+1} is Ws[l]
        zs.append(z)
    return zs[::-1]


def backward_vectors(Ws: list[torch.Tensor], B: torch.Tensor, fwd: Forward, v: torch.Tensor) -> list[torch.Tensor]:
    """z[l] = z_{i,l}(v_i) = D_{i,l} Back_{i,l+1}^T v_i, (R, n, m), for l = 0..L; v is (R, n, d).

    z[0] = Back_1^T v = ∂⟨v, ŷ⟩/∂h_0, and G_{i,l}(v_i) = z[l]_i h_{i,l-1}^T is ∂⟨v_i, ŷ_i⟩/∂W_l."""
    return [z.squeeze(-1) for z in _backprop(Ws, B, fwd, v.unsqueeze(-1))]


def back_operators(Ws: list[torch.Tensor], B: torch.Tensor, fwd: Forward) -> list[torch.Tensor]:
    """J[l] = D_{i,l} Back_{i,l+1}^T as (R, n, m, d) for l = 0..L (column a is z_{i,l}(e_a))."""
    R, n = fwd.out.shape[:2]
    d = B.shape[-2]
    eye = torch.eye(d, dtype=B.dtype).expand(R, n, d, d)
    return _backprop(Ws, B, fwd, eye)


def back_matrices(Ws: list[torch.Tensor], B: torch.Tensor, fwd: Forward) -> list[torch.Tensor]:
    """Back_{i,a} = B D_{i,L} W_L ⋯ D_{i,a} W_a as (R, n, d, m) for a = 1..L+1 (index a-1; Back_{L+1} = B)."""
    J = back_operators(Ws, B, fwd)  # J[l] = D_l Back_{l+1}^T
    out = [B.unsqueeze(1).expand(-1, J[0].shape[1], -1, -1)]
    for a in range(fwd.L, 0, -1):
        out.append(left_mul_t(Ws[a - 1], J[a]).transpose(-1, -2))  # (W_a^T J_a)^T
    return out[::-1]


def loss(out: torch.Tensor, Y: torch.Tensor, half: bool = True) -> torch.Tensor:
    """L(W) per replicate: ½ Σ_i ||ŷ_i − y_i||² (Appendix B.1) or, with half=False, Σ_i ||y_i − ŷ_i||² (§2)."""
    s = ((out - Y) ** 2).sum(dim=(-1, -2))
    return 0.5 * s if half else s


def loss_gradients(A: torch.Tensor, Ws: list[torch.Tensor], B: torch.Tensor, X: torch.Tensor, Y: torch.Tensor,
                   alpha: float, half: bool = True) -> tuple[list[torch.Tensor], torch.Tensor, Forward]:
    """Closed-form ∇_{W_l} L(W) = c Σ_i D_{i,l} Back_{i,l+1}^T e_i h_{i,l-1}^T (c = 1 for ½-loss, 2 otherwise).

    Returns ([∇_{W_1}, …, ∇_{W_L}] each (R, m, m), L(W) of shape (R,), the forward pass)."""
    fwd = forward(A, Ws, B, X, alpha)
    e = fwd.out - Y
    zs = backward_vectors(Ws, B, fwd, e)
    c = 1.0 if half else 2.0
    grads = [c * torch.einsum("rni,rnj->rij", zs[l], fwd.h[l - 1]) for l in range(1, fwd.L + 1)]
    return grads, loss(fwd.out, Y, half), fwd


def layer_gram(fwd: Forward, J: list[torch.Tensor], l: int) -> torch.Tensor:
    """K_l[(i,a),(j,b)] = ⟨h_{i,l-1}, h_{j,l-1}⟩ ⟨z_{i,l}(e_a), z_{j,l}(e_b)⟩, (R, n d, n d) (catalogue D9).

    ||Σ_i G_{i,l}(v_i)||_F² = vᵀ K_l v for v = (v_1; …; v_n), so inf over {v_i} of that ratio is λ_min(K_l)."""
    H = fwd.h[l - 1] @ fwd.h[l - 1].transpose(-1, -2)
    Z = torch.einsum("rima,rjmb->riajb", J[l], J[l])
    K = Z * H[:, :, None, :, None]
    R, n, d = K.shape[:3]
    return K.reshape(R, n * d, n * d)


def conditional_features(gen: torch.Generator, X: torch.Tensor, m: int, L: int, alpha: float) -> list[torch.Tensor]:
    """h_0..h_L at the n inputs at initialisation WITHOUT materialising A or any W_l (exact in distribution).

    Neuron j's values at the n inputs are (A_j·x_i)_i ~ N(0, X Xᵀ/m) for the input layer and, given h_{l-1},
    (W_{l,j}·h_{l-1,i})_i ~ N(0, (2/m) H Hᵀ) for layer l, independently over j: O(n² m) per layer."""
    alpha = check_alpha(alpha)
    hs = []
    h = X
    for l in range(L + 1):
        var = 1.0 / m if l == 0 else 2.0 / m
        G = h @ h.transpose(-1, -2)
        E = torch.randn(*G.shape[:-1], m, generator=gen, dtype=X.dtype)
        g = (psd_sqrt(G) * math.sqrt(var)) @ E  # (R, n, m): column j is neuron j at the n inputs
        h = g if l == 0 else act(g, alpha)
        hs.append(h)
    return hs


def conditional_back_operators(gen: torch.Generator, X: torch.Tensor, m: int, d: int, L: int,
                               alpha: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(h_0..h_L, J_0..J_L) at the n inputs at initialisation, J_l = D_l Back_{l+1}^T (R, n, m, d) as `back_operators`
    gives it, WITHOUT materialising A or any W_l (exact in distribution): O((n d)^2 m) per layer instead of m^2.

    The forward as `conditional_features` (g_l = W_l h_{l-1} drawn given h_{l-1}); B is drawn; then down the layers
    W_l^T J_l from W_l = G H^+ + W~ (I - P): H (n x m) the rows h_{i,l-1} the forward fixed, G = W_l H^T their image,
    P the projection on their span, and W~ (I - P) independent of the forward and of J_l (which depends on the layers
    above), so W~^T K ~ sqrt(2/m) Xi (K^T K)^{1/2} for the m x nd stack K of the J_{i,l} (Xi iid N(0, 1))."""
    alpha = check_alpha(alpha)
    R, n = X.shape[:2]
    hs, gs, h = [], [], X
    for l in range(L + 1):
        var = 1.0 / m if l == 0 else 2.0 / m
        E = torch.randn(R, n, m, generator=gen, dtype=X.dtype)
        g = (psd_sqrt(h @ h.transpose(-1, -2)) * math.sqrt(var)) @ E  # row i: (W_l h_{i,l-1}) over the m neurons
        h = g if l == 0 else act(g, alpha)
        gs.append(g)
        hs.append(h)
    B = torch.randn(R, d, m, generator=gen, dtype=X.dtype) * math.sqrt(1.0 / d)
    J = slope(gs[L], alpha).unsqueeze(-1) * B.transpose(-1, -2).unsqueeze(1)  # D_L B^T, (R, n, m, d)
    Js = [J]
    for l in range(L, 0, -1):
        H = hs[l - 1]
        Hp = torch.linalg.pinv(H @ H.transpose(-1, -2), hermitian=True) @ H  # (H H^T)^+ H: P = H^T Hp
        K = J.permute(0, 2, 1, 3).reshape(R, m, n * d)
        Xi = torch.randn(R, m, n * d, generator=gen, dtype=X.dtype)
        F = (Xi @ psd_sqrt(K.transpose(-1, -2) @ K)) * math.sqrt(2.0 / m)  # W~^T K in law
        F = F - Hp.transpose(-1, -2) @ (H @ F)  # (I - P) W~^T K
        WtJ = F.reshape(R, m, n, d).permute(0, 2, 1, 3) + torch.einsum("rkm,rikd->rimd", Hp,
                                                                       torch.einsum("rkm,rimd->rikd", gs[l], J))
        J = (slope(gs[l - 1], alpha) if l > 1 else torch.ones_like(gs[0])).unsqueeze(-1) * WtJ
        Js.append(J)
    return hs, Js[::-1]


# ---- infinite-width kernels (reference facts D3/E5: the arc-cosine kernels generalised to σ̃_α) ----

def _angle(rho: torch.Tensor) -> torch.Tensor:
    return torch.arccos(rho.clamp(-1.0, 1.0))


def kappa1(rho: torch.Tensor, alpha: float) -> torch.Tensor:
    """2 E[σ̃_α(u) σ̃_α(v)] for standard normals with correlation ρ = cos φ: ρ + c(α)(sin φ − φ cos φ)/π."""
    phi = _angle(rho)
    return rho + c_alpha(alpha) * (torch.sin(phi) - phi * torch.cos(phi)) / math.pi


def kappa0(rho: torch.Tensor, alpha: float) -> torch.Tensor:
    """2 E[σ̃'_α(u) σ̃'_α(v)] for standard normals with correlation ρ = cos φ: 1 − c(α) φ/π."""
    return 1.0 - c_alpha(alpha) * _angle(rho) / math.pi


def _corr(S: torch.Tensor) -> torch.Tensor:
    s = S.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt()
    return S / (s.unsqueeze(-1) * s.unsqueeze(-2)).clamp_min(1e-300)


def limit_feature_kernels(X: torch.Tensor, L: int, alpha: float) -> list[torch.Tensor]:
    """Σ_l = lim_{m→∞} [⟨h_{i,l}, h_{j,l}⟩]_{ij} for l = 0..L, each (…, n, n).

    Σ_0 = X Xᵀ (A ~ N(0, 1/m)); Σ_l(x, x') = √(Σ_{l-1}(x,x) Σ_{l-1}(x',x')) κ1(ρ_{l-1}(x, x')) (W_l ~ N(0, 2/m));
    the diagonal is preserved (κ1(1) = 1), so unit inputs keep unit norms in the limit."""
    S = X @ X.transpose(-1, -2)
    out = [S]
    for _ in range(L):
        s = S.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt()
        S = s.unsqueeze(-1) * s.unsqueeze(-2) * kappa1(_corr(S), alpha)
        out.append(S)
    return out


def limit_layer_ntks(X: torch.Tensor, L: int, alpha: float) -> list[torch.Tensor]:
    """Θ_l = lim (2d/m) K_l restricted to one output coordinate, for l = 1..L (index l-1), each (…, n, n).

    Θ_l(x, x') = Σ_{l-1}(x, x') ∏_{k=l}^{L} κ0(ρ_{k-1}(x, x')); the (i,a),(j,b) block of K_l tends to
    (m/(2d)) δ_ab Θ_l(x_i, x_j) (B ~ N(0, 1/d) makes output coordinates orthogonal). Hence the paper's D8:
    K_l's diagonal ≈ m/(2d) for unit inputs, whatever α."""
    Sig = limit_feature_kernels(X, L, alpha)
    dots = [kappa0(_corr(S), alpha) for S in Sig[:-1]]  # dots[k-1] = κ0(ρ_{k-1}), the derivative factor of layer k
    out = []
    for l in range(1, L + 1):
        prod = torch.ones_like(Sig[0])
        for k in range(l, L + 1):
            prod = prod * dots[k - 1]
        out.append(Sig[l - 1] * prod)
    return out


# ---- the network as a lemmacheck.protocol.Network, so the generic quantities run on this setting ----


class ProtocolNet:
    """Algorithm 1's network through `forward` and `backward_vectors` above: x_0 = h_0 = A x (the fixed input layer),
    z_l = g_l = W_l h_{l-1} (layout "out-in"), patterns = the slopes of D_l, f = B h_L (R, n, d); A and B stay fixed."""

    layout = "out-in"

    def __init__(self, A: torch.Tensor, weights: list[torch.Tensor], B: torch.Tensor, alpha: float):
        self.A, self.weights, self.B, self.alpha = A, weights, B, check_alpha(alpha)

    def forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None = None):
        from lemmacheck.protocol import ForwardPass

        fwd = forward(self.A, self.weights if weights is None else weights, self.B, X, self.alpha)
        return ForwardPass(fwd.h, fwd.g[1:], [fwd.slope(l) for l in range(1, fwd.L + 1)], fwd.out)

    def backward(self, fwd, V: torch.Tensor, weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        gf = Forward(fwd.outputs, [fwd.outputs[0], *fwd.preacts], fwd.out, self.alpha)
        return backward_vectors(self.weights if weights is None else weights, self.B, gf, V)[1:]


def protocol_network(ctx, X: torch.Tensor | None = None) -> ProtocolNet:
    """R networks at the claim's p, m, d (default 1), L and alpha, drawn as the setting's estimators draw them
    (the architecture does not depend on the datasets X)."""
    A, Ws, B = init(ctx.generator, ctx.replicates, ctx.i("p"), ctx.i("m"), ctx.i("d", 1), ctx.i("L"), ctx.dtype)
    dev = ctx.device
    return ProtocolNet(A.to(dev), [W.to(dev) for W in Ws], B.to(dev), ctx.p("alpha"))
