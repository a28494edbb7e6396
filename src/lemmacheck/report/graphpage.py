"""The proof-graph page of a paper (graphs/<paper>.html): its graph.toml drawn as a layered DAG in inline SVG.

Main results sit on the top layer and every edge points down to what a proof uses. A node is coloured by the worst
verdict over the run's claims of that result (violated, error, inconclusive, holds, infeasible; grey when none ran)
and outlined when a finding names the result. The finding select (a small inline script, as the index's filters)
highlights a finding's reach: the results whose proofs rest on it; per-finding sections list the same reach with
the checked consequences, so the page reads without the script too.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from ..findings import PaperFindings
from ..graph import ProofGraph
from .data import ClaimView
from .pages import badge, esc, page

VERDICT_RANK = ["violated", "error", "inconclusive", "holds", "infeasible"]  # worst first
NOT_RUN = "not run"
ROW_MAX = 8  # nodes per drawn row: a wide layer wraps onto several rows (still below the layer above)
NODE_H, ROW_GAP, COL_GAP, PAD = 30, 46, 18, 12
CHAR_W = 6.6  # px per character at the node font size (12px sans): enough for a label to fit its box


def _of(label: str, claim_label: str) -> bool:
    """A claim labelled `claim_label` is a claim of the graph node `label` (itself, or one of its sub-items)."""
    return claim_label == label or claim_label.startswith(label + " (")


def node_verdicts(graph: ProofGraph, views: list[ClaimView]) -> dict[str, tuple[str, list[ClaimView]]]:
    """Per node: (worst verdict over its claims in the run, those claims); NOT_RUN when none ran."""
    out = {}
    for n in graph.nodes:
        mine = [v for v in views if _of(n, v.label)]
        ranked = sorted((v.verdict for v in mine), key=lambda x: VERDICT_RANK.index(x) if x in VERDICT_RANK else 1)
        out[n] = (ranked[0] if ranked else NOT_RUN, mine)
    return out


def _layout(graph: ProofGraph) -> tuple[dict[str, tuple[float, float, float]], float, float]:
    """Node -> (x, y, width) of its box; and the drawing's width and height. Rows ordered by the barycentre of
    the users above them (fewer crossings), wide layers wrapped into rows of ROW_MAX."""
    width = {n: max(60.0, CHAR_W * len(n) + 16) for n in graph.nodes}
    pos_x: dict[str, float] = {}
    rows: list[list[str]] = []
    for layer in graph.layers():
        if rows:
            def bary(n: str) -> float:
                xs = [pos_x[u] for u in graph.used_by(n) if u in pos_x]
                return sum(xs) / len(xs) if xs else 1e9
            layer = sorted(layer, key=lambda n: (bary(n), graph.nodes.index(n)))
        for i in range(0, len(layer), ROW_MAX):
            row = layer[i:i + ROW_MAX]
            rows.append(row)
            for j, n in enumerate(row):
                pos_x[n] = j  # rank within the row, refined below once row widths are known
    full = max((sum(width[n] for n in r) + COL_GAP * (len(r) - 1) for r in rows), default=0.0)
    out = {}
    for k, row in enumerate(rows):
        used = sum(width[n] for n in row) + COL_GAP * (len(row) - 1)
        x = PAD + (full - used) / 2
        for n in row:
            out[n] = (x, PAD + k * (NODE_H + ROW_GAP), width[n])
            x += width[n] + COL_GAP
    return out, full + 2 * PAD, PAD * 2 + len(rows) * NODE_H + max(len(rows) - 1, 0) * ROW_GAP


def graph_svg(graph: ProofGraph, verdicts: dict[str, tuple[str, list[ClaimView]]], named: set[str]) -> str:
    pos, w, h = _layout(graph)
    idx = {n: i for i, n in enumerate(graph.nodes)}
    parts = [(f'<svg class="graph" width="{w:.0f}" height="{h:.0f}" '
             f'viewBox="0 0 {w:.0f} {h:.0f}" role="img" aria-label="proof graph of {esc(graph.paper)}">'
             '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="#8c96a3"/></marker></defs>')]
    for e in graph.edges:
        x0, y0, w0 = pos[e.user]
        x1, y1, w1 = pos[e.result]
        ax, ay, bx, by = x0 + w0 / 2, y0 + NODE_H, x1 + w1 / 2, y1
        mid = (ay + by) / 2
        parts.append(f'<path class="edge{" stmt" if e.where == "statement" else ""}" data-from="{idx[e.user]}" '
                     f'data-to="{idx[e.result]}" d="M{ax:.1f},{ay:.1f} C{ax:.1f},{mid:.1f} {bx:.1f},{mid:.1f} '
                     f'{bx:.1f},{by - 2:.1f}" marker-end="url(#arrow)"><title>{esc(e.user)} uses {esc(e.result)}'
                     f' ({esc(e.where)}): {esc(e.line)}</title></path>')
    for n in graph.nodes:
        x, y, bw = pos[n]
        v, mine = verdicts[n]
        cls = ["node", "vn-" + v.replace(" ", "")]
        if n in graph.main:
            cls.append("main")
        if n in named:
            cls.append("named")
        kind = "result" if n in graph.results else "other"
        tip = f"{n}: {v}" + (f" ({len(mine)} claim(s): {', '.join(x.claim_id for x in mine)})" if mine else "")
        if n in graph.notes:
            tip += f". {graph.notes[n]}"
        parts.append(f'<g class="{" ".join(cls)}" data-node="{idx[n]}" data-kind="{kind}" data-label="{esc(n)}" '
                     f'data-verdict="{esc(v)}"><title>{esc(tip)}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{NODE_H}" rx="{4 if kind == "result" else 14}"/>'
                     f'<text x="{x + bw / 2:.1f}" y="{y + NODE_H / 2 + 4:.1f}" text-anchor="middle">{esc(n)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    items = [(v, v) for v in VERDICT_RANK] + [(NOT_RUN, NOT_RUN)]
    sw = "".join(f'<li><svg class="sw" width="18" height="12"><rect class="vn-{k.replace(" ", "")}" x="1" y="1" '
                 f'width="16" height="10" rx="2"/></svg>{esc(t)}</li>' for k, t in items)
    return (f'<ul class="legend graph-legend">{sw}<li><svg class="sw" width="18" height="12"><rect class="named-sw" '
            'x="1" y="1" width="16" height="10" rx="2"/></svg>named by a finding</li>'
            '<li><b>bold</b>: main result</li><li>dashed edge: used in the statement</li>'
            '<li>rounded box: not a numbered result (assumption, fact, cited)</li></ul>')


def graph_page(graph: ProofGraph, pf: PaperFindings | None, views: list[ClaimView], info: dict[str, Any],
               slugs: dict[str, str], note: str = "") -> str:
    """The page for one paper. `slugs`: claim id -> its page's file name stem (claims/<slug>.html)."""
    verdicts = node_verdicts(graph, views)
    findings = pf.findings if pf is not None else []
    own = {f.id: {r for lab in f.results for r in graph.resolve(lab)} for f in findings}
    named = set().union(*own.values()) if own else set()
    idx = {n: i for i, n in enumerate(graph.nodes)}
    opts = "".join(f'<option value="{i}" data-reach="{" ".join(str(idx[r]) for r in f.reach if r in idx)}" '
                   f'data-own="{" ".join(str(idx[r]) for r in sorted(own[f.id]))}">{esc(f.id)} '
                   f'({esc(", ".join(f.results))})</option>' for i, f in enumerate(findings))
    body = [f"<h1>Proof graph: {esc(graph.paper)}</h1>",
            (f'<p class="meta">{len(graph.results)} numbered results · {len(graph.extra)} other items · '
            f"{len(graph.edges)} uses · {len(graph.main)} main result(s), on top · from "
            f"<code>{esc(graph.source.name)}</code>; colours: the worst verdict over each result's claims in run "
            f"{esc(info['run_id'])}</p>")]
    if note:
        body.append(f'<div class="card warnbox">{esc(note)}</div>')
    body.append('<div class="controls"><label for="graph-finding">Highlight the reach of</label>'
                '<select id="graph-finding" aria-label="finding whose reach to highlight">'
                f'<option value="">no finding</option>{opts}</select>'
                '<span class="count" id="graph-count"></span></div>')
    body.append(_legend())
    body.append(f'<div class="graphwrap">{graph_svg(graph, verdicts, named)}</div>')
    secs = []
    for i, f in enumerate(findings):
        cons = "".join(
            f"<li><b>{esc(q.result)}</b>: "
            + ({"shown": f"shown violated by <code>{esc(q.claim)}</code>",
                "absorbed": f"absorbed: {esc(q.absorbed)} <q>{esc(q.line)}</q>",
                "gap": f"survives at the witness (<code>{esc(q.claim)}</code>); gap: {esc(q.gap)} <q>{esc(q.line)}</q>"}
               [q.status]) + "</li>" for q in f.consequences)
        cons = "".join(f"<li><b>{esc(r)}</b>: a main result itself, shown violated by the finding's claims</li>"
                       for r in sorted(own[f.id]) if r in graph.main) + cons
        reach = ", ".join(esc(r) for r in f.reach) or "nothing else rests on it"
        secs.append(f'<section class="card finding-reach" id="finding-{i}"><h3>{esc(f.id)} · '
                    f"{esc(', '.join(f.results))} · {esc(f.severity)}</h3>"
                    f'<div class="small">reach: <span class="reach-list">{reach}</span></div>'
                    + (f"<ul>{cons}</ul>" if cons else "") + "</section>")
    if secs:
        body.append("<h2>Findings and their reach</h2>" + "".join(secs))
    rows = []
    for n in graph.nodes:
        v, mine = verdicts[n]
        links = " ".join(f'<a href="../claims/{quote(slugs[x.claim_id])}.html">{esc(x.claim_id)}</a>'
                         for x in mine if x.claim_id in slugs)
        rows.append(f"<tr><td>{'<b>' + esc(n) + '</b>' if n in graph.main else esc(n)}</td>"
                    f"<td>{badge(v) if v != NOT_RUN else esc(v)}</td>"
                    f"<td>{esc(', '.join(u.result for u in graph.uses(n))) or '–'}</td>"
                    f"<td>{esc(', '.join(graph.used_by(n))) or '–'}</td><td>{links}</td></tr>")
    body.append('<h2>Results</h2><div class="tablewrap"><table class="graph-table"><thead><tr><th>result</th>'
                "<th>verdict</th><th>uses</th><th>used by</th><th>claims</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table></div>")
    return page(f"lemmacheck: proof graph of {graph.paper}", "".join(body), 1,
                f'<span class="sub">proof graph of {esc(graph.paper)}</span>')


def graph_file(paper: str) -> str:
    """The page's file name under graphs/ (a paper key is a folder name; anything else is replaced)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", paper) + ".html"
