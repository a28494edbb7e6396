"""Benchmarks (pytest-benchmark), each a ratio against a straightforward implementation in the same run.

Run with `pytest tests/test_benchmarks.py --benchmark-enable --benchmark-group-by=group`; in the default
test run they execute once as correctness checks (both implementations must agree). No test asserts a time.
"""

import math

import pytest
import torch
from references import dense_gradient_descent

from lemmacheck import kernels
from lemmacheck.nets import du2018
from lemmacheck.nets import zou2018 as net


def _inputs(R, n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(R, n, d, generator=g, dtype=torch.float64), dim=-1)


def _full_norms(X, dims, seed):
    g = torch.Generator().manual_seed(seed)
    return [x.norm(dim=-1) for x in net.forward(net.init(g, X.shape[0], dims), X).x]


def _conditional_norms(X, dims, seed):
    return net.conditional_layer_norms(torch.Generator().manual_seed(seed), X, dims)


@pytest.mark.benchmark(group="layer norms at init, m=1024 L=3 n=8 R=4")
@pytest.mark.parametrize("impl", ["full-forward", "gaussian-conditioning"])
def test_bench_layer_norms(benchmark, impl):
    X, dims = _inputs(4, 8, 64), [64, 1024, 1024, 1024]
    fn = _full_norms if impl == "full-forward" else _conditional_norms
    norms = benchmark(fn, X, dims, 1)
    # Same law, different draws: both give ||x_L|| near 1 (E||x_l||² = ||x_0||² under He init).
    assert abs(norms[-1].pow(2).mean().item() - 1) < 0.3


def _loop_forward(Ws, X):
    return torch.stack([net.forward([W[r:r + 1] for W in Ws], X[r:r + 1]).out[0] for r in range(X.shape[0])])


@pytest.mark.benchmark(group="forward, 64 replicates of m=64 L=4 n=16")
@pytest.mark.parametrize("impl", ["loop-over-replicates", "batched"])
def test_bench_batched_forward(benchmark, impl):
    g = torch.Generator().manual_seed(2)
    X = _inputs(64, 16, 32)
    Ws = net.init(g, 64, [32, 64, 64, 64, 64])
    fn = _loop_forward if impl == "loop-over-replicates" else (lambda W, x: net.forward(W, x).out)
    out = benchmark(fn, Ws, X)
    torch.testing.assert_close(out, net.forward(Ws, X).out, rtol=1e-12, atol=1e-12)


def _autograd_grads(Ws, X, y):
    Wr = [W.clone().requires_grad_(True) for W in Ws]
    loss = net.logistic(y * net.forward(Wr, X).out).mean(-1).sum()
    return torch.autograd.grad(loss, Wr)


@pytest.mark.benchmark(group="loss gradients, m=256 L=3 n=32 R=8")
@pytest.mark.parametrize("impl", ["autograd", "closed-form"])
def test_bench_loss_gradients(benchmark, impl):
    g = torch.Generator().manual_seed(3)
    X = _inputs(8, 32, 16)
    Ws = net.init(g, 8, [16, 256, 256, 256])
    y = torch.ones(8, 32, dtype=torch.float64)
    fn = _autograd_grads if impl == "autograd" else (lambda W, x, t: net.loss_gradients(W, x, t)[0])
    grads = benchmark(fn, Ws, X, y)
    ref = _autograd_grads(Ws, X, y)
    for a, b in zip(grads, ref):
        assert math.isclose(a.norm().item(), b.norm().item(), rel_tol=1e-10)


@pytest.mark.benchmark(group="du2018 ResNet GD, 10 steps, m=512 H=4 n=4 R=8")
@pytest.mark.parametrize("impl", ["dense-textbook", "factored-in-place"])
def test_bench_du2018_gradient_descent(benchmark, impl):
    X = du2018.as_images(_inputs(8, 4, 8, seed=4))
    dn = du2018.make_net("resnet", X, m=512, H=4, act=kernels.get_activation("softplus"))
    Ws, a = du2018.init(torch.Generator().manual_seed(5), 8, dn, X.shape[2])
    y = torch.ones(8, 4, dtype=torch.float64)
    if impl == "dense-textbook":
        loss = benchmark(lambda: dense_gradient_descent(dn, Ws, a, X, y, 0.1, 10)["loss"])
    else:
        loss = benchmark(lambda: du2018.gradient_descent(dn, Ws, a, X, y, 0.1, 10, track_movement=False).loss)
    torch.testing.assert_close(loss, dense_gradient_descent(dn, Ws, a, X, y, 0.1, 10)["loss"], rtol=1e-10,
                               atol=0)
