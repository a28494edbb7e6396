"""Planted quantities for the hunt tests (test-only extension): each makes a false claim that fails only on a
structured dataset, only for one label pattern, only at the smallest depth or only in one perturbation
direction, and one true claim; none is a real lemma."""

import torch

from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES
from lemmacheck.search import maximise


@QUANTITIES.register("planted-sum-norm", "||sum_i x_i|| / sqrt(n): near 0 only on balanced datasets (antipodal, "
                     "polygon, simplex)", networks=("scalar",))
def sum_norm(ctx):
    X = ctx.inputs()
    return Observation(X.sum(1).norm(dim=-1) / X.shape[1] ** 0.5)


def _pattern(n):
    # The one failing labelling: + - - + - - ...
    return torch.tensor([1.0 if i % 3 == 0 else -1.0 for i in range(n)], dtype=torch.float64)


@QUANTITIES.register("planted-pattern-agreement", "#{i : y_i = p_i} for the fixed pattern p = (+,-,-,+,-,-,...)",
                     networks=("scalar",))
def pattern_agreement(ctx):
    n = ctx.i("n")
    y = ctx.labels(n)
    return Observation((y == _pattern(n)).sum(-1).to(torch.float64))


@QUANTITIES.register("planted-depth", "1 - 1/(L+1), but 1.5 at L = 1 (plus noise of size 1e-6)", networks=("scalar",))
def depth(ctx):
    L = ctx.i("L")
    base = 1.5 if L == 1 else 1 - 1 / (L + 1)
    return Observation(base + 1e-6 * torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64))


@QUANTITIES.register("planted-direction", "sup over ||D||_2 <= tau of <D, e_1 e_1^T>_F / tau, by the claim's search: "
                     "1, reached only along e_1 e_1^T", networks=("scalar",))
def direction(ctx):
    m, tau = ctx.i("m"), ctx.p("tau")
    W = torch.zeros(ctx.replicates, m, m, dtype=torch.float64)

    def target(Ws):
        return Ws[0][:, 0, 0] / tau

    value, found = maximise(target, [W], tau, ctx.search, ctx.generator)
    return Observation(value, extras={"found_by": found})


@QUANTITIES.register("planted-label-correlation", "|sum_i y_i <x_i, x_1>| / n <= 1 (true: Cauchy-Schwarz)",
                     networks=("scalar",))
def label_correlation(ctx):
    X = ctx.inputs()
    y = ctx.labels(X.shape[1], X)
    return Observation((y * (X @ X[:, :1].transpose(1, 2)).squeeze(-1)).sum(-1).abs() / X.shape[1])


@QUANTITIES.register("planted-coin", "a coin that is 1 with probability 0.05, or 0.6 when ||sum x_i|| < 0.1 "
                     "(args.everywhere = 0.05: that rate on every dataset)", networks=("scalar",))
def coin(ctx):
    X = ctx.inputs()
    balanced = X.sum(1).norm(dim=-1) < 0.1
    p = torch.where(balanced, 0.6, 0.05) if not ctx.arg("everywhere") else torch.full_like(balanced, 0.05, dtype=torch.float64)
    return Observation((torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64) < p).to(torch.float64))
