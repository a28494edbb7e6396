"""Proof graphs (lemmacheck.graph), finding consequences and the severity rule (lemmacheck.findings), the referee's
letter and the papers' generated README blocks.

tests/planted_graph is a test-only paper of known truth: its Lemma C (lambda_min of a Gram matrix >= 0.01) is false
for data with a repeated point; Lemma B rests on it and Theorem A on Lemma B, so Theorem A is in the finding's reach
two steps up, and a claim of Theorem A at the witness reads violated. Theorem D invokes Lemma C only for a case its
proof never uses (an absorbed consequence); Theorem F rests on Lemma E alone (outside the reach)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lemmacheck.claims import load_claims, load_extension
from lemmacheck.cli import main
from lemmacheck.errors import ClaimError
from lemmacheck.findings import letter, load_findings, readme_block, readme_current, write_readme_block
from lemmacheck.graph import load_graph

PLANTED = Path(__file__).parent / "planted_graph"
ROOT = Path(__file__).parent.parent / "claims"
PAPERS = sorted(p for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.toml")))
GRAPHED = [p for p in PAPERS if (p / "graph.toml").is_file()]
# Papers whose README.md must carry the generated findings block (<!-- findings:begin --> ... end): every paper with
# a findings.toml ("*"); folders that have the markers are always checked. Write or refresh the blocks with
# `lemmacheck findings <paper> --format md --readme` after editing findings.toml or graph.toml.
README_BLOCK_REQUIRED: tuple[str, ...] = ("*",)

GRAPH = (PLANTED / "graph.toml").read_text()
FINDINGS = (PLANTED / "findings.toml").read_text()


def _copy(tmp_path: Path, graph: str = GRAPH, findings: str = FINDINGS) -> Path:
    load_extension(PLANTED)  # its quantities, registered once from their one path; the copy holds data files only
    folder = tmp_path / "planted_graph"
    shutil.copytree(PLANTED, folder, ignore=shutil.ignore_patterns("__pycache__", "extension.py"))
    (folder / "graph.toml").write_text(graph)
    (folder / "findings.toml").write_text(findings)
    return folder


def test_the_planted_graph_loads_with_uses_and_used_by():
    g = load_graph(PLANTED)
    assert g is not None and g.paper == "planted_graph"
    assert g.main == ("Theorem A", "Theorem D", "Theorem F")
    assert set(g.nodes) == {"Theorem A", "Theorem D", "Theorem F", "Lemma B", "Lemma C", "Lemma E", "Assumption 1"}
    assert [u.result for u in g.uses("Lemma B")] == ["Lemma C"]
    assert g.used_by("Lemma C") == ["Theorem D", "Lemma B"]
    assert [(u.result, u.where) for u in g.uses("Theorem D")] == [("Lemma C", "proof"), ("Assumption 1", "statement")]
    assert load_graph(PLANTED.parent / "planted_findings") is None  # no graph.toml: no graph, no error


def test_reach_is_transitive():
    g = load_graph(PLANTED)
    # Lemma C -> Lemma B -> Theorem A: two steps up; Theorem D directly; Theorem F not at all
    assert g.reach({"Lemma C"}) == {"Lemma B", "Theorem A", "Theorem D"}
    assert g.reach({"Lemma B"}) == {"Theorem A"}
    assert g.reach({"Assumption 1"}) == {"Theorem D"}  # statement edges count
    assert g.reach({"Theorem A"}) == set()


def test_layers_put_main_results_on_top_and_every_edge_points_down():
    g = load_graph(PLANTED)
    layers = g.layers()
    assert set(layers[0]) == set(g.main)
    depth = {n: i for i, layer in enumerate(layers) for n in layer}
    assert all(depth[e.user] < depth[e.result] for e in g.edges)


def test_a_findings_reach_and_consequences_come_from_the_graph():
    pf = load_findings(PLANTED)
    (f,) = pf.findings
    assert f.reach == ("Lemma B", "Theorem A", "Theorem D")
    assert {q.result: q.status for q in f.consequences} == {"Theorem A": "shown", "Theorem D": "absorbed"}
    doc = f.to_json()
    assert doc["reach"] == ["Lemma B", "Theorem A", "Theorem D"]
    assert doc["consequences"][0] == {"result": "Theorem A", "status": "shown",
                                      "claim": "planted_graph/theorem-a/at-lemma-c-witness", "verdict": "violated"}
    assert doc["consequences"][1]["status"] == "absorbed" and doc["consequences"][1]["line"].startswith("If the data")
    assert "planted_graph/theorem-a/at-lemma-c-witness" in pf.covered()  # the consequence claim is triaged by it


def test_a_folder_without_a_graph_has_an_empty_reach_and_says_so(capsys):
    rc = main(["findings", "--json", str(PLANTED.parent / "planted_findings")])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert all(f["reach"] == [] and f["consequences"] == [] and "no proof graph" in f["reach_note"]
               for f in doc["findings"])


ABSORBED_D = '''
[[finding.consequence]]
result = "Theorem D"
absorbed = "The proof of Theorem D invokes Lemma C only for orthogonal data, which have no repeated point."
line = "If the data are orthogonal we could apply Lemma C; otherwise we argue directly."
'''
SHOWN_A = '''
[[finding.consequence]]
result = "Theorem A"
claim = "planted_graph/theorem-a/at-lemma-c-witness"
'''


@pytest.mark.parametrize("findings,match", [
    # a main result in the reach without a consequence entry
    (FINDINGS.replace(ABSORBED_D, ""), (r"finding 'planted_graph/repeated-point'.consequence.*\['Theorem D'\].*no "
     "consequence entry")),
    # a consequence for a main result outside the reach (Theorem F rests on Lemma E only)
    (FINDINGS + '\n[[finding.consequence]]\nresult = "Theorem F"\nabsorbed = "x"\nline = "y"\n',
     r"consequence\[2\].result.*'Theorem F' is not in the finding's reach"),
    # severity main-result with no shown consequence (Theorem A absorbed instead)
    (FINDINGS.replace(SHOWN_A, '\n[[finding.consequence]]\nresult = "Theorem A"\nabsorbed = "a constant"\n'
                      'line = "By Lemma B"\n'), r"severity.*'main-result' but no main result is shown to fail"),
    # ... and a shown consequence with a lesser severity
    (FINDINGS.replace('severity = "main-result"', 'severity = "lemma"'),
     r"severity.*'lemma' but \['Theorem A'\] is shown to fail"),
    # a shown consequence's claim must expect violated; a claim of another result is refused
    (FINDINGS.replace('claim = "planted_graph/theorem-a/at-lemma-c-witness"',
                      'claim = "planted_graph/lemma-c/repeated-point"'), r"consequence\[0\].claim.*claim of 'Lemma C'"),
    (FINDINGS.replace('claim = "planted_graph/theorem-a/at-lemma-c-witness"', 'claim = "planted_graph/none"'),
     r"consequence\[0\].claim.*no claim with id"),
    # a half-written entry: absorbed without its line
    (FINDINGS.replace('line = "If the data are orthogonal we could apply Lemma C; otherwise we argue directly."\n',
                      ''), r"consequence\[1\].*expected `claim` alone"),
    (FINDINGS.replace('result = "Theorem D"\nabsorbed', 'result = "Theorem D"\nwhy = "x"\nabsorbed'),
     r"consequence\[1\].why.*unknown field"),
])
def test_consequence_rules_name_the_file_and_field(tmp_path, findings, match):
    assert findings != FINDINGS
    with pytest.raises(ClaimError, match=match) as exc:
        load_findings(_copy(tmp_path, findings=findings))
    assert "findings.toml" in str(exc.value)


def test_a_finding_on_a_main_result_itself_is_main_result_severity(tmp_path):
    """Nothing rests on Theorem A, so it takes no consequence entry; the finding itself shows a main result false."""
    text = FINDINGS.replace(SHOWN_A, "").replace(ABSORBED_D, "").replace('results = ["Lemma C"]',
                                                                         'results = ["Theorem A"]').replace(
        'claims = ["planted_graph/lemma-c/repeated-point"]', 'claims = ["planted_graph/theorem-a/at-lemma-c-witness", '
        '"planted_graph/lemma-c/repeated-point"]')
    (f,) = load_findings(_copy(tmp_path, findings=text)).findings
    assert f.reach == () and f.severity == "main-result"
    assert "**Theorem A**: a main result itself" in letter(load_findings(_copy(tmp_path / "b", findings=text)))
    with pytest.raises(ClaimError, match=r"severity.*'lemma' but \['Theorem A'\] is shown to fail"):
        load_findings(_copy(tmp_path / "c", findings=text.replace('severity = "main-result"', 'severity = "lemma"')))


def test_consequences_need_a_graph(tmp_path):
    folder = _copy(tmp_path)
    (folder / "graph.toml").unlink()
    with pytest.raises(ClaimError, match=r"consequence.*need the paper's proof graph.*graph.toml"):
        load_findings(folder)
    # without the graph and without consequences the finding loads, with an empty reach and its note
    (folder / "findings.toml").write_text(FINDINGS.replace(SHOWN_A, "").replace(ABSORBED_D, "")
                                          .replace('claims = ["planted_graph/lemma-c/repeated-point"]',
                                                   'claims = ["planted_graph/lemma-c/repeated-point", '
                                                   '"planted_graph/theorem-a/at-lemma-c-witness"]'))
    (f,) = load_findings(folder).findings
    assert f.reach == () and f.consequences == () and "no proof graph" in f.reach_note


def test_a_consequence_claim_belongs_to_its_finding_only(tmp_path):
    text = FINDINGS + ('\n[[lead]]\nid = "planted_graph/x"\nresults = ["Theorem A"]\n'
                       'claims = ["planted_graph/theorem-a/at-lemma-c-witness"]\nreason = "misread: x"\n'
                       'decide = "x"\nmeasurements = "x"\n')
    with pytest.raises(ClaimError, match="listed twice"):
        load_findings(_copy(tmp_path, findings=text))


@pytest.mark.parametrize("old,new,match", [
    ('[results."Lemma C"]\nuses = []', '[results."Lemma C"]\nuses = [{ result = "Theorem A", line = "x" }]',
     r"field 'results.(Theorem A|Lemma B|Lemma C).uses': cycle: .*Lemma C.*->.*Theorem A"),
    ('{ result = "Lemma E", line', '{ result = "Lemma Z", line', (r"results.Theorem F.uses\[0\].result'.*unknown "
     "label 'Lemma Z'")),
    ('[results."Lemma E"]\nuses = []\n', '', r"field 'results.Lemma E': no entry for 1 result"),
    ('[results."Lemma E"]', '[results."Lemma Q"]', r"field 'results.Lemma Q': unknown label"),
    ('main = ["Theorem A", "Theorem D", "Theorem F"]', 'main = ["Theorem A", "Theorem Z"]',
     r"field 'main': 'Theorem Z' is not a result"),
    ('main = ["Theorem A", "Theorem D", "Theorem F"]', 'main = ["Theorem A", "Assumption 1"]',
     r"field 'main': 'Assumption 1' is not a result"),
    ('[results."Lemma E"]\nuses = []', '[results."Lemma E"]\nuses = [{ result = "Lemma E", line = "x" }]',
     r"results.Lemma E.uses\[0\].result'.*uses itself"),
    ('[results."Lemma E"]\nuses = []', '[results."Lemma E"]\nuses = []\nproof = "x"', r"results.Lemma E.proof'.*unknown"),
    ('line = "Lemma E bounds the trace." }', 'line = "Lemma E bounds the trace.", in = "appendix" }',
     r"results.Theorem F.uses\[0\].in'.*unknown value"),
    ('line = "Lemma E bounds the trace." }', 'line = "" }', r"results.Theorem F.uses\[0\].line'.*missing or empty"),
    ('nodes = ["Assumption 1"]', 'nodes = ["Assumption 1"]\nedges = []', r"field 'edges': unknown field"),
])
def test_bad_graph_input_names_graph_toml_and_the_field(tmp_path, old, new, match):
    assert old in GRAPH
    with pytest.raises(ClaimError, match=match) as exc:
        load_graph(_copy(tmp_path, graph=GRAPH.replace(old, new, 1)))
    assert str(exc.value).startswith(str(tmp_path / "planted_graph" / "graph.toml"))


def test_graph_command_json_and_text(capsys):
    assert main(["graph", str(PLANTED), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["paper"] == "planted_graph" and doc["main"] == ["Theorem A", "Theorem D", "Theorem F"]
    nodes = {n["label"]: n for n in doc["nodes"]}
    assert len(doc["nodes"]) == 7 and set(nodes["Lemma C"]) >= {"label", "main", "uses", "used_by"}
    assert nodes["Lemma B"]["uses"] == [{"result": "Lemma C", "line": "Lemma C gives lambda_min >= 0.01, hence the "
                                         "ratio.", "in": "proof"}]
    assert nodes["Lemma C"]["used_by"] == ["Theorem D", "Lemma B"] and nodes["Theorem A"]["main"] is True
    assert nodes["Lemma C"]["main"] is False
    assert main(["graph", str(PLANTED)]) == 0
    text = capsys.readouterr().out
    assert "* Theorem A: uses Lemma B; used by -" in text and "  Lemma C: uses -; used by Theorem D, Lemma B" in text


def test_graph_command_errors_are_one_line(tmp_path, capsys):
    folder = _copy(tmp_path, graph=GRAPH.replace('[results."Lemma E"]', '[results."Lemma Q"]'))
    assert main(["graph", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "graph.toml" in err and "results.Lemma Q" in err
    assert main(["graph", str(PLANTED.parent / "planted_findings")]) == 2
    assert "no proof graph declared" in capsys.readouterr().err


def test_findings_of_a_folder_without_findings_toml_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["findings", str(tmp_path / "empty")]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "no findings.toml" in out


def test_the_letter_carries_statement_witness_reach_and_repair(capsys):
    assert main(["findings", str(PLANTED), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# Referee report: planted_graph")
    assert "Lemma C states lambda_min(X^T X / m) >= 0.01" in md  # the statement as printed
    assert "**Counterexample.** n = 3 with x_3 = x_1" in md
    assert "`python " in md and "witnesses/repeated_point.py`" in md
    assert ("- **Theorem A**: shown violated by claim `planted_graph/theorem-a/at-lemma-c-witness` at the witness's "
            "configuration.") in md
    assert "- **Theorem D**: absorbed. The proof of Theorem D invokes Lemma C only for orthogonal data" in md
    assert "\"If the data are orthogonal we could apply Lemma C; otherwise we argue directly.\"" in md
    assert "Also resting on it (not main results): Lemma B." in md
    assert "**Suggested repair.** Assume distinct data points in Lemma C." in md
    # leads apart, with what would decide them
    md2 = letter(load_findings(PLANTED.parent / "planted_findings"))
    leads = md2[md2.index("## Leads"):]
    assert "plantedf/chi2-ratio" in leads and "What would decide it: Nothing: the statement holds" in leads


def test_a_consequence_run_at_the_witness_reads_violated(tmp_path, capsys):
    """Through the runner (quick profile): the claim of Theorem A at Lemma C's witness reads violated, and
    `findings --db` reports the run's verdict."""
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    load_extension(PLANTED)
    claims, errors = load_claims([PLANTED])
    assert not errors
    db = tmp_path / "r.db"
    store = Store(db)
    run_id = run_claims(claims, store, seed=0, paths=[str(PLANTED)])
    results = {r.claim.id: r for r in evaluate(store, run_id, claims)}
    store.close()
    assert results["planted_graph/theorem-a/at-lemma-c-witness"].verdict == "violated"
    assert results["planted_graph/lemma-c/repeated-point"].verdict == "violated"
    assert main(["findings", str(PLANTED), "--json", "--db", str(db)]) == 0
    (f,) = json.loads(capsys.readouterr().out)["findings"]
    assert f["consequences"][0]["verdict"] == "violated"


def test_a_run_checks_the_consequences():
    """check_against_results: a shown consequence whose claim does not read violated in the run is reported."""
    from types import SimpleNamespace

    from lemmacheck.findings import check_against_results

    pf = load_findings(PLANTED)
    claim = SimpleNamespace(id="planted_graph/theorem-a/at-lemma-c-witness")
    ok = SimpleNamespace(claim=claim, verdict="violated", flags=[], expect="violated", regime_path=None)
    assert check_against_results(pf, [ok]) == []
    held = SimpleNamespace(claim=claim, verdict="holds", flags=[], expect="violated", regime_path=None)
    (msg,) = check_against_results(pf, [held])
    assert "consequence for Theorem A is not shown in this run" in msg and "reads holds" in msg
    faded = SimpleNamespace(claim=claim, verdict="violated", flags=["finite-width"], expect="violated", regime_path=None)
    assert "fades" in check_against_results(pf, [faded])[0]


def test_run_verdicts_replace_the_expected_ones():
    pf = load_findings(PLANTED)
    doc = pf.findings[0].to_json({"planted_graph/theorem-a/at-lemma-c-witness": "holds"})
    assert doc["consequences"][0]["verdict"] == "holds"


def test_readme_block_is_written_between_the_markers_and_read_back(tmp_path, capsys):
    folder = _copy(tmp_path)
    readme = folder / "README.md"
    readme.write_text("# Planted\n\nText.\n")
    assert main(["findings", str(folder), "--format", "md", "--readme"]) == 0
    text = readme.read_text()
    assert text.startswith("# Planted\n\nText.\n") and readme_current(text) == readme_block(load_findings(folder))
    assert "Theorem A: shown violated" in text.replace("**", "")
    before = text
    assert not write_readme_block(readme, readme_block(load_findings(folder)))  # idempotent
    readme.write_text(before.replace("Theorem D", "Theorem X", 1) + "\nAfter.\n")
    assert write_readme_block(readme, readme_block(load_findings(folder)))
    assert readme.read_text() == before + "\nAfter.\n"


def test_the_planted_witness_reproduces():
    """The planted finding's second witness: a standalone script (numpy only) that exits 0 while it reproduces."""
    import subprocess
    import sys

    witness = PLANTED / "witnesses" / "repeated_point.py"
    assert "lemmacheck" not in witness.read_text()
    proc = subprocess.run([sys.executable, str(witness)], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_is_written_only_beside_a_findings_toml(tmp_path, capsys):
    folder = _copy(tmp_path)
    (folder / "findings.toml").unlink()
    (folder / "theorem-a.toml").unlink()
    (folder / "lemma-c.toml").write_text((PLANTED / "lemma-c.toml").read_text().replace('expect = "violated"\n', ""))
    other = _copy(tmp_path / "b")
    assert main(["findings", str(other), str(folder), "--format", "md", "--readme"]) == 0
    assert not (folder / "README.md").exists() and readme_current((other / "README.md").read_text())
    assert f"{folder / 'README.md'}: no findings.toml beside it" in capsys.readouterr().err


def _readme_folders() -> list[Path]:
    out = []
    for p in PAPERS:
        text = (p / "README.md").read_text() if (p / "README.md").is_file() else ""
        required = ("*" in README_BLOCK_REQUIRED or p.name in README_BLOCK_REQUIRED) and (p / "findings.toml").is_file()
        if readme_current(text) is not None or required:
            out.append(p)
    return out


def test_every_papers_readme_block_is_what_the_generator_writes():
    """Over every claims/<paper>/ whose README has the markers (and every one README_BLOCK_REQUIRED names): the
    block equals what `lemmacheck findings <paper> --format md --readme` writes. One test over all folders, so
    none is skipped when no folder has a block yet."""
    problems = []
    for paper in _readme_folders():
        text = (paper / "README.md").read_text() if (paper / "README.md").is_file() else ""
        have = readme_current(text)
        if have is None:
            problems.append(f"{paper}/README.md has no findings block")
        elif have != readme_block(load_findings(paper)):
            problems.append(f"{paper}/README.md's findings block is stale")
    assert not problems, "; ".join(problems) + ": run `lemmacheck findings claims/<paper> --format md --readme`"


def test_the_readme_check_catches_a_stale_block(tmp_path):
    folder = _copy(tmp_path)
    write_readme_block(folder / "README.md", readme_block(load_findings(folder)))
    assert readme_current((folder / "README.md").read_text()) == readme_block(load_findings(folder))
    (folder / "findings.toml").write_text(FINDINGS.replace("Assume distinct data points", "Assume distinct points"))
    assert readme_current((folder / "README.md").read_text()) != readme_block(load_findings(folder))


@pytest.mark.parametrize("paper", GRAPHED, ids=lambda p: p.name)
def test_a_shipped_papers_graph_loads_and_its_consequences_validate(paper):
    """Every result of _paper.toml has an entry, labels are known, no cycle (load_graph raises otherwise), and the
    paper's findings.toml validates against it (reach, consequences, severity)."""
    from lemmacheck.claims import load_paper

    g = load_graph(paper)
    assert g is not None and set(load_paper(paper).results) <= set(g.nodes)
    assert set(g.main) <= set(g.results)
    load_findings(paper)
