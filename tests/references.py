"""Straightforward implementations kept as oracles for tests and as baselines for benchmarks.

Each one is the textbook form of something src/ does faster; tests check that both agree.
"""

from __future__ import annotations

import torch

from lemmacheck.nets import du2018 as du


def dense_gradient_descent(net: du.DuNet, Ws: list[torch.Tensor], a: torch.Tensor, X: torch.Tensor,
                           y: torch.Tensor, eta: float, steps: int) -> dict[str, torch.Tensor]:
    """Du et al. full-batch GD written out: dense ∂L/∂W^{(h)} each step, W ← W − η ∂L/∂W, every norm recomputed
    from the m×m tensors."""
    W0, W = Ws, [w.clone() for w in Ws]
    rec: dict[str, list[torch.Tensor]] = {k: [] for k in ("loss", "movement", "grad_norm", "step", "residual")}
    for k in range(steps + 1):
        grads, fwd, _ = du.loss_gradients(net, W, a, X, y)
        rec["loss"].append(du.loss(fwd.out, y))
        rec["residual"].append((fwd.out - y).norm(dim=-1))
        rec["movement"].append(torch.stack([(w - w0).flatten(1).norm(dim=1) for w, w0 in zip(W, W0)], -1))
        rec["grad_norm"].append(torch.stack([g.flatten(1).norm(dim=1) for g in grads], -1))
        if k == steps:
            break
        new = [w - eta * g for w, g in zip(W, grads)]
        rec["step"].append(torch.stack([(u - w).flatten(1).norm(dim=1) for u, w in zip(new, W)], -1))
        W = new
    out = {k: torch.stack(v, 1) for k, v in rec.items()}
    out["weights"] = W
    return out
