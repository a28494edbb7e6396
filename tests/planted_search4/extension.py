"""Planted "for all W" quantities (test-only extension, tests/test_quantified_search.py); none is a real lemma. The
estimator draws its weights and perturbation through ctx.weights / ctx.perturbation and contains no search: the
engine's projected ascent (search.search_quantified) moves them when the claim's search asks for it.

For a bias-free ReLU stack h_l = relu(h_{l-1} W_l) with ||W_l||_2 <= 1 and ||U_l||_2 <= ||W_l||_2 / d, telescoping
gives ||h_L(W + U) - h_L(W)|| <= (1 + 1/d)^L - 1 for a unit input, with equality on aligned weights (rank-one,
non-negative, each layer reading the previous one's direction, the input along the first, so every ReLU is the
identity) and U_l = W_l / d. The planted false claim states L / d instead, smaller for every L >= 2; random weights
and perturbations stay far below both."""

import torch

from lemmacheck.context import Observation
from lemmacheck.registry import NETWORKS, QUANTITIES


@QUANTITIES.register("p4-perturbed-output-gap", "max_i ||h_L(W + U)(x_i) - h_L(W)(x_i)|| for a bias-free ReLU stack "
                     "of L layers of width m on unit inputs, W and U drawn through ctx.weights / ctx.perturbation",
                     networks=("scalar",))
def perturbed_output_gap(ctx):
    X = ctx.inputs()  # (R, n, k)
    L, m = ctx.i("L"), ctx.i("m")
    shapes = [(X.shape[-1], m)] + [(m, m)] * (L - 1)
    Ws = ctx.weights(shapes, layout="in-out")
    Us = ctx.perturbation(Ws)

    def forward(weights):
        h = X
        for W in weights:
            h = torch.relu(h @ W)
        return h

    gap = (forward([W + U for W, U in zip(Ws, Us)]) - forward(Ws)).norm(dim=-1)
    return Observation(gap.amax(-1))


@QUANTITIES.register("p4-half", "m / 2 (exact): against floor(m/2) it is false at odd m only", networks=("scalar",))
def half(ctx):
    return Observation(torch.full((ctx.replicates,), ctx.p("m") / 2, dtype=ctx.dtype))


@QUANTITIES.register("p4-l1-gap", "||a||_1 - ||a||_2 / sqrt(n) for a drawn by ctx.coefficients(n): at least "
                     "(1 - 1/sqrt(n)) ||a||_2 > 0 for every nonzero a (n >= 2), and 0 at a = 0", networks=("scalar",))
def l1_gap(ctx):
    n = ctx.i("n")
    a = ctx.coefficients(n)
    return Observation(a.abs().sum(-1) - a.norm(dim=-1) / n ** 0.5)


@QUANTITIES.register("p4-relu-kernel-min-eig", "least eigenvalue of the Gram matrix K_ij = E_w relu(<w, x_i>) "
                     "relu(<w, x_j>) = (sin t + (pi - t) cos t) / (2 pi), t the angle of x_i, x_j, on the dataset: 0 "
                     "on a regular hexagon (x_0 - x_1 + x_2 = 0 and relu(a) - relu(-a) = a)", networks=("scalar",))
def relu_kernel_min_eig(ctx):
    X = ctx.inputs()  # (R, n, d)
    G = (X @ X.transpose(-1, -2)).clamp(-1, 1)
    t = torch.arccos(G)
    K = (torch.sin(t) + (torch.pi - t) * G) / (2 * torch.pi)
    return Observation(torch.linalg.eigvalsh(K)[:, 0], method="eigvalsh")


def protocol_network(ctx, X):
    """R bias-free ReLU stacks of L layers of width m (a protocol FeedForward network), Gaussian N(0, 2/m) weights:
    the initialisation a claim that declares inputs.weights replaces by its ball's draw (generic.network_for)."""
    from lemmacheck.protocol import FeedForward

    L, m, d = ctx.i("L"), ctx.i("m"), X.shape[-1]
    shapes = [(d, m)] + [(m, m)] * (L - 1)
    Ws = [ctx.randn(ctx.replicates, a, b) * (2 / b) ** 0.5 for a, b in shapes]
    return FeedForward(Ws, torch.relu, lambda z: (z > 0).to(z.dtype), torch.ones(m, dtype=X.dtype) / m ** 0.5)


NETWORKS.register("p4-relu-stack", "a bias-free ReLU stack on unit inputs, a protocol network (planted)")(__name__)


@QUANTITIES.register("p4-protocol-output-norm", "max_i ||x_{L,i}||, the last hidden layer's output, from the protocol "
                     "network's forward pass (generic.network_for): at most prod_l ||W_l||_2, equal on aligned weights",
                     networks=("p4-relu-stack",))
def protocol_output_norm(ctx):
    from lemmacheck.generic import network_for

    X = ctx.inputs()
    net = network_for(ctx, X)
    return Observation(net.forward(X).outputs[-1].norm(dim=-1).amax(-1), method="forward pass")
