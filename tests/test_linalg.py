"""Fast linear-algebra paths against their slow references (LAPACK SVD, full Gaussian matrices)."""

import math

import numpy as np
import pytest
import references
import torch
from scipy import stats

from lemmacheck import linalg as la


def _mats(seed, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("shape", [(3, 40, 40), (2, 50, 17), (2, 17, 50), (5, 1, 9), (4, 2, 3, 8), (2, 130, 100),
                                   (3, 64, 200)])
def test_spectral_norm_never_below_svd_and_within_rounding(shape):
    W = _mats(1, *shape)
    fast, method = la.spectral_norm(W)
    exact = la.spectral_norm_exact_svd(W)
    assert method.startswith("gram-eigvalsh")
    assert fast.shape == exact.shape
    assert bool((fast >= exact).all()), "an upper-bound claim must never see an under-estimate"
    assert bool(((fast - exact) / exact <= 1e-11).all())


@pytest.mark.parametrize("shape", [(2, 300, 256), (2, 256, 300), (2, 1, 400, 200), (2, 200, 400)])
def test_gram_by_syrk_equals_the_product_within_its_rounding_bound(shape, monkeypatch):
    """Large matrices take the syrk path (a different summation order): the Gram must be the smaller product,
    exactly symmetric, and within gram_rounding_bound of the GEMM product; a non-contiguous view too."""
    W = _mats(7, *shape)
    calls = []
    monkeypatch.setattr(la, "_sym_gram", lambda A, f=la._sym_gram: calls.append(A.shape) or f(A))
    for M in (W, W.transpose(-1, -2).contiguous().transpose(-1, -2)):
        calls.clear()
        G = la.gram(M)
        assert len(calls) == math.prod(shape[:-2])  # one syrk a matrix
        ref = M.transpose(-1, -2) @ M if shape[-1] <= shape[-2] else M @ M.transpose(-1, -2)
        assert G.shape == ref.shape
        assert torch.equal(G, G.transpose(-1, -2))
        err = (G - ref).abs().amax((-1, -2))
        assert bool((err <= 2 * la.gram_rounding_bound(M)).all())


@pytest.mark.parametrize("shape", [(3, 300, 256), (2, 1, 100, 700), (2, 700, 100)])
def test_spectral_norm_reads_syrks_triangle_with_the_same_numbers(shape, monkeypatch):
    """Where gram's syrk and top_eigenvalue's syevx both apply, spectral_norm hands syevx syrk's upper triangle
    itself (no mirror, no copy): bit for bit the norms of top_eigenvalue(gram(W)), one syrk a matrix."""
    W = _mats(9, *shape)
    calls = []
    monkeypatch.setattr(la, "_sym_gram", lambda A, mirror=True, f=la._sym_gram: calls.append(mirror) or f(A, mirror))
    lam = la._top_gram_eigenvalue(W)
    assert calls == [False] * math.prod(shape[:-2])
    assert torch.equal(lam, la.top_eigenvalue(la.gram(W)))
    assert torch.equal(la.spectral_norm(W)[0], la._norm_rounded_up(lam, W))


def test_top_eigenvalue_by_syevx_equals_eigvalsh_and_leaves_its_input(monkeypatch):
    """From TOP_EIG_MIN_N a CPU batch goes to LAPACK syevx one matrix at a time: the same top eigenvalue as torch's
    eigvalsh to rounding (a random Gram, a degenerate top: the identity, zero, a non-contiguous view), its input
    untouched; below the threshold and under autograd, torch's eigvalsh."""
    from scipy.linalg import lapack
    calls = []
    monkeypatch.setattr(lapack, "dsyevx", lambda *a, f=lapack.dsyevx, **k: calls.append(1) or f(*a, **k))
    n = la.TOP_EIG_MIN_N
    A = _mats(8, 2, n, 3 * n)
    G = torch.cat([la.gram(A.transpose(-1, -2)), torch.eye(n).unsqueeze(0).double(),
                   torch.zeros(1, n, n, dtype=torch.float64)])
    G = G.transpose(-1, -2).contiguous().transpose(-1, -2)  # a non-contiguous view of the same symmetric matrices
    before = G.clone()
    top = la.top_eigenvalue(G)
    assert len(calls) == 4 and torch.equal(G, before)
    ref = torch.linalg.eigvalsh(G)[..., -1]
    assert bool(((top - ref).abs() <= 4 * n * 1.1e-16 * ref.abs().clamp_min(1e-300)).all()), (top, ref)
    assert top[2].item() == pytest.approx(1.0, rel=1e-15) and top[3].item() == 0.0
    calls.clear()
    small = la.gram(_mats(9, 3, n - 1, n - 1))
    torch.testing.assert_close(la.top_eigenvalue(small), torch.linalg.eigvalsh(small)[..., -1], rtol=0, atol=0)
    W = _mats(10, n, n).requires_grad_()
    la.top_eigenvalue(la.gram(W)).backward()  # differentiable: torch's path
    assert len(calls) == 0 and W.grad is not None
    bad = G.clone()
    bad[1, 2, 3] = bad[1, 3, 2] = float("nan")
    with pytest.raises(ArithmeticError, match="non-finite"):
        la.top_eigenvalue(bad)


def test_operator_norm_rounds_up_and_differentiates_as_the_svd():
    """An upper-bound claim's quantity: never below the SVD's norm and within rounding of it, under autograd too
    (the eigensolver that also returns the vector rounds differently); its gradient there is the SVD's (u1 v1^T from the Gram's top eigenpair), tall and wide matrices,
    below and above syevx's order (TOP_EIG_MIN_N), and a finite subgradient for a zero matrix."""
    for shape in [(12, 3, 2, 90, 70), (12, 4, 120, 50), (12, 5, 30, 20), (12, 2, 8, 3)]:
        W = _mats(*shape)
        fast = la.operator_norm(W)
        exact = la.spectral_norm_exact_svd(W)
        assert bool((fast >= exact).all()) and bool(((fast - exact) / exact <= 1e-11).all())
        Wg = W.clone().requires_grad_()
        Wr = W.clone().requires_grad_()
        vg, vr = la.operator_norm(Wg), torch.linalg.matrix_norm(Wr, ord=2)
        weights = _mats(13, *vg.shape)
        (weights * vg).sum().backward()
        (weights * vr).sum().backward()
        assert bool((vg >= exact).all()) and bool(((vg - fast).abs() / fast <= 1e-12).all())
        assert float((Wg.grad - Wr.grad).abs().max()) <= 1e-10 * float(Wr.grad.abs().max())
    Z = torch.zeros(2, 70, 90, dtype=torch.float64, requires_grad=True)
    la.operator_norm(Z).sum().backward()
    assert bool(torch.isfinite(Z.grad).all())


def test_spectral_norm_rank_deficient_and_float32():
    u, v = _mats(2, 30, 1), _mats(3, 1, 20)
    W = torch.stack([u @ v, torch.zeros(30, 20)])  # rank one, and zero
    fast, _ = la.spectral_norm(W)
    assert fast[0].item() == pytest.approx(u.norm().item() * v.norm().item(), rel=1e-12)
    assert 0 <= fast[1].item() < 1e-150
    W32 = _mats(4, 3, 25, 25, dtype=torch.float32)
    fast32, _ = la.spectral_norm(W32)
    assert fast32.dtype == torch.float32
    torch.testing.assert_close(fast32.double(), la.spectral_norm_exact_svd(W32.double()), rtol=1e-6, atol=0)


@pytest.mark.parametrize("shape", [(2, 700, 640), (1, 640, 900)])
def test_spectral_norm_krylov_path_is_certified_from_above(shape):
    """Above exact_max: block Krylov, certified by Cholesky; on Gaussian matrices (a cluster of near-equal top
    singular values, where single-vector Lanczos from two starts disagreed) never below the SVD, within 1e-9."""
    W = _mats(5, *shape)
    fast, method = la.spectral_norm(W, exact_max=100)
    exact = la.spectral_norm_exact_svd(W)
    assert method == "block-krylov, cholesky-certified (rounded up)"
    assert bool((fast >= exact).all()), "an upper-bound claim must never see an under-estimate"
    assert bool(((fast - exact) / exact <= 1e-9).all())


def test_spectral_norm_krylov_path_falls_back_when_the_certificate_fails(monkeypatch):
    """A Krylov space that missed the top eigenvalue (here: handed the second one) cannot pass the Cholesky
    certificate; the dense eigensolver then decides, rounded up."""
    W = _mats(8, 300, 240)
    sv = torch.linalg.svdvals(W)
    monkeypatch.setattr(la, "_krylov_top", lambda G: (float(sv[1]) ** 2, 0.0))
    fast, method = la.spectral_norm(W, exact_max=100)
    assert method == "gram-eigvalsh (rounded up)"
    assert float(sv[0]) <= float(fast) <= float(sv[0]) * (1 + 1e-11)


def test_spectral_norm_at_most_matches_exact_decision():
    W = _mats(6, 40, 30, 20)
    exact = la.spectral_norm_exact_svd(W)
    mid = exact.sort().values[19:21].mean().item()  # between two norms: decided by the certificate or exactly
    for c in (mid, exact.min().item() * 0.9, exact.max().item() * 1.1):
        assert torch.equal(la.spectral_norm_at_most(W, c), exact <= c)
    # at the boundary, within rounding, the certificate falls back to the rounded-up exact norm: never "<= c"
    # for a matrix whose norm exceeds c
    for r in range(3):
        s = exact[r].item()
        assert not bool(la.spectral_norm_at_most(W[r:r + 1], s * (1 - 1e-9)))
        assert bool(la.spectral_norm_at_most(W[r:r + 1], s * (1 + 1e-9)))


def test_spectral_norm_at_most_certifies_by_frobenius_without_a_gram(monkeypatch):
    """A batch whose Frobenius norms are all below c (less rounding) is decided without a Gram; a batch with one
    above takes the Cholesky path, whose decisions are the exact ones (a rank-one matrix: ||W||_2 = ||W||_F, so just
    above the Frobenius margin the certificate still says no)."""
    W = _mats(5, 4, 30, 20)
    fro = torch.linalg.vector_norm(W, dim=(-2, -1))
    grams = []
    monkeypatch.setattr(la, "gram", lambda M: grams.append(1) or M.transpose(-1, -2) @ M)
    assert bool(la.spectral_norm_at_most(W, fro.max().item() * 1.001).all()) and not grams
    exact = la.spectral_norm_exact_svd(W)
    c = exact.max().item() * 1.001  # above every spectral norm, below the Frobenius norms
    assert c < fro.min().item()
    assert bool(la.spectral_norm_at_most(W, c).all()) and grams
    u, v = torch.randn(30, dtype=torch.float64), torch.randn(20, dtype=torch.float64)
    R1 = torch.outer(u, v).unsqueeze(0)
    s = torch.linalg.vector_norm(R1).item()
    assert not bool(la.spectral_norm_at_most(R1, s * (1 - 1e-9)))
    assert bool(la.spectral_norm_at_most(R1, s * (1 + 1e-9)))

@pytest.mark.parametrize("shape", [(3, 30, 30), (2, 40, 12), (2, 12, 40)])
def test_clip_spectral_matches_svd_projection(shape):
    D = _mats(7, *shape)
    tau = la.spectral_norm_exact_svd(D).median().item() * 0.6
    fast, slow = la.clip_spectral(D, tau), la.clip_spectral_svd(D, tau)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12 * D.abs().max().item())
    assert bool((la.spectral_norm_exact_svd(fast) <= tau * (1 + 1e-12)).all())
    small = D / la.spectral_norm_exact_svd(D).reshape(-1, 1, 1) * tau * 0.5  # inside the ball: unchanged
    torch.testing.assert_close(la.clip_spectral(small, tau), small, rtol=0, atol=1e-14)


@pytest.mark.parametrize("shape, clustered", [((2, 64, 64), False), ((2, 64, 64), True), ((2, 50, 20), True),
                                               ((1, 20, 50), True), ((3, 40, 40), False)])
def test_clip_spectral_subset_equals_all_eigenpairs_path(shape, clustered):
    """clip_spectral (only the Gram's eigenpairs above tau², syevr) against clip_spectral_eigh (all eigenpairs)
    and the SVD projection, including projected-ascent iterates: a cluster of singular values at tau (the
    clipped directions) plus a rank-one step, and a matrix with some values exactly at tau."""
    D = _mats(11, *shape)
    tau = la.spectral_norm_exact_svd(D).median().item() * 0.6
    if clustered:
        D = la.clip_spectral_svd(D, tau)  # many singular values exactly at tau
        g = torch.Generator().manual_seed(5)
        u = torch.randn(shape[0], shape[1], 1, generator=g, dtype=torch.float64)
        v = torch.randn(shape[0], 1, shape[2], generator=g, dtype=torch.float64)
        D = D + 0.3 * tau * u @ v / (u.norm(dim=1, keepdim=True) * v.norm(dim=2, keepdim=True))
    fast, eigh, svd = la.clip_spectral(D, tau), references.clip_spectral_eigh(D, tau), la.clip_spectral_svd(D, tau)
    torch.testing.assert_close(fast, eigh, rtol=0, atol=1e-12 * D.abs().max().item())
    torch.testing.assert_close(fast, svd, rtol=0, atol=1e-12 * D.abs().max().item())
    assert bool((la.spectral_norm_exact_svd(fast) <= tau * (1 + 1e-12)).all())


@pytest.mark.parametrize("shape", [(3, 256, 256), (2, 300, 256), (2, 256, 300), (2, 2, 128, 600), (4, 16, 256)])
def test_clip_spectral_equals_mirrored_gram_path_bit_for_bit(shape):
    """At syrk's sizes clip_spectral hands syevr syrk's upper triangle as the lower triangle of its transpose, where it
    mirrored the Gram into a tensor first: the same eigenpairs, so the same projection bit for bit (tall, wide,
    batched, and a small matrix that still takes `gram`'s product); a wrong triangle fails it."""
    D = _mats(21, *shape) / 30
    tau = 0.8 * la.spectral_norm_exact_svd(D).min().item()
    fast = la.clip_spectral(D, tau)
    assert torch.equal(fast, references.clip_spectral_mirrored(D, tau))
    assert not torch.equal(fast, D)


@pytest.mark.parametrize("m, seed, start", [(120, 0, "random"), (160, 1, "random"), (90, 2, "clustered"),
                                            (150, 3, "rank-one")])
def test_ball_tracker_equals_the_dense_projection_along_rank_one_ascent(m, seed, start):
    """linalg.BallTracker (inertia count + Newton + Rayleigh-Ritz on the structured Gram) against clip_spectral
    (dense syevr) and the SVD projection, step by step along 25 rank-one steps: from a random start on the sphere,
    from an iterate with a cluster of singular values exactly at tau, and from a rank-one start. Steps alternate
    between random and along the current top direction (where the clipped eigenvalue is closest to the cluster)."""
    g = torch.Generator().manual_seed(seed)
    tau = 0.7
    D = torch.randn(m, m, generator=g, dtype=torch.float64)
    if start == "clustered":
        D = la.clip_spectral_svd(D / la.spectral_norm_exact_svd(D) * 3 * tau, tau)  # many values exactly at tau
    elif start == "rank-one":
        D = torch.outer(torch.randn(m, generator=g, dtype=torch.float64), torch.randn(m, generator=g,
                                                                                      dtype=torch.float64))
    D = D * (tau / la.spectral_norm_exact_svd(D)) if start != "clustered" else D
    tr = la.BallTracker(D, tau)
    assert tr.ok
    dense, clipped, fallbacks = D.clone(), 0, 0
    for k in range(25):
        if k % 2:
            U, _, Vh = torch.linalg.svd(dense)
            a, b = U[:, 0] * 0.2 * tau, Vh[0] + 0.1 * torch.randn(m, generator=g, dtype=torch.float64)
        else:
            a, b = torch.randn(m, generator=g, dtype=torch.float64), torch.randn(m, generator=g, dtype=torch.float64)
            a = a * (0.3 * tau / (a.norm() * b.norm()))
        ref = la.clip_spectral(dense + torch.outer(a, b), tau)
        torch.testing.assert_close(ref, la.clip_spectral_svd(dense + torch.outer(a, b), tau), rtol=0, atol=1e-13)
        got = tr.step(a, b)
        if got is None:  # the tracker declined: the caller projects densely and restarts it there
            fallbacks += 1
            tr = la.BallTracker(ref, tau)
        else:
            torch.testing.assert_close(got, ref, rtol=0, atol=1e-13 * tau)
            clipped += int(la.spectral_norm_exact_svd(dense + torch.outer(a, b)) > tau)
        dense = ref
    # a start with a cluster of singular values exactly at tau makes the inertia count unreliable right above tau²
    # (S(λ) has poles there): the tracker declines more often (correctly: every result it gives is exact)
    assert clipped >= 10 and (fallbacks <= 2 or start == "clustered") and fallbacks < 25
    # outside the ball at the start: the tracker declines rather than guess
    assert la.BallTracker(D * 1.01, tau).step(a, b) is None


@pytest.mark.parametrize("m, seed, tau", [(128, 0, 0.01), (256, 0, 1e-4), (256, 1, 0.01)])
def test_ball_tracker_counts_right_next_to_the_poles_of_a_start_on_the_sphere(m, seed, tau):
    """A start scaled onto the sphere as zou2018's ascent scales it (the Gram's eigendecomposition times
    (tau / ||D||)², ||D|| rounded up: max Λ_0 within 1e-15 of tau²), then 60 rank-one steps alternating a random
    direction and the top one, each compared with the dense projection. Right above tau² the secular matrix S has
    entries ~1/(λ − max Λ_0) ~ 1e15 and its computed inertia missed eigenvalues far above tau² (these cases
    returned iterates outside the ball, up to 2.4 tau in zou2018 Lemma B.2's ascent); the count now keeps those
    poles apart in a bordered matrix of moderate entries."""
    g = torch.Generator().manual_seed(seed)
    D = torch.randn(m, m, generator=g, dtype=torch.float64)
    lam, V = torch.linalg.eigh(D.T @ D)
    norm = math.sqrt(float(lam[-1]) + float(la.gram_rounding_bound(D)))
    D = D * (tau / norm)
    tr = la.BallTracker(D, tau, eig=(lam * (tau / norm) ** 2, V))
    dense, accepted = D.clone(), 0
    for k in range(60):
        if k % 2:
            U, _, Vh = torch.linalg.svd(dense)
            a = U[:, 0] * 0.05 * tau * (1 + k % 3)
            b = Vh[0] * 3 + 0.1 * torch.randn(m, generator=g, dtype=torch.float64)
        else:
            a, b = torch.randn(m, generator=g, dtype=torch.float64), torch.randn(m, generator=g, dtype=torch.float64)
            a = a * (0.3 * tau / (a.norm() * b.norm()))
        ref = la.clip_spectral(dense + torch.outer(a, b), tau)
        got = tr.step(a, b)
        if got is None:
            tr = la.BallTracker(ref, tau)
        else:
            accepted += 1
            torch.testing.assert_close(got, ref, rtol=0, atol=1e-12 * tau)
        dense = ref if got is None else got  # the ascent goes on from the tracker's own iterate
    assert accepted >= 40


def test_bidiagonal_norm_equals_svd_of_the_bidiagonal():
    rng = np.random.default_rng(8)
    for k in (1, 2, 7, 60):
        d, e = rng.uniform(0.1, 3, k), rng.uniform(0.1, 3, k - 1)
        B = np.diag(d) + np.diag(e, 1)
        ref = np.linalg.svd(B, compute_uv=False)[0]
        got = la.bidiagonal_norm(d, e)
        assert ref <= got <= ref * (1 + 1e-12)


@pytest.mark.parametrize("a,b", [(30, 20), (12, 40), (25, 25)])
def test_gaussian_spectral_norm_has_the_law_of_a_full_gaussian_matrix(a, b):
    """Two-sample Kolmogorov-Smirnov test (fixed seeds, so deterministic) between the bidiagonal sampler and
    LAPACK on fully drawn matrices; 3000 draws each detect a shift of ~4% of a standard deviation."""
    R = 3000
    fast, method = la.gaussian_spectral_norm(torch.Generator().manual_seed(9), (R,), a, b, scale=0.5)
    assert "exact in distribution" in method
    slow = la.spectral_norm_exact_svd(0.5 * _mats(10, R, a, b))
    assert stats.ks_2samp(fast.numpy(), slow.numpy()).pvalue > 1e-3
    # and both sit at the Gaussian edge sqrt(a) + sqrt(b) (Gordon: E s_max <= sqrt(a) + sqrt(b))
    assert fast.mean().item() <= 0.5 * (math.sqrt(a) + math.sqrt(b))
    assert abs(fast.mean().item() - slow.mean().item()) < 0.02 * slow.mean().item()


def test_gaussian_spectral_norm_is_reproducible_and_shaped():
    x1, _ = la.gaussian_spectral_norm(torch.Generator().manual_seed(11), (4, 3), 9, 7)
    x2, _ = la.gaussian_spectral_norm(torch.Generator().manual_seed(11), (4, 3), 9, 7)
    x3, _ = la.gaussian_spectral_norm(torch.Generator().manual_seed(12), (4, 3), 9, 7)
    assert x1.shape == (4, 3) and torch.equal(x1, x2) and not torch.equal(x1, x3)


@pytest.mark.parametrize("n,a,b", [(4, 30, 25), (3, 2, 40), (5, 60, 5)])
def test_low_rank_spectral_norm_value_and_gradient_match_the_formed_matrix(n, a, b):
    A0, B0 = _mats(13, 2, n, a), _mats(14, 2, n, b)
    A1, B1 = A0.clone().requires_grad_(True), B0.clone().requires_grad_(True)
    fast = la.low_rank_spectral_norm(A1, B1)
    A2, B2 = A0.clone().requires_grad_(True), B0.clone().requires_grad_(True)
    slow = torch.linalg.matrix_norm(A2.transpose(-1, -2) @ B2, ord=2)
    torch.testing.assert_close(fast, slow, rtol=1e-12, atol=0)
    fast.sum().backward()
    slow.sum().backward()
    torch.testing.assert_close(A1.grad, A2.grad, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(B1.grad, B2.grad, rtol=1e-9, atol=1e-12)
