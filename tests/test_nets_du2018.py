"""du2018 networks against one-network-at-a-time references written from the paper's formulas, and autograd."""

from __future__ import annotations

import math

import mpmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper
from references import dense_gradient_descent

from lemmacheck import kernels as k

du = paper("du2018").network

F64 = torch.float64


def unit(gen: torch.Generator, *shape: int) -> torch.Tensor:
    x = torch.randn(*shape, generator=gen, dtype=F64)
    return x / x.norm(dim=-1, keepdim=True)


def setup(kind: str, seed: int = 0, R: int = 2, n: int = 3, m: int = 12, H: int = 3, d0: int = 4, p: int = 5,
          q: int = 3, act: str = "softplus", c_lambda: float = 0.5):
    gen = torch.Generator().manual_seed(seed)
    if kind == "cnn":
        X = du.as_images(unit(gen, R, n, d0 * p), d0, p)
    else:
        X = du.as_images(unit(gen, R, n, d0))
        q = 1
    net = du.make_net(kind, X, m=m, H=H, act=k.get_activation(act), c_lambda=c_lambda, q=q)
    Ws, a = du.init(gen, R, net, X.shape[2])
    y = 2 * torch.rand(R, n, generator=gen, dtype=F64) - 1
    return net, Ws, a, X, y


# ----------------------------------------------------------------- references: one network, one input, loops

def ref_patch(x: torch.Tensor, q: int) -> torch.Tensor:
    """φ(x) for x ∈ R^{C×p}, written out: row c·q + o of column l is x[c, l + o − (q−1)/2], zero outside."""
    C, p = x.shape
    r = (q - 1) // 2
    out = torch.zeros(C * q, p, dtype=x.dtype)
    for l in range(p):
        for c in range(C):
            for o in range(q):
                src = l + o - r
                if 0 <= src < p:
                    out[c * q + o, l] = x[c, src]
    return out


def ref_forward(kind: str, Ws: list[torch.Tensor], a: torch.Tensor, x: torch.Tensor, sigma, c_sigma: float,
                s: float, q: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Eq. (2) / eq. (3) / §2.2 for ONE network and ONE input (x: (d,) or (d0, p))."""
    m = Ws[0].shape[0]
    xs = [x]
    if kind in ("fc", "resnet"):
        h = x
        for l, W in enumerate(Ws, start=1):
            if kind == "fc" or l == 1:
                h = math.sqrt(c_sigma / m) * sigma(W @ h)
            else:
                h = h + s / (math.sqrt(m)) * sigma(W @ h)
            xs.append(h)
        return xs, a @ h
    h = x
    for l, W in enumerate(Ws, start=1):
        z = W @ ref_patch(h, q)
        h = math.sqrt(c_sigma / m) * sigma(z) if l == 1 else h + s / math.sqrt(m) * sigma(z)
        xs.append(h)
    A = a[:, None].expand(m, h.shape[1])  # a_{r,l} = a_{r,1}
    return xs, (A * h).sum()


@pytest.mark.parametrize("kind", ["fc", "resnet", "cnn"])
@pytest.mark.parametrize("act", ["softplus", "tanh", "gelu"])
def test_forward_matches_paper_formula(kind, act):
    net, Ws, a, X, _y = setup(kind, seed=1, act=act)
    fwd = du.forward(net, Ws, a, X)
    cs = k.c_sigma(net.act)
    for r in range(X.shape[0]):
        s = float(net.s[r]) if kind != "fc" else 0.0
        for i in range(X.shape[1]):
            x = X[r, i, :, 0] if kind != "cnn" else X[r, i]
            xs, out = ref_forward(kind, [W[r] for W in Ws], a[r], x, net.act.f, cs, s, net.q)
            assert torch.allclose(fwd.out[r, i], out, rtol=1e-12, atol=1e-14)
            for h in range(1, net.H + 1):
                got = fwd.x[h][r, i, :, 0] if kind != "cnn" else fwd.x[h][r, i]
                assert torch.allclose(got, xs[h], rtol=1e-12, atol=1e-14)


def test_residual_scale_and_data_lambda():
    gen = torch.Generator().manual_seed(2)
    X = unit(gen, 3, 5, 7)
    lam = du.data_lambda(du.as_images(X))
    G = X @ X.transpose(-1, -2)
    off = (G - torch.diag_embed(torch.diagonal(G, dim1=-2, dim2=-1))).abs().amax(dim=(-1, -2))
    assert torch.allclose(lam, 1 - off, atol=1e-13)  # unit data: λ = 1 − max_{i≠j} |⟨x_i, x_j⟩|
    net = du.make_net("resnet", du.as_images(X), m=8, H=4, act=k.softplus(), c_lambda=0.3)
    assert torch.allclose(net.s, 0.3 * lam ** 1.5 / 4)
    with pytest.raises(ValueError, match="c_lambda"):
        du.DuNet("resnet", 8, 4, k.softplus(), 1.5, lam)


def test_cnn_lambda_needs_enough_channels():
    """Reference fact (catalogue §0.6): the 2p×2p block of K^{(0)} has rank ≤ q·d0, so λ = 0 unless q·d0 ≥ 2p."""
    gen = torch.Generator().manual_seed(3)
    thin = du.as_images(unit(gen, 2, 3, 2 * 6), 2, 6)  # q d0 = 6 < 12
    wide = du.as_images(unit(gen, 2, 3, 6 * 3), 6, 3)  # q d0 = 18 ≥ 6
    assert float(du.data_lambda(thin, 3).abs().max()) < 1e-12
    assert float(du.data_lambda(wide, 3).min()) > 1e-3


# ------------------------------------------------------------------------------------ gradients vs autograd

@pytest.mark.parametrize("kind", ["fc", "resnet", "cnn"])
@pytest.mark.parametrize("H", [1, 2, 4])
def test_closed_form_loss_gradient_matches_autograd(kind, H):
    net, Ws, a, X, y = setup(kind, seed=4, H=H)
    grads, _fwd, _ = du.loss_gradients(net, Ws, a, X, y)
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    total = du.loss(du.forward(net, Wr, a, X).out, y).sum()
    auto = torch.autograd.grad(total, Wr)
    for g, ga in zip(grads, auto):
        torch.testing.assert_close(g, ga, rtol=1e-10, atol=1e-10 * float(ga.abs().max()))


@pytest.mark.parametrize("kind", ["fc", "resnet", "cnn"])
def test_gram_matrices_match_per_example_autograd_gradients(kind):
    net, Ws, a, X, _y = setup(kind, seed=5, H=3)
    fwd = du.forward(net, Ws, a, X)
    Gs = du.grams(fwd, du.backward(net, Ws, a, fwd))
    R, n = X.shape[:2]
    for r in range(R):
        per = []
        for i in range(n):
            Wr = [W[r:r + 1].clone().requires_grad_(True) for W in Ws]
            u = du.forward(net if kind == "fc" else du.DuNet(net.kind, net.m, net.H, net.act, net.c_lambda,
                                                               net.lam[r:r + 1], net.q),
                           Wr, a[r:r + 1], X[r:r + 1, i:i + 1]).out.sum()
            per.append(torch.autograd.grad(u, Wr))
        for h in range(net.H):
            ref = torch.stack([torch.stack([(per[i][h] * per[j][h]).sum() for j in range(n)]) for i in range(n)])
            torch.testing.assert_close(Gs[h][r], ref, rtol=1e-10, atol=1e-12)


def test_last_layer_gram_equals_papers_printed_closed_forms():
    """§6 / App. A: G^{(H)}_{ij} = ⟨x_i^{(H−1)}, x_j^{(H−1)}⟩ (c_σ/m) Σ_r a_r² σ'(w_rᵀx_i) σ'(w_rᵀx_j) (FC);
    App. B: the same with s²/m (ResNet); App. C: (s²/m) Σ_r [Σ_l a_{r,l} φ_l(x_i) σ'(·)]ᵀ[Σ_k a_{r,k} φ_k(x_j) σ'(·)]."""
    for kind in ("fc", "resnet", "cnn"):
        net, Ws, a, X, _y = setup(kind, seed=6, H=3)
        G = du.last_layer_gram(net, Ws, a, X)
        fwd = du.forward(net, Ws, a, X)
        m, n = net.m, X.shape[1]
        for r in range(X.shape[0]):
            W = Ws[-1][r]
            pref = k.c_sigma(net.act) / m if kind == "fc" else float(net.s[r]) ** 2 / m
            for i in range(n):
                for j in range(n):
                    if kind == "cnn":
                        Pi, Pj = ref_patch(fwd.x[-2][r, i], net.q), ref_patch(fwd.x[-2][r, j], net.q)
                        tot = 0.0
                        for rr in range(m):
                            vi = sum(a[r, rr] * Pi[:, l] * net.act.df(W[rr] @ Pi[:, l]) for l in range(Pi.shape[1]))
                            vj = sum(a[r, rr] * Pj[:, l] * net.act.df(W[rr] @ Pj[:, l]) for l in range(Pj.shape[1]))
                            tot = tot + vi @ vj
                    else:
                        xi, xj = fwd.x[-2][r, i, :, 0], fwd.x[-2][r, j, :, 0]
                        tot = (xi @ xj) * (a[r] ** 2 * net.act.df(W @ xi) * net.act.df(W @ xj)).sum()
                    assert float(G[r, i, j]) == pytest.approx(float(pref * tot), rel=1e-11, abs=1e-15)


# -------------------------------------------------------------------------------------------------- GD

def test_gradient_descent_step_and_second_order_residual():
    """One GD step equals W − η ∂L/∂W; I_1 = −ηG(u−y) is the first-order output change, so the remainder
    I_2 = Δu − I_1 of eq. (7) is O(η²): halving η divides it by ≈ 4."""
    net, Ws, a, X, y = setup("resnet", seed=7, m=64, H=3)
    eta = 0.5
    tr = du.gradient_descent(net, Ws, a, X, y, eta, steps=1)
    grads, _, _ = du.loss_gradients(net, Ws, a, X, y)
    for w, w0, g in zip(tr.weights, Ws, grads):
        torch.testing.assert_close(w, w0 - eta * g, rtol=1e-14, atol=1e-14)
    assert torch.allclose(tr.loss[:, 0], du.loss(du.forward(net, Ws, a, X).out, y))
    i2 = [(du.gradient_descent(net, Ws, a, X, y, e, 1).du - du.gradient_descent(net, Ws, a, X, y, e, 1).i1)
          .norm(dim=-1) for e in (0.2, 0.1)]
    ratio = i2[0] / i2[1]
    assert torch.all((ratio > 3.5) & (ratio < 4.5)), ratio


MP_ACTS = {"softplus": lambda z: mpmath.log1p(mpmath.exp(z)), "tanh": mpmath.tanh,
           "gelu": lambda z: z * mpmath.erfc(-z / mpmath.sqrt(2)) / 2}


@pytest.mark.parametrize("act", sorted(MP_ACTS))
def test_activation_difference_is_accurate_relative_to_the_difference(act):
    """σ(z + d) − σ(z) against 40-digit arithmetic, for steps d from 1e-14 to 3 (both sides of the switch to the
    plain difference): error below 1e-12 of the difference, or 1e-14 |d| where σ' itself is rounded to ~eps (tanh's
    1 − tanh² and GELU's tail at |z| ~ 10); the plain difference errs by ~eps |σ(z)| and fails this."""
    mpmath.mp.dps = 40
    g = torch.Generator().manual_seed(1)
    z = torch.randn(200, generator=g, dtype=F64) * 3
    d = torch.sign(torch.randn(200, generator=g, dtype=F64)) * 10 ** (torch.rand(200, generator=g, dtype=F64) * 14.5 - 14)
    sigma = k.get_activation(act)
    got = du.activation_difference(sigma, z, d)
    f = MP_ACTS[act]
    ref = torch.tensor([float(f(mpmath.mpf(a) + mpmath.mpf(b)) - f(mpmath.mpf(a))) for a, b in zip(z.tolist(), d.tolist())],
                       dtype=F64)
    tol = 1e-12 * ref.abs() + 1e-14 * d.abs()
    assert bool(((got - ref).abs() <= tol).all())
    assert not bool(((sigma.f(z + d) - sigma.f(z) - ref).abs() <= tol).all())


def mp_output(net: du.DuNet, Ws: list[list], a: torch.Tensor, x: torch.Tensor, r: int) -> mpmath.mpf:
    """u = f(w, x) of replicate r for ONE input x (C, p) in 40-digit arithmetic (softplus), eq. (2)/(3)/§2.2."""
    h = [[mpmath.mpf(v) for v in row] for row in x.tolist()]
    o = (net.q - 1) // 2
    for l, W in enumerate(Ws, start=1):
        C, p = len(h), len(h[0])
        P = [[h[c][j + t - o] if 0 <= j + t - o < p else mpmath.mpf(0) for j in range(p)]
             for c in range(C) for t in range(net.q)]
        z = mpmath.matrix(W) * mpmath.matrix(P)
        plain = l == 1 or not net.residual
        sc = mpmath.sqrt(mpmath.mpf(net.c_sigma) / net.m) if plain else mpmath.mpf(float(net.s[r])) / mpmath.sqrt(net.m)
        br = [[sc * mpmath.log1p(mpmath.exp(z[i, j])) for j in range(p)] for i in range(net.m)]
        h = br if plain else [[h[i][j] + br[i][j] for j in range(p)] for i in range(net.m)]
    return sum(mpmath.mpf(float(a[i])) * v for i in range(net.m) for v in h[i])


@pytest.mark.parametrize("kind,columns", [("fc", True), ("resnet", True), ("resnet", False), ("cnn", False)])
def test_second_order_term_at_a_tiny_step_matches_high_precision(kind, columns):
    """Eq. (7)'s I_2 = u(w − ηL'(w)) − u(w) − I_1 at η = 1e-7, where I_2 (~1e-15) is below the rounding of u (~1e-16 |u|
    per pass): against the step recomputed in 40 digits, I_2 agrees to 1e-6 relative. The difference of two float64
    forward passes (Lemmas B.6/C.6's old estimate, whose lone in-regime 'violations' were this noise) errs by 10-90%."""
    mpmath.mp.dps = 40
    net, Ws, a, X, y = setup(kind, seed=3, R=1, n=3, m=8, H=3)
    eta = 1e-7
    tr = du.gradient_descent(net, Ws, a, X, y, eta, steps=1, columns=columns)
    grads, _, _ = du.loss_gradients(net, Ws, a, X, y)
    W0 = [w[0].tolist() for w in Ws]
    W1 = [[[mpmath.mpf(v) - mpmath.mpf(eta) * mpmath.mpf(gv) for v, gv in zip(row, grow)]
           for row, grow in zip(w, g[0].tolist())] for w, g in zip(W0, grads)]
    ref = torch.tensor([float(mp_output(net, W1, a[0], X[0, i], 0) - mp_output(net, W0, a[0], X[0, i], 0)
                              - mpmath.mpf(float(tr.i1[0, 0, i]))) for i in range(X.shape[1])], dtype=F64)
    got = (tr.du - tr.i1)[0, 0]
    assert float(ref.abs().max()) < 1e-6 * float(tr.i1.abs().max())  # second order: far below I_1 ~ η
    assert float((got - ref).abs().max() / ref.abs().max()) < 1e-6


@pytest.mark.parametrize("kind", ["resnet", "cnn"])
def test_gd_without_the_output_change_pass_follows_the_same_trajectory(kind):
    """track_du=False (the movement claims, which read no Δu) skips the difference pass: du is empty, every other
    record is the same tensor."""
    net, Ws, a, X, y = setup(kind, seed=5, m=16, H=3, n=3)
    full = du.gradient_descent(net, Ws, a, X, y, 0.1, steps=4)
    lean = du.gradient_descent(net, Ws, a, X, y, 0.1, steps=4, track_du=False)
    assert full.du.shape == (2, 4, 3) and lean.du.shape == (2, 0, 3)
    for f in ("loss", "movement", "step", "grad_norm", "residual_norm", "i1", "lam_min_gram_last"):
        assert torch.equal(getattr(full, f), getattr(lean, f)), f


@pytest.mark.parametrize("kind", ["fc", "resnet", "cnn"])
def test_factored_in_place_gd_equals_dense_textbook_gd(kind):
    """The fast GD (factored gradient, in-place update) follows the same trajectory as dense GD, and every
    recorded norm agrees with the one recomputed from the m×m tensors."""
    net, Ws, a, X, y = setup(kind, seed=11, m=16, H=3, n=3)
    T, eta = 12, 0.3
    fast = du.gradient_descent(net, Ws, a, X, y, eta, steps=T)
    ref = dense_gradient_descent(net, Ws, a, X, y, eta, steps=T)
    for key, got in [("loss", fast.loss), ("movement", fast.movement), ("grad_norm", fast.grad_norm),
                     ("step", fast.step), ("residual", fast.residual_norm)]:
        torch.testing.assert_close(got, ref[key], rtol=1e-10, atol=1e-13, msg=key)
    for w, w_ref in zip(fast.weights, ref["weights"]):
        torch.testing.assert_close(w, w_ref, rtol=1e-10, atol=1e-12)
    for w, w0 in zip(Ws, setup(kind, seed=11, m=16, H=3, n=3)[1]):
        assert torch.equal(w, w0)  # the caller's initial weights are not updated in place
    lean = du.gradient_descent(net, Ws, a, X, y, eta, steps=T, track_movement=False)
    assert torch.equal(lean.loss, fast.loss) and bool(lean.movement.isnan().all())


def test_gd_decreases_squared_loss_at_small_step():
    net, Ws, a, X, y = setup("fc", seed=8, m=256, H=2, n=4)
    tr = du.gradient_descent(net, Ws, a, X, y, 0.05, steps=30)
    assert torch.all(tr.loss[:, 1:] <= tr.loss[:, :-1])
    assert torch.all(tr.movement[:, 0] == 0) and torch.all(tr.movement[:, -1] > 0)


# -------------------------------------------------------------------------------------- init sampler

def test_conditional_sampler_layer_norms_match_full_forward_in_distribution():
    """The weight-free sampler draws the same distribution as the full forward pass: compare the means of
    ‖x^{(h)}‖² (CLT over R = 200 replicates; each side's standard error from its own spread)."""
    gen = torch.Generator().manual_seed(9)
    X1 = du.as_images(unit(gen, 1, 3, 5))
    R, m = 200, 64
    X = X1.expand(R, *X1.shape[1:]).contiguous()
    net = du.make_net("resnet", X, m=m, H=3, act=k.softplus(), c_lambda=0.9)
    Ws, a = du.init(gen, R, net, 5)
    full = du.forward(net, Ws, a, X).norms() ** 2
    cond = du.sample_init(gen, net, X).norms() ** 2
    se = ((full.var(0) + cond.var(0)) / R).sqrt()
    z = (full.mean(0) - cond.mean(0)) / se
    assert float(z.abs().max()) < 4.5, z


# ------------------------------------------------------------------------------------------ properties

@settings(max_examples=20, deadline=None, derandomize=True)
@given(C=st.integers(1, 4), p=st.integers(1, 9), q=st.sampled_from([1, 3, 5]), seed=st.integers(0, 2**31 - 1))
def test_patch_operator_adjoint_and_norm_sandwich(C, p, q, seed):
    """⟨φ(x), y⟩ = ⟨x, φᵀ(y)⟩, and ‖x‖_F ≤ ‖φ(x)‖_F ≤ √q ‖x‖_F (§2.2, catalogue P2.2)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, C, p, generator=gen, dtype=F64)
    y = torch.randn(2, C * q, p, generator=gen, dtype=F64)
    phi = du.patches(x, q)
    assert torch.allclose((phi * y).sum(), (x * du.patches_adjoint(y, q)).sum(), rtol=1e-12)
    assert torch.allclose(phi[0], ref_patch(x[0], q))
    nx, nphi = x.flatten(1).norm(dim=1), phi.flatten(1).norm(dim=1)
    assert torch.all(nx <= nphi * (1 + 1e-12)) and torch.all(nphi <= math.sqrt(q) * nx * (1 + 1e-12))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(d=st.integers(2, 6), m=st.integers(2, 10), H=st.integers(1, 4), seed=st.integers(0, 2**31 - 1),
       c_lambda=st.floats(0.05, 0.95))
def test_cnn_with_one_pixel_is_the_resnet(d, m, H, seed, c_lambda):
    """With p = q = 1 the convolutional ResNet's equations are the ResNet's, so outputs, gradients and Gram
    matrices agree exactly; G = Σ_h G^{(h)} ⪰ G^{(H)}."""
    gen = torch.Generator().manual_seed(seed)
    X = du.as_images(unit(gen, 2, 3, d))
    lam = torch.tensor([0.4, 0.7], dtype=F64)
    res = du.DuNet("resnet", m, H, k.softplus(), c_lambda, lam)
    cnn = du.DuNet("cnn", m, H, k.softplus(), c_lambda, lam, q=1)
    Ws, a = du.init(gen, 2, res, d)
    y = torch.randn(2, 3, generator=gen, dtype=F64)
    g1, f1, d1 = du.loss_gradients(res, Ws, a, X, y)
    g2, f2, _d2 = du.loss_gradients(cnn, Ws, a, X, y)
    assert torch.equal(f1.out, f2.out)
    for u, v in zip(g1, g2):
        assert torch.equal(u, v)
    Gs = du.grams(f1, d1)
    gap = torch.linalg.eigvalsh(sum(Gs) - Gs[-1])[..., 0]
    assert torch.all(gap >= -1e-12 * float(sum(Gs).abs().max()))


# ------------------------------------------------------------------------------ quantities, end to end

def test_frobenius_search_finds_the_supremum_of_a_linear_target():
    """sup over ‖Δ_h‖_F ≤ r of Σ_h ⟨C_h, Δ_h⟩ is r Σ_h ‖C_h‖_F: the gradient-aligned and adversarial searches
    attain it, a random direction stays below, and every search stays inside the ball."""
    from lemmacheck.search import maximise

    gen = torch.Generator().manual_seed(10)
    Ws = [torch.randn(3, 4, 5, generator=gen, dtype=F64), torch.randn(3, 6, 4, generator=gen, dtype=F64)]
    Cs = [torch.randn(W.shape, generator=gen, dtype=F64) for W in Ws]
    r = 0.7
    sup = r * sum(C.flatten(1).norm(dim=1) for C in Cs)

    def target(Wt):
        return sum(((w - w0) * C).flatten(1).sum(1) for w, w0, C in zip(Wt, Ws, Cs))

    for method in ("gradient", "adversarial"):
        best, _found = maximise(target, Ws, r, method, gen, steps=5, norm="frobenius")
        torch.testing.assert_close(best, sup, rtol=1e-12, atol=0.0)
    rnd, _ = maximise(target, Ws, r, "random", gen, norm="frobenius")
    assert torch.all(rnd < sup)


def _context(params, args=None, inputs=None, R=3, search="none", network="", seed=0):
    from lemmacheck.context import Context

    return Context("test", params, R, torch.Generator().manual_seed(seed), args=args or {"nodes": 24},
                   inputs_spec=inputs or {"kind": "unit-sphere", "n": "n", "d": "d"}, search=search,
                   network=network)


@pytest.mark.parametrize("network", ["du2018-fc", "du2018-resnet", "du2018-cnn-resnet"])
def test_every_registered_quantity_runs_is_finite_and_depends_on_the_draws(network):
    """Smoke test over every estimator and architecture. A quantity forced to a constant (or one that ignores
    the architecture) would slip through a finiteness check, so each must also change with the seed and,
    except λ₀-only ones, differ between architectures."""
    q = paper("du2018").quantities
    from lemmacheck.registry import QUANTITIES

    params = {"m": 16, "H": 2, "n": 3, "d": 4, "c_lambda": 0.5, "R": 0.05, "kappa": 1.0, "T": 3,
              "d0": 6, "p": 2, "q": 3}
    inputs = {"kind": "unit-sphere", "n": "n", "d": "d0 * p"} if network.endswith("cnn-resnet") else None
    for name, _, _ in q.ESTIMATORS:
        entry = QUANTITIES.get(f"du2018-{name}")
        assert network in entry.networks
        a, b = (entry.obj(_context(params, inputs=inputs, search="adversarial", network=network, seed=s)).value
                for s in (0, 1))
        assert a.shape == (3,) and bool(torch.isfinite(a).all()), name
        assert not torch.equal(a, b), f"{name} does not depend on the draws"


def test_du2018_quantities_follow_the_claims_network():
    from lemmacheck.errors import EstimatorError
    from lemmacheck.registry import QUANTITIES

    params = {"m": 16, "H": 2, "n": 3, "d": 4, "c_lambda": 0.5}
    est = QUANTITIES.get("du2018-gradient-norm").obj
    fc, res = (est(_context(params, network=n)).value for n in ("du2018-fc", "du2018-resnet"))
    assert not torch.allclose(fc, res)
    with pytest.raises(EstimatorError, match="du2018-fc"):
        est(_context(params, network="zou2018"))


def test_initialisation_distribution():
    """§2.2: W^{(h)}_{ij} ~ N(0, 1) (no fan-in scaling), a_r ~ unif{−1, +1}; shapes as in the paper."""
    gen = torch.Generator().manual_seed(11)
    X = du.as_images(unit(gen, 1, 3, 5 * 4), 5, 4)
    net = du.make_net("cnn", X, m=64, H=3, act=k.softplus(), q=3)
    Ws, a = du.init(gen, 50, net, 5)
    assert [tuple(W.shape) for W in Ws] == [(50, 64, 15), (50, 64, 192), (50, 64, 192)]
    for W in Ws:
        assert abs(float(W.var()) - 1) < 5 * math.sqrt(2 / W.numel()) and abs(float(W.mean())) < 5 / math.sqrt(W.numel())
    assert set(a.unique().tolist()) == {-1.0, 1.0} and abs(float(a.mean())) < 5 / math.sqrt(a.numel())


def test_cnn_without_enough_channels_is_refused_not_computed_with_a_vanished_residual_scale():
    """q·d0 < 2p makes Assumption 5.1's λ exactly 0 for every dataset (rank ≤ q·d0): the residual scale would be 0
    and K^{(H)} = 0. make_net refuses it, and the quantities turn that into an estimator error naming the cause."""
    from lemmacheck.errors import EstimatorError
    from lemmacheck.registry import QUANTITIES

    gen = torch.Generator().manual_seed(5)
    thin = du.as_images(unit(gen, 2, 3, 2 * 6), 2, 6)  # q d0 = 6 < 2p = 12
    with pytest.raises(ValueError, match=r"q\*d0 = 3\*2 = 6 < 2p = 12"):
        du.make_net("cnn", thin, m=8, H=2, act=k.softplus(), q=3)
    edge = du.as_images(unit(gen, 2, 3, 2 * 3), 2, 3)  # q d0 = 6 = 2p: allowed (λ > 0 for generic data)
    assert bool((du.make_net("cnn", edge, m=8, H=2, act=k.softplus(), q=3).lam > 0).all())
    params = {"m": 8, "H": 2, "n": 3, "d0": 2, "p": 6, "q": 3, "c_lambda": 0.5}
    inputs = {"kind": "unit-sphere", "n": "n", "d": "d0 * p"}
    for name in ("du2018-lambda0", "du2018-max-layer-norm", "du2018-gram-least-eigenvalue-ratio"):
        with pytest.raises(EstimatorError, match="Assumption 5.1"):
            QUANTITIES.get(name).obj(_context(params, inputs=inputs, network="du2018-cnn-resnet"))


def test_parallel_data_make_residual_replicates_invalid_not_silently_degenerate():
    """A ResNet replicate whose data hold a parallel (or antiparallel) pair has λ = 0 (Assumption 4.1 fails): its
    draws are marked invalid by every quantity, never counted as holding or violating."""
    from lemmacheck.registry import QUANTITIES

    params = {"m": 8, "H": 2, "n": 3, "d": 4, "c_lambda": 0.5, "R": 0.05}
    ctx = _context(params, network="du2018-resnet")
    X = ctx.inputs()
    ctx2 = _context(params, network="du2018-resnet")
    X[0, 1] = -X[0, 0]  # replicate 0: an antiparallel pair
    ctx2.inputs = lambda: X  # type: ignore[method-assign]
    for name in ("du2018-max-layer-norm", "du2018-gradient-norm", "du2018-lambda0"):
        obs = QUANTITIES.get(name).obj(ctx2)
        assert obs.valid is not None and not bool(obs.valid[0]) and bool(obs.valid[1:].all()), name


def test_residual_nets_refuse_a_single_point_whose_lambda_is_undefined():
    gen = torch.Generator().manual_seed(6)
    X = du.as_images(unit(gen, 2, 1, 4))
    with pytest.raises(ValueError, match="n >= 2"):
        du.make_net("resnet", X, m=8, H=2, act=k.softplus())
    assert du.make_net("fc", X, m=8, H=2, act=k.softplus()).lam is None  # FC has no lambda: n = 1 is fine
