"""Findings: the reviewed statements the project makes about a paper, kept per paper in claims/<paper>/findings.toml.

A verdict is about the configurations that ran; a finding says "this published statement is false as printed" and
is held to a referee's standard (docs/findings.md): in regime, independent of hidden constants (exact at every
width, or persisting along a regime path on which they grow), the statement as printed, and a second witness (a
standalone script). One `[[finding]]` per mechanism, listing every claim it covers. Everything else that reads
violated is a `[[lead]]`: why it is not a refutation and what would decide it.

`load_findings` validates a folder's file against its claims and raises ClaimError naming the file and field;
every claim of the folder that expects `violated` (top level or in a profile) must be covered by a finding or a lead.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claims import FINDINGS_FILE, Claim, is_claim_name, load_claims
from .errors import ClaimError

KINDS = ("error", "misprint", "missing-hypothesis", "conjecture")
SEVERITIES = ("main-result", "lemma", "proof-step", "remark")
EVIDENCE = ("exact", "regime-path")
LEAD_REASONS = ("finite-width", "out-of-regime", "disclaimed", "hidden-constant", "off-scale", "misread")
# Words by which a claim file's own notes or finding text say it is not a refutation: such a claim is a lead.
DISCLAIMERS = re.compile(r"not a refutation|no refutation|could absorb|out of regime only|\ba lead\b|\blead:|^\s*lead\b",
                         re.IGNORECASE | re.MULTILINE)

_FINDING_FIELDS = {"id", "results", "claims", "kind", "severity", "evidence", "statement", "configuration",
                   "regime_path", "impact", "repair", "reproduce", "witness"}
_FINDING_OPTIONAL = {"regime_path"}
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

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "paper": self.paper, "results": list(self.results), "claims": list(self.claims),
                "kind": self.kind, "severity": self.severity, "evidence": self.evidence,
                "statement": self.statement, "configuration": self.configuration, "regime_path": self.regime_path,
                "impact": self.impact, "repair": self.repair, "reproduce": self.reproduce,
                "witness": str(self.witness), "source": str(self.source)}


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

    def covered(self) -> set[str]:
        return {c for e in [*self.findings, *self.leads] for c in e.claims}


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


def parse_findings(raw: dict[str, Any], path: Path, claims: dict[str, Claim]) -> PaperFindings:
    """Validate a findings table against the folder's claims (id -> Claim); raise ClaimError on the first problem."""
    folder = path.parent
    papers = sorted({c.paper for c in claims.values()})
    paper = papers[0] if len(papers) == 1 else folder.name  # the folder's claims' paper key
    extra = sorted(set(raw) - {"finding", "lead"})
    if extra:
        raise ClaimError(path, extra[0], "unknown table", "only [[finding]] and [[lead]] entries")
    out = PaperFindings(paper, folder)
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
            out.findings.append(Finding(eid, paper, results, cids, kind, severity, evidence, texts["statement"],
                                        texts["configuration"], rpath, texts["impact"], texts["repair"],
                                        texts["reproduce"], wpath, path))
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
        pf = parse_findings(raw, path, {c.id: c for c in claims})
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
    along its regime path (flag finite-width), or that is violated only outside its stated regime."""
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
    return out
