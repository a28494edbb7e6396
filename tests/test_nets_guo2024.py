"""The guo2024 setting against plain, one-network-at-a-time implementations of the paper's formulas.

Every draw has a fixed seed, so each test is deterministic. Statistical checks state their false-alarm rate
(two-sided level 1e-6 where a test has an exact null distribution) or the CLT tolerance they use.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper
from scipy import stats

from lemmacheck.context import Context
from lemmacheck.search import greedy_flip_vector

net = paper("guo2024").network
q = paper("guo2024").quantities

ALPHAS = [-1.0, 0.0, 0.3, -2.5, -0.1]
LEVEL = 1e-6  # two-sided false-alarm rate of each statistical test with an exact null
Z = stats.norm.isf(LEVEL / 2)  # 4.89


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def _setup(R=2, n=3, p=4, m=7, d=2, L=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    A, Ws, B = net.init(g, R, p, m, d, L)
    X = _unit(torch.randn(R, n, p, generator=g, dtype=torch.float64))
    Y = torch.randn(R, n, d, generator=g, dtype=torch.float64)
    return A, Ws, B, X, Y


# --------------------------------------------------------------------------- reference implementation


def ref_sigma(t, alpha):
    """(2) coordinate by coordinate."""
    s = math.sqrt(1 + alpha ** 2)
    return t / s if t >= 0 else alpha * t / s


def ref_D(g, alpha):
    """(18): D_x = Diag((1{x_j >= 0} + α 1{x_j < 0})/√(1+α²))."""
    s = math.sqrt(1 + alpha ** 2)
    return torch.diag(torch.tensor([(1.0 if t >= 0 else alpha) / s for t in g.tolist()], dtype=torch.float64))


def reference_network(A, Ws, B, x, alpha):
    """§2 for ONE network and ONE input: h_0 = Ax, g_l = W_l h_{l-1}, h_l = σ̃_α(g_l), ŷ = B h_L."""
    hs, gs = [A @ x], [A @ x]
    for W in Ws:
        g = W @ hs[-1]
        gs.append(g)
        hs.append(torch.tensor([ref_sigma(t, alpha) for t in g.tolist()], dtype=torch.float64))
    return hs, gs, B @ hs[-1]


@pytest.mark.parametrize("alpha", ALPHAS)
def test_forward_matches_reference(alpha):
    A, Ws, B, X, _ = _setup(seed=1)
    fwd = net.forward(A, Ws, B, X, alpha)
    for r in range(X.shape[0]):
        for i in range(X.shape[1]):
            hs, gs, y = reference_network(A[r], [W[r] for W in Ws], B[r], X[r, i], alpha)
            for l in range(len(Ws) + 1):
                torch.testing.assert_close(fwd.h[l][r, i], hs[l], rtol=1e-13, atol=1e-14)
                torch.testing.assert_close(fwd.g[l][r, i], gs[l], rtol=1e-13, atol=1e-14)
            torch.testing.assert_close(fwd.out[r, i], y, rtol=1e-13, atol=1e-14)
            # Matrix form (L441): h_l = D_l W_l D_{l-1} ... D_1 W_1 A x.
            for l in range(1, len(Ws) + 1):
                M = A[r]
                for k in range(1, l + 1):
                    M = ref_D(gs[k], alpha) @ Ws[k - 1][r] @ M
                torch.testing.assert_close(M @ X[r, i], hs[l], rtol=1e-12, atol=1e-13)


def test_slopes_are_the_papers_D():
    A, Ws, B, X, _ = _setup(seed=2)
    for alpha in ALPHAS:
        fwd = net.forward(A, Ws, B, X, alpha)
        for l in range(1, len(Ws) + 1):
            for r in range(X.shape[0]):
                for i in range(X.shape[1]):
                    torch.testing.assert_close(torch.diag(fwd.slope(l)[r, i]), ref_D(fwd.g[l][r, i], alpha))
    with pytest.raises(ValueError):
        net.forward(A, Ws, B, X, 1.0)


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 0.5])
def test_back_operators_and_per_sample_gradient_match_reference(alpha):
    """Back_{i,a} = B D_{i,L} W_L ... D_{i,a} W_a and ∇_{W_l} loss_i = D_{i,l} Back_{i,l+1}^T e_i h_{i,l-1}^T (L455-462)."""
    A, Ws, B, X, Y = _setup(seed=3)
    fwd = net.forward(A, Ws, B, X, alpha)
    backs = net.back_matrices(Ws, B, fwd)
    J = net.back_operators(Ws, B, fwd)
    L = len(Ws)
    for r in range(X.shape[0]):
        for i in range(X.shape[1]):
            hs, gs, y = reference_network(A[r], [W[r] for W in Ws], B[r], X[r, i], alpha)
            for a in range(1, L + 2):
                M = B[r]
                for k in range(L, a - 1, -1):
                    M = M @ ref_D(gs[k], alpha) @ Ws[k - 1][r]
                torch.testing.assert_close(backs[a - 1][r, i], M, rtol=1e-12, atol=1e-13)
                if a <= L + 1 and a >= 2:  # J[l] = D_l Back_{l+1}^T with l = a - 1
                    torch.testing.assert_close(J[a - 1][r, i], ref_D(gs[a - 1], alpha) @ M.T, rtol=1e-12, atol=1e-13)
    # Summed per-sample gradients are the closed-form loss gradient (½-loss).
    grads, _, _ = net.loss_gradients(A, Ws, B, X, Y, alpha)
    for l in range(1, L + 1):
        for r in range(X.shape[0]):
            total = torch.zeros_like(Ws[0][r])
            for i in range(X.shape[1]):
                hs, gs, y = reference_network(A[r], [W[r] for W in Ws], B[r], X[r, i], alpha)
                e = y - Y[r, i]
                total += torch.outer(J[l][r, i] @ e, hs[l - 1])
            torch.testing.assert_close(grads[l - 1][r], total, rtol=1e-12, atol=1e-13)


# --------------------------------------------------------------------------- autograd


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("half", [True, False])
def test_loss_gradients_match_autograd(alpha, half):
    A, Ws, B, X, Y = _setup(R=3, n=4, p=5, m=9, d=2, L=3, seed=4)
    grads, loss, _ = net.loss_gradients(A, Ws, B, X, Y, alpha, half=half)
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    ref = net.loss(net.forward(A, Wr, B, X, alpha).out, Y, half)
    auto = torch.autograd.grad(ref.sum(), Wr)
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-12, atol=0)
    for gc, ga in zip(grads, auto):
        torch.testing.assert_close(gc, ga, rtol=1e-10, atol=1e-12)
    # The main-text loss is exactly twice the appendix one, and so is its gradient.
    if not half:
        _, l_half, _ = net.loss_gradients(A, Ws, B, X, Y, alpha, half=True)
        torch.testing.assert_close(loss, 2 * l_half, rtol=1e-14, atol=0)


def test_layer_gram_is_the_jacobian_gram():
    """K_l = J_l J_l^T with J_l = ∂(ŷ_{i,a})/∂W_l from autograd, and ||Σ_i G_{i,l}(v_i)||_F² = vᵀ K_l v (D9)."""
    A, Ws, B, X, _ = _setup(R=2, n=3, p=4, m=6, d=2, L=3, seed=5)
    alpha = -0.7
    fwd = net.forward(A, Ws, B, X, alpha)
    J = net.back_operators(Ws, B, fwd)
    g = torch.Generator().manual_seed(6)
    for l in range(1, 4):
        K = net.layer_gram(fwd, J, l)
        for r in range(2):
            def outs(Wl, r=r, l=l):
                Wt = [W[r:r + 1] for W in Ws]
                Wt[l - 1] = Wl.unsqueeze(0)
                return net.forward(A[r:r + 1], Wt, B[r:r + 1], X[r:r + 1], alpha).out.reshape(-1)
            Jac = torch.autograd.functional.jacobian(outs, Ws[l - 1][r]).reshape(6, -1)
            torch.testing.assert_close(K[r], Jac @ Jac.T, rtol=1e-10, atol=1e-11)
        v = torch.randn(2, 3, 2, generator=g, dtype=torch.float64)
        zs = net.backward_vectors(Ws, B, fwd, v)
        G = torch.einsum("rni,rnj->rij", zs[l], fwd.h[l - 1])
        quad = torch.einsum("ra,rab,rb->r", v.reshape(2, -1), K, v.reshape(2, -1))
        torch.testing.assert_close((G ** 2).sum(dim=(-1, -2)), quad, rtol=1e-10, atol=0)


# --------------------------------------------------------------------------- initialisation law


def _chi2_two_sided(x: torch.Tensor, var: float) -> float:
    """p-value of H0: entries iid N(0, var), from Σ x²/var ~ χ²(N)."""
    s = float((x.double() ** 2).sum() / var)
    N = x.numel()
    return 2 * min(stats.chi2.sf(s, N), stats.chi2.cdf(s, N))


def test_init_variances():
    """A ~ N(0, 1/m), W_l ~ N(0, 2/m), B ~ N(0, 1/d) (Algorithm 1): χ² and mean z-tests at level 1e-6 each.

    The tests have teeth: the neighbouring conventions (1/m for W, 2/m for A, 1/m for B) are rejected."""
    m, p, d = 48, 5, 3
    A, Ws, B = net.init(torch.Generator().manual_seed(7), 40, p, m, d, 3)
    for x, var in [(A, 1 / m), (torch.stack(Ws), 2 / m), (B, 1 / d)]:
        assert _chi2_two_sided(x, var) > LEVEL
        assert abs(float(x.mean())) * math.sqrt(x.numel() / var) < Z
    assert _chi2_two_sided(torch.stack(Ws), 1 / m) < LEVEL
    assert _chi2_two_sided(A, 2 / m) < LEVEL
    assert _chi2_two_sided(B, 1 / m) < LEVEL


def _v_alpha(alpha):
    """D4: Var(||h_l||²/||h_{l-1}||²) = v(α)/m, v(α) = 6(1+α⁴)/(1+α²)² - 1."""
    return 6 * (1 + alpha ** 4) / (1 + alpha ** 2) ** 2 - 1


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 0.5])
def test_layer_ratio_law_both_samplers(alpha):
    """E Δ_l = 1 (E3: the 1/(1+α²) rescaling preserves the norm) and Var Δ_l = v(α)/m (D4), for the full network
    and the Gaussian-conditioning sampler. z-tests at level 1e-6; the variance test uses the sample fourth moment."""
    m, L, R = 32, 2, 6000
    g = torch.Generator().manual_seed(8)
    X = _unit(torch.randn(R, 1, 6, generator=g, dtype=torch.float64))
    A, Ws, B = net.init(g, R, 6, m, 1, L)
    samples = {"full": net.forward(A, Ws, B, X, alpha).h, "conditional": net.conditional_features(g, X, m, L, alpha)}
    for name, hs in samples.items():
        for l in range(1, L + 1):
            D = (hs[l].norm(dim=-1) ** 2 / hs[l - 1].norm(dim=-1) ** 2).flatten().numpy()
            assert abs(D.mean() - 1) / (D.std() / math.sqrt(R)) < Z, (name, l)
            c = D - D.mean()
            se_var = math.sqrt(((c ** 2 - c.var()) ** 2).mean() / R)
            assert abs(c.var() - _v_alpha(alpha) / m) < Z * se_var, (name, l, c.var() * m, _v_alpha(alpha))
        h0 = hs[0].norm(dim=-1).flatten().numpy() ** 2  # m ||Ax||² ~ χ²(m)
        assert stats.kstest(m * h0, stats.chi2(m).cdf).pvalue > LEVEL


@pytest.mark.parametrize("alpha", [-1.0, 0.5])
def test_conditional_back_operators_match_the_full_network_in_law(alpha):
    """The Gaussian-conditioning sampler of (h_l, J_l = D_l Back_{l+1}^T) against the full network (two-sample KS at
    1e-6, R = 3000 each, n = 2 inputs, d = 2, m = 10): per layer the top singular value of J_{1,l}, a column's norm,
    two samples' columns' inner product, and <h_{1,l-1}, g-part> through ||h_{1,l-1}|| ||J_{1,l} e_1||."""
    m, L, R, n, d = 10, 2, 3000, 2, 2
    g = torch.Generator().manual_seed(21)
    X = _unit(torch.randn(R, n, 6, generator=g, dtype=torch.float64))
    A, Ws, B = net.init(g, R, 6, m, d, L)
    fwd = net.forward(A, Ws, B, X, alpha)
    full = (fwd.h, net.back_operators(Ws, B, fwd))
    cond = net.conditional_back_operators(g, X, m, d, L, alpha)
    for l in range(L + 1):
        stat = {}
        for name, (hs, J) in {"full": full, "cond": cond}.items():
            stat[name] = [torch.linalg.svdvals(J[l][:, 0])[:, 0], J[l][:, 0, :, 0].norm(dim=-1),
                          (J[l][:, 0, :, 0] * J[l][:, 1, :, 1]).sum(-1), (J[l][:, 0, :, 0] * J[l][:, 0, :, 1]).sum(-1),
                          (hs[max(l - 1, 0)][:, 0] * J[l][:, 0, :, 0]).sum(-1)]
        for k, (a, b) in enumerate(zip(stat["full"], stat["cond"])):
            assert stats.ks_2samp(a.numpy(), b.numpy()).pvalue > LEVEL, (l, k)


# --------------------------------------------------------------------------- kernels


def test_kappa_formulas_against_arccos_and_quadrature():
    """κ1, κ0 against the Cho-Saul arc-cosine kernels at α = 0 (independent formula) and against Monte Carlo
    for α ≠ 0 (z-test, level 1e-6, 1e6 Gaussian pairs)."""
    rho = torch.linspace(-1, 1, 41, dtype=torch.float64)
    phi = torch.arccos(rho)
    relu_k1 = (torch.sin(phi) + (math.pi - phi) * torch.cos(phi)) / math.pi  # 2 E[relu(u) relu(v)]
    torch.testing.assert_close(net.kappa1(rho, 0.0), relu_k1, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(net.kappa0(rho, 0.0), 1 - phi / math.pi, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(net.kappa1(rho, 1 - 1e-12), rho, rtol=1e-9, atol=1e-9)  # c(1) = 0: linear
    g = torch.Generator().manual_seed(9)
    N = 1_000_000
    for alpha in (-1.0, -3.0, 0.4):
        for r in (-0.6, 0.2, 0.9):
            u = torch.randn(N, generator=g, dtype=torch.float64)
            v = r * u + math.sqrt(1 - r * r) * torch.randn(N, generator=g, dtype=torch.float64)
            for f, k in ((net.act, net.kappa1), (net.slope, net.kappa0)):
                s = 2 * f(u, alpha) * f(v, alpha)
                z = (s.mean() - k(torch.tensor(r, dtype=torch.float64), alpha)) / (s.std() / math.sqrt(N))
                assert abs(float(z)) < Z, (alpha, r, float(z))


@pytest.mark.parametrize("alpha", [-1.0, 0.0, -0.4])
def test_feature_kernel_against_wide_network(alpha):
    """Σ_l (closed form) vs ⟨h_{i,l}, h_{j,l}⟩ of width m = 2^15 (exact-in-law sampler), averaged over R = 16.

    Tolerance: 6 standard errors of the replicate mean (per-replicate spread O(√(L/m)) by the CLT) plus a bias
    allowance 10 L/m for the O(L/m) finite-width bias of a smooth function of averages (delta method)."""
    m, L, R = 2 ** 15, 3, 16
    g = torch.Generator().manual_seed(10)
    base = _unit(torch.randn(1, 4, 5, generator=g, dtype=torch.float64))
    base[0, 1] = _unit(base[0, 0] + 0.3 * base[0, 1])  # a correlated pair, to probe ρ near 1
    X = base.expand(R, 4, 5).contiguous()
    hs = net.conditional_features(g, X, m, L, alpha)
    Sig = net.limit_feature_kernels(base[0], L, alpha)
    for l in range(L + 1):
        G = hs[l] @ hs[l].transpose(-1, -2)
        mean, se = G.mean(0), G.std(0) / math.sqrt(R)
        assert bool(((mean - Sig[l]).abs() <= 6 * se + 10 * L / m).all()), (l, (mean - Sig[l]).abs().max())
    # The α-dependence is real: c(-1) = 2 vs c(0) = 1 changes Σ_L by far more than the tolerance.
    other = net.limit_feature_kernels(base[0], L, -1.0 if alpha != -1.0 else 0.0)[L]
    assert float((other - Sig[L]).abs().max()) > 0.03


def test_layer_ntk_against_wide_network():
    """(2d/m) K_l of a full width-1024 network vs Θ_l ⊗ I_d (closed form), R = 8 replicates; tolerance as above
    (6 standard errors + 10 L/m). Also the paper's D8: diagonal ≈ 1 in these units for every α."""
    m, L, R, n, d = 1024, 2, 8, 3, 2
    g = torch.Generator().manual_seed(11)
    base = _unit(torch.randn(1, n, 4, generator=g, dtype=torch.float64))
    X = base.expand(R, n, 4).contiguous()
    for alpha in (-1.0, 0.2):
        A, Ws, B = net.init(g, R, 4, m, d, L)
        fwd = net.forward(A, Ws, B, X, alpha)
        J = net.back_operators(Ws, B, fwd)
        thetas = net.limit_layer_ntks(base[0], L, alpha)
        for l in range(1, L + 1):
            K = net.layer_gram(fwd, J, l).reshape(R, n, d, n, d) * (2 * d / m)
            lim = thetas[l - 1][:, None, :, None] * torch.eye(d, dtype=torch.float64)[None, :, None, :]
            mean, se = K.mean(0), K.std(0) / math.sqrt(R)
            assert bool(((mean - lim).abs() <= 6 * se + 10 * L / m).all()), (alpha, l, (mean - lim).abs().max())
            torch.testing.assert_close(torch.diagonal(thetas[l - 1]), torch.ones(n, dtype=torch.float64))


# --------------------------------------------------------------------------- properties (Hypothesis)

small = {"max_examples": 25, "deadline": None, "derandomize": True}
alphas = st.one_of(st.sampled_from([-1.0, 0.0, -10.0, 0.999]), st.floats(-20.0, 0.99))


def _draw(seed, R=2, n=3, p=3, m=5, d=2, L=3):
    return _setup(R=R, n=n, p=p, m=m, d=d, L=L, seed=seed)


@settings(**small)
@given(seed=st.integers(0, 2 ** 16), alpha=alphas, c=st.floats(1e-3, 1e3))
def test_positive_homogeneity_and_pattern_identity(seed, alpha, c):
    """No biases: N(cx) = c N(x) for c > 0 with the same patterns; h_l = D_l g_l (18)."""
    A, Ws, B, X, _ = _draw(seed)
    f1, f2 = net.forward(A, Ws, B, X, alpha), net.forward(A, Ws, B, c * X, alpha)
    torch.testing.assert_close(f2.out, c * f1.out, rtol=1e-10, atol=1e-12 * c)
    for l in range(1, len(Ws) + 1):
        torch.testing.assert_close(f1.h[l], f1.slope(l) * f1.g[l], rtol=1e-15, atol=0)
        assert bool((f1.slope(l) == f2.slope(l)).all())


@settings(**small)
@given(seed=st.integers(0, 2 ** 16), alpha=st.floats(-20.0, -0.05))
def test_alpha_inverse_symmetry(seed, alpha):
    """D1: for α < 0, σ̃_{1/α}(x) = σ̃_α(−x), hence N_{1/α}(x; A, W, B) = N_α(x; A, −W, B)."""
    A, Ws, B, X, _ = _draw(seed)
    out1 = net.forward(A, Ws, B, X, 1 / alpha).out
    out2 = net.forward(A, [-W for W in Ws], B, X, alpha).out
    torch.testing.assert_close(out1, out2, rtol=1e-10, atol=1e-12)


@settings(**small)
@given(seed=st.integers(0, 2 ** 16), alpha=alphas, eta=st.floats(1e-4, 1e-1))
def test_he_parametrisation_equivalence(seed, alpha, eta):
    """E1: W_He = W/√(1+α²) with σ_α gives the same outputs; a GD step η in He equals a step (1+α²)η here."""
    A, Ws, B, X, Y = _draw(seed)
    Wh = net.he_weights(Ws, alpha)
    torch.testing.assert_close(net.forward_he(A, Wh, B, X, alpha), net.forward(A, Ws, B, X, alpha).out,
                               rtol=1e-10, atol=1e-12)
    Whr = [W.clone().requires_grad_(True) for W in Wh]
    gh = torch.autograd.grad(net.loss(net.forward_he(A, Whr, B, X, alpha), Y).sum(), Whr)
    g1, _, _ = net.loss_gradients(A, Ws, B, X, Y, alpha)
    s = math.sqrt(1 + alpha ** 2)
    for W, Wh_, a, b in zip(Ws, Wh, gh, g1):
        torch.testing.assert_close(s * (Wh_ - eta * a), W - (1 + alpha ** 2) * eta * b, rtol=1e-10, atol=1e-12)


@settings(**small)
@given(seed=st.integers(0, 2 ** 16), alpha=alphas, scale=st.floats(1e-3, 10.0))
def test_secant_expansion_lemma_b8(seed, alpha, scale):
    """Lemma B.8's identity: h_l − h*_l = Σ_a (D*_l+D''_l) W*_l ⋯ W*_{a+1} (D*_a+D''_a) W'_a h_{a-1}, with
    D* + D'' the secant slopes, |D''_jj| ≤ √c(α) ≤ √2 (any W*, any W')."""
    A, Ws, B, X, _ = _draw(seed, m=6, L=4)
    g = torch.Generator().manual_seed(seed + 1)
    Wp = [scale * torch.randn(W.shape, generator=g, dtype=torch.float64) for W in Ws]
    f0 = net.forward(A, Ws, B, X, alpha)
    f1 = net.forward(A, [W + P for W, P in zip(Ws, Wp)], B, X, alpha)
    S = []
    for l in range(1, len(Ws) + 1):
        dg = f1.g[l] - f0.g[l]
        sec = (f1.h[l] - f0.h[l]) / torch.where(dg == 0, torch.ones_like(dg), dg)
        s = torch.where(dg == 0, f0.slope(l), sec)
        assert float((s - f0.slope(l)).abs().max()) <= math.sqrt(net.c_alpha(alpha)) * (1 + 1e-9) + 1e-12
        S.append(s)
    for l in range(1, len(Ws) + 1):
        total = torch.zeros_like(f0.h[l])
        for a in range(1, l + 1):
            v = S[a - 1] * (f1.h[a - 1] @ Wp[a - 1].transpose(-1, -2))
            for k in range(a + 1, l + 1):
                v = S[k - 1] * (v @ Ws[k - 1].transpose(-1, -2))
            total = total + v
        torch.testing.assert_close(total, f1.h[l] - f0.h[l], rtol=1e-9, atol=1e-10 * (1 + scale))


@settings(**small)
@given(g=st.lists(st.floats(-3, 3, allow_subnormal=False), min_size=1, max_size=30),
       budget=st.floats(1e-3, 5.0), scale=st.floats(0.1, 3.0))
def test_greedy_flip_vector_is_optimal(g, budget, scale):
    """D6: ||u|| ≤ 1, the sign of exactly the flipped coordinates changes, and no feasible u flips more (the
    cheapest k coordinates are those with the k smallest |g_j|)."""
    gt = torch.tensor([g], dtype=torch.float64)
    u = greedy_flip_vector(gt, torch.tensor([scale], dtype=torch.float64), budget)
    assert float(u.norm()) <= 1 + 1e-12
    new = gt + budget * scale * u
    flipped = (new >= 0) != (gt >= 0)
    assert bool(((u != 0) == flipped).all())
    need = np.sort(np.abs(np.array(g)) / (budget * scale))
    best = int((np.cumsum(need ** 2) < 1 - 1e-9).sum())
    assert best <= int(flipped.sum()) <= int((np.cumsum(need ** 2) <= 1 + 1e-9).sum())


# --------------------------------------------------------------------------- quantities end to end


def _ctx(params, seed=0, R=6, args=None, search="none"):
    return Context("test", params, R, torch.Generator().manual_seed(seed), args=args or {},
                   inputs_spec={"kind": "unit-sphere", "n": "n", "d": "p", "separation": "delta"}, search=search)


P = {"m": 48, "L": 3, "n": 4, "p": 5, "d": 2, "alpha": -1.0, "delta": 0.2, "omega": 0.02}


def _unit_sphere_replay(g, R):
    """The inputs Context.inputs() draws first for P (so the init that follows is the quantity's own)."""
    from lemmacheck.inputs import unit_sphere
    return unit_sphere(g, R, n=P["n"], d=P["p"], separation=P["delta"])


def test_gram_lambda_min_lower_bounds_realised_gradient_ratio():
    """Same seed ⇒ same inputs and init: ||∇L||_F²/L ≥ 2 λ_min(Σ_l K_l) for every residual (D9), and the
    per-layer ratio ≤ 2 λ_max(K_l)."""
    lam = q.gram_lambda_min(_ctx(P, args={"layer": "sum"})).value
    ratio = q.gradient_loss_ratio(_ctx(P, args={"layer": "sum"})).value
    assert bool((ratio >= 2 * lam * (1 - 1e-10)).all())
    lam_min_layer = q.gram_lambda_min(_ctx(P, args={"layer": "min"})).value
    assert bool((lam_min_layer <= lam + 1e-9).all())  # λ_min(Σ K_l) ≥ Σ λ_min(K_l) ≥ min_l λ_min(K_l)


def test_sample_gradient_norm_sup_dominates_random():
    sup = q.sample_gradient_norm(_ctx(P)).value
    inf = q.sample_gradient_norm(_ctx(P, args={"v": "inf", "reduce": "min"})).value
    rnd = q.sample_gradient_norm(_ctx(P, args={"v": "random"})).value
    assert bool((inf <= rnd).all() and (rnd <= sup).all())


def test_perturbation_quantities_respect_the_ball_and_search_order():
    f_none = q.forward_perturbation(_ctx(P, search="none")).value
    assert bool((f_none == 0).all())  # no search: W' = 0
    f_rand = q.forward_perturbation(_ctx(P, search="random")).value
    f_adv = q.forward_perturbation(_ctx(P, search="adversarial", args={"steps": 5})).value
    assert bool((f_rand > 0).all() and (f_adv >= f_rand * (1 - 1e-12)).all())
    # The search stayed in the ball: replay the same draws and bound ||h'_l|| deterministically through
    # ||g'_l|| ≤ ω (||h_{l-1}|| + ||h'_{l-1}||) + ||W_l||_2 ||h'_{l-1}|| and Lip(σ̃_α) = max(1, |α|)/√(1+α²).
    g = torch.Generator().manual_seed(0)
    X = _unit_sphere_replay(g, 6)
    A, Ws, B = net.init(g, 6, P["p"], P["m"], P["d"], P["L"])
    hs = net.forward(A, Ws, B, X, P["alpha"]).h
    lip = max(1.0, abs(P["alpha"])) / math.sqrt(1 + P["alpha"] ** 2)
    b, worst = torch.zeros(6, X.shape[1], dtype=torch.float64), torch.zeros(6, dtype=torch.float64)
    for l in range(1, P["L"] + 1):
        Wn = torch.linalg.matrix_norm(Ws[l - 1], ord=2).unsqueeze(-1)
        b = lip * (P["omega"] * (hs[l - 1].norm(dim=-1) + b) + Wn * b)
        worst = torch.maximum(worst, b.amax(-1))
    assert bool((f_adv <= worst * (1 + 1e-9)).all())
    flips_rand = q.pattern_changes(_ctx(P, search="random")).value
    flips_adv = q.pattern_changes(_ctx(P, search="adversarial")).value
    assert bool((flips_adv >= flips_rand).all()) and bool((flips_adv >= 1).all())


def test_norm_and_kernel_quantities_run_and_agree_in_law():
    dev_c = q.layer_norm_deviation(_ctx(P, R=200)).value
    dev_f = q.layer_norm_deviation(_ctx(P, R=200, args={"sampler": "full"})).value
    # Same law: two-sample KS test at level 1e-6.
    assert stats.ks_2samp(dev_c.numpy(), dev_f.numpy()).pvalue > LEVEL
    assert float(q.feature_decorrelation(_ctx(P)).value.min()) > 0
    assert float(q.layer_separation(_ctx(P)).value.min()) > 0
    lam = q.ntk_limit_lambda_min(_ctx(P)).value
    assert bool((lam > 0).all())


@pytest.mark.parametrize("k", [1, 3])
def test_left_mul_t_is_the_transposed_product(k):
    """left_mul_t(W, Z) = W^T Z for every stack (the backward pass's products, contracted Z first): equal to the
    plain per-sample product to rounding, for rectangular W too."""
    g = torch.Generator().manual_seed(1)
    W = torch.randn(3, 7, 5, generator=g, dtype=torch.float64)
    Z = torch.randn(3, 4, 7, k, generator=g, dtype=torch.float64)
    want = torch.einsum("rab,rnak->rnbk", W, Z)
    got = net.left_mul_t(W, Z)
    assert got.shape == (3, 4, 5, k)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(got, net.left_mul(W.transpose(-1, -2), Z), rtol=1e-13, atol=1e-13)
