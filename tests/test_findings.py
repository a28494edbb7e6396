"""Findings and leads (lemmacheck.findings), regime paths and their trend (verdicts.regime_trend), and the shipped
papers' findings: every witness runs and reproduces, every expected violation is triaged.

tests/planted_findings is a test-only paper of known truth: a whp statement true for m >= 64 whose violation at
small m fades (a lead, flagged finite-width), an exact obstruction (a singular Gram matrix at every width: a
finding), and a claim whose own notes disclaim it (a lead only)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lemmacheck.claims import load_claim, load_claims, load_extension
from lemmacheck.cli import main
from lemmacheck.errors import ClaimError
from lemmacheck.findings import check_against_results, load_findings
from lemmacheck.runner import evaluate, run_claims
from lemmacheck.store import Store
from lemmacheck.summary import table
from lemmacheck.verdicts import TREND_ALPHA, cochran_armitage_decrease

PLANTED = Path(__file__).parent / "planted_findings"
ROOT = Path(__file__).parent.parent / "claims"
PAPERS = sorted(p for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.toml")))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    load_extension(PLANTED)
    claims, errors = load_claims([PLANTED])
    assert not errors and len(claims) == 3
    db = tmp_path_factory.mktemp("db") / "r.db"
    store = Store(db)
    run_id = run_claims(claims, store, seed=0, paths=[str(PLANTED)])
    results = evaluate(store, run_id, claims)
    store.close()
    out = {r.claim.id.split("/")[-1]: r for r in results}
    out["db"] = db
    return out


def _copy(tmp_path: Path, findings: str) -> Path:
    load_extension(PLANTED)  # its quantities, registered once from their one path; the copy holds claim files only
    folder = tmp_path / "plantedf"
    shutil.copytree(PLANTED, folder, ignore=shutil.ignore_patterns("__pycache__", "findings.toml", "extension.py"))
    (folder / "findings.toml").write_text(findings)
    return folder


GOOD = (PLANTED / "findings.toml").read_text()


def test_a_violation_that_fades_with_width_is_flagged_finite_width(planted):
    r = planted["chi2-ratio"]
    assert r.verdict == "violated" and "finite-width" in r.flags  # never a plain violated verdict
    t = r.regime_path
    assert t["trend"] == "fades" and t["p_decrease"] < TREND_ALPHA
    assert t["rates"][0] > 0.1 and t["rates"][-1] < 0.02


def test_an_exact_obstruction_persists_along_the_path(planted):
    r = planted["duplicate-gram"]
    assert r.verdict == "violated" and "finite-width" not in r.flags
    assert r.regime_path["trend"] == "persists" and r.regime_path["rates"] == [1.0] * 4


def test_findings_validator_refuses_a_finding_whose_path_fades(planted, tmp_path):
    folder = _copy(tmp_path, GOOD)
    pf = load_findings(folder)
    assert check_against_results(pf, [r for k, r in planted.items() if k != "db"]) == []  # the shipped triage is consistent
    # the fading claim listed under a finding with regime-path evidence: refused once the run shows it fades
    pf.findings[0] = type(pf.findings[0])(**{**pf.findings[0].__dict__, "evidence": "regime-path",
                                             "claims": ("plantedf/lemma-1/chi2-ratio",)})
    problems = check_against_results(pf, [r for k, r in planted.items() if k != "db"])
    assert problems and "fades" in problems[0]
    # a finding whose claim no longer reads violated is reported as not reproduced
    from dataclasses import replace

    gone = replace(planted["duplicate-gram"], verdict="holds")
    pf.findings[0] = type(pf.findings[0])(**{**pf.findings[0].__dict__, "claims": ("plantedf/lemma-2/duplicate-gram",)})
    assert "not reproduced" in check_against_results(pf, [gone])[0]


def test_a_disclaiming_claim_cannot_be_listed_under_a_finding(tmp_path):
    text = GOOD.replace('claims = ["plantedf/lemma-2/duplicate-gram"]',
                        'claims = ["plantedf/lemma-2/duplicate-gram", "plantedf/remark-3/disclaimed"]')
    text = text.replace('[[lead]]\nid = "plantedf/disclaimed"', '[[lead]]\nid = "plantedf/disclaimed-x"')
    text = text.replace('claims = ["plantedf/remark-3/disclaimed"]\nreason', 'claims = ["plantedf/lemma-1/chi2-ratio"]'
                        '\nreason')
    with pytest.raises(ClaimError, match="(?i)disclaims itself.*not a refutation.*only be a lead"):
        load_findings(_copy(tmp_path, text))


@pytest.mark.parametrize("old,new,match", [
    ('kind = "missing-hypothesis"', 'kind = "typo"', r"finding\[?.*kind.*unknown kind 'typo'"),
    ('severity = "lemma"', 'severity = "big"', "unknown severity"),
    ('evidence = "exact"', 'evidence = "vibes"', "unknown evidence"),
    ('evidence = "exact"', 'evidence = "regime-path"', "regime_path.*needs the path"),
    ('impact = "Planted: none."\n', '', "impact': missing"),
    ('witness = "witnesses/duplicate_gram.py"', 'witness = "witnesses/none.py"', "no witness script"),
    ('claims = ["plantedf/lemma-2/duplicate-gram"]', 'claims = ["plantedf/lemma-9/nothing"]', "no claim with id"),
    ('claims = ["plantedf/remark-3/disclaimed"]', 'claims = ["plantedf/lemma-1/chi2-ratio"]', "listed twice"),
    ('reason = "finite-width:', 'reason = "because:', "not a lead reason"),
    ('decide = "Run the regime path."\n', '', "decide': missing"),
    ('id = "plantedf/disclaimed"', 'id = "other/disclaimed"', "must start with the paper key"),
    ('[[finding]]', '[[findings]]\nx = 1\n[[finding]]', "unknown table"),
])
def test_bad_findings_input_names_the_file_and_field(tmp_path, old, new, match):
    assert old in GOOD
    with pytest.raises(ClaimError, match=match) as exc:
        load_findings(_copy(tmp_path, GOOD.replace(old, new, 1)))
    assert "findings.toml" in str(exc.value)


def test_every_expected_violation_must_be_covered(tmp_path):
    text = GOOD[:GOOD.index('[[lead]]\nid = "plantedf/disclaimed"')]
    with pytest.raises(ClaimError, match="1 claim.*expect 'violated'.*plantedf/remark-3/disclaimed"):
        load_findings(_copy(tmp_path, text))


def test_the_claim_loader_skips_findings_toml():
    claims, errors = load_claims([PLANTED])
    assert not errors and all(c.source.name != "findings.toml" for c in claims)


def test_regime_path_is_validated(tmp_path):
    src = (PLANTED / "fading.toml").read_text()
    for bad, match in (("levels = [4, 16, 64, 256]", "levels = [4, 16]", ), ("levels = [4, 16, 64, 256]",
                       "levels = [4, 16, 64, 999]"), ('param = "m"', 'param = "q"')):
        p = tmp_path / "c.toml"
        p.write_text(src.replace(bad, match))
        with pytest.raises(ClaimError, match="check.regime_path"):
            load_claim(p)
    c = load_claim(PLANTED / "fading.toml")  # the path's levels join the profile's configurations
    assert sorted(cfg["m"] for cfg in c.profiles["quick"].configs) == [4, 16, 64, 256]


def test_trend_test_false_alarm_rate_on_a_constant_rate():
    """A rate that does not change along the path is called fading at most about TREND_ALPHA of the time
    (measured here over 2000 seeded paths of 4 levels, 400 draws each, rate 0.2)."""
    rng = np.random.default_rng(1)
    calls = sum(cochran_armitage_decrease(list(rng.binomial(400, 0.2, 4)), [400] * 4, list(np.log([4, 16, 64, 256])))
                < TREND_ALPHA for _ in range(2000))
    assert calls / 2000 < 2 * TREND_ALPHA
    assert cochran_armitage_decrease([80, 35, 2, 0], [400] * 4, list(np.log([4, 16, 64, 256]))) < 1e-10


def test_summary_lists_findings_and_leads_separately(planted):
    text = table([r for k, r in planted.items() if k != "db"])
    assert "printed statements that fail" not in text
    found = text[text.index("Confirmed findings"):text.index("Leads")]
    leads = text[text.index("Leads"):]
    assert "plantedf/duplicate-gram" in found and "plantedf/chi2-ratio" not in found
    assert "plantedf/chi2-ratio" in leads and "finite-width" in leads
    assert "fades" in text[text.index("Regime paths"):]


def test_report_lists_findings_and_leads_separately(planted, tmp_path):
    from lemmacheck.report import build_report

    index = build_report(planted["db"], tmp_path / "site").read_text()
    assert "printed statements that fail" not in index
    found = index[index.index("Confirmed findings"):index.index("Leads: violated somewhere")]
    leads = index[index.index("Leads: violated somewhere"):]
    assert "plantedf/duplicate-gram" in found and "plantedf/lemma-1/chi2-ratio" not in found
    assert "plantedf/chi2-ratio" in leads and "finite-width" in leads
    page = next(p.read_text() for p in (tmp_path / "site" / "claims").glob("*.html")
                if "<code>plantedf/lemma-1/chi2-ratio</code>" in p.read_text())
    assert "regime path m = 4, 16, 64, 256" in page and "fades" in page


def test_a_deterministic_claims_rate_reads_as_a_search_hit_rate(planted):
    from dataclasses import replace

    r = planted["duplicate-gram"]
    assert "hit rate" not in table([r])  # a probability here: the statement is "with probability >= 0.9"
    chk = replace(r.claim.check, probability="always", prob_expr=None)
    det = replace(r, claim=replace(r.claim, check=chk))
    assert "hit rate [" in table([det])
    from lemmacheck.report.pages import _interval

    cfg = r.configs[0]
    assert "hit rate" not in _interval(cfg, r.claim) and "hit rate [" in _interval(cfg, det.claim)


def test_findings_json_shape(capsys):
    rc = main(["findings", "--json", str(PLANTED)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["errors"] == []
    (f,) = doc["findings"]
    assert set(f) >= {"id", "paper", "results", "claims", "kind", "severity", "evidence", "configuration",
                      "impact", "repair", "reproduce", "witness"}
    assert f["paper"] == "plantedf" and f["claims"] == ["plantedf/lemma-2/duplicate-gram"]
    assert {lead["id"] for lead in doc["leads"]} == {"plantedf/chi2-ratio", "plantedf/disclaimed"}
    assert all(set(lead) >= {"reason", "decide", "measurements", "claims"} for lead in doc["leads"])


def _witnesses() -> list[Path]:
    out = [PLANTED / "witnesses" / "duplicate_gram.py"]
    for paper in PAPERS:
        try:
            pf = load_findings(paper)
        except ClaimError:
            continue  # reported by test_every_expected_violation_of_a_shipped_paper_is_triaged
        out += [f.witness for f in pf.findings] if pf else []
    return out


@pytest.mark.parametrize("witness", _witnesses(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_witness_reproduces_its_finding(witness):
    """The second witness: a standalone script (numpy/scipy, never lemmacheck) exits 0 while the violation
    reproduces."""
    text = witness.read_text()
    assert "lemmacheck" not in text.replace("lemmacheck run", "").replace("lemmacheck repro", ""), \
        f"{witness} must not import lemmacheck"
    proc = subprocess.run([sys.executable, str(witness)], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{witness} no longer reproduces:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.name)
def test_every_expected_violation_of_a_shipped_paper_is_triaged(paper):
    """Each claim that expects `violated` is listed by a finding or a lead of its paper's findings.toml."""
    load_findings(paper)
