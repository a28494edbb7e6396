"""The allenzhu2018 Elman RNN against plain, one-network-at-a-time implementations of the paper's formulas.

Every draw has a fixed seed, so each test is deterministic. Statistical checks have an exact null law and a
stated two-sided false-alarm rate (1e-6).
"""

import math

import numpy as np
import pytest
import references
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper
from scipy import stats

from lemmacheck.context import Context
from lemmacheck.inputs import min_separation
from lemmacheck.search import greedy_flip_vector

net = paper("allenzhu2018").network
q = paper("allenzhu2018").quantities

LEVEL = 1e-6
Z = stats.norm.isf(LEVEL / 2)


def _setup(R=2, n=3, L=4, dx=4, m=7, d=2, seed=0, tail="random"):
    g = torch.Generator().manual_seed(seed)
    W, A, B = net.init(g, R, m, dx, d)
    X = net.rnn_sequences(g, R, n=n, L=L, dx=dx, separation=0.1, tail=tail)
    Y = net.label_sequences(g, R, n, L, d)
    return W, A, B, X, Y


# --------------------------------------------------------------------------- reference implementation


def reference_rnn(W, A, B, xs):
    """§2.1 for ONE network and ONE sequence: h_0 = 0, g_ℓ = W h_{ℓ-1} + A x_ℓ, h_ℓ = φ(g_ℓ), y_ℓ = B h_ℓ."""
    m = W.shape[0]
    hs, gs, ys = [torch.zeros(m, dtype=torch.float64)], [], []
    for x in xs:
        g = W @ hs[-1] + A @ x
        gs.append(g)
        hs.append(torch.tensor([max(t, 0.0) for t in g.tolist()], dtype=torch.float64))
        ys.append(B @ hs[-1])
    return hs, gs, ys


def ref_D(g):
    """Def 2.2: (D)_kk = 1{g_k >= 0}."""
    return torch.diag(torch.tensor([1.0 if t >= 0 else 0.0 for t in g.tolist()], dtype=torch.float64))


def ref_back(W, B, gs, l, a):
    """Back_{ℓ→a} = B D_a W ⋯ D_{ℓ+1} W (Back_{ℓ→ℓ} = B); gs[k-1] = g_k."""
    M = B
    for k in range(a, l, -1):
        M = M @ ref_D(gs[k - 1]) @ W
    return M


def test_forward_matches_reference():
    W, A, B, X, _ = _setup(seed=1)
    fwd = net.forward(W, A, B, X)
    for r in range(X.shape[0]):
        for i in range(X.shape[1]):
            hs, gs, ys = reference_rnn(W[r], A[r], B[r], X[r, i])
            for l in range(1, X.shape[2] + 1):
                torch.testing.assert_close(fwd.h[r, i, l], hs[l], rtol=1e-13, atol=1e-14)
                torch.testing.assert_close(fwd.g[r, i, l], gs[l - 1], rtol=1e-13, atol=1e-14)
                torch.testing.assert_close(fwd.y[r, i, l], ys[l - 1], rtol=1e-13, atol=1e-14)
                # Def 2.2 (with the +Ax term the paper's "h = D W h" omits): h_ℓ = D_ℓ (W h_{ℓ-1} + A x_ℓ).
                torch.testing.assert_close(ref_D(gs[l - 1]) @ (W[r] @ hs[l - 1] + A[r] @ X[r, i, l - 1]), hs[l])
            assert bool((fwd.h[r, i, 0] == 0).all())


def test_fact_2_5_triple_sum_matches_recursion_and_autograd():
    """∇f = Σ_i Σ_{a=2}^L Σ_{ℓ=1}^{a-1} D_{i,ℓ+1} Back_{i,ℓ+1→a}ᵀ loss_{i,a} h_{i,ℓ}ᵀ (Fact 2.5), three ways."""
    W, A, B, X, Y = _setup(R=2, n=3, L=5, m=6, d=2, seed=2)
    G, f, fwd = net.loss_gradient(W, A, B, X, Y)
    L = X.shape[2]
    for r in range(2):
        total = torch.zeros(6, 6, dtype=torch.float64)
        fr = 0.0
        for i in range(3):
            hs, gs, ys = reference_rnn(W[r], A[r], B[r], X[r, i])
            for a in range(2, L + 1):
                loss = ys[a - 1] - Y[r, i, a - 1]
                fr += 0.5 * float(loss @ loss)
                for l in range(1, a):
                    total += torch.outer(ref_D(gs[l]) @ ref_back(W[r], B[r], gs, l + 1, a).T @ loss, hs[l])
        torch.testing.assert_close(G[r], total, rtol=1e-11, atol=1e-12)
        assert math.isclose(float(f[r]), fr, rel_tol=1e-12)
    Wr = W.clone().requires_grad_(True)
    auto, = torch.autograd.grad(net.objective(net.forward(Wr, A, B, X), Y).sum(), Wr)
    torch.testing.assert_close(G, auto, rtol=1e-10, atol=1e-12)
    # Per-sample gradients: autograd of f_i, and they sum to ∇f.
    Gi = net.per_sample_gradients(W, B, fwd, net.losses(fwd, Y))
    torch.testing.assert_close(Gi.sum(1), G, rtol=1e-12, atol=1e-12)
    for i in range(3):
        Wr = W.clone().requires_grad_(True)
        auto_i, = torch.autograd.grad(net.objective(net.forward(Wr, A, B, X[:, i:i + 1]), Y[:, i:i + 1]).sum(), Wr)
        torch.testing.assert_close(Gi[:, i], auto_i, rtol=1e-10, atol=1e-12)


def test_jvp_and_ntk_match_autograd():
    W, A, B, X, Y = _setup(R=2, n=2, L=4, m=5, d=2, seed=3)
    fwd = net.forward(W, A, B, X)
    Gdir = torch.randn(W.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    # reverse-mode jvp (double backward): torch.func.jvp's forward-mode AD loads torch's jit-scripted
    # decompositions, 18 `torch.jit.script is deprecated` warnings per test session
    _, tangent = torch.autograd.functional.jvp(lambda w: net.forward(w, A, B, X).y, (W,), (Gdir,))
    torch.testing.assert_close(net.jvp(W, B, fwd, Gdir), tangent, rtol=1e-10, atol=1e-12)
    # ⟨∇f, G⟩ = Σ loss · dy
    lv = net.losses(fwd, Y)
    lhs = (net.gradient_from_losses(W, B, fwd, lv) * Gdir).sum(dim=(-1, -2))
    torch.testing.assert_close(lhs, (lv * net.jvp(W, B, fwd, Gdir)).sum(dim=(-1, -2, -3)), rtol=1e-10, atol=1e-12)
    K = net.ntk_gram(W, B, fwd)
    for r in range(2):
        Jac = torch.autograd.functional.jacobian(lambda w, r=r: net.forward(w.unsqueeze(0), A[r:r + 1], B[r:r + 1],
                                                 X[r:r + 1]).y[:, :, 2:].reshape(-1), W[r]).reshape(-1, 25)
        torch.testing.assert_close(K[r], Jac @ Jac.T, rtol=1e-10, atol=1e-11)
    # inf over labels of ||∇f||²/f is 2 λ_min(K), attained by loss = the bottom eigenvector.
    ev, V = torch.linalg.eigh(K)
    lv = torch.zeros_like(net.losses(fwd, Y))
    lv[:, :, 2:] = V[:, :, 0].reshape(2, 2, 3, 2)
    g2 = (net.gradient_from_losses(W, B, fwd, lv) ** 2).sum(dim=(-1, -2))
    torch.testing.assert_close(g2 / (0.5 * (lv ** 2).sum(dim=(-1, -2, -3))), 2 * ev[:, 0], rtol=1e-9, atol=1e-10)


def test_products_fresh_norms_against_reference():
    W, A, B, X, _ = _setup(R=2, n=2, L=4, m=9, d=2, seed=5)
    fwd = net.forward(W, A, B, X)
    S = net.segment_norms(W, fwd)
    SW = net.segment_norms(W, fwd, leading_w=True)
    F = net.fresh_norms(fwd)
    for r in range(2):
        gs = {i: reference_rnn(W[r], A[r], B[r], X[r, i])[1] for i in range(2)}
        hs = {i: reference_rnn(W[r], A[r], B[r], X[r, i])[0] for i in range(2)}
        for i in range(2):
            for l1 in range(1, 5):
                for l2 in range(l1, 5):
                    P = torch.eye(9, dtype=torch.float64)
                    for k in range(l1, l2 + 1):  # ∏_{ℓ=ℓ2}^{ℓ1} D_ℓ W: D_{ℓ1} W applied first
                        P = ref_D(gs[i][k - 1]) @ W[r] @ P
                    assert math.isclose(float(S[r, i, l1 - 1, l2 - 1]), np.linalg.norm(P.numpy(), 2), rel_tol=1e-10)
                    assert math.isclose(float(SW[r, i, l1 - 1, l2 - 1]), np.linalg.norm((W[r] @ P).numpy(), 2),
                                        rel_tol=1e-10)
                    torch.testing.assert_close(net.backward_segment(W, B, fwd, l1, l2)[r, i], B[r] @ P)
        # Fresh norms from the paper's Gram-Schmidt definition (§2, Def B.1), vector by vector.
        for l in range(4):
            basis = []
            for k in range(1, l + 1):
                for j in range(2):
                    v = hs[j][k].clone()
                    for b in basis:
                        v = v - (b @ v) * b
                    if float(v.norm()) > 1e-12:
                        basis.append(v / v.norm())
            for i in range(2):
                v = hs[i][l + 1].clone()
                for b in basis:
                    v = v - (b @ v) * b
                assert math.isclose(float(F[r, i, l]), float(v.norm()), rel_tol=1e-9, abs_tol=1e-12)


# --------------------------------------------------------------------------- initialisation and inputs


def _chi2_two_sided(x, var):
    s = float((x.double() ** 2).sum() / var)
    return 2 * min(stats.chi2.sf(s, x.numel()), stats.chi2.cdf(s, x.numel()))


def test_init_variances():
    """W, A ~ N(0, 2/m), B ~ N(0, 1/d) (Def 2.3, second argument = variance): χ² and mean z-tests at level 1e-6,
    which reject the neighbouring conventions (1/m, and 1/m for B)."""
    m, dx, d = 40, 6, 3
    W, A, B = net.init(torch.Generator().manual_seed(6), 60, m, dx, d)
    for x, var in [(W, 2 / m), (A, 2 / m), (B, 1 / d)]:
        assert _chi2_two_sided(x, var) > LEVEL
        assert abs(float(x.mean())) * math.sqrt(x.numel() / var) < Z
    assert _chi2_two_sided(W, 1 / m) < LEVEL
    assert _chi2_two_sided(A, 1 / m) < LEVEL
    assert _chi2_two_sided(B, 1 / m) < LEVEL


def test_first_layer_norm_law():
    """h_1 = φ(A x_1) with ||x_1|| = 1: m||h_1||²/2 ~ χ²_K, K ~ Bin(m, 1/2) (Fact A.11 with h = x_1, q = 0): KS test
    at level 1e-6 against the exact mixture CDF."""
    m, R = 24, 4000
    g = torch.Generator().manual_seed(7)
    W, A, B = net.init(g, R, m, 5, 1)
    X = net.rnn_sequences(g, R, n=1, L=2, dx=5)
    s = (m * net.forward(W, A, B, X).h[:, 0, 1].norm(dim=-1) ** 2 / 2).numpy()
    ks = np.arange(m + 1)
    w = stats.binom.pmf(ks, m, 0.5)

    def cdf(x):
        x = np.atleast_1d(x)[:, None]
        return (w * np.where(ks == 0, 1.0, stats.chi2.cdf(x, np.maximum(ks, 1)))).sum(-1)
    assert stats.kstest(s, cdf).pvalue > LEVEL


def _untied_forward(g, X, m):
    """A deliberately WRONG sampler (a fresh W at every step): the law test below must reject it."""
    R, n, L, dx = X.shape
    A = torch.randn(R, m, dx, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
    h = torch.zeros(R, n, m, dtype=torch.float64)
    hs = [h]
    for l in range(L):
        W = torch.randn(R, m, m, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
        h = torch.relu(h @ W.transpose(-1, -2) + X[:, :, l] @ A.transpose(-1, -2))
        hs.append(h)
    return torch.stack(hs, 2)


def test_lazy_sampler_has_the_law_of_the_full_network():
    """lazy_forward (no W materialised) vs the full forward pass: two-sample KS tests at level 1e-6 on ||h_{1,L}||,
    ||h_{2,L}|| and ⟨h_{1,L}, h_{2,L}⟩ (zero tail: the weight tying matters most). The same criterion rejects an
    untied sampler, so it has teeth."""
    m, R = 8, 6000
    g = torch.Generator().manual_seed(12)
    X = net.rnn_sequences(g, 1, n=2, L=6, dx=3, separation=0.3, tail="zero").expand(R, -1, -1, -1).contiguous()
    W, A, B = net.init(g, R, m, 3, 1)
    full = net.forward(W, A, B, X).h
    lazy = net.lazy_forward(g, X, m).h
    untied = _untied_forward(g, X, m)

    def stats_of(h):
        hL = h[:, :, -1]
        return [hL[:, 0].norm(dim=-1), hL[:, 1].norm(dim=-1), (hL[:, 0] * hL[:, 1]).sum(-1)]
    p_lazy = [stats.ks_2samp(a.numpy(), b.numpy()).pvalue for a, b in zip(stats_of(full), stats_of(lazy))]
    p_untied = [stats.ks_2samp(a.numpy(), b.numpy()).pvalue for a, b in zip(stats_of(full), stats_of(untied))]
    assert min(p_lazy) > LEVEL, p_lazy
    assert min(p_untied) < LEVEL, p_untied
    # Position 1 does not involve W at all: identical in law and the lazy pass keeps h_0 = 0.
    assert bool((lazy[:, :, 0] == 0).all())


@pytest.mark.parametrize("m, n, L, tail", [(64, 3, 5, "random"), (16, 4, 7, "zero"), (8, 5, 4, "random"),
                                           (6, 4, 5, "zero"), (128, 1, 6, "random")])
def test_block_lazy_sampler_equals_the_one_vector_at_a_time_one(m, n, L, tail):
    """The block lazy_forward (a step's n vectors projected onto earlier directions as one GEMM) against
    lazy_forward_sequential (one vector at a time against all of Q): the same draws, the same h, g, y up to
    rounding, including m < n (L - 1) where directions run out (zero columns) and duplicated sequences (rho = 0)."""
    g = torch.Generator().manual_seed(3)
    X = net.rnn_sequences(g, 3, n=n, L=L, dx=4, separation=0.2, tail=tail)
    if n > 1:
        X[:, -1] = X[:, 0]  # a repeated sequence: its residual vanishes, a zero column is added
    a = net.lazy_forward(torch.Generator().manual_seed(9), X, m, d=2)
    b = references.lazy_forward_sequential(torch.Generator().manual_seed(9), X, m, d=2)
    for u, v in ((a.h, b.h), (a.g, b.g), (a.y, b.y)):
        torch.testing.assert_close(u, v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("tail", list(net.TAILS))
def test_rnn_sequences_form(tail):
    """§2.1: ||x_{i,ℓ}|| ≤ 1, ||x_{i,1}|| = 1, [x_{i,1}]_{dx} = 1/√2, ||x_{i,1} − x_{j,1}|| ≥ δ."""
    g = torch.Generator().manual_seed(8)
    X = net.rnn_sequences(g, 20, n=6, L=5, dx=4, separation=0.15, tail=tail)
    first = X[:, :, 0]
    torch.testing.assert_close(first.norm(dim=-1), torch.ones(20, 6, dtype=torch.float64))
    torch.testing.assert_close(first[..., -1], torch.full((20, 6), 1 / math.sqrt(2), dtype=torch.float64))
    assert bool((min_separation(first) >= 0.15 * (1 - 1e-9)).all())
    assert bool((X.norm(dim=-1) <= 1 + 1e-12).all())
    if tail == "zero":
        assert bool((X[:, :, 1:] == 0).all())
    if tail == "identical":
        assert bool((X[:, :, 1:] == X[:, :1, 1:]).all())
    if tail == "repeat":
        assert bool((X[:, :, 1:] == X[:, :, :1]).all())
    pair = net.rnn_sequences(g, 5, n=3, L=2, dx=4, separation=0.2, geometry="close-pair")
    torch.testing.assert_close((pair[:, 0, 0] - pair[:, 1, 0]).norm(dim=-1), torch.full((5,), 0.2, dtype=torch.float64))


# --------------------------------------------------------------------------- properties (Hypothesis)

small = {"max_examples": 25, "deadline": None, "derandomize": True}


@settings(**small)
@given(seed=st.integers(0, 2 ** 16), c=st.floats(1e-3, 1e3), tail=st.sampled_from(net.TAILS))
def test_positive_homogeneity_and_pattern_identity(seed, c, tail):
    """No biases: scaling every token by c > 0 scales all h, g, y by c with the same patterns; h_ℓ = D_ℓ g_ℓ."""
    W, A, B, X, _ = _setup(seed=seed, tail=tail)
    f1, f2 = net.forward(W, A, B, X), net.forward(W, A, B, c * X)
    torch.testing.assert_close(f2.y, c * f1.y, rtol=1e-10, atol=1e-12 * c)
    assert bool((f1.mask()[:, :, 1:] == f2.mask()[:, :, 1:]).all())
    torch.testing.assert_close(f1.h[:, :, 1:], f1.mask()[:, :, 1:] * f1.g[:, :, 1:], rtol=0, atol=0)


@settings(**small)
@given(a=st.lists(st.sampled_from([0.0, -0.0, 1e-300, -2.0, 3.5, -1e-3, 7.0]) | st.floats(-5, 5), min_size=1,
                  max_size=12), seed=st.integers(0, 1000))
def test_prop_g3_relu_difference(a, seed):
    """Prop G.3: φ(a) − φ(b) = D(a−b) + D''(a−b) with D = Diag(1{a ≥ 0}), |D''_kk| ≤ 1, D''_kk ≠ 0 only where the
    signs differ, using the paper's construction of D''."""
    at = torch.tensor(a, dtype=torch.float64)
    bt = torch.tensor(a[::-1], dtype=torch.float64) + torch.randn(len(a), generator=torch.Generator().manual_seed(seed),
                                                                  dtype=torch.float64)
    D = (at >= 0).to(torch.float64)
    Dpp = torch.zeros_like(at)
    pos_neg = (at >= 0) & (bt < 0)
    neg_pos = (at < 0) & (bt >= 0)
    Dpp[pos_neg] = bt[pos_neg] / (at[pos_neg] - bt[pos_neg])
    Dpp[neg_pos] = bt[neg_pos] / (bt[neg_pos] - at[neg_pos])
    torch.testing.assert_close(torch.relu(at) - torch.relu(bt), (D + Dpp) * (at - bt), rtol=1e-12, atol=1e-12)
    assert bool((Dpp.abs() <= 1).all()) and bool(((Dpp != 0) <= ((at >= 0) != (bt >= 0))).all())


@settings(**small)
@given(seed=st.integers(0, 2 ** 16), scale=st.floats(1e-4, 3.0))
def test_claim_g2_expansion(seed, scale):
    """Claim G.2 (exact for any W' and any base point W̌): h_ℓ − ȟ_ℓ = Σ_{a=1}^{ℓ-1} (Ď_ℓ+D''_ℓ) W̌ ⋯ W̌ (Ď_{a+1}+D''_{a+1})
    W' h_a, with Ď + D'' the secant slopes of φ (entries in [0, 1]) and h_a at the perturbed W̌ + W'."""
    W, A, B, X, _ = _setup(seed=seed, L=5, m=6)
    Wp = scale * torch.randn(W.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    f0, f1 = net.forward(W, A, B, X), net.forward(W + Wp, A, B, X)
    dg = f1.g - f0.g
    sec = (f1.h - f0.h) / torch.where(dg == 0, torch.ones_like(dg), dg)
    S = torch.where(dg == 0, f0.mask(), sec)
    assert bool(((S >= -1e-12) & (S <= 1 + 1e-12)).all())
    for l in range(2, X.shape[2] + 1):
        total = torch.zeros_like(f0.h[:, :, l])
        for a in range(1, l):
            v = S[:, :, a + 1] * (f1.h[:, :, a] @ Wp.transpose(-1, -2))
            for k in range(a + 2, l + 1):
                v = S[:, :, k] * (v @ W.transpose(-1, -2))
            total = total + v
        torch.testing.assert_close(total, f1.h[:, :, l] - f0.h[:, :, l], rtol=1e-9, atol=1e-10 * (1 + scale))


# --------------------------------------------------------------------------- quantities end to end

P = {"m": 40, "L": 4, "n": 3, "dx": 5, "d": 2, "delta": 0.2, "tau0": 1.0}
SPEC = {"kind": "rnn-sequences", "n": "n", "L": "L", "dx": "dx", "separation": "delta"}


def _ctx(params=P, seed=0, R=5, args=None, search="none"):
    return Context("test", dict(params), R, torch.Generator().manual_seed(seed), args=args or {}, inputs_spec=SPEC,
                   search=search)


def test_pl_ratio_worst_case_is_below_realised_ratios():
    """Same seed ⇒ same inputs and init: 2 λ_min(K) ≤ ||∇f||²/f for realised labels ≤ 2 λ_max(K)."""
    lo = q.gradient_pl_ratio(_ctx()).value
    hi = q.gradient_pl_ratio(_ctx(args={"side": "sup"})).value
    real = q.gradient_pl_ratio(_ctx(args={"labels": "gaussian"})).value
    assert bool((lo <= real * (1 + 1e-10)).all() and (real <= hi * (1 + 1e-10)).all())
    assert bool((lo > 0).all())


def test_layer2_adversary_flips_what_it_promises():
    """Catalogue P4: W' = u ĥ_{i,1}ᵀ with ||W'||_2 ≤ τ0/√m flips exactly the greedy set at layer 2 for sequence i."""
    W, A, B, X, _ = _setup(R=3, n=2, L=3, m=50, seed=9)
    tau = 2.0 / math.sqrt(50)
    f0 = net.forward(W, A, B, X)
    h1 = f0.h[:, 0, 1]
    u = greedy_flip_vector(f0.g[:, 0, 2], h1.norm(dim=-1), tau)
    Wp = tau * u.unsqueeze(-1) * (h1 / h1.norm(dim=-1, keepdim=True)).unsqueeze(-2)
    assert bool((torch.linalg.matrix_norm(Wp, ord=2) <= tau * (1 + 1e-12)).all())
    f1 = net.forward(W + Wp, A, B, X)
    flips = ((f1.g[:, 0, 2] >= 0) != (f0.g[:, 0, 2] >= 0)).sum(-1)
    assert bool((flips == (u != 0).sum(-1)).all()) and bool((flips > 0).all())
    adv = q.pattern_changes(_ctx(search="adversarial")).value
    rnd = q.pattern_changes(_ctx(search="random")).value
    assert bool((adv >= rnd).all())


def test_search_levels_and_sparse_sups():
    none = q.forward_perturbation(_ctx(search="none")).value
    assert bool((none == 0).all())
    rnd = q.forward_perturbation(_ctx(search="random")).value
    adv = q.forward_perturbation(_ctx(search="adversarial", args={"steps": 5})).value
    assert bool((rnd > 0).all() and (adv >= rnd * (1 - 1e-12)).all())
    # d = 1: the sup over a = ±1 and any fixed unit a coincide; k-sparse sups grow with k up to the full norm.
    p1 = {**P, "d": 1}
    s1 = q.backward_sparse_sup(_ctx(p1)).value
    torch.testing.assert_close(s1, q.backward_sparse_sup(_ctx(p1, args={"a": "random"})).value)
    sk = q.backward_sparse_sup(_ctx(p1, args={"k": "m"})).value
    assert bool((sk >= s1).all())
    e1 = q.sparse_bilinear_sup(_ctx()).value
    e4 = q.sparse_bilinear_sup(_ctx(args={"k": 4})).value
    full = q.segment_spectral_norm(_ctx(args={"leading_w": True})).value
    assert bool((e1 <= e4 * (1 + 1e-12)).all() and (e4 <= full * (1 + 1e-9)).all())
    r = q.forward_norm_ratio(_ctx()).value
    assert bool((r > 0).all())
    assert bool((q.fresh_norm(_ctx()).value > 0).all())
    fake = q.fake_gradient_norm(_ctx(args={"losses": "antipodal"})).value
    assert bool((fake > 0).all())
