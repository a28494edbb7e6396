"""zou2018 training-outcome (Theorems 4.1/4.5, Corollaries 4.4/4.7 at feasible widths): the loss and errors that
(S)GD reaches, checked against an independent forward pass at K = 0 and against its own trajectory."""

from __future__ import annotations

import torch
from plugins import paper

from lemmacheck.context import Context
from lemmacheck.registry import QUANTITIES

net = paper("zou2018").network

SPEC = {"kind": "unit-sphere", "n": "n", "d": "d", "separation": "0.5", "geometry": "duplicated-directions",
        "labels": "+-+-+-"}


def _run(K: int, seed: int = 0, **args) -> tuple:
    ctx = Context("t", {"m": 16, "L": 2, "n": 6, "d": 8, "eta0": 1.0, "K": K}, 12, torch.Generator().manual_seed(seed),
                  args=args, inputs_spec=SPEC)
    return QUANTITIES.get("training-outcome").obj(ctx)


def test_zero_steps_is_the_loss_at_initialisation():
    gen = torch.Generator().manual_seed(0)
    ctx = Context("t", {"m": 16, "L": 2, "n": 6, "d": 8}, 12, gen, inputs_spec=SPEC)
    X = ctx.inputs()  # the same draws, in the same order, as the quantity makes: inputs, then weights
    Ws = net.init(gen, 12, net.widths(8, 16, 2, False), torch.float64)
    y = torch.tensor([1.0, -1, 1, -1, 1, -1], dtype=torch.float64)
    expected = net.logistic(y * net.forward(Ws, X).out).mean(-1)
    torch.testing.assert_close(_run(0).value, expected)


def test_gradient_descent_lowers_the_loss_and_along_takes_the_best_iterate():
    start, end, best = _run(0).value, _run(60).value, _run(60, along=True).value
    assert bool((end < start).all())
    assert bool((best <= end + 1e-15).all())
    errors = _run(60, statistic="errors").value
    assert bool(((errors >= 0) & (errors <= 6) & (errors == errors.round())).all())
