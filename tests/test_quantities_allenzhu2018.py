"""The allenzhu2018 quantities added for the paper's full coverage, each against a plain reference, a closed form,
autograd or a brute-force enumeration. Every draw has a fixed seed, so each test is deterministic."""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper
from scipy import integrate, stats

import lemmacheck.builtin  # noqa: F401  (registers every quantity)
from lemmacheck.context import Context
from lemmacheck.errors import EstimatorError
from lemmacheck.registry import QUANTITIES

net = paper("allenzhu2018").network
q = paper("allenzhu2018").quantities

INP = {"kind": "rnn-sequences", "n": "n", "L": "L", "dx": "dx", "separation": "delta", "tail": "random"}
P = {"m": 32, "L": 3, "n": 2, "dx": 4, "d": 1, "delta": 0.2, "tau0": 1.0}


def obs(name, params, args=None, R=8, seed=0, search="none", inputs=INP):
    ctx = Context("t", dict(params), R, torch.Generator().manual_seed(seed), args=args or {},
                  inputs_spec=inputs if "L" in params and "dx" in params else {}, search=search)
    return QUANTITIES.get(name).obj(ctx)


# ------------------------------------------------------------------ Appendix A: exact tails


def test_a3_a4_tails_match_scipy_direct():
    o = obs("az-tail-bound-ratio", {"k": 7}, {"which": "A.3-upper"}, R=50)
    t = o.extras["t"].numpy()
    ok = t < 300  # the direct quotient under/overflows beyond (the estimator works in log space)
    ref = stats.chi2.sf(7 + 2 * np.sqrt(7 * t[ok]) + 2 * t[ok], 7) / np.exp(-t[ok])
    np.testing.assert_allclose(o.value.numpy()[ok], ref, rtol=1e-9, atol=1e-300)
    o = obs("az-tail-bound-ratio", {"n": 9}, {"which": "A.4"}, R=50)
    b = o.extras["b"].numpy()
    ref = (stats.chi2.cdf(9 - 9 / b, 9) + stats.chi2.sf(9 + 9 / b, 9)) / (2 * np.exp(-9 / (8 * b ** 2)))
    np.testing.assert_allclose(o.value.numpy(), ref, rtol=1e-9)


def test_binomial_chi2_mixture_is_the_law_of_the_relu_norm():
    """Fact A.11's law of ||phi(x)||^2 (x ~ N(0, I_n)) against 200k Monte Carlo draws, 5 sigma."""
    g = torch.Generator().manual_seed(1)
    x = torch.relu(torch.randn(200_000, 5, generator=g, dtype=torch.float64))
    s = (x ** 2).sum(-1).numpy()
    pts = np.array([0.0, 0.5, 2.5, 6.0])
    F = q._binom_chi2_cdf(5, pts)
    emp = (s[:, None] <= pts[None, :]).mean(0)
    assert np.all(np.abs(emp - F) <= 5 * np.sqrt(F * (1 - F) / len(s)) + 1e-12)
    np.testing.assert_allclose(q._binom_chi2_sf(5, pts[1:]), 1 - F[1:], rtol=1e-12)


def test_good_failure_matches_enumeration_of_the_multinomial():
    m, p = 6, 0.3
    for qq in (1, 2, 3):
        ok = 0.0
        for a, b in itertools.product(range(m + 1), repeat=2):
            if a + b <= m and a >= qq and b >= qq:
                ok += math.factorial(m) / (math.factorial(a) * math.factorial(b) * math.factorial(m - a - b)) \
                    * p ** a * p ** b * (1 - 2 * p) ** (m - a - b)
        assert q._good_failure(m, p, qq) == pytest.approx(1 - ok, abs=1e-12)


def test_a5_mean_closed_form_against_quadrature_and_a12_against_direct_normal():
    o = obs("az-tail-bound-ratio", {}, {"which": "A.5-mean"}, R=6)
    for m, v in zip(o.extras["m"].numpy(), o.value.numpy()):
        g2 = math.log(m)
        ey = integrate.quad(lambda x, c=g2: (x * x - c) * stats.norm.pdf(x), math.sqrt(g2), np.inf)[0] * 2
        assert v == pytest.approx(ey * math.sqrt(m), rel=1e-7)
    o = obs("az-tail-bound-ratio", {}, {"which": "A.12-two"}, R=20)
    t, mu = o.extras["t"].numpy(), o.extras["mu"].numpy()
    p = 1 - (stats.norm.cdf(t - mu) - stats.norm.cdf(-t - mu))
    ref = np.maximum((1 - 4 * t / 5) / p, p / (1 - 2 * t / 3))
    np.testing.assert_allclose(o.value.numpy(), ref, rtol=1e-9)


def test_a18_binomial_tails_and_directions():
    o = obs("az-tail-bound-ratio", {"N": 12}, {"which": "A.18-textbook"}, R=30)
    t, p = o.extras["t"].numpy(), o.extras["p"].numpy()
    k = np.arange(13)
    for ti, pi, v in zip(t, p, o.value.numpy()):
        pmf = stats.binom.pmf(k, 12, pi)
        up, lo = pmf[k / 12 - pi >= ti - 1e-12].sum(), pmf[k / 12 - pi <= -ti + 1e-12].sum()
        assert v == pytest.approx(max(up, lo) / math.exp(-2 * ti ** 2 * 12), rel=1e-6, abs=1e-300)
    assert (o.value <= 1).all()  # Hoeffding holds
    assert (obs("az-tail-bound-ratio", {"N": 12}, {"which": "A.18-printed-lower"}, R=30).value < 1).all()


def test_truncated_squares_mean_and_relu_norm_readings():
    m = 1000
    o = obs("az-truncated-squares", {"m": m}, R=400)
    g = math.sqrt(math.log(m))
    ey = 2 * g * stats.norm.pdf(g) + 2 * (1 - g * g) * stats.norm.sf(g)
    mean = m * ey / (2 * math.sqrt(m))
    assert abs(float(o.value.mean()) - mean) < 5 * float(o.value.std()) / 20
    # the literal phi(a) = max(a,0)^2 of Lemma A.8 concentrates at sqrt(3) sqrt(n/2): |ratio - 1| ~ sqrt(3) - 1
    sq = obs("az-relu-norm-deviation", {"n": 4000}, {"which": "A.8", "square": True}, R=50).value
    assert abs(float(sq.median()) - (math.sqrt(3) - 1)) < 0.05
    assert float(obs("az-relu-norm-deviation", {"n": 4000}, {"which": "A.8"}, R=50).value.max()) < 0.05
    assert float(obs("az-relu-norm-deviation", {"m": 4000, "n": 3}, {"which": "A.9"}, R=50).value.max()) < 0.1
    assert float(obs("az-relu-norm-deviation", {"m": 4000}, {"which": "A.10"}, R=50).value.max()) < 0.1


def test_tie_ranks_are_searchsorted_left_and_right_on_sorted_rows_with_ties():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 500, generator=g, dtype=torch.float64)
    for rows in (x, x.round(decimals=1), x.clamp_min(0), torch.zeros(2, 7), torch.ones(1, 1)):
        xs = rows.sort(-1).values
        below, upto = q._tie_ranks(xs)
        assert torch.equal(below, torch.searchsorted(xs, xs, right=False))
        assert torch.equal(upto, torch.searchsorted(xs, xs, right=True))


def test_ks_statistic_matches_scipy_and_handles_atoms():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 400, generator=g, dtype=torch.float64)
    ours = q._ks_stat(x, stats.norm.cdf).numpy()
    ref = [stats.kstest(r, "norm").statistic * math.sqrt(400) for r in x.numpy()]
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    # half the mass at 0 exactly, drawn exactly: the statistic stays O(1); a lost atom (F(0) = 0) is caught
    z = torch.where(torch.rand(1, 2000, generator=g) < 0.5, torch.zeros(1, 2000, dtype=torch.float64), x.new_tensor(
        np.abs(np.random.default_rng(0).standard_normal((1, 2000)))))
    mix = lambda t: np.where(t < 0, 0.0, 0.5 + 0.5 * (2 * stats.norm.cdf(t) - 1))
    assert float(q._ks_stat(z, mix)) < 2.5
    assert float(q._ks_stat(z, lambda t: np.where(t < 0, 0.0, 2 * stats.norm.cdf(t) - 1))) > 10


def _a11(part, coefficients=None, R=100, args=None):
    spec = {} if coefficients is None else {"coefficients": coefficients}
    ctx = Context("t", {"m": 400, "p": 4}, R, torch.Generator().manual_seed(0),
                  args={"part": part, "draws": 50, **(args or {})}, inputs_spec=spec)
    return QUANTITIES.get("az-fact-a11-ks").obj(ctx).value


def test_fact_a11_statistic_is_small_under_the_stated_law():
    # every coefficient family a run or hunt draws q from: Gaussian, q = h (first), q orthogonal to h (null-vector)
    for fam in (None, "ones", "parity", "first", "null-vector", [-2.0, 0.0, 0.0, 0.0]):
        for part in ("coords", "norm"):
            v = _a11(part, fam, R=60)
            assert float(v.quantile(0.5)) < 1.0 and float((v > 1.95).float().mean()) <= 0.05, (fam, part)


def test_fact_a11_q_is_drawn_through_the_context():
    """q comes from ctx.coefficients (h = e_1): the pinned q = -h (h + q = 0, every indicator 1) breaks the printed
    law on every draw, which a q built inside the estimator never reached; a stale args.q is refused."""
    for part in ("coords", "norm"):
        assert float(_a11(part, [-1.0, 0.0, 0.0, 0.0], R=20).min()) > 5
        assert float(_a11(part, [-0.999, 0.0, 0.0, 0.0], R=20).max()) < 1.95
    with pytest.raises(EstimatorError, match="inputs.coefficients"):
        _a11("coords", args={"q": "-2"})


def test_decomposition_identity_and_conditional_probabilities():
    assert float(obs("az-decomposition", {"m": 500, "theta": 0.3}, {"part": "identity"}).value.max()) < 1e-14
    # E.4 (c): the exact conditional tail against Monte Carlo over g2 for one g1
    m, theta = 50, 0.2
    o = obs("az-decomposition", {"m": m, "theta": theta}, {"part": "e4c", "variance": 2.0}, R=1, seed=3)
    g = torch.Generator().manual_seed(3)
    g1 = torch.randn(1, m, generator=g, dtype=torch.float64) * math.sqrt(2 / m)
    g2 = torch.randn(200_000, m, generator=torch.Generator().manual_seed(9), dtype=torch.float64) * math.sqrt(2 / m)
    u = theta * g2 - (1 - math.sqrt(1 - theta ** 2)) * g1
    thr = theta / (2 * math.sqrt(m))
    mc = torch.minimum((u >= thr).double().mean(0), (u <= -thr).double().mean(0)).min()
    assert float(o.value[0]) == pytest.approx(float(mc), abs=0.01)


def test_finite_table_facts_known_true_hold_and_the_printed_a2_fails():
    assert float(obs("az-finite-table-fact", {"nx": 5, "ny": 5}, {"which": "A.1"}, R=3000).value.min()) >= 1 - 1e-12
    a2 = obs("az-finite-table-fact", {"nx": 5, "ny": 5}, {"which": "A.2"}, R=3000)
    assert float(a2.value[a2.valid].min()) >= 1 - 1e-12
    assert float(obs("az-finite-table-fact", {"nx": 5, "ny": 5}, {"which": "A.2", "nonnegative": False}, R=3000).value.min()) < 1


# ------------------------------------------------------------------ exact identities


def test_gradient_and_expansion_identities_are_exact():
    assert float(obs("rnn-gradient-identity-error", dict(P, d=2), {"labels": "gaussian"}).value.max()) < 1e-12
    assert float(obs("rnn-relu-expansion-error", dict(P, tau0=20.0), {"check_radius": 5.0}).value.max()) < 1e-12


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, -1.0, 1e-300, -1e-300, 3.5, -2.25, 1e300, -1e300]),
                          st.floats(-1e6, 1e6)), min_size=1, max_size=12))
def test_proposition_g3_construction(pairs):
    a = torch.tensor([p[0] for p in pairs], dtype=torch.float64)
    b = torch.tensor([p[1] if i % 2 else p[0] for i, p in enumerate(pairs)], dtype=torch.float64)  # ties too
    Dpp = q.relu_difference_diag(a, b)
    assert (Dpp.abs() <= 1).all()
    assert (Dpp[(a >= 0) == (b >= 0)] == 0).all()
    lhs = torch.relu(a) - torch.relu(b)
    rhs = (a >= 0).double() * (a - b) + Dpp * (a - b)
    assert torch.allclose(lhs, rhs, rtol=1e-12, atol=1e-12 * float(torch.maximum(a.abs(), b.abs()).max()))
    assert float(obs("az-relu-difference-error", {"m": 64}, R=50).value.max()) < 1e-14


# ------------------------------------------------------------------ training and semi-smoothness


def test_training_step_is_gradient_descent_on_f():
    params = dict(P, c=0.7, T=1)
    o = obs("rnn-training", params, {"method": "gd"}, R=3, seed=4)
    g = torch.Generator().manual_seed(4)
    X = net.rnn_sequences(g, 3, n=2, L=3, dx=4, separation=0.2)
    W, A, B = net.init(g, 3, 32, 4, 1)
    Y = net.label_sequences(g, 3, 2, 3, 1)
    Wg = W.clone().requires_grad_(True)
    f0 = net.objective(net.forward(Wg, A, B, X), Y)
    (G,) = torch.autograd.grad(f0.sum(), Wg)
    f1 = net.objective(net.forward(W - 0.7 / 32 * G, A, B, X), Y)
    torch.testing.assert_close(o.value, (f1 / f0).detach(), rtol=1e-10, atol=0)
    assert float(obs("rnn-training", dict(P, c=0.0, T=3), R=2).extras["sqrt_m_displacement"].max()) == 0.0


def test_a_diverging_training_run_reads_infinite_not_nan():
    """A step far too large overflows GD within a few steps (W past float range, NaN in the forward pass): such a
    replicate's f(W^(T)) / f(W^(0)) and displacement read +inf (a violation of any "<= eps"), where they read NaN
    (an estimator error, which kept the configuration undecided whatever followed); the others are untouched."""
    small = obs("rnn-training", dict(P, c=0.7, T=3), {"method": "gd"}, R=3, seed=4)
    big = obs("rnn-training", dict(P, c=1e12, T=40), {"method": "gd"}, R=3, seed=4)
    assert torch.isfinite(small.value).all()
    move = big.extras["sqrt_m_displacement"]
    assert not torch.isnan(big.value).any() and not torch.isnan(move).any()
    assert (big.value == math.inf).sum() == 2 and (move == math.inf).sum() == 2


def test_semismooth_remainder_is_second_order():
    g = torch.Generator().manual_seed(5)
    X = net.rnn_sequences(g, 2, n=2, L=3, dx=4, separation=0.2)
    W, A, B = net.init(g, 2, 32, 4, 1)
    Y = net.label_sequences(g, 2, 2, 3, 1)
    D = torch.randn(2, 32, 32, generator=g, dtype=torch.float64)
    r1 = q.semismooth_remainder(W, A, B, X, Y, 1e-4 * D).abs()
    r2 = q.semismooth_remainder(W, A, B, X, Y, 1e-5 * D).abs()
    assert (r2 <= r1 / 50).all()  # ~ 1/100 when no pattern flips (quadratic)
    assert float(obs("rnn-semismooth-ratio", P, R=2, search="adversarial").value.min()) > 0


# ------------------------------------------------------------------ backward and rank-one perturbations


def test_segment_rows_match_explicit_products():
    g = torch.Generator().manual_seed(6)
    X = net.rnn_sequences(g, 1, n=2, L=3, dx=4, separation=0.2)
    W, A, B = net.init(g, 1, 16, 4, 2)
    D = net.forward(W, A, B, X).mask()
    a = torch.randn(1, 2, generator=g, dtype=torch.float64)
    rows = q._segment_rows(a, B, D, W)
    for (l1, l2), v in rows.items():
        M = B[0]
        for l in range(l2, l1 - 1, -1):
            M = M @ torch.diag(D[0, 1, l]) @ W[0]
        torch.testing.assert_close(v[0, 1], a[0] @ M, rtol=1e-12, atol=1e-12)


def test_perturbation_differences_vanish_with_the_radius():
    for w in "abcd":
        assert float(obs("rnn-backward-perturbation", dict(P, tau0=1e-12), {"which": w}, search="adversarial").value.max()) < 1e-9
    for w in ("forward", "back-a", "back-b"):
        assert float(obs("rnn-rank-one-perturbation", dict(P, tau0=1e-12, N=3), {"which": w, "N": "N"}).value.max()) < 1e-9


def test_forward_skips_only_the_product_with_h0():
    """net.forward takes g_1 = A x_1 without multiplying W by h_0 = 0: the same h, g, y as the loop that multiplies
    at every position, bit for bit."""
    g = torch.Generator().manual_seed(11)
    X = net.rnn_sequences(g, 3, n=2, L=4, dx=4, separation=0.2)
    W, A, B = net.init(g, 3, 24, 4, 2)
    f = net.forward(W, A, B, X)
    h = torch.zeros(3, 2, 24, dtype=torch.float64)
    hs, gs = [h], [torch.zeros_like(h)]
    for l in range(4):
        gl = h @ W.transpose(-1, -2) + X[:, :, l] @ A.transpose(-1, -2)
        h = torch.relu(gl)
        hs.append(h)
        gs.append(gl)
    assert torch.equal(f.h, torch.stack(hs, 2)) and torch.equal(f.g, torch.stack(gs, 2))
    assert torch.equal(f.y, torch.stack(hs, 2) @ B.transpose(-1, -2).unsqueeze(1))


def _rank_one_formed(params, args, R, seed):
    """rnn-rank-one-perturbation as it was written before its rows were perturbed in place: W' = y z^T and W~ + W'
    formed as full matrices."""
    ctx = Context("t", dict(params), R, torch.Generator().manual_seed(seed), args=args, inputs_spec=INP,
                  search="random")
    W, A, B, X = q._setup(ctx)
    m = W.shape[-1]
    N = max(1, min(m, round(q._expr_arg(ctx, "N", 1))))
    tau = q._radius(ctx)
    f0 = net.forward(W, A, B, X)
    z = q._fresh_direction(f0, 0, max(1, f0.L - 1))
    z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    idx = torch.rand(R, m, generator=ctx.generator).argsort(-1)[:, :N]
    sgn = torch.randint(0, 2, (R, N), generator=ctx.generator).to(W.dtype) * 2 - 1
    y = torch.zeros(R, m, dtype=W.dtype).scatter(-1, idx, sgn * tau)
    Wp = y.unsqueeze(-1) * z.unsqueeze(-2)
    Wt = W + Wp
    f1 = net.forward(Wt, A, B, X)
    if args["which"] == "forward":
        return ((f1.h - f0.h).flatten(1, 2) @ Wt.transpose(-1, -2)).abs().flatten(1).amax(-1)
    a = ctx.randn(R, B.shape[-2])
    a = a / a.norm(dim=-1, keepdim=True)
    return q._backward_diff(a, B, W, Wp, f0, f1, args["which"][-1], "coord", rank_one=(y, z))


@pytest.mark.parametrize("which", ["forward", "back-a", "back-b"])
def test_rank_one_rows_perturbed_in_place_equal_the_formed_matrices(which):
    """The estimator perturbs only W's N rows where y is nonzero, in place, and restores them for the backward
    products: the forward value is bit for bit the one from forming W' = y z^T and W~ + W'. The backward ones advance
    every segment's chain together, telescoped (`_rank_one_backward_coord`): equal to the chain-at-a-time rows
    (`_backward_diff`) to rounding, and exactly 0 where they were."""
    for p, N in ((dict(P, m=48, L=3, n=2, tau0=2.0), 5), (dict(P, m=40, L=2, n=1, tau0=0.5), 1),
                 (dict(P, m=32, L=4, n=2, tau0=1.0), 2), (dict(P, m=24, L=4, n=2, tau0=8.0), 24)):
        args = {"which": which, "z": "fresh", "N": N}
        got = obs("rnn-rank-one-perturbation", p, args, R=6, seed=3, search="random").value
        ref = _rank_one_formed(p, args, 6, 3)
        if which == "forward":
            assert torch.equal(got, ref)
        else:
            torch.testing.assert_close(got, ref, rtol=1e-10, atol=0)
            assert torch.equal(got == 0, ref == 0)
        assert N == 1 or float(got.max()) > 0  # not a vacuous equality (at N = 1, m = 40 no pattern need flip)


@pytest.mark.parametrize("which", ["a", "b"])
def test_chains_advanced_together_equal_the_segments_one_at_a_time(which):
    """`_rank_one_backward_coord` against `_backward_diff` on independent random patterns (flips at every step,
    where the estimator's small W' flips few), every L: equal to rounding."""
    g = torch.Generator().manual_seed(12)
    for L in (1, 2, 3, 5):
        R, n, m = 4, 3, 20
        W = torch.randn(R, m, m, generator=g, dtype=torch.float64) / math.sqrt(m)
        B = torch.randn(R, 2, m, generator=g, dtype=torch.float64)
        a = torch.randn(R, 2, generator=g, dtype=torch.float64)
        y = torch.randn(R, m, generator=g, dtype=torch.float64)
        z = torch.randn(R, m, generator=g, dtype=torch.float64)
        gt, gp = (torch.randn(R, n, L + 1, m, generator=g, dtype=torch.float64) for _ in range(2))
        f0 = net.Forward(torch.relu(gt), gt, gt[..., :1])
        f1 = net.Forward(torch.relu(gp), gp, gp[..., :1])
        ref = q._backward_diff(a, B, W, y.unsqueeze(-1) * z.unsqueeze(-2), f0, f1, which, "coord", rank_one=(y, z))
        got = q._rank_one_backward_coord(a, B, W, y, z, f0.mask(), f1.mask(), which)
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)


def test_fresh_direction_is_orthogonal_to_earlier_states():
    g = torch.Generator().manual_seed(7)
    X = net.rnn_sequences(g, 2, n=3, L=4, dx=4, separation=0.2)
    W, A, B = net.init(g, 2, 32, 4, 1)
    f = net.forward(W, A, B, X)
    v = q._fresh_direction(f, 1, 3)
    assert torch.allclose(v.norm(dim=-1), torch.ones(2, dtype=torch.float64))
    assert float((torch.einsum("rm,rnlm->rnl", v, f.h[:, :, 1:3])).abs().max()) < 1e-12


def test_backward_coordinate_fraction_matches_the_gaussian_law():
    # single unit loss at l* = L: u = B^T loss, |u_k| ~ |N(0,1)| (d = 1), threshold 1/(6 sqrt(nL))
    o = obs("rnn-backward-coordinate-fraction", dict(P, m=256, L=4, n=2), {"losses": "single"}, R=60)
    p = 2 * stats.norm.sf(1 / (6 * math.sqrt(8)))
    assert abs(float(o.value.mean()) - p) < 5 * math.sqrt(p * (1 - p) / (256 * 60))


def test_fake_gradient_statistics_agree_for_one_sample_and_rows_bound_frobenius():
    p1 = dict(P, n=1)
    fro = obs("rnn-fake-gradient-norm", p1, {"statistic": "fro"}).value
    torch.testing.assert_close(obs("rnn-fake-gradient-norm", p1, {"statistic": "per-sample"}).value, fro)
    row = obs("rnn-fake-gradient-norm", p1, {"statistic": "row"}).value
    assert (row ** 2 <= fro * (1 + 1e-12)).all() and (row ** 2 * 32 >= fro * (1 - 1e-12)).all()
    lo = obs("rnn-fake-gradient-norm", P, {"side": "min"}, search="adversarial").value
    assert (lo <= obs("rnn-fake-gradient-norm", P).value * (1 + 1e-9)).all()  # W' = 0 is in the ball


def test_fake_gradient_stability_is_zero_without_a_change():
    for w in ("sum", "max", "frac"):
        assert float(obs("rnn-fake-gradient-stability", dict(P, theta=0.0), {"which": w}).value.max()) == 0.0


# ------------------------------------------------------------------ remaining tools


def test_masked_column_norm_second_moment_and_fixed_vector_product_reference():
    v = obs("az-masked-column-norm", {"m": 2000}, {"config": "parallel"}, R=400).value
    assert abs(float((v ** 2).mean()) - 1) < 5 * float((v ** 2).std()) / 20  # E = ||z||^2 exactly
    o = obs("rnn-fixed-vector-product", dict(P, m=16, L=3, n=1), R=1, seed=8, inputs={**INP, "coefficients": "first"})
    g = torch.Generator().manual_seed(8)
    X = net.rnn_sequences(g, 1, n=1, L=3, dx=4, separation=0.2)
    W, A, B = net.init(g, 1, 16, 4, 1)
    D = net.forward(W, A, B, X).mask()[0, 0]
    z = torch.zeros(16, dtype=torch.float64)
    z[0] = 1
    best = 0.0
    for b in range(1, 4):
        v = D[b] * (W[0] @ z)
        for l in range(b + 1, 4):
            v = D[l] * (W[0] @ v)
            best = max(best, float(v.norm()) / (1 + 1 / 3) ** (l - b + 1))
    assert float(o.value[0]) == pytest.approx(best, rel=1e-12)


def test_masked_column_norm_at_the_zero_point_is_the_unmasked_norm():
    # x = y = 0: every mask entry is 1{0 >= 0} = 1, so ||Mz||^2 / ||z||^2 = (2/m) chi^2_m, mean 2 (the parallel
    # configuration above has mean 1); the estimator refuses a configuration it does not know
    v = obs("az-masked-column-norm", {"m": 2000}, {"config": "zero"}, R=400).value
    assert abs(float((v ** 2).mean()) - 2) < 5 * float((v ** 2).std()) / 20
    with pytest.raises(EstimatorError, match="one of random, parallel, x0, zero"):
        obs("az-masked-column-norm", {"m": 20}, {"config": "zeros"})


def test_claim_b10_paper_reading_conditions_on_the_hypothesis():
    # delta_{l-1} of (B.10) is below the measured separability on the pairs that meet the hypothesis, so the paper's
    # ratio num / delta_{l-1} is at least the measured-separability ratio num / sep_{l-1} on every valid draw; at
    # L = 2 with a close pair and identical tails the hypothesis (sep_0 >= delta) fails on some draws, which are
    # not valid (not counted as successes)
    inp = dict(INP, geometry="close-pair", tail="identical")
    p = dict(P, m=64, L=2, n=2, dx=5, delta=0.005)
    paper = obs("rnn-projected-separation", p, {"which": "b10-paper"}, R=60, inputs=inp)
    strict = obs("rnn-projected-separation", p, {"which": "b10"}, R=60, inputs=inp).value
    assert 0 < int(paper.valid.sum()) < 60
    assert (paper.value[paper.valid] >= strict[paper.valid] * (1 - 1e-12)).all()
    assert torch.isfinite(paper.value).all()
    with pytest.raises(EstimatorError, match="1 - 2 alpha"):
        obs("rnn-projected-separation", dict(p, delta=0.2), {"which": "b10-paper"}, inputs=inp)


def test_fixed_vector_product_takes_z_from_the_context():
    """z is ctx.coefficients(m): the default is the Gaussian direction ctx.randn drew before (the same draws), a
    pinned z changes the value, its scale does not, and a stale args.z is refused."""
    pa = dict(P, m=16, L=3, n=1)
    o = obs("rnn-fixed-vector-product", pa, R=4, seed=8)
    g = torch.Generator().manual_seed(8)
    net.rnn_sequences(g, 4, n=1, L=3, dx=4, separation=0.2)  # the estimator's draws before z: data, then weights
    net.init(g, 4, 16, 4, 1)
    z = torch.randn(4, 16, generator=g, dtype=torch.float64)
    pinned = obs("rnn-fixed-vector-product", pa, R=4, seed=8, inputs={**INP, "coefficients": z[0].tolist()})
    assert float(pinned.value[0]) == pytest.approx(float(o.value[0]), rel=1e-12)
    assert float((pinned.value[1:] - o.value[1:]).abs().max()) > 1e-6  # other replicates now share z[0]
    scaled = obs("rnn-fixed-vector-product", pa, R=4, seed=8, inputs={**INP, "coefficients": (3 * z[0]).tolist()})
    torch.testing.assert_close(scaled.value, pinned.value, rtol=1e-12, atol=0)
    with pytest.raises(EstimatorError, match="inputs.coefficients"):
        obs("rnn-fixed-vector-product", pa, {"z": "e1"}, R=1)


def test_backward_sparse_sup_takes_the_fixed_a_from_the_context():
    """Lemma B.17's "any a in R^d" with args.a = 'fixed' is ctx.coefficients(d), normalised: a = e_1 (first) equals
    the d = 1-style sup over the first output row, a pinned a is scale-free, and the Gaussian default is the draw
    the estimator made before (args.a = 'random' reads the same)."""
    pa = dict(P, d=2, k=1)
    first = obs("rnn-backward-sparse-sup", pa, {"a": "fixed"}, R=3, seed=4, inputs={**INP, "coefficients": "first"})
    W, A, B, X = q._setup(Context("t", dict(pa), 3, torch.Generator().manual_seed(4), inputs_spec=INP))
    D = net.forward(W, A, B, X).mask()
    best = torch.zeros(3, dtype=torch.float64)
    for l2 in range(1, 4):
        M = B[:, None, :1, :].expand(-1, X.shape[1], -1, -1)
        for l1 in range(l2, 0, -1):
            M = net.right_mul(M * D[:, :, l1].unsqueeze(-2), W)
            best = torch.maximum(best, M[:, :, 0].abs().amax(-1).amax(-1))
    torch.testing.assert_close(first.value, best, rtol=1e-12, atol=0)
    a = [0.6, -0.8]
    pinned = obs("rnn-backward-sparse-sup", pa, {"a": "fixed"}, R=3, seed=4, inputs={**INP, "coefficients": a})
    scaled = obs("rnn-backward-sparse-sup", pa, {"a": "fixed"}, R=3, seed=4,
                 inputs={**INP, "coefficients": [5 * v for v in a]})
    torch.testing.assert_close(scaled.value, pinned.value, rtol=1e-12, atol=0)
    assert float((pinned.value - first.value).abs().max()) > 1e-6
    torch.testing.assert_close(obs("rnn-backward-sparse-sup", pa, {"a": "random"}, R=3, seed=4).value,
                               obs("rnn-backward-sparse-sup", pa, {"a": "fixed"}, R=3, seed=4).value)


def test_backward_sparse_sup_over_a_is_the_largest_column_norm_of_every_segment():
    """args.a = 'sup', k = 1: sup over unit a and 1-sparse y of |a^T M y| is M's largest column norm, over every
    segment B D_{l2} W ... D_{l1} W, each built from scratch here (the estimator advances all chains together)."""
    pa = dict(P, d=3, k=1, L=4)
    got = obs("rnn-backward-sparse-sup", pa, {"a": "sup"}, R=3, seed=8).value
    W, A, B, X = q._setup(Context("t", dict(pa), 3, torch.Generator().manual_seed(8), inputs_spec=INP))
    D = net.forward(W, A, B, X).mask()
    best = torch.zeros(3, dtype=torch.float64)
    for l2 in range(1, 5):
        for l1 in range(1, l2 + 1):
            M = B.unsqueeze(1).expand(-1, X.shape[1], -1, -1)
            for l in range(l2, l1 - 1, -1):
                M = (M * D[:, :, l].unsqueeze(-2)) @ W.unsqueeze(1)
            best = torch.maximum(best, M.norm(dim=-2).amax(-1).amax(-1))
    torch.testing.assert_close(got, best, rtol=1e-12, atol=0)


def test_fake_gradient_losses_are_drawn_through_the_context():
    """args.losses = 'fixed' (and 'gaussian', read the same) takes the n (L-1) d loss entries from ctx.coefficients:
    the default is the Gaussian draw made before (the same generator call), a pinned vector changes the value and is
    scale-free (the statement divides by max ||loss||^2), and the data-built family is refused."""
    pa = dict(P, d=2)
    fixed = obs("rnn-fake-gradient-norm", pa, {"losses": "fixed"}, R=4, seed=3)
    torch.testing.assert_close(obs("rnn-fake-gradient-norm", pa, {"losses": "gaussian"}, R=4, seed=3).value,
                               fixed.value, rtol=0, atol=0)
    vec = [1.0, -2.0, 0.5, 0.0, 0.0, 3.0, -1.0, 0.25]  # n (L - 1) d = 2 * 2 * 2 entries
    pinned = obs("rnn-fake-gradient-norm", pa, {"losses": "fixed"}, R=4, seed=3, inputs={**INP, "coefficients": vec})
    scaled = obs("rnn-fake-gradient-norm", pa, {"losses": "fixed"}, R=4, seed=3,
                 inputs={**INP, "coefficients": [-7 * v for v in vec]})
    torch.testing.assert_close(scaled.value, pinned.value, rtol=1e-12, atol=0)
    assert float((pinned.value - fixed.value).abs().max()) > 1e-6
    with pytest.raises(EstimatorError, match="depend on the data"):
        obs("rnn-fake-gradient-norm", pa, {"losses": "fixed"}, R=2, inputs={**INP, "coefficients": "null-vector"})


def test_sign_change_greedy_is_optimal_against_enumeration():
    m, tau1 = 8, 0.6
    o = obs("az-sign-change-layer2", {"m": m, "tau1": tau1}, {"which": "count", "tau2": "0"}, R=20, seed=9)
    g = torch.randn(20, m, generator=torch.Generator().manual_seed(9), dtype=torch.float64) * math.sqrt(2 / m)
    budget = tau1 ** 2 / m
    for r in range(20):
        need = g[r].abs().numpy() ** 2
        best = max(len(S) for k in range(m + 1) for S in itertools.combinations(range(m), k) if need[list(S)].sum() <= budget)
        assert float(o.value[r]) * 10 * tau1 ** (2 / 3) * m ** (2 / 3) == pytest.approx(best)



def test_sign_change_greedy_sorts_only_a_prefix_and_counts_as_the_full_sort():
    """_greedy_flips sorts only the needs that can fit (halving the threshold while the needs below half of it
    overrun the budget); the count equals the full sort's, also where most needs are candidates (tau1 = 10, tau2 = 0)
    and where g'_2 alone flips almost every coordinate (tau2 = 5000)."""
    m = 20000
    gt = torch.randn(6, m, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * math.sqrt(2 / m)
    for tau1, tau2 in ((0.1, 0.0), (1.0, 1.0), (10.0, 0.0), (10.0, 100.0), (10.0, 5000.0)):
        budget, t = tau1 ** 2 / m, tau2 / m
        srt = (gt.abs() - t).clamp_min(0).sort(dim=-1).values
        full = ((srt ** 2).cumsum(-1) <= budget * (1 - 1e-12)).sum(-1).to(torch.float64)
        assert torch.equal(q._greedy_flips(gt, budget, t), full), (tau1, tau2)

def test_split_sup_is_a_lower_estimate_close_to_the_true_sup_in_two_dimensions():
    o = obs("az-split-sup", {"m": 64, "n": 2}, R=3, seed=10)
    W = torch.randn(3, 64, 2, generator=torch.Generator().manual_seed(10), dtype=torch.float64) * math.sqrt(2 / 64)
    ang = torch.linspace(0, 2 * math.pi, 20001, dtype=torch.float64)
    xs = torch.stack([ang.cos(), ang.sin()], -1)
    t = math.log(64) / 8
    true = ((W @ xs.T).abs() - t).clamp_min(0).norm(dim=1).amax(-1)
    assert (o.value <= true + 1e-9).all() and (o.value >= 0.999 * true).all()


def test_projected_relu_and_margins_closed_forms():
    # r -> 0 with U containing w and the positive-block indicator: (I - UU^T) phi(w) = 0
    v = obs("az-projected-relu-fresh", {"m": 4000, "alpha": 0.01, "dtil": 3, "rfrac": 1e-12}, {"U": "aligned"}, R=4).value
    assert float(v.max()) < 1e-12
    pm = dict(P, m=64, L=3, n=3)
    assert float(obs("rnn-margin-fraction", pm, {"which": "small", "b": "1e6"}).value.min()) == 1.0
    assert float(obs("rnn-margin-fraction", pm, {"which": "small", "b": "0"}).value.max()) == 0.0
    assert float(obs("rnn-margin-fraction", pm, {"which": "same-layer", "b": "1e-30", "b2": 1e6}).value.min()) == 1.0


def test_separation_helpers_and_first_type_term():
    x = torch.tensor([[3.0, 0.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    assert float(q._sep(x, y)) == pytest.approx(min(3 / math.sqrt(2), 1.0))
    g = torch.Generator().manual_seed(11)
    M = torch.randn(2, 10, 3, generator=g, dtype=torch.float64)
    v = torch.randn(2, 4, 10, generator=g, dtype=torch.float64)
    ref = v - torch.stack([(M[r] @ torch.linalg.lstsq(M[r], v[r].T).solution).T for r in range(2)])
    torch.testing.assert_close(q._project_out(v, M), ref, rtol=1e-10, atol=1e-10)
    o = obs("rnn-first-type-term", dict(P, tau0=5.0), R=20, search="adversarial")
    assert float(o.value[o.valid].max()) <= 1  # the triangle inequality, given Lemma B.3's event
    assert float(obs("rnn-projected-separation", dict(P, m=64, n=3), {"which": "b9"}).value.min()) > 0


def test_arbitrary_patterns_dominate_the_plain_products_and_splits_are_bounded():
    pa = dict(P, m=16, L=2, n=1)
    plain = obs("rnn-segment-spectral-norm", pa, R=4).value
    assert (obs("rnn-arbitrary-pattern-norm", pa, {"s": "0.5"}, R=4).value >= plain * (1 - 1e-12)).all()
    assert float(obs("rnn-sparse-split", dict(P, tau4=1.0, tau5=1.0), {"source": "random"}).value.min()) >= 0
    assert abs(float(obs("az-toy-mean", {"N": 400}, R=200).value.mean()) - 0.5) < 0.005


def test_backward_perturbation_at_horizon_one_has_no_layer_two_adversary():
    # L = 1 is an edge the lemmas admit: the layer-2 flip adversary does not apply there (it crashed with IndexError)
    for w in "abcd":
        v = obs("rnn-backward-perturbation", dict(P, L=1, n=1), {"which": w}, search="adversarial").value
        assert torch.isfinite(v).all() and (v >= 0).all()


def _segments_slow(W, D, last, leading_w):
    """Every product D_{l2} W ... D_{l1} W (l1 <= l2 <= last), [W times it], formed from scratch: the slow path."""
    out = []
    for l1 in range(1, last + 1):
        for l2 in range(l1, last + 1):
            P = D[:, :, l1].unsqueeze(-1) * W.unsqueeze(1)
            for b in range(l1 + 1, l2 + 1):
                P = D[:, :, b].unsqueeze(-1) * (W.unsqueeze(1) @ P)
            out.append(W.unsqueeze(1) @ P if leading_w else P)
    return out


@pytest.mark.parametrize("k", [1, 4])
def test_sparse_bilinear_reusing_products_equals_every_segment_from_scratch(k):
    pa = dict(P, m=24, L=4, n=2)
    ctx = Context("t", dict(pa), 3, torch.Generator().manual_seed(5), args={"k": k, "iterations": 10},
                  inputs_spec=INP)
    W, A, B, X = q._setup(ctx)
    D = net.forward(W, A, B, X).mask()
    ref = torch.stack([q._sparse_sup(M, k, 10).amax(-1) for M in _segments_slow(W, D, 3, True)]).amax(0)
    got = obs("rnn-sparse-bilinear-sup", pa, {"k": k, "iterations": 10}, R=3, seed=5).value
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("leading_w", [False, True])
def test_segment_norms_reusing_products_equal_every_segment_from_scratch(leading_w):
    pa = dict(P, m=20, L=4, n=2)
    ctx = Context("t", dict(pa), 3, torch.Generator().manual_seed(6), args={"leading_w": leading_w},
                  inputs_spec=INP)
    W, A, B, X = q._setup(ctx)
    D = net.forward(W, A, B, X).mask()
    segs = _segments_slow(W, D, 4, leading_w)
    ref = torch.stack([torch.linalg.matrix_norm(M, ord=2).amax(-1) for M in segs]).amax(0)
    got = obs("rnn-segment-spectral-norm", pa, {"leading_w": leading_w}, R=3, seed=6).value
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)


def test_fresh_norms_domain_is_definition_b1_and_every_planned_b6_config_lies_in_it():
    """Definition B.1's U_l is m x nl column-orthonormal: it exists iff nl <= m. At n(L-1) = m it is square and the
    last fresh norm is 0; beyond, the estimator refuses, so no profile of Lemma B.6 may plan such a configuration
    (its full profile once planned n = 4, L = 10 at m = 32 and errored)."""
    from pathlib import Path

    from lemmacheck.claims import load_claim
    from lemmacheck.errors import EstimatorError
    from lemmacheck.runner import plan

    g = torch.Generator().manual_seed(3)
    X = net.rnn_sequences(g, 2, n=2, L=5, dx=4, separation=0.2)  # n(L-1) = 8 = m
    W, A, B = net.init(g, 2, 8, 4, 1)
    F = net.fresh_norms(net.forward(W, A, B, X))
    assert float(F[..., -1].abs().max()) < 1e-12 and float(F[..., :-1].min()) > 1e-6
    X = net.rnn_sequences(g, 2, n=3, L=4, dx=4, separation=0.2)  # n(L-1) = 9 > m
    with pytest.raises(EstimatorError, match="Definition B.1"):
        net.fresh_norms(net.forward(W, A, B, X))
    claim = load_claim(Path(__file__).parents[1] / "claims/allenzhu2018/lemma-b.6-fresh-norm.toml")
    for profile in ("quick", "full"):
        for p in plan(claim, profile, 0):
            assert p.params["n"] * (p.params["L"] - 1) <= p.params["m"], (profile, p.params)


def test_sparse_split_is_zero_not_nan_when_the_flip_adversary_affords_no_flip():
    """Claim C.6 at m = 64, tau0 = 0.1: on some draws no sign fits the budget, W' = 0, x = D'g = 0 and tau1 = 0, so
    both the split's mass and its bound are 0 (the old ratio was 0/0 = NaN). y = 0 meets the claim: the value is 0."""
    p = {"m": 64, "L": 3, "n": 1, "dx": 5, "d": 1, "delta": 0.2, "tau0": 0.1}
    o = obs("rnn-sparse-split", p, {"source": "flips"}, R=40, seed=0, search="adversarial")
    none = o.extras["no_flip"] > 0
    assert 0 < int(none.sum()) < 40  # both cases occur at this radius
    assert bool(torch.isfinite(o.value).all())
    assert float(o.value[none].abs().max()) == 0.0 and float(o.value.min()) >= 0.0


def _ctx(params, args, R, seed, search="adversarial"):
    return Context("t", dict(params), R, torch.Generator().manual_seed(seed), args=args, inputs_spec=INP, search=search)


@pytest.mark.parametrize("draws", [0, 1])
def test_pattern_changes_flip_rows_in_place_equal_the_formed_adversary(draws):
    """rnn-pattern-changes perturbs only the rows where the flip adversary's u is nonzero, in place, and puts them
    back before the next sequence's adversary: values and extras bit for bit those of forming W + tau u h^T."""
    p = {"m": 40, "L": 3, "n": 3, "dx": 5, "d": 1, "delta": 0.2, "tau0": 2.0}
    got = QUANTITIES.get("rnn-pattern-changes").obj(_ctx(p, {"random_draws": draws}, 5, 8))
    ctx = _ctx(p, {}, 5, 8)
    W, A, B, X = q._setup(ctx)
    tau = q._radius(ctx)
    f0 = net.forward(W, A, B, X)
    best = torch.zeros(5, dtype=torch.float64)
    for _ in range(draws):
        best = torch.maximum(best, q._change("count", f0, net.forward(
            W + q.random_perturbation(ctx.generator, [W], tau)[0], A, B, X)))
    found = torch.zeros(5, dtype=torch.float64)
    for i in range(3):
        h1 = f0.h[:, i, 1]
        hn = h1.norm(dim=-1).clamp_min(1e-300)
        u = q.greedy_flip_vector(f0.g[:, i, 2], hn, tau)
        u = u / u.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        val = q._change("count", f0, net.forward(W + tau * u.unsqueeze(-1) * (h1 / hn.unsqueeze(-1)).unsqueeze(-2),
                                                 A, B, X))
        found = torch.where(val > best, torch.full_like(found, 3), found)
        best = torch.maximum(best, val)
    assert torch.equal(got.value, best) and torch.equal(got.extras["worst_over_i"], best)
    assert torch.equal(got.extras["found_by"], found) and float(best.min()) > 0


def test_samples_one_is_sequence_one_alone_and_all_is_the_worst_case_over_i():
    """args.samples = 'one' (the per-sample statement the proofs of Lemmas C.2, C.9 prove before their union bound):
    the value is sequence 1's, with the flip adversary aimed at sequence 1, recomputed here on a forward pass of
    sequence 1 alone; 'all' is the max over i (== extras worst_over_i) and is never below it."""
    p = {"m": 48, "L": 3, "n": 4, "dx": 5, "d": 1, "delta": 0.2, "tau0": 1.0}
    R, tau = 16, 1.0 / math.sqrt(48)
    one = QUANTITIES.get("rnn-pattern-changes").obj(_ctx(p, {"random_draws": 0, "samples": "one"}, R, 4))
    every = QUANTITIES.get("rnn-pattern-changes").obj(_ctx(p, {"random_draws": 0}, R, 4))
    W, A, B, X = q._setup(_ctx(p, {}, R, 4))
    f0 = net.forward(W, A, B, X[:, :1])  # sequence 1 alone: the others cannot enter its value
    Wp = q._flip_candidates(W, f0, tau)[0]
    f1 = net.forward(W + Wp, A, B, X[:, :1])
    ref = ((f1.g >= 0) != (f0.g >= 0)).sum(-1)[:, 0, 1:].amax(-1).to(W.dtype)
    torch.testing.assert_close(one.value, ref)
    torch.testing.assert_close(every.value, every.extras["worst_over_i"])
    assert bool((every.value >= one.value).all()) and bool((every.value > one.value).any())
    for which in ("a", "d"):
        args = {"which": which, "random_draws": 0}
        one = QUANTITIES.get("rnn-backward-perturbation").obj(_ctx(p, {**args, "samples": "one"}, R, 5))
        every = QUANTITIES.get("rnn-backward-perturbation").obj(_ctx(p, args, R, 5))
        ctx = _ctx(p, {}, R, 5)
        W, A, B, X = q._setup(ctx)
        a = ctx.randn(R, B.shape[-2])
        a = a / a.norm(dim=-1, keepdim=True)
        f0 = net.forward(W, A, B, X[:, :1])
        Wp = q._flip_candidates(W, f0, tau)[0]
        ref = q._backward_diff(a, B, W, Wp, f0, net.forward(W + Wp, A, B, X[:, :1]), which, "norm")
        torch.testing.assert_close(one.value, ref)
        assert bool((every.value >= one.value).all()) and bool((every.value > one.value).any())
        assert bool((every.extras["worst_over_i"] == every.value).all())
    with pytest.raises(Exception, match="samples"):
        QUANTITIES.get("rnn-pattern-changes").obj(_ctx(p, {"samples": "two"}, 2, 0))


def test_sign_change_mass_is_an_attained_admissible_mass_and_the_exact_sup_with_free_coordinates():
    """Claim C.4 (mass): every flipped j has |g_j| <= (t - |g~_j|)_+ + |g'_1j|, so sup ||D'g|| <= ||b|| + B with
    b = (t - |g~|)_+; spreading g'_1 along b attains it. Hand cases, then the estimator against that closed form (the
    old formula added t to the one-coordinate candidate and double-counted it, above the sup)."""
    gt = torch.tensor([[0.1, -0.2, 0.5, -0.7]], dtype=torch.float64)
    b = math.hypot(0.2, 0.1)
    assert math.isclose(float(q._sign_change_mass(gt, 0.05, 0.3)), b + 0.05, rel_tol=1e-12)
    gt0 = torch.tensor([[0.01, -0.5]], dtype=torch.float64)
    assert math.isclose(float(q._sign_change_mass(gt0, 0.05, 0.0)), 0.04, rel_tol=1e-12)  # one flip, B - |g~|
    assert float(q._sign_change_mass(gt0, 0.005, 0.0)) == 0.0  # the budget flips nothing
    for m, tau1, tau2 in ((1000, 0.1, 10.0), (1000, 1.0, 1.0), (10000, 1.0, 10.0)):
        o = obs("az-sign-change-layer2", {"m": m, "tau1": tau1, "tau2": tau2}, {"which": "mass", "tau2": "tau2"},
                R=20, seed=2)
        g = torch.Generator().manual_seed(2)
        gt = torch.randn(20, m, generator=g, dtype=torch.float64) * math.sqrt(2 / m)  # the estimator's first draw
        sup = (tau2 / m - gt.abs()).clamp_min(0).norm(dim=-1) + tau1 / math.sqrt(m)
        torch.testing.assert_close(o.value, sup * math.sqrt(m) / (3 * tau1), rtol=1e-12, atol=0)


def test_telescoped_backward_difference_equals_subtraction_and_stays_linear_at_tiny_radius():
    """Lemma C.9 (b), (c) and C.11 (b) compare a^T B prod D W~ with a^T B prod D (W~ + W') under the same D: the
    telescoped recursion equals the subtraction of the two rows at a moderate W', and at W' ~ 1e-30 (where the
    subtraction of two O(1) rows is pure rounding) it is resolved and exactly linear in W' (same D: the second-order
    terms are 30 orders smaller)."""
    g = torch.Generator().manual_seed(11)
    X = net.rnn_sequences(g, 3, n=2, L=3, dx=5, separation=0.2)
    W, A, B = net.init(g, 3, 24, 5, 1)
    D = net.forward(W, A, B, X).mask()
    a = torch.randn(3, 1, generator=g, dtype=torch.float64)
    y = torch.randn(3, 24, generator=g, dtype=torch.float64)
    z = torch.randn(3, 24, generator=g, dtype=torch.float64)
    Wp = (y.unsqueeze(-1) * z.unsqueeze(-2)) * 1e-2
    tele = q._segment_rows_diff(a, B, D, W, Wp)
    r_pert, r_plain = q._segment_rows(a, B, D, W + Wp), q._segment_rows(a, B, D, W)
    assert set(tele) == set(r_pert) and len(tele) == 6
    for key, v in tele.items():
        torch.testing.assert_close(v, r_pert[key] - r_plain[key], rtol=1e-9, atol=1e-14)
    tiny = q._segment_rows_diff(a, B, D, W, Wp * 1e-28)
    for key, v in tiny.items():
        assert float(v.abs().max()) > 1e-33  # resolved, ~1e-30 in size
        lin = q._segment_rows_diff(a, B, D, W, Wp * 2e-28)
        torch.testing.assert_close(lin[key], 2 * v, rtol=1e-12, atol=0)  # exactly linear down there
        assert float((r_plain[key] - q._segment_rows(a, B, D, W + Wp * 1e-28)[key]).abs().max()) < 1e-15
    # W' = y z^T given by its factors (Lemmas C.10-C.11): the structured recursion is the same to rounding, and as
    # resolved at W' ~ 1e-30
    for scale in (1e-2, 1e-30):
        general = q._segment_rows_diff(a, B, D, W, Wp * scale / 1e-2)
        structured = q._segment_rows_diff(a, B, D, W, Wp * scale / 1e-2, rank_one=(y * scale, z))
        assert set(structured) == set(general)
        for key, v in structured.items():
            torch.testing.assert_close(v, general[key], rtol=1e-12, atol=0)


def test_forward_perturbation_at_horizon_one_is_zero_without_a_search_and_the_search_agrees():
    """At L = 1 W multiplies h_0 = 0 alone, so the estimator returns the sup 0 without searching; the search itself
    (maximise, as at L >= 2) finds exactly that, and at L = 2 the change is positive."""
    for which in ("h", "g", "dg"):
        o = obs("rnn-forward-perturbation", dict(P, L=1), {"which": which, "steps": 2}, R=3, search="adversarial")
        assert torch.equal(o.value, torch.zeros(3, dtype=torch.float64)) and torch.equal(o.extras["found_by"], o.value)
        ctx = Context("t", dict(P, L=1), 3, torch.Generator().manual_seed(0), inputs_spec=INP)
        W, A, B, X = q._setup(ctx)
        f0 = net.forward(W, A, B, X)
        target = lambda Ws, w=which, f0=f0, A=A, B=B, X=X: q._change(w, f0, net.forward(Ws[0], A, B, X))
        val, _ = q.maximise(target, [W], 1.0 / math.sqrt(32), "adversarial", ctx.generator, steps=2)
        assert torch.equal(val, o.value)
    assert float(obs("rnn-forward-perturbation", dict(P, L=2), {"steps": 2}, R=3, search="adversarial").value.min()) > 0
