"""Infinite-width kernels: quadrature against closed forms and node doubling, recursions against wide networks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from plugins import paper

from lemmacheck import kernels as k

du = paper("du2018").network
duk = paper("du2018").kernels

F64 = torch.float64


def unit(gen: torch.Generator, *shape: int) -> torch.Tensor:
    x = torch.randn(*shape, generator=gen, dtype=F64)
    return x / x.norm(dim=-1, keepdim=True)


def random_cov(gen: torch.Generator, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random 2x2 covariances: variances in [0.05, 3], correlations in (-1, 1) including near ±1."""
    A = 0.05 + 3 * torch.rand(size, generator=gen, dtype=F64)
    B = 0.05 + 3 * torch.rand(size, generator=gen, dtype=F64)
    rho = torch.cat([2 * torch.rand(size - 4, generator=gen, dtype=F64) - 1,
                     torch.tensor([0.999999, -0.999999, 0.0, 1.0], dtype=F64)])
    return A, B, rho * (A * B).sqrt()


# ---------------------------------------------------------------------------------------------- quadrature

def test_gauss_hermite_moments_exact():
    t, w = k.gauss_hermite(40)
    assert float(w.sum()) == pytest.approx(1.0, abs=1e-14) and t.shape == (40,)
    for j in range(1, 20):  # E z^{2j} = (2j-1)!!, exact for polynomials of degree < 2Q
        dfact = float(np.prod(np.arange(2 * j - 1, 0, -2, dtype=np.float64)))
        assert float((w * t ** (2 * j)).sum()) == pytest.approx(dfact, rel=1e-11)
        assert abs(float((w * t ** (2 * j - 1)).sum())) < 1e-10 * dfact


def test_erf_quadrature_matches_closed_form_to_machine_precision():
    gen = torch.Generator().manual_seed(0)
    A, B, C = random_cov(gen, 200)
    act = k.erf()
    for deriv, f in ((False, act.f), (True, act.df)):
        quad = k.expect_2d(f, f, A, B, C, Q=160)
        exact = k.erf_kernel(deriv, A, B, C)
        assert torch.allclose(quad, exact, rtol=0, atol=1e-12), float((quad - exact).abs().max())


def test_relu_quadrature_converges_to_arccos_kernels():
    """ReLU is not smooth, so Gauss–Hermite converges only algebraically; it must still approach the
    arc-cosine closed forms, and the error must shrink as the node count grows."""
    gen = torch.Generator().manual_seed(1)
    A, B, C = random_cov(gen, 30)
    act = k.relu()
    errs = {}
    for Q in (32, 128, 512):
        e1 = (k.expect_2d(act.f, act.f, A, B, C, Q) - k.arccos_kernel(1, A, B, C)).abs().max()
        e0 = (k.expect_2d(act.df, act.df, A, B, C, Q) - k.arccos_kernel(0, A, B, C)).abs().max()
        errs[Q] = (float(e1), float(e0))
    assert errs[512][0] < 2e-3 and errs[512][1] < 3e-2
    assert errs[512][0] < errs[128][0] < errs[32][0]
    assert errs[512][1] < errs[128][1] < errs[32][1]


def test_leaky_relu_closed_form_limits_and_quadrature():
    gen = torch.Generator().manual_seed(2)
    A, B, C = random_cov(gen, 40)
    assert torch.allclose(k.leaky_relu_kernel(1.0, False, A, B, C), C, atol=1e-14)  # α = 1: linear
    assert torch.allclose(k.leaky_relu_kernel(1.0, True, A, B, C), torch.ones_like(C), atol=1e-14)
    assert torch.allclose(k.leaky_relu_kernel(0.0, False, A, B, C), k.arccos_kernel(1, A, B, C), atol=1e-14)
    act = k.leaky_relu(0.2)
    quad = k.expect_2d(act.f, act.f, A, B, C, Q=512)
    assert float((quad - k.leaky_relu_kernel(0.2, False, A, B, C)).abs().max()) < 2e-3


@pytest.mark.parametrize("name", ["softplus", "tanh", "sigmoid", "swish", "gelu"])
def test_node_doubling_for_analytic_activations(name):
    gen = torch.Generator().manual_seed(3)
    X = unit(gen, 1, 4, 7)
    act = k.get_activation(name)
    eng = k.Engine(act, Q=k.DEFAULT_NODES, check=True)
    K = duk.fc_kernels(X, act, 3, eng)
    assert eng.max_change < (1e-10 if name == "tanh" else 1e-12), eng.max_change  # tanh: poles at ±iπ/2
    K_coarse = duk.fc_kernels(X, act, 3, k.Engine(act, Q=16))  # and 16 nodes is visibly worse
    assert float((K_coarse.ntk - K.ntk).abs().max()) > 1e-10


def test_c_sigma_values():
    assert k.c_sigma(k.relu()) == 2.0
    assert k.c_sigma(k.softplus()) == pytest.approx(1.0855, abs=1e-4)  # catalogue reference value
    assert k.c_sigma(k.erf()) == pytest.approx(math.pi / (2 * math.asin(2 / 3)), rel=1e-13)
    t, w = k.gauss_hermite(200)
    assert k.c_sigma(k.tanh()) == pytest.approx(1 / float((w * torch.tanh(t) ** 2).sum()), rel=1e-12)


# ----------------------------------------------------------------------------------------------- recursions

def test_fc_recursion_erf_quadrature_equals_closed_form():
    gen = torch.Generator().manual_seed(4)
    X = unit(gen, 3, 6, 5)
    act = k.erf()
    quad = duk.fc_kernels(X, act, 4, k.Engine(act, method="quadrature"))
    exact = duk.fc_kernels(X, act, 4, k.Engine(act, method="closed-form"))
    for a, b in zip(quad.layer, exact.layer):
        assert torch.allclose(a, b, atol=1e-12)
    assert torch.allclose(quad.ntk, exact.ntk, atol=1e-12)
    assert torch.allclose(quad.lambda0, exact.lambda0, atol=1e-12)
    for h in range(1, 4):  # unit inputs stay unit: K^{(h)}_ii = 1 for h <= H-1
        assert torch.allclose(torch.diagonal(exact.layer[h], dim1=-2, dim2=-1), torch.ones(3, 6, dtype=F64))


def test_fc_recursion_relu_engine_matches_independent_arccos_recursion():
    gen = torch.Generator().manual_seed(5)
    X = unit(gen, 2, 5, 8)
    Ks, ntk = duk.relu_fc_kernels_closed_form(X, 3)
    res = duk.fc_kernels(X, k.relu(), 3)  # auto: closed form
    assert torch.allclose(res.ntk, ntk, atol=1e-14)
    for a, b in zip(res.layer[:3], Ks):
        assert torch.allclose(a, b, atol=1e-14)
    quad = duk.fc_kernels(X, k.relu(), 3, k.Engine(k.relu(), Q=256, method="quadrature"))
    assert float((quad.ntk - ntk).abs().max()) < 0.03  # algebraic convergence (see the previous tests)
    assert float((quad.layer[2] - Ks[2]).abs().max()) < 2e-3


def test_resnet_cross_term_readings_coincide_for_unit_inputs_and_p1_cnn_equals_resnet():
    gen = torch.Generator().manual_seed(6)
    X = unit(gen, 2, 5, 6)
    act = k.softplus()
    s = torch.tensor([0.1, 0.3], dtype=F64)
    a = duk.resnet_kernels(X, act, 4, s, cross="paired")
    b = duk.resnet_kernels(X, act, 4, s, cross="printed")
    c = duk.cnn_kernels(X.unsqueeze(-1), act, 4, s, q=1)
    assert torch.allclose(a.ntk, b.ntk, atol=1e-15) and torch.allclose(a.ntk, c.ntk, atol=0)
    # Non-unit inputs separate the two readings: the printed one is not symmetric in how b pairs.
    Xs = X * torch.linspace(0.5, 1.5, 5, dtype=F64)[:, None]
    a2 = duk.resnet_kernels(Xs, act, 4, s, cross="paired")
    b2 = duk.resnet_kernels(Xs, act, 4, s, cross="printed")
    assert float((a2.layer[3] - b2.layer[3]).abs().max()) > 1e-6


def test_patch_gram_matches_explicit_patches():
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 4, 5, generator=gen, dtype=F64)  # (R, n, C, p)
    for q in (1, 3, 5):
        P = du.patches(x, q)
        pts = P.permute(0, 1, 3, 2).reshape(2, 15, -1)
        assert torch.allclose(duk.patch_gram(du.point_gram(x), 3, 5, q), pts @ pts.transpose(-1, -2), atol=1e-13)


def test_block_lambda_min():
    gen = torch.Generator().manual_seed(8)
    M = torch.randn(3, 6, 6, generator=gen, dtype=F64)
    K = M @ M.transpose(-1, -2)
    ref = torch.full((3,), math.inf, dtype=F64)
    for i in range(6):
        for j in range(6):
            if i != j:
                blk = K[:, [i, j]][:, :, [i, j]]
                ref = torch.minimum(ref, torch.linalg.eigvalsh(blk)[:, 0])
    assert torch.allclose(k.pair_block_lambda_min(K), ref, atol=1e-12)
    assert torch.allclose(k.block_lambda_min(K, 6, 1), ref, atol=1e-12)
    ref2 = torch.full((3,), math.inf, dtype=F64)
    for i in range(3):
        for j in range(3):
            if i != j:
                idx = [2 * i, 2 * i + 1, 2 * j, 2 * j + 1]
                ref2 = torch.minimum(ref2, torch.linalg.eigvalsh(K[:, idx][:, :, idx])[:, 0])
    assert torch.allclose(k.block_lambda_min(K, 3, 2), ref2, atol=1e-12)


# --------------------------------------------------------------------- wide finite networks vs the kernels

def _zscores(G: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Entrywise (mean_R G - K) / standard error over R independent wide networks."""
    R = G.shape[0]
    return (G.mean(0) - K) / (G.std(0) / math.sqrt(R))


@pytest.mark.parametrize("kind,H", [("fc", 3), ("resnet", 1), ("resnet", 3), ("cnn", 2)])
def test_infinite_width_kernel_matches_wide_network_gram(kind, H):
    """CLT: over R = 48 independent networks of width m = 4096 on one dataset, mean_R G^{(H)}(0) has standard
    error ~ sd/√R per entry, while its bias is O(1/m) (≈ 0.15 standard errors here). So every entry's z-score
    must be O(1): we require max |z| ≤ 4.5 over the n(n+1)/2 entries (a N(0,1) max over 10 entries exceeds
    4.5 with probability < 1e-4). Layer Gram matrices K^{(h)} and the mean vectors b^{(h)} are checked the same
    way. The residual scale is made large (s = c_λ λ^{3/2}/H with λ := 1, c_λ = 0.99) so that the residual
    cross terms matter; the limit holds for any s. The printed CNN aggregation (all q² pairs) gives |z| > 100."""
    gen = torch.Generator().manual_seed(11)
    n, d0, p, q = 4, 6, 3, 3
    R, m = 48, 4096
    if kind == "cnn":
        X = du.as_images(unit(gen, 1, n, d0 * p), d0, p)
    else:
        X = du.as_images(unit(gen, 1, n, 8))
        q = 1
    lam = torch.ones(1, dtype=F64)
    net1 = du.make_net(kind, X, m=m, H=H, act=k.softplus(), c_lambda=0.99, q=q, lam=lam)
    Xr = X.expand(R, *X.shape[1:]).contiguous()
    net = du.DuNet(kind, m, H, k.softplus(), 0.99, lam.expand(R), q)
    smp = du.sample_init(gen, net, Xr)
    K = du.limit_kernels(net1, X)
    z = _zscores(smp.gram_last, K.ntk[0])
    assert float(z.abs().max()) < 4.5, z
    for h in range(1, H + 1):  # every layer's Gram matrix too (Theorem D.1's K^{(h)}) and b^{(h)}
        zh = _zscores(du.point_gram(smp.x[h]), K.layer[h][0])
        assert float(zh.abs().max()) < 4.5, (h, zh)
        if kind != "fc":
            bh = smp.x[h].sum(dim=2).reshape(R, -1) / math.sqrt(m)  # m^{-1/2} 1ᵀ x_i^{(h)} per point (i, l)
            zb = (bh.mean(0) - K.b[h][0]) / (bh.std(0) / math.sqrt(R))
            assert float(zb.abs().max()) < 4.5, (h, zb)
    if kind == "cnn":
        printed = du.limit_kernels(net1, X, aggregation="all-pairs")
        assert float(_zscores(smp.gram_last, printed.ntk[0]).abs().max()) > 100


def test_wide_network_full_forward_matches_kernel():
    """Same check through the full forward pass (weights materialised), FC, m = 512, H = 2."""
    gen = torch.Generator().manual_seed(12)
    X = du.as_images(unit(gen, 1, 4, 6))
    R, m = 32, 512
    net = du.make_net("fc", X, m=m, H=2, act=k.softplus())
    Xr = X.expand(R, *X.shape[1:]).contiguous()
    Ws, a = du.init(gen, R, net, 6)
    G = du.last_layer_gram(net, Ws, a, Xr)
    K = du.limit_kernels(net, X)
    assert float(_zscores(G, K.ntk[0]).abs().max()) < 4.5


# ------------------------------------------------------------------------------------------- properties

@settings(max_examples=15, deadline=None, derandomize=True)
@given(n=st.integers(2, 6), d=st.integers(2, 6), seed=st.integers(0, 2**31 - 1),
       scale=st.floats(0.1, 1.0), name=st.sampled_from(["softplus", "tanh", "erf", "gelu"]))
def test_expected_product_matrix_is_psd_and_symmetric(n, d, seed, scale, name):
    """E[σ(u_a)σ(u_b)] is a Gram matrix of functions in L²(N(0, K)): symmetric PSD, whatever K ⪰ 0.
    (Variances up to ~6 here: at variance ~16, tanh' is narrower than the node spacing of 32 nodes and the
    quadrature visibly loses PSD-ness, which is why quantities re-check with twice the nodes.)"""
    gen = torch.Generator().manual_seed(seed)
    M = torch.randn(n, d, generator=gen, dtype=F64) * scale
    K = M @ M.T
    act = k.get_activation(name)
    for deriv in (False, True):
        E = k.Engine(act, Q=64).pair(K, derivative=deriv)
        assert torch.allclose(E, E.T, atol=0)
        assert float(torch.linalg.eigvalsh(E)[0]) > -1e-10 * max(1.0, float(E.abs().max()))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(c=st.floats(0.01, 100.0), seed=st.integers(0, 2**31 - 1))
def test_arccos_homogeneity(c, seed):
    """k₁ is 1-homogeneous and k₀ 0-homogeneous in the covariance scale (ReLU is positively homogeneous)."""
    gen = torch.Generator().manual_seed(seed)
    A, B, C = random_cov(gen, 10)
    assert torch.allclose(k.arccos_kernel(1, c * A, c * B, c * C), c * k.arccos_kernel(1, A, B, C), rtol=1e-12)
    assert torch.allclose(k.arccos_kernel(0, c * A, c * B, c * C), k.arccos_kernel(0, A, B, C), rtol=1e-12)


def test_activation_registry_errors():
    with pytest.raises(ValueError, match="unknown activation"):
        k.get_activation("nope")
    with pytest.raises(ValueError, match="h > 0"):
        k.huberized_relu(0.0)
