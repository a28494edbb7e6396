"""Zou, Cao, Zhou & Gu (2018): deep bias-free ReLU network with a fixed ±1 output vector.

Exactly as the paper (Section 3; catalogue zou2018 §1.3-1.5):
    x_{0,i} = x_i,  z_{l,i} = W_l^T x_{l-1,i},  Σ_{l,i} = Diag(1{z_{l,i} > 0}),  x_{l,i} = Σ_{l,i} z_{l,i},
    ŷ_i = v^T x_{L,i},  v = (+1,…,+1,−1,…,−1) fixed (half and half), no output scaling.
W_l ∈ R^{m_{l-1} × m_l}; every column (so every entry) ~ N(0, 2/m_l): the FAN-OUT variance, m_l being the
number of columns. Only W_1..W_L are trained. Everything is batched over a leading replicate dimension R:
weights (R, m_{l-1}, m_l), inputs (R, n, d), so one call evaluates R independent networks.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from lemmacheck.boundary import on_host
from lemmacheck.linalg import psd_sqrt
from lemmacheck.registry import NETWORKS

NAME = "zou2018"
NETWORKS.register(NAME, "deep bias-free ReLU FNN, W_l entries N(0, 2/m_l) (fan-out), fixed ±1 output v, "
                  "no output scaling (Zou, Cao, Zhou, Gu 2018)")(__name__)


def widths(d: int, m: int, L: int, alternate: bool = False) -> list[int]:
    """[m_0 = d, m_1, …, m_L]; `alternate` gives m, 2m, m, 2m, … (the extreme A3.7 allows: M = 2m)."""
    hidden = [(2 * m if (alternate and l % 2 == 0) else m) for l in range(1, L + 1)]
    if hidden[-1] % 2:
        raise ValueError(f"m_L = {hidden[-1]} must be even: v is half +1, half -1")
    return [d] + hidden


def init(gen: torch.Generator, R: int, dims: list[int], dtype=torch.float64) -> list[torch.Tensor]:
    # scaled in place: the same products, without a second (R, a, b) buffer's allocation and page faults
    return [torch.randn(R, a, b, generator=gen, dtype=dtype).mul_(math.sqrt(2.0 / b)) for a, b in itertools.pairwise(dims)]


def output_vector(m_L: int, dtype=torch.float64) -> torch.Tensor:
    return torch.cat([torch.ones(m_L // 2, dtype=dtype), -torch.ones(m_L // 2, dtype=dtype)])


@dataclass
class Forward:
    x: list[torch.Tensor]  # x[0..L], each (R, n, m_l): layer outputs (x[0] = inputs)
    z: list[torch.Tensor]  # z[1..L] stored at index l-1: pre-activations W_l^T x_{l-1}
    out: torch.Tensor  # (R, n): ŷ

    def mask(self, l: int) -> torch.Tensor:
        """Σ_l diagonal as a 0/1 tensor (R, n, m_l); strict > 0 as in the paper."""
        return (self.z[l - 1] > 0).to(self.z[l - 1].dtype)


def forward(Ws: list[torch.Tensor], X: torch.Tensor, v: torch.Tensor | None = None) -> Forward:
    xs, zs = [X], []
    h = X
    for W in Ws:
        z = h @ W
        h = torch.relu(z)
        zs.append(z)
        xs.append(h)
    if v is None:
        v = output_vector(Ws[-1].shape[-1], X.dtype)
    return Forward(xs, zs, h @ v)


def backward_vectors(Ws: list[torch.Tensor], fwd: Forward, v: torch.Tensor | None = None) -> list[torch.Tensor]:
    """b_l = Σ_l W_{l+1} Σ_{l+1} ⋯ W_L Σ_L v, (R, n, m_l) for l = 1..L (index l-1); ∇_{W_l} ŷ_i = x_{l-1,i} b_{l,i}^T."""
    L = len(Ws)
    if v is None:
        v = output_vector(Ws[-1].shape[-1], fwd.out.dtype)
    b = fwd.mask(L) * v
    bs = [b]
    for l in range(L - 1, 0, -1):
        b = fwd.mask(l) * (b @ Ws[l].transpose(-1, -2))
        bs.append(b)
    return bs[::-1]


def input_gradients(Ws: list[torch.Tensor], bs: list[torch.Tensor]) -> list[torch.Tensor]:
    """u_l = ∂ŷ/∂x_{l-1} = W_l b_l, (R, n, m_{l-1}) for l = 1..L: the vectors of Lemma A.9's sparse suprema."""
    return [b @ W.transpose(-1, -2) for W, b in zip(Ws, bs)]


def input_gradients_of(Ws: list[torch.Tensor], fwd: Forward) -> list[torch.Tensor]:
    """input_gradients(Ws, backward_vectors(Ws, fwd)), the same products bit for bit, each once: u_{l+1} =
    b_{l+1} W_{l+1}^T is the product that b_l = Σ_l u_{l+1} masks, so only u_1 is a product of its own (each W is
    read once, not twice: 0.2 of 2.7 s a shard at m = 1024, L = 8)."""
    b = fwd.mask(len(Ws)) * output_vector(Ws[-1].shape[-1], fwd.out.dtype)
    us = []
    for l in range(len(Ws), 0, -1):
        us.append(b @ Ws[l - 1].transpose(-1, -2))
        if l > 1:
            b = fwd.mask(l - 1) * us[-1]
    return us[::-1]


def logistic(z: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(-z)


def logistic_derivative(z: torch.Tensor) -> torch.Tensor:
    """ℓ'(z) = -1/(1+e^z) for ℓ(z) = log(1+e^{-z}); |ℓ'| ≤ ρ = 1, |ℓ''| ≤ λ = 1/4."""
    return -torch.sigmoid(-z)


def loss_gradients(Ws: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor,
                   batch: torch.Tensor | None = None) -> tuple[list[torch.Tensor], torch.Tensor, Forward]:
    """Closed-form ∇_{W_l} L_S(W) = (1/n) Σ_i ℓ'(y_i ŷ_i) y_i x_{l-1,i} b_{l,i}^T (logistic ℓ).

    `batch` (R, n) 0/1 selects a minibatch (the stochastic gradient G_l averages over it instead).
    Returns (gradients, ℓ'(y ŷ) of shape (R, n), forward pass)."""
    wts, bs, lp, fwd = loss_gradient_factors(Ws, X, y, batch)
    grads = [torch.einsum("rn,rna,rnb->rab", wts, x, b) for x, b in zip(fwd.x[:-1], bs)]
    return grads, lp, fwd


def loss_gradient_factors(Ws: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, batch: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, Forward]:
    """The factors of `loss_gradients`: ∇_{W_l} L_S = (wts ∘ x_{l-1})ᵀ b_l, a sum of n outer products, so norms of
    it need no m×m matrix (linalg.low_rank_spectral_norm). Returns (wts (R, n), [b_1..b_L], ℓ'(y ŷ), forward)."""
    fwd = forward(Ws, X)
    bs = backward_vectors(Ws, fwd)
    lp = logistic_derivative(y * fwd.out)
    wts = lp * y
    if batch is None:
        wts = wts / X.shape[-2]
    else:
        wts = wts * batch / batch.sum(-1, keepdim=True)
    return wts, bs, lp, fwd


def conditional_layer_norms(gen: torch.Generator, X: torch.Tensor, dims: list[int]) -> list[torch.Tensor]:
    """||x_{l,i}|| for l = 0..L at initialisation WITHOUT materialising any W_l (exact in distribution).

    Given x_{l-1,1..n}, the columns of W_l are iid N(0, 2/m_l I), so the rows of W_l^T[x_{l-1,1} … x_{l-1,n}]
    (one per neuron) are iid N(0, (2/m_l) G) with G the n×n Gram matrix of the previous layer. Drawing them
    costs O(n² m_l) instead of O(n m_{l-1} m_l) — and memory O(n m_l) instead of O(m_{l-1} m_l)."""
    norms = [X.norm(dim=-1)]
    G = X @ X.transpose(-1, -2)
    for l, m_l in enumerate(dims[1:], 1):
        # h (R, n, m_l): column j is neuron j's pre-activations at the n inputs, after the ReLU
        _, _, nm, G = _conditional_layer(gen, G, m_l, X.dtype, keep_z=False, norms=True, gram=l < len(dims) - 1)
        norms.append(nm)
    return norms


# On the CPU each layer of the Gaussian-conditioning sampler runs in chunks of replicates of about this many entries
# (replicates x n x m_l, 256 KB), each carried from its Gaussian draws through A E, the ReLU, its norms and the next
# layer's Gram while it is in cache, where passes over the whole layer went through memory at every step.
CHUNK_ENTRIES = 2 ** 15


def _replicates_per_chunk(G: torch.Tensor, m_l: int) -> int:
    """Replicates per chunk of a layer drawn after Grams G (R, n, n): all R (one draw of the whole layer) off the
    host, for batches of other shapes, and where n m_l is not a multiple of 16. torch.randn on the CPU fills each
    call's tensor 16 numbers at a time from its start (Box-Muller within each block of 16 uniforms, the last block
    redrawn when the size is not a multiple of 16), so calls for consecutive chunks of 16 k numbers draw exactly
    what one call for the whole layer draws, and other chunks would not (nor would a GPU's, its Philox offsets
    being per call)."""
    R, n = G.shape[0], G.shape[-1]
    if not on_host(G) or G.dim() != 3 or (n * m_l) % 16:
        return max(R, 1)
    return max(1, CHUNK_ENTRIES // (n * m_l))


def _conditional_layer(gen: torch.Generator, G: torch.Tensor, m_l: int, dtype: torch.dtype, *, keep_z: bool,
                       norms: bool, gram: bool) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None,
                                                         torch.Tensor | None]:
    """One layer of the sampler from the previous layer's Grams G (..., n, n): (z_l if keep_z, x_l = relu(z_l),
    ||x_{l,i}|| if norms, x_l's Grams if gram). The same draws and the same values, bit for bit, as one whole-layer
    pass (torch.randn of (..., n, m_l), A @ E, relu, norm, h @ hᵀ): chunked on the CPU (`_replicates_per_chunk`),
    each chunk's products and norms written into slices of the whole layer's tensors. With one input (n = 1) on the
    host: the 1 x 1 square root is sqrt(max(G, 0)), which eigh's eigenvalue G and eigenvector ±1 give exactly, and
    A E is a product per entry, one rounding as in the matrix product (where batched 1 x 1 products cost 20x more)."""
    one = G.shape[-1] == 1 and on_host(G)
    A = (G.clamp_min(0).sqrt() if one else psd_sqrt(G)) * math.sqrt(2.0 / m_l)
    shape = (*G.shape[:-1], m_l)
    c = _replicates_per_chunk(G, m_l)
    if c >= shape[0]:
        E = torch.randn(*shape, generator=gen, dtype=dtype)
        z = A @ E
        h = torch.relu(z)
        return (z if keep_z else None, h, h.norm(dim=-1) if norms else None,
                h @ h.transpose(-1, -2) if gram else None)
    z = torch.empty(shape, dtype=dtype, device=G.device)
    h = torch.empty_like(z) if keep_z else z
    nm = torch.empty(shape[:-1], dtype=dtype, device=G.device) if norms else None
    Gn = torch.empty(*shape[:-1], shape[-2], dtype=dtype, device=G.device) if gram else None
    for r0 in range(0, shape[0], c):
        r1 = min(shape[0], r0 + c)
        E = torch.randn(r1 - r0, *shape[1:], generator=gen, dtype=dtype)
        zc = (torch.mul if one else torch.matmul)(A[r0:r1], E, out=z[r0:r1])
        hc = torch.clamp_min(zc, 0, out=h[r0:r1]) if keep_z else zc.relu_()  # relu is clamp_min(0)
        if nm is not None:
            torch.linalg.vector_norm(hc, dim=-1, out=nm[r0:r1])
        if Gn is not None:
            torch.matmul(hc, hc.transpose(-1, -2), out=Gn[r0:r1])
    return (z if keep_z else None), h, nm, Gn


# ---------------------------------------------------------------------------------------------------------
# Additions for the full zou2018 claim set (forward statistics without W, losses, training loops).


def conditional_forward(gen: torch.Generator, X: torch.Tensor,
                        dims: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Layer outputs x_0..x_L and pre-activations z_1..z_L at initialisation WITHOUT materialising any W_l.

    Same construction as `conditional_layer_norms` (exact in distribution): given x_{l-1,1..n}, the m_l
    neurons of layer l are iid, and neuron j's pre-activations at the n inputs are N(0, (2/m_l) G) with G the
    Gram matrix of x_{l-1}. The returned tensors are in neuron coordinates, so everything that depends on
    the joint law of (x_{l,i})_{l,i} - norms, distances, ŷ = v^T x_L, near-zero counts |z| <= β, activation
    patterns - has exactly its law under Gaussian initialisation. Returns (xs, zs) with xs[l] (R, n, m_l)
    and zs[l-1] = z_l (R, n, m_l)."""
    xs, zs = [X], []
    G = X @ X.transpose(-1, -2)
    for l, m_l in enumerate(dims[1:], 1):
        z, h, _, G = _conditional_layer(gen, G, m_l, X.dtype, keep_z=True, norms=False, gram=l < len(dims) - 1)
        zs.append(z)
        xs.append(h)
    return xs, zs


def loss_value(Ws: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """L_S(W) = (1/n) Σ_i ℓ(y_i ŷ_i) for the logistic loss, per replicate (R,)."""
    return logistic(y * forward(Ws, X).out).mean(-1)


def margins(Ws: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return y * forward(Ws, X).out


def random_minibatch(gen: torch.Generator, R: int, n: int, B: int, dtype=torch.float64) -> torch.Tensor:
    """(R, n) 0/1 masks of uniform size-B subsets of [n] drawn without replacement (catalogue §1.5)."""
    order = torch.rand(R, n, generator=gen, dtype=torch.float64).argsort(-1)
    mask = torch.zeros(R, n, dtype=dtype)
    mask.scatter_(1, order[:, :B], 1.0)
    return mask


def all_minibatches(n: int, B: int, dtype=torch.float64) -> torch.Tensor:
    """Every size-B subset of [n] as a (C(n,B), n) 0/1 matrix (exact expectations over SGD minibatches)."""
    import itertools

    rows = [[1.0 if i in c else 0.0 for i in range(n)] for c in itertools.combinations(range(n), B)]
    return torch.tensor(rows, dtype=dtype).reshape(-1, n)  # (0, n) when B > n


def per_sample_gradient_norms(Ws: list[torch.Tensor], fwd: Forward,
                              bs: list[torch.Tensor]) -> list[torch.Tensor]:
    """||∇_{W_l} f(x_i)||_F = ||x_{l-1,i}|| ||b_{l,i}|| (rank one, so also the spectral norm), (R, n) per l."""
    return [x.norm(dim=-1) * b.norm(dim=-1) for x, b in zip(fwd.x[:-1], bs)]


def conditional_last_layer(gen: torch.Generator, X: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """x_L only, by the same exact construction as `conditional_forward` (same random draws, same order), keeping one
    layer in memory at a time: for estimators that need many fresh initialisations of a deep network."""
    h, G = X, X @ X.transpose(-1, -2)
    for l, m_l in enumerate(dims[1:], 1):
        _, h, _, G = _conditional_layer(gen, G, m_l, X.dtype, keep_z=False, norms=False, gram=l < len(dims) - 1)
    return h


# ---------------------------------------------------------------------------------------------------------
# The network as a lemmacheck.protocol.Network, so the generic quantities run on this setting.


class ProtocolNet:
    """Zou et al.'s network through `forward` and `backward_vectors` above: x_0 = X, z_l = x_{l-1} W_l (layout
    "in-out"), patterns 1{z_l > 0}, f = vᵀ x_L as a (R, n, 1) output."""

    layout = "in-out"

    def __init__(self, weights: list[torch.Tensor]):
        self.weights = weights

    def forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None = None):
        from lemmacheck.protocol import ForwardPass

        fwd = forward(self.weights if weights is None else weights, X)
        return ForwardPass(fwd.x, fwd.z, [fwd.mask(l) for l in range(1, len(fwd.z) + 1)], fwd.out.unsqueeze(-1))

    def backward(self, fwd, V: torch.Tensor, weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """δ_l = V_i b_{l,i}: the scalar output's backward vectors scaled by the output weight V (R, n, 1)."""
        bs = backward_vectors(self.weights if weights is None else weights, Forward(fwd.outputs, fwd.preacts,
                                                                                   fwd.out[..., 0]))
        return [V * b for b in bs]


def protocol_network(ctx, X: torch.Tensor | None = None) -> ProtocolNet:
    """R networks at the claim's m, L, d (or dm = d/m) and `alternate`, drawn as the setting's estimators draw them
    (the architecture does not depend on the datasets X)."""
    d = ctx.i("d") if "d" in ctx.params else round(ctx.p("dm") * ctx.p("m"))
    dims = widths(d, ctx.i("m"), ctx.i("L"), bool(ctx.i("alternate", 0)))
    return ProtocolNet([W.to(ctx.device) for W in init(ctx.generator, ctx.replicates, dims, ctx.dtype)])
