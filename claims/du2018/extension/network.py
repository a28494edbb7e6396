"""Du, Lee, Li, Wang & Zhai (2018, arXiv:1811.03804v1, Dec 3 2018): three architectures, smooth activations.

Exactly as the paper (§2.2, eqs. (1)–(6); catalogue du2018 §0):

Fully connected (eq. 2), W^{(1)} ∈ R^{m×d}, W^{(h)} ∈ R^{m×m} (2 ≤ h ≤ H), a ∈ R^m:
    x^{(0)} = x,   x^{(h)} = √(c_σ/m) σ(W^{(h)} x^{(h−1)})  (h ∈ [H]),   f(x, w) = aᵀ x^{(H)}.
ResNet (eq. 3), same shapes, s := c_λ λ^{3/2} / H:
    x^{(1)} = √(c_σ/m) σ(W^{(1)} x),   x^{(h)} = x^{(h−1)} + (s/√m) σ(W^{(h)} x^{(h−1)})  (2 ≤ h ≤ H),
    f_res = aᵀ x^{(H)}.
Convolutional ResNet (§2.2): x^{(0)} ∈ R^{d0×p} (d0 channels, p pixels), m channels for h ≥ 1, patch operator
φ_h: R^{d_{h−1}×p} → R^{q d_{h−1}×p} (stride 1, zero padding x_{:,0} = x_{:,p+1} = 0 for q = 3; patch row
c·q + o holds channel c at pixel l + o − (q−1)/2), W^{(1)} ∈ R^{m×q d0}, W^{(h)} ∈ R^{m×q m}:
    x^{(1)} = √(c_σ/m) σ(W^{(1)} φ(x)),   x^{(h)} = x^{(h−1)} + (s/√m) σ(W^{(h)} φ(x^{(h−1)})),
    f_cnn = ⟨a, x^{(H)}⟩ = Σ_{r,l} a_{r,l} x^{(H)}_{r,l},  a_{r,l} = a_{r,1} (one Rademacher sign per channel).
Initialisation: every W^{(h)}_{ij} ~ N(0, 1) (no fan-in scaling: the 1/√m factors are in the architecture);
a_r ~ unif{−1, +1}. Only W^{(1)}, …, W^{(H)} are trained; a is FIXED. c_σ = (E_{z~N(0,1)} σ(z)²)^{−1}.
Activation σ: L-Lipschitz and β-smooth (guiding example softplus, L = 1, β = 1/4); see kernels.ACTIVATIONS.
Inputs: ‖x_i‖₂ = 1 (CNN: ‖x_i‖_F = 1), non-parallel. Labels |y_i| ≤ C.
Loss (eq. 1): L(w) = ½ Σ_{i=1}^n (f(w, x_i) − y_i)²  (a SUM over samples). Full-batch GD with constant η:
    W^{(h)}(k) = W^{(h)}(k−1) − η ∂L(w(k−1))/∂W^{(h)}(k−1),  h ∈ [H].
λ (ResNet/CNN, Assumptions 4.1/5.1) = min_{i≠j} λ_min of the 2×2 (CNN: 2p×2p) blocks of K^{(0)}; the
architecture's residual scale depends on the training set through it, so it is computed per replicate from
that replicate's data (`data_lambda`). The paper's min over (i, j) ∈ [n]×[n] includes i = j, where the block
is singular; we read i ≠ j (catalogue §0.6).

Representation: everything is batched over R replicates, and every layer's features are (R, n, channels,
pixels); FC and ResNet have one pixel (p = 1, q = 1: the convolutional ResNet with p = q = 1 IS the ResNet).
Weights are stored as in the paper, W^{(h)} of shape (R, m, q·d_{h−1}); a of shape (R, m).

Gradients: ∂u_i/∂W^{(h)} = Σ_l δ_{i,:,l}^{(h)} φ(x_i^{(h−1)})_{:,l}ᵀ (rank one per pixel), with δ^{(h)} = ∂u/∂z^{(h)}
(z^{(h)} = W^{(h)} φ(x^{(h−1)}) the pre-activations) obtained by the backward recursion in `backward`;
G^{(h)}_{ij} = ⟨∂u_i/∂W^{(h)}, ∂u_j/∂W^{(h)}⟩ and G = Σ_h G^{(h)} (§0.5). The gradient display of Appendix A
omits the factor (c_σ/m)^{(H−h+1)/2} and is written transposed; ours includes the factors (catalogue A-grad,
B-grad: the consistent reading), and is checked against autograd in the tests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from lemmacheck import kernels
from lemmacheck.kernels import Activation
from lemmacheck.registry import NETWORKS

from . import kernels as du_kernels

FC, RESNET, CNN = "du2018-fc", "du2018-resnet", "du2018-cnn-resnet"
NETWORKS.register(FC, "deep FC net x^(h) = sqrt(c_sigma/m) sigma(W^(h) x^(h-1)), W ~ N(0,1), fixed Rademacher a, "
                  "smooth sigma, squared loss (Du, Lee, Li, Wang, Zhai 2018, eq. 2)")(__name__)
NETWORKS.register(RESNET, "ResNet x^(h) = x^(h-1) + c_lambda lambda^{3/2}/(H sqrt m) sigma(W^(h) x^(h-1)), first layer "
                  "sqrt(c_sigma/m), W ~ N(0,1), fixed Rademacher a (Du et al. 2018, eq. 3)")(__name__)
NETWORKS.register(CNN, "convolutional ResNet, stride-1 zero-padded patches of size q, residual scale "
                  "c_lambda lambda^{3/2}/(H sqrt m), a_{r,l} = a_{r,1} Rademacher (Du et al. 2018, sec. 2.2)")(__name__)
KINDS = {FC: "fc", RESNET: "resnet", CNN: "cnn"}
LAMBDA_TOL = 1e-12  # λ at or below this (float rounding of an exactly singular block) counts as λ = 0


@dataclass
class DuNet:
    """One of the three architectures at width m and depth H, for R replicates.

    lam: (R,) the data constant λ of each replicate's dataset (ResNet/CNN; ignored for FC)."""

    kind: str  # "fc" | "resnet" | "cnn"
    m: int
    H: int
    act: Activation
    c_lambda: float = 0.5
    lam: torch.Tensor | None = None
    q: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("fc", "resnet", "cnn"):
            raise ValueError(f"unknown architecture '{self.kind}' (fc, resnet or cnn)")
        if self.H < 1 or self.m < 1:
            raise ValueError(f"need H >= 1 and m >= 1, got H = {self.H}, m = {self.m}")
        if self.kind != "cnn" and self.q != 1:
            raise ValueError("patch size q applies to the convolutional ResNet only")
        if self.kind == "cnn" and self.q % 2 != 1:
            raise ValueError(f"patch size q = {self.q} must be odd")
        if self.kind != "fc":
            if not 0 < self.c_lambda < 1:
                raise ValueError(f"c_lambda = {self.c_lambda} must lie in (0, 1) (eq. 3)")
            if self.lam is None:
                raise ValueError("ResNet/CNN need lam, the data constant λ of Assumption 4.1/5.1 (data_lambda)")
        self.c_sigma = kernels.c_sigma(self.act)

    @property
    def residual(self) -> bool:
        return self.kind != "fc"

    @property
    def assumption_holds(self) -> torch.Tensor | bool:
        """Per replicate: λ > 0 (Assumptions 4.1/5.1; parallel data make λ = 0 and the residual branches vanish).
        Always True for FC (no λ in the architecture)."""
        if self.lam is None:
            return True
        return self.lam > LAMBDA_TOL

    @property
    def s(self) -> torch.Tensor:
        """s = c_λ λ^{3/2} / H per replicate (the residual branch is scaled by s/√m)."""
        assert self.lam is not None
        return self.c_lambda * self.lam.clamp_min(0) ** 1.5 / self.H

    def scale(self, h: int) -> torch.Tensor | float:
        """The factor in front of σ(·) at layer h: √(c_σ/m) (FC, and layer 1), s/√m (residual layers)."""
        if h == 1 or not self.residual:
            return math.sqrt(self.c_sigma / self.m)
        return (self.s / math.sqrt(self.m)).reshape(-1, 1, 1, 1)


def data_lambda(X: torch.Tensor, q: int = 1) -> torch.Tensor:
    """λ of Assumptions 4.1 / 5.1: min over i ≠ j of λ_min of the 2×2 (CNN: 2p×2p) blocks of K^{(0)}.

    X: (R, n, C, p). For FC/ResNet (p = 1) with unit inputs this is 1 − max_{i≠j} |⟨x_i, x_j⟩|."""
    R, n, Cin, p = X.shape
    pts = X.transpose(-1, -2).reshape(R, n * p, Cin)
    K0 = du_kernels.patch_gram(pts @ pts.transpose(-1, -2), n, p, q)
    return kernels.block_lambda_min(K0, n, p)


def as_images(X: torch.Tensor, d0: int | None = None, p: int | None = None) -> torch.Tensor:
    """(R, n, d) → (R, n, d, 1) for FC/ResNet; (R, n, d0·p) → (R, n, d0, p) (channel-major) for the CNN.
    A unit vector in R^{d0·p} becomes an image with ‖x‖_F = 1."""
    if p is None:
        return X.unsqueeze(-1)
    assert d0 is not None and X.shape[-1] == d0 * p, f"input dimension {X.shape[-1]} != d0·p = {d0}·{p}"
    return X.reshape(*X.shape[:-1], d0, p)


def make_net(kind: str, X: torch.Tensor, m: int, H: int, act: Activation, c_lambda: float = 0.5,
             q: int = 1, lam: torch.Tensor | None = None) -> DuNet:
    """The architecture for the replicates' datasets X (R, n, C, p); λ from the data unless given."""
    if kind == "cnn" and q * X.shape[2] < 2 * X.shape[3]:
        # The 2p×2p blocks of K^{(0)} are Grams of 2p vectors in R^{q d0}: rank ≤ q·d0 < 2p makes λ = 0 for EVERY
        # dataset, the residual scale c_λ λ^{3/2}/H vanishes and K^{(H)} = 0; Assumption 5.1 cannot hold.
        raise ValueError(f"convolutional ResNet with q*d0 = {q}*{X.shape[2]} = {q * X.shape[2]} < 2p = {2 * X.shape[3]}: "
                         "Assumption 5.1's lambda is 0 for every dataset (a Gram of 2p vectors in R^{q d0}); "
                         "the paper's architecture is undefined there (need q*d0 >= 2p)")
    if kind != "fc" and lam is None:
        if X.shape[1] < 2:  # λ = min over pairs i ≠ j: undefined (+inf) for one point, and s = c_λ λ^{3/2}/H with it
            raise ValueError(f"the {kind} architecture needs n >= 2 data points: its residual scale uses lambda, "
                             "a minimum over pairs i != j (Assumption 4.1/5.1), undefined for n = 1")
        lam = data_lambda(X, q)
    return DuNet(kind, m, H, act, c_lambda, lam, q)


def in_channels(net: DuNet, d0: int, h: int) -> int:
    return net.q * (d0 if h == 1 else net.m)


def init(gen: torch.Generator, R: int, net: DuNet, d0: int,
         dtype=torch.float64) -> tuple[list[torch.Tensor], torch.Tensor]:
    """W^{(h)} (R, m, q d_{h−1}) with N(0, 1) entries, a (R, m) Rademacher (the CNN repeats a_r over pixels)."""
    Ws = [torch.randn(R, net.m, in_channels(net, d0, h), generator=gen, dtype=dtype) for h in range(1, net.H + 1)]
    a = torch.randint(0, 2, (R, net.m), generator=gen).to(dtype) * 2 - 1
    return Ws, a


# ----------------------------------------------------------------------------------------------------------
# Patch operator φ and its adjoint
# ----------------------------------------------------------------------------------------------------------

def patches(x: torch.Tensor, q: int) -> torch.Tensor:
    """φ(x): (…, C, p) → (…, C·q, p); row c·q + o of column l is x_{c, l+o−(q−1)/2} (zero outside [0, p))."""
    if q == 1:
        return x
    r = (q - 1) // 2
    xp = torch.nn.functional.pad(x, (r, r))
    p = x.shape[-1]
    cols = torch.stack([xp[..., o:o + p] for o in range(q)], dim=-2)  # (…, C, q, p)
    return cols.reshape(*x.shape[:-2], x.shape[-2] * q, p)


def patches_adjoint(y: torch.Tensor, q: int) -> torch.Tensor:
    """φᵀ: (…, C·q, p) → (…, C, p), the adjoint of `patches` (⟨φ(x), y⟩ = ⟨x, φᵀ(y)⟩)."""
    if q == 1:
        return y
    r = (q - 1) // 2
    p = y.shape[-1]
    yc = y.reshape(*y.shape[:-2], y.shape[-2] // q, q, p)
    out = torch.zeros(*y.shape[:-2], y.shape[-2] // q, p + 2 * r, dtype=y.dtype)
    for o in range(q):
        out[..., o:o + p] += yc[..., o, :]
    return out[..., r:r + p]


# ----------------------------------------------------------------------------------------------------------
# Forward / backward
# ----------------------------------------------------------------------------------------------------------

@dataclass
class Forward:
    x: list[torch.Tensor]  # x[0..H], (R, n, C_h, p): layer outputs (x[0] = inputs)
    phi: list[torch.Tensor]  # phi[h−1] = φ_h(x^{(h−1)}), (R, n, q C_{h−1}, p) (= x^{(h−1)} when q = 1)
    z: list[torch.Tensor]  # z[h−1] = W^{(h)} φ(x^{(h−1)}), (R, n, m, p): pre-activations
    dsig: list[torch.Tensor]  # dsig[h−1] = σ'(z^{(h)}): the diagonal J^{(h)} of Appendix A
    out: torch.Tensor  # (R, n): u_i = f(w, x_i)

    def norms(self) -> torch.Tensor:
        """‖x_i^{(h)}‖ (Frobenius for the CNN) for h = 1..H: (R, H, n)."""
        return torch.stack([x.flatten(-2).norm(dim=-1) for x in self.x[1:]], dim=1)


def _apply(W: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """W applied to every sample and pixel: (R, m, k) × (R, n, k, p) → (R, n, m, p), as one batched GEMM
    (einsum would copy the R·m·k weights into its own layout on every call; here only the features move)."""
    R, n, k, p = P.shape
    out = torch.bmm(W, P.permute(0, 2, 1, 3).reshape(R, k, n * p))
    return out.reshape(R, W.shape[1], n, p).permute(0, 2, 1, 3)


def forward(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor) -> Forward:
    """X: (R, n, C, p) (use `as_images`)."""
    xs, phis, zs, ds = [X], [], [], []
    h = X
    for l, W in enumerate(Ws, start=1):
        P = patches(h, net.q)
        z = _apply(W, P)
        branch = net.scale(l) * net.act.f(z)
        h = branch if (l == 1 or not net.residual) else h + branch
        phis.append(P)
        zs.append(z)
        ds.append(net.act.df(z))
        xs.append(h)
    out = torch.einsum("rm,rnmp->rn", a, h)
    return Forward(xs, phis, zs, ds, out)


def backward(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, fwd: Forward) -> list[torch.Tensor]:
    """δ^{(h)} = ∂u/∂z^{(h)}, (R, n, m, p) for h = 1..H (index h−1):
        g^{(H)} = a (repeated over pixels),  δ^{(h)} = scale_h σ'(z^{(h)}) ⊙ g^{(h)},
        g^{(h−1)} = [g^{(h)} if layer h is residual] + φᵀ(W^{(h)ᵀ} δ^{(h)})."""
    H = len(Ws)
    g = a[:, None, :, None].expand_as(fwd.x[-1])
    deltas: list[torch.Tensor] = [torch.empty(0)] * H
    for l in range(H, 0, -1):
        d = net.scale(l) * fwd.dsig[l - 1] * g
        deltas[l - 1] = d
        if l > 1:
            back = patches_adjoint(_apply(Ws[l - 1].transpose(1, 2), d), net.q)
            g = g + back if net.residual else back
    return deltas


def output_gradients(fwd: Forward, deltas: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per-sample ∂u_i/∂W^{(h)}: (R, n, m, q C_{h−1}) for each h (memory n·m·qC: small widths only)."""
    return [torch.einsum("rnmp,rnkp->rnmk", d, P) for d, P in zip(deltas, fwd.phi)]


def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """L = ½ Σ_i (u_i − y_i)², per replicate."""
    return 0.5 * ((out - y) ** 2).sum(-1)


def loss_gradients(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor,
                   y: torch.Tensor) -> tuple[list[torch.Tensor], Forward, list[torch.Tensor]]:
    """Closed form ∂L/∂W^{(h)} = Σ_i (u_i − y_i) Σ_l δ_{i,:,l}^{(h)} φ(x_i^{(h−1)})_{:,l}ᵀ; returns (grads, fwd, δ)."""
    fwd = forward(net, Ws, a, X)
    deltas = backward(net, Ws, a, fwd)
    res = fwd.out - y
    grads = [torch.einsum("rn,rnmp,rnkp->rmk", res, d, P) for d, P in zip(deltas, fwd.phi)]
    return grads, fwd, deltas


def layer_gram(delta: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """G^{(h)}_{ij} = Σ_{l,k} ⟨δ_{i,:,l}, δ_{j,:,k}⟩ ⟨φ_{i,:,l}, φ_{j,:,k}⟩: (R, n, n), without per-sample gradients.
    For p = 1 this is (Δ Δᵀ) ∘ (X Xᵀ)."""
    if delta.shape[-1] == 1:
        d, x = delta[..., 0], P[..., 0]
        return (d @ d.transpose(-1, -2)) * (x @ x.transpose(-1, -2))
    D = torch.einsum("rimp,rjmq->rijpq", delta, delta)
    F = torch.einsum("rikp,rjkq->rijpq", P, P)
    return (D * F).sum(dim=(-1, -2))


def grams(fwd: Forward, deltas: list[torch.Tensor]) -> list[torch.Tensor]:
    """[G^{(1)}, …, G^{(H)}]; G(k) = Σ_h G^{(h)} ⪰ G^{(H)}."""
    return [layer_gram(d, P) for d, P in zip(deltas, fwd.phi)]


def last_layer_gram(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """G^{(H)} (R, n, n) from the last layer only (the paper's closed form; uses a_r² = 1)."""
    fwd = forward(net, Ws, a, X)
    d = net.scale(net.H) * fwd.dsig[-1] * a[:, None, :, None]
    return layer_gram(d, fwd.phi[-1])


# ----------------------------------------------------------------------------------------------------------
# Output change of one step without cancellation (eq. (7)'s I_2 at small η)
# ----------------------------------------------------------------------------------------------------------

# σ(z + d) − σ(z) = d ∫₀¹ σ'(z + t d) dt by Gauss–Legendre on [0, 1] for |d| ≤ DIFF_DIRECT (the smooth σ' makes the
# rule's error ~|d|^16 there); above it the plain difference loses at most ~eps |σ(z)| / |σ(z + d) − σ(z)|.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
GL_NODES, GL_WEIGHTS = ((_GL_X + 1) / 2).tolist(), (_GL_W / 2).tolist()
DIFF_DIRECT = 0.1


def activation_difference(act: Activation, z: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """σ(z + d) − σ(z) to the rounding of the DIFFERENCE itself (the plain one carries eps·|σ(z)|). Softplus has the
    closed form log1p(sigmoid(z) expm1(d)) (4 operations in place of the rule's 8 evaluations of σ')."""
    if act.name == "softplus":
        near = torch.log1p(torch.sigmoid(z) * torch.expm1(d.clamp(-DIFF_DIRECT, DIFF_DIRECT)))
    else:
        near = d * sum(w * act.df(z + t * d) for t, w in zip(GL_NODES, GL_WEIGHTS))
    far = d.abs() > DIFF_DIRECT
    return torch.where(far, act.f(z + d) - act.f(z), near) if bool(far.any()) else near


def _apply_factored(A: torch.Tensor, B: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """(A Bᵀ) applied like `_apply` without forming A Bᵀ: A (R, m, N), B (R, k, N), P (R, n, k, p) → (R, n, m, p)."""
    R, n, k, p = P.shape
    out = A @ (B.transpose(1, 2) @ P.permute(0, 2, 1, 3).reshape(R, k, n * p))
    return out.reshape(R, A.shape[1], n, p).permute(0, 2, 1, 3)


def output_step(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, fwd: Forward,
                steps: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """u(W + ΔW) − u(W), (R, n), with ΔW^{(h)} = A_h B_hᵀ given as factors, by propagating the differences layer by
    layer: Δz = W Δφ + ΔW (φ + Δφ), Δx = scale·(σ(z + Δz) − σ(z)) [+ Δx^{(h−1)}], each to the rounding of its own
    size. The difference of two forward passes carries the rounding of u itself (~1e-16 |u|), and eq. (7)'s
    I_2 = Δu − I_1, second order in η, falls below that at the paper's small steps (Lemmas A.6/B.6/C.6)."""
    dh = torch.zeros_like(fwd.x[0])
    for l, (W, (A, B)) in enumerate(zip(Ws, steps), start=1):
        P, dP = fwd.phi[l - 1], patches(dh, net.q)
        dz = _apply_factored(A, B, P + dP) + (_apply(W, dP) if l > 1 else 0)
        branch = net.scale(l) * activation_difference(net.act, fwd.z[l - 1], dz)
        dh = branch if (l == 1 or not net.residual) else dh + branch
    return torch.einsum("rm,rnmp->rn", a, dh)


# ----------------------------------------------------------------------------------------------------------
# Exact-in-distribution sampler at initialisation (no weights materialised)
# ----------------------------------------------------------------------------------------------------------

@dataclass
class InitSample:
    x: list[torch.Tensor]  # x[0..H], (R, n, C, p)
    z_last: torch.Tensor  # z^{(H)}, (R, n, m, p)
    gram_last: torch.Tensor  # G^{(H)}(0), (R, n, n), with a_r² = 1

    def norms(self) -> torch.Tensor:
        return torch.stack([x.flatten(-2).norm(dim=-1) for x in self.x[1:]], dim=1)


def point_gram(x: torch.Tensor) -> torch.Tensor:
    """Pixel-level Gram over the n·p points (i, l): (R, n, C, p) → (R, n·p, n·p), entry ⟨x_{i,:,l}, x_{j,:,k}⟩."""
    R, n, C, p = x.shape
    pts = x.permute(0, 1, 3, 2).reshape(R, n * p, C)
    return pts @ pts.transpose(-1, -2)


def sample_init(gen: torch.Generator, net: DuNet, X: torch.Tensor) -> InitSample:
    """Features at initialisation drawn layer by layer WITHOUT materialising W^{(h)}: exact in distribution.

    Given x^{(h−1)}, the rows w_r of W^{(h)} are iid N(0, I), so the pre-activations of channel r at all
    (input, pixel) points, (w_rᵀ φ(x_i^{(h−1)})_{:,l})_{i,l}, are iid over r ~ N(0, Φ), Φ the patch Gram matrix of
    the n·p points (`du_kernels.patch_gram` of the pixel Gram). Cost O((np)² m) per layer instead of O(n p q m²).
    G^{(H)} needs only a_r² = 1, not a."""
    R, n, _, p = X.shape
    h = X
    xs = [X]
    z = Phi = torch.empty(0)
    for l in range(1, net.H + 1):
        Phi = du_kernels.patch_gram(point_gram(h), n, p, net.q)
        E = torch.randn(R, n * p, net.m, generator=gen, dtype=X.dtype)
        z = (_psd_factor(Phi) @ E).reshape(R, n, p, net.m).permute(0, 1, 3, 2)  # (R, n, m, p)
        branch = net.scale(l) * net.act.f(z)
        h = branch if (l == 1 or not net.residual) else h + branch
        xs.append(h)
    d = net.scale(net.H) * net.act.df(z)
    D = point_gram(d)  # ⟨δ_{i,:,l}, δ_{j,:,k}⟩
    G = (D * Phi).reshape(R, n, p, n, p).sum(dim=(-1, -3))
    return InitSample(xs, z, G)


def _psd_factor(G: torch.Tensor) -> torch.Tensor:
    """A with A Aᵀ = G (eigen-decomposition: tolerant of the rank deficiency of patch Gram matrices)."""
    evals, evecs = torch.linalg.eigh(0.5 * (G + G.transpose(-1, -2)))
    # the symmetric root: unique, so the draws do not depend on LAPACK's eigenvector signs or degenerate bases
    return (evecs * evals.clamp_min(0).sqrt().unsqueeze(-2)) @ evecs.transpose(-1, -2)


# ----------------------------------------------------------------------------------------------------------
# Infinite-width kernels for this architecture
# ----------------------------------------------------------------------------------------------------------

def limit_kernels(net: DuNet, X: torch.Tensor, engine: kernels.Engine | None = None, cross: str = "paired",
                  aggregation: str = "matched") -> du_kernels.DuKernels:
    """K^{(0..H)} and λ₀ = λ_min(K^{(H)}) for each replicate's dataset (eqs. 4, 5, 6; readings in kernels.py)."""
    engine = engine or kernels.Engine(net.act)
    if net.kind == "fc":
        return du_kernels.fc_kernels(X[..., 0], net.act, net.H, engine)
    if net.kind == "resnet":
        return du_kernels.resnet_kernels(X[..., 0], net.act, net.H, net.s, engine, cross)
    return du_kernels.cnn_kernels(X, net.act, net.H, net.s, net.q, engine, cross, aggregation)


# ----------------------------------------------------------------------------------------------------------
# Gradient descent
# ----------------------------------------------------------------------------------------------------------

@dataclass
class Trajectory:
    loss: torch.Tensor  # (R, T+1): L(w(k)), k = 0..T
    movement: torch.Tensor  # (R, T+1, H): ‖W^{(h)}(k) − W^{(h)}(0)‖_F
    step: torch.Tensor  # (R, T, H): ‖W^{(h)}(k+1) − W^{(h)}(k)‖_F
    grad_norm: torch.Tensor  # (R, T+1, H): ‖∂L/∂W^{(h)}(k)‖_F
    residual_norm: torch.Tensor  # (R, T+1): ‖y − u(k)‖
    du: torch.Tensor  # (R, T, n): u(k+1) − u(k)
    i1: torch.Tensor  # (R, T, n): I_1(k) = −η G(k)(u(k) − y)
    lam_min_gram_last: torch.Tensor  # (R, T+1): λ_min(G^{(H)}(k)) (only when track_gram, else NaN)
    weights: list[torch.Tensor]  # final W^{(h)}(T)


def gradient_descent(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                     eta: torch.Tensor | float, steps: int, track_gram: bool = True,
                     track_movement: bool = True, track_terms: bool = True,
                     columns: bool | None = None, track_du: bool = True) -> Trajectory:
    """Full-batch GD on L = ½‖y − u‖² with constant step η (per replicate: (R,) tensor or float), a fixed.

    Records what Theorems 3.1/4.1/5.1, Condition 6.1, eq. (7) and Lemmas A.5–A.7 talk about. I_2(k) is
    du − i1 (eq. 7: u(k+1) − u(k) = I_1(k) + I_2(k)). `track_movement=False` leaves `movement` NaN and
    saves a pass over W(k) and W(0) per layer and step; `track_terms=False` leaves grad_norm, step, du and i1
    empty/NaN (no Grams, no gradient norms: what a claim on the losses alone needs, e.g. Theorem 4.1), and
    `track_du=False` leaves du empty (its difference pass costs about one more forward pass a step).
    One-pixel networks (FC, ResNet) take `_gd_columns`; `columns=False` forces the general path (tests).

    Why it is fast: the weights dominate memory traffic (R·m² numbers per layer), so each step touches them
    only to multiply (forward, backward) and to update in place. The gradient Σ_i r_i Σ_l δ_{i,:,l} φ_{i,:,l}ᵀ
    is kept as factors A Bᵀ (A = r-weighted δ, B = φ, n·p columns each): the update is one fused
    W ← W − η A Bᵀ (baddbmm), and ‖A Bᵀ‖_F² = Σ (AᵀA) ∘ (BᵀB) needs no m×m tensor. tests/test_nets_du2018.py
    checks it against the dense textbook loop."""
    R = X.shape[0]
    eta_t = torch.as_tensor(eta, dtype=X.dtype).reshape(-1)
    eta_t = eta_t.expand(R) if eta_t.numel() == 1 else eta_t
    if columns is None:
        columns = X.shape[-1] == 1 and net.q == 1
    if columns:
        # Replicates in chunks whose weights stay in the last-level cache: GD reads every weight three times a
        # step, and streaming R·H·m² numbers from memory doubled the time per replicate (m = 512, H = 4: 0.22 s at
        # 8 replicates, 0.48 s at 48). Each replicate's trajectory is its own, so chunking changes no number.
        per_replicate = sum(w[0].numel() * w.element_size() for w in Ws)
        c = max(1, GD_CACHE_BYTES // max(per_replicate, 1))
        parts = [_gd_columns(_replicates(net, i, i + c), [w[i:i + c] for w in Ws], a[i:i + c], X[i:i + c],
                             y[i:i + c], eta_t[i:i + c], steps, track_gram, track_movement, track_terms, track_du)
                 for i in range(0, R, c)]
        return parts[0] if len(parts) == 1 else _concat(parts)
    W0 = Ws
    W = [w.clone() for w in Ws]
    losses, moves, stepn, gn, rn, dus, i1s, lmins = [], [], [], [], [], [], [], []
    for k in range(steps + 1):
        fwd = forward(net, W, a, X)
        deltas = backward(net, W, a, fwd)
        res = fwd.out - y
        factors = [_gradient_factors(res, d, P) for d, P in zip(deltas, fwd.phi)]
        norms = torch.stack([_factored_frobenius(A, B) for A, B in factors], -1)
        losses.append(loss(fwd.out, y))
        rn.append(res.norm(dim=-1))
        if track_movement:
            moves.append(torch.stack([torch.linalg.vector_norm(w - w0, dim=(1, 2)) for w, w0 in zip(W, W0)], -1))
        gn.append(norms)
        if k == steps:
            if track_gram:
                lmins.append(kernels.lambda_min(layer_gram(deltas[-1], fwd.phi[-1])))
            break
        Gs = grams(fwd, deltas)
        i1s.append(-eta_t[:, None] * (sum(Gs) @ res.unsqueeze(-1)).squeeze(-1))
        if track_gram:
            lmins.append(kernels.lambda_min(Gs[-1]))
        lefts = [A * -eta_t.reshape(-1, 1, 1) for A, _ in factors]
        if track_terms and track_du:  # Δu(k) = u(k+1) − u(k) of the exact step from W(k), without the rounding of u
            dus.append(output_step(net, W, a, fwd, [(A, B) for A, (_, B) in zip(lefts, factors)]))
        for w, A, (_, B) in zip(W, lefts, factors):
            w.baddbmm_(A, B.transpose(1, 2))
        stepn.append(eta_t[:, None] * norms)
    return _trajectory(net, X, steps, losses, moves, stepn, gn, rn, dus, i1s, lmins, W, track_gram, track_movement,
                       track_terms)


GD_CACHE_BYTES = 32 << 20  # weights of one GD chunk of replicates (measured: the time per replicate doubles past ~48 MB)


def _replicates(net: DuNet, i: int, j: int) -> DuNet:
    """The network of replicates i..j−1 (λ is per replicate; everything else is shared)."""
    return net if net.lam is None else replace(net, lam=net.lam[i:j])


def _concat(parts: list[Trajectory]) -> Trajectory:
    """Chunks of replicates' trajectories as one (every field is per replicate along dim 0)."""
    cat = {f.name: torch.cat([getattr(p, f.name) for p in parts]) for f in fields(Trajectory) if f.name != "weights"}
    return Trajectory(**cat, weights=[torch.cat(ws) for ws in zip(*(p.weights for p in parts))])


def _trajectory(net: DuNet, X: torch.Tensor, steps: int, losses, moves, stepn, gn, rn, dus, i1s, lmins, W,
                track_gram: bool, track_movement: bool, track_terms: bool) -> Trajectory:
    R, n = X.shape[0], X.shape[1]
    if not track_terms:  # the general path computes them anyway; it returns what the fast one does
        stepn, dus, i1s = [], [], []
    nan = torch.full((R, steps + 1), math.nan, dtype=X.dtype)
    empty = torch.zeros(R, 0, n, dtype=X.dtype)
    nan_h = torch.full((R, steps + 1, net.H), math.nan, dtype=X.dtype)
    return Trajectory(
        torch.stack(losses, 1),
        torch.stack(moves, 1) if track_movement else nan_h,
        torch.stack(stepn, 1) if stepn else torch.zeros(R, 0, net.H, dtype=X.dtype),
        torch.stack(gn, 1) if track_terms else nan_h, torch.stack(rn, 1),
        torch.stack(dus, 1) if dus else empty, torch.stack(i1s, 1) if i1s else empty,
        torch.stack(lmins, 1) if track_gram else nan, W)


def _gd_columns(net: DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor, y: torch.Tensor,
                eta_t: torch.Tensor, steps: int, track_gram: bool, track_movement: bool,
                track_terms: bool, track_du: bool = True) -> Trajectory:
    """`gradient_descent` for one-pixel networks (FC, ResNet): the same iteration with the features kept as columns.

    Layer h's inputs are the n columns of x^{(h−1)} (R, k, n), so every product with the weights is one batched
    GEMM on the stored tensors, with no permute/reshape copies of the features: z = W x, the backward Wᵀδ as
    (δᵀW)ᵀ (the faster layout: W read row-major), the update W ← W − η (δ ⊙ r) xᵀ one in-place baddbmm. When no
    per-step Gram or gradient norm is asked for (track_terms = track_gram = False: a claim on the losses alone,
    e.g. Theorem 4.1), the backward starts from g^{(H)} = −η (u − y) ⊗ a, so δ^{(h)} IS the update's left factor
    and no Gram, norm or rescaling is computed. What is left per layer and step is the three passes over W
    (forward, backward, update) that GD itself needs. Measured and not used: deferring the rank-n updates as
    factors W_b − U Vᵀ applied every few steps as one wide GEMM (the thin corrections U (Vᵀx), (δᵀU) Vᵀ cost more
    than the pass they save at m = 512), and float32 (the loss-ratio claims sit within 1e-6 of their bound, below
    float32's rounding). Equal to the general path to rounding (tests/test_fast_paths.py)."""
    R, n = X.shape[0], X.shape[1]
    H = net.H
    act = net.act
    W = [w.clone() for w in Ws]
    W0 = Ws
    x0 = X[..., 0].transpose(1, 2).contiguous()  # (R, d, n)
    scales = [net.scale(h) for h in range(1, H + 1)]
    scales = [s.reshape(-1, 1, 1) if isinstance(s, torch.Tensor) else s for s in scales]
    a_row = a.unsqueeze(1)  # (R, 1, m)
    a_col = a.unsqueeze(-1)  # (R, m, 1)
    neg_eta = -eta_t.reshape(-1, 1, 1)
    lean = not (track_terms or track_gram)
    losses, moves, stepn, gn, rn, dus, i1s, lmins = [], [], [], [], [], [], [], []
    for k in range(steps + 1):
        xs, zs = [x0], []
        h = x0
        for l in range(H):
            z = torch.bmm(W[l], h)  # (R, m, n)
            branch = act.f(z) * scales[l]
            h = branch if (l == 0 or not net.residual) else branch + h
            xs.append(h)
            zs.append(z)
        out = torch.bmm(a_row, h).squeeze(1)  # (R, n)
        res = out - y
        losses.append(0.5 * (res * res).sum(-1))
        rn.append(res.norm(dim=-1))
        if track_movement:
            moves.append(torch.stack([torch.linalg.vector_norm(w - w0, dim=(1, 2)) for w, w0 in zip(W, W0)], -1))
        last = k == steps
        if last and lean:
            break
        # backward: g^{(H)} = a (per sample), or −η r_i a in the lean path
        g = a_col * (neg_eta * res.unsqueeze(1)) if lean else a_col.expand(R, a.shape[1], n)
        deltas: list[torch.Tensor] = [torch.empty(0)] * H
        for l in range(H - 1, -1, -1):
            d = act.df(zs[l]) * scales[l] * g
            deltas[l] = d
            if l > 0:
                back = torch.bmm(d.transpose(1, 2), W[l]).transpose(1, 2)
                g = back + g if net.residual else back
        if lean:
            lefts = deltas
        else:
            Gs = [(d.transpose(1, 2) @ d) * (x.transpose(1, 2) @ x) for d, x in zip(deltas, xs[:-1])]
            rc = res.unsqueeze(1)
            if track_terms:
                # ∂L/∂W^{(h)} = (δ ⊙ r) xᵀ: ‖·‖_F² = Σ_ij r_i r_j G^{(h)}_ij (the Gram of the per-sample gradients)
                norms = torch.stack([(rc @ G @ rc.transpose(1, 2)).reshape(R).clamp_min(0).sqrt() for G in Gs], -1)
                gn.append(norms)
            if track_gram:
                lmins.append(kernels.lambda_min(Gs[-1]))
            if last:
                break
            if track_terms:
                i1s.append(-eta_t[:, None] * (sum(Gs) @ res.unsqueeze(-1)).squeeze(-1))
                stepn.append(eta_t[:, None] * norms)
            scale_r = neg_eta * rc  # (R, 1, n): −η r_i per column
            lefts = [d * scale_r for d in deltas]
            if track_terms and track_du:  # Δu(k) of the exact step from W(k), without the rounding of u (`output_step`)
                dus.append(_column_output_step(net, W, xs, zs, lefts, scales, a_row))
        for w, d, x in zip(W, lefts, xs[:-1]):
            w.baddbmm_(d, x.transpose(1, 2))
    return _trajectory(net, X, steps, losses, moves, stepn, gn, rn, dus, i1s, lmins, W, track_gram, track_movement,
                       track_terms)


def _column_output_step(net: DuNet, W: list[torch.Tensor], xs: list[torch.Tensor], zs: list[torch.Tensor],
                        lefts: list[torch.Tensor], scales: list, a_row: torch.Tensor) -> torch.Tensor:
    """`output_step` with the features as columns: ΔW^{(h)} = lefts_h x^{(h−1)ᵀ}, so ΔW v = lefts_h (x^{(h−1)ᵀ} v)."""
    dh = None
    for l in range(net.H):
        x = xs[l]
        dz = torch.bmm(lefts[l], x.transpose(1, 2) @ (x if dh is None else x + dh))
        if dh is not None:
            dz = dz + torch.bmm(W[l], dh)
        branch = activation_difference(net.act, zs[l], dz) * scales[l]
        dh = branch if (l == 0 or not net.residual) else branch + dh
    return torch.bmm(a_row, dh).squeeze(1)


def _gradient_factors(res: torch.Tensor, delta: torch.Tensor, P: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """∂L/∂W^{(h)} = A Bᵀ with A = [r_i δ_{i,:,l}] (R, m, n·p) and B = [φ_{i,:,l}] (R, k, n·p)."""
    R, n, m, p = delta.shape
    A = (res[:, :, None, None] * delta).permute(0, 2, 1, 3).reshape(R, m, n * p)
    B = P.permute(0, 2, 1, 3).reshape(R, P.shape[2], n * p)
    return A, B


def _factored_frobenius(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """‖A Bᵀ‖_F = √(Σ (AᵀA) ∘ (BᵀB)) per replicate (the Hadamard product of two PSD Grams sums to ≥ 0)."""
    sq = ((A.transpose(1, 2) @ A) * (B.transpose(1, 2) @ B)).sum(dim=(1, 2))
    return sq.clamp(min=0).sqrt()


# ----------------------------------------------------------------------------------------------------------
# The FC net and the ResNet as a lemmacheck.protocol.Network, so the generic quantities run on them
# ----------------------------------------------------------------------------------------------------------

class ProtocolNet:
    """The FC net or ResNet (one pixel) through `forward` and `backward` above: x_0 = x, z_h = W^{(h)} x^{(h−1)} (layout
    "out-in"), patterns = scale_h σ'(z_h) (the derivative of layer h's branch), f = aᵀ x^{(H)} as (R, n, 1). The
    convolutional ResNet is not one: its gradient is a sum over pixels, not the protocol's rank-one factors."""

    layout = "out-in"

    def __init__(self, net: DuNet, weights: list[torch.Tensor], a: torch.Tensor):
        if net.kind == "cnn":
            raise ValueError("the convolutional ResNet does not implement the network protocol (its gradients are "
                             "sums over pixels)")
        self.net, self.weights, self.a = net, weights, a

    def _du_forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None) -> Forward:
        return forward(self.net, self.weights if weights is None else weights, self.a, as_images(X))

    def forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None = None):
        from lemmacheck.protocol import ForwardPass

        f = self._du_forward(X, weights)
        patterns = [(self.net.scale(h) * d)[..., 0] for h, d in enumerate(f.dsig, start=1)]
        return ForwardPass([x[..., 0] for x in f.x], [z[..., 0] for z in f.z], patterns, f.out.unsqueeze(-1))

    def backward(self, fwd, V: torch.Tensor, weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """δ_h = V_i ∂u_i/∂z^{(h)}: the scalar output's backward vectors scaled by the output weight V (R, n, 1)."""
        xs = [x.unsqueeze(-1) for x in fwd.outputs]
        zs = [z.unsqueeze(-1) for z in fwd.preacts]
        du = Forward(xs, xs[:-1], zs, [self.net.act.df(z) for z in zs], fwd.out[..., 0])
        deltas = backward(self.net, self.weights if weights is None else weights, self.a, du)
        return [V * d[..., 0] for d in deltas]


def protocol_network(ctx, X: torch.Tensor | None = None) -> ProtocolNet:
    """R networks of the claim's setting (du2018-fc or du2018-resnet) at m, H, c_lambda (default 1/2) and the
    claim's activation (du_kernels.claim_activation: its class member, else args.activation), drawn as the setting's estimators draw them; the ResNet's residual scale
    comes from the datasets X (λ of Assumption 4.1)."""
    kind = KINDS[ctx.network]
    if kind == "cnn":
        from lemmacheck.errors import EstimatorError

        raise EstimatorError(f"{ctx.claim_id}: the convolutional ResNet does not implement the network protocol "
                             "(its gradients are sums over pixels); use the du2018-* quantities")
    if X is None and kind != "fc":
        from lemmacheck.errors import EstimatorError

        raise EstimatorError(f"{ctx.claim_id}: the ResNet's residual scale depends on the datasets: this quantity "
                             "draws none")
    act = du_kernels.claim_activation(ctx)
    d = ctx.i("d") if X is None else X.shape[-1]
    images = None if X is None else as_images(X)
    dn = DuNet("fc", ctx.i("m"), ctx.i("H"), act) if images is None else \
        make_net(kind, images, ctx.i("m"), ctx.i("H"), act, float(ctx.p("c_lambda", 0.5)))
    Ws, a = init(ctx.generator, ctx.replicates, dn, d, ctx.dtype)
    return ProtocolNet(dn, Ws, a)
