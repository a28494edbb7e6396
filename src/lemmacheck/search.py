"""How "for all" is approached: perturbation searches within the per-layer spectral ball ||Δ_l||_2 ≤ τ.

A search returns the largest value of a target it found: a lower estimate of the supremum. It can refute
an upper bound on the supremum, never prove it; claims name the search they used and reports repeat it.

    random       Δ_l = τ G_l / ||G_l||_2 with G_l Gaussian (catalogue P0)
    gradient     Δ_l = τ g_l / ||g_l||_2 with g_l = ∂target/∂W_l at W: the linearised worst direction
    adversarial  projected gradient ascent on the target from the best of the above, projecting every
                 step back onto the ball by clipping singular values (catalogue P2)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .linalg import clip_spectral, spectral_norm

Target = Callable[[list[torch.Tensor]], torch.Tensor]  # perturbed weights -> per-replicate value (R,)

SEARCH_ORDER = {"none": 0, "exact": 0, "random": 1, "gradient": 2, "adversarial": 3, "exhaustive": 3}


def _scale_to(D: torch.Tensor, tau: float) -> torch.Tensor:
    norm, _ = spectral_norm(D)
    return D * (tau / norm.clamp_min(1e-300)).reshape(-1, 1, 1)


def random_perturbation(gen: torch.Generator, Ws: list[torch.Tensor], tau: float) -> list[torch.Tensor]:
    return [_scale_to(torch.randn(W.shape, generator=gen, dtype=W.dtype), tau) for W in Ws]


def _grad(target: Target, Ws: list[torch.Tensor], Ds: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    Ds = [D.detach().requires_grad_(True) for D in Ds]
    val = target([W + D for W, D in zip(Ws, Ds)])
    grads = torch.autograd.grad(val.sum(), Ds, allow_unused=True)
    return val.detach(), [torch.zeros_like(D) if g is None else g for D, g in zip(Ds, grads)]


def maximise(target: Target, Ws: list[torch.Tensor], tau: float, method: str, gen: torch.Generator,
             *, steps: int = 30, restarts: int = 1, lr: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """Largest target value found within the ball, per replicate; also returns which search found it
    (0 = random, 1 = gradient, 2 = adversarial), so reports can say what refuted a bound."""
    level = SEARCH_ORDER[method]
    if level == 0:
        with torch.no_grad():
            return target(Ws), torch.zeros(Ws[0].shape[0])
    best = torch.full((Ws[0].shape[0],), -torch.inf, dtype=Ws[0].dtype)
    found = torch.zeros_like(best)
    starts: list[list[torch.Tensor]] = []
    for _ in range(restarts):
        Ds = random_perturbation(gen, Ws, tau)
        with torch.no_grad():
            val = target([W + D for W, D in zip(Ws, Ds)])
        better = val > best
        best = torch.where(better, val, best)
        starts.append(Ds)
    if level >= 2:
        zero = [torch.zeros_like(W) for W in Ws]
        _, g = _grad(target, Ws, zero)
        Ds = [_scale_to(gi + 1e-30 * torch.randn(gi.shape, generator=gen, dtype=gi.dtype), tau) for gi in g]
        with torch.no_grad():
            val = target([W + D for W, D in zip(Ws, Ds)])
        better = val > best
        best = torch.where(better, val, best)
        found = torch.where(better, torch.ones_like(found), found)
        starts.append(Ds)
    if level >= 3:
        for Ds in starts:
            for _ in range(steps):
                val, g = _grad(target, Ws, Ds)
                better = val > best
                best = torch.where(better, val, best)
                found = torch.where(better, torch.full_like(found, 2), found)
                # Normalised ascent step, then projection back onto the spectral ball.
                Ds = [clip_spectral(D + lr * tau * gi / gi.flatten(1).norm(dim=1).clamp_min(1e-300).reshape(-1, 1, 1), tau)
                      for D, gi in zip(Ds, g)]
            with torch.no_grad():
                val = target([W + D for W, D in zip(Ws, Ds)])
            better = val > best
            best = torch.where(better, val, best)
            found = torch.where(better, torch.full_like(found, 2), found)
    return best, found
