"""HTML for the index and the claim pages. Every piece of text from a claim file or the store goes through
`esc` (or the MathML converter, whose output is sanitised); nothing user-supplied is emitted raw."""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any
from urllib.parse import quote

import sympy

from ..claims import Paper
from ..readout import deciding_slope, level_text
from ..search import config_search, searches_used
from ..stats import DEFAULT_ALPHA
from ..store import duration_seconds
from ..verdicts import SCALING_ALPHA, deciding, family_wise_bound, trend_text
from . import plots
from . import svg as S
from .assets import CSP, CSS, JS
from .data import ClaimView, Comparison, OldClaim, label_key
from .mathml import LatexError, render_statement, sanitize, sympy_mathml

VERDICT_ORDER = ["violated", "error", "inconclusive", "n/a", "holds", "infeasible"]
COUNTED = ["holds", "violated", "inconclusive", "infeasible"]
FLAG_TEXT = {
    "out-of-regime": ("warn", ("no configuration met the stated preconditions: a violation here is not a "
                              "refutation of the printed statement")),
    "violated-out-of-regime": ("warn", "violated outside the stated regime only: informative, not a refutation"),
    "finite-width": ("warn", ("the violation fades as the width grows along the claim's regime path: a "
                              "finite-width effect, not a refutation")),
    "vacuous": ("warn", "the bound is weaker than a trivial one at every configuration"),
    "partly-vacuous": ("", "the bound is weaker than a trivial one at some configurations"),
    "conditioned": ("", ("some replicates did not meet the statement's hypotheses and were set aside "
                        "(conditioning failures), never counted as violations")),
    "errors": ("bad", "the estimator failed on some shards: the verdict is not trustworthy"),
}
VERDICT_TEXT = {
    "holds": "no significant violation in the stated regime",
    "violated": "the violation rate's lower confidence bound exceeds the stated δ (or a counterexample "
                "to a deterministic statement)",
    "inconclusive": "not enough evidence either way",
    "infeasible": "the statement cannot be checked here",
    "n/a": "no verdict",
    "error": "the claim could not be evaluated",
}


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def vclass(v: str) -> str:
    return "v-" + re.sub(r"[^a-z]", "", v)


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "–"
    if s < 60:
        return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def badge(v: str, big: bool = False) -> str:
    return (f'<span class="badge {vclass(v)}{" big" if big else ""}" title="{esc(VERDICT_TEXT.get(v, v))}">'
            f"{esc(v)}</span>")


def flags_html(flags: list[str]) -> str:
    out = []
    for f in flags:
        cls, tip = FLAG_TEXT.get(f, ("", f))
        out.append(f'<span class="flag {cls}" title="{esc(tip)}">{esc(f)}</span>')
    return "".join(out)


def rich_text(s: str) -> str:
    """Paragraphs of escaped text (hard-wrapped lines joined); $...$ segments become MathML, and the plain-text
    math findings and notes are written in (||x_{i,1}|| <= sqrt(m) delta^2) gets math typography."""
    paras = [p for p in re.split(r"\n\s*\n", s.strip()) if p.strip()]
    out = []
    for p in paras:
        p = " ".join(line.strip() for line in p.splitlines())
        body, _ = render_statement(p) if "$" in p else (ascii_math(esc(p)), True)
        out.append(f"<p>{body}</p>")
    return "".join(out)


# Greek letter names that are not also English words or common identifiers (eta, mu, nu, pi, xi, chi stay)
_GREEK_WORDS = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "theta": "θ",
                "kappa": "κ", "lambda": "λ", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "psi": "ψ",
                "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Sigma": "Σ", "Phi": "Φ",
                "Omega": "Ω"}
_ASCII_OPS = (("&lt;=", "≤"), ("&gt;=", "≥"), ("!=", "≠"), ("-&gt;", "→"), ("+/-", "±"), ("||", "‖"))
_AFTER_BASE = r"(?<=[\w)\]}‖|])"  # a script attaches to a name, a closing bracket or a norm bar


def ascii_math(text: str) -> str:
    """Math typography for plain-text math in already-escaped text: relations, norms, roots, Greek names,
    sub- and superscripts (x_{i,1}, x_1, x^2, x^{l+1}, x**-4). Only unambiguous patterns: prose is untouched."""
    for a, b in _ASCII_OPS:
        text = text.replace(a, b)
    text = re.sub(r"\bsqrt(?=\()", "√", text)
    text = re.sub(_AFTER_BASE + r"_\{([^{}]{1,40})\}", r"<sub>\1</sub>", text)
    text = re.sub(_AFTER_BASE + r"_([A-Za-z0-9])(?!\w|\.\w)", r"<sub>\1</sub>", text)
    text = re.sub(_AFTER_BASE + r"\^\{([^{}]{1,40})\}", r"<sup>\1</sup>", text)
    text = re.sub(_AFTER_BASE + r"(?:\^|\*\*)(-?[A-Za-z0-9.]*[A-Za-z0-9])", r"<sup>\1</sup>", text)
    return re.sub(r"\b(" + "|".join(_GREEK_WORDS) + r")\b", lambda m: _GREEK_WORDS[m[1]], text)


def page(title: str, body: str, depth: int, header: str) -> str:
    root = "../" * depth
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="lemmacheck-report">'
        '<meta name="referrer" content="no-referrer">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<header class="top"><a class="brand" href="{root}index.html">lemmacheck</a>{header}</header>'
        f"<main>{body}</main>"
        f"<script>{JS}</script></body></html>\n")


def _hits(claim: Any) -> bool:
    """A statement about every draw: its draws are a search (often aimed at the boundary), so the rate of violating
    draws is a search hit rate, not a probability the statement is about."""
    return claim is not None and claim.check is not None and claim.check.probability == "always"


def _search_fact(declared: str, configs: list) -> str:
    """The claim's declared search and, when some configurations (hunted, corpus) ran another, which and how many."""
    other = [config_search(declared, c.pinned) for c in configs if config_search(declared, c.pinned) != declared]
    if not other:
        return declared
    return declared + "; " + ", ".join(f"{s} ({other.count(s)} hunted or corpus configuration"
                                      f"{'s' if other.count(s) > 1 else ''})" for s in dict.fromkeys(other))


def _interval(c, claim: Any = None) -> str:
    if c is None:
        return "–"
    ci = f"[{S.fmt(c.violation_ci[0], 2)}, {S.fmt(c.violation_ci[1], 2)}]"
    return f'<span title="search hit rate, not a probability">hit rate {ci}</span>' if _hits(claim) else ci


def _draws(c, pursued: bool = True) -> str:
    """How many draws a configuration's verdict needed: "120 of 400 (stopped early: anytime-valid interval)".
    `pursued`: whether the verdict rests on it (verdicts.deciding); one that does not draws only its planned
    replicates (runner._pursue_where_decided)."""
    if not pursued and c.sequential and c.verdict == "inconclusive":
        return (f"{c.drawn:,} (outside the stated regime: undecided at its planned draws; draws until decided go "
                "where the verdict rests)")
    if c.sequential and c.drawn < c.planned and c.at_bound:
        return f"{c.drawn:,} of {c.planned:,} (stopped undecided: the rate sits within the resolution of delta)"
    if c.sequential and c.drawn < c.planned and c.verdict == "inconclusive":
        need = f"; about {c.draws_needed:,} would decide it" if c.draws_needed else ""
        return f"{c.drawn:,} of {c.planned:,} (stopped undecided: the budget could not decide it{need})"
    if c.sequential and c.drawn < c.planned:
        return f"{c.drawn:,} of {c.planned:,} (stopped early: anytime-valid interval)"
    return f"{c.drawn:,}" + (" (early stop on, never decided: all drawn)" if c.sequential else "")


def _num_attr(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(float(x))


def _run_header(info: dict[str, Any]) -> str:
    return (f'<span class="sub">run {esc(info["run_id"])} · {esc(info["profile"])} profile · seed '
            f'{esc(info["seed"])} · {esc(info.get("finished") or "unfinished")}</span>')


def change_badges(ch) -> str:
    if ch is None:
        return ""
    out = []
    if ch.status == "new":
        out.append('<span class="flag good" title="not in the compared run">new</span>')
        return "".join(out)
    if ch.started_failing:
        out.append('<span class="flag bad" title="was ok in the compared run">started failing</span>')
    if ch.fixed:
        out.append('<span class="flag good" title="was failing in the compared run">fixed</span>')
    if ch.verdict_changed:
        out.append(f'<span class="flag warn" title="verdict in the compared run → now">verdict '
                   f'{esc(ch.old_verdict)} → {esc(ch.new_verdict)}</span>')
    if ch.slack_moved:
        cls = "bad" if ch.slack_moved == "tighter" else ""
        out.append(f'<span class="flag {cls}" title="worst slack moved by more than the new run\'s '
                   f'spread (interquartile range of log-slack at its worst configuration)">slack '
                   f'{esc(S.fmt(ch.old_slack))} → {esc(S.fmt(ch.new_slack))} ({esc(ch.slack_moved)})</span>')
    return "".join(out)


# --------------------------------------------------------------------------------------------- index

def _reach_html(f: Any, graph_href: str | None, link: Any) -> str:
    """A finding's checked reach (lemmacheck.findings): each main result's consequence, then the rest of the reach."""
    if f.reach_note:
        return esc(f.reach_note)
    how = {"shown": "shown violated by", "absorbed": "absorbed", "gap": "survives, proof gap; checked by"}
    parts = [f"<b>{esc(q.result)}</b> {how[q.status]} " + (link(q.claim) if q.claim else f"<q>{esc(q.line)}</q>")
             for q in f.consequences]
    rest = [r for r in f.reach if r not in {q.result for q in f.consequences}]
    if rest:
        parts.append("also " + esc(", ".join(rest)))
    out = " · ".join(parts) or "no other result rests on it"
    return out + (f' (<a href="{esc(graph_href)}">proof graph</a>)' if graph_href else "")


def _findings_sections(views: list[ClaimView], graphs: dict[str, str] | None = None) -> list[str]:
    """The reviewed findings of each paper (claims/<paper>/findings.toml) covering claims of this run, then the
    leads (violated somewhere, not refutations), then violated claims no findings.toml lists. `graphs`: paper ->
    href of its proof-graph page, linked from each finding's reach."""
    from ..errors import ClaimError
    from ..findings import load_findings

    folders: dict[Any, list[ClaimView]] = {}
    for v in views:
        if v.claim is not None:
            folders.setdefault(v.claim.source.parent, []).append(v)
    by_id = {v.claim_id: v for v in views}
    found, leads, untriaged, notes = [], [], [], []

    def link(cid: str) -> str:
        v = by_id.get(cid)
        if v is None:  # a consequence claim this run did not include
            return f"<code>{esc(cid)}</code>"
        return f'<a href="claims/{quote(v.slug)}.html">{esc(cid)}</a> {badge(v.verdict)}{flags_html(v.res.flags if v.res else [])}'

    for folder, vs in folders.items():
        if not any(v.verdict == "violated" or v.expect == "violated" for v in vs) and \
                not (folder / "findings.toml").is_file():
            continue
        try:
            pf = load_findings(folder)
        except (ClaimError, OSError) as exc:
            notes.append(f'<div class="card warnbox">{esc(exc)}</div>')
            pf = None
        covered = pf.covered() if pf is not None else set()
        ids = {v.claim_id for v in vs}
        for f in pf.findings if pf is not None else []:
            if ids & set(f.claims):
                found.append(f"<li><b>{esc(f.id)}</b> · {esc(', '.join(f.results))} · {esc(f.kind)}, "
                             f"{esc(f.severity)}, evidence {esc(f.evidence)}"
                             f'<div class="prose small">{rich_text(f.statement)}</div>'
                             f'<div class="small">impact: {esc(f.impact)}</div>'
                             f'<div class="small">repair: {esc(f.repair)}</div>'
                             f'<div class="small">reach: {_reach_html(f, (graphs or {}).get(vs[0].paper), link)}</div>'
                             f'<div class="small">claims: {" · ".join(link(c) for c in f.claims if c in by_id)}'
                             f'</div><div class="small">witness: <code>{esc(f.witness.name)}</code>; reproduce: '
                             f"<code>{esc(f.reproduce)}</code></div></li>")
        for lead in pf.leads if pf is not None else []:
            if ids & set(lead.claims):
                leads.append(f"<li><b>{esc(lead.id)}</b> · {esc(', '.join(lead.results))}"
                             f'<div class="small">why not a refutation: {esc(lead.reason)}</div>'
                             f'<div class="small">what would decide it: {esc(lead.decide)}</div>'
                             f'<div class="small">claims: {" · ".join(link(c) for c in lead.claims if c in by_id)}'
                             "</div></li>")
        untriaged += [f"<li>{link(v.claim_id)} {esc(v.label)}</li>" for v in vs
                      if (v.verdict == "violated" or v.expect == "violated") and v.claim_id not in covered]
    out = list(notes)
    if found:
        out.append('<section class="card findings"><h2>Confirmed findings: published statements that fail</h2>'
                   '<p class="note">Reviewed (in regime, independent of hidden constants, with a standalone witness); '
                   f"from each paper's findings.toml.</p><ul>{''.join(found)}</ul></section>")
    if leads:
        out.append('<section class="card"><h2>Leads: violated somewhere, not refutations</h2>'
                   f"<ul>{''.join(leads)}</ul></section>")
    if untriaged:
        out.append('<section class="card"><h2>Violated, not triaged</h2><p class="note">No finding or lead of the '
                   f"paper's findings.toml lists these claims.</p><ul>{''.join(untriaged)}</ul></section>")
    return out


def index_page(info: dict[str, Any], views: list[ClaimView], cmp: Comparison | None,
               removed: list[OldClaim], notes: list[str], papers_info: dict[str, Paper] | None = None,
               graphs: dict[str, str] | None = None) -> str:
    """`graphs`: paper -> href of its proof-graph page (report.graphpage), linked from the paper's section."""
    papers_info = papers_info or {}
    graphs = graphs or {}
    papers: dict[str, list[ClaimView]] = {}
    for v in sorted(views, key=lambda v: (v.paper, label_key(v.label), v.claim_id)):
        papers.setdefault(v.paper, []).append(v)
    body: list[str] = []
    n_cfg = sum(len(v.res.configs) for v in views if v.res)
    n_rep = sum(c.drawn for v in views if v.res for c in v.res.configs)
    total_s = sum(v.seconds for v in views)
    dur = duration_seconds(info.get("started"), info.get("finished"))
    body.append(f"<h1>Results: run {esc(info['run_id'])}</h1>")
    body.append(f'<p class="meta">{len(views)} claims from {len(papers)} papers · {n_cfg} configurations · '
                f"{n_rep:,} replicates · {fmt_seconds(total_s)} of estimator time</p>")
    for n in notes:
        body.append(f'<div class="card warnbox">{esc(n)}</div>')

    # Confirmed findings first: they are the point of the exercise. Only reviewed ones (findings.toml) count.
    body += _findings_sections(views, graphs)

    if cmp is not None:
        body.append(_changes_section(views, cmp, removed))

    # Coverage at a glance: (encoded, not yet encoded) results per paper that has a _paper.toml.
    coverage = {p: papers_info[p].coverage([v.label for v in vs]) for p, vs in papers.items() if p in papers_info}
    rows = []
    tot = {k: 0 for k in COUNTED + ["other", "unexpected", "all"]}
    cells_all: list[tuple[int, int]] = []  # (ran, admitted) domain cells per checked claim (lemmacheck.coverage)
    for p, vs in papers.items():
        cnt = {k: sum(1 for v in vs if v.verdict == k) for k in COUNTED}
        other = len(vs) - sum(cnt.values())
        unexpected = sum(1 for v in vs if not v.ok)
        for k in COUNTED:
            tot[k] += cnt[k]
        tot["other"] += other
        tot["unexpected"] += unexpected
        tot["all"] += len(vs)
        cells = [x for x in (coverage_counts(v) for v in vs) if x is not None]
        cells_all += cells
        rows.append(_coverage_row(f'<a href="#paper-{esc(_anchor(p))}">{esc(p)}</a>', cnt, other, unexpected,
                                  len(vs), _encoded_cell(coverage.get(p)) + _cells_cell(cells)))
    enc = list(coverage.values())
    all_enc = (f'<td class="num">{sum(len(d) for d, _ in enc)} / {sum(len(d) + len(m) for d, m in enc)}</td>'
               if enc else '<td class="num">–</td>')
    rows.append(_coverage_row("<b>all</b>", {k: tot[k] for k in COUNTED}, tot["other"], tot["unexpected"],
                              tot["all"], all_enc + _cells_cell(cells_all)))
    body.append('<h2>Coverage</h2><div class="tablewrap"><table class="coverage"><thead><tr><th>paper</th>'
                '<th class="num" title="the paper\'s formal results that have at least one claim file '
                '(from claims/&lt;paper&gt;/_paper.toml)">results encoded</th>'
                '<th class="num" title="cells of the claims\' domains that ran / admitted: each admitted geometry '
                'at each n, and each edge of a declared parameter (a claim\'s page lists the rest and why)">'
                'domain cells ran</th>'
                + "".join(f'<th class="num">{k}</th>' for k in COUNTED)
                + '<th class="num" title="inconclusive scaling fits, errors">other</th>'
                  '<th class="num" title="verdict differs from the claim\'s expectation, or estimator errors">'
                  'unexpected</th><th class="num">claims</th><th>distribution</th></tr></thead><tbody>'
                + "".join(rows) + "</tbody></table></div>"
                + '<p class="note">Verdict counts are per claim file; a result may have several claims (both '
                  "printed forms, corrected variants, claims embedded in its proof).</p>")

    # Filter controls and one table per paper.
    opts = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in COUNTED + ["n/a", "error"]
                   if any(x.verdict == v for x in views))
    body.append('<h2>Claims</h2><div class="controls">'
                '<input type="search" id="filter-text" placeholder="Filter: id, label, title, kind, flag…" '
                'aria-label="filter claims">'
                f'<select id="filter-verdict" aria-label="verdict"><option value="">all verdicts</option>{opts}'
                '</select><label><input type="checkbox" id="filter-unexpected"> only unexpected'
                f'{" or changed" if cmp else ""}</label><span class="count" id="filter-count"></span></div>')
    for p, vs in papers.items():
        cnt = {k: sum(1 for v in vs if v.verdict == k) for k in COUNTED}
        summary = " · ".join(f"{n} {k}" for k, n in cnt.items() if n)
        head = ('<th data-type="num">result</th><th>title</th><th>kind</th><th data-type="num">verdict</th>'
                '<th class="num" data-type="num" title="smallest slack over all replicates and configurations '
                '(1 is tight, below 1 a violation); † outside the stated regime">worst slack</th>'
                '<th class="num" data-type="num" title="Clopper–Pearson interval for the violation rate at the '
                'worst configuration, and the stated δ">violation rate</th><th>search</th>'
                '<th class="num" data-type="num" title="estimator time: sum of shard seconds">time</th>'
                + ('<th data-type="num">change</th>' if cmp else ""))
        trs = [_index_row(i, v, cmp is not None) for i, v in enumerate(vs)]
        glink = f' · <a class="graph-link" href="{esc(graphs[p])}">proof graph</a>' if p in graphs else ""
        body.append(f'<section class="paper" id="paper-{esc(_anchor(p))}"><h3>{esc(p)} '
                    f'<span class="small">{len(vs)} claims · {esc(summary)}{glink}</span></h3>'
                    + _citation(papers_info.get(p))
                    + f'<div class="tablewrap"><table class="claims sortable"><thead><tr>{head}</tr></thead>'
                    f"<tbody>{''.join(trs)}</tbody></table></div>"
                    + _missing(papers_info.get(p), coverage.get(p)) + "</section>")

    body.append(_run_section(info, dur, total_s, family_wise_bound([v.res for v in views if v.res])))
    body.append(_legend_section())
    return page(f"lemmacheck: run {info['run_id']}", "".join(body), 0, _run_header(info))


def _anchor(p: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", p)


def _citation(paper: Paper | None) -> str:
    if paper is None:
        return ""
    # The address is shown as text, not linked: the published pages reference nothing outside themselves.
    where = re.sub(r"^[a-z]+://", "", paper.link)
    return (f'<p class="small">{esc(paper.authors)}. <i>{esc(paper.title)}</i>. {esc(paper.venue)}.'
            + (f" <code>{esc(where)}</code>" if where else "") + "</p>")


def _encoded_cell(cov: tuple[list[str], list[str]] | None) -> str:
    if cov is None:
        return '<td class="num">–</td>'
    done, missing = cov
    tip = f"not yet encoded: {', '.join(missing)}" if missing else "every listed result has a claim"
    return f'<td class="num" title="{esc(tip)}">{len(done)} / {len(done) + len(missing)}</td>'


def _cells_cell(cells: list[tuple[int, int]]) -> str:
    """The index's "domain cells ran" cell: ran / admitted summed over claims (lemmacheck.coverage)."""
    if not cells:
        return '<td class="num">–</td>'
    ran, admitted = sum(a for a, _ in cells), sum(b for _, b in cells)
    return (f'<td class="num" title="{len(cells)} checked claim(s)">{ran} / {admitted}'
            + (f' <span class="small">({100 * ran / admitted:.0f}%)</span>' if admitted else "") + "</td>")


def _missing(paper: Paper | None, cov: tuple[list[str], list[str]] | None) -> str:
    if paper is None or cov is None:
        return ""
    done, missing = cov
    if not missing:
        return (f'<p class="note">All {len(paper.results)} formal results of the paper have a claim '
                f"({esc(paper.scope)}).</p>")
    return (f'<p class="note">{len(done)} of {len(paper.results)} formal results encoded ({esc(paper.scope)}). '
            f"Not yet encoded ({len(missing)}): {esc(', '.join(missing))}.</p>")


def _coverage_row(name: str, cnt: dict[str, int], other: int, unexpected: int, total: int,
                  encoded: str = "") -> str:
    segs = []
    for k in COUNTED:
        if cnt[k]:
            segs.append(f'<span class="b-{k}" style="width:{100 * cnt[k] / max(total, 1):.2f}%" '
                        f'title="{cnt[k]} {k}"></span>')
    if other:
        segs.append(f'<span class="b-error" style="width:{100 * other / max(total, 1):.2f}%" '
                    f'title="{other} other"></span>')
    cells = "".join(f'<td class="num">{cnt[k] or ""}</td>' for k in COUNTED)
    warn = f'<b style="color:var(--violated)">{unexpected}</b>' if unexpected else ""
    return (f"<tr><td>{name}</td>{encoded}{cells}<td class=\"num\">{other or ''}</td><td class=\"num\">{warn}</td>"
            f'<td class="num">{total}</td><td><div class="bar">{"".join(segs)}</div></td></tr>')


def _index_row(order: int, v: ClaimView, compare: bool) -> str:
    w = v.worst()
    classes = []
    if not v.ok:
        classes.append("unexpected")
    if v.change is not None and v.change.any:
        classes.append("changed")
    flags = flags_html(v.res.flags) if v.res else ""
    expect = v.expect
    unexpected = ""
    if v.res and v.verdict != expect:
        unexpected = f'<span class="flag bad" title="the claim file expects {esc(expect)}">expected ' \
                     f"{esc(expect)}</span>"
    if v.error:
        unexpected = f'<span class="flag bad" title="{esc(v.error)}">not evaluated</span>'
    sl = w.slack_min if w else None
    dagger = ' <span title="worst configuration is outside the stated regime">†</span>' \
        if w is not None and not w.in_regime else ""
    delta = f'<div class="small">δ = {esc(S.fmt(w.delta))}</div>' if w is not None else ""
    if w is not None and v.claim and v.claim.check and v.claim.check.constants:
        dagger += f'<div class="small" title="a scaling claim: its verdict comes from the fit; slack uses the ' \
                  f'bound with hidden constants at these values">at {esc(v.claim.check.hidden_constants_at())}</div>'

    # every search that produced a configuration: a hunted one's may be stronger than the claim's declared one
    search = (" + ".join(searches_used(v.claim.check.search, [c.pinned for c in v.res.configs] if v.res else []))
              if v.claim and v.claim.check else "–")
    kind = v.claim.kind if v.claim else v.definition.get("kind", "")
    mode = v.claim.mode if v.claim else ""
    sev = VERDICT_ORDER.index(v.verdict) if v.verdict in VERDICT_ORDER else len(VERDICT_ORDER)
    chg = ""
    if compare:
        ch = v.change
        rank = 0 if ch and ch.started_failing else 1 if ch and ch.verdict_changed else \
            2 if ch and ch.slack_moved else 3 if ch and ch.any else 4
        chg = f'<td data-v="{rank}">{change_badges(ch)}</td>'
    return (f'<tr data-verdict="{esc(v.verdict)}" class="{" ".join(classes)}">'
            f'<td class="label" data-v="{order}"><a href="claims/{quote(v.slug)}.html">{esc(v.label)}</a></td>'
            f'<td>{esc(v.title)}<div class="small">{esc(v.claim_id)}</div></td>'
            f'<td>{esc(kind)}<div class="small">{esc(mode)}</div></td>'
            f'<td data-v="{sev}">{badge(v.verdict)}{flags}{unexpected}</td>'
            f'<td class="num" data-v="{_num_attr(sl)}">{esc(S.fmt(sl))}{dagger}</td>'
            f'<td class="num" data-v="{_num_attr(w.violation_ci[1] if w else None)}">{_interval(w, v.claim)}{delta}</td>'
            f"<td>{esc(search)}</td>"
            f'<td class="num" data-v="{_num_attr(v.seconds)}">{fmt_seconds(v.seconds) if v.res and v.res.configs else "–"}</td>'
            f"{chg}</tr>")


def _changes_section(views: list[ClaimView], cmp: Comparison, removed: list[OldClaim]) -> str:
    def link(v: ClaimView) -> str:
        return (f'<a href="claims/{quote(v.slug)}.html">{esc(v.paper)} · {esc(v.label)}</a> '
                f'<span class="small">{esc(v.claim_id)}</span>')

    failing = [v for v in views if v.change and v.change.started_failing]
    fixed = [v for v in views if v.change and v.change.fixed]
    verdict = [v for v in views if v.change and v.change.verdict_changed]
    slack = [v for v in views if v.change and v.change.slack_moved]
    new = [v for v in views if v.change and v.change.status == "new"]
    parts = []
    started = cmp.info.get("started", "")
    parts.append(f'<p class="note">Compared with run {esc(cmp.run_id)} ({esc(cmp.info.get("profile"))} profile, '
                 f'seed {esc(cmp.info.get("seed"))}, started {esc(started)}) of <code>{esc(cmp.path)}</code>. '
                 "Each run is judged by its own claim definitions. A worst slack counts as moved when its change "
                 "on the log scale exceeds the new run's spread: the interquartile range of log-slack over the "
                 "replicates of the new run's worst configuration.</p>")

    def block(title: str, vs: list[ClaimView], cls: str = "") -> None:
        if vs:
            parts.append(f'<h3 class="{cls}">{esc(title)} ({len(vs)})</h3><ul>'
                         + "".join(f"<li>{link(v)} {change_badges(v.change)}</li>" for v in vs) + "</ul>")

    block("Started failing", failing)
    block("Verdict changed", [v for v in verdict if v not in failing])
    block("Fixed", [v for v in fixed if v not in verdict])
    block("Worst slack moved beyond the new run's spread", [v for v in slack if v not in verdict])
    block("New claims", new)
    if removed:
        parts.append(f"<h3>Removed claims ({len(removed)})</h3><ul>" + "".join(
            f"<li>{esc(o.paper)} · {esc(o.label)} <span class=\"small\">{esc(o.claim_id)}</span> "
            f"(was {badge(o.verdict)})</li>" for o in removed) + "</ul>")
    if not (failing or fixed or verdict or slack or new or removed):
        parts.append("<p>No changes: same claims, same verdicts, worst slacks within the spread.</p>")
    return f'<section class="card changes"><h2>Changes since run {esc(cmp.run_id)}</h2>{"".join(parts)}</section>'


def _run_section(info: dict[str, Any], dur: float | None, total_s: float, fw: dict[str, Any] | None = None) -> str:
    versions = info.get("versions") or {}
    vers = " · ".join(f"{esc(k)} {esc(v)}" for k, v in sorted(versions.items()))
    facts = [
        ("run", f"{esc(info['run_id'])}"),
        ("seed", esc(info["seed"])),
        ("profile", esc(info["profile"])),
        ("started", esc(info.get("started") or "–")),
        ("finished", esc(info.get("finished") or "unfinished")),
        ("wall-clock span", (fmt_seconds(dur) + " (start to finish, including any pause before a --resume or "
                             "--update)") if dur is not None else "–"),
        ("estimator time", f"{fmt_seconds(total_s)} (sum over shards)"),
        ("machine", esc(info.get("device", ""))),
        ("versions", vers),
        ("error control", (f"α = {S.fmt(DEFAULT_ALPHA)} per configuration (two-sided Clopper–Pearson), scaling slopes "
                           f"at 1 − {S.fmt(SCALING_ALPHA)} per claim; over every claim of this run, the chance that "
                           f"any true claim reads “violated” is at most {S.fmt((fw or {}).get('bound', 0.0))} ("
                           + esc(", ".join(f"{k} {S.fmt(v)}" for k, v in sorted((fw or {}).get("by_mode", {}).items())))
                           + "; Bonferroni). “holds” means not refuted at this confidence, never proved")),
        ("data", ('<a href="results.json">results.json</a> (every claim and configuration) · '
                 '<a href="results.csv">results.csv</a> (one row per configuration)')),
    ]
    return ('<h2>Run</h2><div class="card"><dl class="facts">'
            + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl></div>")


def _legend_section() -> str:
    items = "".join(f"<dt>{badge(k)}</dt><dd>{esc(t)}</dd>" for k, t in VERDICT_TEXT.items() if k != "n/a")
    items += "".join(f'<dt><span class="flag {c}">{esc(k)}</span></dt><dd>{esc(t)}</dd>'
                     for k, (c, t) in FLAG_TEXT.items())
    return ('<h2>Reading this report</h2><div class="card"><dl class="facts legendtext">' + items +
            "<dt>slack</dt><dd>bound/estimate for upper bounds, estimate/bound for lower bounds: 1 is tight, below "
            "1 is a violation.</dd><dt>search</dt><dd>how a “for all” was approached; a search can refute a "
            "universal statement, never prove it.</dd></dl></div>")


# --------------------------------------------------------------------------------------------- claim page

def _math_or_code(make) -> str:
    try:
        return make()
    except (LatexError, Exception) as exc:  # noqa: BLE001  (sympy's printers raise many types)
        return f'<code title="{esc(exc)}">?</code>'


def _relation_mathml(view: ClaimView) -> str:
    chk = view.claim.check
    rel = {"<=": "≤", "<": "<", ">=": "≥", ">": ">"}[chk.relation]
    frag = chk.bound.mathml

    def make() -> str:
        inner = sanitize(frag)[len("<math>"):-len("</math>")]
        q = html.escape(chk.quantity)
        return '<span class="formula">' + sanitize(
            f'<math><mrow><mtext class="mtt">{q}</mtext><mo>{html.escape(rel)}</mo>{inner}</mrow></math>') + "</span>"

    return _math_or_code(make)


def _requires_list(view: ClaimView) -> str:
    chk = view.claim.check
    if chk.requires is None:
        return "<p>none stated</p>"
    sym = chk.requires.sym
    parts = list(sym.args) if isinstance(sym, sympy.And) else [sym]
    lis = []
    for p in parts:
        lis.append("<li>" + _math_or_code(lambda p=p: sympy_mathml(sympy.mathml(p, printer="presentation")))
                   + "</li>")
    consts = ", ".join(f"{esc(k)} = {esc(S.fmt(v))}" for k, v in chk.regime_constants.items()
                       if k in chk.requires.names)
    extra = f'<p class="small">regime constants evaluated at {consts}</p>' if consts else ""
    return f'<ul class="requires">{"".join(lis)}</ul>{extra}<details><summary>as written</summary>' \
           f"<pre>{esc(chk.requires.text)}</pre></details>"


def _figure(fig: tuple[str, str, str] | None, title: str) -> str:
    if fig is None:
        return ""
    plot, legend, caption = fig
    return f'<div class="figure"><h3>{esc(title)}</h3>{plot}{legend}<p class="caption">{esc(caption)}</p></div>'


def _scaling_section(view: ClaimView) -> str:
    sc = view.res.scaling if view.res else None
    if not sc:
        return ""
    rows = []
    swept = sc.get("swept") or []
    for k in swept:
        claimed = sc["claimed_exponents"].get(k)
        fitted = sc["fitted_exponents"].get(k)
        slope = sc["implied_constant_slopes"].get(k)
        lo, hi = sc["slope_ci"].get(k, [math.nan, math.nan])
        rows.append(f"<tr><td>{esc(k)}</td><td class=\"num\">{esc(S.fmt(claimed))}</td>"
                    f"<td class=\"num\">{esc(S.fmt(fitted))}</td>"
                    f"<td class=\"num\">[{esc(S.fmt(claimed + lo))}, {esc(S.fmt(claimed + hi))}]</td>"
                    f"<td class=\"num\">{esc(S.fmt(slope))}</td>"
                    f"<td class=\"num\">[{esc(S.fmt(lo))}, {esc(S.fmt(hi))}]</td></tr>")
    table = ""
    if rows:
        level = f'{level_text(sc.get("interval_level"))} interval'
        table = ('<div class="tablewrap"><table><thead><tr><th>parameter</th><th class="num">claimed exponent'
                 f'</th><th class="num">fitted exponent</th><th class="num">{level}</th>'
                 f'<th class="num">Ĉ slope</th><th class="num">{level}</th></tr></thead><tbody>'
                 + "".join(rows) + "</tbody></table></div>")
    reason = f'<p class="note">{esc(sc["reason"])}</p>' if sc.get("reason") else ""
    if sc.get("regime"):
        reason += (f'<p class="note">Fit over {esc(sc["regime"])}: {len(sc.get("configs_used", []))} '
                   "configuration(s).")
        if sc.get("all_configs"):
            reason += (" The same fit over every configuration, out-of-regime ones included, gives "
                       f'{badge(str(sc["all_configs"].get("verdict")))} (informative only).')
        reason += "</p>"
    facts = (f'<p>Shape (hidden constants {esc(", ".join(sc.get("constants", [])))} set to 1): '
             f'<code>{esc(sc.get("shape", ""))}</code>. Verdict of the fit: {badge(str(sc.get("verdict")))}; '
             f'tolerance on the implied-constant slope: {esc(S.fmt(sc.get("tolerance")))}. '
             f'Largest implied constant seen: {esc(S.fmt(sc.get("implied_constant_max")))}.</p>')
    return ('<h2>Scaling law</h2><p class="note">The bound has hidden constants, so it is checked as a scaling '
            "law: the implied constant Ĉ = quantity / shape must not grow along the sweep. Fitted exponent = "
            f"claimed exponent + slope of log Ĉ ({esc(sc.get('interval') or 'order-statistic')} intervals).</p>"
            + facts + table + reason + '<div class="sweep single">'
            + _figure(plots.scaling_plot(view), "Implied constant along the sweep") + "</div>")


def _params_table(p: dict[str, Any]) -> str:
    return "".join(f"<tr><td>{esc(k)}</td><td class=\"num\">{esc(S.fmt(float(v), 8))}</td></tr>"
                   for k, v in p.items())


def _worst_section(view: ClaimView) -> str:
    w = view.worst()
    if w is None:
        return ""
    repro = view.repro()
    worst = w.worst or {}
    facts = [
        ("regime", "inside the stated regime" if w.in_regime else "<b>outside</b> the stated regime"),
        ("verdict here", badge(w.verdict)),
        ("bound", esc(S.fmt(w.bound, 8))),
        ("worst replicate", (f"value {esc(S.fmt(worst.get('value'), 8))} (shard {esc(worst.get('shard'))}, "
                            f"replicate {esc(worst.get('replicate'))})")),
        ("slack", f"min {esc(S.fmt(w.slack_min, 5))}, median {esc(S.fmt(w.slack_median, 5))}"),
        ("violations", (f"{w.violations} of {w.replicates} ("
                        + (_interval(w, view.claim) if _hits(view.claim) else "interval " + _interval(w))
                        + f", δ = {esc(S.fmt(w.delta))})")),
        ("draws", esc(_draws(w, w in deciding(view.res.configs)))),
        ("estimate", f"median {esc(S.fmt(w.value_median, 6))}, max {esc(S.fmt(w.value_max, 6))}"),
        ("method", esc(w.method or "–")),
        ("seed", esc(w.seed)),
    ]
    if w.conditioning_failures:
        facts.append(("conditioning", f"{w.conditioning_failures} replicate(s) did not meet the hypotheses"))
    return ('<h2>Worst configuration</h2><div class="card"><div class="plots"><div><dl class="facts">'
            + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl></div>"
            + '<div><table><thead><tr><th>parameter</th><th class="num">value</th></tr></thead><tbody>'
            + _params_table(w.params) + "</tbody></table></div></div>"
            + (f'<h3>Reproduce</h3><pre><code>{esc(repro)}</code></pre>' if repro else "") + "</div>")


def _replicates_fact(configs) -> str:
    """Draws the verdict needed: drawn, and with early stop the planned budget and how many configurations the
    confidence sequence settled before it."""
    drawn = sum(c.drawn for c in configs)
    seq = [c for c in configs if c.sequential]
    if not seq:
        return f"{drawn:,}"
    planned = sum(c.planned if c.sequential else c.drawn for c in configs)
    early = sum(1 for c in seq if c.drawn < c.planned)
    return (f"{drawn:,} of {planned:,} planned (early stop: {early} of {len(seq)} configurations settled "
            "before their budget)")


def _configs_table(view: ClaimView) -> str:
    res = view.res
    if not res or not res.configs:
        return ""
    names = list(view.claim.params) if view.claim else sorted({k for c in res.configs for k in c.params})
    varying = [k for k in names if len({c.params.get(k) for c in res.configs}) > 1] or names[:4]
    head = "".join(f'<th class="num" data-type="num">{esc(k)}</th>' for k in varying)
    rows = []
    rests = deciding(res.configs)  # the configurations the verdict rests on (their draws column says why not)
    for c in res.configs:
        cells = "".join(f'<td class="num" data-v="{_num_attr(float(c.params[k]))}">{esc(S.fmt(float(c.params[k]), 6))}'
                        "</td>" if k in c.params else "<td></td>" for k in varying)
        err = f'<div class="small" style="color:var(--violated)">{esc("; ".join(c.errors)[:400])}</div>' \
            if c.errors else ""
        vac = '<span class="flag warn">vacuous</span>' if c.vacuous else ""
        rows.append(
            f'<tr><td class="num" data-v="{c.index}">{c.index}</td>{cells}'
            f'<td data-v="{int(c.in_regime)}">{"yes" if c.in_regime else "<b>no</b>"}</td>'
            f'<td>{badge(c.verdict)}{vac}{err}</td>'
            f'<td class="num" data-v="{_num_attr(c.slack_min)}">{esc(S.fmt(c.slack_min))}</td>'
            f'<td class="num" data-v="{_num_attr(c.slack_median)}">{esc(S.fmt(c.slack_median))}</td>'
            f'<td class="num" data-v="{c.violations}">{c.violations}/{c.replicates}</td>'
            f'<td class="num" data-v="{c.drawn}" title="{esc(_draws(c, c in rests))}">{c.drawn:,}'
            f'{"*" if c.sequential and c.drawn < c.planned else ""}</td>'
            f'<td class="num" data-v="{_num_attr(c.violation_ci[1])}">{_interval(c, view.claim)}</td>'
            f'<td class="num" data-v="{_num_attr(c.delta)}">{esc(S.fmt(c.delta))}</td>'
            f'<td class="num" data-v="{_num_attr(c.bound)}">{esc(S.fmt(c.bound, 5))}</td>'
            f'<td class="num" data-v="{_num_attr(c.value_median)}">{esc(S.fmt(c.value_median, 5))}</td>'
            f'<td class="num" data-v="{_num_attr(c.seconds)}">{fmt_seconds(c.seconds)}</td></tr>')
    note = ""
    chk = view.claim.check if view.claim else None
    if chk is not None and chk.constants:
        note = (f'<p class="note">A scaling claim: bound, slack and violations below use the hidden constants at '
                f"{esc(chk.hidden_constants_at())}; the verdict comes from the fit of the implied constant, not from these counts.</p>")
    return ('<h2>All configurations</h2>' + note + '<div class="tablewrap"><table class="sortable configs"><thead><tr>'
            f'<th class="num" data-type="num">#</th>{head}<th data-type="num">in regime</th><th>verdict</th>'
            '<th class="num" data-type="num">slack min</th><th class="num" data-type="num">slack median</th>'
            '<th class="num" data-type="num">violations</th>'
            '<th class="num" data-type="num" title="draws the verdict needed; * stopped early by the anytime-valid '
            'confidence sequence">draws</th><th class="num" data-type="num">interval</th>'
            '<th class="num" data-type="num">δ</th><th class="num" data-type="num">bound</th>'
            '<th class="num" data-type="num">median estimate</th><th class="num" data-type="num">time</th>'
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")


_CELL_LOOK = {  # state -> (mark, background): a compact grid, the reason in each cell's title and listed below
    "ran": ("✓", "var(--holds-bg)"), "error": ("!", "var(--violated-bg)"), "not run": ("·", "var(--inconclusive-bg)"),
    "refused": ("–", "var(--infeasible-bg)"), "premise": ("P", "var(--infeasible-bg)"), "-": ("", ""),
    "probed": ("h", ""),
}
COVERAGE_ROWS = 8  # geometry rows shown; more are summarised in one line
COVERAGE_COLUMNS = 12  # n columns shown: the first and the last half of them, "…" between
COVERAGE_REASONS = 12  # skipped-cell reasons listed; more are counted


def _coverage_cell(cell: dict[str, Any]) -> str:
    mark, bg = _CELL_LOOK.get(cell["state"], ("?", ""))
    if cell["state"] in ("ran", "error"):
        tip = f"{cell['configs']} configuration(s)" + (f", {cell['out_of_regime']} out of regime"
                                                      if cell.get("out_of_regime") else "")
        tip += f", {cell['errored']} with errors only" if cell.get("errored") else ""
        mark += str(cell["configs"]) if cell["configs"] > 1 else ""
    elif cell["state"] == "probed":
        tip = f"probed by the hunt only ({cell['probes']} probe(s), a few draws each: reach, not part of the verdict)"
        mark += str(cell["probes"]) if cell["probes"] > 1 else ""
    else:
        tip = f"{cell['state']}: {cell.get('why', '')}" if cell["state"] != "-" \
            else "no hunted or corpus dataset recorded at this n"
    style = f' style="background:{bg}"' if bg else ""
    return f'<td class="num" title="{esc(tip)}"{style}>{esc(mark)}</td>'


def coverage_counts(view: ClaimView) -> tuple[int, int] | None:
    """(cells ran, cells admitted) of the claim's coverage table; None when it has none."""
    cov = view.coverage()
    return (cov["cells"]["ran"], cov["cells"]["admitted"]) if cov else None


def _coverage_section(view: ClaimView) -> str:
    from ..coverage import skipped_reasons

    cov = view.coverage()
    if not cov:
        return ""
    c = cov["cells"]
    parts = [(f'<p>{c["ran"]} of {c["admitted"]} admitted cells ran ({cov["configs"]} stored configurations)'
              + (f', {c["probed"]} more were probed by the hunt ({cov["probes"]} probes)' if c.get("probed") else "")
              + ": each geometry the claim admits at each n, and each edge of a declared parameter.</p>")]
    grid = cov.get("datasets")
    if grid and grid["rows"]:
        rows = grid["rows"][:COVERAGE_ROWS]
        ncol, half = len(grid["n_values"]), COVERAGE_COLUMNS // 2
        shown = list(range(ncol)) if ncol <= COVERAGE_COLUMNS else [*range(half), -1, *range(ncol - half, ncol)]
        gap = f'<td class="num" title="{ncol - 2 * half} more n (results.json has them)">…</td>'
        head = "".join(gap.replace("td", "th") if j < 0 else f'<th class="num">{esc(grid["n_values"][j])}</th>'
                       for j in shown)
        trs = "".join(f"<tr><td>{esc(r['geometry'])}{'' if r['declared'] else ' <span class=small>(hunt)</span>'}"
                      f"</td>{''.join(gap if j < 0 else _coverage_cell(r['cells'][j]) for j in shown)}</tr>"
                      for r in rows)
        more = (f'<p class="note">… and {len(grid["rows"]) - len(rows)} more rows (results.json has them).</p>'
                if len(grid["rows"]) > len(rows) else "")
        nsum = grid["n"]
        facts = [f"n ran: {esc(', '.join(map(str, nsum['ran'])) or 'none')}"
                 + (f" (odd {esc(', '.join(map(str, nsum['odd'])) or 'none')}; even "
                    f"{esc(', '.join(map(str, nsum['even'])) or 'none')})" if nsum["ran"] else "")]
        if nsum.get("smallest"):
            facts.append(f"smallest n = {esc(nsum['smallest']['n'])}: "
                         + ("ran" if nsum["smallest"]["ran"] else "<b>not run</b>"))
        sym = nsum["symmetric"]
        if sym["exist_at"]:
            facts.append("sets closed under x → −x (even n only): ran at n = "
                         + (esc(", ".join(map(str, sym["ran_at"]))) or "<b>none</b>")
                         + f" of {esc(', '.join(map(str, sym['exist_at'])))}")
        if grid.get("premises"):
            facts.append(f"premises: {esc(', '.join(grid['premises']))}")
        parts.append(f'<div class="tablewrap"><table class="cov"><thead><tr><th>geometry / '
                     f'{esc(grid["n_param"] or "n")}</th>{head}</tr></thead><tbody>{trs}</tbody></table></div>{more}'
                     f'<p class="small">{" · ".join(facts)}</p>')
    edges = cov.get("edges") or []
    if edges:
        items = "".join(
            f"<li>{esc(e['param'])} = {esc(S.fmt(float(e['value']), 6))} ({esc(e['end'])}): "
            + (f"reached ({e['configs']})" if e["state"] == "reached" else f"<b>{esc(e['state'])}</b>: {esc(e['why'])}")
            + "</li>" for e in edges)
        parts.append(f'<h3>Edges</h3><ul class="plainlist">{items}</ul>')
    fams = []
    for key, f in [(k, cov.get(k)) for k in ("labels", "coefficients")] + list((cov.get("functions") or {}).items()):
        if f:
            hunted = ", ".join(f"{k} ({v})" for k, v in f["hunted"].items())
            fams.append(f"{key}: {esc(f['declared'])} ({f['declared_configs']} configurations)"
                        + (f"; hunted: {esc(hunted)}" if hunted else ""))
    if fams:
        parts.append(f'<p class="small">{" · ".join(fams)}</p>')
    reasons = skipped_reasons(cov)
    if reasons:
        shown = "".join(f"<li>{esc(where)}: {esc(why)}</li>" for where, why in reasons[:COVERAGE_REASONS])
        rest = f"<li>… and {len(reasons) - COVERAGE_REASONS} more</li>" if len(reasons) > COVERAGE_REASONS else ""
        parts.append(f'<h3>Not run, and why</h3><ul class="plainlist">{shown}{rest}</ul>')
    parts.append('<p class="note">✓ ran (the count when several configurations) · · admitted, not run · – refused: '
                 "the geometry cannot place that dataset · P every dataset of the geometry there breaks a declared "
                 "premise · ! only errors. A hunted dataset counts for the geometry its record names, else as a "
                 "hunted dataset (closed under x → −x or not).</p>")
    return '<h2>Coverage</h2><div class="card">' + "".join(parts) + "</div>"


def _change_note(view: ClaimView, cmp: Comparison | None) -> str:
    if cmp is None or view.change is None:
        return ""
    ch = view.change
    if ch.status == "new":
        return f'<div class="card changes"><b>New</b> since run {esc(cmp.run_id)} of <code>{esc(cmp.path)}</code>.</div>'
    slack_txt = ""
    if ch.old_slack is not None or ch.new_slack is not None:
        moved = {"tighter": "moved <b>tighter</b>", "looser": "moved looser"}.get(ch.slack_moved,
                                                                                   "within the spread")
        spread = f" (spread: a factor e^±{esc(S.fmt(ch.spread))}, the new run's interquartile range of " \
                 "log-slack at its worst configuration)" if ch.spread is not None else ""
        slack_txt = f"; worst slack {esc(S.fmt(ch.old_slack))} → {esc(S.fmt(ch.new_slack))}, {moved}{spread}"
    return (f'<div class="card changes"><b>Compared with run {esc(cmp.run_id)}</b> of <code>{esc(cmp.path)}</code>: '
            f"verdict {badge(ch.old_verdict or '')} → {badge(ch.new_verdict or '')} {change_badges(ch)}"
            f"{slack_txt}.</div>")


def _scaling_explanation(verdict: str, relation: str, reason: str = "") -> str:
    if reason:  # what the fit measured (the constant that fits, where a rise stops, the growth model that wins)
        return reason
    grow = "shrinks" if relation in (">=", ">") else "grows"
    return {
        "violated": f"the implied constant Ĉ = quantity / shape significantly {grow} at the top of the sweep",
        "holds": f"the implied constant Ĉ = quantity / shape does not {grow[:-1]} beyond the tolerance along the "
                 "sweep",
        "inconclusive": "the fit cannot tell whether the implied constant stays bounded (interval straddles the "
                        "tolerance, or too few configurations)",
    }.get(verdict, VERDICT_TEXT.get(verdict, ""))


def _scaling_facts(sc: dict[str, Any]) -> list[tuple[str, str]]:
    """The numbers a scaling verdict rests on: the slope nearest to deciding it, and the constants seen."""
    facts = []
    found = deciding_slope(sc)
    if found is not None:
        k, slope, (lo, hi) = found
        text = (f"{esc(S.fmt(slope))} in log {esc(k)}, {level_text(sc.get('interval_level'))} interval "
                f"[{esc(S.fmt(lo))}, {esc(S.fmt(hi))}] vs tolerance ±{esc(S.fmt(sc.get('tolerance')))}")
        facts.append(("deciding Ĉ slope", text))
    consts = sc.get("implied_constant") or []
    if consts:
        text = (f"{esc(S.fmt(min(consts)))} to {esc(S.fmt(max(consts)))} across {len(consts)} configurations "
                f"({esc(sc.get('statistic_used') or sc.get('statistic', 'mean-log'))})")
        facts.append(("implied constant Ĉ", text))
    if sc.get("zero_configs"):
        zeros = esc(", ".join(map(str, sc["zero_configs"])))
        why = "Ĉ is 0 at the tracked level, which meets the bound for any constant and carries no slope"
        facts.append(("Ĉ = 0 (not fitted)", f"configurations {zeros}: {why}"))
    for k, g in (sc.get("log_growth") or {}).items():
        # how many decades the verdict rests on, the log exponent b of Ĉ ~ (log k)^b (of 1/Ĉ for a lower bound)
        # and the largest b and power slope the sweep could have missed
        miss = (sc.get("slope_max") or {}).get(k, math.nan)
        text = (f"{g['decades']:.1f} decades; b = {esc(S.fmt(g['b']))} [{esc(S.fmt(g['b_ci'][0]))}, "
                f"{esc(S.fmt(g['b_ci'][1]))}], top of the sweep {esc(S.fmt(g['b_top']))}; could miss up to "
                f"(log {esc(k)})^{esc(S.fmt(g['b_ci'][1]))} or {esc(k)}^{esc(S.fmt(miss))}"
                + ("; not a converging constant (convex in log log)" if g.get("concave_rejected") else ""))
        facts.append((f"log growth in {esc(k)}", text))
    facts.append(("fit over", esc(sc.get("regime", "all configurations"))))
    return facts


def claim_page(view: ClaimView, info: dict[str, Any], cmp: Comparison | None) -> str:
    claim, res = view.claim, view.res
    body: list[str] = []
    raw = view.definition
    statement = claim.statement if claim else str(raw.get("statement", ""))
    body.append(f'<p class="meta"><a href="../index.html">← all results</a> · '
                f'<a href="../index.html#paper-{esc(_anchor(view.paper))}">{esc(view.paper)}</a> · '
                f"{esc(view.label)}</p>")
    body.append(f'<h1><span class="label">{esc(view.label)}</span>{esc(view.title)}</h1>')
    kind = claim.kind if claim else raw.get("kind", "")
    mode = claim.mode if claim else ""
    body.append(f'<p class="meta"><code>{esc(view.claim_id)}</code> · kind {esc(kind)} · {esc(mode)} · '
                f"source <code>{esc(view.source)}</code></p>")
    if view.error:
        body.append(f'<div class="card errbox"><b>Not evaluated.</b> {esc(view.error)}</div>')

    # Verdict card.
    if res is not None and claim is not None:
        w = view.worst()
        flags = "".join(f'<li><span class="flag {FLAG_TEXT.get(f, ("", ""))[0]}">{esc(f)}</span> '
                        f'{esc(FLAG_TEXT.get(f, ("", f))[1])}</li>' for f in res.flags)
        exp = ""
        if res.verdict != res.expect:
            exp = f'<span class="flag bad">expected {esc(res.expect)}</span>'
        elif res.expect == "violated":
            exp = '<span class="flag good">expected violation, still reproduced</span>'
        n_in = sum(1 for c in res.configs if c.in_regime)
        facts = []
        explain = VERDICT_TEXT.get(res.verdict, "")
        if claim.mode == "scaling" and res.scaling:
            explain = _scaling_explanation(res.verdict, claim.check.relation, res.scaling.get("reason", ""))
            facts += _scaling_facts(res.scaling)
        elif w is not None:
            facts += [("worst slack", f"{esc(S.fmt(w.slack_min, 4))}"
                       + ("" if w.in_regime else " (outside the stated regime)")),
                      ("violations there", (f"{w.violations} of {w.replicates}, "
                                           + ("rate interval" if claim.check is None or claim.check.probability != "always"
                                              else "search hit rate (not a probability)")
                                           + f" {_interval(w)} vs δ = {esc(S.fmt(w.delta))}"))]
        if claim.check is not None:
            facts += [("configurations", f"{len(res.configs)} ({n_in} in the stated regime)"),
                      ("replicates", _replicates_fact(res.configs)),
                      ("search", esc(_search_fact(claim.check.search, res.configs))),
                      ("dtype", esc(claim.check.dtype)),
                      ("time", fmt_seconds(view.seconds))]
        if res.regime_path:
            facts.append(("regime path", esc(trend_text(res.regime_path))))
        if claim.mode == "infeasible":
            facts.append(("why", esc(claim.infeasible)))
        body.append(f'<div class="card"><p>{badge(res.verdict, True)} {exp} '
                    f'<span class="note">{esc(explain)}</span></p>'
                    + (f'<ul class="plainlist">{flags}</ul>' if flags else "")
                    + '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
                    + "</dl>" + (f'<p class="note">{esc(res.message)}</p>' if res.message and
                                 claim.mode != "infeasible" else "") + "</div>")
    body.append(_change_note(view, cmp))
    if claim is not None and claim.finding:
        body.append(f'<div class="card findings"><h2>Finding</h2><div class="prose">{rich_text(claim.finding)}'
                    "</div></div>")
    body.append(hunt_section(claim))

    # Statement.
    rendered, ok = render_statement(statement)
    body.append('<h2>Statement</h2><div class="card"><div class="statement">' + rendered + "</div>"
                + ("" if ok else '<p class="note">This statement uses LaTeX outside what the offline converter '
                                 "supports, so its source is shown.</p>")
                + f"<details><summary>LaTeX source</summary><pre>{esc(statement)}</pre></details></div>")

    if claim is not None and claim.check is not None:
        chk = claim.check
        prob = ""
        if chk.prob_expr is not None:
            prob = '<span class="formula">' + _math_or_code(lambda: sympy_mathml(chk.prob_expr.mathml)) + "</span>"
        checked = [("checked", _relation_mathml(view)),
                   ("bound as written", f"<code>{esc(chk.bound.text)}</code>"),
                   ("probability", (f"at least {prob}" if prob else esc(chk.probability))),
                   ("quantifiers", esc(claim.quantifiers().split("; regime: ")[0])),  # regime: next row
                   ("stated regime", _requires_list(view))]
        if chk.constants:
            checked.append(("hidden constants", esc(", ".join(chk.constants)) + " (checked as a scaling law)"))
        if chk.trivial is not None:
            checked.append(("trivial bound", (f"<code>{esc(chk.trivial.text)}</code> (weaker bounds are flagged "
                                             "vacuous)")))
        if chk.args:
            checked.append(("estimator options", f"<code>{esc(json.dumps(chk.args, sort_keys=True))}</code>"))
        if claim.inputs:
            checked.append(("inputs", f"<code>{esc(json.dumps(claim.inputs, sort_keys=True))}</code>"))
        checked.append(("network", esc(claim.network)))
        body.append('<h2>What is checked</h2><div class="card"><dl class="facts">'
                    + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in checked) + "</dl></div>")

        figs = _figure(plots.estimate_plot(view), "Estimate against the bound across the sweep") + \
            _figure(plots.ecdf_plot(view), "Slack distribution")
        if figs:
            body.append(f'<h2>Across the sweep</h2><div class="sweep">{figs}</div>')
        body.append(_scaling_section(view))
        body.append(_worst_section(view))
        body.append(_coverage_section(view))
        errs = sorted({e for c in (res.configs if res else []) for e in c.errors})
        if errs:
            body.append('<h2>Estimator errors</h2><div class="card errbox"><ul>'
                        + "".join(f"<li><code>{esc(e)}</code></li>" for e in errs[:20]) + "</ul>"
                        + (f"<p>… and {len(errs) - 20} more</p>" if len(errs) > 20 else "") + "</div>")
        body.append(_configs_table(view))

    notes = claim.notes if claim else str(raw.get("notes", ""))
    extra = []
    for key, title in (("reading", "Reading"), ("variant_of", "Variant of")):
        if raw.get(key):
            extra.append(f"<h3>{title}</h3><div class=\"prose\">{rich_text(str(raw[key]))}</div>")
    if notes or extra:
        body.append('<h2>Notes</h2><div class="card prose">' + (rich_text(notes) if notes else "")
                    + "".join(extra) + "</div>")
    title = f"{view.paper} {view.label}: {view.title}"
    return page(title, "".join(body), 1, _run_header(info))


# ------------------------------------------------------------------------------ hunts


def dataset_svg(points: list[list[float]], labels: list[int] | None = None, size: int = 160) -> str:
    """An inline SVG scatter of a 2-D or 3-D dataset on the unit sphere (3-D: an oblique projection), points
    coloured by label; "" for other dimensions."""
    d = len(points[0]) if points else 0
    if d not in (2, 3):
        return ""
    c, r = size / 2, size / 2 - 12

    def xy(p: list[float]) -> tuple[float, float]:
        x, y = (p[0], p[1]) if d == 2 else (p[0] - 0.45 * p[2], p[1] - 0.3 * p[2])
        return c + r * x / (1.45 if d == 3 else 1), c - r * y / (1.45 if d == 3 else 1)

    dots = []
    for i, p in enumerate(points):
        x, y = xy(p)
        lab = labels[i] if labels else 1
        fill = "#1f77b4" if lab > 0 else "#d62728"
        dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}"><title>x_{i + 1} = '
                    f'{esc(", ".join(f"{v:.4g}" for v in p))}{"" if not labels else f"; y = {lab:+d}"}</title></circle>')
    ring = f'<circle cx="{c}" cy="{c}" r="{r / (1.45 if d == 3 else 1):.1f}" fill="none" stroke="#bbb"/>'
    return (f'<svg class="dataset" width="{size}" height="{size}" viewBox="0 0 {size} {size}" role="img" '
            f'aria-label="dataset, {len(points)} points in {d} dimensions">{ring}{"".join(dots)}</svg>')


def hunt_section(claim) -> str:
    """How hard the claim was hunted (claims/<paper>/corpus/<claim>.json, written by `lemmacheck hunt --save`) and
    its minimal counterexamples, 2-D/3-D datasets drawn; "" when it was never hunted."""
    if claim is None:
        return ""
    from .. import corpus

    try:
        log, entries = corpus.hunts(claim), corpus.load(claim)
    except (ValueError, OSError) as exc:
        return f'<h2>Hunts</h2><div class="card errbox">{esc(exc)}</div>'
    if not log and not entries:
        return ""
    rows = []
    for h in log:
        fams = ", ".join(f"{k} {v}" for k, v in sorted((h.get("geometries") or {}).items())) or "-"
        best = "-" if h.get("best_slack") is None else S.fmt(h["best_slack"], 4)
        rows.append(f"<tr><td>{h.get('cases', 0)}</td><td>{esc(fams)}</td><td>{h.get('label_patterns', 0)}</td>"
                    f"<td>{esc(h.get('search', ''))}</td><td>{esc(best)}</td>"
                    f"<td>{'counterexample' if h.get('found') else 'nothing found'}</td></tr>")
    out = [('<h2>Hunts</h2><div class="card"><p class="note">Hypothesis searched the parameters and, where the '
            "quantity draws them, datasets, labels and perturbation directions (lemmacheck hunt). A search that "
            "finds nothing proves nothing.</p>")]
    if rows:
        out.append("<table><tr><th>cases</th><th>dataset families tried</th><th>label patterns</th><th>search</th>"
                   "<th>best slack</th><th>outcome</th></tr>" + "".join(rows) + "</table>")
    for e in entries:
        desc = [f"<code>{esc(json.dumps(e.params, sort_keys=True))}</code>", f"slack {esc(S.fmt(e.slack_min, 4))}",
                f"{e.violations} of {e.replicates} draws violate", esc(e.found_by)]
        if e.geometry:
            desc.append(f"dataset: {esc(e.geometry)}")
        if e.labels is not None:
            desc.append("labels " + esc("".join("+" if v > 0 else "-" for v in e.labels)))
        pic = dataset_svg(e.points, e.labels) if isinstance(e.points, list) else ""
        out.append('<div class="counterexample"><p><b>Minimal counterexample</b> (replayed first by every run): '
                   + " · ".join(desc) + "</p>" + pic + "</div>")
    return "".join(out) + "</div>"

