"""The guo2024 quantities added for the paper's claims, each against a plain reference, a closed form or autograd.

Every draw uses a fixed seed, so each test is deterministic; Monte-Carlo comparisons state their tolerance in
standard errors of the reference estimate.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper
from scipy import stats

from lemmacheck.context import Context
from lemmacheck.errors import EstimatorError

net = paper("guo2024").network
q = paper("guo2024").quantities


def _ctx(params, seed=0, R=4, args=None, search="none", geometry="random", separation="delta"):
    spec = {"kind": "unit-sphere", "n": "n", "d": "p", "geometry": geometry}
    if "delta" in params:
        spec["separation"] = separation
    return Context("test", params, R, torch.Generator().manual_seed(seed), args=args or {}, search=search,
                   inputs_spec=spec)


def _setup(R=2, n=3, p=5, m=9, d=1, L=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    A, Ws, B = net.init(g, R, p, m, d, L)
    X = torch.nn.functional.normalize(torch.randn(R, n, p, generator=g, dtype=torch.float64), dim=-1)
    Y = torch.randn(R, n, d, generator=g, dtype=torch.float64)
    return A, Ws, B, X, Y


# --------------------------------------------------------------------------- targets


def test_synthetic_target_is_the_papers_function():
    x = torch.tensor([[0.1, -0.3, 0.5, 0.2, -0.4]], dtype=torch.float64)
    x1, x2, x3, x4, x5 = x[0].tolist()
    ref = (math.sin(10 * x1 + 20 * x2 ** 3) + math.cos(3 * x3 + 5 * x4 ** 2)
           + 2 / math.sqrt(1 + max(0.05 + x5, 0.0)) + 2 * x1 * x5)
    assert q.synthetic_target(x).item() == pytest.approx(ref, rel=1e-14)


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 0.5, -3.0])
def test_rf_mean_closed_form_at_zero_correlation(alpha):
    """ρ = 0: s and t independent, E cos(s + φ) = e^{-1/2} cos φ and E σ̃(t) = (1-α)/√(2π(1+α²))."""
    phase = torch.tensor([0.3, 2.0], dtype=torch.float64)
    hn = torch.tensor([1.2, 0.7], dtype=torch.float64)
    got = q.rf_mean(hn, torch.zeros(2, dtype=torch.float64), phase, alpha)
    ref = hn * math.exp(-0.5) * torch.cos(phase) * (1 - alpha) / math.sqrt(2 * math.pi * (1 + alpha ** 2))
    assert torch.allclose(got, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("alpha", [-1.0, 0.0, 0.7])
def test_rf_mean_against_monte_carlo(alpha):
    """E cos(s + φ) σ̃(||h|| t) for (s, t) standard normal with correlation ρ, 4e6 draws: within 5 standard errors."""
    g = torch.Generator().manual_seed(1)
    rho, phase, hn = 0.6, 1.1, 1.3
    z1 = torch.randn(4_000_000, generator=g, dtype=torch.float64)
    z2 = torch.randn(4_000_000, generator=g, dtype=torch.float64)
    t, s = z1, rho * z1 + math.sqrt(1 - rho ** 2) * z2
    vals = torch.cos(s + phase) * net.act(hn * t, alpha)
    got = q.rf_mean(torch.tensor([hn], dtype=torch.float64), torch.tensor([rho], dtype=torch.float64),
                    torch.tensor([phase], dtype=torch.float64), alpha).item()
    assert abs(got - vals.mean().item()) < 5 * vals.std().item() / 2000


def test_rf_approximation_is_the_proofs_vector_and_shrinks_with_width():
    """⟨u_j, h_{i,L-1}⟩ equals (1/m) Σ_k c_j(z_k) σ̃(z_k·h_{i,L-2}) with z_k = √(m/2) (W_{L-1})_k (the proof), and the
    error against f is a Monte-Carlo error: its mean falls with m."""
    errs = []
    for m in (128, 4096):
        P = {"m": m, "L": 2, "n": 3, "p": 5, "d": 1, "alpha": -0.5, "delta": 0.1}
        errs.append(q.rf_approximation(_ctx(P, R=16)).value.mean().item())
    assert errs[1] < errs[0] / 3
    # replay one draw and rebuild ⟨u, h⟩ coordinate by coordinate
    P = {"m": 16, "L": 2, "n": 3, "p": 5, "d": 1, "alpha": -0.5, "delta": 0.1}
    ctx = _ctx(P, R=1)
    X = ctx.inputs()
    A = ctx.randn(1, 16, 5) * math.sqrt(1 / 16)  # the quantity draws A and W_1 .. W_{L-1} only
    W1 = ctx.randn(1, 16, 16) * math.sqrt(2 / 16)
    fwd = net.forward(A, [W1], torch.zeros(1, 1, 16, dtype=torch.float64), X, -0.5)
    fwd = net.Forward(fwd.h + [fwd.h[-1]], fwd.g + [fwd.g[-1]], fwd.out, -0.5)
    f, a, phase = q.b13_residual(ctx.generator, fwd, 1, -0.5)
    value = q.rf_approximation(_ctx(P, R=1)).value.item()
    Z = math.sqrt(16 / 2) * W1[0]  # rows z_k
    h0 = fwd.h[0][0]
    approx = [sum(math.cos(float(a[0, 0] @ Z[k]) + float(phase[0, 0])) * float(net.act(Z[k] @ h0[i], -0.5))
                  for k in range(16)) / 16 for i in range(3)]
    assert value == pytest.approx(max(abs(approx[i] - f[0, i, 0].item()) for i in range(3)), rel=1e-10)


def test_b13_labels_and_antipodal_odd_labels():
    P = {"m": 32, "L": 2, "n": 4, "p": 5, "d": 2, "alpha": 0.0, "delta": 0.1}
    ctx = _ctx(P, args={"labels": "antipodal-odd"})
    y = q._labels(ctx, 4)
    assert torch.equal(y[:, 1::2], -y[:, 0::2])
    ctx = _ctx(P, R=2, args={"labels": "b13"})
    X = ctx.inputs()
    A, Ws, B = q._init(ctx, X)
    fwd = net.forward(A, Ws, B, X, 0.0)
    Y = q._targets(ctx, X, fwd, 0.0)
    assert Y.shape == (2, 4, 2) and bool(((Y - fwd.out).abs() <= 1.0 * fwd.h[0].norm(dim=-1, keepdim=True)).all())


# --------------------------------------------------------------------------- training


@pytest.mark.parametrize("loss,alpha", [("square", -1.0), ("half", 0.0), ("exp", 0.4)])
def test_train_one_step_is_the_autograd_gradient_step(loss, alpha):
    A, Ws, B, X, Y = _setup(m=7, L=3)
    eta = 1e-2
    tr = q.train(A, Ws, B, X, Y, alpha, eta=eta, steps=1, loss=loss, lam=0.3)
    Wv = [W.clone().requires_grad_(True) for W in Ws]
    out = net.forward(A, Wv, B, X, alpha).out
    e2 = ((out - Y) ** 2).sum(-1)
    Lval = {"square": e2.sum(-1), "half": 0.5 * e2.sum(-1), "exp": 0.5 * torch.exp(0.3 * e2).sum(-1)}[loss]
    grads = torch.autograd.grad(Lval.sum(), Wv)
    for W, G, Wn in zip(Ws, grads, tr.Ws):
        assert torch.allclose(Wn, W - eta * G, rtol=1e-12, atol=1e-14)
    assert torch.allclose(tr.losses[:, 0], Lval.detach(), rtol=1e-13)


def test_sgd_with_full_batch_equals_gd_and_drift_is_the_spectral_distance():
    A, Ws, B, X, Y = _setup(m=8, L=2, n=4)
    gd = q.train(A, Ws, B, X, Y, -0.5, eta=0.05, steps=5, drift_every=5)
    sgd = q.train(A, Ws, B, X, Y, -0.5, eta=0.05, steps=5, batch=4, gen=torch.Generator().manual_seed(0))
    assert torch.allclose(gd.losses, sgd.losses, rtol=1e-13)
    ref = torch.stack([torch.linalg.matrix_norm(W - W0, ord=2) for W, W0 in zip(gd.Ws, Ws)], -1).amax(-1)
    assert torch.allclose(gd.drift, ref, rtol=1e-10)


def test_envelope_rate_of_a_geometric_sequence():
    t = torch.arange(0, 50, dtype=torch.float64)
    losses = torch.stack([3.0 * 0.9 ** t, 2.0 * 0.8 ** t])
    got = q.envelope_rate(losses)
    assert got[0].item() == pytest.approx(0.1, rel=1e-12) and got[1].item() == pytest.approx(0.2, rel=1e-12)
    # a loss that rises to 1.2 L_0 at t = 1: the smallest γ covering every t is 1.2, so 1 - γ̂ = -0.2
    assert q.envelope_rate(torch.tensor([[1.0, 1.2, 0.5]], dtype=torch.float64)).item() == pytest.approx(-0.2)
    # with C_0 = 2 the same run is covered by γ = (0.25)^{1/2}: max_t (L_t/(2 L_0))^{1/t} = max(0.6, 0.5)
    assert q.envelope_rate(torch.tensor([[1.0, 1.2, 0.5]], dtype=torch.float64), C0=2.0).item() == pytest.approx(0.4)


def test_training_quantity_statistics_and_epochs():
    P = {"m": 16, "L": 2, "n": 4, "p": 5, "d": 1, "alpha": 0.0, "delta": 0.3, "eta0": 1.0, "T": 20, "b": 2}
    final = q.training(_ctx(P, args={"statistic": "final"})).value
    loss = q.training(_ctx(P, args={"statistic": "final-loss"}))
    assert torch.allclose(final, loss.value / loss.extras["loss0"], rtol=1e-13)
    sgd = q.training(_ctx(P, args={"statistic": "final-loss", "batch": True, "epochs": True}))
    assert "SGD 40 steps" in sgd.method  # T = 20 epochs of n/b = 2 steps
    with pytest.raises(Exception, match="exp-kappa"):
        q.training(_ctx(P, args={"statistic": "exp-kappa"}))


def test_even_network_cannot_fit_odd_labels_on_antipodal_pairs():
    """α = -1: N(-x) = N(x) for every W, so L ≥ 2 per antipodal pair with opposite ±1 labels, whatever GD does."""
    P = {"m": 32, "L": 2, "n": 4, "p": 5, "d": 1, "alpha": -1.0, "delta": 0.3, "eta0": 1.0, "T": 200}
    v = q.training(_ctx(P, geometry="antipodal-pairs", args={"statistic": "final-loss", "labels": "antipodal-odd"}))
    assert bool((v.value >= 4.0 - 1e-9).all())


def test_fixed_labels_are_drawn_through_the_context():
    """args.labels = 'fixed': y is ctx.coefficients over the n d entries / sqrt(d), the same draw as 'gaussian' by
    default; a pinned vector changes the value, and the parity family on antipodal pairs at α = -1 hits the even
    network's loss floor (y(-x) = -y(x): L ≥ 2 per pair) that Gaussian labels only approach."""
    P = {"m": 32, "L": 2, "n": 4, "p": 5, "d": 1, "alpha": 0.3, "delta": 0.2, "eta0": 0.5, "T": 20}
    args = {"statistic": "drift", "loss": "square"}
    fixed = q.training(_ctx(P, seed=2, args={**args, "labels": "fixed"})).value
    torch.testing.assert_close(q.training(_ctx(P, seed=2, args={**args, "labels": "gaussian"})).value, fixed,
                               rtol=0, atol=0)
    c = _ctx(P, seed=2, args={**args, "labels": "fixed"})
    c.inputs_spec["coefficients"] = [1.0, -0.5, 2.0, 0.0]
    assert float((q.training(c).value - fixed).abs().max()) > 1e-6
    even = {**P, "alpha": -1.0, "delta": 0.3, "eta0": 1.0, "T": 200}
    c = _ctx(even, geometry="antipodal-pairs", args={"statistic": "final-loss", "labels": "fixed"})
    c.inputs_spec["coefficients"] = "parity"
    assert bool((q.training(c).value >= 4.0 - 1e-9).all())
    c.inputs_spec["coefficients"] = [1.0, 2.0]
    with pytest.raises(EstimatorError, match="entries for n=4"):
        q.training(c)


# --------------------------------------------------------------------------- semi-smoothness, generalization


def test_semismoothness_residual_matches_autograd_first_order_term():
    """The quantity's residual at a given W' equals L(W+W') - L(W) - <∇L(W), W'> with ∇ by autograd (main-text loss)."""
    A, Ws, B, X, Y = _setup(m=10, L=2, n=3)
    Wp = [1e-2 * torch.randn(W.shape, generator=torch.Generator().manual_seed(5), dtype=W.dtype) for W in Ws]
    Wv = [W.clone().requires_grad_(True) for W in Ws]
    Lw = ((net.forward(A, Wv, B, X, 0.3).out - Y) ** 2).sum(dim=(-1, -2))
    grads = torch.autograd.grad(Lw.sum(), Wv)
    ref = (q._loss_value(A, [W + P for W, P in zip(Ws, Wp)], B, X, Y, 0.3) - Lw.detach()
           - sum((G * P).sum(dim=(-1, -2)) for G, P in zip(grads, Wp)))
    closed, LW, _ = net.loss_gradients(A, Ws, B, X, Y, 0.3, half=False)
    mine = (q._loss_value(A, [W + P for W, P in zip(Ws, Wp)], B, X, Y, 0.3) - LW
            - sum((G * P).sum(dim=(-1, -2)) for G, P in zip(closed, Wp)))
    assert torch.allclose(mine, ref, rtol=1e-8, atol=1e-13)
    P = {"m": 16, "L": 1, "n": 3, "p": 5, "d": 1, "alpha": 0.0, "delta": 0.2, "omega": 0.01, "s": 0.001}
    assert bool((q.semismoothness(_ctx(P, search="none")).value == 0).all())  # W' = 0: no remainder
    with pytest.raises(Exception, match="must be <= omega"):
        q.semismoothness(_ctx(dict(P, s=0.1)))
    # rho = s/omega gives the same step radius: same draws, same values
    P = dict(P, m=8)
    by_rho = {k: v for k, v in P.items() if k != "s"} | {"rho": 0.1}
    got = q.semismoothness(_ctx(by_rho, R=3, search="random")).value
    assert bool((got != 0).all()) and torch.equal(got, q.semismoothness(_ctx(P, R=3, search="random")).value)
    with pytest.raises(Exception, match="must be <= omega"):
        q.semismoothness(_ctx(dict(by_rho, rho=1.5)))
    # term = 'quadratic' divides the same remainder by n L^2 m s^2/d alone: the ratio of the two is S / (n L^2 m s^2/d)
    quad = q.semismoothness(_ctx(by_rho, R=3, search="random", args={"term": "quadratic"}))
    a = 3 * 8 * 0.001 ** 2
    S = a + math.sqrt(net.c_alpha(0.0)) * 0.01 ** (1 / 3) * torch.sqrt(8 * 3 * quad.extras["loss"] * math.log(8)) * 0.001
    assert torch.allclose(quad.value, got * S / a, rtol=1e-9)


def test_generalization_gap_without_search_is_test_minus_train_mse():
    P = {"m": 16, "L": 1, "n": 5, "p": 5, "d": 1, "alpha": -1.0, "delta": 0.1, "omega": 0.01}
    got = q.generalization_gap(_ctx(P, R=2, args={"n_test": 50})).value
    ctx = _ctx(P, R=2, args={"n_test": 50})
    X = ctx.inputs()
    A, W0, B = q._init(ctx, X)
    Y = q.synthetic_target(X)
    spec = dict(ctx.inputs_spec, n="50", separation="0", geometry="random")
    Xt = Context("t", P, 2, ctx.generator, inputs_spec=spec).inputs()
    tr = ((net.forward(A, W0, B, X, -1.0).out - Y) ** 2).mean(dim=(-1, -2))
    te = ((net.forward(A, W0, B, Xt, -1.0).out - q.synthetic_target(Xt)) ** 2).mean(dim=(-1, -2))
    assert torch.allclose(got, te - tr, rtol=1e-12)


# --------------------------------------------------------------------------- sparse vectors, products


def test_sparse_sup_exact_for_one_row_and_below_brute_force():
    g = torch.Generator().manual_seed(3)
    M = torch.randn(2, 1, 3, 8, generator=g, dtype=torch.float64)
    s = 3
    est = q._sparse_sup(M, s, swaps=4)
    brute = torch.stack([torch.linalg.matrix_norm(M[..., list(S)], ord=2)
                         for S in itertools.combinations(range(8), s)], -1).amax(-1)
    assert bool((est <= brute * (1 + 1e-12)).all()) and bool((est >= 0.8 * brute).all())
    row = M[..., :1, :]
    exact = torch.stack([torch.linalg.matrix_norm(row[..., list(S)], ord=2)
                         for S in itertools.combinations(range(8), s)], -1).amax(-1)
    assert torch.allclose(q._sparse_sup(row, s, swaps=0), exact, rtol=1e-12)


def test_sparse_gain_back_is_exact_and_product_chain_is_the_printed_product():
    P = {"m": 12, "L": 2, "n": 1, "p": 5, "d": 1, "alpha": 0.2, "s": 3}
    got = q.sparse_gain(_ctx(P, R=2, args={"target": "Back"})).value
    ctx = _ctx(P, R=2)
    X = ctx.inputs()
    A, Ws, B = q._init(ctx, X)
    fwd = net.forward(A, Ws, B, X, 0.2)
    backs = net.back_matrices(Ws, B, fwd)[:-1]
    ref = torch.stack([b[:, 0, 0].abs().topk(3, -1).values.norm(dim=-1) for b in backs], -1).amax(-1)
    assert torch.allclose(got, ref, rtol=1e-12)
    D = [fwd.slope(l)[:, 0] for l in range(3)]
    chain = q._chain(Ws, [d.unsqueeze(1) for d in D], 1, 2)[:, 0]  # W_2 D_1
    assert torch.allclose(chain, Ws[1] @ torch.diag_embed(D[1]), rtol=1e-13)


def test_product_change_vanishes_without_perturbation():
    P = {"m": 12, "L": 3, "n": 1, "p": 5, "d": 1, "alpha": -1.0, "omega": 0.01}
    for item in (3, 4):
        assert bool((q.product_change(_ctx(P, args={"item": item})).value.abs() < 1e-12).all())
    with pytest.raises(Exception, match="L >= 3"):
        q.product_change(_ctx(dict(P, L=2), args={"item": 3}))


def test_split_statistic_is_the_optimal_soft_threshold():
    """min ||g_1|| s.t. ||g - g_1||_inf <= tau is attained by soft thresholding (checked against a projection)."""
    g = torch.randn(1, 1, 50, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tau = 0.4
    fwd0 = net.Forward([g * 0, g * 0], [g * 0, g * 0], g[..., :1], 0.0)
    fwd = net.Forward([g * 0, g * 0], [g * 0, g], g[..., :1], 0.0)
    got = q._forward_change("split", fwd0, fwd, tau).item()
    g1 = np.sign(g.numpy()) * np.maximum(np.abs(g.numpy()) - tau, 0)
    assert got == pytest.approx(float(np.linalg.norm(g1)), rel=1e-12)
    assert np.abs(g.numpy() - g1).max() <= tau + 1e-12


def test_dg_norm_adversary_respects_the_deterministic_ceiling_at_one_layer():
    """L = 1: ||D'_1 g_1|| ≤ √c(α) ||g'_1|| ≤ √c(α) ω ||h_0||, and the single-unit push reaches a good part of it."""
    P = {"m": 64, "L": 1, "n": 1, "p": 5, "alpha": -1.0, "omega": 0.05}
    v = q.pattern_changes(_ctx(P, R=8, search="adversarial", args={"statistic": "dg-norm", "random_draws": 0})).value
    ctx = _ctx(P, R=8)
    X = ctx.inputs()
    A, _, _ = q._init(ctx, X)
    h0 = (X @ A.transpose(-1, -2)).norm(dim=-1).amax(-1)
    ceiling = math.sqrt(net.c_alpha(-1.0)) * 0.05 * h0
    assert bool((v <= ceiling * (1 + 1e-12)).all()) and bool((v >= 0.5 * ceiling).all())


# --------------------------------------------------------------------------- Lemma B.8, Corollary 3.3, experiment


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), alpha=st.sampled_from([-20.0, -1.0, -0.3, 0.0, 0.5, 0.99]),
       scale=st.sampled_from([1e-6, 1e-2, 1.0, 10.0]), L=st.integers(1, 4))
def test_secant_identity_and_range(seed, alpha, scale, L):
    P = {"m": 6, "L": L, "n": 2, "p": 5, "d": 1, "alpha": alpha}
    ident = q.secant_identity(_ctx(P, seed=seed, R=2, args={"part": "identity", "scale": scale})).value
    rng = q.secant_identity(_ctx(P, seed=seed, R=2, args={"part": "range", "scale": scale})).value
    # the secant slopes divide σ̃(g) - σ̃(g*) by g - g* = O(scale): round-off grows like eps/scale
    assert bool((ident < 1e-12 + 1e-15 / scale).all())
    assert bool((rng <= math.sqrt(net.c_alpha(alpha)) * (1 + 1e-12)).all())


def c_ref(a):
    return (1 - a) ** 2 / (1 + a ** 2)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(a=st.floats(-1e6, 1 - 1e-9), b=st.floats(-1e6, 1 - 1e-9))
def test_corollary_3_3_on_c_alpha(a, b):
    """c(α) is maximal (= 2) at α = -1, increasing on (-∞, -1], decreasing on [-1, 1): so γ = 1 - K c(α) is
    minimal at -1, decreasing on (-∞, -1) and increasing on (-1, 1) for every K > 0."""
    assert c_ref(a) <= 2 + 1e-15
    lo, hi = min(a, b), max(a, b)
    if hi - lo > 1e-6 * max(1.0, abs(lo)):
        if hi <= -1:
            assert c_ref(lo) < c_ref(hi)
        elif lo >= -1:
            assert c_ref(lo) > c_ref(hi)


@pytest.mark.parametrize("part", ["argmin", "decreasing", "increasing"])
def test_rate_factor_order_is_positive_and_reaches_the_ends(part):
    obs = q.rate_factor_order(_ctx({"K": 0.5}, R=20000, args={"part": part}))
    assert bool((obs.value > 0).all())
    a = obs.extras.get("alpha", obs.extras.get("alpha1"))
    assert a.min().item() < -100 or part == "increasing"
    if part == "increasing":
        assert obs.extras["alpha2"].max().item() > 0.99 and a.min().item() < -0.99


def test_kendall_tau_matches_scipy():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(5, 6, generator=g, dtype=torch.float64), torch.randn(5, 6, generator=g, dtype=torch.float64)
    ref = [stats.kendalltau(x[r].numpy(), y[r].numpy()).statistic for r in range(5)]
    assert np.allclose(q._kendall_tau(x, y).numpy(), ref, rtol=1e-12)


def test_alpha_experiment_is_paired_and_ranks_final_errors():
    P = {"m": 16, "L": 2, "n": 10, "p": 5, "d": 1, "eta0": 1.0, "T": 30}
    obs = q.alpha_experiment(_ctx(P, R=3, args={"alphas": [-1.0, 0.0, 0.5]}))
    F = torch.stack([obs.extras[f"final_mse[{a:g}]"] for a in (-1.0, 0.0, 0.5)], -1)
    c = torch.tensor([net.c_alpha(a) for a in (-1.0, 0.0, 0.5)], dtype=torch.float64).expand_as(F)
    assert torch.allclose(obs.value, q._kendall_tau(-F, c))
    # same init for every α: at α = 1 - tiny the net is almost linear; here check the α = 0 run against a direct one
    ctx = _ctx(P, R=3)
    X = ctx.inputs()
    A, Ws, B = q._init(ctx, X)
    Y = q.synthetic_target(X) + 0.1 * ctx.randn(3, 10, 1)
    tr = q.train(A, Ws, B, X, Y, 0.0, eta=1.0 / (10 * 2 * 16), steps=30)
    assert torch.allclose(obs.extras["final_mse[0]"], tr.losses[:, -1] / 10, rtol=1e-12)



def test_linearization_error_is_exactly_zero_without_pattern_flips_and_positive_at_depth_two():
    """At L = 1 the network is linear in W_1 between pattern flips: an ω-ball too small to flip a unit leaves an error
    that is rounding residue (~1e-16), which the estimator reports as 0 (not an implied constant of 1e-16 / bound);
    at L = 2 the second-order term is real and stays."""
    P = {"m": 32, "L": 1, "n": 3, "p": 5, "d": 1, "alpha": -1.0, "delta": 0.5, "omega": 1e-9}
    assert bool((q.linearization_error(_ctx(P, R=6, search="random")).value == 0).all())
    deep = q.linearization_error(_ctx(dict(P, L=2, omega=1e-2), R=6, search="random")).value
    assert bool((deep > 1e-10).all())
