"""Linear algebra that lemmas need, with honesty about what each method guarantees.

Spectral norms decide upper-bound claims, and power iteration under-estimates them, so `spectral_norm` never
under-estimates: up to a size it takes the largest eigenvalue of the smaller Gram matrix (`top_eigenvalue`: LAPACK
syevx for that one value, Gram included 2.2-2.4x faster than an SVD at 256-1024 and as accurate for the largest
singular value) and rounds it UP by a bound on the
rounding error of forming the Gram and of the eigensolver; above that size a block Krylov estimate raised by its
residual and certified from above by a Cholesky factorisation (the dense eigensolver where the certificate fails).
The method is returned so results record it. `spectral_norm_at_most` certifies
||W||_2 <= c by a Cholesky factorisation (cheaper still) when only the decision is needed.

`gaussian_spectral_norm` draws the largest singular value of a Gaussian matrix exactly in distribution from the
Golub-Kahan bidiagonal model (O(k) random numbers instead of a×b, no SVD): for estimators whose claim depends on a
Gaussian weight matrix only through its spectral norm.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .boundary import on_host, to_numpy

# eigvalsh of the Gram up to this min-dimension: faster than the certified block Krylov at every width measured (one
# Gaussian matrix, CPU s: 10.8 vs 12.4 at 4096, 73 vs 133 at 8192; the SVD 32 and 247), Krylov only where the
# Gram's eigensolver would hold several GB
EXACT_SVD_MAX = 16384


# From this many entries a matrix's Gram is formed by BLAS syrk, one matrix at a time: half a product's flops, and
# no transposed batched GEMM (which MKL serves with a strided copy): 2.5x at 1024 x 4096, 1.5x at 1024 x 1024;
# below it the per-matrix call costs more than it saves (equal at 256 x 256)
SYRK_MIN_ENTRIES = 1 << 16

# From this order a CPU matrix's largest eigenvalue comes from LAPACK syevx (the tridiagonal reduction, then bisection
# for that one value) instead of torch's eigvalsh, which finds all n: 1.3x at 64, 1.7x at 128, 1.8x at 256-1024 on
# one thread; below it the per-matrix call costs more than it saves
TOP_EIG_MIN_N = 64


def gram(W: torch.Tensor) -> torch.Tensor:
    """The smaller of W^T W and W W^T for a batch (..., a, b), in float64 (a float32 Gram would lose the
    accuracy that the rounding allowance of `spectral_norm` assumes). Large CPU matrices by syrk (the same inner
    products summed in another order: `gram_rounding_bound` covers any order)."""
    A = W.to(torch.float64)
    a, b = A.shape[-2:]
    if not on_host(A) or A.requires_grad or a * b < SYRK_MIN_ENTRIES or A.numel() == 0:
        return A.transpose(-1, -2) @ A if b <= a else A @ A.transpose(-1, -2)
    flat = A.reshape(-1, a, b)
    out = torch.empty(flat.shape[0], min(a, b), min(a, b), dtype=torch.float64)
    for k in range(flat.shape[0]):
        out[k] = torch.from_numpy(_sym_gram(to_numpy(flat[k])))
    return out.reshape(*A.shape[:-2], *out.shape[-2:])


def top_eigenvalue(G: torch.Tensor) -> torch.Tensor:
    """The largest eigenvalue of each symmetric matrix in a batch (..., n, n) (both triangles filled, as `gram`
    gives). Large CPU matrices by LAPACK syevx for that one eigenvalue, its bisection run to full accuracy (abstol
    2 * underflow), so the error is the tridiagonal reduction's backward error, as for eigvalsh: what
    `gram_rounding_bound` allows for. Batches on other devices, small or differentiated ones by torch's eigvalsh."""
    n = G.shape[-1]
    if not on_host(G) or G.requires_grad or n < TOP_EIG_MIN_N or G.numel() == 0:
        return torch.linalg.eigvalsh(G)[..., -1]
    return _syevx_top(G.to(torch.float64).reshape(-1, n, n), vectors=False)[0].reshape(G.shape[:-2]).to(G.dtype)


def _syevx_top(flat: torch.Tensor, vectors: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """LAPACK syevx for the top eigenvalue (and with `vectors` a unit eigenvector) of each float64 CPU matrix in
    (B, n, n), its bisection run to full accuracy (abstol 2 * underflow)."""
    _scipy_blas_threads(torch.get_num_threads())
    B, n = flat.shape[0], flat.shape[-1]
    lam = torch.empty(B, dtype=torch.float64)
    vec = torch.empty(B, n, dtype=torch.float64) if vectors else None
    for k in range(B):
        # symmetric, so the transpose is the same matrix and a Fortran-ordered view; syevx works on its own copy
        w, z = _syevx_one(to_numpy(flat[k]).T, vectors)
        lam[k] = w
        if vec is not None:
            vec[k] = torch.from_numpy(z[:, 0])
    return lam, vec


def _syevx_one(G: np.ndarray, vectors: bool, overwrite: bool = False) -> tuple[float, np.ndarray]:
    """The top eigenpair of one Fortran-ordered symmetric float64 matrix by syevx, reading its upper triangle only."""
    from scipy.linalg import lapack

    n = G.shape[-1]
    w, z, found, _, info = lapack.dsyevx(G, compute_v=int(vectors), range="I", il=n, iu=n,
                                         abstol=2 * np.finfo(np.float64).tiny, overwrite_a=int(overwrite))
    if info != 0 or found != 1:
        finite = "" if bool(np.isfinite(G).all()) else " with non-finite entries"
        raise ArithmeticError(f"LAPACK dsyevx returned info {info} and {found} eigenvalues for the top of a "
                              f"{n}x{n} symmetric matrix{finite}")
    return float(w[0]), z


def _top_gram_eigenvalue(W: torch.Tensor) -> torch.Tensor:
    """top_eigenvalue(gram(W)), the same numbers. Where both take their LAPACK paths (a CPU matrix of syrk's size,
    a Gram of syevx's order) syevx reads the triangle syrk computed, which `gram` would mirror into the other one
    and copy into a tensor: 11-24% of a spectral norm at 256-1024."""
    A = W.to(torch.float64)
    a, b = A.shape[-2:]
    if (not on_host(A) or A.requires_grad or a * b < SYRK_MIN_ENTRIES or A.numel() == 0
            or min(a, b) < TOP_EIG_MIN_N):
        return top_eigenvalue(gram(W))
    flat = A.reshape(-1, a, b)
    lam = torch.empty(flat.shape[0], dtype=torch.float64)
    for k in range(flat.shape[0]):
        lam[k] = _syevx_one(_sym_gram(to_numpy(flat[k]), mirror=False), vectors=False, overwrite=True)[0]
    return lam.reshape(A.shape[:-2])


def gram_rounding_bound(W: torch.Tensor) -> torch.Tensor:
    """An upper bound on |lambda_max(fl(Gram)) computed - lambda_max(Gram)| per matrix: the Gram's rounding error
    (|fl(A^T A) - A^T A| <= gamma_k |A|^T |A| entrywise, whose spectral norm is <= gamma_k ||A||_F^2) plus
    eigvalsh's backward error (a small multiple of n u ||G||, taken as 4 n u ||A||_F^2)."""
    u = torch.finfo(torch.float64).eps / 2
    k, n = max(W.shape[-2:]), min(W.shape[-2:])
    fro2 = W.to(torch.float64).pow(2).sum((-1, -2))
    gamma = k * u / (1 - k * u)
    return (gamma + 4 * n * u) * fro2


def _norm_rounded_up(lam: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """||W||_2 from its Gram's computed top eigenvalue `lam`, raised by the rounding bound: never below the exact."""
    return (lam.clamp_min(0) + gram_rounding_bound(W)).sqrt()


def spectral_norm(W: torch.Tensor, exact_max: int = EXACT_SVD_MAX) -> tuple[torch.Tensor, str]:
    """Largest singular value of each matrix in a batch (..., a, b), never below the exact one; returns (norms,
    method). Up to `exact_max` the rounded-up square root of the Gram's largest eigenvalue (relative excess about
    (a + b) * 1e-16 * ||W||_F^2 / ||W||_2^2, far below any claim's resolution); above it a block Krylov estimate
    certified from above by a Cholesky factorisation (`_certified_top`): the same guarantee with memory linear in
    the blocks, slower than the dense eigensolver wherever both were timed (docs/performance.md)."""
    if min(W.shape[-2:]) <= exact_max:
        lam = _top_gram_eigenvalue(W)
        s = _norm_rounded_up(lam, W)
        return s.to(W.dtype), "gram-eigvalsh (rounded up)"
    flat = W.reshape(-1, *W.shape[-2:])
    out = torch.empty(flat.shape[0], dtype=W.dtype, device=W.device)
    methods = set()
    for k, M in enumerate(flat):
        s, how = _certified_top(M)
        out[k] = s
        methods.add(how)
    return out.reshape(W.shape[:-2]), "; ".join(sorted(methods))


def operator_norm(M: torch.Tensor) -> torch.Tensor:
    """||M||_2 of each matrix in a batch (..., a, b), where the norm is an upper-bound claim's quantity:
    `spectral_norm`'s value (never below the exact value, above it by rounding, about 1e-12 relative; 2.2-2.4x
    faster than the SVD at 256-1024). Under autograd on the CPU the same formula, with the gradient u1 v1^T of the
    top singular pair taken from the Gram's top eigenpair (`_TopSingular`: the ascents that differentiate it need
    nothing else, and a full batched SVD cost 5x more); on other devices the SVD."""
    if not M.requires_grad:
        return spectral_norm(M)[0]
    if not on_host(M) or min(M.shape[-2:]) > EXACT_SVD_MAX or M.numel() == 0:
        return torch.linalg.matrix_norm(M, ord=2)
    return _TopSingular.apply(M)


def top_eigenpair(G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest eigenvalue of each symmetric CPU matrix in a batch (..., n, n) and a unit eigenvector for it
    (..., n): LAPACK syevx for that one pair from `TOP_EIG_MIN_N` on (as `top_eigenvalue`), torch's eigh below."""
    n = G.shape[-1]
    flat = G.to(torch.float64).reshape(-1, n, n)
    if n < TOP_EIG_MIN_N:
        lam, V = torch.linalg.eigh(flat)
        return lam[:, -1].reshape(G.shape[:-2]), V[:, :, -1].reshape(*G.shape[:-2], n)
    lam, vec = _syevx_top(flat, vectors=True)
    assert vec is not None
    return lam.reshape(G.shape[:-2]), vec.reshape(*G.shape[:-2], n)


class _TopSingular(torch.autograd.Function):
    """||M||_2 as `spectral_norm` gives it (the Gram's top eigenvalue, rounded up; the eigensolver that also returns
    the vector rounds differently, about 1e-15 relative), differentiable: its gradient is
    u1 v1^T, the top singular pair, which the smaller Gram's top eigenvector gives (v1 for M^T M, u1 for M M^T; the
    other one is M v1 / s or M^T u1 / s). Where the top singular value is repeated any pair is a subgradient, as the
    SVD's is. Once differentiable: no ascent takes a second derivative of a norm."""

    @staticmethod
    def forward(ctx: Any, M: torch.Tensor) -> torch.Tensor:
        A = M.detach().to(torch.float64)
        a, b = A.shape[-2:]
        lam, x = top_eigenpair(gram(A))
        s = lam.clamp_min(0).sqrt()
        denom = s.clamp_min(torch.finfo(torch.float64).tiny).unsqueeze(-1)
        if b <= a:  # x = v1 (the Gram is A^T A)
            u, v = (A @ x.unsqueeze(-1)).squeeze(-1) / denom, x
        else:  # x = u1 (the Gram is A A^T)
            u, v = x, (A.transpose(-1, -2) @ x.unsqueeze(-1)).squeeze(-1) / denom
        ctx.save_for_backward(u.to(M.dtype), v.to(M.dtype))
        return _norm_rounded_up(lam, A).to(M.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        u, v = ctx.saved_tensors
        return g[..., None, None] * u.unsqueeze(-1) * v.unsqueeze(-2)


KRYLOV_BLOCK = 16  # vectors per pass over the Gram: a top eigenvalue's convergence then depends on its gap to
# the 17th, not the 2nd (a Gaussian matrix's top singular values cluster, Tracy-Widom: single-vector Lanczos
# needed 200-300 passes at m = 4096, and two starts still disagreed by 4e-4)
KRYLOV_STEPS = 64


def _sym_gram(A: np.ndarray, mirror: bool = True) -> np.ndarray:
    """The smaller Gram of A (float64, both triangles; without `mirror` the upper one only, Fortran-ordered) by BLAS
    syrk: half a product's flops. A C-ordered A is handed to BLAS as its Fortran-ordered transpose (a view, no copy)."""
    from scipy.linalg.blas import dsyrk

    _scipy_blas_threads(torch.get_num_threads())  # every syrk (the Grams here and the Krylov path's) at torch's count
    at = np.asfortranarray(A.T)  # Fortran (b, a): a view when A is C-ordered, else one copy
    # dsyrk(trans=0) gives at at^T = A^T A, trans=1 at^T at = A A^T: the smaller one, upper triangle only
    G = dsyrk(1.0, at, trans=0 if A.shape[1] <= A.shape[0] else 1)
    if mirror:
        G += np.triu(G, 1).T
    return G


def _krylov_top(G: torch.Tensor) -> tuple[float, float] | None:
    """(theta, r): a Ritz value of G from a block Krylov space (KRYLOV_BLOCK vectors a pass, its basis kept
    orthonormal; a fixed start, so the result is a function of G) and its residual norm ||G x - theta x||, refined
    until r <= 1e-11 theta or KRYLOV_STEPS passes; None when the space would fill G's dimension (the dense solver
    is then as cheap). theta <= lambda_max(G) up to rounding, by Courant-Fischer on an orthonormal basis; that it
    is the top eigenvalue, not the second, is what the caller's certificate checks."""
    n = G.shape[0]
    b = KRYLOV_BLOCK
    gen = torch.Generator().manual_seed(n)
    # the same start on every device (drawn on the host: a function of n alone), then where G is
    start = torch.randn(n, b, generator=gen, dtype=torch.float64, device="cpu").to(G.device)
    Q: list[torch.Tensor] = [torch.linalg.qr(start)[0]]
    GQ: list[torch.Tensor] = []
    theta, r = 0.0, math.inf
    for step in range(1, KRYLOV_STEPS + 1):
        if (step + 1) * b > n:
            return None
        GQ.append(G @ Q[-1])
        basis = torch.cat(Q, 1)
        nxt = GQ[-1] - basis @ (basis.T @ GQ[-1])
        invariant = float(nxt.norm()) <= 1e-12 * float(GQ[-1].norm())  # the space is invariant: RR is exact
        if step % 8 == 0 or step == KRYLOV_STEPS or invariant:
            images = torch.cat(GQ, 1)
            H = basis.T @ images
            vals, vecs = torch.linalg.eigh((H + H.T) / 2)
            theta, y = float(vals[-1]), vecs[:, -1]
            r = float((images @ y - theta * (basis @ y)).norm())
            if r <= 1e-11 * abs(theta) or invariant:
                break
        for _ in range(2):  # orthogonal to the basis to working accuracy, columns lost to deflation included
            nxt = nxt - basis @ (basis.T @ nxt)
            nxt = torch.linalg.qr(nxt)[0]
        Q.append(nxt)
    return theta, r


def _certified_top(W: torch.Tensor) -> tuple[float, str]:
    """||W||_2 of one large matrix, never below the exact value: the block Krylov Ritz value theta raised by its
    residual, then certified by Cholesky of c^2 I - fl(Gram) with the margins of `spectral_norm_at_most` (success
    proves ||W|| <= c); where the certificate fails (the Krylov space missed the top, or has not converged) the
    dense eigensolver decides, rounded up. Excess over the exact norm: about (2 r + rounding margin) / (2 theta).
    On a GPU every step stays there: the Gram by a product, the Krylov passes, Cholesky and eigvalsh on the device."""
    A = W.detach().to(torch.float64)

    def gram_of() -> torch.Tensor:  # host: syrk (half the flops); a device: the product, where A lives
        return torch.from_numpy(_sym_gram(to_numpy(A))) if on_host(A) else gram(A)

    G = gram_of()
    margin = float(gram_rounding_bound(A))
    top = _krylov_top(G)
    if top is not None:
        theta, r = top
        c2 = theta + 2 * r + 1e-12 * abs(theta) + margin
        G.neg_().diagonal().add_(_certificate_shift(c2, margin, G.shape[0]))  # s I - Gram in place: one buffer
        if int(torch.linalg.cholesky_ex(G, upper=True)[1]) == 0:
            return math.sqrt(c2), "block-krylov, cholesky-certified (rounded up)"
        G = gram_of()
    lam = float(top_eigenvalue(G))
    return math.sqrt(max(lam, 0.0) + margin), "gram-eigvalsh (rounded up)"


def low_rank_spectral_norm(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """||A^T B||_2 for factors A (..., n, a), B (..., n, b) (a sum of n outer products, e.g. a loss gradient
    sum_i w_i x_i b_i^T), without forming or decomposing the a×b matrix: with A^T = Q R (reduced QR, Q orthonormal
    columns), ||A^T B|| = ||R B||, an n×b SVD. O(n^2 (a + b)) instead of O(a b min(a, b)), differentiable (the
    searches ascend through it when A has full row rank: put per-sample weights, which may vanish, in B), exact
    up to rounding like the SVD it replaces."""
    n, a, b = A.shape[-2], A.shape[-1], B.shape[-1]
    if min(a, b) <= n:  # no saving: the product is small in one dimension
        return torch.linalg.matrix_norm(A.transpose(-1, -2) @ B, ord=2)
    _, R = torch.linalg.qr(A.transpose(-1, -2))
    return torch.linalg.matrix_norm(R @ B, ord=2)


def spectral_norm_exact_svd(W: torch.Tensor) -> torch.Tensor:
    """The slow path (LAPACK SVD), kept as the reference that tests compare the fast paths with."""
    return torch.linalg.matrix_norm(W, ord=2)


def _certificate_shift(c2: Any, rounding: Any, n: int) -> Any:
    """The s for which a successful Cholesky of s I - fl(Gram) proves lambda_max(Gram) <= c2: c2 less the Gram's
    rounding (`gram_rounding_bound`) and Cholesky's backward error for a PD matrix of norm <= c2 (< (n + 1) u c2,
    taken twice)."""
    return c2 - (rounding + 2 * (n + 1) * (torch.finfo(torch.float64).eps / 2) * c2)


def spectral_norm_at_most(W: torch.Tensor, c: float) -> torch.Tensor:
    """Certified decision ||W||_2 <= c per matrix of a batch (..., a, b), by Cholesky of c^2 I - Gram.

    Cholesky succeeds iff the computed c^2 I - fl(Gram) is positive definite; the margin gram_rounding_bound
    (Gram rounding) plus Cholesky's own backward error (< (n+1) u c^2 for a PD matrix of norm <= c^2, taken as
    2 (n + 1) u c^2) is subtracted first, so True certifies the exact inequality. False means ||W|| > c - O(u):
    matrices within rounding of c are resolved by the exact path (`spectral_norm` rounded up), never guessed.

    First ||W||_2 <= ||W||_F: a batch whose Frobenius norms are all below c, less their rounding ((ab + 2) u
    relative, a generous bound for a sum of ab squares and its root), is certified without a Gram (a trajectory's
    displacement from its start, well inside its ball, say)."""
    a, b = W.shape[-2:]
    fro = torch.linalg.vector_norm(W.to(torch.float64), dim=(-2, -1))
    if bool((fro <= c * (1 - (a * b + 2) * torch.finfo(torch.float64).eps)).all()):
        return torch.ones(W.shape[:-2], dtype=torch.bool)
    G = gram(W)
    n = G.shape[-1]
    shift = _certificate_shift(c * c, gram_rounding_bound(W), n).unsqueeze(-1).unsqueeze(-1)
    eye = torch.eye(n, dtype=G.dtype)
    _, info = torch.linalg.cholesky_ex(shift * eye - G)
    ok = info == 0
    if bool((~ok).any()):  # not certified: decide those exactly (a violation, or a norm within rounding of c)
        flat_ok, flat_W = ok.reshape(-1), W.reshape(-1, *W.shape[-2:])
        idx = (~flat_ok).nonzero().squeeze(-1)
        flat_ok = flat_ok.clone()
        flat_ok[idx] = spectral_norm(flat_W[idx])[0] <= c
        ok = flat_ok.reshape(ok.shape)
    return ok


def gaussian_spectral_norm(gen: torch.Generator, shape: tuple[int, ...], a: int, b: int,
                           scale: float = 1.0) -> tuple[torch.Tensor, str]:
    """||scale * G||_2 for independent a×b matrices G with iid N(0, 1) entries, `shape` of them, exactly in
    distribution, without drawing G.

    Householder bidiagonalisation of a Gaussian matrix keeps the untouched block Gaussian at every step, so G has
    the singular values of the k×k upper bidiagonal B (k = min(a, b), N = max(a, b)) with diagonal chi_N,
    chi_{N-1}, …, chi_{N-k+1} and superdiagonal chi_{k-1}, …, chi_1, all independent (Dumitriu & Edelman 2002,
    beta = 1). Its largest singular value comes from `bidiagonal_norm` (bisection, rounded up). The chi draws come
    from a numpy generator seeded from `gen`, so the shard stays reproducible from its seed."""
    k, N = min(a, b), max(a, b)
    count = math.prod(shape)
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=gen))
    rng = np.random.default_rng(seed)
    diag = np.sqrt(rng.chisquare(np.arange(N, N - k, -1, dtype=np.float64), size=(count, k)))
    sup = np.sqrt(rng.chisquare(np.arange(k - 1, 0, -1, dtype=np.float64), size=(count, k - 1))) if k > 1 else \
        np.zeros((count, 0))
    out = np.array([bidiagonal_norm(diag[r], sup[r]) for r in range(count)])
    return (torch.from_numpy(out).reshape(shape) * scale,
            "Gaussian bidiagonal model (exact in distribution), bisection rounded up")


def bidiagonal_norm(diag: np.ndarray, sup: np.ndarray) -> float:
    """Largest singular value of the upper bidiagonal matrix with this diagonal (k) and superdiagonal (k - 1),
    rounded up by 4 k ulps: the square root of the top eigenvalue of the tridiagonal B^T B by LAPACK bisection
    (dstebz: O(k) per step, no SVD). Forming B^T B perturbs each entry by a relative ulp, so the top eigenvalue by
    at most 2 u ||B^T B|| <= 4 u lambda_max: inside the rounding-up allowance."""
    from scipy.linalg import lapack

    k = len(diag)
    if k == 1:
        return abs(float(diag[0]))
    d = diag * diag
    d[1:] += sup * sup
    m, w, *_ = lapack.dstebz(d, diag[:-1] * sup, 3, 0.0, 0.0, k, k, 0.0, "E")
    if m != 1:
        raise ArithmeticError(f"bisection returned {m} eigenvalues of a {k}x{k} tridiagonal, expected 1")
    return math.sqrt(max(float(w[0]), 0.0)) * (1 + 4 * k * np.finfo(np.float64).eps)


def psd_sqrt(G: torch.Tensor) -> torch.Tensor:
    """The symmetric square root A = V diag(sqrt(max(lambda, 0))) V^T of batched PSD G (..., n, n), so A A^T = G;
    tolerant of rank deficiency. It is unique, so draws A z do not depend on the signs or the basis of degenerate
    eigenspaces that LAPACK picks (V sqrt(Lambda) alone would: other machines, other draws)."""
    evals, evecs = torch.linalg.eigh(G)
    return (evecs * evals.clamp_min(0).sqrt().unsqueeze(-2)) @ evecs.transpose(-1, -2)


def canonical_signs(V: torch.Tensor, rtol: float = 1e-6) -> torch.Tensor:
    """V (..., n, k) with each column's sign fixed: its first entry above rtol * max |entry| is positive."""
    mag = V.abs()
    big = mag > rtol * mag.amax(-2, keepdim=True)
    first = big.to(torch.int8).argmax(-2, keepdim=True)  # first True along the rows
    sign = torch.sign(V.gather(-2, first))
    return V * torch.where(sign == 0, torch.ones_like(sign), sign)


def _canonical_basis(U: torch.Tensor, tol: float = 1e-6) -> torch.Tensor:
    """An orthonormal basis of range(U) (U (n, k) orthonormal) that depends only on that range: Gram-Schmidt of the
    projector's columns P e_1, P e_2, ... in order (twice, for orthogonality), skipping those already spanned."""
    P = U @ U.transpose(-1, -2)
    k = U.shape[-1]
    out: list[torch.Tensor] = []
    for c in range(P.shape[-1]):
        v = P[:, c]
        for _ in range(2):
            for q in out:
                v = v - (q @ v) * q
        nv = v.norm()
        if nv > tol:
            out.append(v / nv)
            if len(out) == k:
                break
    if len(out) < k:  # cannot happen for an orthonormal U; keep LAPACK's basis rather than fail
        return U
    return torch.stack(out, -1)


def canonical_eigh(H: torch.Tensor, rtol: float = 1e-9) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.linalg.eigh with eigenvectors that do not depend on the LAPACK build, thread count or machine: eigenvalues
    within rtol * max |lambda| of their neighbour form one eigenspace whose basis is `_canonical_basis` (LAPACK returns
    an arbitrary basis of a degenerate eigenspace, e.g. the null space of a rank-deficient Gram), and every column's
    sign is `canonical_signs`. Use it wherever an eigenvector (not only its span) feeds a search or a statistic."""
    evals, V = torch.linalg.eigh(H)
    n = H.shape[-1]
    if n > 1:
        scale = evals.abs().amax(-1, keepdim=True).clamp_min(torch.finfo(evals.dtype).tiny)
        tied = (evals[..., 1:] - evals[..., :-1]) <= rtol * scale  # (..., n-1)
        if bool(tied.any()):
            V = V.clone()
            Vf, tf = V.reshape(-1, n, n), tied.reshape(-1, n - 1)
            for b in torch.nonzero(tf.any(-1)).flatten().tolist():
                row = tf[b].tolist()
                i = 0
                while i < n:
                    j = i
                    while j < n - 1 and row[j]:
                        j += 1
                    if j > i:
                        Vf[b, :, i:j + 1] = _canonical_basis(Vf[b, :, i:j + 1])
                    i = j + 1
            V = Vf.reshape(V.shape)
    return evals, canonical_signs(V)


def top_s_norm(u: torch.Tensor, s: int) -> torch.Tensor:
    """sup over unit s-sparse a of <u, a> = l2 norm of the s largest |u_j| (exact; last dim)."""
    s = min(int(s), u.shape[-1])
    return u.abs().topk(s, dim=-1).values.norm(dim=-1)


_SCIPY_BLAS: list = []


def _scipy_blas_threads(n: int) -> None:
    """Best effort: scipy's bundled OpenBLAS to n threads (torch's count), as the runner's workers get through
    OPENBLAS_NUM_THREADS; in-process its default pool fights torch's for the cores (syevr 70x slower on 2 busy
    cores). Speed only: the results do not depend on it."""
    if not _SCIPY_BLAS:
        import ctypes
        import glob
        import os

        import scipy
        lib = None
        for path in glob.glob(os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs",
                                           "libscipy_openblas*.so")):
            try:
                cand = ctypes.CDLL(path)
                lib = (cand.scipy_openblas_set_num_threads, cand.scipy_openblas_get_num_threads)
                break
            except (OSError, AttributeError):
                continue
        _SCIPY_BLAS.append(lib)
    lib = _SCIPY_BLAS[0]
    if lib is not None and lib[1]() != n:
        lib[0](n)


def clip_spectral(D: torch.Tensor, tau: float) -> torch.Tensor:
    """Euclidean projection onto {||D||_2 <= tau}: clip singular values at tau.

    From the eigendecomposition of the smaller Gram (eigh: about 1.7x faster than an SVD at 1024): with
    D^T D = V diag(s^2) V^T, the projection is D V diag(min(1, tau/s)) V^T, written as a correction
    D + D V diag(min(1, tau/s) - 1) V^T so that directions with s <= tau (where small eigenvalues of the Gram are
    inaccurate) are left exactly as they are.

    Only the eigenpairs above tau^2 enter the correction (f = 0 elsewhere), so they alone are computed (LAPACK
    syevr, `subset_by_value`: the tridiagonal reduction plus k eigenvectors instead of all), and the correction is
    two m x m x k products; in projected ascent k is the few clipped directions. The all-eigenpairs path it is tested against
    is tests/references.py: clip_spectral_eigh. On a GPU the whole batch at once by torch's eigh there (every
    eigenpair, f = 0 at those below tau^2): no round trip through the host."""
    wide = D.shape[-1] > D.shape[-2]
    A = D.transpose(-1, -2) if wide else D
    A64 = A.to(torch.float64)
    if not on_host(A64):
        evals, V = torch.linalg.eigh(gram(A))
        s = evals.clamp_min(0).sqrt()
        f = torch.where(s > tau, tau / s.clamp_min(1e-300), torch.ones_like(s)) - 1
        out = (A64 + (A64 @ (V * f.unsqueeze(-2))) @ V.transpose(-1, -2)).to(D.dtype)
        return out.transpose(-1, -2) if wide else out
    flat_A = A64.reshape(-1, *A64.shape[-2:])
    # where `gram` takes syrk, each Gram's upper triangle straight from syrk, handed to syevr (which reads the lower
    # triangle) as its transpose: the entries `gram` would mirror there, so the same eigenpairs bit for bit, without
    # the mirroring and the copies through a batched tensor (0.6 -> 0.37 ms a Gram at 256 x 256)
    by_syrk = not A64.requires_grad and A64.numel() > 0 and A64.shape[-2] * A64.shape[-1] >= SYRK_MIN_ENTRIES
    flat_G = None if by_syrk else gram(A).reshape(-1, *A64.shape[-1:], A64.shape[-1])
    import scipy.linalg  # here, not at the top: a claim that never projects does not pay its import

    outs = []
    _scipy_blas_threads(torch.get_num_threads())
    for k, Ai in enumerate(flat_A):
        Gk = _sym_gram(to_numpy(Ai), mirror=False).T if flat_G is None else to_numpy(flat_G[k])
        evals, V = scipy.linalg.eigh(Gk, subset_by_value=(tau * tau, np.inf), driver="evr", check_finite=False)
        if evals.size == 0:
            outs.append(Ai.clone())
            continue
        s = np.sqrt(np.clip(evals, 0, None))
        f = torch.from_numpy(np.where(s > tau, tau / np.maximum(s, 1e-300), 1.0) - 1).to(Ai.device)
        V = torch.from_numpy(V).to(Ai.device)
        outs.append(Ai + (Ai @ (V * f)) @ V.T)
    out = torch.stack(outs).reshape(A64.shape).to(D.dtype)
    return out.transpose(-1, -2) if wide else out


def clip_spectral_svd(D: torch.Tensor, tau: float) -> torch.Tensor:
    """The slow path of `clip_spectral` (full SVD), kept as the reference for tests."""
    U, S, Vh = torch.linalg.svd(D, full_matrices=False)
    return (U * S.clamp_max(tau).unsqueeze(-2)) @ Vh


class BallTracker:
    """Exact projections onto {||D||_2 <= tau} along a sequence D_{k+1} = P(D_k + a_k b_kᵀ) (projected ascent with
    rank-one steps), without an O(n³) eigensolver per step.

    D (a, b) starts at D_0 inside the ball; the Gram of D_0 is diagonalised once, G_0 = V_0 Λ_0 V_0ᵀ. Every later
    iterate is D_0 + X Yᵀ (X, Y gain a column per step and per clipped direction), so the Gram of D' = D + a bᵀ is
    G' = G_0 + Z M Zᵀ with Z = V_0ᵀ [Y, D_0ᵀX] and M = [[XᵀX, I], [I, 0]] (2r×2r, r columns). Above max Λ_0 (<= tau²)
    the eigenvalues of G' are counted exactly by inertia (Haynsworth: the number above λ is #pos(S(λ)) − r,
    S(λ) = −M⁻¹ + Zᵀ(λ − Λ_0)⁻¹Z, 2r×2r), found by safeguarded Newton on the eigenvalue of S that crosses 0, and
    their vectors are v = V_0 (λ − Λ_0)⁻¹ Z y (y the null vector of S(λ)). A step costs O(ab + b r² + r³) instead
    of the Gram and the tridiagonal reduction. `step` returns None where it cannot vouch for the result (more than
    one eigenvalue above tau², a Newton iteration that does not settle, a residual ||G'v − λv|| above 1e-12 λ): the
    caller then projects densely (`clip_spectral`) and starts a new tracker there. Right above a cluster of Λ_0 at
    tau² (a start scaled onto the sphere, the singular values of an earlier clip) S(λ) has poles: the count keeps
    those eigenvalues apart in a bordered matrix (`count` in `step`), since S's own computed inertia there is
    rounding and missed eigenvalues far above tau². Eigenvalues within 1e-12 tau² of
    the threshold are left unclipped (a change below 1e-12 tau, rounding). Equal to `clip_spectral` to rounding
    (tests/test_linalg.py)."""

    THRESH = 1e-12  # relative margin above tau² below which an eigenvalue counts as on the sphere
    NEAR = 1e-8  # eigenvalues of Λ_0 within this relative gap below a count's test point are kept apart (count)

    def __init__(self, D0: torch.Tensor, tau: float, eig: tuple[torch.Tensor, torch.Tensor] | None = None):
        """`eig`: the eigendecomposition (ascending values, vectors) of D0ᵀD0 where the caller already has it."""
        self.tau = float(tau)
        self.D0 = D0.to(torch.float64)
        lam, V = eig if eig is not None else torch.linalg.eigh(self.D0.transpose(0, 1) @ self.D0)
        self.lam0, self.V0 = lam, V
        self.ok = bool(lam[-1] <= tau * tau * (1 + 1e-10))
        self.D = self.D0.clone()
        self.X: list[torch.Tensor] = []
        self.Y: list[torch.Tensor] = []
        self.ZY: list[torch.Tensor] = []
        self.ZX: list[torch.Tensor] = []

    @staticmethod
    def _S(gap: torch.Tensor, Z: torch.Tensor, Minv: torch.Tensor) -> torch.Tensor:
        """S(λ) over the rows of Z whose gaps λ − λ_0 are given."""
        S = Z.transpose(0, 1) @ (Z / gap.unsqueeze(-1)) - Minv
        return 0.5 * (S + S.transpose(0, 1))

    def step(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
        """P(D + a bᵀ) (a: (rows,), b: (cols,)), also the tracker's new iterate; None: project densely instead."""
        if not self.ok:
            return None
        tau2 = self.tau * self.tau
        Dp = torch.addr(self.D, a, b)
        X, Y = self.X + [a], self.Y + [b]
        ZY = self.ZY + [self.V0.transpose(0, 1) @ b]
        ZX = self.ZX + [self.V0.transpose(0, 1) @ (self.D0.transpose(0, 1) @ a)]
        r = len(X)
        Xm = torch.stack(X, -1)
        Z = torch.cat([torch.stack(ZY, -1), torch.stack(ZX, -1)], -1)  # (b, 2r)
        eye = torch.eye(r, dtype=torch.float64)
        XtX = Xm.transpose(0, 1) @ Xm
        zero = torch.zeros(r, r, dtype=torch.float64)
        Minv = torch.cat([torch.cat([zero, eye], 1), torch.cat([eye, -XtX], 1)], 0)
        lo = tau2 * (1 + self.THRESH)
        if not lo > float(self.lam0[-1]):
            return None

        def count(lam: float) -> int:
            # Eigenvalues of Λ_0 within NEAR of lam are poles whose terms in S, ~1/(lam − λ_0) up to 1e15, drown its
            # inertia in rounding; they stay apart as a block of the bordered matrix
            # K = [[−(lam − Λ_N), Z_N], [Z_Nᵀ, S_F(lam)]] (S_F: S without them), whose inertia equals S's (the same
            # Schur complement, taken in two steps) and whose entries are all moderate.
            gap = lam - self.lam0
            near = gap <= self.NEAR * lam
            K = self._S(gap[~near], Z[~near], Minv)
            if bool(near.any()):
                ZN = Z[near]
                K = torch.cat([torch.cat([-torch.diag(gap[near]), ZN], 1), torch.cat([ZN.transpose(0, 1), K], 1)], 0)
            return int((torch.linalg.eigvalsh(K) > 0).sum()) - r

        c = count(lo)
        if c < 0:
            return None
        if c == 0:
            out = Dp
        elif c > 1:
            return None
        else:
            nb = float(a.norm() * b.norm())
            hi = (math.sqrt(lo) + nb) ** 2 * (1 + 1e-12)
            if count(hi) != 0:
                return None
            lam = hi
            y = None
            pole = float(self.lam0[-1])  # S's nearest pole below the root (lo > pole was checked above)
            last = math.inf  # the previous step, relative to lambda
            for _ in range(100):
                ev, vecs = torch.linalg.eigh(self._S(lam - self.lam0, Z, Minv))
                phi, y = float(ev[r - 1]), vecs[:, r - 1]
                if phi > 0:
                    lo = lam
                elif phi < 0:
                    hi = lam
                else:
                    break
                w = (Z @ y) / (lam - self.lam0)
                dphi = -float((w * w).sum())
                new = lam - phi / dphi if dphi < 0 else math.nan
                step = abs(new - lam) / lam
                # Converged at 1e-10, or where Newton's steps stop shrinking quadratically below 1e-6: phi's rounding
                # floor (about 1e-9 relative in lambda), where they only wander; Rayleigh-Ritz below finishes either way
                if step <= 1e-10 or (step <= 1e-6 and step > 0.1 * last):
                    lam = new if lo <= new <= hi else lam
                    break
                if not lo < new < hi:
                    # Newton from the right overshoots (phi is convex there); the root is often near the pole, so
                    # bisect geometrically about it rather than arithmetically
                    new = pole + math.sqrt((lo - pole) * (hi - pole))
                if hi - lo <= 1e-10 * hi:
                    lam = new
                    break
                lam, last = new, abs(new - lam) / lam
            else:
                return None
            # Rayleigh-Ritz on span V_0 (λ − Λ_0)⁻¹ Z = range((G' − λ)⁻¹ Z) (a shift-and-invert block step, which holds
            # the eigenvector at the root): first on the structured Gram Λ_0 + Z M Zᵀ (cheap), then at that Ritz value
            # on D' itself, which gives the vector to rounding rather than to the conditioning of S
            M = torch.cat([torch.cat([XtX, eye], 1), torch.cat([eye, zero], 1)], 0)
            Bx, _ = torch.linalg.qr(Z / (lam - self.lam0).unsqueeze(-1))  # coordinates in V_0
            BZ = Bx.transpose(0, 1) @ Z
            H = Bx.transpose(0, 1) @ (self.lam0.unsqueeze(-1) * Bx) + BZ @ M @ BZ.transpose(0, 1)
            lam = float(torch.linalg.eigvalsh(0.5 * (H + H.transpose(0, 1)))[-1])
            if not lam > float(self.lam0[-1]):
                return None
            Bx, _ = torch.linalg.qr(Z / (lam - self.lam0).unsqueeze(-1))
            DB = Dp @ (self.V0 @ Bx)
            hv, hw = torch.linalg.eigh(DB.transpose(0, 1) @ DB)
            lam = float(hv[-1])
            if not lam > tau2 * (1 + self.THRESH):
                return None
            x = Bx @ hw[:, -1]
            x = x / x.norm()
            v = self.V0 @ x
            w = Dp @ v
            res = Dp.transpose(0, 1) @ w - lam * v
            if not bool(res.norm() <= 1e-12 * lam):
                return None
            f = self.tau / math.sqrt(lam) - 1
            out = torch.addr(Dp, w, v, alpha=f)
            X, Y = X + [f * w], Y + [v]
            ZY = ZY + [x]
            ZX = ZX + [self.V0.transpose(0, 1) @ (self.D0.transpose(0, 1) @ (f * w))]
        self.D, self.X, self.Y, self.ZY, self.ZX = out, X, Y, ZY, ZX
        return out
