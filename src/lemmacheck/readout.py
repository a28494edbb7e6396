"""How the numbers behind a verdict are read out: shared by the summary table, `show` and the report."""

from __future__ import annotations

import math
from typing import Any


def level_text(level: float | None) -> str:
    """A confidence level as a percentage that never rounds up to 100%: 0.999 -> "99.9%", 0.95 -> "95%"."""
    if level is None or not math.isfinite(level):
        return "–"
    for digits in range(8):
        s = f"{100 * level:.{digits}f}"
        if float(s) < 100 or level >= 1:
            return (s.rstrip("0").rstrip(".") if "." in s else s) + "%"
    return f"{100 * level}%"


def deciding_slope(sc: dict[str, Any] | None) -> tuple[str, float, tuple[float, float]] | None:
    """The implied-constant slope that decides a scaling verdict: the parameter whose oriented upper interval end
    (`slope_max`: growth of Ĉ for an upper bound, shrinking for a lower bound) is largest, i.e. nearest to the
    tolerance. Falls back to the steepest slope when the fit records no oriented ends. (name, slope, interval)."""
    if not sc or not sc.get("implied_constant_slopes"):
        return None
    slopes, cis = sc["implied_constant_slopes"], sc.get("slope_ci") or {}
    oriented = {k: v for k, v in (sc.get("slope_max") or {}).items() if k in slopes and v is not None}
    if oriented:
        k = max(oriented, key=lambda n: oriented[n])
    else:
        k = max(slopes, key=lambda n: abs(slopes[n]))
    lo, hi = cis.get(k, (math.nan, math.nan))
    return k, slopes[k], (lo, hi)


def draws_needed_text(cfg: Any) -> str:
    """What an undecided probabilistic configuration would need (verdicts.ConfigResult.draws_needed)."""
    drawn = f"{cfg.drawn:,} drawn of {max(cfg.planned, cfg.drawn):,} allowed"
    if cfg.at_bound:
        from .verdicts import RATE_RESOLUTION

        lo, hi = cfg.violation_ci
        return (f"its rate sits at the bound: the interval [{lo:.3g}, {hi:.3g}] lies within "
                f"{RATE_RESOLUTION:.0%} of delta = {cfg.delta:.3g}, so more draws would only split that margin "
                f"({drawn}; verdicts.RATE_RESOLUTION)")
    if cfg.draws_needed is None:
        return f"no number of draws decides it at its current rate, which is at delta ({drawn})"
    return (f"about {cfg.draws_needed:,} draws would decide it if its rate held ({drawn}; the profile's "
            "max_replicates sets the budget)")
