"""How "for all" is approached: perturbation searches within per-layer balls ||Δ_l|| ≤ τ, in spectral norm
(the usual "||W̃_l − W_l||_2 ≤ τ") or Frobenius norm (a trajectory's "||W(k) − W(0)||_F ≤ √m R").

A search returns the largest value of a target it found: a lower estimate of the supremum. It can refute
an upper bound on the supremum, never prove it; claims name the search they used and reports repeat it.

    random       Δ_l = τ G_l / ||G_l||_2 with G_l Gaussian (catalogue P0)
    gradient     Δ_l = τ g_l / ||g_l||_2 with g_l = ∂target/∂W_l at W: the linearised worst direction
    adversarial  projected gradient ascent on the target from the best of the above, projecting every
                 step back onto the ball (clipping singular values, or rescaling for Frobenius balls)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch

from .linalg import clip_spectral, spectral_norm

Target = Callable[[list[torch.Tensor]], torch.Tensor]  # perturbed weights -> per-replicate value (R,)

SEARCH_ORDER = {"none": 0, "exact": 0, "random": 1, "gradient": 2, "adversarial": 3, "exhaustive": 3}


def _scale_to(D: torch.Tensor, tau: float) -> torch.Tensor:
    norm, _ = spectral_norm(D)
    return D * (tau / norm.clamp_min(1e-300)).reshape(-1, 1, 1)


def _fro_scale(D: torch.Tensor, radius: float) -> torch.Tensor:
    return D * (radius / D.flatten(1).norm(dim=1).clamp_min(1e-300)).reshape(-1, 1, 1)


def _fro_project(D: torch.Tensor, radius: float) -> torch.Tensor:
    nrm = D.flatten(1).norm(dim=1).reshape(-1, 1, 1)
    return D * torch.clamp(radius / nrm.clamp_min(1e-300), max=1.0)


# norm -> (scale a direction onto the sphere, project onto the ball)
BALLS = {"spectral": (_scale_to, clip_spectral), "frobenius": (_fro_scale, _fro_project)}


def random_perturbation(gen: torch.Generator, Ws: list[torch.Tensor], tau: float) -> list[torch.Tensor]:
    return [_scale_to(torch.randn(W.shape, generator=gen, dtype=W.dtype), tau) for W in Ws]


def _grad(target: Target, Ws: list[torch.Tensor], Ds: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    Ds = [D.detach().requires_grad_(True) for D in Ds]
    with torch.enable_grad():
        val = target([W + D for W, D in zip(Ws, Ds)])
        grads = torch.autograd.grad(val.sum(), Ds, allow_unused=True)
    return val.detach(), [torch.zeros_like(D) if g is None else g for D, g in zip(Ds, grads)]


Stepper = Callable[[list[torch.Tensor], list[torch.Tensor]], list[torch.Tensor]]


def maximise(target: Target, Ws: list[torch.Tensor], tau: float, method: str, gen: torch.Generator,
             *, steps: int = 30, restarts: int = 1, lr: float = 0.3,
             norm: str = "spectral", stepper: Callable[[], Stepper] | None = None,
             scale: Callable[[torch.Tensor, float], torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Largest target value found within the per-layer ball of radius tau in `norm` ("spectral" or
    "frobenius"), per replicate; also returns which search found it (0 = random, 1 = gradient,
    2 = adversarial), so reports can say what refuted a bound.

    `stepper()` makes, for each ascent start, the function that takes (Ds, ascent steps) to the projected next Ds;
    the default projects every layer with the ball's projection. A stepper that keeps state along one start
    (rank-one tracked projections, say) must return the same projection to rounding. `scale(G, tau)` replaces
    the ball's scaling of the starts onto the sphere (a structured one must equal it to rounding)."""
    default_scale, project = BALLS[norm]
    scale = scale or default_scale
    if stepper is None:
        stepper = lambda: lambda Ds, moves: [project(D + s, tau) for D, s in zip(Ds, moves)]
    level = SEARCH_ORDER[method]
    if level == 0:
        with torch.no_grad():
            return target(Ws), torch.zeros(Ws[0].shape[0])
    best = torch.full((Ws[0].shape[0],), -torch.inf, dtype=Ws[0].dtype)
    found = torch.zeros_like(best)
    starts: list[list[torch.Tensor]] = []
    for _ in range(restarts):
        Ds = [scale(torch.randn(W.shape, generator=gen, dtype=W.dtype), tau) for W in Ws]
        with torch.no_grad():
            val = target([W + D for W, D in zip(Ws, Ds)])
        better = val > best
        best = torch.where(better, val, best)
        starts.append(Ds)
    if level >= 2:
        zero = [torch.zeros_like(W) for W in Ws]
        _, g = _grad(target, Ws, zero)
        Ds = [scale(gi + 1e-30 * torch.randn(gi.shape, generator=gen, dtype=gi.dtype), tau) for gi in g]
        with torch.no_grad():
            val = target([W + D for W, D in zip(Ws, Ds)])
        better = val > best
        best = torch.where(better, val, best)
        found = torch.where(better, torch.ones_like(found), found)
        starts.append(Ds)
    if level >= 3:
        for Ds in starts:
            step = stepper()
            for _ in range(steps):
                val, g = _grad(target, Ws, Ds)
                better = val > best
                best = torch.where(better, val, best)
                found = torch.where(better, torch.full_like(found, 2), found)
                # Normalised ascent step, then projection back onto the ball.
                Ds = step(Ds, [lr * tau * gi / gi.flatten(1).norm(dim=1).clamp_min(1e-300).reshape(-1, 1, 1)
                               for gi in g])
            with torch.no_grad():
                val = target([W + D for W, D in zip(Ws, Ds)])
            better = val > best
            best = torch.where(better, val, best)
            found = torch.where(better, torch.full_like(found, 2), found)
    return best, found


def greedy_flip_vector(g: torch.Tensor, scale: torch.Tensor, budget: float, margin: float = 1e-9) -> torch.Tensor:
    """Exact greedy sign-flip adversary (sign-pattern lemmas' worst case): u with ||u|| <= 1 such that g + budget·scale·u changes the sign (≥ 0 vs < 0) of as
    many coordinates of g as possible: the |g_j| are spent in increasing order while Σ u_j² ≤ 1.
    g (..., m), scale (...,) > 0 the factor by which u reaches g (||h_{l-1}|| for W' = budget·u ĥᵀ)."""
    need = g.abs() * (1 + margin) / (budget * scale.unsqueeze(-1)).clamp_min(1e-300)
    need = torch.where(g >= 0, need + 1e-300, need)  # g_j ≥ 0 must go strictly below 0
    order = need.argsort(dim=-1)
    sorted_need = need.gather(-1, order)
    fits = (sorted_need ** 2).cumsum(-1) <= 1.0
    mag = torch.zeros_like(g).scatter(-1, order, sorted_need * fits)
    return torch.where(g >= 0, -mag, mag)


# ------------------------------------------------------------------- moving a dataset on the sphere (hunts)


def project_separated(X: torch.Tensor, separation: float, iters: int = 100) -> torch.Tensor:
    """Unit rows of X (n, d), pushed apart until every pair is at least `separation` apart: each pair closer
    than that moves symmetrically along its chord to (slightly over) the separation, then rows are renormalised;
    repeated while a pair is short. Returns the projected copy; callers check `min_separation` (a crowded
    configuration may not converge)."""
    X = X.detach() / X.detach().norm(dim=-1, keepdim=True)
    if separation <= 0 or X.shape[0] < 2:
        return X
    target = separation * (1 + 1e-9)
    for _ in range(iters):
        diff = X.unsqueeze(1) - X.unsqueeze(0)  # (n, n, d): x_i - x_j
        dist = diff.norm(dim=-1) + torch.eye(X.shape[0], dtype=X.dtype) * 1e9
        short = dist < target
        if not bool(short.any()):
            break
        push = torch.where(short, (target - dist) / 2 / dist.clamp_min(1e-300), torch.zeros_like(dist))
        X = X + (push.unsqueeze(-1) * diff).sum(1)
        X = X / X.norm(dim=-1, keepdim=True)
    return X


def move_points(objective: Callable[[torch.Tensor], torch.Tensor], X0: torch.Tensor, separation: float,
                *, steps: int = 30, lr: float = 0.1) -> tuple[torch.Tensor, float]:
    """Projected gradient ascent of a differentiable objective (a scalar of the dataset) over unit-norm datasets
    with pairwise separation: the gradient's tangent part moves each point along the sphere, then
    `project_separated` restores the constraint; a step that cannot be projected is halved. Returns the best
    dataset and objective value seen (the start included)."""
    X = X0.detach().clone()
    best_X, best = X, float(objective(X).detach())
    step = lr
    for _ in range(steps):
        Xg = X.detach().requires_grad_(True)
        with torch.enable_grad():
            val = objective(Xg)
            (g,) = torch.autograd.grad(val, Xg)
        g = g - (g * X).sum(-1, keepdim=True) * X  # tangent to the sphere at each point
        gn = float(g.norm())
        if not gn or not math.isfinite(gn):
            break
        cand = project_separated(X + step * g / gn, separation)
        n = cand.shape[0]
        ok = n < 2 or separation <= 0 or float(
            (torch.cdist(cand, cand) + torch.eye(n, dtype=cand.dtype) * 9).min()) >= separation * (1 - 1e-12)
        if not ok:
            step /= 2
            continue
        X = cand
        v = float(objective(X).detach())
        if v > best:
            best_X, best = X, v
    return best_X, best


# ------------------------------------------------------------------ "for all W": any estimator's quantified matrices

QUANTIFIED_STEPS = 40  # projected ascent steps over what ctx.weights / ctx.perturbation returned ("adversarial")
QUANTIFIED_LR = 0.2  # each step moves a layer by this fraction of its ball's radius (of ||W_l|| when unconstrained)


def search_quantified(estimator: Callable[[Any], Any], ctx: Any, sign: int, *, steps: int | None = None,
                      lr: float = QUANTIFIED_LR) -> Any:
    """Run the estimator; when it drew weights or a perturbation through the context (ctx.weights,
    ctx.perturbation) and the claim's search asks for more than random draws, climb from that draw by projected
    gradient ascent on sign * value (sign +1 for an upper bound, -1 for a lower one; autograd through whatever
    the estimator computes, a protocol network's `forward` included), each step normalised per layer, then
    projected: the weights onto their ball, the perturbation onto its ball measured on the current weights
    (relative radii). Every evaluation replays the estimator's own draws (inputs, labels, networks) from the
    shard's generator state (common random numbers), so only the searched matrices move. Per replicate, the
    largest value seen where the draw's hypotheses hold is returned, with extras["search"] saying what found it
    (0 the draw, 1 the gradient step, 2 the ascent). "gradient" takes one step, "adversarial" QUANTIFIED_STEPS.
    A value that does not depend differentiably on the matrices is returned as drawn (the method says so)."""
    from .inputs import ball_radius, into_ball, matrix_norm

    gen = ctx.generator
    state = gen.get_state()
    obs = estimator(ctx)
    level = SEARCH_ORDER.get(ctx.search, 0)
    roles = [r for r in ("weights", "perturbation") if r in ctx.quantified]
    if level < 2 or not roles or sign == 0:
        return obs
    steps = (QUANTIFIED_STEPS if level >= 3 else 1) if steps is None else steps
    balls = {r: dict(ctx.balls[r]) for r in roles}

    def evaluate(mats: dict[str, list[torch.Tensor]], grad: bool) -> tuple[Any, dict[str, list[torch.Tensor]]]:
        g = torch.Generator(gen.device)
        g.set_state(state)
        run = copy.copy(ctx)
        run.generator, run.quantified, run.balls = g, {}, {}
        run.overrides = {r: [M.detach().requires_grad_(grad) for M in ms] for r, ms in mats.items()}
        with torch.enable_grad() if grad else torch.no_grad():
            out = estimator(run)
        if "perturbation" in run.balls:
            balls["perturbation"]["base"] = run.balls["perturbation"]["base"]
        return out, run.overrides

    def score(o: Any) -> torch.Tensor:
        v = sign * o.value.detach().to(torch.float64).reshape(-1)
        ok = torch.ones_like(v, dtype=torch.bool) if o.valid is None else o.valid.reshape(-1).bool()
        return torch.where(ok & torch.isfinite(v), v, torch.full_like(v, -torch.inf))

    best, best_obs = score(obs), obs
    found = torch.zeros_like(best)
    value, valid = obs.value.detach().clone(), None if obs.valid is None else obs.valid.clone()
    extras = {k: v.detach().clone() for k, v in obs.extras.items()}

    def keep(o: Any, tag: float) -> None:
        nonlocal best, value, valid
        s = score(o)
        better = s > best
        if not bool(better.any()):
            return
        best = torch.where(better, s, best)
        found[better] = tag
        value = torch.where(better.to(value.device), o.value.detach().to(value.dtype), value)
        if valid is not None and o.valid is not None:
            valid = torch.where(better.to(valid.device), o.valid, valid)
        for k, v in o.extras.items():
            if k in extras and extras[k].shape == v.shape:
                extras[k] = torch.where(better.to(v.device), v.detach().to(extras[k].dtype), extras[k])

    def project(mats: dict[str, list[torch.Tensor]]) -> dict[str, list[torch.Tensor]]:
        out = dict(mats)
        if "weights" in out and balls["weights"]["radii"] is not None:
            b = balls["weights"]
            out["weights"] = [into_ball(W, ball_radius(W, r, b["norm"]), b["norm"])
                              for W, r in zip(out["weights"], b["radii"])]
        if "perturbation" in out:
            b = balls["perturbation"]
            base = out["weights"] if "weights" in out and b.get("relative") else b["base"]
            radii = [ball_radius(W, r, b["norm"], b.get("relative", False)) for W, r in zip(base, b["radii"])]
            out["perturbation"] = [into_ball(U, rad, b["norm"]) for U, rad in zip(out["perturbation"], radii)]
        return out

    def size(role: str, i: int, M: torch.Tensor) -> torch.Tensor:
        b = balls[role]
        if role == "weights":
            r = b["radii"]
            return matrix_norm(M, "frobenius") if r is None else ball_radius(M, r[i], b["norm"])
        return ball_radius(b["base"][i], b["radii"][i], b["norm"], b.get("relative", False))

    mats = {r: [M.detach().clone() for M in ctx.quantified[r]] for r in roles}
    differentiable = True
    for k in range(steps + 1):
        o, leaves = evaluate(mats, grad=k < steps)
        if k:
            keep(o, 1.0 if k == 1 else 2.0)
        if k == steps:
            break
        flat = [M for r in roles for M in leaves[r]]
        if not o.value.requires_grad:
            differentiable = False
            break
        grads = torch.autograd.grad((sign * o.value).sum(), flat, allow_unused=True)
        it = iter(grads)
        moved = {}
        for r in roles:
            moved[r] = []
            for i, M in enumerate(leaves[r]):
                gi = next(it)
                M = M.detach()
                if gi is not None:
                    gn = gi.flatten(1).norm(dim=1).clamp_min(1e-300).reshape(-1, 1, 1)
                    M = M + lr * size(r, i, M).reshape(-1, 1, 1) * gi / gn
                moved[r].append(M)
        mats = project(moved)
    method = best_obs.method
    what = "+".join(roles)
    method = (f"{method}; " if method else "") + (
        f"{ctx.search} search over {what}: {steps} projected ascent step(s)" if differentiable
        else f"{ctx.search} search over {what} not run (the value is not differentiable in them)")
    extras["search"] = found
    return type(obs)(value, valid, extras, method)


def config_search(declared: str, pinned: dict[str, Any] | None) -> str:
    """The search that produced one configuration's draws: a hunted or corpus configuration's pinned search (a hunt
    runs a random-search claim with the adversarial one, hunt.ESCALATE), else the claim's declared one."""
    return (pinned or {}).get("search") or declared


def searches_used(declared: str, pins: list[dict[str, Any] | None]) -> list[str]:
    """Every search that produced a claim's configurations (config_search), weakest first: what a report names."""
    used = {config_search(declared, p) for p in pins} or {declared}
    return sorted(used, key=lambda s: (SEARCH_ORDER.get(s, 9), s))
