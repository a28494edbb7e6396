"""Activations and infinite-width kernels: Gaussian expectations by 2-D Gauss–Hermite quadrature, closed forms.

Any setting whose lemmas involve a limiting Gram matrix uses the same primitive: for a Gram matrix K of N
"points" (inputs, or (input, pixel) pairs for convolutions) and functions f, g,

    E_f,g(K)_{ab} = E[f(u_a) g(u_b)],   (u_a, u_b) ~ N(0, [[K_aa, K_ab], [K_ba, K_bb]]),

computed with probabilists' Gauss–Hermite nodes t and weights ω (`scipy.special.roots_hermitenorm`, weights
normalised to sum 1) through the Cholesky factor of the 2×2 covariance:

    u = l11 t_a,  v = l21 t_a + l22 t_b,  l11 = √K_aa, l21 = K_ab / l11, l22 = √max(K_bb − l21², 0),
    E[f(u) g(v)] ≈ Σ_{a,b} ω_a ω_b f(l11 t_a) g(l21 t_a + l22 t_b).

For analytic activations (softplus, tanh, erf, sigmoid, swish, GELU) convergence in the node count Q is
spectral: `pair_expectation(..., check=True)` recomputes with 2Q nodes and reports the change, so a caller can
state the quadrature error it relied on. Piecewise-linear activations (ReLU, leaky ReLU, the Huberized ReLU)
converge only algebraically; for those use the closed forms below (`arccos_kernel`, `leaky_relu_kernel`),
which the tests also use to validate the quadrature.

Closed forms (exact; A = K_aa, B = K_bb, C = K_ab, θ = arccos(C/√(AB))):
    ReLU        E[relu(u) relu(v)] = √(AB)/(2π) (sin θ + (π − θ) cos θ)      (arc-cosine kernel, order 1)
                E[1{u>0} 1{v>0}]   = (π − θ)/(2π)                               (order 0: the ReLU derivative)
    leaky ReLU  φ(z) = max(z, αz):  E[φφ] = αC + (1−α)² k₁,  E[φ'φ'] = α + (1−α)² k₀
    erf         E[erf(u) erf(v)]   = (2/π) arcsin(2C / √((1+2A)(1+2B)))         (Williams 1997)
                E[erf'(u) erf'(v)] = (4/π) / √((1+2A)(1+2B) − 4C²)

A paper's layer-by-layer kernel recursions (FC, ResNet, convolutional) are built from these pair expectations
in its plugin.
Everything is batched over leading dimensions (replicates) and float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import scipy.special
import torch

Fn = Callable[[torch.Tensor], torch.Tensor]

DEFAULT_NODES = 128  # per dimension: softplus/sigmoid/GELU/Swish reach ~1e-15 by 48 nodes; tanh and erf at
# variance ~3 (poles / fast growth off the real axis) need ~128 for ~1e-11. `Engine(check=True)` measures it.
CHUNK_ELEMENTS = 1 << 22  # batch chunking of the Q×Q evaluation grid (≈ 32 MB of float64 per chunk)


# ----------------------------------------------------------------------------------------------------------
# Activations
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Activation:
    """An activation σ with σ', σ'' (a.e. for piecewise ones) and its constants.

    lipschitz = sup|σ'| (the paper's L), smoothness = sup|σ''| (β; inf for non-smooth), `smooth` says whether
    σ' is Lipschitz, `analytic` whether Gauss–Hermite converges spectrally. `params` records e.g. h."""

    name: str
    f: Fn
    df: Fn
    d2f: Fn
    lipschitz: float
    smoothness: float
    smooth: bool
    analytic: bool
    params: tuple[tuple[str, float], ...] = ()
    closed_form: str = ""  # "relu", "leaky-relu", "erf": a kernel closed form exists (see module docstring)

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        return self.f(z)

    def param(self, key: str) -> float:
        return dict(self.params)[key]


def _softplus(z: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softplus(z)


def _sig(z: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(z)


def _dsig(z: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(z)
    return s * (1 - s)


def _d2sig(z: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(z)
    return s * (1 - s) * (1 - 2 * s)


_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2 * math.pi)


def _gelu(z: torch.Tensor) -> torch.Tensor:
    return z * 0.5 * (1 + torch.erf(z / _SQRT2))


def _dgelu(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(z / _SQRT2)) + z * _INV_SQRT_2PI * torch.exp(-z * z / 2)


def _d2gelu(z: torch.Tensor) -> torch.Tensor:
    return _INV_SQRT_2PI * torch.exp(-z * z / 2) * (2 - z * z)


def softplus() -> Activation:
    """σ(z) = log(1+e^z): L = 1, β = 1/4 (Du et al.'s guiding example; they state both constants ≤ 1)."""
    return Activation("softplus", _softplus, _sig, _dsig, 1.0, 0.25, True, True)


def tanh() -> Activation:
    """σ = tanh: L = 1, β = sup|−2 tanh sech²| = 4/(3√3)."""
    def d1(z):
        return 1 - torch.tanh(z) ** 2

    def d2(z):
        t = torch.tanh(z)
        return -2 * t * (1 - t * t)

    return Activation("tanh", torch.tanh, d1, d2, 1.0, 4 / (3 * math.sqrt(3)), True, True)


def sigmoid() -> Activation:
    """σ = logistic sigmoid: L = 1/4, β = sup|σ(1−σ)(1−2σ)| = 1/(6√3)."""
    return Activation("sigmoid", _sig, _dsig, _d2sig, 0.25, 1 / (6 * math.sqrt(3)), True, True)


def erf() -> Activation:
    """σ = erf: L = 2/√π, β = sup|(4z/√π) e^{−z²}| = 2√2/√(eπ); kernels have closed forms (Williams 1997)."""
    c = 2 / math.sqrt(math.pi)

    def d1(z):
        return c * torch.exp(-z * z)

    def d2(z):
        return -2 * z * c * torch.exp(-z * z)

    return Activation("erf", torch.erf, d1, d2, c, 2 * math.sqrt(2) / math.sqrt(math.e * math.pi), True, True,
                      closed_form="erf")


def swish() -> Activation:
    """σ(z) = z·sigmoid(z) (SiLU): L ≈ 1.0998, β = 1/2 (at 0)."""
    def f(z):
        return z * torch.sigmoid(z)

    def d1(z):
        return _sig(z) + z * _dsig(z)

    def d2(z):
        return 2 * _dsig(z) + z * _d2sig(z)

    return Activation("swish", f, d1, d2, 1.0998393194176126, 0.5, True, True)


def gelu() -> Activation:
    """σ(z) = z Φ(z): L ≈ 1.1289, β = 2/√(2π) (at 0)."""
    return Activation("gelu", _gelu, _dgelu, _d2gelu, 1.1289293849220795, 2 * _INV_SQRT_2PI, True, True)


def relu() -> Activation:
    """ReLU: not smooth (β = ∞); included for the arc-cosine closed-form sanity checks. σ'(0) := 0."""
    def d1(z):
        return (z > 0).to(z.dtype)

    def d2(z):
        return torch.zeros_like(z)

    return Activation("relu", torch.relu, d1, d2, 1.0, math.inf, False, False, closed_form="relu")


def leaky_relu(alpha: float) -> Activation:
    """φ(z) = max(z, αz) for 0 ≤ α ≤ 1 (leaky-ReLU settings); closed-form kernels below."""
    a = float(alpha)

    def f(z):
        return torch.where(z > 0, z, a * z)

    def d1(z):
        return torch.where(z > 0, torch.ones_like(z), torch.full_like(z, a))

    def d2(z):
        return torch.zeros_like(z)

    return Activation("leaky-relu", f, d1, d2, max(1.0, abs(a)), math.inf, False, False, (("alpha", a),),
                      closed_form="leaky-relu")


def huberized_relu(h: float) -> Activation:
    """Chatterji, Long & Bartlett (2021) eq. (1): φ(z) = 0 (z < 0), z²/(2h) (0 ≤ z ≤ h), z − h/2 (z > h).

    φ'(z) = clip(z/h, 0, 1); φ'' = 1/h on (0, h), 0 elsewhere (undefined at 0 and h: a.e. only)."""
    hh = float(h)
    if not hh > 0:
        raise ValueError(f"Huberized ReLU needs h > 0, got {h}")

    def f(z):
        return torch.where(z < 0, torch.zeros_like(z), torch.where(z <= hh, z * z / (2 * hh), z - hh / 2))

    def d1(z):
        return (z / hh).clamp(0.0, 1.0)

    def d2(z):
        return ((z > 0) & (z < hh)).to(z.dtype) / hh

    return Activation("huberized-relu", f, d1, d2, 1.0, 1 / hh, True, False, (("h", hh),))


SWISH_SCALE = 1.1  # Chatterji et al.: "The scaling factor 1/1.1 ensures that |φ'(z)| < 1"


def scaled_swish(h: float) -> Activation:
    """Chatterji et al. (2021) §2.2: φ(z) = z / (1.1 (1 + exp(−2z/h))) = (z/1.1) sigmoid(2z/h).

    With u = 2z/h: φ' = (sig(u) + u sig'(u))/1.1 ∈ (−0.0909, 0.99986), φ'' = (2/(1.1h)) (2 sig'(u) + u sig''(u)),
    sup|φ''| = 1/(1.1 h) (at 0) ≤ 1/h; |φ'z − φ| = (h/2.2) u² sig'(u) ≤ 0.2 h ≤ h/2."""
    hh = float(h)
    if not hh > 0:
        raise ValueError(f"scaled Swish needs h > 0, got {h}")

    def f(z):
        return z * torch.sigmoid(2 * z / hh) / SWISH_SCALE

    def d1(z):
        u = 2 * z / hh
        return (_sig(u) + u * _dsig(u)) / SWISH_SCALE

    def d2(z):
        u = 2 * z / hh
        return (2 / (SWISH_SCALE * hh)) * (2 * _dsig(u) + u * _d2sig(u))

    return Activation("scaled-swish", f, d1, d2, 0.9998611, 1 / (SWISH_SCALE * hh), True, True, (("h", hh),))


ACTIVATIONS: dict[str, Callable[..., Activation]] = {
    "softplus": softplus, "tanh": tanh, "sigmoid": sigmoid, "erf": erf, "swish": swish, "gelu": gelu,
    "relu": relu, "leaky-relu": leaky_relu, "huberized-relu": huberized_relu, "scaled-swish": scaled_swish,
}


def get_activation(name: str, **params: float) -> Activation:
    """`get_activation("softplus")`, `get_activation("huberized-relu", h=0.1)`: a clear error on a bad name."""
    try:
        factory = ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation '{name}'; one of {sorted(ACTIVATIONS)}") from None
    return factory(**params)


# ----------------------------------------------------------------------------------------------------------
# Gauss–Hermite quadrature
# ----------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=32)
def _gh_numpy(Q: int) -> tuple[np.ndarray, np.ndarray]:
    if Q < 1:
        raise ValueError(f"Gauss-Hermite needs Q >= 1 nodes, got {Q}")
    t, w = scipy.special.roots_hermitenorm(int(Q))  # stable for large Q (numpy's hermegauss overflows ~300)
    return np.asarray(t, dtype=np.float64), np.asarray(w / w.sum(), dtype=np.float64)


def gauss_hermite(Q: int = DEFAULT_NODES, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """Probabilists' Gauss–Hermite nodes and weights for E over N(0,1), weights summing to 1."""
    t, w = _gh_numpy(Q)
    return torch.as_tensor(t, dtype=dtype), torch.as_tensor(w, dtype=dtype)


def expect_1d(f: Fn, var: torch.Tensor, Q: int = DEFAULT_NODES) -> torch.Tensor:
    """E f(u), u ~ N(0, var), elementwise over `var` (any shape)."""
    var = torch.as_tensor(var, dtype=torch.float64)
    t, w = gauss_hermite(Q, var.dtype)
    return (f(var.clamp_min(0).sqrt().unsqueeze(-1) * t) * w).sum(-1)


def expect_2d(f: Fn, g: Fn, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
              Q: int = DEFAULT_NODES) -> torch.Tensor:
    """E[f(u) g(v)] for (u, v) ~ N(0, [[A, C], [C, B]]), elementwise over broadcastable A, B, C.

    Covariances that are not PSD within rounding (B − C²/A < 0) are clamped to the PSD boundary."""
    A, B, C = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (A, B, C)))
    shape = A.shape
    A, B, C = A.reshape(-1), B.reshape(-1), C.reshape(-1)
    t, w = gauss_hermite(Q, A.dtype)
    l11 = A.clamp_min(0).sqrt()
    l21 = torch.where(l11 > 0, C / torch.where(l11 > 0, l11, torch.ones_like(l11)), torch.zeros_like(C))
    l22 = (B - l21 * l21).clamp_min(0).sqrt()
    out = torch.empty_like(A)
    step = max(1, CHUNK_ELEMENTS // (Q * Q))
    for s in range(0, A.numel(), step):
        sl = slice(s, s + step)
        fu = f(l11[sl, None] * t) * w  # (b, Q): f(u) at node a, times ω_a
        v = l21[sl, None, None] * t[:, None] + l22[sl, None, None] * t[None, :]  # (b, Qa, Qb)
        inner = (g(v) * w).sum(-1)  # (b, Qa): Σ_b ω_b g(v_ab)
        out[sl] = (fu * inner).sum(-1)
    return out.reshape(shape)


def pair_expectation(K: torch.Tensor, f: Fn, g: Fn | None = None, Q: int = DEFAULT_NODES) -> torch.Tensor:
    """M_ab = E[f(u_a) g(u_b)] over the 2-D marginals of N(0, K), for a batch of Gram matrices K (..., N, N).

    With g = None (g = f) only the upper triangle is integrated and mirrored."""
    N = K.shape[-1]
    diag = torch.diagonal(K, dim1=-2, dim2=-1)
    A = diag.unsqueeze(-1).expand(K.shape)
    B = diag.unsqueeze(-2).expand(K.shape)
    C = 0.5 * (K + K.transpose(-1, -2))  # symmetrise against rounding
    if g is None:
        iu = torch.triu_indices(N, N)
        vals = expect_2d(f, f, A[..., iu[0], iu[1]], B[..., iu[0], iu[1]], C[..., iu[0], iu[1]], Q)
        M = torch.zeros(K.shape, dtype=vals.dtype)
        M[..., iu[0], iu[1]] = vals
        M[..., iu[1], iu[0]] = vals
        return M
    return expect_2d(f, g, A, B, C, Q)


_C_SIGMA: dict[tuple, float] = {}


def c_sigma(act: Activation, Q: int = 200) -> float:
    """Du et al.'s c_σ = (E_{z~N(0,1)} σ(z)²)^{-1} (softplus: ≈ 1.0855; ReLU: 2; erf: π/(2 arcsin(2/3)))."""
    key = (act.name, act.params, Q)
    if key not in _C_SIGMA:
        if act.closed_form:
            one = torch.ones(1, 1, dtype=torch.float64)
            _C_SIGMA[key] = float(1.0 / closed_form_pair(act, False, one)[0, 0])
        else:
            _C_SIGMA[key] = float(1.0 / expect_1d(lambda z: act.f(z) ** 2, torch.tensor(1.0, dtype=torch.float64), Q))
    return _C_SIGMA[key]


# ----------------------------------------------------------------------------------------------------------
# Closed forms
# ----------------------------------------------------------------------------------------------------------

def _angle(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    nrm = (A * B).clamp_min(0).sqrt()
    cos = torch.where(nrm > 0, C / torch.where(nrm > 0, nrm, torch.ones_like(nrm)), torch.zeros_like(C))
    return torch.arccos(cos.clamp(-1.0, 1.0)), nrm


def arccos_kernel(order: int, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """Cho & Saul arc-cosine kernels: order 0 = E[1{u>0}1{v>0}], order 1 = E[relu(u) relu(v)]."""
    A, B, C = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (A, B, C)))
    theta, nrm = _angle(A, B, C)
    if order == 0:
        return (math.pi - theta) / (2 * math.pi)
    if order == 1:
        return nrm / (2 * math.pi) * (torch.sin(theta) + (math.pi - theta) * torch.cos(theta))
    raise ValueError(f"arc-cosine kernel of order {order} not implemented (0 or 1)")


def leaky_relu_kernel(alpha: float, derivative: bool, A, B, C) -> torch.Tensor:
    """E[φ(u)φ(v)] = αC + (1−α)² k₁ or E[φ'(u)φ'(v)] = α + (1−α)² k₀ for φ(z) = max(z, αz)."""
    a = float(alpha)
    C = torch.as_tensor(C, dtype=torch.float64)
    if derivative:
        return a + (1 - a) ** 2 * arccos_kernel(0, A, B, C)
    return a * C + (1 - a) ** 2 * arccos_kernel(1, A, B, C)


def erf_kernel(derivative: bool, A, B, C) -> torch.Tensor:
    """E[erf(u) erf(v)] or E[erf'(u) erf'(v)] in closed form (module docstring)."""
    A, B, C = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=torch.float64) for x in (A, B, C)))
    if derivative:
        return (4 / math.pi) / ((1 + 2 * A) * (1 + 2 * B) - 4 * C * C).sqrt()
    return (2 / math.pi) * torch.arcsin((2 * C / ((1 + 2 * A) * (1 + 2 * B)).sqrt()).clamp(-1.0, 1.0))


def closed_form_pair(act: Activation, derivative: bool, K: torch.Tensor) -> torch.Tensor | None:
    """E[σσ] (or E[σ'σ']) over the 2-D marginals of N(0, K) in closed form, or None when there is none."""
    diag = torch.diagonal(K, dim1=-2, dim2=-1)
    A, B = diag.unsqueeze(-1).expand(K.shape), diag.unsqueeze(-2).expand(K.shape)
    C = 0.5 * (K + K.transpose(-1, -2))
    if act.closed_form == "relu":
        return arccos_kernel(0 if derivative else 1, A, B, C)
    if act.closed_form == "leaky-relu":
        return leaky_relu_kernel(act.param("alpha"), derivative, A, B, C)
    if act.closed_form == "erf":
        return erf_kernel(derivative, A, B, C)
    return None


def closed_form_mean(act: Activation, var: torch.Tensor) -> torch.Tensor | None:
    """E σ(u), u ~ N(0, var), in closed form where one exists."""
    var = torch.as_tensor(var, dtype=torch.float64)
    if act.closed_form == "relu":
        return (var.clamp_min(0) / (2 * math.pi)).sqrt()
    if act.closed_form == "leaky-relu":
        return (1 - act.param("alpha")) * (var.clamp_min(0) / (2 * math.pi)).sqrt()
    if act.closed_form == "erf":
        return torch.zeros_like(var)
    return None


# ----------------------------------------------------------------------------------------------------------
# Expectation engine: closed form when available (unless forced), else quadrature with a doubling check
# ----------------------------------------------------------------------------------------------------------

@dataclass
class Engine:
    """Computes E[σσ], E[σ'σ'], E σ over Gaussian marginals for one activation.

    method = "auto" (closed form if the activation has one, else quadrature), "quadrature" or "closed-form".
    With check = True every quadrature is repeated with 2Q nodes; `max_change` records the largest absolute
    change seen (a practical error estimate for analytic activations)."""

    act: Activation
    Q: int = DEFAULT_NODES
    method: str = "auto"
    check: bool = False
    max_change: float = 0.0
    calls: int = field(default=0, repr=False)

    def _closed(self) -> bool:
        if self.method == "closed-form":
            if not self.act.closed_form:
                raise ValueError(f"activation '{self.act.name}' has no closed-form kernel")
            return True
        return self.method == "auto" and bool(self.act.closed_form)

    def _quad(self, fn: Callable[[int], torch.Tensor]) -> torch.Tensor:
        val = fn(self.Q)
        if self.check:
            val2 = fn(2 * self.Q)
            self.max_change = max(self.max_change, float((val2 - val).abs().max()) if val.numel() else 0.0)
            val = val2
        self.calls += 1
        return val

    def pair(self, K: torch.Tensor, derivative: bool = False) -> torch.Tensor:
        if self._closed():
            out = closed_form_pair(self.act, derivative, K)
            assert out is not None
            return out
        f = self.act.df if derivative else self.act.f
        return self._quad(lambda Q: pair_expectation(K, f, None, Q))

    def mean(self, var: torch.Tensor) -> torch.Tensor:
        if self._closed():
            out = closed_form_mean(self.act, var)
            assert out is not None
            return out
        return self._quad(lambda Q: expect_1d(self.act.f, var, Q))

    @property
    def description(self) -> str:
        if self._closed():
            return f"closed form ({self.act.closed_form})"
        s = f"2-D Gauss-Hermite, Q={self.Q}"
        if self.check:
            s += f", checked against 2Q={2 * self.Q} (max change {self.max_change:.1e})"
        return s


# ----------------------------------------------------------------------------------------------------------
# Generic helpers
# ----------------------------------------------------------------------------------------------------------

def pair_block_lambda_min(K: torch.Tensor) -> torch.Tensor:
    """min over i ≠ j of λ_min([[K_ii, K_ij], [K_ji, K_jj]]) per batch (closed form for 2×2); +inf if n = 1."""
    n = K.shape[-1]
    if n < 2:
        return torch.full(K.shape[:-2], math.inf, dtype=K.dtype)
    d = torch.diagonal(K, dim1=-2, dim2=-1)
    a, b = d.unsqueeze(-1), d.unsqueeze(-2)
    c = 0.5 * (K + K.transpose(-1, -2))
    lam = (a + b) / 2 - (((a - b) / 2) ** 2 + c * c).sqrt()
    lam = lam + torch.diag(torch.full((n,), math.inf, dtype=K.dtype))
    return lam.amin(dim=(-1, -2))


def block_lambda_min(K: torch.Tensor, n: int, p: int) -> torch.Tensor:
    """For K over n·p points ordered (i, l): min over i ≠ j of λ_min of the 2p×2p block [[K_ii, K_ij], [K_ji, K_jj]]."""
    if p == 1:
        return pair_block_lambda_min(K)
    Kb = K.reshape(*K.shape[:-2], n, p, n, p)
    best = torch.full(K.shape[:-2], math.inf, dtype=K.dtype)
    for i in range(n):
        for j in range(i + 1, n):
            top = torch.cat([Kb[..., i, :, i, :], Kb[..., i, :, j, :]], -1)
            bot = torch.cat([Kb[..., j, :, i, :], Kb[..., j, :, j, :]], -1)
            M = torch.cat([top, bot], -2)
            best = torch.minimum(best, torch.linalg.eigvalsh(0.5 * (M + M.transpose(-1, -2)))[..., 0])
    return best


def lambda_min(K: torch.Tensor) -> torch.Tensor:
    """Least eigenvalue of each symmetric matrix in a batch (LAPACK, float64)."""
    return torch.linalg.eigvalsh(0.5 * (K + K.transpose(-1, -2)))[..., 0]
