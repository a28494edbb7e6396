"""chatterji2021 quantities against plain reference implementations, closed forms, autograd, and Hypothesis
property tests of the paper's deterministic scalar facts over their whole stated domains."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper

import lemmacheck.builtin  # noqa: F401  (registers the quantities)
from lemmacheck.context import Context
from lemmacheck.inputs import null_vectors
from lemmacheck.registry import QUANTITIES

net = paper("chatterji2021").network
q = paper("chatterji2021").quantities

F64 = torch.float64


def ctx(params, R=8, seed=0, args=None, search="none", n="n", d="p"):
    return Context("t", dict(params), R, torch.Generator().manual_seed(seed), args=args or {}, search=search,
                   inputs_spec={"kind": "unit-sphere", "n": n, "d": d}, network="chatterji2021")


def problem(seed=0, R=3, n=4, p=5, L=2, h=0.2, act="huberized-relu", scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(R, n, p, generator=gen, dtype=F64)
    X = X / X.norm(dim=-1, keepdim=True)
    y = torch.randint(0, 2, (R, n), generator=gen).to(F64) * 2 - 1
    return X, y, [scale * V for V in net.init(gen, R, p, L)], net.activation(act, h)


# ------------------------------------------------------------------------------------- scalar facts (Hypothesis)

@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-740, max_value=740, allow_nan=False))
def test_lemma_b3_both_parts_for_every_z(z):
    """sigma(-z) <= log(1 + e^{-z}) and e^z/(1+e^z)^2 <= 1/(1+e^z), in 60-digit arithmetic (the ground truth; the gaps
    are relative e^{-z}, below 60 digits at large z, hence the 1e-55 relative slack)."""
    with mpmath.workdps(60):
        zz = mpmath.mpf(z)
        g = 1 / (1 + mpmath.e ** zz)
        assert g <= mpmath.log1p(mpmath.e ** (-zz)) * (1 + mpmath.mpf(10) ** -55)
        assert mpmath.e ** zz / (1 + mpmath.e ** zz) ** 2 <= g * (1 + mpmath.mpf(10) ** -55)


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-50, max_value=745, allow_nan=False))
def test_log_softplus_matches_high_precision(m):
    """net._log_softplus_neg(m) = log log(1 + e^{-m}) to float64 accuracy, down to subnormal e^{-m} (it was
    1% off at m = 740 before: log1p(t)/t loses every bit at subnormal t)."""
    got = float(net._log_softplus_neg(torch.tensor([m], dtype=F64))[0])
    with mpmath.workdps(60):
        ref = float(mpmath.log(mpmath.log1p(mpmath.e ** (-mpmath.mpf(m)))))
    assert got == pytest.approx(ref, rel=1e-13, abs=1e-13)


def test_logistic_inequality_quantity_is_at_most_one_and_tight():
    for part in ("1", "2"):
        o = q.logistic_inequality(ctx({"zmax": 740.0}, args={"part": part}))
        assert (o.value <= 1 + 1e-15).all() and (o.value > 1 - 1e-12).all()  # tight at large z


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 5), st.floats(1e-3, 0.999), st.floats(1e-3, 1e3), st.floats(1e-20, 1.0),
       st.lists(st.floats(0, 1), min_size=2, max_size=6))
def test_concave_families_are_concave_with_zero_at_zero(kind, a, b, M, w):
    """The families Lemma B.4's search uses satisfy its hypotheses (psi(0) = 0, midpoint concavity on [0, M]), and the
    lemma's conclusion holds for them."""
    k, A, B, MM = (torch.tensor([v], dtype=F64) for v in (kind, a, b, M))
    k = k.long()
    z = torch.tensor([[0.0, 0.3 * M, 0.7 * M, M]], dtype=F64)
    v = q._concave_family(k, A, B, MM, z)[0]
    assert v[0] == 0
    mid = q._concave_family(k, A, B, MM, torch.tensor([[0.5 * M]], dtype=F64))[0, 0]
    assert mid >= (v[1] + v[2]) / 2 - 1e-12 * (abs(v[1]) + abs(v[2]) + 1e-300) or kind == 3 and M > 1
    ws = torch.tensor(w, dtype=F64) + 1e-9
    zs = (M * ws / ws.sum()).unsqueeze(0)
    total = q._concave_family(k, A, B, MM, zs)[0].sum()
    assert total >= v[3] - 1e-12 * (abs(total) + abs(v[3]))


def test_trailing_products_against_a_loop_and_the_b6_counterexample():
    a = torch.rand(50, 6, dtype=F64, generator=torch.Generator().manual_seed(1))
    ref = torch.tensor([max(math.prod(row[k:].tolist()) for k in range(1, 6)) for row in a], dtype=F64)
    assert torch.allclose(q.trailing_products_max(a), ref, rtol=1e-14)
    # Lemma B.6 (1), L = 2: profile (0, 0, 1.9), ||V|| = 1.9 > sqrt(3): 1.9 > (1.9/sqrt 2)^2 = 1.805
    a = torch.tensor([[0.0, 0.0, 1.9]], dtype=F64)
    assert float(q.trailing_products_max(a)[0]) > (1.9 / math.sqrt(2)) ** 2


def test_b7_counterexample_is_found_by_the_quantity():
    o = q.norm_profile_ratio(ctx({"L": 2}, R=4000, args={"part": "b7"}))
    assert float(o.value.max()) > 1.02  # the interior |I| of the AM-GM profile (finding in the claim file)
    o1 = q.norm_profile_ratio(ctx({"L": 1}, R=4000, args={"part": "b7"}))
    assert float(o1.value.max()) <= 1 + 1e-12  # two blocks: the lemma holds


@pytest.mark.parametrize("act", ["huberized-relu", "scaled-swish"])
def test_smoothness_hessians_equal_per_replicate_autograd(act):
    """Lemma 4.2's batched Hessians (one double backward over all replicates) give each one's exact-Hessian norm as
    torch.autograd.functional.hessian does one replicate at a time."""
    params, args = {"p": 4, "L": 2, "n": 3, "h": 0.5, "scale": 2.0}, {"activation": act}
    got = q.smoothness_ratio(ctx(params, R=3, seed=2, args=args)).extras["lip"]
    X, y, a, Vs, _ = q._problem(ctx(params, R=3, seed=2, args=args))
    shapes = [V.shape[1:] for V in Vs]
    for r in range(3):

        def J(theta, r=r):
            parts = [t.reshape(1, *s) for t, s in zip(theta.split([math.prod(s) for s in shapes]), shapes)]
            return net.loss(net.forward(parts, X[r:r + 1], a).out, y[r:r + 1]).sum()

        Hm = torch.autograd.functional.hessian(J, torch.cat([V[r].reshape(-1) for V in Vs]))
        assert float(got[r]) == pytest.approx(float(torch.linalg.eigvalsh(Hm).abs().max()), rel=1e-12)


def test_b8_search_keeps_the_best_ratio_along_the_ascent():
    """Lemma B.8's gradient search: the max of the ratio at the draw and after each Adam step (each point's ratio
    computed once, then differentiated for the next step), as a loop that re-evaluates every point gives it."""
    c = ctx({"L": 2, "dim": 3}, R=6, seed=4, search="gradient", args={"ascent_steps": 7})
    got = q.product_perturbation_ratio(c).value
    c = ctx({"L": 2, "dim": 3}, R=6, seed=4, search="gradient", args={"ascent_steps": 7})

    def draw(lo, hi):
        return c.randn(6, 3, 3, 3) * q._log_uniform(c, lo, hi, 6)[:, None, None, None]

    A, E = draw(0.3, 3.0), draw(1e-4, 1.0)
    Mr = c.randn(6, 3, 3, 3)
    Nr = Mr + draw(1e-4, 1.0)
    ref = q._b8_ratio(A, E, Mr, Nr, 2)
    params = [t.clone().requires_grad_(True) for t in (A, E, Mr, Nr)]
    opt = torch.optim.Adam(params, lr=0.05)
    for _ in range(7):
        opt.zero_grad()
        (-torch.log(q._b8_ratio(*params, 2)).sum()).backward()
        opt.step()
        with torch.no_grad():
            ref = torch.maximum(ref, q._b8_ratio(*params, 2))
    assert torch.allclose(got, ref, rtol=1e-12, atol=0)
    assert (got > q._b8_ratio(A, E, Mr, Nr, 2)).any()  # the ascent moved


def test_b8_ratio_against_numpy():
    gen = torch.Generator().manual_seed(3)
    L, d = 2, 3
    A, E, Mr, Nr = (torch.randn(1, L + 1, d, d, generator=gen, dtype=F64) for _ in range(4))
    got = float(q._b8_ratio(A, E, Mr, Nr, L)[0])
    An, En, Mn, Nn = (t[0].numpy() for t in (A, E, Mr, Nr))
    Mn = np.stack([m / max(1.0, np.linalg.norm(m, 2)) for m in Mn])
    Nn = np.stack([m / max(1.0, np.linalg.norm(m, 2)) for m in Nn])
    nA = np.sqrt(sum(np.linalg.norm(a) ** 2 for a in An))
    An = An * max(1.0, math.sqrt(L + 0.5) / nA)
    Bn = An + En
    P = np.linalg.multi_dot([An[0] @ Mn[0], An[1] @ Mn[1], An[2] @ Mn[2]])
    Q = np.linalg.multi_dot([Bn[0] @ Nn[0], Bn[1] @ Nn[1], Bn[2] @ Nn[2]])
    kappa = max(np.linalg.norm(m - n, 2) for m, n in zip(Mn, Nn))
    nA = np.sqrt(sum(np.linalg.norm(a) ** 2 for a in An))
    nD = np.sqrt(sum(np.linalg.norm(e) ** 2 for e in En))
    ref = np.linalg.norm(P - Q, 2) / (1.5 * (nA + nD) ** (L + 1) * (kappa * nA + nD))
    assert got == pytest.approx(ref, rel=1e-12)


# ---------------------------------------------------------------------------------------- Appendix F tools

def test_orlicz_norms_against_closed_forms():
    th = torch.linspace(-40, 40, 80001, dtype=F64)
    for s in (0.5, 2.0):
        x = torch.linspace(-12 * s, 12 * s, 40001, dtype=F64)
        psi2 = q._orlicz(x, -x ** 2 / (2 * s * s) - math.log(s * math.sqrt(2 * math.pi)), x, 2.0)
        assert psi2 == pytest.approx(math.sqrt(8 / 3) * s, rel=1e-6)  # E exp(g^2/t^2) = (1 - 2 s^2/t^2)^{-1/2} = 2
    # ||g^2 - 1||_psi1 solves E exp(|g^2 - 1|/t) = 2: check the defining equation at the returned t by mpmath
    k = q._psi1_chi2_minus_one()
    with mpmath.workdps(30):
        val = mpmath.quad(lambda g: mpmath.e ** (abs(g * g - 1) / k - g * g / 2) / mpmath.sqrt(2 * mpmath.pi),
                          [-mpmath.inf, -1, 0, 1, mpmath.inf])
    assert float(val) == pytest.approx(2.0, rel=1e-5)
    assert th.numel() == 80001


def test_exact_tails_against_direct_formulas():
    m = 30
    eta = torch.tensor([4.0, 10.0, 30.0], dtype=F64)
    got = q._log_binom_two_sided(m, eta).exp()
    ref = [sum(math.comb(m, k) for k in range(m + 1) if abs(2 * k - m) >= e) / 2 ** m for e in eta.tolist()]
    assert torch.allclose(got, torch.tensor(ref, dtype=F64), rtol=1e-12)
    x = torch.tensor([50.0, 4000.0], dtype=F64)  # the second is below float64 (e^{-1900}): the mpmath branch
    got = q._log_chi2_sf(x, 30)
    with mpmath.workdps(50):
        ref = [float(mpmath.log(mpmath.gammainc(15, v / 2, mpmath.inf, regularized=True))) for v in x.tolist()]
    assert torch.allclose(got, torch.tensor(ref, dtype=F64), rtol=1e-10)


@pytest.mark.parametrize("m", [100, 1000, 4001])
def test_rademacher_tails_sum_only_the_masses_that_count(m):
    """_log_binom_two_sided sums each tail's 5 sqrt(m) innermost masses past m ~ 100: the same log P as every mass
    of the event (to 1e-14 relative), from eta near 0 (both tails, the centre excluded) to eta = m (two masses),
    at eta on a mass (kept by the comparison's 1e-12 slack) and between masses."""
    eta = torch.tensor([0.5, 1.0, 2.0, 3.0, 7.5, 40.0, math.sqrt(m), 3 * math.sqrt(m), m / 3, m - 2.0, m - 1.0,
                        float(m), m + 1.0], dtype=F64)
    k = torch.arange(m + 1, dtype=F64)
    logmass = torch.lgamma(torch.tensor(m + 1.0, dtype=F64)) - torch.lgamma(k + 1) - torch.lgamma(m - k + 1) - m * math.log(2)
    inside = (2 * k - m).abs()[None, :] >= eta[:, None] * (1 - 1e-12)
    ref = torch.logsumexp(torch.where(inside, logmass, torch.full_like(logmass, -math.inf)), -1)
    got = q._log_binom_two_sided(m, eta)
    assert torch.equal(torch.isinf(got), torch.isinf(ref))  # eta > m: the empty event
    fin = torch.isfinite(ref)
    assert torch.allclose(got[fin], ref[fin], rtol=1e-14, atol=1e-15)


def test_greedy_net_is_separated_and_covers():
    pts = torch.randn(500, 3, generator=torch.Generator().manual_seed(2), dtype=F64)
    pts = pts / pts.norm(dim=-1, keepdim=True)
    N = q._greedy_net(pts, 0.25)
    dist = torch.cdist(N, N) + torch.eye(N.shape[0], dtype=F64) * 10
    assert dist.min() > 0.25
    assert torch.cdist(pts, N).min(-1).values.max() <= 0.25
    assert N.shape[0] <= 9 ** 3


# ----------------------------------------------------------------------------------- network-level quantities

@pytest.mark.parametrize("act", ["huberized-relu", "scaled-swish"])
def test_per_sample_gradients_against_autograd(act):
    X, y, Vs, a = problem(act=act)
    grads, _, _ = q._sample_gradients(Vs, X, y, a)
    for r in range(X.shape[0]):
        for s in range(X.shape[1]):
            W = [V[r:r + 1].clone().requires_grad_(True) for V in Vs]
            J = torch.nn.functional.softplus(-y[r, s] * net.forward(W, X[r:r + 1, s:s + 1], a).out).sum()
            auto = torch.autograd.grad(J, W)
            for G, A in zip(grads, auto):
                assert torch.allclose(G[r, s], A[0], rtol=1e-10, atol=1e-13)


def test_mixed_backward_vector_is_the_printed_product():
    """B.14-B.16 use Sigma^V_k prod_{j>k} V_j^T Sigma^V_j W_{L+1}^T: net.backward with W's output row."""
    X, _, Vs, a = problem(L=3)
    W_out = torch.randn(Vs[-1].shape, dtype=F64, generator=torch.Generator().manual_seed(5))
    fwd = net.forward(Vs, X, a)
    mixed, _ = net.backward(Vs[:-1] + [W_out], fwd)
    r, s, k = 1, 2, 0  # layer k + 1 = 1
    v = W_out[r, 0]
    for j in range(3, k, -1):  # Sigma_L W^T, then V_j^T Sigma ...
        v = fwd.dphi[j - 1][r, s] * v
        if j - 1 > k:
            v = Vs[j - 1][r].T @ v
    assert torch.allclose(mixed[k][r, s], v, rtol=1e-12)


def test_layer_alignment_lhs_is_a_directional_derivative():
    """grad_{V_l} J . V_l = d/dc J(V with V_l -> (1 + c) V_l) at c = 0 (autograd)."""
    X, y, Vs, a = problem(L=2, act="scaled-swish")
    grads, _, _ = net.loss_gradients(Vs, X, y, a)
    for ell in range(2):
        c = torch.zeros(1, dtype=F64, requires_grad=True)
        W = [V * (1 + c) if i == ell else V for i, V in enumerate(Vs)]
        J = net.loss(net.forward(W, X, a).out, y).sum()
        (dJ,) = torch.autograd.grad(J, c)
        assert float(dJ) == pytest.approx(float((grads[ell] * Vs[ell]).sum()), rel=1e-10)


def test_gradient_descent_tracks_loss_and_norm_changes_exactly():
    """At a step size where float64 resolves everything, the compensated trajectory's changes equal plain ones."""
    X, y, Vs, a = problem(L=2, act="scaled-swish")
    tr = net.gradient_descent(Vs, X, y, a, 0.05, 5)
    V = [v.clone() for v in Vs]
    J1 = net.loss(net.forward(Vs, X, a).out, y)
    for t in range(6):
        J = net.loss(net.forward(V, X, a).out, y)
        assert torch.allclose(tr.rel_change[:, t], J / J1 - 1, rtol=1e-8, atol=1e-14)
        assert torch.allclose(tr.norm_sq_change[:, t], net.collective_norm(V) ** 2 - net.collective_norm(Vs) ** 2,
                              rtol=1e-9, atol=1e-12)
        g, _, _ = net.loss_gradients(V, X, y, a)
        V = [v - 0.05 * gg for v, gg in zip(V, g)]
    assert torch.allclose(tr.loss_drop.sum(-1), -tr.rel_change[:, -1] * J1, rtol=1e-10)


def test_trajectory_statistics_can_fail():
    """The log-scaled trajectory statistics are not vacuous: with 10^6 times alpha_max the (I3) step-size invariant
    must read > 1 (alpha J_1 ... / h = 10^6 at t = 1)."""
    o = q.gd_loss_ratio(ctx({"p": 4, "L": 1, "n": 3, "h": 0.001, "kappa": 1e6, "T": 3}, R=6,
                            args={"weights": "small-loss", "statistic": "step-size"}))
    assert (o.value[o.valid] > 1.5).all() and o.valid.any()


def test_exact_init_sampler_matches_the_full_forward_pass():
    """Means of ||x_L||^2, f^2 and a cross-sample inner product agree within 5 standard errors (fixed seeds)."""
    X = torch.randn(1, 3, 16, generator=torch.Generator().manual_seed(0), dtype=F64)
    X = (X / X.norm(dim=-1, keepdim=True)).expand(3000, -1, -1)
    a = net.activation("huberized-relu", 0.01)
    gen = torch.Generator().manual_seed(1)
    us, f = net.init_preactivations_exact(gen, X, 3, a)
    full = net.forward(net.init(torch.Generator().manual_seed(2), 3000, 16, 3), X, a)
    for ex, fu in [(a.f(us[-1]).pow(2).sum(-1)[:, 0], full.x[-1].pow(2).sum(-1)[:, 0]),
                   (f[:, 0] ** 2, full.out[:, 0] ** 2),
                   ((a.f(us[1]) * a.f(us[1]).roll(1, 1)).sum(-1)[:, 0], (full.x[2] * full.x[2].roll(1, 1)).sum(-1)[:, 0])]:
        se = math.sqrt(ex.var() / 3000 + fu.var() / 3000)
        assert abs(float(ex.mean() - fu.mean())) < 5 * se


def test_exact_weight_norm_sampler_matches_its_mean():
    o = q.init_weight_norm_ratio(ctx({"p": 64, "L": 3}, R=4000, args={"sampler": "exact"}))
    sq = (o.value ** 2) * 5 * 64 * 3
    assert float(sq.mean()) == pytest.approx(64 * 7, rel=0.01)  # E||V||^2 = p(2L+1)


def test_sparse_sups_against_brute_force():
    gen = torch.Generator().manual_seed(4)
    M = torch.randn(2, 6, 6, generator=gen, dtype=F64)
    for k in (1, 2, 3):
        brute = torch.stack([torch.stack([torch.linalg.matrix_norm(M[r][:, list(S)], ord=2)
                                          for S in itertools.combinations(range(6), k)]).max() for r in range(2)])
        got = q._sparse_op(M, k)
        assert (got <= brute + 1e-12).all()  # a lower estimate, never above the sup
        if k == 1:
            assert torch.allclose(got, brute)
    assert torch.allclose(q._sparse_bilinear(M, 1), M.abs().flatten(1).amax(-1))
    w = torch.randn(2, 6, generator=gen, dtype=F64)
    for k in (1, 3, 6):
        brute = torch.tensor([max(float(w[r, list(S)].norm()) for S in itertools.combinations(range(6), k))
                              for r in range(2)], dtype=F64)
        assert torch.allclose(q._topk_norm(w, k), brute)


def _dense_sparse_op(M, k, iters=30):
    """The truncated power iteration of _sparse_op with dense iterates and the Gram (its first implementation)."""
    G = M.transpose(-1, -2) @ M
    v = torch.ones(M.shape[:-2] + M.shape[-1:], dtype=F64)
    for _ in range(50):
        v = (G @ v.unsqueeze(-1)).squeeze(-1)
        v = v / v.norm(dim=-1, keepdim=True)
    cols = M.norm(dim=-2)
    best = torch.zeros(M.shape[:-2], dtype=F64)
    for a in (torch.zeros_like(cols).scatter(-1, cols.topk(k, dim=-1).indices, 1.0), v):
        for _ in range(iters):
            a = (G @ a.unsqueeze(-1)).squeeze(-1)
            keep = a.abs().topk(k, dim=-1).indices
            a = torch.zeros_like(a).scatter(-1, keep, a.gather(-1, keep))
            a = a / a.norm(dim=-1, keepdim=True)
        best = torch.maximum(best, (M @ a.unsqueeze(-1)).squeeze(-1).norm(dim=-1))
    return best, v


def _dense_sparse_bilinear(M, k, v, iters=30):
    def trunc(u):
        keep = u.abs().topk(k, dim=-1).indices
        u = torch.zeros_like(u).scatter(-1, keep, u.gather(-1, keep))
        return u / u.norm(dim=-1, keepdim=True)

    b0 = torch.nn.functional.one_hot(M.abs().flatten(-2).argmax(-1) % M.shape[-1], M.shape[-1]).to(F64)
    best = torch.zeros(M.shape[:-2], dtype=F64)
    for b in (b0, v):
        b = trunc(b)
        for _ in range(iters):
            a = trunc((M @ b.unsqueeze(-1)).squeeze(-1))
            b = trunc((a.unsqueeze(-2) @ M).squeeze(-2))
        best = torch.maximum(best, (a.unsqueeze(-2) @ M @ b.unsqueeze(-1)).squeeze(-1).squeeze(-1).abs())
    return best


@pytest.mark.parametrize("shape", [(3, 40, 40), (2, 3, 24, 24)])
def test_sparse_searches_equal_their_dense_iterations(shape):
    """_sparse_op / _sparse_bilinear keep their k-sparse iterates as (support, values) and multiply by k columns
    or rows of M: the same iterations as with dense vectors, to rounding (also on a transposed view, as E.6 calls it)."""
    M = torch.randn(*shape, generator=torch.Generator().manual_seed(5), dtype=F64)
    for A in (M, M.transpose(-1, -2)):
        for k in (2, 5):
            ref, v = _dense_sparse_op(A, k)
            assert torch.allclose(q._top_right_vector(A.transpose(-1, -2) @ A), v, rtol=1e-10, atol=1e-12)
            assert torch.allclose(q._sparse_op(A, k), ref, rtol=1e-12, atol=0)
            assert torch.allclose(q._sparse_bilinear(A, k), _dense_sparse_bilinear(A, k, v), rtol=1e-12, atol=0)


def test_chain_products_against_explicit_matrices():
    X, _, Vs, a = problem(L=3, p=4)
    fwd = net.forward(Vs, X, a)
    mats, rows = q._chains(Vs, fwd)
    r, s = 2, 1
    for l1, l2, M in mats:
        ref = Vs[l1 - 1][r]
        for j in range(l1 + 1, l2 + 1):
            ref = Vs[j - 1][r] @ torch.diag(fwd.dphi[j - 2][r, s]) @ ref
        assert torch.allclose(M[r, s], ref, rtol=1e-12)
    for l1, w in rows:
        ref = Vs[l1 - 1][r]
        for j in range(l1 + 1, 4):
            ref = Vs[j - 1][r] @ torch.diag(fwd.dphi[j - 2][r, s]) @ ref
        ref = Vs[-1][r] @ torch.diag(fwd.dphi[2][r, s]) @ ref
        assert torch.allclose(w[r, s], ref[0], rtol=1e-12)


def _e10(part, coefficients, L=1, R=4, seed=3):
    c = ctx({"p": 6, "n": 3, "L": L, "h": 1e-4}, R=R, seed=seed, args={"part": part, "activation": "huberized-relu"})
    if coefficients is not None:
        c.inputs_spec["coefficients"] = coefficients
    return QUANTITIES.get("chatterji2021-init-chain").obj(c).value


def test_e10_fixed_vector_is_drawn_through_the_context():
    """Lemma E.10's "fixed z" is ctx.coefficients(p), normalised: z = e_1 (first) reads ||V_1 e_1|| at L = 1, a
    pinned z gives its own value whatever its scale, and null-vector puts z orthogonal to every input point. A z
    built inside the estimator ignored all of these."""
    c = ctx({"p": 6, "n": 3, "L": 1}, R=4, seed=3)
    X = c.inputs()
    Vs = net.init(c.generator, 4, 6, 1, F64)
    torch.testing.assert_close(_e10("e10-b", "first"), Vs[0][:, :, 0].norm(dim=-1), rtol=1e-12, atol=0)
    zn = null_vectors(X.transpose(-1, -2))  # unit, orthogonal to the 3 input points in R^6
    assert float((X @ zn.unsqueeze(-1)).abs().max()) < 1e-12
    torch.testing.assert_close(_e10("e10-b", "null-vector"), (Vs[0] @ zn.unsqueeze(-1)).squeeze(-1).norm(dim=-1),
                               rtol=1e-12, atol=0)
    z = [0.3, -1.0, 0.2, 0.0, 0.5, 0.1]
    pinned = _e10("e10-b", z, L=3)
    torch.testing.assert_close(_e10("e10-b", [3 * v for v in z], L=3), pinned, rtol=1e-12, atol=0)
    assert float((pinned - _e10("e10-b", None, L=3)).abs().max()) > 1e-3


def test_clustered_data_and_explicit_margin():
    c = ctx({"p": 32, "n": 6, "delta": 0.1, "cprime": 2.0}, R=4, args={"part": "c1"})
    r = torch.full((4,), 0.05, dtype=F64)
    X, y, mu = q._clustered(c, 32, 6, r)
    assert torch.allclose(X.norm(dim=-1), torch.ones(4, 6, dtype=F64))
    assert torch.allclose((X - y[..., None] * mu[:, None]).norm(dim=-1), r[:, None].expand(4, 6), rtol=1e-12)
    o = q.clustered_margin(ctx({"p": 256, "n": 10, "delta": 0.1, "cprime": 2.0}, R=20, args={"part": "c1"}))
    assert (o.value > 0.1).all()  # the proof's W* separates r-clustered data with margin ~ c sqrt(p)


def test_clustered_exact_sampler_against_the_full_weight_matrix():
    """The exact sampler's decomposition V_1 x_s = y_s (c V_1 mu + sqrt(1 - c^2) V_1 w_s) and V_1 (x_s - y_s mu) =
    y_s (-r^2/2 V_1 mu + sqrt(1 - c^2) V_1 w_s) hold for an explicit V_1; and every part's quantity has the same
    distribution under both samplers (means within 5 standard errors; fixed seeds)."""
    p, n = 24, 5
    c0 = ctx({"p": p, "n": n}, R=3)
    r = torch.full((3,), 0.03, dtype=F64)
    X, y, mu, w, c = q._clustered(c0, p, n, r, parts=True)
    V1 = torch.randn(3, p, p, generator=torch.Generator().manual_seed(5), dtype=F64)
    a, Vw = (V1 @ mu[..., None]).transpose(-1, -2), w @ V1.transpose(-1, -2)  # (R, 1, p), (R, n, p)
    sq = (1 - c ** 2).sqrt()
    assert torch.allclose(y[..., None] * (c * a + sq * Vw), X @ V1.transpose(-1, -2), atol=1e-12)
    D = (X - y[..., None] * mu[:, None]) @ V1.transpose(-1, -2)
    assert torch.allclose(y[..., None] * (-(r ** 2 / 2)[:, None, None] * a + sq * Vw), D, atol=1e-14)
    params = {"p": 32, "n": 6, "delta": 0.1, "cprime": 1.0}
    for part in ("c1", "c2-plus", "c2-c"):
        ex = q.clustered_margin(ctx(params, R=3000, seed=1, args={"part": part})).value
        fu = q.clustered_margin(ctx(params, R=3000, seed=2, args={"part": part, "sampler": "full"})).value
        se = math.sqrt(ex.var() / 3000 + fu.var() / 3000)
        assert abs(float(ex.mean() - fu.mean())) < 5 * se, part
        assert abs(float(ex.std() / fu.std()) - 1) < 0.1, part


@pytest.mark.parametrize("part", ["e3-op", "e3-out"])
def test_e3_exact_samplers_against_full_weights(part):
    """E.3's per-layer samplers (bidiagonal model of ||V_l||_op, chi^2_p of ||V_{L+1}||^2) against the full He
    initialisation with exact SVDs: means and spreads agree (5 standard errors, 10%; fixed seeds)."""
    params = {"p": 12, "L": 3, "n": 3}
    ex = q.init_chain(ctx(params, R=3000, seed=1, args={"part": part})).value
    fu = q.init_chain(ctx(params, R=3000, seed=2, args={"part": part, "sampler": "full"})).value
    se = math.sqrt(ex.var() / 3000 + fu.var() / 3000)
    assert abs(float(ex.mean() - fu.mean())) < 5 * se
    assert abs(float(ex.std() / fu.std()) - 1) < 0.1


@pytest.mark.parametrize("part", ["e4-op", "e4-out", "e5", "e6", "e7", "e8"])
def test_init_chain_fast_paths_equal_the_explicit_chains(part):
    """E.4-E.8 read the chains once per (l1, l2) where they do not depend on the sample and the output rows by a
    backward sweep: the same values as evaluating every explicit chain M_s(l1, l2) of `_chains` (SVD for e4-op)."""
    params, args = {"p": 10, "L": 3, "n": 4, "h": 0.01}, {"part": part, "k": "2" if part in ("e5", "e6", "e7") else "1"}
    got = q.init_chain(ctx(params, R=5, seed=3, args=args)).value
    c = ctx(params, R=5, seed=3, args=args)
    X = c.inputs()
    Vs = net.init(c.generator, 5, 10, 3, c.dtype)
    mats, rows = q._chains(Vs, net.forward(Vs, X, q._act(c)))
    k = int(args["k"])
    if part == "e4-out":
        ref = torch.stack([w.norm(dim=-1).amax(-1) for _, w in rows], -1).amax(-1)
    elif part == "e8":
        ref = torch.stack([q._topk_norm(w, k).amax(-1) for _, w in rows], -1).amax(-1)
    else:
        fn = {"e4-op": lambda M: torch.linalg.matrix_norm(M, ord=2), "e5": lambda M: q._sparse_op(M, k),
              "e6": lambda M: q._sparse_op(M.transpose(-1, -2), k), "e7": lambda M: q._sparse_bilinear(M, k)}[part]
        ref = torch.stack([fn(M).amax(-1) for _, _, M in mats], -1).amax(-1)
    assert torch.allclose(got, ref, rtol=1e-12, atol=0)
    if part == "e4-op":
        assert (got >= ref).all()  # rounded up, never below the SVD


def test_ball_points_lie_on_the_ball_and_the_taylor_remainder_is_second_order():
    X, _, Vs, a = problem(L=2, p=6, act="scaled-swish", h=0.5)
    fwd = net.forward(Vs, X, a)
    c = ctx({}, R=3)
    for norm in ("op", "fro"):
        P = q._ball_point(c, Vs, fwd, 0.3, norm)
        for ell, (A, B) in enumerate(zip(P, Vs)):
            size = q._op_norm(A - B) if (norm == "op" and ell < 2) else torch.linalg.matrix_norm(A - B)
            assert torch.allclose(size, torch.full((3,), 0.3, dtype=F64))
    D = [torch.randn(V.shape, dtype=F64, generator=torch.Generator().manual_seed(7)) for V in Vs]
    r1 = q._taylor_remainder([v + 1e-2 * d for v, d in zip(Vs, D)], Vs, X, a)
    r2 = q._taylor_remainder([v + 5e-3 * d for v, d in zip(Vs, D)], Vs, X, a)
    assert torch.allclose(r1 / r2, torch.full_like(r1, 4.0), rtol=0.05)  # smooth activation: remainder ~ step^2


def test_nt_solver_and_margin():
    X, y, Vs, a = problem(L=1, p=6, n=5)
    f1, feats = q._nt_features(Vs, X, a)
    loss0, _ = q.nt_solve(f1, feats, y, 0.0, iters=5)
    assert torch.allclose(loss0, net.loss(f1, y))  # rho = 0: the ball is {V1}
    margin, W = q._nt_margin(feats, y)
    pos = margin > 1e-9  # where 0 is in the hull the margin is <= 0 and W* is not defined (D.9: not valid)
    assert pos.any()
    assert torch.allclose(net.collective_norm(W)[pos], torch.ones(int(pos.sum()), dtype=F64))
    # W* is optimal: no random unit direction has a larger worst-sample margin
    A = [y.reshape(3, 5, *([1] * (G.dim() - 2))) * G for G in feats]
    gen = torch.Generator().manual_seed(9)
    for _ in range(200):
        U = [torch.randn(w.shape, generator=gen, dtype=F64) for w in W]
        nU = net.collective_norm(U)
        U = [u / nU.reshape(-1, 1, 1) for u in U]
        m = torch.stack([sum((x[:, s] * u).flatten(1).sum(-1) for x, u in zip(A, U)) for s in range(5)], -1).amin(-1)
        assert (m <= margin + 1e-9).all()
    rho = 2.0
    lossr, D = q.nt_solve(f1, feats, y, rho)
    explicit = _plain_nt_loss(f1, feats, [rho * w for w in W], y)
    assert (lossr <= explicit + 1e-12).all()
    assert all((torch.linalg.matrix_norm(d) <= rho * (1 + 1e-12)).all() for d in D)
    assert torch.allclose(lossr, _plain_nt_loss(f1, feats, D, y), rtol=1e-13)  # the loss of the D returned
    # the same iterates as FISTA with every F(Z) formed directly (nt_solve takes Z's from Dn's and D's, linearly)
    assert torch.allclose(q.nt_solve(f1, feats, y, rho, iters=60)[0], _plain_fista(f1, feats, y, rho, 60), rtol=1e-12)


def _plain_nt_loss(f1, feats, Ds, y):
    F = f1 + sum((G * D.unsqueeze(1)).flatten(2).sum(-1) for G, D in zip(feats, Ds))
    return torch.nn.functional.softplus(-y * F).mean(-1)


def _plain_fista(f1, feats, y, rho, iters):
    n = y.shape[-1]
    step = (4 * n / sum(G.flatten(2).pow(2).sum(-1) for G in feats).sum(-1)).reshape(-1, 1, 1)
    D = Z = [torch.zeros_like(G[:, 0]) for G in feats]
    t, best = 1.0, _plain_nt_loss(f1, feats, D, y)
    for _ in range(iters):
        F = f1 + sum((G * z.unsqueeze(1)).flatten(2).sum(-1) for G, z in zip(feats, Z))
        c = -y * torch.sigmoid(-y * F) / n
        Dn = q._project_ball([z - step * torch.einsum("rn,rn...->r...", c, G) for z, G in zip(Z, feats)], rho)
        tn = (1 + math.sqrt(1 + 4 * t * t)) / 2
        Z, D, t = [a + (t - 1) / tn * (a - b) for a, b in zip(Dn, D)], Dn, tn
        best = torch.minimum(best, _plain_nt_loss(f1, feats, D, y))
    return best


def test_descent_lemma_quantity_equality_case():
    o = q.descent_lemma_ratio(ctx({"p": 5, "L": 2, "kappa": 1.0}, R=400, args={"family": "quadratic"}))
    assert float(o.value.min()) == pytest.approx(1.0, abs=1e-12)  # the top eigenvector at alpha = 1/((L+1/2)M)
    assert (o.value >= 1 - 1e-12).all()


def test_quantities_refuse_unknown_parts():
    from lemmacheck.errors import EstimatorError
    for fn, args in [(q.norm_profile_ratio, {"part": "x"}), (q.perturbation_ratio, {"part": "x"}),
                     (q.init_chain, {"part": "x"}), (q.ball_perturbation, {"part": "x"})]:
        with pytest.raises(EstimatorError):
            fn(ctx({"L": 1, "p": 4, "n": 3, "h": 0.1, "tau": 0.1}, R=2, args=args))


# ------------------------------------------------------- Hypothesis over the stated domains (Lemmas B.5-B.7, B.9)

profiles = st.integers(1, 10).flatmap(lambda L: st.lists(st.floats(0, 10), min_size=L + 1, max_size=L + 1))


@settings(max_examples=300, deadline=None)
@given(profiles)
def test_lemma_b6_outer_bound_and_part_2_for_every_profile(a):
    """max_k prod_{j>k} ||V_j|| <= ||V||^L whenever ||V|| > 1 (Part 2, hence Part 1's outer bound)."""
    t = torch.tensor([a], dtype=F64)
    eta, L = float(t.norm()), len(a) - 1
    if eta > 1:
        assert float(q.trailing_products_max(t)[0]) <= eta ** L * (1 + 1e-12)


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 10), st.floats(0, 10))
def test_lemma_b7_holds_with_two_blocks(a1, a2):
    """L = 1 (two blocks): |I| is 1 or 2, the two ends of the AM-GM range, so the printed bound holds; the lemma fails
    only from L = 2 on (test_b7_counterexample_is_found_by_the_quantity)."""
    nA = math.hypot(a1, a2)
    bound = max(nA ** 2 / 2, nA)
    for lhs in (a1, a2, a1 * a2):
        assert lhs <= bound * (1 + 1e-12) + 1e-300


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["huberized-relu", "scaled-swish"]), st.floats(1e-6, 10),
       st.floats(-1e4, 1e4), st.floats(-1e4, 1e4))
def test_lemma_b9_contraction_for_every_pair(act, h, a, b):
    f = net.activation(act, h).f
    x = torch.tensor([a, b], dtype=F64)
    fx = f(x)
    assert abs(float(fx[0] - fx[1])) <= abs(a - b) * (1 + 1e-12) + 1e-12 * h


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 4), st.floats(0.1, 5.0))
def test_lemma_b5_core_inequality_for_random_nets(seed, L, scale):
    """The proof of Lemma B.5: |f_V(x)| <= prod_j ||V_j||_op <= (||V||/sqrt(L+1))^{L+1} for unit x (any V)."""
    X, _, Vs, a = problem(seed=seed, R=2, n=3, p=4, L=L, scale=scale, h=0.3)
    out = net.forward(Vs, X, a).out.abs().amax(-1)
    prod = torch.stack([q._op_norm(V) for V in Vs], -1).prod(-1)
    amgm = (net.collective_norm(Vs) / math.sqrt(L + 1)) ** (L + 1)
    assert (out <= prod * (1 + 1e-12)).all() and (prod <= amgm * (1 + 1e-12)).all()


@pytest.mark.parametrize("mv", [-2458.3, -30.0, 0.0, 2.5, 40.0, 719.4, 744.9, 2000.0, 40000.0])
@pytest.mark.parametrize("dm", [-1e-2, -3.3e-7, 1e-9, 4e-5])
def test_g_lipschitz_ratio_against_high_precision(mv, dm):
    """|g(V) - g(W)| / J(V) from the margins, against 60-digit arithmetic on the same float margins. Beyond
    m ~ 745 g and J underflow (the direct quotient was 0/0 = NaN, and 0 already at J subnormal, m = 719)."""
    out_v = torch.tensor([[mv]], dtype=F64)
    out_w = out_v + dm
    got = float(q.g_lipschitz_ratio(out_v, out_w, torch.ones(1, 1, dtype=F64))[0, 0])
    with mpmath.workdps(60):
        a, b = mpmath.mpf(float(out_v)), mpmath.mpf(float(out_w))
        ref = abs(1 / (1 + mpmath.e ** a) - 1 / (1 + mpmath.e ** b)) / mpmath.log1p(mpmath.e ** (-a))
    # the margin change carries rounding eps |m| (it is formed from the two margins, as in the estimator)
    assert got == pytest.approx(float(ref), rel=1e-9 + 4e-16 * abs(mv) / abs(dm))


def test_b12_ratio_is_finite_where_the_losses_underflow():
    """Large weights (scale 40: margins in the thousands, J_s below float64's range) gave NaN draws of Lemma B.12's
    ratio; now every draw is a number, and each valid one sits under the bound (the lemma, with large slack)."""
    o = q.perturbation_ratio(ctx({"p": 4, "L": 1, "n": 3, "h": 1.0, "scale": 40.0}, R=32,
                                 args={"part": "b12", "weights": "init"}))
    assert torch.isfinite(o.value).all() and o.valid.sum() >= 16
    assert (o.value[o.valid] < 1).all() and (o.value[o.valid] > 0).any()


def test_segment_condition_is_checked_where_the_losses_underflow():
    """J_s(V + t D) <= 2 J_s(V) with every J underflowing: margin 2000 -> 1980 multiplies J by e^20, a failure the
    raw comparison (0 <= 2 * 0) passed; a move that raises the margin passes."""
    X = torch.tensor([[[1.0, 0.0]]], dtype=F64)
    Vs = [torch.eye(2, dtype=F64)[None] * 100.0, torch.tensor([[[20.0, 0.0]]], dtype=F64)]  # f = 2000 (L = 1)
    y = torch.ones(1, 1, dtype=F64)
    act = net.activation("huberized-relu", 0.1)
    logJ0 = q._per_sample_log_loss(net.forward(Vs, X, act).out, y)
    assert float(logJ0) < -1990 and float(torch.exp(logJ0)) == 0.0
    down = [torch.zeros_like(Vs[0]), -0.01 * Vs[1]]
    assert not bool(q._segment_ok(Vs, down, X, y, act, logJ0)[0])
    assert bool(q._segment_ok(Vs, [torch.zeros_like(Vs[0]), 0.01 * Vs[1]], X, y, act, logJ0)[0])


def test_b9_ratio_rounding_is_within_its_reported_scale():
    """Lemma B.9's ratio at p = 1, h = 1e-6 exceeds 1 by up to ~1e-11 on pairs past the Huber band (phi(v) = v - h/2:
    the difference cancels, rounding eps |v| / |v1 - v2|). Each such draw has exact ratio <= 1 (50 digits on the same
    float pair), and the reported scale puts every draw within the comparison's rounding tolerance."""
    from lemmacheck.verdicts import violates
    c = ctx({"p": 1, "h": 1e-6}, R=4000, seed=0, args={"activation": "huberized-relu"})
    g = c.generator.get_state()
    o = q.activation_contraction(c)
    c.generator.set_state(g)  # replay the same pairs: the estimator draws h's points, then v1, then v2
    q._h_and_points(c, 1)
    v1 = torch.randn(4000, 1, generator=c.generator, dtype=F64) * 1e-6 * q._log_uniform(c, 1e-3, 1e3, 4000, 1)
    v2 = v1 + torch.randn(4000, 1, generator=c.generator, dtype=F64) * 1e-6 * q._log_uniform(c, 1e-4, 1e2, 4000, 1)
    assert torch.equal(o.extras["scale"], (v1.norm(dim=-1) + v2.norm(dim=-1)) / (v1 - v2).norm(dim=-1))  # same pairs
    value = o.value.numpy()
    assert violates("<=", value, 1.0).sum() >= 1  # without the scale: false violations (the full run's lead)
    assert not violates("<=", value, 1.0, scale=o.extras["scale"].numpy()).any()
    huber = lambda z, h: 0 if z < 0 else (z * z / (2 * h) if z <= h else z - h / 2)
    with mpmath.workdps(50):
        h = mpmath.mpf(1e-6)
        for r in np.nonzero(value > 1)[0]:
            a, b = mpmath.mpf(float(v1[r, 0])), mpmath.mpf(float(v2[r, 0]))
            assert abs(huber(a, h) - huber(b, h)) <= abs(a - b)
            assert value[r] - 1 <= 4 * np.finfo(float).eps * float(o.extras["scale"][r])
