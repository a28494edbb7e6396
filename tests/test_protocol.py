"""The network protocol (lemmacheck.protocol) and the generic quantities' closed forms: forward passes against a plain
loop, backward vectors and gradient factors against autograd, the NTK Gram against an explicit Jacobian, norms from
factors against the dense matrices, one GD step against autograd, and the errors a broken network gets. Everything is
deterministic (fixed seeds, float64), compared to rounding: a wrong mask, orientation or factor fails."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from plugins import paper

import lemmacheck.builtin  # noqa: F401  (registers the generic quantities)
from lemmacheck.context import Context
from lemmacheck.errors import EstimatorError
from lemmacheck.generic import _loss, gd_trajectory, loss_gradient_factors, network_for
from lemmacheck.linalg import low_rank_spectral_norm
from lemmacheck.protocol import (
    FeedForward,
    ForwardPass,
    Network,
    check_forward,
    dense_gradients,
    frobenius_from_factors,
    gradient_factors,
    ntk_gram,
)
from lemmacheck.registry import QUANTITIES

zou = paper("zou2018").network
guo = paper("guo2024").network
du = paper("du2018").network
chatterji = paper("chatterji2021").network

TOL = 1e-11


def close(a: torch.Tensor, b: torch.Tensor, tol: float = TOL) -> bool:
    return bool(((a - b).abs() <= tol * (1 + b.abs().max())).all())


def feedforward(seed=0, R=3, d=5, widths=(7, 6, 4), k=2, act="tanh", input_map=True) -> FeedForward:
    g = torch.Generator().manual_seed(seed)
    dims = [d if not input_map else 4, *widths]
    Ws = [torch.randn(R, a, b, generator=g, dtype=torch.float64) / math.sqrt(a) for a, b in itertools.pairwise(dims)]
    head = torch.randn(R, widths[-1], k, generator=g, dtype=torch.float64)
    M = torch.randn(R, d, 4, generator=g, dtype=torch.float64) if input_map else None
    if act == "tanh":
        return FeedForward(Ws, torch.tanh, lambda z: 1 - torch.tanh(z) ** 2, head, M)
    return FeedForward(Ws, torch.relu, lambda z: (z > 0).to(z.dtype), head, M)


def zou_net(seed=0, R=3, d=5, m=6, L=3):
    Ws = zou.init(torch.Generator().manual_seed(seed), R, zou.widths(d, m, L))
    return zou.ProtocolNet(Ws)


def guo_net(seed=0, R=3, p=5, m=6, d=2, L=3, alpha=0.2):
    A, Ws, B = guo.init(torch.Generator().manual_seed(seed), R, p, m, d, L)
    return guo.ProtocolNet(A, Ws, B, alpha)


def du_net(kind="du2018-resnet", seed=0, R=3, m=6, H=3):
    """Du et al.'s FC net or ResNet through its setting's builder, for the datasets of `inputs()`."""
    ctx = Context("t", {"m": float(m), "H": float(H)}, R, torch.Generator().manual_seed(seed), network=kind)
    return du.protocol_network(ctx, inputs())


def chatterji_net(seed=0, R=3, p=5, L=2, h=0.5):
    """Chatterji et al.'s network (all L+1 layers trained: the output layer is the protocol's last, linear)."""
    ctx = Context("t", {"p": float(p), "L": float(L), "h": h}, R, torch.Generator().manual_seed(seed),
                  network="chatterji2021")
    return chatterji.protocol_network(ctx)


NETS = {
    "feedforward-tanh": lambda: feedforward(act="tanh"),
    "feedforward-relu-scalar": lambda: feedforward(act="relu", k=1, input_map=False),
    "zou2018": zou_net,
    "guo2024": guo_net,
    "du2018-fc": lambda: du_net("du2018-fc"),
    "du2018-resnet": du_net,
    "chatterji2021": chatterji_net,
}


def inputs(seed=1, R=3, n=4, d=5):
    X = torch.randn(R, n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return X / X.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("name", sorted(NETS))
def test_networks_implement_the_protocol(name):
    net = NETS[name]()
    X = inputs()
    assert isinstance(net, Network)
    fwd = net.forward(X)
    check_forward(fwd, X, name)
    L = len(net.weights)
    assert fwd.depth == L and len(fwd.outputs) == L + 1
    # x_l = σ(z_l) is the plain elementwise map of the patterns' activation; z_l from x_{l-1} and W_l
    for l in range(1, L + 1):
        W = net.weights[l - 1]
        z = fwd.outputs[l - 1] @ W if net.layout == "in-out" else fwd.outputs[l - 1] @ W.transpose(-1, -2)
        assert close(z, fwd.preacts[l - 1])


def test_feedforward_against_a_plain_loop():
    net = feedforward()
    X = inputs()
    fwd = net.forward(X)
    for r in range(X.shape[0]):
        for i in range(X.shape[1]):
            h = X[r, i] @ net.input_map[r]
            for W in net.weights:
                h = torch.tanh(h @ W[r])
            assert close(h @ net.head[r], fwd.out[r, i])


@pytest.mark.parametrize("name", sorted(NETS))
def test_gradient_factors_equal_autograd(name):
    """∂ Σ_i ⟨V_i, f(x_i)⟩ / ∂W_l from the backward vectors equals autograd, and so do the norms from factors."""
    net = NETS[name]()
    X = inputs()
    fwd = net.forward(X)
    V = torch.randn(fwd.out.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    factors = gradient_factors(net, fwd, net.backward(fwd, V))
    Ws = [W.clone().requires_grad_(True) for W in net.weights]
    auto = torch.autograd.grad((net.forward(X, Ws).out * V).sum(), Ws)
    for G, A, (P, Q) in zip(dense_gradients(factors), auto, factors):
        assert G.shape == A.shape
        assert close(G, A)
        assert close(frobenius_from_factors(P, Q), torch.linalg.matrix_norm(A))
        assert close(low_rank_spectral_norm(P, Q), torch.linalg.matrix_norm(A, ord=2))


@pytest.mark.parametrize("loss", ["square", "logistic"])
@pytest.mark.parametrize("name", ["feedforward-relu-scalar", "zou2018", "guo2024", "du2018-resnet", "chatterji2021"])
def test_loss_gradients_equal_autograd(name, loss):
    net = NETS[name]()
    X = inputs()
    if loss == "logistic" and net.forward(X).out.shape[-1] != 1:
        with pytest.raises(EstimatorError, match="scalar output"):
            loss_gradient_factors(net, X, torch.ones(X.shape[:2], dtype=X.dtype), loss)
        return
    y = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64).expand(X.shape[0], -1)
    value, factors, _ = loss_gradient_factors(net, X, y, loss)
    Ws = [W.clone().requires_grad_(True) for W in net.weights]
    v2, _ = _loss(loss, net.forward(X, Ws).out, y)
    auto = torch.autograd.grad(v2.sum(), Ws)
    assert close(value, v2.detach())
    for G, A in zip(dense_gradients(factors), auto):
        assert close(G, A)


def test_zou_logistic_gradient_equals_the_papers_closed_form():
    net = zou_net()
    X = inputs()
    y = torch.tensor([1.0, 1.0, -1.0, 1.0], dtype=torch.float64).expand(3, -1)
    _, factors, _ = loss_gradient_factors(net, X, y, "logistic")
    grads, _, _ = zou.loss_gradients(net.weights, X, y)
    for G, Z in zip(dense_gradients(factors), grads):
        assert close(G, Z, 1e-13)


def test_chatterji_logistic_gradient_equals_the_papers_closed_form():
    """All L+1 layers' gradients of J = (1/n) Σ log(1 + e^{-y f}), and the collective norm ||∇J|| of Lemmas 4.3/4.5."""
    net = chatterji_net()
    X = inputs()
    y = torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64).expand(3, -1)
    _, factors, _ = loss_gradient_factors(net, X, y, "logistic")
    grads, _, _ = chatterji.loss_gradients(net.weights, X, y, net.act)
    assert len(factors) == len(grads) == 3
    for G, C in zip(dense_gradients(factors), grads):
        assert close(G, C, 1e-13)
    total = torch.stack([frobenius_from_factors(P, Q) for P, Q in factors], -1).pow(2).sum(-1).sqrt()
    assert close(total, chatterji.collective_norm(grads), 1e-13)


@pytest.mark.parametrize("name", ["feedforward-tanh", "zou2018", "guo2024", "du2018-resnet", "chatterji2021"])
def test_ntk_gram_equals_the_jacobian_gram(name):
    """K_l[(i,a),(j,b)] = ⟨∂f_a(x_i)/∂W_l, ∂f_b(x_j)/∂W_l⟩ from an explicit autograd Jacobian, replicate 0."""
    net = NETS[name]()
    X = inputs()
    Ks = ntk_gram(net, X)
    _R, n, k = net.forward(X).out.shape
    for l, K in enumerate(Ks):
        rows = []
        for i in range(n):
            for a in range(k):
                Ws = [W.clone().requires_grad_(True) for W in net.weights]
                (g,) = torch.autograd.grad(net.forward(X, Ws).out[0, i, a], [Ws[l]])
                rows.append(g[0].flatten())
        J = torch.stack(rows)
        assert close(K[0], J @ J.T)
    assert bool((torch.linalg.eigvalsh(sum(Ks))[..., 0] > -1e-10).all())  # a Gram: positive semidefinite


def test_one_gd_step_equals_autograd():
    net = zou_net()
    X = inputs()
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64).expand(3, -1)
    seen = {}
    losses, disp = gd_trajectory(net, X, y, "square", 0.05, 1, on_step=lambda k, Ws: seen.setdefault(k, Ws))
    Ws = [W.clone().requires_grad_(True) for W in net.weights]
    v, _ = _loss("square", net.forward(X, Ws).out, y)
    auto = torch.autograd.grad(v.sum(), Ws)
    expect = [W.detach() - 0.05 * A for W, A in zip(Ws, auto)]
    for a, b in zip(seen[1], expect):
        assert close(a, b)
    step = torch.stack([(0.05 * A).flatten(1).norm(dim=-1) for A in auto], -1).amax(-1)
    assert close(disp, step)
    assert close(losses[:, 0], v.detach())


def test_broken_forward_is_named():
    X = inputs()
    fwd = ForwardPass([X], [X], [], X[..., 0])
    with pytest.raises(EstimatorError, match=r"mynet: .*patterns.*out has shape"):
        check_forward(fwd, X, "mynet")


def test_setting_without_a_protocol_network_is_named():
    ctx = Context("demo/claim", {"m": 4.0}, 2, torch.Generator().manual_seed(0), network="scalar")
    with pytest.raises(EstimatorError, match="setting 'scalar' provides no protocol network"):
        network_for(ctx)
    with pytest.raises(EstimatorError, match="no protocol network"):
        QUANTITIES.get("generic-weight-spectral-norm").obj(ctx)


def test_unknown_argument_value_is_named():
    ctx = Context("demo/claim", {"m": 6.0, "L": 2.0, "d": 4.0, "n": 3.0}, 2, torch.Generator().manual_seed(0),
                  args={"norm": "nuclear"}, inputs_spec={"kind": "unit-sphere", "n": "n", "d": "d"},
                  network="zou2018")
    with pytest.raises(EstimatorError, match=r"args.norm = 'nuclear': one of frobenius, spectral"):
        QUANTITIES.get("generic-loss-gradient-norm").obj(ctx)


def test_du_convolutional_resnet_is_refused_by_name():
    ctx = Context("demo/cnn", {"m": 4.0, "H": 2.0}, 2, torch.Generator().manual_seed(0), network="du2018-cnn-resnet")
    with pytest.raises(EstimatorError, match="convolutional ResNet does not implement the network protocol"):
        du.protocol_network(ctx, inputs())


def _ctx(params, network, args=None, search="none", seed=0, R=4):
    return Context("t", {k: float(v) for k, v in params.items()}, R, torch.Generator().manual_seed(seed),
                   args=args or {}, inputs_spec={"kind": "unit-sphere", "n": "n", "d": "d"}, search=search,
                   network=network)


@pytest.mark.parametrize("tau", [0.05, 0.3])
def test_pattern_changes_greedy_is_the_exact_one_layer_supremum(tau):
    """One trained layer: a perturbation with ||D||_2 <= tau moves z_i = x_i W by at most tau ||x_i||, so input i can
    flip at most the k_i smallest |z_{i,j}| with sum of squares <= (tau ||x_i||)^2; the greedy flip attains it."""
    params = {"m": 40, "L": 1, "n": 3, "d": 6, "tau": tau}
    q = QUANTITIES.get("generic-pattern-changes").obj
    value = q(_ctx(params, "zou2018", {"draws": 0}, "gradient")).value
    c = _ctx(params, "zou2018")
    X = c.inputs()
    net = zou.protocol_network(c, X)
    z = net.forward(X).preacts[0]  # (R, n, m)
    need = (z.abs().sort(-1).values * (1 + 1e-9)) ** 2
    k = (need.cumsum(-1) <= (tau * X.norm(dim=-1, keepdim=True)) ** 2).sum(-1).amax(-1).to(value.dtype)
    assert torch.equal(value, k)
    assert bool((k > 0).all())
    random = q(_ctx(params, "zou2018", {"draws": 5}, "random")).value  # same networks, then random perturbations
    assert bool((random <= value).all())  # none beats the supremum
