"""Results as the CLI contract's JSON, as a terminal table, and as pytest failure text."""

from __future__ import annotations

import math
from typing import Any

from .claims import Claim
from .coverage import coverage
from .readout import draws_needed_text
from .runner import repro_command
from .search import config_search, searches_used
from .stats import DEFAULT_ALPHA
from .verdicts import (
    EPS,
    ROUNDING_ULPS,
    ClaimResult,
    deciding,
    false_violation_bound,
    family_wise_bound,
    trend_text,
)


def rate_is_probability(claim: Claim) -> bool:
    """Whether a configuration's violation rate estimates a probability the statement is about. For a statement
    about every draw ("always") the draws are a search (boundary-seeking samplers, adversarial points): their rate
    is a search hit rate, not a probability, and one counterexample decides."""
    return claim.mode in ("probabilistic", "scaling") and claim.check is not None and \
        claim.check.probability != "always"


def _rate_cell(claim: Claim, lo: float, hi: float) -> str:
    ci = f"[{lo:.2g}, {hi:.2g}]"
    return ci if rate_is_probability(claim) else f"hit rate {ci}"


def findings_sections(results: list[ClaimResult]) -> list[str]:
    """Lines: the reviewed findings (from each paper's findings.toml) that cover claims of this run, then the leads,
    then violated claims that no findings.toml lists, then the regime-path trends; problems as notes."""
    from .errors import ClaimError
    from .findings import check_against_results, load_findings

    by_folder: dict[Any, list[ClaimResult]] = {}
    for r in results:
        by_folder.setdefault(r.claim.source.parent, []).append(r)
    verdict = {r.claim.id: r.verdict + (f" [{','.join(r.flags)}]" if r.flags else "") for r in results}
    found, leads, untriaged, notes = [], [], [], []
    for folder, rs in by_folder.items():
        if not any(r.verdict == "violated" or r.expect == "violated" for r in rs) and \
                not (folder / "findings.toml").is_file():
            continue
        try:
            pf = load_findings(folder)
        except (ClaimError, OSError) as exc:
            notes.append(f"  note: {exc}")
            pf = None
        covered = pf.covered() if pf is not None else set()
        if pf is not None:
            ids = {r.claim.id for r in rs}
            for f in pf.findings:
                if ids & set(f.claims):
                    found.append(f"  {f.id} [{', '.join(f.results)}] {f.kind}, {f.severity}, evidence {f.evidence}: "
                                 + "; ".join(f"{c} {verdict[c]}" for c in f.claims if c in verdict))
            for lead in pf.leads:
                if ids & set(lead.claims):
                    leads.append(f"  {lead.id} [{', '.join(lead.results)}] {lead.category}: "
                                 + "; ".join(f"{c} {verdict[c]}" for c in lead.claims if c in verdict))
            notes += [f"  note: {w}" for w in check_against_results(pf, rs)]
        untriaged += [f"  {r.claim.id} [{r.claim.result}] verdict={r.verdict}" for r in rs
                      if (r.verdict == "violated" or r.expect == "violated") and r.claim.id not in covered]
    lines: list[str] = []
    for head, body in (("Confirmed findings (reviewed: claims/<paper>/findings.toml):", found),
                       ("Leads (read violated somewhere; not refutations, see `lemmacheck findings`):", leads),
                       ("Violated, not triaged (no finding or lead lists them):", untriaged)):
        if body:
            lines += ["", head, *body]
    trends = [f"  {r.claim.id}: {trend_text(r.regime_path)}" for r in results if r.regime_path]
    if trends:
        lines += ["", "Regime paths (does a violation persist as the width grows?):", *trends]
    if notes:
        lines += ["", *notes]
    return lines


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
        # each configuration names the search that produced it (a hunted one's may be stronger than the claim's)
        "configs": [{**cfg.to_json(), "search": config_search(chk.search, cfg.pinned) if chk else "none"}
                    for cfg in res.configs],
        "repro": claim_repro(res),
        "false_violation_bound": false_violation_bound(res),
    }
    if chk is not None:
        out.update(quantity=chk.quantity, relation=chk.relation, bound=chk.bound.text, search=chk.search,
                   searches=searches_used(chk.search, [cfg.pinned for cfg in res.configs]),
                   probability=chk.probability, requires=chk.requires.text if chk.requires else None,
                   constants=list(chk.constants))
    else:
        out["infeasible"] = c.infeasible
    if res.scaling is not None:
        out["scaling"] = res.scaling
    if res.regime_path is not None:
        out["regime_path"] = res.regime_path
    if chk is not None:  # which cells of the domain ran, and why the others did not (lemmacheck.coverage)
        out["coverage"] = coverage(c, res.configs, res.profile, res.probes)
    out["rate_is_probability"] = rate_is_probability(c) if chk is not None else None
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


def cost_text(cost: dict[str, Any]) -> str:
    """One line: a run's wall time and where its estimator and hunt seconds went (Store.cost)."""
    wall = cost.get("wall_s")
    head = f"cost: wall {wall // 60:.0f} min {wall % 60:02.0f} s; " if wall is not None else "cost: "
    parts = ", ".join(f"{k} {v:,.0f}" for k, v in cost["estimator_s_by_part"].items() if v)
    return (head + f"estimator {cost['estimator_s']:,.0f} s over {cost['shards']:,} shards ({parts or 'none'}); "
            f"{cost['hunts']} hunts {cost['hunt_cpu_s']:,.0f} CPU s")


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _fit(scaling: dict[str, Any] | None) -> str:
    """The implied-constant slope that decides the verdict (readout.deciding_slope) and its interval ("-" when not
    a scaling claim or not fitted)."""
    from .readout import deciding_slope

    found = deciding_slope(scaling)
    if found is None:
        return "-"
    k, slope, (lo, hi) = found
    text = f"C slope in {k} {slope:+.2g} [{lo:.2g}, {hi:.2g}]"
    lg = (scaling.get("log_growth") or {}).get(k)
    if lg:  # the log exponent b of Ĉ ~ (log k)^b and the decades the sweep spans
        text += f", (log {k})^{'-' if lg.get('direction') == 'decay' else ''}b b {lg['b']:+.2g} [{lg['b_ci'][0]:.2g}, {lg['b_ci'][1]:.2g}], {lg['decades']:.1f} dec"
    return text


def log_growth_text(scaling: dict[str, Any]) -> str | None:
    """One line per swept parameter: the decades a scaling verdict rests on, the fitted log exponent b of
    Ĉ ~ (log x)^b with its interval, and the largest b and power slope the sweep could have missed."""
    logs = scaling.get("log_growth") or {}
    if not logs:
        return None
    parts = []
    for k, g in logs.items():
        miss = (scaling.get("slope_max") or {}).get(k, math.nan)
        parts.append(f"{k}: {g['decades']:.1f} decades, log exponent b of {'1/' if g.get('direction') == 'decay' else ''}"
                     f"Ĉ {g['b']:+.2g} [{g['b_ci'][0]:.2g}, "
                     f"{g['b_ci'][1]:.2g}] (top of sweep {g['b_top']:+.2g} [{g['b_top_ci'][0]:.2g}, "
                     f"{g['b_top_ci'][1]:.2g}]), could miss (log {k})^{g['b_ci'][1]:.2g} or {k}^{miss:.2g}"
                     + ("; not a converging constant (convex in log log)" if g.get("concave_rejected") else ""))
    return "; ".join(parts)


def table(results: list[ClaimResult]) -> str:
    """A readable summary: one line per claim, confirmed findings listed after."""
    rows = [("claim", "result", "mode", "verdict", "flags", "worst slack", "viol. rate CI", "scaling fit",
             "configs", "vs expected")]
    for r in results:
        worst = next((c for c in r.configs if c.index == r.worst_index), None)
        ci = "-" if worst is None else _rate_cell(r.claim, *worst.violation_ci)
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
    lines += findings_sections(results)
    return "\n".join(lines)


def failure_text(res: ClaimResult) -> str:
    """What a failing pytest item prints: bound, estimate, slack, interval, search, repro."""
    c: Claim = res.claim
    lines = [f"{c.id} ({c.paper}, {c.result}): verdict {res.verdict!r}, expected {res.expect!r}"
             + (f" [flags: {', '.join(res.flags)}]" if res.flags else "")]
    chk = c.check
    if chk is not None:
        lines.append(f"  statement: {c.statement}")
        used = searches_used(chk.search, [cfg.pinned for cfg in res.configs])
        lines.append(f"  checked: {chk.quantity} {chk.relation} {chk.bound.text}; {c.quantifiers()}"
                     + (f" (configurations ran: {' + '.join(used)})" if used != [chk.search] else ""))
    for cfg in res.configs:
        if cfg.errors:
            lines.extend(f"  error: {e.splitlines()[0]}" for e in cfg.errors[:3])  # tracebacks: run's stderr
    worst = next((x for x in res.configs if x.index == res.worst_index), None)
    if worst is not None:
        lines.append(f"  worst configuration: {worst.params} ({'in' if worst.in_regime else 'OUT OF'} regime)")
        lines.append(f"    bound {_fmt(worst.bound, 6)}, estimate max {_fmt(worst.value_max, 6)} "
                     f"median {_fmt(worst.value_median, 6)}, slack min {_fmt(worst.slack_min)} "
                     f"median {_fmt(worst.slack_median)}")
        rate = ("violation-rate interval" if rate_is_probability(c) else
                "search hit rate (draws of a search for a counterexample, not a probability)")
        if chk is not None and chk.constants:  # a count at C = 1 is no violation of a hidden-constant claim
            lines.append(f"    draws above the bound at {chk.hidden_constants_at()}: {worst.violations}/{worst.replicates} "
                         "(illustrative only: no violation count; the verdict comes from the scaling fit below)"
                         + (f"; method: {worst.method}" if worst.method else ""))
        else:
            lines.append(f"    violations {worst.violations}/{worst.replicates}, {rate} "
                         f"[{worst.violation_ci[0]:.3g}, {worst.violation_ci[1]:.3g}] vs delta {worst.delta:.3g}"
                         + (f"; method: {worst.method}" if worst.method else ""))
        if worst.sequential and worst.drawn < worst.planned and worst.verdict != "inconclusive":
            lines.append(f"    stopped early: {worst.drawn} of {worst.planned} planned draws decided it "
                         "(anytime-valid confidence sequence)")
        if worst.not_reached:
            lines.append(f"    not reached within {worst.budget} steps: {worst.not_reached}/{worst.replicates} draws")
    if c.mode == "probabilistic":
        # the configurations that kept the verdict from deciding, and what would decide them
        rests = deciding(res.configs)
        undecided = [x for x in rests if x.verdict == "inconclusive" and not x.errors and not x.vacuous]
        for x in undecided[:3]:
            lines.append(f"  undecided {x.params}: violations {x.violations}/{x.replicates} vs delta {x.delta:.3g}; "
                         + draws_needed_text(x))
        if len(undecided) > 3:
            lines.append(f"  ... and {len(undecided) - 3} more undecided configurations")
        aside = [x for x in res.configs if x.verdict == "inconclusive" and x not in rests]
        if aside:
            lines.append(f"  {len(aside)} configuration(s) outside the stated regime left undecided at their planned "
                         "draws (draws until decided go where the verdict rests)")
        if chk is not None and chk.constants:
            lines.append(f"    (hidden constants at {chk.hidden_constants_at()}: this bound and slack only illustrate; "
                         "the verdict comes from the scaling fit below)")
    if res.scaling:
        s = res.scaling
        lines.append(f"  scaling: implied-constant slopes {s.get('implied_constant_slopes')} CI {s.get('slope_ci')}"
                     f" ({s.get('statistic_used') or s.get('statistic')}, tolerance {s.get('tolerance')}; fit over "
                     f"{s.get('regime', 'all configurations')})"
                     + (f"; Ĉ = 0 at the tracked level in configurations {s['zero_configs']} (bound met, not fitted)"
                        if s.get("zero_configs") else "") + f"; {s.get('reason', '')}")
        logs = log_growth_text(s)
        if logs:
            lines.append(f"  log growth: {logs}")
    if res.regime_path:
        lines.append(f"  {trend_text(res.regime_path)}")
    rep = claim_repro(res)
    if rep:
        lines.append(f"  reproduce: {rep}")
    return "\n".join(lines)
