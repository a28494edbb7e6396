"""Inline SVG plots, written by hand: axes with linear or log scales, points with whiskers, step curves.

No plotting library and no external resources: every plot is a self-contained <svg> string with its own
<title> tooltips. Text is HTML-escaped. Sizes are in viewBox units, so a plot scales with the page width.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

PALETTE = ["#0b5fa5", "#e07b00", "#2a9d57", "#8e44ad", "#17a2b8", "#8c564b", "#b5b000", "#d6609c",
           "#6c757d", "#1b2a6b"]
BOUND_COLOR = "#b3261e"
W, H = 680, 330
MARGIN = {"l": 66, "r": 18, "t": 24, "b": 46}


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def fmt(v: float | None, digits: int = 3) -> str:
    """A short, readable number: 3 significant digits, 'inf', '–' for missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e5:
        s = f"{v:.{digits}g}"
        if "e" in s:  # e.g. 1000 with 3 digits: write 1000, not 1e+03
            s = f"{round(v, digits - 1 - math.floor(math.log10(a))):.0f}"
    else:
        s = f"{v:.{max(digits - 1, 1)}e}"
        mant, ex = s.split("e")
        mant = mant.rstrip("0").rstrip(".")
        s = f"{mant}e{int(ex)}"
    return s.replace("-", "−")


def _n(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


# --------------------------------------------------------------------------------------------- scales

@dataclass
class Scale:
    lo: float
    hi: float
    log: bool
    p0: float  # pixel of lo
    p1: float  # pixel of hi

    def __call__(self, v: float) -> float:
        if self.log:
            v = max(v, self.lo * 1e-12) if self.lo > 0 else v
            t = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        return self.p0 + t * (self.p1 - self.p0)

    def many(self, v: np.ndarray) -> np.ndarray:
        """Vectorised __call__, clamped to the axis (for long curves)."""
        v = np.asarray(v, dtype=float)
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (np.log10(np.maximum(v, self.lo * 1e-12)) - math.log10(self.lo)) / (
                    math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        t = np.clip(np.nan_to_num(t, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
        return self.p0 + t * (self.p1 - self.p0)

    def clamp(self, v: float) -> float:
        return min(max(self(v), min(self.p0, self.p1)), max(self.p0, self.p1))

    def contains(self, v: float) -> bool:
        return self.lo <= v <= self.hi

    def ticks(self) -> list[tuple[float, str]]:
        return log_ticks(self.lo, self.hi) if self.log else linear_ticks(self.lo, self.hi)


def wants_log(values: Sequence[float]) -> bool:
    """Log scale when every value is positive and the range spans more than one decade."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    return bool(v) and min(v) > 0 and max(v) / min(v) > 10


def domain(values: Sequence[float], log: bool, pad: float = 0.06) -> tuple[float, float]:
    v = [x for x in values if x is not None and math.isfinite(x) and (x > 0 or not log)]
    if not v:
        return (0.1, 10.0) if log else (0.0, 1.0)
    lo, hi = min(v), max(v)
    if log:
        a, b = math.log10(lo), math.log10(hi)
        if b - a < 1e-9:
            a, b = a - 0.5, b + 0.5
        d = (b - a) * pad
        # padding a range that already spans most of float64 (slacks near 1e308) must not overflow
        return 10 ** max(a - d, -307.0), 10 ** min(b + d, 307.0)
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        span = abs(hi) * 0.1 or 1.0
        return lo - span, hi + span
    d = (hi - lo) * pad
    return lo - d, hi + d


def _nice_step(span: float, n: int = 6) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def linear_ticks(lo: float, hi: float, n: int = 6) -> list[tuple[float, str]]:
    step = _nice_step(hi - lo, n)
    start = math.ceil(lo / step - 1e-9) * step
    out = []
    k = 0
    while True:
        v = start + k * step
        if v > hi + 1e-9 * step:
            break
        if abs(v) < step * 1e-9:
            v = 0.0
        out.append((v, fmt(v, 4)))
        k += 1
    return distinct_labels(out)


def distinct_labels(ticks: list[tuple[float, str]], digits: int = 3) -> list[tuple[float, str]]:
    """The ticks relabelled with more significant digits until no two distinct values read the same (a narrow
    axis at 1.4702 and 1.4708 printed "1.47" twice)."""
    labels = [lab for _, lab in ticks]
    d = digits
    while len(set(labels)) < len({v for v, _ in ticks}) and d < 12:
        d += 1
        labels = [fmt(v, d) for v, _ in ticks]
    return [(v, lab) for (v, _), lab in zip(ticks, labels)] if d > digits else ticks


def log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    decades = b - a
    every = max(1, math.ceil(decades / 8))
    mults = (1, 2, 5) if decades <= 2 else (1,)
    out = []
    for e in range(a, b + 1):
        if e % every:
            continue
        for m in mults:
            v = m * 10.0 ** e
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.append((v, _pow_label(m, e)))
    if len(out) < 2:  # less than a decade visible: fall back to linear-looking labels
        out = distinct_labels([(v, fmt(v)) for v, _ in linear_ticks(lo, hi, 4) if v > 0])
    return out


def _pow_label(m: int, e: int) -> str:
    if -2 <= e <= 3:
        return fmt(m * 10.0 ** e)
    return f"{m}e{e}".replace("-", "−")


# --------------------------------------------------------------------------------------------- frame

@dataclass
class Frame:
    x: Scale
    y: Scale
    parts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # drawn last and unclipped (may sit in the margins)

    def add(self, s: str) -> None:
        self.parts.append(s)


def frame(xs: Sequence[float], ys: Sequence[float], xlog: bool, ylog: bool, *,
          xdom: tuple[float, float] | None = None, ydom: tuple[float, float] | None = None) -> Frame:
    x0, x1 = xdom or domain(xs, xlog)
    y0, y1 = ydom or domain(ys, ylog)
    sx = Scale(x0, x1, xlog, MARGIN["l"], W - MARGIN["r"])
    sy = Scale(y0, y1, ylog, H - MARGIN["b"], MARGIN["t"])
    return Frame(sx, sy)


def _axes(f: Frame, xlabel: str, ylabel: str, xticks: list[tuple[float, str]] | None = None) -> str:
    left, right, top, bottom = MARGIN["l"], W - MARGIN["r"], MARGIN["t"], H - MARGIN["b"]
    out = [(f'<rect class="plot-bg" x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
           'fill="#fff" stroke="#c9ced6"/>')]
    for v, lab in xticks if xticks is not None else f.x.ticks():
        px = f.x(v)
        out.append(f'<line x1="{_n(px)}" y1="{top}" x2="{_n(px)}" y2="{bottom}" stroke="#edf0f3"/>')
        out.append(f'<line x1="{_n(px)}" y1="{bottom}" x2="{_n(px)}" y2="{bottom + 4}" stroke="#6b7280"/>')
        out.append(f'<text x="{_n(px)}" y="{bottom + 16}" text-anchor="middle">{esc(lab)}</text>')
    for v, lab in f.y.ticks():
        py = f.y(v)
        out.append(f'<line x1="{left}" y1="{_n(py)}" x2="{right}" y2="{_n(py)}" stroke="#edf0f3"/>')
        out.append(f'<line x1="{left - 4}" y1="{_n(py)}" x2="{left}" y2="{_n(py)}" stroke="#6b7280"/>')
        out.append(f'<text x="{left - 7}" y="{_n(py + 4)}" text-anchor="end">{esc(lab)}</text>')
    out.append(f'<text class="axis-label" x="{(left + right) / 2:.0f}" y="{H - 8}" text-anchor="middle">'
               f'{esc(xlabel)}</text>')
    cy = (top + bottom) / 2
    out.append(f'<text class="axis-label" x="14" y="{cy:.0f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {cy:.0f})">{esc(ylabel)}</text>')
    return "".join(out)


def svg(f: Frame, xlabel: str, ylabel: str, title: str, uid: str, background: str = "",
        xticks: list[tuple[float, str]] | None = None) -> str:
    """Assemble a plot: background layers (regime shading), axes, then the data layers (clipped).

    `uid` must be unique within the page: SVG ids are document-global.
    """
    left, right, top, bottom = MARGIN["l"], W - MARGIN["r"], MARGIN["t"], H - MARGIN["b"]
    background = background.replace("url(#hatch)", f"url(#hatch-{uid})")
    return (f'<svg class="plot" viewBox="0 0 {W} {H}" role="img" aria-label="{esc(title)}" '
            f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="13.5">'
            f"<title>{esc(title)}</title><defs>"
            f'<clipPath id="clip-{uid}"><rect x="{left}" y="{top}" width="{right - left}" '
            f'height="{bottom - top}"/></clipPath>'
            f'<pattern id="hatch-{uid}" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f5f8"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#dde2e8" stroke-width="2.2"/></pattern></defs>'
            + _axes(f, xlabel, ylabel, xticks)
            + f'<g clip-path="url(#clip-{uid})">{background}{"".join(f.parts)}</g>{"".join(f.labels)}</svg>')


# --------------------------------------------------------------------------------------------- pieces

def polyline(points: list[tuple[float, float]], color: str, width: float = 1.6, dash: str = "",
             opacity: float = 1.0) -> str:
    if len(points) < 2:
        return ""
    d = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
    da = f' stroke-dasharray="{dash}"' if dash else ""
    op = f' stroke-opacity="{opacity}"' if opacity < 1 else ""
    return f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{width}"{da}{op}/>'


def step_path(points: list[tuple[float, float]], color: str, width: float = 1.8, dash: str = "") -> str:
    """A right-continuous step function through (x, y) pixel points (an ECDF)."""
    if not points:
        return ""
    d = [f"M{_n(points[0][0])},{_n(points[0][1])}"]
    d.extend(f"H{x:.1f}V{y:.1f}" for x, y in points[1:])
    da = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<path d="{"".join(d)}" fill="none" stroke="{color}" stroke-width="{width}"{da}/>'


def marker(x: float, y: float, color: str, hollow: bool, tip: str, ring: bool = False, r: float = 4.2) -> str:
    fill = "#fff" if hollow else color
    out = f'<g class="pt"><title>{esc(tip)}</title>'
    if ring:
        out += f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{r + 3.2}" fill="none" stroke="{BOUND_COLOR}" ' \
               'stroke-width="1.6"/>'
    out += f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{r}" fill="{fill}" stroke="{color}" stroke-width="1.6"/></g>'
    return out


def whisker(x: float, y0: float, y1: float, color: str, hollow: bool) -> str:
    da = ' stroke-dasharray="3 2"' if hollow else ""
    return (f'<line x1="{_n(x)}" y1="{_n(y0)}" x2="{_n(x)}" y2="{_n(y1)}" stroke="{color}" stroke-width="1.3"{da}/>'
            f'<line x1="{_n(x - 3)}" y1="{_n(y0)}" x2="{_n(x + 3)}" y2="{_n(y0)}" stroke="{color}" stroke-width="1.3"/>'
            f'<line x1="{_n(x - 3)}" y1="{_n(y1)}" x2="{_n(x + 3)}" y2="{_n(y1)}" stroke="{color}" stroke-width="1.3"/>')


def vline(f: Frame, x: float, color: str, dash: str = "4 3", label: str = "", width: float = 1.4) -> str:
    px = f.x(x)
    out = f'<line x1="{_n(px)}" y1="{MARGIN["t"]}" x2="{_n(px)}" y2="{H - MARGIN["b"]}" stroke="{color}" ' \
          f'stroke-width="{width}" stroke-dasharray="{dash}"/>'
    if label and f.x.contains(x):
        anchor = "end" if px > W - 70 else "start" if px < MARGIN["l"] + 50 else "middle"
        f.labels.append(f'<text x="{_n(px)}" y="{MARGIN["t"] - 6}" fill="{color}" text-anchor="{anchor}" '
                        f'font-size="12.5">{esc(label)}</text>')
    return out


def hline(f: Frame, y: float, color: str, dash: str = "4 3", label: str = "", width: float = 1.4) -> str:
    py = f.y(y)
    out = f'<line x1="{MARGIN["l"]}" y1="{_n(py)}" x2="{W - MARGIN["r"]}" y2="{_n(py)}" stroke="{color}" ' \
          f'stroke-width="{width}" stroke-dasharray="{dash}"/>'
    if label and f.y.contains(y):
        f.labels.append(f'<text x="{W - MARGIN["r"] - 4}" y="{_n(py - 4)}" fill="{color}" text-anchor="end" '
                        f'font-size="12.5">{esc(label)}</text>')
    return out


def band(f: Frame, x0: float, x1: float, fill: str = "url(#hatch)", label: str = "") -> str:
    a, b = sorted((f.x.clamp(x0), f.x.clamp(x1)))
    if b - a < 0.5:
        return ""
    out = f'<rect x="{_n(a)}" y="{MARGIN["t"]}" width="{_n(b - a)}" height="{H - MARGIN["t"] - MARGIN["b"]}" ' \
          f'fill="{fill}"/>'
    if label and b - a > 70:
        f.labels.append(f'<text x="{_n((a + b) / 2)}" y="{MARGIN["t"] + 14}" text-anchor="middle" '
                        f'fill="#5f6670" font-size="12.5">{esc(label)}</text>')
    return out


def legend(items: list[tuple[str, str]]) -> str:
    """HTML legend under a plot: (swatch svg, label) pairs."""
    return '<ul class="legend">' + "".join(f"<li>{sw}<span>{esc(lab)}</span></li>" for sw, lab in items) + "</ul>"


def swatch(color: str, kind: str = "line", dash: str = "") -> str:
    da = f' stroke-dasharray="{dash}"' if dash else ""
    if kind == "dot":
        body = f'<circle cx="11" cy="6" r="4" fill="{color}" stroke="{color}" stroke-width="1.5"/>'
    elif kind == "hollow":
        body = f'<circle cx="11" cy="6" r="4" fill="#fff" stroke="{color}" stroke-width="1.5"/>'
    elif kind == "ring":
        body = f'<circle cx="11" cy="6" r="5" fill="none" stroke="{color}" stroke-width="1.5"/>'
    elif kind == "box":
        body = f'<rect x="2" y="0" width="18" height="12" fill="{color}" stroke="#c9ced6"/>'
    elif kind == "diamond":  # the tail-quantile mark of estimate plots
        body = f'<path d="M4 6h14M11 2l4 4-4 4-4-4z" fill="#fff" stroke="{color}" stroke-width="1.5"/>'
    else:
        body = f'<line x1="1" y1="6" x2="21" y2="6" stroke="{color}" stroke-width="2"{da}/>'
    return f'<svg class="sw" viewBox="0 0 22 12" width="22" height="12" aria-hidden="true">{body}</svg>'
