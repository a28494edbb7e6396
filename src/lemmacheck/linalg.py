"""Linear algebra that lemmas need, with honesty about what each method guarantees.

Spectral norms decide upper-bound claims, and power iteration under-estimates them, so `spectral_norm`
is exact (LAPACK SVD) up to a size, and above it uses Lanczos from two independent starts that must agree;
the method is returned so results record it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse.linalg as spla
import torch

EXACT_SVD_MAX = 2048  # LAPACK singular values up to this min-dimension (a few seconds in float64 on 2 cores)


def spectral_norm(W: torch.Tensor, exact_max: int = EXACT_SVD_MAX) -> tuple[torch.Tensor, str]:
    """Largest singular value of each matrix in a batch (..., a, b); returns (norms, method)."""
    if min(W.shape[-2:]) <= exact_max:
        return torch.linalg.matrix_norm(W, ord=2), "exact-svd"
    flat = W.reshape(-1, *W.shape[-2:])
    out = torch.empty(flat.shape[0], dtype=W.dtype)
    for k, M in enumerate(flat):
        A = M.detach().cpu().numpy()
        vals = []
        for seed in (1, 2):  # two independent Lanczos starts: disagreement means non-convergence
            v0 = np.random.default_rng(seed).standard_normal(A.shape[1])
            s = spla.svds(A, k=1, v0=v0, tol=1e-12, return_singular_vectors=False)[0]
            vals.append(float(s))
        if abs(vals[0] - vals[1]) > 1e-8 * max(vals):
            raise ArithmeticError(f"Lanczos spectral norm did not converge: {vals}")
        out[k] = max(vals)
    return out.reshape(W.shape[:-2]), "lanczos-cross-checked"


def psd_sqrt(G: torch.Tensor) -> torch.Tensor:
    """A factor A with A A^T = G for batched PSD G (..., n, n); tolerant of rank deficiency (eigh, clamp)."""
    evals, evecs = torch.linalg.eigh(G)
    return evecs * evals.clamp_min(0).sqrt().unsqueeze(-2)


def top_s_norm(u: torch.Tensor, s: int) -> torch.Tensor:
    """sup over unit s-sparse a of <u, a> = l2 norm of the s largest |u_j| (exact; last dim)."""
    s = min(int(s), u.shape[-1])
    return u.abs().topk(s, dim=-1).values.norm(dim=-1)


def clip_spectral(D: torch.Tensor, tau: float) -> torch.Tensor:
    """Euclidean projection onto {||D||_2 <= tau}: clip singular values at tau."""
    U, S, Vh = torch.linalg.svd(D, full_matrices=False)
    return (U * S.clamp_max(tau).unsqueeze(-2)) @ Vh
