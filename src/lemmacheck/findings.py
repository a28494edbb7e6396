"""Findings: the reviewed statements the project makes about a paper, kept per paper in claims/<paper>/findings.toml.

A verdict is about the configurations that ran; a finding says "this published statement is false as printed" and
is held to a referee's standard (docs/findings.md): in regime, independent of hidden constants (exact at every
width, or persisting along a regime path on which they grow), the statement as printed, and a second witness (a
standalone script). One `[[finding]]` per mechanism, listing every claim it covers. Everything else that reads
violated is a `[[lead]]`: why it is not a refutation and what would decide it.

`load_findings` validates a folder's file against its claims and raises ClaimError naming the file and field;
every claim of the folder that expects `violated` (top level or in a profile) must be covered by a finding or a lead.

With a proof graph (claims/<paper>/graph.toml, lemmacheck.graph) each finding's reach is computed from it, and every
main result in the reach carries one `[[finding.consequence]]`: shown violated by a claim at the witness, absorbed at
a named step, or checked with a gap in the proof. `severity = "main-result"` iff a main result is shown to fail.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claims import FINDINGS_FILE, GRAPH_FILE, Claim, is_claim_name, load_claims
from .errors import ClaimError
from .graph import MAX_LINE, ProofGraph, load_graph

KINDS = ("error", "misprint", "missing-hypothesis", "conjecture")
SEVERITIES = ("main-result", "lemma", "proof-step", "remark")
EVIDENCE = ("exact", "regime-path")
LEAD_REASONS = ("finite-width", "out-of-regime", "disclaimed", "hidden-constant", "off-scale", "misread")
# Words by which a claim file's own notes or finding text say it is not a refutation: such a claim is a lead.
DISCLAIMERS = re.compile(r"not a refutation|no refutation|could absorb|out of regime only|\ba lead\b|\blead:|^\s*lead\b",
                         re.IGNORECASE | re.MULTILINE)

_FINDING_FIELDS = {"id", "results", "claims", "kind", "severity", "evidence", "statement", "configuration",
                   "regime_path", "impact", "repair", "reproduce", "witness", "consequence"}
_FINDING_OPTIONAL = {"regime_path", "consequence"}
_CONSEQUENCE_FIELDS = {"result", "claim", "absorbed", "gap", "line"}
NO_GRAPH = f"no proof graph declared ({GRAPH_FILE}): the reach is not computed"


@dataclass(frozen=True)
class Consequence:
    """What a finding does to one main result in its reach: `shown` (a claim of that result at the witness's
    configuration expects violated), `absorbed` (a named step absorbs the defect) or `gap` (the conclusion
    survives at the witness, the proof has a gap)."""
    result: str
    status: str  # "shown" | "absorbed" | "gap"
    claim: str = ""
    expect: str = ""  # the claim's expected verdict: what `verdict` reports unless a run gives one
    absorbed: str = ""
    gap: str = ""
    line: str = ""

    def to_json(self, verdicts: dict[str, str] | None = None) -> dict[str, str]:
        out = {"result": self.result, "status": self.status}
        if self.claim:
            out["claim"] = self.claim
            out["verdict"] = (verdicts or {}).get(self.claim, self.expect)
        for k in ("absorbed", "gap", "line"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        return out
_LEAD_FIELDS = {"id", "results", "claims", "reason", "decide", "measurements"}


@dataclass(frozen=True)
class Finding:
    id: str
    paper: str
    results: tuple[str, ...]
    claims: tuple[str, ...]
    kind: str
    severity: str
    evidence: str
    statement: str
    configuration: str
    regime_path: str
    impact: str
    repair: str
    reproduce: str
    witness: Path  # absolute
    source: Path
    reach: tuple[str, ...] = ()  # every result resting on the finding's results (graph.toml), sorted
    consequences: tuple[Consequence, ...] = ()
    reach_note: str = ""  # set when the folder declares no graph

    def to_json(self, verdicts: dict[str, str] | None = None) -> dict[str, Any]:
        """`verdicts`: claim id -> a run's verdict, for the consequences' claims (default: their `expect`)."""
        out = {"id": self.id, "paper": self.paper, "results": list(self.results), "claims": list(self.claims),
               "kind": self.kind, "severity": self.severity, "evidence": self.evidence,
               "statement": self.statement, "configuration": self.configuration, "regime_path": self.regime_path,
               "impact": self.impact, "repair": self.repair, "reproduce": self.reproduce,
               "witness": str(self.witness), "source": str(self.source), "reach": list(self.reach),
               "consequences": [c.to_json(verdicts) for c in self.consequences]}
        if self.reach_note:
            out["reach_note"] = self.reach_note
        return out


@dataclass(frozen=True)
class Lead:
    id: str
    paper: str
    results: tuple[str, ...]
    claims: tuple[str, ...]
    reason: str  # the category (LEAD_REASONS) followed by a sentence
    decide: str
    measurements: str
    source: Path

    @property
    def category(self) -> str:
        return self.reason.split()[0].rstrip(":.,;") if self.reason.split() else ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "paper": self.paper, "results": list(self.results), "claims": list(self.claims),
                "reason": self.reason, "decide": self.decide, "measurements": self.measurements,
                "source": str(self.source)}


@dataclass
class PaperFindings:
    paper: str
    folder: Path
    findings: list[Finding] = field(default_factory=list)
    leads: list[Lead] = field(default_factory=list)
    graph: ProofGraph | None = None

    def covered(self) -> set[str]:
        return ({c for e in [*self.findings, *self.leads] for c in e.claims}
                | {q.claim for f in self.findings for q in f.consequences if q.claim})


def expects_violated(claim: Claim) -> bool:
    """The claim's file expects `violated` at the top level or in a profile."""
    return claim.expect == "violated" or any(p.expect == "violated" for p in claim.profiles.values())


def disclaims(claim: Claim) -> str | None:
    """The disclaiming phrase in the claim's notes or finding text (None if none)."""
    m = DISCLAIMERS.search(claim.notes + "\n" + claim.finding)
    return m.group(0) if m else None


def _text(raw: dict[str, Any], key: str, path: Path, where: str) -> str:
    if key not in raw:
        raise ClaimError(path, f"{where}.{key}", "missing", f"add `{key} = \"...\"`")
    v = raw[key]
    if not isinstance(v, str) or not v.strip():
        raise ClaimError(path, f"{where}.{key}", f"expected a non-empty string, got {v!r}")
    return v.strip()


def _labels(raw: dict[str, Any], key: str, path: Path, where: str) -> tuple[str, ...]:
    v = raw.get(key)
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v):
        raise ClaimError(path, f"{where}.{key}", "missing or not a non-empty list of strings",
                         f'`{key} = ["..."]`')
    if len(set(v)) != len(v):
        raise ClaimError(path, f"{where}.{key}", f"lists an entry twice: {sorted({x for x in v if v.count(x) > 1})}")
    return tuple(v)


def _choice(raw: dict[str, Any], key: str, allowed: tuple[str, ...], path: Path, where: str) -> str:
    v = _text(raw, key, path, where)
    if v not in allowed:
        raise ClaimError(path, f"{where}.{key}", f"unknown {key} '{v}'", f"one of {list(allowed)}")
    return v


def _names(claim: Claim, result: str) -> bool:
    """The claim is a claim of `result` (its label, a sub-item of it, or the result a sub-item label belongs to)."""
    return claim.result == result or claim.result.startswith(result + " (") or result.startswith(claim.result + " (")


def _reach(graph: ProofGraph, results: tuple[str, ...], path: Path, where: str) -> set[str]:
    labels = []
    for r in results:
        got = graph.resolve(r)
        if not got:
            raise ClaimError(path, f"{where}.results", f"'{r}' is not a node of {graph.source}",
                             "use the graph's label (a result of _paper.toml or an item of `nodes`)")
        labels += got
    return graph.reach(labels) - set(labels)


def _consequences(e: dict[str, Any], path: Path, where: str, claims: dict[str, Claim], graph: ProofGraph | None,
                  reach: set[str], owner: dict[str, str]) -> tuple[Consequence, ...]:
    """The finding's `[[finding.consequence]]` entries, validated: one per main result in its reach, each either
    shown (`claim`), absorbed (`absorbed` + `line`) or a gap (`claim` + `gap` + `line`)."""
    raw = e.get("consequence", [])
    if not isinstance(raw, list) or not all(isinstance(q, dict) for q in raw):
        raise ClaimError(path, f"{where}.consequence", "expected an array of tables", "write `[[finding.consequence]]`")
    if graph is None:
        if raw:
            raise ClaimError(path, f"{where}.consequence", f"consequences need the paper's proof graph, and "
                             f"{path.parent / GRAPH_FILE} does not exist", f"declare {GRAPH_FILE} (docs/findings.md)")
        return ()
    out: list[Consequence] = []
    for j, q in enumerate(raw):
        qw = f"{where}.consequence[{j}]"
        unknown = sorted(set(q) - _CONSEQUENCE_FIELDS)
        if unknown:
            raise ClaimError(path, f"{qw}.{unknown[0]}", "unknown field", f"allowed: {sorted(_CONSEQUENCE_FIELDS)}")
        result = _text(q, "result", path, qw)
        if result not in graph.main:
            raise ClaimError(path, f"{qw}.result", f"'{result}' is not a main result of {graph.source}",
                             f"consequences are for the main results in the finding's reach: {sorted(reach & set(graph.main))}")
        if result not in reach:
            raise ClaimError(path, f"{qw}.result", f"'{result}' is not in the finding's reach: by {graph.source} its "
                             "proof does not rest on the finding's results", "drop the entry, or correct the graph")
        if any(c.result == result for c in out):
            raise ClaimError(path, f"{qw}.result", f"'{result}' has two consequence entries", "one per main result")
        texts = {k: _text(q, k, path, qw) for k in ("claim", "absorbed", "gap", "line") if k in q}
        shape = tuple(sorted(texts))
        if shape == ("claim",):
            status = "shown"
        elif shape == ("absorbed", "line"):
            status = "absorbed"
        elif shape == ("claim", "gap", "line"):
            status = "gap"
        else:
            raise ClaimError(path, qw, f"has {list(shape)}: expected `claim` alone (shown violated), `absorbed` + "
                             "`line` (the absorbing step), or `claim` + `gap` + `line` (the conclusion survives, the "
                             "proof has a gap)")
        if "line" in texts and len(texts["line"]) > MAX_LINE:
            raise ClaimError(path, f"{qw}.line", f"{len(texts['line'])} characters, more than {MAX_LINE}",
                             "quote a shorter verbatim excerpt")
        expect = ""
        if "claim" in texts:
            cid = texts["claim"]
            c = claims.get(cid)
            if c is None:
                raise ClaimError(path, f"{qw}.claim", f"no claim with id '{cid}' in {path.parent}",
                                 "use the `id` of a claim file in this folder")
            if not _names(c, result):
                raise ClaimError(path, f"{qw}.claim", f"claim '{cid}' is a claim of '{c.result}', not of '{result}'")
            if cid in owner and owner[cid] != where:
                raise ClaimError(path, f"{qw}.claim", f"claim '{cid}' is also listed under {owner[cid]}",
                                 "a consequence claim belongs to that finding only")
            owner[cid] = where
            if status == "shown":
                if not expects_violated(c):
                    raise ClaimError(path, f"{qw}.claim", f"claim '{cid}' does not expect 'violated' ({c.source})",
                                     "a consequence shown by a claim needs the claim to read violated at the witness")
                expect = "violated"
            else:
                if c.expect not in ("holds", "inconclusive"):
                    raise ClaimError(path, f"{qw}.claim", f"claim '{cid}' expects '{c.expect}'",
                                     "a gap's claim checks that the conclusion survives: it expects holds or "
                                     "inconclusive (a violated one is `claim` alone)")
                expect = c.expect
        out.append(Consequence(result, status, texts.get("claim", ""), expect, texts.get("absorbed", ""),
                               texts.get("gap", ""), texts.get("line", "")))
    need = sorted(reach & set(graph.main) - {c.result for c in out})
    if need:
        raise ClaimError(path, f"{where}.consequence", f"main result(s) {need} are in the finding's reach "
                         f"({graph.source}) but have no consequence entry", "add a `[[finding.consequence]]` per "
                         "main result: shown by a claim at the witness, absorbed at a named step, or a gap")
    return tuple(out)


def parse_findings(raw: dict[str, Any], path: Path, claims: dict[str, Claim],
                   graph: ProofGraph | None = None) -> PaperFindings:
    """Validate a findings table against the folder's claims (id -> Claim) and its proof graph (None: the folder
    declares none); raise ClaimError on the first problem."""
    folder = path.parent
    papers = sorted({c.paper for c in claims.values()})
    paper = papers[0] if len(papers) == 1 else folder.name  # the folder's claims' paper key
    extra = sorted(set(raw) - {"finding", "lead"})
    if extra:
        raise ClaimError(path, extra[0], "unknown table", "only [[finding]] and [[lead]] entries")
    out = PaperFindings(paper, folder, graph=graph)
    seen_ids: set[str] = set()
    owner: dict[str, str] = {}  # claim id -> the entry that lists it
    for table, allowed in (("finding", _FINDING_FIELDS), ("lead", _LEAD_FIELDS)):
        entries = raw.get(table, [])
        if not isinstance(entries, list):
            raise ClaimError(path, table, "expected an array of tables", f"write `[[{table}]]`")
        for j, e in enumerate(entries):
            where = f"{table}[{j}]"
            if not isinstance(e, dict):
                raise ClaimError(path, where, "expected a table")
            unknown = sorted(set(e) - allowed)
            if unknown:
                raise ClaimError(path, f"{where}.{unknown[0]}", "unknown field", f"allowed: {sorted(allowed)}")
            eid = _text(e, "id", path, where)
            where = f"{table} '{eid}'"
            if not eid.startswith(paper + "/"):
                raise ClaimError(path, f"{where}.id", f"'{eid}' must start with the paper key '{paper}/'")
            if eid in seen_ids:
                raise ClaimError(path, f"{where}.id", f"duplicate id '{eid}'")
            seen_ids.add(eid)
            results = _labels(e, "results", path, where)
            cids = _labels(e, "claims", path, where)
            for cid in cids:
                if cid not in claims:
                    raise ClaimError(path, f"{where}.claims", f"no claim with id '{cid}' in {folder}",
                                     "use the `id` of a claim file in this folder")
                if cid in owner:
                    raise ClaimError(path, f"{where}.claims", f"claim '{cid}' is listed twice (also under "
                                     f"{owner[cid]})", "one mechanism, one entry: list each claim once")
                owner[cid] = where
                c = claims[cid]
                if not expects_violated(c):
                    raise ClaimError(path, f"{where}.claims", f"claim '{cid}' does not expect 'violated' "
                                     f"({c.source})", "list only claims whose draws read violated")
                if table == "finding" and (phrase := disclaims(c)):
                    raise ClaimError(path, f"{where}.claims", f"claim '{cid}' disclaims itself ('{phrase}' in "
                                     f"its notes or finding, {c.source}): it can only be a lead",
                                     "move it under a [[lead]], or correct the claim file's text")
            if table == "lead":
                reason = _text(e, "reason", path, where)
                cat = reason.split()[0].rstrip(":.,;")
                if cat not in LEAD_REASONS:
                    raise ClaimError(path, f"{where}.reason", f"starts with '{cat}', not a lead reason",
                                     f"begin with one of {list(LEAD_REASONS)}, then a sentence")
                out.leads.append(Lead(eid, paper, results, cids, reason, _text(e, "decide", path, where),
                                      _text(e, "measurements", path, where), path))
                continue
            kind = _choice(e, "kind", KINDS, path, where)
            severity = _choice(e, "severity", SEVERITIES, path, where)
            evidence = _choice(e, "evidence", EVIDENCE, path, where)
            texts = {k: _text(e, k, path, where) for k in sorted(_FINDING_FIELDS - {"id", "results", "claims", "kind",
                                                                                   "severity", "evidence"}
                                                                  - _FINDING_OPTIONAL)}
            rpath = str(e.get("regime_path", "")).strip()
            if evidence == "regime-path" and not rpath:
                raise ClaimError(path, f"{where}.regime_path", "evidence 'regime-path' needs the path's levels, "
                                 "values and trend", "add `regime_path = \"...\"`")
            if (phrase := DISCLAIMERS.search(texts["statement"] + " " + texts["configuration"])):
                raise ClaimError(path, f"{where}.statement", f"the finding disclaims itself ('{phrase.group(0)}')",
                                 "a statement that is not a refutation is a [[lead]]")
            wpath = (folder / texts["witness"]).resolve()
            if wpath.suffix != ".py" or not wpath.is_file():
                raise ClaimError(path, f"{where}.witness", f"no witness script at {wpath}",
                                 "a standalone numpy/scipy script under witnesses/ that exits 0 when the violation "
                                 "reproduces")
            if not texts["reproduce"].startswith("lemmacheck "):
                raise ClaimError(path, f"{where}.reproduce", "expected a `lemmacheck ...` command")
            reach: set[str] = set()
            if graph is not None:
                reach = _reach(graph, results, path, where)
            conseq = _consequences(e, path, where, claims, graph, reach, owner)
            if graph is not None:
                # a finding on a main result itself shows that result false; otherwise only a consequence does
                own_main = {r for lab in results for r in graph.resolve(lab)} & set(graph.main)
                shown = sorted(own_main) + [q.result for q in conseq if q.status == "shown"]
                if severity == "main-result" and not shown:
                    raise ClaimError(path, f"{where}.severity", "'main-result' but no main result is shown to fail "
                                     "(no consequence `claim` without `gap`, and the finding is not on a main result)",
                                     "severity follows what was checked: lemma, proof-step or remark")
                if severity != "main-result" and shown:
                    raise ClaimError(path, f"{where}.severity", f"'{severity}' but {shown} is shown to fail",
                                     "set `severity = \"main-result\"`")
            out.findings.append(Finding(eid, paper, results, cids, kind, severity, evidence, texts["statement"],
                                        texts["configuration"], rpath, texts["impact"], texts["repair"],
                                        texts["reproduce"], wpath, path, tuple(sorted(reach)), conseq,
                                        "" if graph is not None else NO_GRAPH))
    return out


def uncovered(claims: list[Claim], pf: PaperFindings | None) -> list[Claim]:
    """Claims that expect `violated` but no finding or lead lists."""
    have = pf.covered() if pf is not None else set()
    return [c for c in claims if expects_violated(c) and c.id not in have]


def load_findings(folder: str | Path, claims: list[Claim] | None = None) -> PaperFindings | None:
    """The folder's findings, validated (None when the folder has no findings.toml and no claim there expects
    `violated`). Raises ClaimError for bad input and for an expected violation that no entry covers."""
    folder = Path(folder)
    path = folder / FINDINGS_FILE
    if claims is None:
        claims, errors = load_claims([folder])
        if errors:
            raise errors[0]
    claims = [c for c in claims if c.source.resolve().parent == folder.resolve()]
    pf = None
    if path.is_file():
        try:
            with open(path, "rb") as fh:
                raw = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ClaimError(path, "<toml>", f"not valid TOML: {exc}") from None
        pf = parse_findings(raw, path, {c.id: c for c in claims}, load_graph(folder))
    missing = uncovered(claims, pf)
    if missing:
        ids = ", ".join(c.id for c in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ClaimError(path, "finding", f"{len(missing)} claim(s) expect 'violated' but no [[finding]] or [[lead]] "
                         f"lists them: {ids}", "triage each: a [[finding]] (a refutation a referee would sign) "
                         "or a [[lead]] (with what would decide it)")
    return pf


def findings_folders(paths: list[str | Path]) -> list[Path]:
    """Claim folders under `paths` (a folder holding claim files, or a findings.toml): one per paper."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            cands = [p.parent]
        elif p.is_dir():
            cands = sorted({q.parent for q in p.rglob("*.toml")
                            if q.name == FINDINGS_FILE or is_claim_name(q)})
        else:
            raise FileNotFoundError(f"{p}: no such claim file or folder")
        for c in cands:
            if c.resolve() not in {o.resolve() for o in out}:
                out.append(c)
    return out


def check_against_results(pf: PaperFindings, results: list[Any]) -> list[str]:
    """Problems with listing these findings given a run's ClaimResults: a covered claim whose violation fades
    along its regime path (flag finite-width), or that is violated only outside its stated regime; a consequence
    shown by a claim that does not read violated (or fades), a gap whose claim reads violated."""
    by_id = {r.claim.id: r for r in results}
    out = []
    for f in pf.findings:
        for cid in f.claims:
            r = by_id.get(cid)
            if r is None:
                continue
            if "finite-width" in r.flags:
                out.append(f"finding {f.id}: claim {cid}'s violation fades along its regime path (finite-width): "
                           "a lead, not a finding")
            elif r.verdict != "violated" and ("violated-out-of-regime" in r.flags or "out-of-regime" in r.flags):
                out.append(f"finding {f.id}: claim {cid} is violated only outside its stated regime: a lead")
            elif r.verdict != "violated" and r.expect == "violated":
                out.append(f"finding {f.id}: claim {cid} is not reproduced in this run (verdict {r.verdict})")
            elif f.evidence == "regime-path" and r.regime_path is not None and r.regime_path.get("trend") != "persists":
                out.append(f"finding {f.id}: claim {cid}'s regime path reads '{r.regime_path.get('trend')}', "
                           "not 'persists'")
        for q in f.consequences:  # the checked reach, checked against the run
            r = by_id.get(q.claim)
            if r is None:
                continue
            if q.status == "shown" and r.verdict != "violated":
                out.append(f"finding {f.id}: the consequence for {q.result} is not shown in this run: claim {q.claim} "
                           f"reads {r.verdict}")
            elif q.status == "shown" and "finite-width" in r.flags:
                out.append(f"finding {f.id}: the consequence for {q.result} fades along its regime path "
                           f"(finite-width): claim {q.claim}")
            elif q.status == "gap" and r.verdict == "violated":
                out.append(f"finding {f.id}: the consequence for {q.result} reads violated ({q.claim}): shown, not a gap")
    return out


README_BEGIN = "<!-- findings:begin -->"
README_END = "<!-- findings:end -->"


def _one(s: str) -> str:
    return " ".join(s.split())


def _reach_lines(f: Finding, graph: ProofGraph | None, verdicts: dict[str, str] | None = None) -> list[str]:
    """The checked reach of a finding, one markdown bullet per main result (and the rest of the reach in one)."""
    if f.reach_note or graph is None:
        return [f"- {f.reach_note or NO_GRAPH}."]
    own = [r for lab in f.results for r in graph.resolve(lab) if r in graph.main]
    out = [f"- **{r}**: a main result itself, shown violated by the finding's claims." for r in dict.fromkeys(own)]
    for q in f.consequences:
        v = (verdicts or {}).get(q.claim, q.expect)
        if q.status == "shown":
            out.append(f"- **{q.result}**: shown {v} by claim `{q.claim}` at the witness's configuration.")
        elif q.status == "absorbed":
            out.append(f"- **{q.result}**: absorbed. {_one(q.absorbed)} The step: \"{_one(q.line)}\"")
        else:
            out.append(f"- **{q.result}**: the conclusion survives at the witness (claim `{q.claim}`: {v}); the "
                       f"proof has a gap. {_one(q.gap)} The step: \"{_one(q.line)}\"")
    mains = {q.result for q in f.consequences}
    rest = [r for r in f.reach if r not in mains]
    if not f.reach:
        out.append("- No other result of the paper rests on it (proof graph).")
    elif rest:
        out.append(f"- Also resting on it (not main results): {', '.join(rest)}.")
    return out


def letter(pf: PaperFindings, title: str = "", verdicts: dict[str, str] | None = None) -> str:
    """The referee's letter to the authors (markdown): per finding the statement as printed, the counterexample,
    the witness command, the checked reach and the suggested repair; then the leads, each with what would decide
    it. `verdicts`: a run's verdict per claim id for the consequences (default: each claim's `expect`)."""
    name = title or pf.paper
    lines = [f"# Referee report: {name}", "",
             (f"{len(pf.findings)} finding(s): printed statements that fail, each with a standalone witness; "
             f"{len(pf.leads)} lead(s): violations that are not refutations, listed apart."), ""]
    for i, f in enumerate(pf.findings, 1):
        lines += [f"## {i}. {', '.join(f.results)}: {f.kind} ({f.severity})", "",
                  f"**Statement as printed, and what fails.** {_one(f.statement)}", "",
                  f"**Counterexample.** {_one(f.configuration)}", ""]
        if f.regime_path:
            lines += [f"**Along the regime path.** {_one(f.regime_path)}", ""]
        try:
            witness = f.witness.relative_to(Path.cwd())
        except ValueError:
            witness = f.witness
        lines += [(f"**Witness.** `python {witness}` (standalone, numpy/scipy; exits 0 when the violation "
                  f"reproduces). In lemmacheck: `{f.reproduce}`."), "",
                  "**Checked reach.** The results whose proofs rest on it, and what happens to each main result:", "",
                  *_reach_lines(f, pf.graph, verdicts), "",
                  f"**Impact.** {_one(f.impact)}", "",
                  f"**Suggested repair.** {_one(f.repair)}", ""]
    if pf.leads:
        lines += ["## Leads (not refutations)", ""]
        for lead in pf.leads:
            lines += [(f"- **{', '.join(lead.results)}** (`{lead.id}`): {_one(lead.reason)} "
                      f"What would decide it: {_one(lead.decide)}")]
        lines.append("")
    return "\n".join(lines)


def readme_block(pf: PaperFindings | None) -> str:
    """The generated findings block of a paper's README (between README_BEGIN and README_END): each finding with
    its checked reach, then the leads, from findings.toml and graph.toml."""
    lines = [README_BEGIN, "<!-- generated by `lemmacheck findings <paper> --format md --readme`; do not edit -->", ""]
    if pf is None or not (pf.findings or pf.leads):
        lines += ["No findings or leads (no findings.toml entries).", ""]
    else:
        lines += [f"**Findings ({len(pf.findings)})**", ""]
        for f in pf.findings:
            lines += [(f"- `{f.id}` ({', '.join(f.results)}; {f.kind}, {f.severity}, evidence {f.evidence}): "
                      f"{_one(f.statement)} Repair: {_one(f.repair)}"),
                      *("  " + r for r in _reach_lines(f, pf.graph))]
        lines += ["", f"**Leads ({len(pf.leads)})**", ""]
        lines += [f"- `{lead.id}` ({', '.join(lead.results)}): {lead.category}" for lead in pf.leads]
        lines.append("")
    return "\n".join([*lines, README_END])


def readme_current(text: str) -> str | None:
    """The block between the markers in a README's text (markers included), None if it has none."""
    i, j = text.find(README_BEGIN), text.find(README_END)
    return text[i:j + len(README_END)] if i >= 0 and j > i else None


def write_readme_block(readme: Path, block: str) -> bool:
    """Put `block` between the markers of `readme` (appended at the end when it has none); True if it changed."""
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    old = readme_current(text)
    new = text.replace(old, block) if old is not None else text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    if new == text:
        return False
    readme.write_text(new, encoding="utf-8")
    return True
