"""chatterji2021 network against references written from the paper's formulas, autograd, and exact identities."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper

from lemmacheck import kernels as k

ch = paper("chatterji2021").network

F64 = torch.float64


def setup(seed: int = 0, R: int = 2, n: int = 4, p: int = 5, L: int = 3, act: str = "huberized-relu",
          h: float = 0.2, scale: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(R, n, p, generator=gen, dtype=F64)
    X = X / X.norm(dim=-1, keepdim=True)
    y = torch.randint(0, 2, (R, n), generator=gen).to(F64) * 2 - 1
    Vs = [scale * V for V in ch.init(gen, R, p, L)]
    return X, y, Vs, ch.activation(act, h)


ACTS = ["huberized-relu", "scaled-swish"]


# --------------------------------------------------------------------------------------------- references

def ref_phi(name: str, h: float, z: float) -> float:
    """Eq. (1) and §2.2, written out for one scalar."""
    if name == "huberized-relu":
        if z < 0:
            return 0.0
        return z * z / (2 * h) if z <= h else z - h / 2
    return z / (1.1 * (1 + math.exp(-2 * z / h)))


@pytest.mark.parametrize("name", ACTS)
def test_activation_matches_its_definition(name):
    act = ch.activation(name, 0.37)
    z = torch.linspace(-3, 3, 601, dtype=F64)
    ref = torch.tensor([ref_phi(name, 0.37, float(t)) for t in z], dtype=F64)
    assert torch.allclose(act.f(z), ref, rtol=1e-14, atol=1e-15)
    # closed-form φ' and φ'' against central differences (away from the Huber kinks 0 and h)
    zz = z[((z.abs() > 1e-3) & ((z - 0.37).abs() > 1e-3))]
    eps = 1e-6
    assert torch.allclose(act.df(zz), (act.f(zz + eps) - act.f(zz - eps)) / (2 * eps), atol=1e-8)
    assert torch.allclose(act.d2f(zz), (act.df(zz + eps) - act.df(zz - eps)) / (2 * eps), atol=1e-6)


def ref_network(Vs: list[torch.Tensor], x: torch.Tensor, phi) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """f_V(x) = V_{L+1} φ(V_L ⋯ φ(V_1 x)) for ONE network and ONE input, plus the pre-activations u_ℓ."""
    h, us = x, []
    for V in Vs[:-1]:
        u = V @ h
        us.append(u)
        h = phi(u)
    return (Vs[-1] @ h)[0], us


@pytest.mark.parametrize("name", ACTS)
def test_forward_and_gradient_formula_2a_2b(name):
    X, _y, Vs, act = setup(seed=1, act=name)
    fwd = ch.forward(Vs, X, act)
    deltas, _ = ch.backward(Vs, fwd)
    per = ch.output_gradients(fwd, deltas)
    L = len(Vs) - 1
    for r in range(X.shape[0]):
        V = [v[r] for v in Vs]
        for s in range(X.shape[1]):
            f, us = ref_network(V, X[r, s], act.f)
            assert torch.allclose(fwd.out[r, s], f, rtol=1e-13)
            xs = [X[r, s]] + [act.f(u) for u in us]
            Sig = [torch.diag(act.df(u)) for u in us]
            for l in range(1, L + 1):  # (2a): (Σ_ℓ Π_{j=ℓ+1}^{L} V_jᵀ Σ_j) V_{L+1}ᵀ x_{ℓ−1}ᵀ
                M = Sig[l - 1]
                for j in range(l + 1, L + 1):
                    M = M @ V[j - 1].T @ Sig[j - 1]
                ref = (M @ V[L].T) @ xs[l - 1][None, :]
                assert torch.allclose(per[l - 1][r, s], ref, rtol=1e-12, atol=1e-14)
            assert torch.allclose(per[L][r, s], xs[L][None, :], rtol=1e-14)  # (2b)


@pytest.mark.parametrize("name", ACTS)
@pytest.mark.parametrize("L", [1, 2, 4])
def test_loss_gradient_matches_autograd(name, L):
    X, y, Vs, act = setup(seed=2, act=name, L=L)
    grads, _fwd, _ = ch.loss_gradients(Vs, X, y, act)
    Vr = [V.clone().requires_grad_(True) for V in Vs]
    auto = torch.autograd.grad(ch.loss(ch.forward(Vr, X, act).out, y).sum(), Vr)
    for g, ga in zip(grads, auto):
        torch.testing.assert_close(g, ga, rtol=1e-10, atol=1e-10 * float(ga.abs().max()))


@pytest.mark.parametrize("name", ACTS)
def test_scaled_loss_gradient_is_the_gradient_in_log_scale(name):
    X, y, Vs, act = setup(seed=3, act=name, L=2)
    grads, _, _ = ch.loss_gradients(Vs, X, y, act)
    scaled, s, _ = ch.scaled_loss_gradients(Vs, X, y, act)
    for g, gs in zip(grads, scaled):
        torch.testing.assert_close(torch.exp(s)[:, None, None] * gs, g, rtol=1e-12, atol=1e-14)


def test_gradient_upper_ratio_survives_underflow_of_the_loss():
    """scale 40, L = 3, labels = sign(f): margins in the thousands, so J and grad J underflow to 0 in float64 (the
    plain ratio is 0/0). Oracle for that regime: g_s = e^{-m_s}(1 + O(e^{-m})) and J = (1/n) sum_s e^{-m_s}
    (1 + O(e^{-m})), so the ratio is ||sum_s y_s w_s grad f_s|| / (sqrt((L+1)p) ||V||^(L+1)) with w = softmax(-m),
    from per-sample gradients (another code path)."""
    lemma_4_3_ratio = paper("chatterji2021").quantities.lemma_4_3_ratio

    X, _, Vs, act = setup(seed=4, act="huberized-relu", L=3, scale=40.0, p=16)
    fwd = ch.forward(Vs, X, act)
    y = torch.sign(fwd.out)
    m = ch.margins(fwd.out, y)
    assert float(m.min()) > 800 and float(ch.loss(fwd.out, y).max()) == 0.0  # truly underflowed
    w = torch.softmax(-m, dim=-1)
    per = ch.output_gradients(fwd, ch.backward(Vs, fwd)[0])
    comb = [torch.einsum("rn,rn...->r...", y * w, g) for g in per]
    ref = ch.collective_norm(comb) / (math.sqrt(4 * 16) * ch.collective_norm(Vs) ** 4)
    ratio, log_j, _ = lemma_4_3_ratio(Vs, X, y, act)
    assert bool(torch.isfinite(log_j).all()) and float(log_j.max()) < -700
    torch.testing.assert_close(ratio, ref, rtol=1e-9, atol=0)


@pytest.mark.parametrize("name", ACTS)
def test_alignment_identity_of_lemma_b18(name):
    """Proof of Lemma B.18 (exact for any V and differentiable φ):
    −∇_{V_ℓ}J_s · V_ℓ = g_s y_s [f_s + Σ_{k=ℓ}^{L} (u_k ⊙ φ'(u_k) − φ(u_k)) · b_k],  −∇_{V_{L+1}}J_s · V_{L+1} = g_s y_s f_s,
    where b_k = ∂f/∂x_k. Checked per sample against autograd; the defect vectors lie in [−h/2, h/2]."""
    X, y, Vs, act = setup(seed=3, act=name, L=3, h=0.5)
    fwd = ch.forward(Vs, X, act)
    _, bs = ch.backward(Vs, fwd)
    gs = ch.g_weights(fwd.out, y)
    L = len(Vs) - 1
    for r in range(X.shape[0]):
        for s in range(X.shape[1]):
            Vr = [V[r:r + 1].clone().requires_grad_(True) for V in Vs]
            Js = torch.nn.functional.softplus(-y[r, s] * ch.forward(Vr, X[r:r + 1, s:s + 1], act).out).sum()
            auto = torch.autograd.grad(Js, Vr)
            for l in range(1, L + 2):
                lhs = -(auto[l - 1] * Vs[l - 1][r:r + 1]).sum()
                defect = sum(((fwd.u[k - 1] * fwd.dphi[k - 1] - act.f(fwd.u[k - 1])) * bs[k - 1])[r, s].sum()
                             for k in range(l, L + 1))
                rhs = gs[r, s] * y[r, s] * (fwd.out[r, s] + defect)
                assert float(lhs) == pytest.approx(float(rhs), rel=1e-10, abs=1e-14)
    for u, d in zip(fwd.u, fwd.dphi):
        chi = u * d - act.f(u)
        assert float(chi.abs().max()) <= 0.5 / 2 + 1e-15


# ------------------------------------------------------------------------------ small-step arithmetic

@pytest.mark.parametrize("name", ACTS)
def test_forward_difference_exact_for_moderate_steps_and_linear_for_tiny_ones(name):
    X, _y, Vs, act = setup(seed=4, act=name, L=2, scale=3.0)
    gen = torch.Generator().manual_seed(5)
    D = [torch.randn(V.shape, generator=gen, dtype=F64) for V in Vs]
    for eps in (1e-1, 1e-3):
        Ds = [eps * d for d in D]
        direct = ch.forward([v + d for v, d in zip(Vs, Ds)], X, act).out - ch.forward(Vs, X, act).out
        torch.testing.assert_close(ch.forward_difference(Vs, Ds, X, act), direct, rtol=1e-9, atol=1e-13)
    # A step of relative size 1e-20 vanishes in V + D, but its output change is ∇f · D to first order.
    fwd = ch.forward(Vs, X, act)
    deltas, _ = ch.backward(Vs, fwd)
    per = ch.output_gradients(fwd, deltas)
    tiny = [1e-20 * d for d in D]
    lin = sum((g * d.unsqueeze(1)).flatten(2).sum(-1) for g, d in zip(per, tiny))
    got = ch.forward_difference(Vs, tiny, X, act, fwd)
    torch.testing.assert_close(got, lin, rtol=1e-9, atol=0.0)
    naive = ch.forward([v + d for v, d in zip(Vs, tiny)], X, act).out - fwd.out
    assert float(naive.abs().max()) == 0.0  # what an ordinary forward pass would report


@settings(max_examples=60, deadline=None, derandomize=True)
@given(name=st.sampled_from(ACTS), h=st.floats(1e-4, 10.0), u=st.floats(-50.0, 50.0),
       rel=st.floats(-1.0, 1.0), scale=st.sampled_from([1e-18, 1e-9, 1e-3, 1.0]))
def test_phi_difference_property(name, h, u, rel, scale):
    """φ(u + d) − φ(u): equal to the direct difference when that is accurate, and to φ'(u) d (+ ½φ''(u) d²)
    when d is tiny, whatever side of the Huber kinks u lies."""
    act = ch.activation(name, h)
    ut = torch.tensor([u * h], dtype=F64)
    d = torch.tensor([rel * scale * h], dtype=F64)
    got = ch.phi_difference(act, ut, d)
    direct = act.f(ut + d) - act.f(ut)
    if scale == 1.0:
        assert torch.allclose(got, direct, rtol=1e-10, atol=1e-14 * h)
    elif scale == 1e-18 and bool((ut.abs() > 1e-6 * h).all() and ((ut - h).abs() > 1e-6 * h).all()):
        taylor = act.df(ut) * d + 0.5 * act.d2f(ut) * d * d
        assert torch.allclose(got, taylor, rtol=1e-10, atol=1e-300)


def test_log_loss_and_loss_change_in_the_small_loss_regime():
    y = torch.ones(1, 3, dtype=F64)
    out = torch.tensor([[800.0, 900.0, 1000.0]], dtype=F64)  # J = (e^{-800} + …)/3 underflows float64
    assert float(ch.loss(out, y)) == 0.0
    assert float(ch.log_loss(out, y)) == pytest.approx(-800 - math.log(3), rel=1e-14)
    out = torch.tensor([[3.0, -1.0, 0.5]], dtype=F64)
    assert float(ch.log_loss(out, y)) == pytest.approx(math.log(float(ch.loss(out, y))), rel=1e-14)
    new = out + torch.tensor([[1e-3, -2e-3, 5e-4]], dtype=F64)
    assert float(ch.loss_change(out, new, y)) == pytest.approx(float(ch.loss(new, y) - ch.loss(out, y)), rel=1e-9)


def test_gradient_descent_compensated_matches_plain_iteration():
    X, y, Vs, act = setup(seed=6, act="scaled-swish", L=2, h=0.3)
    tr = ch.gradient_descent(Vs, X, y, act, 0.2, steps=5)
    V = [v.clone() for v in Vs]
    for t in range(6):
        out = ch.forward(V, X, act).out
        assert torch.allclose(tr.log_loss[:, t], ch.log_loss(out, y), rtol=1e-12)
        grads, _, _ = ch.loss_gradients(V, X, y, act)
        assert torch.allclose(tr.grad_sq[:, t], ch.collective_norm(grads) ** 2, rtol=1e-12)
        if t < 5:
            V = [v - 0.2 * g for v, g in zip(V, grads)]
    for a, b in zip(tr.weights, V):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)
    drops = torch.exp(tr.log_loss[:, :-1]) - torch.exp(tr.log_loss[:, 1:])
    assert torch.allclose(tr.loss_drop, drops, rtol=1e-8)


@pytest.mark.parametrize("act", ["huberized-relu", "scaled-swish"])
def test_training_loop_is_gradient_descent_bit_for_bit(act):
    """train_then_scale's lean loop (_descend) returns gradient_descent's final weights exactly: the small-loss
    claims' draws did not move when the per-step diagnostics were dropped from their training."""
    X, y, Vs, a = setup(seed=8, R=3, n=4, p=6, L=2, act=act, h=0.05)
    for got, ref in zip(ch._descend(Vs, X, y, a, 0.5, 7), ch.gradient_descent(Vs, X, y, a, 0.5, 7).weights):
        assert torch.equal(got, ref)


def test_train_then_scale_reaches_the_small_loss_regime():
    X, y, Vs, act = setup(seed=7, R=4, n=3, p=8, L=1, h=1e-3)
    target = ch.log_threshold(3, 1) + math.log(0.1)
    V, sep = ch.train_then_scale(Vs, X, y, act, log_target=target)
    logJ = ch.log_loss(ch.forward(V, X, act).out, y)
    assert bool(sep.any())
    assert torch.all((logJ[sep] - target).abs() < 1e-6)
    assert torch.all(logJ[sep] < ch.log_threshold(3, 1))


def test_constants_as_printed():
    logJ1, n1 = torch.tensor([-40.0], dtype=F64), torch.tensor([7.0], dtype=F64)
    L, p, h = 2, 9, 1e-3
    assert float(ch.h_max(logJ1, n1, L, p)) == pytest.approx(min(2 ** (1 - 3) * 40 / (24 * 3 * 49), 1.0))
    a1 = h / (1024 * 9 * 9 * math.exp(-40) * 7 ** 11)
    a2 = 2.5 * 49 / (2 * 2 * 2.75 ** 2 * math.exp(-40) * 40 ** (2 / 2))
    assert float(ch.alpha_max(h, logJ1, n1, L, p)) == pytest.approx(min(a1, a2), rel=1e-12)
    assert float(ch.q_tilde(torch.tensor([a1]), logJ1, n1, L)) == pytest.approx(
        2 * 2.75 ** 2 * a1 * math.exp(-40) * 40 / (2.5 * 49), rel=1e-12)
    assert ch.threshold(3, 1) == pytest.approx(3.0 ** -25, rel=1e-12)


# ------------------------------------------------------------------------------------------- properties

@settings(max_examples=40, deadline=None, derandomize=True)
@given(name=st.sampled_from(ACTS), h=st.floats(1e-6, 10.0), seed=st.integers(0, 2**31 - 1))
def test_definition_2_1_holds_for_both_activations(name, h, seed):
    """Definition 2.1 for the Huberized ReLU and the scaled Swish, on points spread over many scales of h;
    plus the Huberized ReLU facts ReLU(z) − h/2 ≤ φ(z) ≤ ReLU(z) and 0 ≤ φ'(z) z − φ(z) ≤ h/2."""
    gen = torch.Generator().manual_seed(seed)
    act = ch.activation(name, h)
    mag = torch.exp(torch.empty(400, dtype=F64).uniform_(math.log(1e-6), math.log(1e4), generator=gen))
    z = h * mag * torch.where(torch.rand(400, generator=gen) < 0.5, -1.0, 1.0)
    z = torch.cat([z, torch.tensor([0.0, h, -h, 2 * h], dtype=F64)])
    assert float(act.f(torch.zeros(1, dtype=F64))) == 0.0
    assert float(act.df(z).abs().max()) <= 1.0
    # φ'(z) z − φ(z) cancels for |z| ≫ h (Huber: z − (z − h/2)); allow its float64 rounding, 8 eps |z|.
    eps = torch.finfo(F64).eps
    assert torch.all((act.df(z) * z - act.f(z)).abs() <= h / 2 * (1 + 1e-12) + 8 * eps * z.abs())
    w = z + h * torch.exp(torch.empty(404, dtype=F64).uniform_(math.log(1e-6), math.log(10.0), generator=gen))
    assert float(((act.df(w) - act.df(z)).abs() / (w - z)).max()) <= (1 / h) * (1 + 1e-9)
    if name == "huberized-relu":
        assert torch.all(act.f(z) <= torch.relu(z)) and torch.all(act.f(z) >= torch.relu(z) - h / 2)
        chi = act.df(z) * z - act.f(z)
        assert torch.all(chi >= -8 * eps * z.abs()) and torch.all(chi <= h / 2 * (1 + 1e-12) + 8 * eps * z.abs())


@settings(max_examples=25, deadline=None, derandomize=True)
@given(c=st.floats(0.01, 100.0), h=st.floats(1e-3, 1.0), seed=st.integers(0, 2**31 - 1))
def test_huberized_relu_rescaling(c, h, seed):
    """φ_h(c z) = c φ_{h/c}(z): scaling the weights shrinks the effective smoothing (catalogue §1.2)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(200, generator=gen, dtype=F64) * 3 * h
    lhs = k.huberized_relu(h).f(c * z)
    rhs = c * k.huberized_relu(h / c).f(z)
    assert torch.allclose(lhs, rhs, rtol=1e-12, atol=1e-15 * c * h)


# ------------------------------------------------------------------------------ quantities, end to end

QUANTITY_NAMES = [
    "activation-derivative-bound", "activation-derivative-lipschitz", "activation-taylor-defect",
    "activation-contraction", "gradient-upper-ratio", "alignment-ratio", "gradient-lower-ratio", "descent-ratio",
    "smoothness-ratio", "init-layer-norm-deviation", "init-weight-norm-ratio", "init-output-magnitude",
    "gd-loss-ratio",
]


@pytest.mark.parametrize("activation", ACTS)
def test_every_registered_quantity_runs(activation):
    from lemmacheck.context import Context
    from lemmacheck.registry import QUANTITIES

    params = {"p": 4, "L": 1, "n": 3, "h": 0.01, "delta": 0.1, "kappa": 1.0, "T": 3}
    for name in QUANTITY_NAMES:
        weights = "small-loss" if name in ("alignment-ratio", "gradient-lower-ratio", "descent-ratio",
                                           "gd-loss-ratio") else "init"
        ctx = Context("test", params, 3, torch.Generator().manual_seed(0),
                      args={"activation": activation, "weights": weights, "train_steps": 50},
                      inputs_spec={"kind": "unit-sphere", "n": "n", "d": "p"})
        obs = QUANTITIES.get(f"chatterji2021-{name}").obj(ctx)
        assert obs.value.shape == (3,), name
        ok = torch.ones(3, dtype=torch.bool) if obs.valid is None else obs.valid
        assert bool(torch.isfinite(obs.value[ok]).all()), name


def test_definition_quantities_are_tight_where_the_paper_says():
    """Huberized ReLU: sup|φ'| = 1, h·Lip(φ') = 1 and sup|φ'z − φ|/h = 1/2 are all attained; scaled Swish:
    sup|φ'| ≈ 0.99986 < 1, h·sup|φ''| = 1/1.1, defect ≈ 0.1997 h."""
    from lemmacheck.context import Context
    from lemmacheck.registry import QUANTITIES

    def run(name, act):
        ctx = Context("t", {"p": 4}, 20, torch.Generator().manual_seed(1), args={"activation": act})
        return QUANTITIES.get(f"chatterji2021-{name}").obj(ctx).value

    assert torch.allclose(run("activation-derivative-bound", "huberized-relu"), torch.ones(20, dtype=F64))
    assert torch.allclose(run("activation-derivative-lipschitz", "huberized-relu"), torch.ones(20, dtype=F64))
    assert torch.allclose(run("activation-taylor-defect", "huberized-relu"), torch.full((20,), 0.5, dtype=F64))
    assert float(run("activation-derivative-bound", "scaled-swish").max()) == pytest.approx(0.99986, abs=1e-5)
    assert float(run("activation-derivative-lipschitz", "scaled-swish").max()) == pytest.approx(1 / 1.1, rel=1e-6)
    assert float(run("activation-taylor-defect", "scaled-swish").max()) == pytest.approx(0.1997, abs=1e-3)


def test_initialisation_variances():
    """§3.2: (V_ℓ)_{ij} ~ N(0, 2/p) for ℓ ∈ [L], (V_{L+1})_j ~ N(0, 1); hence E‖V^{(1)}‖² = p(2L + 1) (Lemma E.12)."""
    gen = torch.Generator().manual_seed(8)
    R, p, L = 400, 16, 2
    Vs = ch.init(gen, R, p, L)
    for V in Vs[:-1]:
        assert V.shape == (R, p, p)
        var = V.var()  # R p² entries; relative standard error of a Gaussian variance sqrt(2/N) ≈ 0.4%
        assert abs(float(var) * p / 2 - 1) < 5 * math.sqrt(2 / V.numel())
    assert Vs[-1].shape == (R, 1, p) and abs(float(Vs[-1].var()) - 1) < 5 * math.sqrt(2 / Vs[-1].numel())
    sq = ch.collective_norm(Vs) ** 2
    z = (sq.mean() - p * (2 * L + 1)) / (sq.std() / math.sqrt(R))
    assert abs(float(z)) < 4.5
