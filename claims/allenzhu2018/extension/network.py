"""Allen-Zhu, Li & Song (2018): Elman ReLU RNN with only the recurrent weight W trained.

Exactly as the paper (§2.1-2.2, Definitions 2.2-2.3, Fact 2.5; catalogue allenzhu2018 §1.1-1.2), for input
sequences (x_{i,1}, …, x_{i,L}) ∈ (R^{d_x})^L, i ∈ [n]:
    h_{i,0} = 0,   g_{i,ℓ} = W h_{i,ℓ-1} + A x_{i,ℓ},   h_{i,ℓ} = φ(g_{i,ℓ}),   y_{i,ℓ} = B h_{i,ℓ},   ℓ = 1..L,
    φ = ReLU,  D_{i,ℓ} = Diag(1{(g_{i,ℓ})_k ≥ 0})  (ties count as 1), so h_{i,ℓ} = D_{i,ℓ} g_{i,ℓ}.
Random initialisation (Def 2.3; the paper's N(μ, σ) has σ = VARIANCE): W ∈ R^{m×m} and A ∈ R^{m×d_x} entries iid
N(0, 2/m) (2/fan-out for A, 2/fan-in = 2/fan-out for the square W), B ∈ R^{d×m} entries iid N(0, 1/d) (1/fan-out).
Only W is trained; A and B stay at their random initialisation (footnote 4); there are no biases (the last
input coordinate 1/√2 of the first token plays a first-layer bias N(0, 1/m), footnote 5) and no output scaling.
Inputs (§2.1): ||x_{i,ℓ}|| ≤ 1; ||x_{i,1}|| = 1 with last coordinate [x_{i,1}]_{d_x} = 1/√2; Assumption 2.1:
||x_{i,1} − x_{j,1}|| ≥ δ for i ≠ j. The `rnn-sequences` generator below draws exactly this form.
Loss (§2.2): f(W) = Σ_i f_i(W), f_i(W) = ½ Σ_{ℓ=2}^{L} ||loss_{i,ℓ}||², loss_{i,ℓ} = B h_{i,ℓ} − y*_{i,ℓ}: a sum over
sequences and over positions ℓ ≥ 2 (B h_{i,1} = Bφ(A x_{i,1}) does not depend on W), not a mean.
Gradient (Fact 2.5): ∇f(W) = Σ_i Σ_{a=2}^{L} Σ_{ℓ=1}^{a-1} D_{i,ℓ+1} Back_{i,ℓ+1→a}ᵀ loss_{i,a} h_{i,ℓ}ᵀ with
Back_{i,ℓ→ℓ} = B and Back_{i,ℓ→a} = B D_{i,a} W ⋯ D_{i,ℓ+1} W; computed by the equivalent adjoint recursion
r_{i,L} = Bᵀ loss_{i,L}, r_{i,ℓ} = 1{ℓ≥2} Bᵀ loss_{i,ℓ} + Wᵀ D_{i,ℓ+1} r_{i,ℓ+1}, ∇f = Σ_{i,ℓ} D_{i,ℓ+1} r_{i,ℓ+1} h_{i,ℓ}ᵀ
(u_{i,ℓ} = r_{i,ℓ+1} of Def E.1). Given loss vectors fixed in advance it is the paper's "fake gradient" ∇̂f.

Batched over a leading replicate dimension R: W (R, m, m), A (R, m, d_x), B (R, d, m), inputs X (R, n, L, d_x),
labels (R, n, L, d) (position 1 is ignored). Per-position tensors are indexed as the paper: h and g are
(R, n, L+1, m) with position ℓ at index ℓ; index 0 holds h_0 = 0 and, for g, zero padding (g_0 is undefined).
Weights are in the paper's orientation (g = W h + A x), so a step is h @ Wᵀ. float64 by default; randomness only
from the generator passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lemmacheck.errors import EstimatorError
from lemmacheck.inputs import unit_sphere
from lemmacheck.registry import INPUTS, NETWORKS

NAME = "allenzhu2018"
NETWORKS.register(NAME, "Elman ReLU RNN h_l = relu(W h_{l-1} + A x_l), y_l = B h_l: W, A ~ N(0,2/m), "
                  "B ~ N(0,1/d), only W trained, loss summed over positions l >= 2 (Allen-Zhu, Li, Song 2018)"
                  )(__name__)


def left_mul(M: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """M (R, a, b) applied to every one of n stacks Z (R, n, b, k) -> (R, n, a, k), as ONE batched GEMM."""
    R, n, b, k = Z.shape
    out = M @ Z.transpose(1, 2).reshape(R, b, n * k)
    return out.reshape(R, M.shape[-2], n, k).transpose(1, 2)


def right_mul(Z: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """Rows Z (R, n, k, b) times M (R, b, a) -> (R, n, k, a), as ONE batched GEMM."""
    R, n, k, b = Z.shape
    return (Z.reshape(R, n * k, b) @ M).reshape(R, n, k, M.shape[-1])


def init(gen: torch.Generator, R: int, m: int, dx: int, d: int,
         dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Definition 2.3: (W, A, B), drawn in that order, with variances 2/m, 2/m, 1/d."""
    # scaled in place: the same products as `randn(...) * s`, without a second (R, m, m) buffer
    W = torch.randn(R, m, m, generator=gen, dtype=dtype).mul_(math.sqrt(2.0 / m))
    A = torch.randn(R, m, dx, generator=gen, dtype=dtype).mul_(math.sqrt(2.0 / m))
    B = torch.randn(R, d, m, generator=gen, dtype=dtype).mul_(math.sqrt(1.0 / d))
    return W, A, B


@dataclass
class Forward:
    h: torch.Tensor  # (R, n, L+1, m): h[:, :, ℓ] = h_{i,ℓ}, h[:, :, 0] = 0
    g: torch.Tensor  # (R, n, L+1, m): g[:, :, ℓ] = g_{i,ℓ} for ℓ ≥ 1; g[:, :, 0] = 0 is padding
    y: torch.Tensor  # (R, n, L+1, d): y[:, :, ℓ] = B h_{i,ℓ}

    @property
    def L(self) -> int:
        return self.h.shape[-2] - 1

    def mask(self, l: int | None = None) -> torch.Tensor:
        """D_{i,ℓ} diagonal as 0/1, (R, n, m) for one ℓ ≥ 1, or (R, n, L+1, m) for all (index 0 meaningless)."""
        g = self.g if l is None else self.g[:, :, l]
        return (g >= 0).to(g.dtype)


def forward(W: torch.Tensor, A: torch.Tensor, B: torch.Tensor, X: torch.Tensor) -> Forward:
    R, n, L, _ = X.shape
    m = W.shape[-1]
    AX = X @ A.transpose(-1, -2).unsqueeze(1)  # (R, n, L, m): A x_{i,ℓ}
    h = torch.zeros(R, n, m, dtype=W.dtype, device=W.device)
    hs, gs = [h], [torch.zeros_like(h)]
    Wt = W.transpose(-1, -2)
    for l in range(L):
        # h_0 = 0: g_1 = A x_1 exactly (the product with W adds zeros; one pass over W less), except under autograd,
        # where a search's target at L = 1 must still depend on W (its gradient there is 0)
        g = AX[:, :, 0] if l == 0 and not W.requires_grad else h @ Wt + AX[:, :, l]
        h = torch.relu(g)
        gs.append(g)
        hs.append(h)
    H = torch.stack(hs, dim=2)
    return Forward(H, torch.stack(gs, dim=2), H @ B.transpose(-1, -2).unsqueeze(1))


def _positions_from_2(L: int, dtype: torch.dtype) -> torch.Tensor:
    """(L+1, 1) mask keeping positions ℓ = 2..L."""
    w = torch.ones(L + 1, 1, dtype=dtype)
    w[:2] = 0
    return w


def lazy_forward(gen: torch.Generator, X: torch.Tensor, m: int, d: int = 1) -> Forward:
    """The forward pass at random initialisation WITHOUT materialising W (exact in law): widths where R m×m
    matrices would not fit in memory.

    The paper's footnote-13 argument made constructive: keep an orthonormal basis Q of the vectors W has been
    applied to (the h_{i,ℓ}) and the images W Q. A new vector v = Q Qᵀ v + ρ q (q ⊥ Q, ||q|| = 1) has
    W v = (W Q)(Qᵀ v) + ρ W q, and W q ~ N(0, (2/m) I) is independent of A and W Q (iid Gaussian entries: W's action
    on orthonormal directions gives independent N(0, (2/m) I) images), while q is a function of A and W Q only.
    Cost O(R m n L) per product with W instead of O(R m²). A (R, m, d_x) and B (R, d, m) are small and drawn in
    full (A first, B last). Orthogonalisation is classical Gram-Schmidt applied twice; a residual below 1e-12 ||v|| adds a zero
    column (exactly the GS convention's arbitrary direction, multiplied by ρ = 0)."""
    R, n, L, dx = X.shape
    dtype = X.dtype
    s = math.sqrt(2.0 / m)
    A = torch.randn(R, m, dx, generator=gen, dtype=dtype) * s
    AX = X @ A.transpose(-1, -2).unsqueeze(1)
    K = n * max(L - 1, 0)  # W is applied to h_{i,ℓ} for ℓ = 1..L-1 only
    Q = torch.empty(R, K, m, dtype=dtype)  # rows: the orthonormal directions q_k (only rows < k are ever read)
    WQ = torch.empty(R, K, m, dtype=dtype)  # rows: W q_k
    k = 0
    h = torch.zeros(R, n, m, dtype=dtype)
    hs, gs = [h], [torch.zeros_like(h)]
    for l in range(L):
        if l == 0:  # h_{i,0} = 0 needs no W
            Wh = torch.zeros(R, n, m, dtype=dtype)
        else:
            # The n vectors of this step in one block: their projections onto the k0 directions of earlier steps
            # as batched GEMMs (Q read 4 times per step, not 4n), then, one by one, onto this step's new
            # directions. The same projections and draws as taking the vectors one at a time against all of Q
            # (tests/references.py: lazy_forward_sequential), up to rounding.
            k0 = k
            Qo, WQo = Q[:, :k0], WQ[:, :k0]
            V = h
            C = V @ Qo.transpose(-1, -2)  # (R, n, k0)
            Rs = V - C @ Qo
            C2 = Rs @ Qo.transpose(-1, -2)
            Rs = Rs - C2 @ Qo
            C = C + C2
            Wh = C @ WQo  # (R, n, m)
            for i in range(n):
                v = V[:, i]
                r = Rs[:, i]
                if i > 0:
                    Qb, WQb = Q[:, k0:k], WQ[:, k0:k]
                    c = (Qb @ r.unsqueeze(-1)).squeeze(-1)
                    r = r - (c.unsqueeze(-2) @ Qb).squeeze(-2)
                    c2 = (Qb @ r.unsqueeze(-1)).squeeze(-1)
                    r = r - (c2.unsqueeze(-2) @ Qb).squeeze(-2)
                    Wh[:, i] += ((c + c2).unsqueeze(-2) @ WQb).squeeze(-2)
                rho = r.norm(dim=-1, keepdim=True)
                keep = rho > 1e-12 * v.norm(dim=-1, keepdim=True)
                rho = torch.where(keep, rho, torch.zeros_like(rho))
                w = torch.randn(R, m, generator=gen, dtype=dtype) * s
                Wh[:, i] += rho * w
                Q[:, k] = torch.where(keep, r / rho.clamp_min(1e-300), torch.zeros_like(r))
                WQ[:, k] = w * keep
                k += 1
        g = Wh + AX[:, :, l]
        h = torch.relu(g)
        gs.append(g)
        hs.append(h)
    B = torch.randn(R, d, m, generator=gen, dtype=dtype) * math.sqrt(1.0 / d)
    H = torch.stack(hs, dim=2)
    return Forward(H, torch.stack(gs, dim=2), H @ B.transpose(-1, -2).unsqueeze(1))


def losses(fwd: Forward, Ystar: torch.Tensor) -> torch.Tensor:
    """loss_{i,ℓ} = B h_{i,ℓ} − y*_{i,ℓ} as (R, n, L+1, d), zero at positions 0 and 1 (they do not enter f)."""
    out = fwd.y - torch.cat([torch.zeros_like(Ystar[:, :, :1]), Ystar], dim=2)
    return out * _positions_from_2(fwd.L, out.dtype)


def objective(fwd: Forward, Ystar: torch.Tensor) -> torch.Tensor:
    """f(W) = Σ_i ½ Σ_{ℓ=2}^{L} ||B h_{i,ℓ} − y*_{i,ℓ}||², per replicate (R,)."""
    return 0.5 * (losses(fwd, Ystar) ** 2).sum(dim=(-1, -2, -3))


def adjoints(W: torch.Tensor, B: torch.Tensor, fwd: Forward, lossv: torch.Tensor) -> torch.Tensor:
    """r_{i,ℓ} (R, n, L+1, m) for given loss vectors (R, n, L+1, d) whose positions 0, 1 are ignored.

    r_L = Bᵀ loss_L;  r_ℓ = 1{ℓ≥2} Bᵀ loss_ℓ + Wᵀ D_{ℓ+1} r_{ℓ+1}  (ℓ = L-1..1; r_0 is left at 0)."""
    L = fwd.L
    lossv = lossv * _positions_from_2(L, lossv.dtype)
    Bl = lossv @ B.unsqueeze(1)  # (R, n, L+1, m): Bᵀ loss_{i,ℓ}
    D = fwd.mask()
    r = Bl[:, :, L]
    rs = [r]
    for l in range(L - 1, 0, -1):
        r = Bl[:, :, l] + (D[:, :, l + 1] * r) @ W
        rs.append(r)
    rs.append(torch.zeros_like(r))
    return torch.stack(rs[::-1], dim=2)


def gradient_from_losses(W: torch.Tensor, B: torch.Tensor, fwd: Forward, lossv: torch.Tensor) -> torch.Tensor:
    """Σ_i Σ_{ℓ=1}^{L-1} D_{i,ℓ+1} r_{i,ℓ+1} h_{i,ℓ}ᵀ (R, m, m): ∇f (Fact 2.5) for the actual losses, the fake
    gradient ∇̂f of Def E.1 for loss vectors fixed in advance."""
    r = adjoints(W, B, fwd, lossv)
    q = fwd.mask()[:, :, 2:] * r[:, :, 2:]  # D_{ℓ+1} r_{ℓ+1} for ℓ+1 = 2..L
    return torch.einsum("rnla,rnlb->rab", q, fwd.h[:, :, 1:-1])


def per_sample_gradients(W: torch.Tensor, B: torch.Tensor, fwd: Forward, lossv: torch.Tensor) -> torch.Tensor:
    """∇f_i(W) for every i, (R, n, m, m)."""
    r = adjoints(W, B, fwd, lossv)
    q = fwd.mask()[:, :, 2:] * r[:, :, 2:]
    return torch.einsum("rnla,rnlb->rnab", q, fwd.h[:, :, 1:-1])


def loss_gradient(W: torch.Tensor, A: torch.Tensor, B: torch.Tensor, X: torch.Tensor,
                  Ystar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Forward]:
    """Closed-form (∇f(W) (R, m, m), f(W) (R,), forward pass)."""
    fwd = forward(W, A, B, X)
    lv = losses(fwd, Ystar)
    return gradient_from_losses(W, B, fwd, lv), 0.5 * (lv ** 2).sum(dim=(-1, -2, -3)), fwd


def jvp(W: torch.Tensor, B: torch.Tensor, fwd: Forward, G: torch.Tensor) -> torch.Tensor:
    """Directional derivative of the outputs along a change G of W: dy (R, n, L+1, d).

    dh_0 = 0,  dh_ℓ = D_ℓ (W dh_{ℓ-1} + G h_{ℓ-1}),  dy_ℓ = B dh_ℓ."""
    D = fwd.mask()
    dh = torch.zeros_like(fwd.h[:, :, 0])
    out = [dh]
    for l in range(1, fwd.L + 1):
        dh = D[:, :, l] * (dh @ W.transpose(-1, -2) + fwd.h[:, :, l - 1] @ G.transpose(-1, -2))
        out.append(dh)
    return torch.stack(out, dim=2) @ B.transpose(-1, -2).unsqueeze(1)


def output_jacobian_factors(W: torch.Tensor, B: torch.Tensor, fwd: Forward) -> torch.Tensor:
    """p_{i,a,c,ℓ} = D_{i,ℓ+1} Back_{i,ℓ+1→a}ᵀ e_c as (R, n, L-1, L-1, d, m): axis 2 is a = 2..L, axis 3 is ℓ = 1..L-1
    (zero unless ℓ < a). Then ∂y_{i,a,c}/∂W = Σ_ℓ p_{i,a,c,ℓ} h_{i,ℓ}ᵀ (catalogue S4)."""
    R, n = fwd.h.shape[:2]
    L, m, d = fwd.L, W.shape[-1], B.shape[-2]
    D = fwd.mask()
    P = torch.zeros(R, n, L - 1, L - 1, d, m, dtype=W.dtype, device=W.device)
    Bexp = B.unsqueeze(1)  # (R, 1, d, m): rows are e_cᵀ B
    for a in range(2, L + 1):
        p = D[:, :, a].unsqueeze(2) * Bexp  # ℓ = a-1: D_{a} Bᵀ e_c, stored as rows (R, n, d, m)
        P[:, :, a - 2, a - 2] = p
        for l in range(a - 2, 0, -1):  # p_ℓ = D_{ℓ+1} Wᵀ p_{ℓ+1}
            p = D[:, :, l + 1].unsqueeze(2) * right_mul(p, W)
            P[:, :, a - 2, l - 1] = p
    return P


def ntk_gram(W: torch.Tensor, B: torch.Tensor, fwd: Forward) -> torch.Tensor:
    """K = J Jᵀ for the outputs {y_{i,a,c}: i ∈ [n], a = 2..L, c ∈ [d]} w.r.t. vec(W): (R, N, N), N = n(L-1)d,
    ordered (i, a, c). ∇f = Jᵀ loss and f = ½||loss||², so inf over labels of ||∇f||_F²/f is 2 λ_min(K)."""
    P = output_jacobian_factors(W, B, fwd)  # (R, n, A, Lh, d, m)
    R, n, La, Lh, d, m = P.shape
    Hs = fwd.h[:, :, 1:-1]  # (R, n, Lh, m): h_{i,ℓ}, ℓ = 1..L-1
    HH = torch.einsum("rixm,rjym->rixjy", Hs, Hs)
    Pf = P.reshape(R, n * La * Lh * d, m)
    PP = (Pf @ Pf.transpose(-1, -2)).reshape(R, n, La, Lh, d, n, La, Lh, d)
    K = torch.einsum("riaxcjbye,rixjy->riacjbe", PP, HH)
    return K.reshape(R, n * La * d, n * La * d)


def segment_norms(W: torch.Tensor, fwd: Forward, leading_w: bool = False) -> torch.Tensor:
    """||∏_{ℓ=ℓ2}^{ℓ1} D_{i,ℓ} W||_2 = ||D_{ℓ2} W ⋯ D_{ℓ1} W||_2 for all L ≥ ℓ2 ≥ ℓ1 ≥ 1 (Lemma B.11), exact
    singular values; `leading_w` multiplies by W on the left, the form of (4.4). Returns (R, n, L, L) indexed
    [ℓ1-1, ℓ2-1] (NaN where ℓ2 < ℓ1)."""
    R, n = fwd.h.shape[:2]
    L = fwd.L
    D = fwd.mask()
    out = torch.full((R, n, L, L), float("nan"), dtype=W.dtype)
    for l1 in range(1, L + 1):
        P = D[:, :, l1].unsqueeze(-1) * W.unsqueeze(1)  # D_{ℓ1} W, (R, n, m, m)
        for l2 in range(l1, L + 1):
            if l2 > l1:
                P = D[:, :, l2].unsqueeze(-1) * left_mul(W, P)
            M = left_mul(W, P) if leading_w else P
            out[:, :, l1 - 1, l2 - 1] = torch.linalg.matrix_norm(M, ord=2)
    return out


def backward_segment(W: torch.Tensor, B: torch.Tensor, fwd: Forward, l1: int, l2: int) -> torch.Tensor:
    """B ∏_{ℓ=ℓ2}^{ℓ1} D_{i,ℓ} W = B D_{ℓ2} W ⋯ D_{ℓ1} W as (R, n, d, m) (Lemma B.17 / Cor. B.18-B.19)."""
    D = fwd.mask()
    M = B.unsqueeze(1).expand(-1, fwd.h.shape[1], -1, -1)
    for l in range(l2, l1 - 1, -1):
        M = right_mul(M * D[:, :, l].unsqueeze(-2), W)
    return M


def fresh_norms(fwd: Forward) -> torch.Tensor:
    """||(I − U_ℓ U_ℓᵀ) h_{i,ℓ+1}|| for ℓ = 0..L-1, (R, n, L) (Lemma B.6), U_ℓ = GS(h_{1,1}, …, h_{n,1}, …, h_{n,ℓ}).

    U_ℓ is taken from a Householder QR of the nℓ columns (orthonormal, spanning them; where a Gram-Schmidt residual
    vanishes the paper takes an arbitrary orthogonal unit vector, as QR does). Needs n(L-1) <= m (Definition B.1:
    U_{L-1} is m x n(L-1) column-orthonormal); at equality U_{L-1} is square and the last fresh norm is 0."""
    R, n, _, m = fwd.h.shape
    L = fwd.L
    if n * (L - 1) > m:
        raise EstimatorError(f"fresh norms need n(L-1) <= m (Definition B.1), got n={n}, L={L}, m={m}")
    out = torch.empty(R, n, L, dtype=fwd.h.dtype)
    out[:, :, 0] = fwd.h[:, :, 1].norm(dim=-1)
    for l in range(1, L):
        M = fwd.h[:, :, 1:l + 1].transpose(1, 2).reshape(R, l * n, m).transpose(-1, -2)  # columns ordered (ℓ, i)
        Q, _ = torch.linalg.qr(M)
        v = fwd.h[:, :, l + 1]
        out[:, :, l] = (v - (v @ Q) @ Q.transpose(-1, -2)).norm(dim=-1)
    return out


# ---- inputs: the paper's normalised sequences ----

TAILS = ("random", "zero", "identical", "repeat")


@INPUTS.register(
    "rnn-sequences",
    "n sequences of L tokens in R^dx in the form of Allen-Zhu et al. 2018 §2.1: x_{i,1} = (u_i/√2, 1/√2) with u_i "
    "on S^{dx-2} (unit norm, last coordinate 1/√2, ||x_{i,1} − x_{j,1}|| ≥ separation), later tokens unit/zero/shared",
    fields={"n": "expr", "L": "expr", "dx": "expr", "separation": "expr",
            "geometry": ("random", "close-pair", "clustered", "antipodal-pairs"), "tail": TAILS},
)
def rnn_sequences(gen: torch.Generator, R: int, *, n: int, L: int | None = None, dx: int | None = None,
                  d: int | None = None, separation: float = 0.0, geometry: str = "random", tail: str = "random",
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(R, n, L, dx). `d` (the output dimension, which Context passes by default) is ignored: token dimension is dx.

    First tokens: x_{i,1} = (u_i/√2, 1/√2) with u_i ∈ S^{dx-2} drawn by the unit-sphere generator at separation
    √2·δ, so ||x_{i,1} − x_{j,1}|| = ||u_i − u_j||/√2 ≥ δ (Assumption 2.1; `close-pair` plants a pair at exactly δ).
    Later tokens (‖x‖ ≤ 1 is all the paper asks): `random` iid uniform on S^{dx-1}; `zero` x = 0 (catalogue S10b);
    `identical` one random unit token per position shared by all sequences (S10c, footnote 10); `repeat` x_{i,ℓ} = x_{i,1}."""
    if L is None or dx is None:
        raise EstimatorError("rnn-sequences needs `L` and `dx` in the claim's inputs table")
    n, L, dx = int(n), int(L), int(dx)
    if dx < 2:
        raise EstimatorError(f"rnn-sequences needs dx >= 2 (the last coordinate is the 1/sqrt(2) bias), got {dx}")
    if tail not in TAILS:
        raise EstimatorError(f"unknown tail '{tail}', one of {TAILS}")
    u = unit_sphere(gen, R, n=n, d=dx - 1, separation=math.sqrt(2.0) * float(separation), geometry=geometry,
                    dtype=dtype)
    first = torch.cat([u, torch.ones(R, n, 1, dtype=dtype)], dim=-1) / math.sqrt(2.0)
    X = torch.zeros(R, n, L, dx, dtype=dtype)
    X[:, :, 0] = first
    if L > 1:
        if tail == "random":
            t = torch.randn(R, n, L - 1, dx, generator=gen, dtype=dtype)
            X[:, :, 1:] = t / t.norm(dim=-1, keepdim=True)
        elif tail == "identical":
            t = torch.randn(R, 1, L - 1, dx, generator=gen, dtype=dtype)
            X[:, :, 1:] = t / t.norm(dim=-1, keepdim=True)
        elif tail == "repeat":
            X[:, :, 1:] = first.unsqueeze(2)
    return X


def label_sequences(gen: torch.Generator, R: int, n: int, L: int, d: int, dtype: torch.dtype = torch.float64,
                    kind: str = "gaussian") -> torch.Tensor:
    """Labels y*_{i,ℓ} (R, n, L, d): iid N(0, 1) entries (catalogue S10), ±1 (`rademacher`) or 0 (`zero`)."""
    if kind == "zero":
        return torch.zeros(R, n, L, d, dtype=dtype)
    if kind == "rademacher":
        return torch.randint(0, 2, (R, n, L, d), generator=gen).to(dtype) * 2 - 1
    if kind == "gaussian":
        return torch.randn(R, n, L, d, generator=gen, dtype=dtype)
    raise EstimatorError(f"unknown label kind '{kind}' (gaussian, rademacher, zero)")
