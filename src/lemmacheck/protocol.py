"""The network protocol: what a network gives the generic quantities (`lemmacheck.generic`).

A protocol network is a stack of L trained weight matrices W_1..W_L between a fixed map of the inputs and a
fixed output head, batched over a leading replicate dimension R (one call evaluates R independent networks):

    x_0      what W_1 reads: the inputs, or the output of a fixed (untrained) input layer
    z_l      = x_{l-1} W_l          (layout "in-out": W_l is (R, m_{l-1}, m_l))
             = W_l x_{l-1}          (layout "out-in": W_l is (R, m_l, m_{l-1}), the orientation g = W h)
    x_l      = σ(z_l) elementwise,  with pattern σ'(z_l) (0/1 for ReLU, the two slopes for a leaky ReLU)
    f(x)     = head(x_L) ∈ R^k      (k = 1 for a scalar output; the head is fixed, e.g. a ±1 vector; a trained
                                     output layer is the last W_l instead, with σ the identity and head = identity)

The network implements `Network`: its trained `weights`, its `layout`, `forward` (per-layer outputs,
pre-activations, activation patterns and outputs for a batch of datasets, at its own weights or at given ones, so a
search can move them) and `backward` (the backpropagated vectors δ_l = ∂⟨V_i, f(x_i)⟩/∂z_{l,i} for given output
weights V). Everything else follows from these in closed form: the gradient of ⟨V_i, f(x_i)⟩ with respect to W_l
is the rank-one δ_{l,i} x_{l-1,i}ᵀ (or its transpose), so gradient norms, per-sample gradients and the neural
tangent kernel need no m×m matrix (`gradient_factors`, `ntk_gram`).

A network whose layers are such a plain stack can use `FeedForward` (give it weights, σ, σ' and the head) or
`backprop` (the backward pass from the patterns). The design follows the layer-combinator view of neural-tangents'
stax (a network as the data its kernel and gradient computations need), reduced to what lemmas about deep
fully connected networks quantify over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch

from .errors import EstimatorError

LAYOUTS = ("in-out", "out-in")


@dataclass
class ForwardPass:
    """One forward pass of R networks on R datasets of n inputs.

    outputs:  [x_0, x_1, …, x_L], each (R, n, m_l); x_0 is what W_1 reads.
    preacts:  [z_1, …, z_L] (index l-1), each (R, n, m_l).
    patterns: [σ'(z_1), …, σ'(z_L)] (index l-1), each (R, n, m_l): the diagonal of the activation pattern D_l.
    out:      (R, n, k): the network's outputs (k = 1 for a scalar output).
    """

    outputs: list[torch.Tensor]
    preacts: list[torch.Tensor]
    patterns: list[torch.Tensor]
    out: torch.Tensor

    @property
    def depth(self) -> int:
        return len(self.preacts)


@runtime_checkable
class Network(Protocol):
    """What a setting's `protocol_network(ctx)` returns (see `lemmacheck.generic.protocol_network`)."""

    weights: list[torch.Tensor]  # trained W_1..W_L, each (R, a_l, b_l) in the network's layout
    layout: str  # "in-out" (z_l = x_{l-1} W_l) or "out-in" (z_l = W_l x_{l-1})

    def forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None = None) -> ForwardPass:
        """The forward pass on inputs X (R, n, d) at `weights` (default: the network's own)."""
        ...

    def backward(self, fwd: ForwardPass, V: torch.Tensor,
                 weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """[δ_1, …, δ_L], δ_l = ∂ Σ_i ⟨V_i, f(x_i)⟩ / ∂z_{l,i} of shape (R, n, m_l), for V (R, n, k), at the weights
        that produced `fwd`."""
        ...


def backprop(weights: list[torch.Tensor], patterns: list[torch.Tensor], top: torch.Tensor,
             layout: str) -> list[torch.Tensor]:
    """The backward pass of a plain stack: δ_L = σ'(z_L) ∘ top, δ_l = σ'(z_l) ∘ (W_{l+1} δ_{l+1}), where top
    (R, n, m_L) = ∂ Σ_i ⟨V_i, f(x_i)⟩ / ∂x_{L,i} is the head's backward vector."""
    _check_layout(layout)
    d = patterns[-1] * top
    deltas = [d]
    for l in range(len(weights) - 1, 0, -1):  # W_{l+1} is weights[l]
        W = weights[l]
        d = patterns[l - 1] * (d @ (W.transpose(-1, -2) if layout == "in-out" else W))
        deltas.append(d)
    return deltas[::-1]


def gradient_factors(net: Network, fwd: ForwardPass,
                     deltas: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """[(P_l, Q_l)] with ∂ Σ_i ⟨V_i, f(x_i)⟩ / ∂W_l = P_lᵀ Q_l = Σ_i p_{l,i} q_{l,i}ᵀ (P_l (R, n, a_l), Q_l (R, n, b_l)):
    (x_{l-1}, δ_l) in layout "in-out", (δ_l, x_{l-1}) in "out-in". Weight each row i to weight the samples."""
    _check_layout(net.layout)
    if net.layout == "in-out":
        return [(x, d) for x, d in zip(fwd.outputs[:-1], deltas)]
    return [(d, x) for x, d in zip(fwd.outputs[:-1], deltas)]


def dense_gradients(factors: list[tuple[torch.Tensor, torch.Tensor]]) -> list[torch.Tensor]:
    """The gradients P_lᵀ Q_l as (R, a_l, b_l) matrices (for tests and small widths; norms need not form them)."""
    return [P.transpose(-1, -2) @ Q for P, Q in factors]


def frobenius_from_factors(P: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """||Pᵀ Q||_F per replicate from the n×n Grams: ||Σ_i p_i q_iᵀ||_F² = Σ_{i,j} ⟨p_i, p_j⟩ ⟨q_i, q_j⟩."""
    s = ((P @ P.transpose(-1, -2)) * (Q @ Q.transpose(-1, -2))).sum(dim=(-1, -2))
    return s.clamp_min(0).sqrt()


def ntk_gram(net: Network, X: torch.Tensor, weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The neural tangent kernel per trained layer: K_l[(i,a),(j,b)] = ⟨∂f_a(x_i)/∂W_l, ∂f_b(x_j)/∂W_l⟩ as
    (R, n k, n k) matrices (row (i, a) at i k + a); the NTK of the trained weights is Σ_l K_l. Each gradient is
    rank one, so K_l = ⟨x_{l-1,i}, x_{l-1,j}⟩ ⟨δ_{l,i}(e_a), δ_{l,j}(e_b)⟩ exactly, without forming it."""
    fwd = net.forward(X, weights)
    R, n, k = fwd.out.shape
    eye = torch.eye(k, dtype=fwd.out.dtype, device=fwd.out.device)
    per_out = [net.backward(fwd, eye[a].expand(R, n, k), weights) for a in range(k)]  # [a][l-1]: (R, n, m_l)
    Ks = []
    for l in range(1, fwd.depth + 1):
        H = fwd.outputs[l - 1] @ fwd.outputs[l - 1].transpose(-1, -2)  # (R, n, n)
        D = torch.stack([per_out[a][l - 1] for a in range(k)], 2)  # (R, n, k, m_l)
        Z = torch.einsum("riam,rjbm->riajb", D, D)
        Ks.append((Z * H[:, :, None, :, None]).reshape(R, n * k, n * k))
    return Ks


def check_forward(fwd: ForwardPass, X: torch.Tensor, where: str) -> None:
    """Shapes a generic quantity relies on; a network that breaks them is named in the error."""
    R, n = X.shape[:2]
    L = len(fwd.preacts)
    problems = []
    if len(fwd.outputs) != L + 1:
        problems.append(f"{len(fwd.outputs)} outputs for {L} pre-activations (expected L + 1, x_0 first)")
    if len(fwd.patterns) != L:
        problems.append(f"{len(fwd.patterns)} patterns for {L} pre-activations")
    if fwd.out.dim() != 3 or tuple(fwd.out.shape[:2]) != (R, n):
        problems.append(f"out has shape {tuple(fwd.out.shape)}, expected (R, n, k) = ({R}, {n}, k)")
    for name, ts in (("outputs", fwd.outputs), ("preacts", fwd.preacts), ("patterns", fwd.patterns)):
        for j, t in enumerate(ts):
            if t.dim() != 3 or tuple(t.shape[:2]) != (R, n):
                problems.append(f"{name}[{j}] has shape {tuple(t.shape)}, expected ({R}, {n}, m)")
    if problems:
        raise EstimatorError(f"{where}: the network's forward pass breaks the protocol: " + "; ".join(problems))


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise EstimatorError(f"network layout {layout!r}: one of {', '.join(LAYOUTS)}")


@dataclass
class FeedForward:
    """A plain protocol network: x_0 = X (or X M for a fixed input map M (R, d, m_0)), z_l = x_{l-1} W_l,
    x_l = σ(z_l), f = x_L H for a fixed head H (R, m_L, k) (or a fixed vector v (m_L,) for a scalar output).

    `activation` and `derivative` act elementwise (σ'(0) is the derivative's choice, e.g. 0 for ReLU with z > 0)."""

    weights: list[torch.Tensor]
    activation: Callable[[torch.Tensor], torch.Tensor]
    derivative: Callable[[torch.Tensor], torch.Tensor]
    head: torch.Tensor
    input_map: torch.Tensor | None = None
    layout: str = field(default="in-out")

    def __post_init__(self) -> None:
        if self.layout != "in-out":
            raise EstimatorError("FeedForward stores weights as (m_{l-1}, m_l): layout 'in-out'")

    def _head(self) -> torch.Tensor:
        return self.head.unsqueeze(-1) if self.head.dim() == 1 else self.head

    def forward(self, X: torch.Tensor, weights: list[torch.Tensor] | None = None) -> ForwardPass:
        Ws = self.weights if weights is None else weights
        h = X if self.input_map is None else X @ self.input_map
        xs, zs, ps = [h], [], []
        for W in Ws:
            z = h @ W
            h = self.activation(z)
            zs.append(z)
            ps.append(self.derivative(z))
            xs.append(h)
        return ForwardPass(xs, zs, ps, h @ self._head())

    def backward(self, fwd: ForwardPass, V: torch.Tensor,
                 weights: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        Ws = self.weights if weights is None else weights
        return backprop(Ws, fwd.patterns, V @ self._head().transpose(-1, -2), self.layout)
