"""The zou2018 setting against plain, one-network-at-a-time implementations of the paper's formulas."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from plugins import paper
from scipy import stats

net = paper("zou2018").network



def reference_forward(Ws, x):
    """Paper §3 for ONE network and ONE input, written from the formula: x_l = Σ_l W_l^T x_{l-1}."""
    xs, zs = [x], []
    for W in Ws:
        z = W.T @ xs[-1]
        Sigma = torch.diag((z > 0).to(z.dtype))
        zs.append(z)
        xs.append(Sigma @ W.T @ xs[-1])
    m_L = Ws[-1].shape[1]
    v = torch.tensor([1.0] * (m_L // 2) + [-1.0] * (m_L // 2), dtype=x.dtype)
    return xs, zs, v @ xs[-1]


def _setup(R=3, n=4, dims=(5, 8, 6, 4), seed=0):
    g = torch.Generator().manual_seed(seed)
    Ws = net.init(g, R, list(dims))
    X = torch.randn(R, n, dims[0], generator=g, dtype=torch.float64)
    return Ws, X


def test_forward_matches_reference():
    Ws, X = _setup()
    fwd = net.forward(Ws, X)
    for r in range(X.shape[0]):
        for i in range(X.shape[1]):
            xs, zs, y = reference_forward([W[r] for W in Ws], X[r, i])
            for l in range(len(Ws)):
                torch.testing.assert_close(fwd.x[l + 1][r, i], xs[l + 1], rtol=1e-13, atol=1e-14)
                torch.testing.assert_close(fwd.z[l][r, i], zs[l], rtol=1e-13, atol=1e-14)
            torch.testing.assert_close(fwd.out[r, i], y, rtol=1e-13, atol=1e-14)


def test_output_identity_at_every_layer():
    """ŷ_i = v^T (prod_{r=l}^L Σ_r W_r^T) x_{l-1,i} for every l (paper §3): check via backward vectors."""
    Ws, X = _setup(seed=1)
    fwd = net.forward(Ws, X)
    bs = net.backward_vectors(Ws, fwd)
    us = net.input_gradients(Ws, bs)
    for l in range(len(Ws)):
        torch.testing.assert_close((us[l] * fwd.x[l]).sum(-1), fwd.out, rtol=1e-12, atol=1e-12)


def test_backward_vectors_and_loss_gradient_match_autograd():
    Ws, X = _setup(seed=2)
    g = torch.Generator().manual_seed(3)
    y = (torch.randint(0, 2, (X.shape[0], X.shape[1]), generator=g) * 2 - 1).to(torch.float64)
    grads, _, fwd = net.loss_gradients(Ws, X, y)
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    loss = net.logistic(y * net.forward(Wr, X).out).mean(-1).sum()
    auto = torch.autograd.grad(loss, Wr)
    for a, b in zip(grads, auto):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-13)
    # ∇_{W_l} ŷ_i = x_{l-1,i} b_{l,i}^T
    bs = net.backward_vectors(Ws, fwd)
    auto_f = torch.autograd.grad(net.forward(Wr, X).out[0, 1], Wr)
    for l, a in enumerate(auto_f):
        torch.testing.assert_close(a[0], torch.outer(fwd.x[l][0, 1], bs[l][0, 1]), rtol=1e-10, atol=1e-13)


def test_minibatch_gradient_matches_autograd():
    Ws, X = _setup(seed=4)
    y = torch.ones(X.shape[0], X.shape[1], dtype=torch.float64)
    batch = torch.tensor([[1, 0, 1, 0]] * X.shape[0], dtype=torch.float64)
    grads, _, _ = net.loss_gradients(Ws, X, y, batch=batch)
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    loss = (net.logistic(y * net.forward(Wr, X).out) * batch).sum(-1).div(2).sum()
    for a, b in zip(grads, torch.autograd.grad(loss, Wr)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-13)


def test_init_is_fan_out():
    """Entries of W_l ~ N(0, 2/m_l) with m_l the number of COLUMNS (fan-out), even when d != m_1.
    Variance z-test on 2e5 entries at false-alarm rate 1e-6 (|z| > 4.89)."""
    g = torch.Generator().manual_seed(5)
    Ws = net.init(g, 4, [500, 100, 200])
    for W, m_l in zip(Ws, (100, 200)):
        w = W.flatten().numpy()
        var = w.var()
        se = (2 / m_l) * math.sqrt(2 / len(w))
        assert abs(var - 2 / m_l) / se < 4.89
        assert abs(w.mean()) / math.sqrt(2 / m_l / len(w)) < 4.89


def test_output_vector_half_half_and_odd_width_rejected():
    v = net.output_vector(6)
    assert v.tolist() == [1, 1, 1, -1, -1, -1]
    with pytest.raises(ValueError, match="even"):
        net.widths(4, 7, 2)
    assert net.widths(4, 8, 3, alternate=True) == [4, 8, 16, 8]


def test_conditional_sampler_matches_direct_sampling():
    """Gaussian-conditioning sampler vs full forward passes: two-sample KS tests on ||x_{l,i}|| at every
    layer, each at false-alarm rate 1e-4 (5 layers x 2 inputs = 10 tests: family-wise rate <= 1e-3).
    Power check: the same test does detect a 10% mis-scaled output norm (see the next test)."""
    R, n, d, m, L = 3000, 2, 6, 16, 3
    g = torch.Generator().manual_seed(6)
    X = torch.nn.functional.normalize(torch.randn(1, n, d, generator=g, dtype=torch.float64), dim=-1).expand(R, n, d)
    dims = [d] + [m] * L
    direct = [x.norm(dim=-1) for x in net.forward(net.init(g, R, dims), X).x]
    cond = net.conditional_layer_norms(g, X, dims)
    for l in range(1, L + 1):
        for i in range(n):
            p = stats.ks_2samp(direct[l][:, i].numpy(), cond[l][:, i].numpy()).pvalue
            assert p > 1e-4, (l, i, p)


def test_ks_has_power_against_wrong_variance():
    R, n, d, m = 3000, 1, 6, 16
    g = torch.Generator().manual_seed(7)
    X = torch.nn.functional.normalize(torch.randn(1, n, d, generator=g, dtype=torch.float64), dim=-1).expand(R, n, d)
    dims = [d, m, m, m]
    direct = net.forward(net.init(g, R, dims), X).x[3].norm(dim=-1)[:, 0] * 1.1
    cond = net.conditional_layer_norms(g, X, dims)[3][:, 0]
    assert stats.ks_2samp(direct.numpy(), cond.numpy()).pvalue < 1e-4


def test_norm_increment_mean_and_variance():
    """Reference fact: ||x_l||²/||x_{l-1}||² has mean 1 and variance 5/m_l (catalogue §2.3, Lemma A.1).
    z-tests at false-alarm rate 1e-6."""
    R, m = 20000, 32
    g = torch.Generator().manual_seed(8)
    X = torch.nn.functional.normalize(torch.randn(R, 1, 5, generator=g, dtype=torch.float64), dim=-1)
    norms = net.conditional_layer_norms(g, X, [5, m])
    ratio = (norms[1][:, 0] ** 2).numpy()
    assert abs(ratio.mean() - 1) / math.sqrt(5 / m / R) < 4.89
    # variance of the sample variance for this (scaled chi-like) law: estimated from the sample's 4th moment
    c = ratio - ratio.mean()
    se_var = math.sqrt((np.mean(c ** 4) - np.mean(c ** 2) ** 2) / R)
    assert abs(ratio.var() - 5 / m) / se_var < 4.89


def _whole_layer_sampler(gen, X, dims):
    """The Gaussian-conditioning sampler as it was written before its chunked CPU path: every layer one torch.randn
    of (R, n, m_l), then A @ E, relu, norms and the next Gram over the whole layer. (xs, zs, norms)."""
    from lemmacheck.linalg import psd_sqrt

    xs, zs, norms = [X], [], [X.norm(dim=-1)]
    h = X
    for m_l in dims[1:]:
        G = h @ h.transpose(-1, -2)
        A = psd_sqrt(G) * math.sqrt(2.0 / m_l)
        E = torch.randn(*G.shape[:-1], m_l, generator=gen, dtype=X.dtype)
        z = A @ E
        h = torch.relu(z)
        zs.append(z)
        xs.append(h)
        norms.append(h.norm(dim=-1))
    return xs, zs, norms


@pytest.mark.parametrize("chunk", [None, 64])
def test_chunked_conditional_sampler_is_the_whole_layer_sampler(monkeypatch, chunk):
    """The CPU path draws each layer in chunks of replicates (torch.randn per chunk of 16k numbers, products and
    norms into slices): the same draws and values, bit for bit, as one pass over the whole layer, for the three
    entry points, and the generator left in the same state. Shapes: several chunks with a short last one, a chunk
    of one replicate, alternate widths, n m_l not a multiple of 16 (whole layers), an expanded input batch; with
    `chunk` = 64 entries even the small shapes run in many chunks."""
    if chunk is not None:
        monkeypatch.setattr(net, "CHUNK_ENTRIES", chunk)
    cases = [(37, 4, 5, [64, 128, 64]), (5, 16, 8, [2048, 2048]), (6, 3, 4, [10, 12]), (9, 2, 3, [16, 32, 16]),
             (4, 5, 16, [96, 32]), (7, 4, 6, [4096, 4096]), (1100, 1, 3, [64, 16, 64])]
    chunked = 0
    for k, (R, n, d, hidden) in enumerate(cases):
        dims = [d] + hidden
        g = torch.Generator().manual_seed(k)
        for X in (torch.nn.functional.normalize(torch.randn(R, n, d, generator=g, dtype=torch.float64), dim=-1),
                  torch.nn.functional.normalize(torch.randn(1, n, d, generator=g, dtype=torch.float64),
                                                dim=-1).expand(R, n, d)):
            chunked += sum(net._replicates_per_chunk(X @ X.transpose(-1, -2), m) < R for m in hidden)
            ref_xs, ref_zs, ref_norms = _whole_layer_sampler(g0 := torch.Generator().manual_seed(50 + k), X, dims)
            after = torch.rand(4, generator=g0, dtype=torch.float64)
            for name in ("conditional_layer_norms", "conditional_forward", "conditional_last_layer"):
                g1 = torch.Generator().manual_seed(50 + k)
                out = getattr(net, name)(g1, X, dims)
                if name == "conditional_layer_norms":
                    pairs = zip(out, ref_norms, strict=True)
                elif name == "conditional_forward":
                    pairs = zip([*out[0], *out[1]], [*ref_xs, *ref_zs], strict=True)
                else:
                    pairs = [(out, ref_xs[-1])]
                assert all(torch.equal(a, b) for a, b in pairs), (name, R, n, dims)
                assert torch.equal(torch.rand(4, generator=g1, dtype=torch.float64), after), (name, R, n, dims)
    assert chunked == (12 if chunk is None else 30)  # layers that took the chunked path
    Z = torch.zeros(40, 1, 3, dtype=torch.float64)  # G = 0, so A = 0 and every layer is 0
    ref = _whole_layer_sampler(torch.Generator().manual_seed(1), Z, [3, 64, 64])[2]
    assert all(map(torch.equal, net.conditional_layer_norms(torch.Generator().manual_seed(1), Z, [3, 64, 64]), ref))
    assert net._replicates_per_chunk(torch.zeros(6, 3, 3, dtype=torch.float64), 10) == 6  # 30 numbers a replicate


@given(st.integers(0, 2**31 - 1), st.floats(0.01, 100.0))
def test_positive_homogeneity(seed, c):
    """ReLU nets without biases are positively 1-homogeneous in the input: f(cx) = c f(x), same patterns."""
    Ws, X = _setup(R=2, n=3, seed=seed % 1000)
    a, b = net.forward(Ws, X), net.forward(Ws, c * X)
    torch.testing.assert_close(b.out, c * a.out, rtol=1e-10, atol=1e-12)
    for l in range(1, len(Ws) + 1):
        assert torch.equal(a.mask(l), b.mask(l))
