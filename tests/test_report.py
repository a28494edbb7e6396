"""HTML report: built from a real (tiny) results store, checked for content, escaping, self-containment,
exports and comparison marks; plus unit tests of the LaTeX -> MathML converter and the helpers."""

from __future__ import annotations

import csv
import html as html_lib
import json
import re
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lemmacheck.claims import load_claims
from lemmacheck.report import build_report
from lemmacheck.report.data import ClaimView, Comparison, OldClaim, compare_view, label_key, safe_name
from lemmacheck.report.mathml import LatexError, latex_to_mathml, render_statement, sanitize
from lemmacheck.runner import run_claims
from lemmacheck.store import Store

XSS = "<script>alert(1)</script>"

NORM_CLAIM = r"""
id        = "zou2018/theorem-5.1-i/layer-output-norm"
paper     = "zou2018"
result    = "Theorem 5.1 (i)"
title     = "Hidden-layer outputs stay bounded <script>alert(1)</script>"
statement = '\|x_{l,i}\|_2 \le 3/2 \text{ for all } l \in [L] \text{ w.p. } \ge 1-\delta <script>alert(1)</script>'
kind      = "norm-at-init"
network   = "zou2018"
inputs    = { kind = "unit-sphere", n = "n", d = "d", separation = "phi", geometry = "close-pair" }
notes     = "Regime constant chosen so that the smallest width lies outside it. <script>alert(1)</script>"

[params]
m     = { values = [16, 32, 64] }
L     = { min = 1, max = 4 }
n     = { min = 2, max = 8 }
d     = { min = 2, max = 16 }
phi   = { min = 0.01, max = 0.5, log = true }
delta = { values = [0.1] }

[check]
quantity         = "max-layer-output-norm"
relation         = "<="
bound            = "3/2"
probability      = "1 - delta"
requires         = "m >= C * L**4 * phi**-4 * log(n**2 * L / delta)"
regime_constants = { C = 0.002 }

[profiles.quick]
replicates = 20
shard_size = 10
grid = { m = [16, 32, 64], L = [2], n = [4], d = [8], phi = [0.3], delta = [0.1] }
"""

SCALAR_CLAIM = r"""
id        = "toy/lemma-a.2/telescoping"
paper     = "toy"
result    = "Lemma A.2"
title     = "Telescoping inequality"
statement = '\frac{b-a}{b^{2p}} \le \frac{b^{1-2p}-a^{1-2p}}{1-2p}, \quad 0 < a \le b,\ p \in [0,1]'
kind      = "scalar"
network   = "scalar"

[params]
k = { values = [1, 2] }

[check]
quantity    = "telescoping-ratio"
relation    = "<="
bound       = "BOUND"
probability = "always"
search      = "random"

[profiles.quick]
replicates = 20
shard_size = 10
grid = { k = [1, 2] }
"""

FINDING_CLAIM = SCALAR_CLAIM.replace("lemma-a.2/telescoping", "lemma-a.10/telescoping-tight").replace(
    "Lemma A.2", "Lemma A.10").replace("BOUND", "0.9").replace(
    'kind      = "scalar"', 'kind      = "scalar"\nexpect = "violated"\n'
    "finding = 'The ratio reaches 1, so a constant 0.9 is wrong: $\\rho \\le 1$ is the sharp form.'")

# The toy paper's reviewed finding (the report lists confirmed findings from findings.toml only).
FINDINGS_TOML = r"""
[[finding]]
id = "toy/tight-ratio"
results = ["Lemma A.10"]
claims = ["toy/lemma-a.10/telescoping-tight"]
kind = "error"
severity = "lemma"
evidence = "exact"
statement = "The ratio reaches 1, so a constant 0.9 is wrong: $\\rho \\le 1$ is the sharp form."
configuration = "k = 1"
impact = "none"
repair = "constant 1"
reproduce = "lemmacheck run claims/toy/finding.toml"
witness = "witnesses/tight.py"

[[finding.consequence]]
result = "Theorem 3"
absorbed = "Theorem 3 uses Lemma A.10 only through Lemma B.3's constant, which absorbs 1/0.9."
line = "for some constant C"
"""
# The toy paper's proof graph: Lemma A.10 (the finding) is two steps below the main Theorem 3, through Lemma B.3.
GRAPH_TOML = """
main = ["Theorem 3"]
nodes = ["Assumption 1"]
[results."Theorem 3"]
uses = [{ result = "Lemma B.3", line = "By Lemma B.3" }, { result = "Lemma A.2", line = "as in Lemma A.2" },
        { result = "Assumption 1", line = "Under Assumption 1", in = "statement" }]
[results."Lemma B.3"]
uses = [{ result = "Lemma A.10", line = "for some constant C" }]
[results."Lemma B.4"]
uses = [{ result = "Lemma A.10", line = "Lemma A.10 again" }]
[results."Lemma A.10"]
uses = []
[results."Lemma A.2"]
uses = []
[results."Corollary 5 <script>alert(1)</script>"]
uses = [{ result = "Theorem 3", line = "Theorem 3 <script>alert(1)</script> gives" }]
"""

INFEASIBLE_CLAIM = r"""
id         = "toy/theorem-3/global-convergence"
paper      = "toy"
result     = "Theorem 3"
title      = "Gradient descent converges"
statement  = '\lim_{t \to \infty} \mathcal{L}(\theta_t) = 0 \unsupportedmacro'
kind       = "training"
infeasible = "needs training to convergence at infinite width"
"""

SCALING_CLAIM = r"""
id        = "toy/lemma-b.3/ratio-scaling"
paper     = "toy"
result    = "Lemma B.3"
title     = "The ratio is O(k)"
statement = '\rho \le C k'
kind      = "scalar"
network   = "scalar"

[params]
k = { values = [1, 2, 4, 8] }

[check]
quantity    = "telescoping-ratio"
relation    = "<="
bound       = "C * k"
constants   = ["C"]
probability = "always"
search      = "random"

[profiles.quick]
replicates = 20
shard_size = 10
grid = { k = [1, 2, 4, 8] }

[profiles.full]
grid = { k = [1, 2, 4, 8] }
"""

REMOVED_CLAIM = INFEASIBLE_CLAIM.replace("theorem-3/global-convergence", "theorem-4/gone").replace(
    "Theorem 3", "Theorem 4")


PAPER = f"""
key     = "toy"
title   = "A toy paper {XSS}"
authors = "A. Author"
venue   = "arXiv:0000.00000"
link    = "https://arxiv.org/abs/0000.00000"
scope   = "every numbered result"
results = ["Lemma A.2", "Lemma A.10", "Theorem 3", "Lemma B.3", "Lemma B.4", "Corollary 5 {XSS}"]
"""


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return folder


def _run(claims_dir: Path, db: Path) -> int:
    claims, errors = load_claims([claims_dir])
    assert not errors, errors
    store = Store(db)
    try:
        return run_claims(claims, store, seed=0)
    finally:
        store.close()


def make_site(root: Path) -> dict:
    """Two stores (old, new) whose verdicts differ, and the report of the new one compared with the old.

    old: telescoping bound 1 (holds), plus a claim that is removed later.
    new: telescoping bound 0.5 (violated: started failing), a new confirmed finding, a new scaling claim,
         the rest unchanged.
    Different folders per version, so each run keeps its own files. The new folder has a _paper.toml.
    """
    old_dir = _write(root / "old" / "claims", {
        "zou2018/norm.toml": NORM_CLAIM, "toy/telescoping.toml": SCALAR_CLAIM.replace("BOUND", "1"),
        "toy/infeasible.toml": INFEASIBLE_CLAIM, "toy/removed.toml": REMOVED_CLAIM})
    new_dir = _write(root / "new" / "claims", {
        "zou2018/norm.toml": NORM_CLAIM, "toy/telescoping.toml": SCALAR_CLAIM.replace("BOUND", "0.5"),
        "toy/finding.toml": FINDING_CLAIM, "toy/infeasible.toml": INFEASIBLE_CLAIM,
        "toy/scaling.toml": SCALING_CLAIM, "toy/_paper.toml": PAPER, "toy/findings.toml": FINDINGS_TOML,
        "toy/graph.toml": GRAPH_TOML,
        "toy/witnesses/tight.py": "print('ratio 1 > 0.9')\n"})
    old_db, new_db = root / "old.db", root / "new.db"
    _run(old_dir, old_db)
    run_id = _run(new_dir, new_db)
    out = root / "site"
    index = build_report(new_db, out, compare=old_db)
    return {"out": out, "index": index, "old_db": old_db, "new_db": new_db, "run_id": run_id}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("report"))


def _pages(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text(encoding="utf-8") for p in sorted(out.rglob("*.html"))}


def _claim_page(site, claim_id: str) -> str:
    index = site["index"].read_text()
    label_links = re.findall(r'href="(claims/[^"]+\.html)"', index)
    for href in label_links:
        text = (site["out"] / href).read_text()
        if f"<code>{claim_id}</code>" in text:
            return text
    raise AssertionError(f"no page for {claim_id}")


def _row(index: str, claim_id: str) -> re.Match:
    for m in re.finditer(r'<tr data-verdict="([\w/]+)"[^>]*>(?:(?!</tr>).)*</tr>', index, re.DOTALL):
        if f'<div class="small">{claim_id}</div>' in m.group(0):
            return m
    raise AssertionError(f"no index row for {claim_id}")


IDS = ["zou2018/theorem-5.1-i/layer-output-norm", "toy/lemma-a.2/telescoping", "toy/lemma-a.10/telescoping-tight",
       "toy/theorem-3/global-convergence", "toy/lemma-b.3/ratio-scaling"]


# --------------------------------------------------------------------------------------------- site

def test_index_lists_every_claim_with_a_page(site):
    index = site["index"].read_text()
    assert site["index"] == site["out"] / "index.html"
    for cid in IDS:
        assert cid in index
    hrefs = set(re.findall(r'href="(claims/[^"]+\.html)"', index))
    assert len(hrefs) == len(IDS)
    for h in hrefs:
        assert (site["out"] / h).is_file()
    for label in ("Theorem 5.1 (i)", "Lemma A.2", "Lemma A.10", "Theorem 3", "Lemma B.3"):
        assert f">{label}</a>" in index
    # Run facts and per-paper coverage counts.
    for fact in ("seed", "profile", "versions", "machine", "started", "finished", "wall-clock span"):
        assert f"<dt>{fact}</dt>" in index
    assert 'id="paper-toy"' in index and 'id="paper-zou2018"' in index


def test_paper_order_is_natural(site):
    index = site["index"].read_text()
    toy = index[index.index('id="paper-toy"'):]
    assert toy.index(">Lemma A.2</a>") < toy.index(">Lemma A.10</a>")
    assert label_key("Lemma A.2") < label_key("Lemma A.10") < label_key("Lemma B.1")
    assert label_key("Theorem 5.1 (ii)") < label_key("Theorem 5.1 (iv)") < label_key("Theorem 5.1 (ix)")
    assert label_key("Theorem 5.1") < label_key("Lemma A.1")  # main text before the appendix


def test_verdicts_flags_and_findings(site):
    index = site["index"].read_text()
    findings = index[index.index("Confirmed findings"):index.index("<h2>Coverage")]
    assert "printed statements that fail" not in index  # only reviewed findings are listed, under their heading
    assert "toy/tight-ratio" in findings and "Lemma A.10" in findings and "toy/lemma-a.10/telescoping-tight" in findings
    assert "$" not in findings and "<math" in findings  # $...$ in a finding renders as MathML
    # a claim that reads violated but no findings.toml entry lists is "not triaged", never a confirmed finding
    untriaged = index[index.index("Violated, not triaged"):index.index("<h2>Coverage")]
    assert "toy/lemma-a.2/telescoping" in untriaged
    row = _row(index, "toy/lemma-a.2/telescoping")
    assert row.group(1) == "violated" and "expected holds" in row.group(0)
    assert _row(index, "toy/lemma-a.10/telescoping-tight").group(1) == "violated"
    assert _row(index, "toy/theorem-3/global-convergence").group(1) == "infeasible"
    page = _claim_page(site, "toy/theorem-3/global-convergence")
    assert "needs training to convergence at infinite width" in page


def test_user_text_is_escaped_everywhere(site):
    pages = _pages(site["out"])
    assert len(pages) == 2 + len(IDS)  # the index, the claims and the toy paper's proof graph
    for name, text in pages.items():
        assert "<script>alert" not in text, name
        # The only scripts are the report's own inline script.
        assert text.count("<script>") == 1, name
    page = _claim_page(site, IDS[0])
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # title and notes, as text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in site["index"].read_text()
    data = (site["out"] / "results.json").read_text() + (site["out"] / "results.csv").read_text()
    assert XSS in data  # exports keep the original text (they are data, not HTML)


def test_mathml_and_fallback(site):
    page = _claim_page(site, IDS[0])
    statement = page[page.index("<h2>Statement</h2>"):page.index("<h2>What is checked</h2>")]
    assert "<math" in statement and "<msub>" in statement and "<mo>≤</mo>" in statement
    checked = page[page.index("<h2>What is checked</h2>"):]
    assert "<mfrac><mn>3</mn><mn>2</mn></mfrac>" in checked  # the bound, from sympy
    assert "with probability &gt;= 1 - delta" in checked  # quantifiers in words
    page = _claim_page(site, "toy/theorem-3/global-convergence")
    statement = page[page.index("<h2>Statement</h2>"):]
    assert '<code class="latex-src"' in statement and "\\unsupportedmacro" in statement


def test_plots_present(site):
    page = _claim_page(site, IDS[0])
    assert page.count('<svg class="plot"') == 2  # estimate vs bound, slack ECDF
    est = page[page.index("Estimate against the bound"):page.index("Slack distribution")]
    assert "regime boundary" in est and "outside the stated regime" in est
    assert re.search(r'<circle [^>]*fill="#fff"', est)  # hollow marker: m = 16 lies outside the regime
    ecdf = page[page.index("Slack distribution"):]
    assert "slack = 1 (tight)" in ecdf and "δ = 0.1" in ecdf
    assert "lemmacheck repro zou2018/theorem-5.1-i/layer-output-norm" in page
    assert "--shard-size 10" in page


def test_scaling_claim_shows_exponents_and_implied_constant(site):
    page = _claim_page(site, "toy/lemma-b.3/ratio-scaling")
    section = page[page.index("<h2>Scaling law</h2>"):page.index("<h2>Worst configuration</h2>")]
    assert "claimed exponent" in section and "fitted exponent" in section
    row = re.search(r"<tr><td>k</td><td class=\"num\">([^<]+)</td><td class=\"num\">([^<]+)</td>"
                    r"<td class=\"num\">\[([^,]+), ([^\]]+)\]</td>", section)
    assert row and row.group(1) == "1"  # C * k: exponent 1 in k
    lo, fit, hi = (float(row.group(i).replace("−", "-")) for i in (3, 2, 4))
    assert lo <= fit <= hi
    assert "Implied constant along the sweep" in section and section.count('<svg class="plot"') == 1
    assert page.count('<svg class="plot"') == 3


def test_no_external_resources(site):
    external = re.compile(r"""(?:src|href|xlink:href|action)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", re.IGNORECASE)
    for name, text in _pages(site["out"]).items():
        assert not external.search(text), (name, external.search(text).group(0))
        assert "http://" not in text and "https://" not in text, name
        assert ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
                in text), name
        assert not re.search(r"@import|url\((?!#)", text), name  # CSS may reference in-page ids only


def test_csv_and_json_exports(site):
    doc = json.loads((site["out"] / "results.json").read_text(),
                     parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert {c["id"] for c in doc["claims"]} == set(IDS)
    assert doc["run"]["run_id"] == site["run_id"]
    with open(site["out"] / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    n_configs = sum(len(c["configs"]) for c in doc["claims"])
    assert len(rows) == n_configs == 3 + 2 + 2 + 4
    norm = [r for r in rows if r["claim_id"] == IDS[0]]
    assert [json.loads(r["params"])["m"] for r in norm] == [16, 32, 64]
    assert [r["in_regime"] for r in norm] == ["0", "1", "1"]
    for r in rows:
        assert float(r["violation_ci_low"]) <= float(r["violation_ci_high"])


def test_compare_marks_changes(site):
    index = site["index"].read_text()
    changes = index[index.index("Changes since run"):index.index("<h2>Coverage")]
    failing = changes[changes.index("Started failing"):]
    assert "toy/lemma-a.2/telescoping" in failing[:failing.index("</ul>")]
    assert "verdict holds → violated" in changes
    new = changes[changes.index("New claims"):]
    assert "toy/lemma-a.10/telescoping-tight" in new[:new.index("</ul>")]
    removed = changes[changes.index("Removed claims"):]
    assert "toy/theorem-4/gone" in removed
    # Unchanged claims are not listed: same seed, same configurations, identical slacks.
    assert IDS[0] not in changes
    page = _claim_page(site, "toy/lemma-a.2/telescoping")
    assert "started failing" in page and "Compared with run" in page


def test_build_is_deterministic_and_replaces_stale_pages(site, tmp_path):
    out = tmp_path / "again"
    stale = out / "claims" / "old-claim.html"
    stale.parent.mkdir(parents=True)
    stale.write_text('<!doctype html><meta name="generator" content="lemmacheck-report">')
    mine = out / "claims" / "keep.html"
    mine.write_text("not generated by lemmacheck")
    build_report(site["new_db"], out, compare=site["old_db"])
    assert not stale.exists() and mine.exists()
    mine.unlink()
    assert _pages(out) == _pages(site["out"])
    assert (out / "results.csv").read_text() == (site["out"] / "results.csv").read_text()


def test_run_selection_and_compare_with_same_store(site, tmp_path):
    # Same store given as comparison: its previous finished run. The new store has only one run.
    with pytest.raises(Exception, match="no finished run to compare"):
        build_report(site["new_db"], tmp_path / "x", compare=site["new_db"])
    index = build_report(site["old_db"], tmp_path / "old", run_id=1).read_text()
    assert "toy/theorem-4/gone" in index and "toy/lemma-a.10/telescoping-tight" not in index
    missing = tmp_path / "missing.db"
    with pytest.raises(FileNotFoundError):
        build_report(missing, tmp_path / "y")
    assert not missing.exists()  # never creates an empty store


def test_unfinished_run_is_not_reported_by_default(tmp_path):
    db = tmp_path / "empty.db"
    Store(db).close()
    with pytest.raises(Exception, match="no finished run"):
        build_report(db, tmp_path / "out")
    con = sqlite3.connect(db)
    con.execute("INSERT INTO runs(seed, profile, started, versions, device, paths) VALUES (0,'quick','t','{}','cpu','[]')")
    con.commit()
    con.close()
    index = build_report(db, tmp_path / "out", run_id=1).read_text()
    assert "has not finished" in index


# --------------------------------------------------------------------------------------------- units

@pytest.mark.parametrize("src, must", [
    (r"\frac{a}{b}", "<mfrac><mi>a</mi><mi>b</mi></mfrac>"),
    (r"\frac12", "<mfrac><mn>1</mn><mn>2</mn></mfrac>"),
    (r"x^{2}_i", "<msubsup><mi>x</mi><mi>i</mi><mn>2</mn></msubsup>"),
    (r"x^23", "<msup><mi>x</mi><mn>2</mn></msup><mn>3</mn>"),
    (r"\sqrt{m}", "<msqrt><mi>m</mi></msqrt>"),
    (r"\sqrt[3]{\tau}", "<mroot><mi>τ</mi><mn>3</mn></mroot>"),
    (r"\|W\|_2", "<msub><mo fence=\"true\">‖</mo><mn>2</mn></msub>"),
    (r"a \le b \ge c", "<mo>≤</mo>"),
    (r"\log n", "<mi>log</mi><mo>\u2061</mo>"),
    (r"\text{if } x", "<mtext>if\u00a0</mtext>"),
    (r"\sum_{i=1}^n x_i", "<munderover><mo largeop=\"true\" movablelimits=\"true\">∑</mo>"),
    (r"\prod_i", "<munder><mo largeop=\"true\" movablelimits=\"true\">∏</mo><mi>i</mi></munder>"),
    (r"\tilde{W}", "<mover accent=\"true\"><mi>W</mi><mo stretchy=\"true\">˜</mo></mover>"),
    (r"\bar C", "<mover accent=\"true\"><mi>C</mi>"),
    (r"x \in S \cdot y", "<mo>∈</mo>"),
    (r"\max\{a, b\}", "<mo movablelimits=\"true\" form=\"prefix\">max</mo><mo fence=\"true\">{</mo>"),
    (r"\min_{l}", "<munder><mo movablelimits=\"true\" form=\"prefix\">min</mo><mi>l</mi></munder>"),
    (r"\Delta \alpha", "<mi mathvariant=\"normal\">Δ</mi><mi>α</mi>"),
    (r"\mathbb{R}^d", "<msup><mi>ℝ</mi><mi>d</mi></msup>"),
    (r"\left( \frac{a}{b} \right)", "<mo fence=\"true\" stretchy=\"true\">(</mo>"),
    (r"\text{a <b> & c}", "<mtext>a &lt;b&gt; &amp; c</mtext>"),
    (r"a < b", "<mo>&lt;</mo>"),
])
def test_latex_to_mathml(src, must):
    out = latex_to_mathml(src, split=False)
    assert out.startswith("<math>") and out.endswith("</math>")
    assert must in out


@pytest.mark.parametrize("src", [r"\foo{x}", r"\frac{a}{b", r"x^", r"a}", r"x^1^2", r"\begin{tikzpicture}\end{tikzpicture}",
                                 r"\left( x", "\\"])
def test_unsupported_latex_falls_back_to_escaped_code(src):
    with pytest.raises(LatexError):
        latex_to_mathml(src)
    html, ok = render_statement(src)
    assert not ok and html.startswith('<code class="latex-src"')
    html, ok = render_statement(src + r" \foo <img src=x onerror=alert(1)>")
    assert not ok and "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_statement_html_never_contains_markup_from_the_source():
    for src in [XSS, r"\text{" + XSS + "}", "$" + XSS + "$ and " + XSS, r"\mathrm{<b>}", r"\operatorname{<i>}"]:
        html, _ = render_statement(src)
        assert "<script" not in html and "<b>" not in html and "<i>" not in html and "<img" not in html


def test_long_statements_split_into_wrappable_pieces():
    html, ok = render_statement(r"a \le b, \text{ for all } c \in [n], d \ge 1")
    assert ok and html.count("<math>") >= 3 and "<wbr>" in html


def test_sanitizer_rejects_foreign_markup():
    with pytest.raises(LatexError):
        sanitize("<mrow><script>alert(1)</script></mrow>")
    with pytest.raises(LatexError):
        sanitize('<mi href="javascript:alert(1)">x</mi>')
    assert sanitize("<mi>&InvisibleTimes;</mi>") == "<math><mi>\u2062</mi></math>"


def test_safe_names_are_unique_and_portable():
    taken: set[str] = set()
    names = [safe_name(i, taken) for i in ["a/b", "a_b", "A/B", "../../etc", "x" * 500, ""]]
    assert len({n.lower() for n in names}) == len(names)
    for n in names:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", n) and not n.startswith(".") and len(n) <= 130


def _view(cid: str, verdict: str, ok: bool, slack: float | None, slacks: np.ndarray) -> ClaimView:
    cfg = SimpleNamespace(index=0, slack_min=slack)
    v = ClaimView(cid, "x", "", {})
    v.res = SimpleNamespace(verdict=verdict, ok=ok, worst_index=0, configs=[cfg])  # type: ignore[assignment]
    v.data = {0: SimpleNamespace(slacks=slacks)}  # type: ignore[dict-item]
    return v


def test_compare_rule_uses_the_new_runs_spread():
    slacks = np.exp(np.linspace(0.0, 0.4, 101))  # interquartile range of log-slack: 0.2
    old = Comparison("old.db", 1, {}, {"c": OldClaim("c", "p", "L", "t", "holds", True, 1.0)})
    inside = compare_view(_view("c", "holds", True, float(np.exp(-0.15)), slacks), old)
    assert inside.slack_moved == "" and not inside.any
    tighter = compare_view(_view("c", "holds", True, float(np.exp(-0.25)), slacks), old)
    assert tighter.slack_moved == "tighter" and tighter.any
    looser = compare_view(_view("c", "holds", True, float(np.exp(0.3)), slacks), old)
    assert looser.slack_moved == "looser"
    failing = compare_view(_view("c", "violated", False, 0.5, slacks), old)
    assert failing.verdict_changed and failing.started_failing and not failing.fixed
    inf = compare_view(_view("c", "holds", True, float("inf"), slacks), old)
    assert inf.slack_moved == "looser"
    assert compare_view(_view("d", "holds", True, 1.0, slacks), old).status == "new"


def test_a_claim_that_cannot_be_rebuilt_does_not_break_the_report(site, tmp_path):
    db = tmp_path / "tampered.db"
    src = sqlite3.connect(site["new_db"])
    dst = sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.execute("UPDATE claims SET definition = replace(definition, '\"telescoping-ratio\"', '\"no-such-quantity\"') "
                "WHERE claim_id = 'toy/lemma-a.2/telescoping'")
    dst.commit()
    dst.close()
    index = build_report(db, tmp_path / "out").read_text()
    row = _row(index, "toy/lemma-a.2/telescoping")
    assert row.group(1) == "error" and "not evaluated" in row.group(0)
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [b["id"] for b in doc["not_evaluated"]] == ["toy/lemma-a.2/telescoping"]
    assert "no-such-quantity" in doc["not_evaluated"][0]["error"]
    assert len(doc["claims"]) == len(IDS) - 1


def test_text_with_inline_math_falls_back_per_formula():
    html, ok = render_statement(r"Take $\alpha \le 1$ and $\weird{x}$ <b>here</b>.")
    assert not ok
    assert "<math>" in html and '<code class="latex-src"' in html and "\\weird{x}" in html
    assert "&lt;b&gt;here&lt;/b&gt;" in html and "<b>" not in html


@pytest.mark.parametrize("text", ["m < n", "m > 2", "log(m) * sqrt(n) / min(m, n)", "abs(m - n) <= ceil(m / 3)",
                                  "(m >= 2) and (n < 3)", "binomial(m, n) * exp(-m) * pi"])
def test_every_sympy_bound_survives_the_sanitizer(text):
    from lemmacheck.expressions import parse
    from lemmacheck.report.mathml import sympy_mathml

    out = sympy_mathml(parse(text, {"m", "n"}).mathml)
    assert out.startswith("<math>") and "<mi>m</mi>" in out


def test_index_shows_each_papers_coverage_of_its_results(site):
    index = site["index"].read_text()
    # toy: 4 of the 6 listed results have a claim (Lemma A.10 through the finding claim)
    assert '<a href="#paper-toy">toy</a></td><td class="num" title="not yet encoded: Lemma B.4, Corollary 5 ' in index
    assert "4 / 6</td>" in index
    assert "Not yet encoded (2): Lemma B.4, Corollary 5 &lt;script&gt;" in index
    assert "A toy paper &lt;script&gt;" in index and "<code>arxiv.org/abs/0000.00000</code>" in index
    # a paper without _paper.toml shows no coverage figure rather than a made-up one
    assert '<a href="#paper-zou2018">zou2018</a></td><td class="num">–</td>' in index


def test_malformed_paper_file_is_a_note_naming_file_and_field_not_a_crash(tmp_path):
    claims_dir = _write(tmp_path / "claims", {"zou2018/norm.toml": NORM_CLAIM,
                                              "zou2018/_paper.toml": PAPER.replace('key     = "toy"',
                                                                                   'key     = "zou2018"')
                                                                          .replace("results = [", "results = 3 #")})
    db = tmp_path / "r.db"
    _run(claims_dir / "zou2018", db)
    index = build_report(db, tmp_path / "site").read_text()
    assert "Paper metadata not used" in index and "_paper.toml: field &#x27;results&#x27;" in index


# --- tail quantile, quantifiers row, findings typography ---------------------------------------


def test_probabilistic_estimate_plot_marks_the_one_minus_delta_quantile(site):
    page = _claim_page(site, IDS[0])
    est = page[page.index("Estimate against the bound"):page.index("Slack distribution")]
    marks = re.findall(r'class="tail-q"><title>config (\d+): 1 − δ quantile \(δ = 0\.1\) = ([^;]+);', est)
    assert len(marks) == 3 and "1 − δ quantile (δ = 0.1) of the estimate" in est
    store = Store(site["new_db"], readonly=True)
    for index, shown in marks:
        values = np.concatenate([s.value for s in store.shards(site["run_id"], IDS[0], int(index))])
        assert float(shown) == pytest.approx(np.quantile(values, 0.9), rel=1e-4)


def test_quantifiers_row_leaves_the_regime_to_its_math_row(site):
    page = _claim_page(site, IDS[0])
    checked = page[page.index("<h2>What is checked</h2>"):]
    row = re.search(r"<dt>quantifiers</dt><dd>(.*?)</dd>", checked, re.DOTALL)
    assert row[1] == "with probability &gt;= 1 - delta; search: none"  # no raw `phi**-4` repeat
    regime = re.search(r"<dt>stated regime</dt><dd>(.*?)</dd>", checked, re.DOTALL)[1]
    assert "<mfrac>" in regime and "<msup><mi>φ</mi><mn>4</mn></msup>" in regime  # phi**-4, in MathML


@pytest.mark.parametrize("text, html", [
    ("1 <= ||h_{i,1}|| and m >= 2", "1 ≤ ‖h<sub>i,1</sub>‖ and m ≥ 2"),
    ("exp(-Omega(m/L^2)) and (1 - 1/(4L))^{l+1}", "exp(-Ω(m/L<sup>2</sup>)) and (1 - 1/(4L))<sup>l+1</sup>"),
    ("sqrt(m) delta, phi**-4, x_1.", "√(m) δ, φ<sup>-4</sup>, x<sub>1</sub>."),
    ("prose: max_layer_norm, lemma_b.toml, tau0, the beta version", ("prose: max_layer_norm, lemma_b.toml, tau0, "
     "the β version")),
])
def test_findings_written_in_plain_text_get_math_typography(text, html):
    from lemmacheck.report.pages import rich_text

    assert rich_text(text) == f"<p>{html}</p>"


def test_a_log_domain_spanning_float64_does_not_overflow():
    from lemmacheck.report.svg import domain
    lo, hi = domain([1e-300, 1.0, 1e305], log=True)  # slacks of a bound far above its estimate
    assert 0 < lo <= 1e-300 and 1e305 <= hi < float("inf")


# --- the proof-graph page ------------------------------------------------------------------------------------------


def test_graph_page_draws_one_node_per_result_coloured_by_verdict(site):
    index = site["index"].read_text()
    toy = index[index.index('id="paper-toy"'):]
    assert '<a class="graph-link" href="graphs/toy.html">proof graph</a>' in toy[:toy.index("</h3>")]
    assert "graph-link" not in index[index.index('id="paper-zou2018"'):][:300]  # no graph.toml: no link
    page = (site["out"] / "graphs" / "toy.html").read_text()
    nodes = dict(re.findall(r'<g class="([^"]*)" data-node="\d+" data-kind="result" data-label="([^"]*)"', page))
    nodes = {label: cls for cls, label in re.findall(r'<g class="([^"]*)" data-node="\d+" data-kind="result" '
                                                       r'data-label="([^"]*)"', page)}
    assert len(nodes) == 6 and page.count('data-kind="other"') == 1  # one node per result, plus Assumption 1
    assert "vn-violated" in nodes["Lemma A.10"] and "named" in nodes["Lemma A.10"]  # the finding's result
    assert "vn-infeasible" in nodes["Theorem 3"] and "main" in nodes["Theorem 3"]
    assert "vn-notrun" in nodes["Lemma B.4"] and "named" not in nodes["Lemma B.4"]
    assert "vn-violated" in nodes["Lemma A.2"]  # telescoping bound 0.5: violated in the new run
    assert "Corollary 5 &lt;script&gt;alert(1)&lt;/script&gt;" in nodes
    assert page.count('<path class="edge') == 6 and page.count('class="edge stmt"') == 1
    # the finding's reach, for the select and its section
    labels = {int(i): html_lib.unescape(lab) for i, lab in re.findall(r'data-node="(\d+)" data-kind="\w+" '
                                                                       r'data-label="([^"]*)"', page)}
    opt = re.search(r'<option value="0" data-reach="([^"]*)" data-own="([^"]*)">toy/tight-ratio', page)
    assert {labels[int(i)] for i in opt.group(1).split()} == {"Lemma B.3", "Lemma B.4", "Theorem 3",
                                                              "Corollary 5 <script>alert(1)</script>"}
    assert [labels[int(i)] for i in opt.group(2).split()] == ["Lemma A.10"]
    sec = page[page.index('id="finding-0"'):]
    assert "<b>Theorem 3</b>: absorbed: Theorem 3 uses Lemma A.10 only through" in sec


def test_graph_layers_keep_every_edge_pointing_down(site):
    page = (site["out"] / "graphs" / "toy.html").read_text()
    y = {i: float(v) for i, v in re.findall(r'data-node="(\d+)"[^>]*>(?:<title>[^<]*</title>)?<rect x="[^"]+" '
                                           r'y="([^"]+)"', page)}
    edges = re.findall(r'data-from="(\d+)" data-to="(\d+)"', page)
    assert len(y) == 7 and edges and all(y[a] < y[b] for a, b in edges)


def test_node_verdict_is_the_worst_over_the_results_claims():
    from lemmacheck.graph import ProofGraph
    from lemmacheck.report.graphpage import NOT_RUN, node_verdicts

    g = ProofGraph("p", Path("graph.toml"), ("Lemma 1", "Lemma 2", "Lemma 3"), (), ("Lemma 1",))
    views = [SimpleNamespace(label="Lemma 1 (i)", verdict="holds"), SimpleNamespace(label="Lemma 1 (ii)",
             verdict="inconclusive"), SimpleNamespace(label="Lemma 2", verdict="holds"),
             SimpleNamespace(label="Lemma 2", verdict="violated"), SimpleNamespace(label="Lemma 10", verdict="violated")]
    got = {n: v for n, (v, _) in node_verdicts(g, views).items()}
    assert got == {"Lemma 1": "inconclusive", "Lemma 2": "violated", "Lemma 3": NOT_RUN}


def test_index_findings_show_their_checked_reach_and_link_the_graph(site):
    index = site["index"].read_text()
    found = index[index.index("Confirmed findings"):]
    reach = found[found.index("reach: "):]
    reach = reach[:reach.index("</div>")]
    assert "<b>Theorem 3</b> absorbed <q>for some constant C</q>" in reach
    assert "also Corollary 5 &lt;script&gt;alert(1)&lt;/script&gt;, Lemma B.3, Lemma B.4" in reach
    assert '(<a href="graphs/toy.html">proof graph</a>)' in reach
