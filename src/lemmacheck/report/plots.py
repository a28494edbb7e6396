"""The three plots of a claim page: estimate against bound across the sweep, slack ECDF, implied constant.

Each returns (svg, legend_html, caption) or None when there is nothing to draw.

Drawn as hand-written SVG rather than with matplotlib's SVG backend, measured: for the same
estimate plot matplotlib 3.11 wrote 14-30 KB (fonts as text / as paths) against 4-5 KB here, took 0.4-0.6 s a
plot plus seconds of import (a full report has two plots for each of 300+ claims), needs 170 MB of compiled
dependencies, and has no per-marker hover text, which these plots use for every configuration's parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..stats import ecdf
from ..verdicts import ConfigResult
from . import svg as S
from .data import ClaimView

MAX_ECDF_POINTS = 400  # per curve: pages stay small whatever the replicate count


def sweep_axis(configs: list[ConfigResult], names: list[str]) -> str | None:
    """The swept parameter with the most distinct values (first declared wins ties); None if none varies."""
    best, count = None, 1
    for k in names:
        n = len({c.params.get(k) for c in configs})
        if n > count:
            best, count = k, n
    return best


def _groups(configs: list[ConfigResult], x: str | None, names: list[str]) -> tuple[list[str], dict[int, int]]:
    """Configurations sharing every other varying parameter form one series."""
    others = [k for k in names if k != x and len({c.params.get(k) for c in configs}) > 1]
    keys: list[tuple] = []
    labels: list[str] = []
    member: dict[int, int] = {}
    for c in configs:
        key = tuple(c.params.get(k) for k in others)
        if key not in keys:
            keys.append(key)
            labels.append(", ".join(f"{k} = {S.fmt(float(v), 4)}" for k, v in zip(others, key)) or "all")
        member[c.index] = keys.index(key)
    return labels, member


def _color(g: int) -> str:
    return S.PALETTE[g % len(S.PALETTE)]


def _params_text(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={S.fmt(float(v), 6)}" for k, v in p.items())


def _regime_fn(view: ClaimView) -> Callable[..., Any] | None:
    claim = view.claim
    assert claim is not None and claim.check is not None
    req = claim.check.requires
    if req is None:
        return None
    try:
        import sympy

        sym = req.sym.subs({sympy.Symbol(k): v for k, v in claim.check.regime_constants.items()})
        names = sorted(str(s) for s in sym.free_symbols)
        fn = sympy.lambdify([sympy.Symbol(n) for n in names], sym, "math")

        def holds(params: dict[str, float]) -> bool:
            return bool(fn(*[params[n] for n in names]))

        return holds
    except Exception:  # noqa: BLE001  (no boundary line is better than no plot)
        return None


def _boundaries(view: ClaimView, x: str, series: list[dict[str, float]], lo: float, hi: float, log: bool
                ) -> tuple[list[tuple[float, int]], list[tuple[float, float]]]:
    """Where each series crosses the regime boundary along x, and the x-intervals out of regime for all."""
    holds = _regime_fn(view)
    if holds is None or not (hi > lo):
        return [], []
    n = 241
    grid = np.geomspace(lo, hi, n) if log else np.linspace(lo, hi, n)
    crossings: list[tuple[float, int]] = []
    all_out = np.ones(n, bool)
    for g, params in enumerate(series):
        try:
            inside = np.array([holds({**params, x: float(v)}) for v in grid])
        except Exception:  # noqa: BLE001
            return [], []
        all_out &= ~inside
        for j in np.flatnonzero(inside[1:] != inside[:-1]):
            a, b = float(grid[j]), float(grid[j + 1])
            ia = inside[j]
            for _ in range(40):  # bisection to pixel precision and beyond
                mid = math.sqrt(a * b) if log else (a + b) / 2
                try:
                    im = holds({**params, x: mid})
                except Exception:  # noqa: BLE001
                    break
                if im == ia:
                    a = mid
                else:
                    b = mid
            crossings.append(((a + b) / 2 if not log else math.sqrt(a * b), g))
    shade: list[tuple[float, float]] = []
    j = 0
    while j < n:
        if all_out[j]:
            k = j
            while k + 1 < n and all_out[k + 1]:
                k += 1
            x0 = lo if j == 0 else float(grid[j])
            x1 = hi if k == n - 1 else float(grid[k])
            for cx, _ in crossings:  # snap the edges onto the exact crossings
                if j > 0 and abs(cx - x0) <= abs(float(grid[j] - grid[j - 1])):
                    x0 = cx
                if k < n - 1 and abs(cx - x1) <= abs(float(grid[k + 1] - grid[k])):
                    x1 = cx
            shade.append((x0, x1))
            j = k + 1
        else:
            j += 1
    return crossings, shade


def estimate_plot(view: ClaimView) -> tuple[str, str, str] | None:
    claim, res = view.claim, view.res
    if claim is None or res is None or claim.check is None:
        return None
    cfgs = [c for c in res.configs if c.index in view.data and len(view.data[c.index].values)]
    if not cfgs:
        return None
    names = list(claim.params)
    x = sweep_axis(cfgs, names)
    labels, member = _groups(cfgs, x, names)
    xv = {c.index: (float(c.params[x]) if x else float(c.index)) for c in cfgs}
    stats = {}
    for c in cfgs:
        v = view.data[c.index].values
        stats[c.index] = (float(np.min(v)), float(np.median(v)), float(np.max(v)))
    # A probabilistic statement is about a tail: P(X <= b) >= 1 - delta holds exactly when the (1 - delta)
    # quantile of X is <= b (for a lower bound, the delta quantile >= b). Mark that quantile per configuration.
    tail = {}
    if claim.mode == "probabilistic":
        lower = claim.check.relation in (">=", ">")
        for c in cfgs:
            if 0 < c.delta < 1:
                tail[c.index] = float(np.quantile(view.data[c.index].values, c.delta if lower else 1 - c.delta))
    ys = ([s for c in cfgs for s in stats[c.index]] + [c.bound for c in cfgs if math.isfinite(c.bound)]
          + list(tail.values()))
    xs = list(xv.values())
    xlog = bool(x) and S.wants_log(xs)
    ylog = S.wants_log(ys)
    f = S.frame(xs, ys, xlog, ylog)
    G = len(labels)
    # Dodge series that share x values so whiskers stay readable.
    dodge = 5.0 if G > 1 and len(set(xs)) < len(xs) else 0.0
    common_bound = all(
        len({c.bound for c in cfgs if xv[c.index] == xx}) == 1 for xx in set(xs))
    background = ""
    crossings: list[tuple[float, int]] = []
    if x:
        reps: list[dict[str, float]] = []
        for g in range(G):
            c0 = next(c for c in cfgs if member[c.index] == g)
            reps.append({k: float(v) for k, v in c0.params.items()})
        crossings, shade = _boundaries(view, x, reps, f.x.lo, f.x.hi, xlog)
        background = "".join(S.band(f, a, b, label="out of regime") for a, b in shade)
    # Bound lines.
    if common_bound:
        pts = sorted({(xv[c.index], c.bound) for c in cfgs if math.isfinite(c.bound)})
        if len(pts) == 1:
            f.add(S.hline(f, pts[0][1], S.BOUND_COLOR, "6 4", "bound", 1.8))
        else:
            f.add(S.polyline([(f.x(a), f.y(b)) for a, b in pts], S.BOUND_COLOR, 1.8, "6 4"))
    else:
        for g in range(G):
            pts = sorted((xv[c.index], c.bound) for c in cfgs if member[c.index] == g and math.isfinite(c.bound))
            off = (g - (G - 1) / 2) * dodge
            f.add(S.polyline([(f.x(a) + off, f.y(b)) for a, b in pts], _color(g), 1.5, "6 4"))
            for a, b in pts:
                f.add(f'<line x1="{f.x(a) + off - 6:.1f}" y1="{f.y(b):.1f}" x2="{f.x(a) + off + 6:.1f}" '
                      f'y2="{f.y(b):.1f}" stroke="{_color(g)}" stroke-width="2"/>')
    for cx, g in crossings:
        col = "#4b5563" if G == 1 else _color(g)
        f.add(S.vline(f, cx, col, "2 3", "regime boundary" if G == 1 else "", 1.3))
    # Estimates: median line per series, min-max whiskers, markers (hollow out of regime, ringed if violated).
    for g in range(G):
        mine = sorted((c for c in cfgs if member[c.index] == g), key=lambda c: xv[c.index])
        off = (g - (G - 1) / 2) * dodge
        col = _color(g)
        f.add(S.polyline([(f.x(xv[c.index]) + off, f.y(stats[c.index][1])) for c in mine], col, 1.4,
                         opacity=0.7))
        for c in mine:
            lo, med, hi = stats[c.index]
            px = f.x(xv[c.index]) + off
            f.add(S.whisker(px, f.y(lo), f.y(hi), col, not c.in_regime))
            tip = (f"config {c.index}: {_params_text(c.params)}\n"
                   f"{'in regime' if c.in_regime else 'OUT OF REGIME'}; verdict {c.verdict}\n"
                   f"estimate median {S.fmt(med, 5)}, range [{S.fmt(lo, 5)}, {S.fmt(hi, 5)}] over "
                   f"{c.replicates} replicates\nbound {S.fmt(c.bound, 6)}; worst slack {S.fmt(c.slack_min)}; "
                   f"violations {c.violations}/{c.replicates}")
            f.add(S.marker(px, f.y(med), col, not c.in_regime, tip, ring=c.verdict == "violated"))
            if c.index in tail:
                qy = f.y(tail[c.index])
                f.add(f'<path d="M{px - 7:.1f} {qy:.1f}h14M{px:.1f} {qy - 4:.1f}l4 4-4 4-4-4z" stroke="{col}" '
                      f'stroke-width="2" fill="#fff" class="tail-q"><title>config {c.index}: '
                      f'{S.esc(_tail_label(claim, c.delta))} = {S.fmt(tail[c.index], 5)}; bound '
                      f'{S.fmt(c.bound, 6)}</title></path>')
    chk = claim.check
    qlabel = f"{chk.quantity}" + (" (log scale)" if ylog else "")
    xlabel = (x + (" (log scale)" if xlog else "")) if x else "configuration #"
    xticks = None if x else [(float(i), str(i)) for i in sorted({int(v) for v in xs})][:30]
    plot = S.svg(f, xlabel, qlabel, f"{chk.quantity} against the bound", "est", background, xticks)
    items = []
    if G == 1:
        items.append((S.swatch(_color(0), "dot"), "median estimate; bar: min to max over replicates"))
    else:
        items += [(S.swatch(_color(g), "dot"), lab) for g, lab in enumerate(labels)]
        items.append((S.swatch("#555", "line"), "median estimate; bar: min to max over replicates"))
    if tail:
        deltas = sorted({c.delta for c in cfgs if c.index in tail})
        which = _tail_label(claim, deltas[0]) if len(deltas) == 1 else _tail_label(claim, None)
        side = "above" if chk.relation in (">=", ">") else "below"
        items.append((S.swatch("#555", "diamond"),
                      f"{which} of the estimate: the statement holds where this is {side} the bound"))
    if common_bound:
        items.append((S.swatch(S.BOUND_COLOR, "line", "5 3"), f"bound ({chk.relation} {chk.bound.text})"))
    else:
        items.append((S.swatch("#555", "line", "5 3"), f"bound ({chk.relation} {chk.bound.text}), per series"))
    if any(not c.in_regime for c in cfgs):
        items.append((S.swatch("#555", "hollow"), "configuration outside the stated regime"))
    if background:
        items.append((S.swatch("url(#hatch-est)", "box"), "out of regime for every series"))
    if crossings:
        items.append((S.swatch("#4b5563", "line", "2 3"), "regime boundary (requires, with regime constants)"))
    if any(c.verdict == "violated" for c in cfgs):
        items.append((S.swatch(S.BOUND_COLOR, "ring"), "configuration verdict: violated"))
    consts = ""
    if chk.constants:
        consts = f" Hidden constants are set to their regime values ({chk.hidden_constants_at()}) to draw the bound."
    caption = (f"Each marker is one configuration: the median of the estimated quantity over its replicates, "
               f"with a bar from the smallest to the largest replicate. x is the swept parameter with the most "
               f"values{'' if x else ' (none varies, so configurations are listed in order)'}."
               f"{consts} Hover a marker for its parameters.")
    return plot, S.legend(items), caption


def _tail_label(claim, delta: float | None) -> str:
    """"1 − δ quantile" (upper bounds) or "δ quantile" (lower bounds), with δ's value when one is given."""
    d = "δ" if delta is None else f"δ = {delta:g}"
    return f"{d} quantile" if claim.check.relation in (">=", ">") else f"1 − δ quantile ({d})"


def _thin(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(xs)
    if n <= MAX_ECDF_POINTS:
        return xs, ys
    idx = np.unique(np.round(np.linspace(0, n - 1, MAX_ECDF_POINTS)).astype(int))
    return xs[idx], ys[idx]


def ecdf_plot(view: ClaimView) -> tuple[str, str, str] | None:
    claim, res = view.claim, view.res
    if claim is None or res is None or claim.check is None:
        return None
    groups: list[tuple[str, str, str, np.ndarray]] = []
    ins = [view.data[c.index].slacks for c in res.configs if c.in_regime and c.index in view.data]
    outs = [view.data[c.index].slacks for c in res.configs if not c.in_regime and c.index in view.data]
    if ins and sum(len(a) for a in ins):
        groups.append(("in-regime configurations, pooled", S.PALETTE[0], "", np.concatenate(ins)))
    if outs and sum(len(a) for a in outs):
        groups.append(("out-of-regime configurations, pooled", "#7b8794", "5 3", np.concatenate(outs)))
    w = view.worst()
    same_side = [c for c in res.configs if c.in_regime == (w.in_regime if w else True) and c.index in view.data]
    if w is not None and w.index in view.data and len(same_side) > 1:  # else it is its pooled curve
        groups.append((f"worst configuration (#{w.index})", S.PALETTE[1], "", view.data[w.index].slacks))
    if not groups:
        return None
    finite_all = np.concatenate([g[3][np.isfinite(g[3])] for g in groups])
    if len(finite_all) == 0:
        return None
    dom_vals = list(finite_all[finite_all > 0]) + [1.0] if (finite_all > 0).all() else list(finite_all) + [1.0]
    xlog = S.wants_log(dom_vals)
    f = S.frame(dom_vals, [0.0, 1.0], xlog, False, ydom=(0.0, 1.0))
    background = S.band(f, f.x.lo, 1.0, fill="#fdecea", label="violation (slack < 1)") if f.x.lo < 1 else ""
    items = []
    for label, col, dash, s in groups:
        xs, ys = ecdf(s)
        n_inf = int(np.isinf(s).sum())
        if len(xs) == 0:
            continue
        n_all = len(s[~np.isnan(s)])
        ys = ys * len(xs) / max(n_all, 1)  # infinite slacks count in n: the curve then tops out below 1
        xs, ys = _thin(xs, ys)
        px = f.x.many(np.concatenate([[f.x.lo], xs, [f.x.hi]]))
        py = f.y.many(np.concatenate([[0.0], ys, [ys[-1]]]))
        f.add(S.step_path(list(zip(px.tolist(), py.tolist())), col, 1.8, dash))
        extra = f"; {n_inf} infinite (estimate ≤ 0)" if n_inf else ""
        items.append((S.swatch(col, "line", dash), f"{label}: {len(s)} replicates{extra}"))
    f.add(S.vline(f, 1.0, S.BOUND_COLOR, "", "slack = 1 (tight)", 1.6))
    deltas = {c.delta for c in res.configs}
    if claim.mode == "probabilistic" and len(deltas) == 1:
        d = deltas.pop()
        if 0 < d < 1:
            f.add(S.hline(f, d, "#5f6670", "2 3", f"δ = {S.fmt(d)}", 1.2))
            items.append((S.swatch("#5f6670", "line", "2 3"), f"stated failure probability δ = {S.fmt(d)}"))
    plot = S.svg(f, "slack" + (" (log scale)" if xlog else ""), "fraction of replicates ≤ slack",
                 "slack ECDF", "ecdf", background)
    caption = ("Empirical CDF of the per-replicate slack, recomputed from the stored shards (slack is "
               "bound/estimate for upper bounds, estimate/bound for lower bounds: 1 is tight, below 1 is a "
               "violation). The height of a curve just left of slack 1 is the observed violation rate"
               + ("; for the claim to hold it must stay at or below δ." if claim.mode == "probabilistic" else ".")
               + f" Curves are drawn through at most {MAX_ECDF_POINTS} quantiles.")
    return plot, S.legend(items), caption


def scaling_plot(view: ClaimView) -> tuple[str, str, str] | None:
    claim, res = view.claim, view.res
    if claim is None or res is None or not res.scaling:
        return None
    sc = res.scaling
    # plot every configuration (the fit over all of them, when the verdict's fit kept only in-regime ones):
    # out-of-regime points are drawn hollow
    every = sc.get("all_configs") or sc
    used = list(every.get("configs_used", []))
    consts = list(every.get("implied_constant", []))
    by_index = {c.index: c for c in res.configs}
    cfgs = [by_index[i] for i in used if i in by_index]
    if not cfgs or len(consts) != len(used):
        return None
    cval = dict(zip(used, consts))
    names = list(sc.get("swept") or claim.params)
    x = sweep_axis(cfgs, names) or sweep_axis(cfgs, list(claim.params))
    labels, member = _groups(cfgs, x, list(claim.params))
    xv = {c.index: (float(c.params[x]) if x else float(c.index)) for c in cfgs}
    ys = [cval[c.index] for c in cfgs]
    xs = list(xv.values())
    xlog = bool(x) and all(v > 0 for v in xs)
    ylog = all(v > 0 for v in ys)
    f = S.frame(xs, ys, xlog, ylog)
    G = len(labels)
    for g in range(G):
        mine = sorted((c for c in cfgs if member[c.index] == g), key=lambda c: xv[c.index])
        f.add(S.polyline([(f.x(xv[c.index]), f.y(cval[c.index])) for c in mine], _color(g), 1.5))
        for c in mine:
            tip = f"config {c.index}: {_params_text(c.params)}\nimplied constant {S.fmt(cval[c.index], 5)}"
            f.add(S.marker(f.x(xv[c.index]), f.y(cval[c.index]), _color(g), not c.in_regime, tip))
    xlabel = (x + (" (log scale)" if xlog else "")) if x else "configuration #"
    plot = S.svg(f, xlabel, "implied constant Ĉ" + (" (log scale)" if ylog else ""), "implied constant trend",
                 "scal")
    items = [(S.swatch(_color(g), "dot"), lab if G > 1 else "implied constant per configuration")
             for g, lab in enumerate(labels)]
    if any(not c.in_regime for c in cfgs):
        items.append((S.swatch("#555", "hollow"), "configuration outside the stated regime"))
    summary = {"max-log": "the largest over replicates (the worst case of an upper bound)",
               "min-log": "the smallest over replicates (the worst case of a lower bound)",
               "tail-log": "the stated tail over replicates (the 1 − δ quantile of an upper bound, δ of a lower one)"
               }.get(
        sc.get("statistic", "mean-log"), "the geometric mean over replicates")
    lower = view.claim is not None and view.claim.check is not None and view.claim.check.relation in (">=", ">")
    direction = "shrink" if lower else "grow"
    caption = (f"Implied constant Ĉ = quantity / ({sc.get('shape', '')}), {summary}, per configuration. "
               f"If the claimed rate is right, Ĉ does not {direction} along the sweep.")
    return plot, S.legend(items), caption
