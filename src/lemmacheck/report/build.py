"""Build the static report site from a results store.

Layout of `out/`:
    index.html            every claim, one table per paper, findings, coverage, changes, run facts
    claims/<name>.html    one page per claim (its own data only, so pages stay small)
    graphs/<paper>.html   one page per paper with a proof graph (graph.toml): the DAG coloured by verdict, findings'
                          reach highlighted
    results.json          summary.run_json of the run
    results.csv           one row per configuration

Every file is written atomically (temporary file + rename). Claim pages left over from an earlier build
of the same folder are removed, but only files this generator wrote (recognised by their generator tag).
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..claims import Paper, load_paper
from ..errors import ClaimError
from ..summary import _num, run_json
from . import graphpage, pages
from .data import (
    ClaimView,
    Comparison,
    compare_view,
    load_claim_view,
    load_old,
    open_store,
    pick_run,
    safe_name,
)

GENERATOR_TAG = b'<meta name="generator" content="lemmacheck-report">'

CSV_FIELDS = ["claim_id", "paper", "result", "claim_verdict", "config_index", "params", "in_regime", "verdict",
              "seed", "replicates", "drawn", "planned", "violations", "violation_ci_low", "violation_ci_high", "delta",
              "bound", "slack_min", "slack_median", "value_median", "value_max", "vacuous",
              "conditioning_failures", "method", "seconds", "errors"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a published site must be readable
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _csv(views: list[ClaimView]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for v in views:
        if v.res is None:
            continue
        for c in v.res.configs:
            w.writerow([v.claim_id, v.paper, v.label, v.verdict, c.index, json.dumps(c.params, sort_keys=True),
                        int(c.in_regime), c.verdict, c.seed, c.replicates, c.drawn, c.planned, c.violations,
                        repr(c.violation_ci[0]), repr(c.violation_ci[1]), repr(c.delta), repr(c.bound),
                        _cell(c.slack_min), _cell(c.slack_median), _cell(c.value_median), _cell(c.value_max),
                        int(c.vacuous), c.conditioning_failures, c.method, repr(c.seconds), " | ".join(c.errors)])
    return buf.getvalue()


def _cell(x: float | None) -> str:
    return "" if x is None else repr(float(x))


def _remove_stale(claims_dir: Path, keep: set[str]) -> None:
    if not claims_dir.is_dir():
        return
    for p in claims_dir.glob("*.html"):
        if p.name in keep:
            continue
        try:
            with open(p, "rb") as fh:
                head = fh.read(2048)
        except OSError:
            continue
        if GENERATOR_TAG in head:
            p.unlink()


def _paper_folders(views: list[ClaimView]) -> dict[str, Path]:
    """paper -> the folder of its claim files (where _paper.toml, graph.toml and findings.toml lie)."""
    return {v.paper: (v.claim.source.parent if v.claim else Path(v.source).parent) for v in views}


def _papers(views: list[ClaimView], notes: list[str]) -> dict[str, Paper]:
    """Each paper's _paper.toml, found beside its claim files; a malformed one becomes a note, not a crash."""
    out: dict[str, Paper] = {}
    for key, folder in sorted(_paper_folders(views).items()):
        try:
            paper = load_paper(folder)
        except ClaimError as exc:
            notes.append(f"Paper metadata not used: {exc}")
            continue
        if paper is not None:
            out[key] = paper
    return out


def _graphs(views: list[ClaimView], out: Path, info: dict[str, Any], notes: list[str]) -> dict[str, str]:
    """Write graphs/<paper>.html for each paper whose folder has a graph.toml; paper -> the page's href. A graph or
    findings file that does not validate becomes a note (or the page's note), never a crash."""
    from ..findings import load_findings
    from ..graph import load_graph

    slugs = {v.claim_id: v.slug for v in views}
    links: dict[str, str] = {}
    written: set[str] = set()
    for paper, folder in sorted(_paper_folders(views).items()):
        try:
            graph = load_graph(folder)
        except ClaimError as exc:
            notes.append(f"Proof graph not drawn: {exc}")
            continue
        if graph is None:
            continue
        note = ""
        try:
            pf = load_findings(folder)
        except (ClaimError, OSError) as exc:
            pf, note = None, f"Findings not shown on the graph: {exc}"
        name = graphpage.graph_file(paper)
        mine = [v for v in views if v.paper == paper]
        _write(out / "graphs" / name, graphpage.graph_page(graph, pf, mine, info, slugs, note))
        written.add(name)
        links[paper] = f"graphs/{name}"
    _remove_stale(out / "graphs", written)
    return links


def build_report(db: str | Path, out: str | Path, compare: str | Path | None = None, *,
                 run_id: int | None = None, progress: Any = None, extra_notes: list[str] | None = None) -> Path:
    """Render the report of `run_id` (default: the latest finished run) of the store `db` into `out`.

    `compare`: another store (or the same one: then its previous finished run) to mark changes against.
    `progress`: a progress.Progress told the number of claim pages, then of each one written.
    `extra_notes`: lines for the index page's notes (`run --seeds`: how the verdicts replicate across seeds).
    Returns the path of index.html.
    """
    out = Path(out)
    store = open_store(db)
    try:
        rid = pick_run(store, run_id)
        info = store.run_info(rid)
        cmp: Comparison | None = load_old(compare, db, rid) if compare is not None else None
        notes = list(extra_notes or [])
        if not info.get("finished"):
            notes.append(f"Run {rid} has not finished: these are partial results.")
        taken: set[str] = set()
        views: list[ClaimView] = []
        written: set[str] = set()
        ids = store.claim_ids(rid)
        if progress is not None:
            progress.add_total(len(ids))
        for cid in ids:
            view = load_claim_view(store, rid, cid, safe_name(cid, taken), with_data=True)
            if cmp is not None:
                view.change = compare_view(view, cmp)
            _write(out / "claims" / f"{view.slug}.html", pages.claim_page(view, info, cmp))
            written.add(f"{view.slug}.html")
            view.data = {}  # per-replicate arrays are only needed for this claim's page
            views.append(view)
            if progress is not None:
                progress.advance()
        removed = []
        if cmp is not None:
            current = {v.claim_id for v in views}
            removed = [o for cid, o in sorted(cmp.old.items()) if cid not in current]
        _remove_stale(out / "claims", written)
        results = [v.res for v in views if v.res is not None]
        doc: dict[str, Any] = run_json(info, results)
        broken = [{"id": v.claim_id, "error": v.error} for v in views if v.res is None]
        if broken:
            doc["not_evaluated"] = broken
        _write(out / "results.json", json.dumps(_num(doc), indent=1, allow_nan=False) + "\n")
        _write(out / "results.csv", _csv(views))
        papers = _papers(views, notes)
        graphs = _graphs(views, out, info, notes)
        index = out / "index.html"
        _write(index, pages.index_page(info, views, cmp, removed, notes, papers, graphs))
        return index
    finally:
        store.close()
