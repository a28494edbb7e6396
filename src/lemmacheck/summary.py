"""Results as the CLI contract's JSON, as a terminal table, and as pytest failure text."""

from __future__ import annotations

import math
from typing import Any

from .claims import Claim
from .runner import repro_command
from .stats import DEFAULT_ALPHA
from .verdicts import EPS, ROUNDING_ULPS, ClaimResult, false_violation_bound, family_wise_bound


def _num(x: Any) -> Any:
    """JSON has no inf/nan: write them as strings so readers see them rather than crash."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _num(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    return x


def claim_repro(res: ClaimResult) -> str | None:
    c = res.claim
    if res.worst_index is None or c.check is None:
        return None
    cfg = next(x for x in res.configs if x.index == res.worst_index)
    return repro_command(c, cfg.params, cfg.seed, cfg.drawn, cfg.shard_size, cfg.pinned)


def claim_json(res: ClaimResult) -> dict[str, Any]:
    c = res.claim
    chk = c.check
    out: dict[str, Any] = {
        "id": c.id, "paper": c.paper, "result": c.result, "kind": c.kind, "title": c.title, "mode": c.mode,
        "verdict": res.verdict, "expect": res.expect, "ok": res.ok, "flags": res.flags,
        "statement": c.statement, "quantifiers": c.quantifiers(), "notes": c.notes, "finding": c.finding,
        "source": str(c.source),
        "configs": [cfg.to_json() for cfg in res.configs],
        "repro": claim_repro(res),
        "false_violation_bound": false_violation_bound(res),
    }
    if chk is not None:
        out.update(quantity=chk.quantity, relation=chk.relation, bound=chk.bound.text, search=chk.search,
                   probability=chk.probability, requires=chk.requires.text if chk.requires else None,
                   constants=list(chk.constants))
    else:
        out["infeasible"] = c.infeasible
    if res.scaling is not None:
        out["scaling"] = res.scaling
    if res.configs:  # the draws this verdict needed (early stop: fewer than planned where the sequence settled it)
        seq = [cfg for cfg in res.configs if cfg.sequential]
        out["draws"] = {"drawn": sum(cfg.drawn for cfg in res.configs),
                        "planned": sum(cfg.planned or cfg.drawn for cfg in res.configs),
                        "early_stop_configs": len(seq),
                        "stopped_early": sum(1 for cfg in seq if cfg.drawn < cfg.planned)}
    missed = sum(cfg.not_reached for cfg in res.configs)
    if missed:  # a trajectory's target not reached within its budget: always shown, never hidden
        drawn = sum(cfg.replicates for cfg in res.configs)
        out["not_reached"] = {"draws": missed, "of": drawn, "fraction": missed / drawn,
                              "budget_steps": max(cfg.budget or 0 for cfg in res.configs)}
    return _num(out)


def run_json(run_info: dict[str, Any], results: list[ClaimResult]) -> dict[str, Any]:
    run = {k: run_info[k] for k in ("seed", "profile", "started", "versions", "device")}
    run.update(run_id=run_info["run_id"], finished=run_info.get("finished"), alpha_per_config=DEFAULT_ALPHA,
               comparison_tolerance={"ulps": ROUNDING_ULPS, "eps": EPS,
                                     "rule": "ulps * eps(dtype) * max(|value|, |bound|, extras scale)"},
               false_violation=family_wise_bound(results))
    return {"run": run, "claims": [claim_json(r) for r in results]}


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _fit(scaling: dict[str, Any] | None) -> str:
    """The steepest implied-constant slope and its interval ("-" when not a scaling claim or not fitted)."""
    if not scaling or not scaling.get("implied_constant_slopes"):
        return "-"
    slopes, cis = scaling["implied_constant_slopes"], scaling.get("slope_ci", {})
    k = max(slopes, key=lambda n: abs(slopes[n]))
    lo, hi = cis.get(k, (math.nan, math.nan))
    return f"C slope in {k} {slopes[k]:+.2g} [{lo:.2g}, {hi:.2g}]"


def table(results: list[ClaimResult]) -> str:
    """A readable summary: one line per claim, confirmed findings listed after."""
    rows = [("claim", "result", "mode", "verdict", "flags", "worst slack", "viol. rate CI", "scaling fit",
             "configs", "vs expected")]
    for r in results:
        worst = next((c for c in r.configs if c.index == r.worst_index), None)
        ci = "-" if worst is None else f"[{worst.violation_ci[0]:.2g}, {worst.violation_ci[1]:.2g}]"
        slack_ = _fmt(worst.slack_min if worst else None)
        if r.scaling is not None:
            # a scaling verdict comes from the fit; slack at the illustrative constant would mislead here
            slack_, ci = "-", "-"
        mark = "ok" if r.ok else ("ERROR" if any(c.errors for c in r.configs) else f"UNEXPECTED (expect {r.expect})")
        rows.append((r.claim.id, r.claim.result, r.claim.mode, r.verdict, ",".join(r.flags) or "-",
                     slack_, ci, _fit(r.scaling), str(len(r.configs)), mark))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    lines.append("")
    lines.append("verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    findings = [r for r in results if r.expect == "violated"]
    if findings:
        lines.append("")
        lines.append("Confirmed findings (printed statements that fail):")
        for r in findings:
            lines.append(f"  {r.claim.id} [{r.claim.result}] verdict={r.verdict}: {r.claim.finding.strip()}")
    return "\n".join(lines)


def failure_text(res: ClaimResult) -> str:
    """What a failing pytest item prints: bound, estimate, slack, interval, search, repro."""
    c: Claim = res.claim
    lines = [f"{c.id} ({c.paper}, {c.result}): verdict {res.verdict!r}, expected {res.expect!r}"
             + (f" [flags: {', '.join(res.flags)}]" if res.flags else "")]
    chk = c.check
    if chk is not None:
        lines.append(f"  statement: {c.statement}")
        lines.append(f"  checked: {chk.quantity} {chk.relation} {chk.bound.text}; {c.quantifiers()}")
    for cfg in res.configs:
        if cfg.errors:
            lines.extend(f"  error: {e}" for e in cfg.errors[:3])
    worst = next((x for x in res.configs if x.index == res.worst_index), None)
    if worst is not None:
        lines.append(f"  worst configuration: {worst.params} ({'in' if worst.in_regime else 'OUT OF'} regime)")
        lines.append(f"    bound {_fmt(worst.bound, 6)}, estimate max {_fmt(worst.value_max, 6)} "
                     f"median {_fmt(worst.value_median, 6)}, slack min {_fmt(worst.slack_min)} "
                     f"median {_fmt(worst.slack_median)}")
        lines.append(f"    violations {worst.violations}/{worst.replicates}, violation-rate interval "
                     f"[{worst.violation_ci[0]:.3g}, {worst.violation_ci[1]:.3g}] vs delta {worst.delta:.3g}"
                     + (f"; method: {worst.method}" if worst.method else ""))
        if worst.sequential and worst.drawn < worst.planned:
            lines.append(f"    stopped early: {worst.drawn} of {worst.planned} planned draws decided it "
                         "(anytime-valid confidence sequence)")
        if worst.not_reached:
            lines.append(f"    not reached within {worst.budget} steps: {worst.not_reached}/{worst.replicates} draws")
        if chk is not None and chk.constants:
            lines.append(f"    (hidden constants at {chk.hidden_constants_at()}: this bound, slack and these violations only illustrate; "
                         "the verdict comes from the scaling fit below)")
    if res.scaling:
        s = res.scaling
        lines.append(f"  scaling: implied-constant slopes {s.get('implied_constant_slopes')} CI {s.get('slope_ci')}"
                     f" ({s.get('statistic_used') or s.get('statistic')}, tolerance {s.get('tolerance')}; fit over "
                     f"{s.get('regime', 'all configurations')})"
                     + (f"; Ĉ = 0 at the tracked level in configurations {s['zero_configs']} (bound met, not fitted)"
                        if s.get("zero_configs") else "") + f"; {s.get('reason', '')}")
    rep = claim_repro(res)
    if rep:
        lines.append(f"  reproduce: {rep}")
    return "\n".join(lines)
