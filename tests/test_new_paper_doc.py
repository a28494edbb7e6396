"""docs/new-paper.md works as written: its file snippets (fenced blocks tagged `file=<path>`) are written into a fresh
folder, `lemmacheck run <folder>/claims/mypaper --profile quick` runs them through the CLI, and the verdicts are the
ones the page's table states; the page's finding validates and its witness reproduces; and the page's statement
that Lemma 3 reads violated without `extras["scale"]` holds. Each run is a subprocess (a fresh interpreter, so the
two copies of the example extension never meet in one registry). Deterministic: the runs use the default seed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "new-paper.md"
TEXT = DOC.read_text()
SNIPPET = re.compile(r"^```(\w+) file=(\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ROW = re.compile(r"^\| `(mypaper/[^`]+)` \| (holds|violated|inconclusive|infeasible) \|$", re.MULTILINE)
SCALE = 'extras={"scale": terms.amax(-1)}, '
# one BLAS thread per subprocess: the machine's cores are shared, and oversubscribed BLAS threads can stall
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def snippets() -> dict[str, str]:
    files = {path: body for _, path, body in SNIPPET.findall(TEXT)}
    assert len(files) == len(SNIPPET.findall(TEXT)), "a file is written by two snippets"
    return files


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return root / "claims" / "mypaper"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = "import sys; from lemmacheck.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          check=False, env=ENV)


def run(folder: Path, target: Path, tmp: Path, name: str) -> tuple[int, dict[str, str], str]:
    out = tmp / f"{name}.json"
    res = cli("run", str(target), "--profile", "quick", "--workers", "1", "--db", str(tmp / f"{name}.db"),
              "--json", str(out), cwd=folder)
    verdicts = {c["id"]: c["verdict"] for c in json.loads(out.read_text())["claims"]} if out.is_file() else {}
    return res.returncode, verdicts, res.stdout + res.stderr


def test_the_page_has_a_whole_paper():
    files = snippets()
    assert {"claims/mypaper/_paper.toml", "claims/mypaper/extension.py", "claims/mypaper/findings.toml"} <= set(files)
    claims = [f for f in files if f.endswith(".toml") and not f.rsplit("/", 1)[-1].startswith(("_", "findings"))]
    assert len(claims) >= 3
    assert SCALE in files["claims/mypaper/extension.py"]
    stated = dict(ROW.findall(TEXT))
    ids = {re.search(r'^id\s*=\s*"([^"]+)"', files[f], re.MULTILINE).group(1) for f in claims}
    assert set(stated) == ids, "the verdict table lists every claim of the page, and only those"


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("newpaper")
    return root, write(root, snippets())


@pytest.mark.slow
def test_walk_through_runs_with_the_stated_verdicts(example, tmp_path):
    root, paper = example
    rc, verdicts, log = run(root, paper, tmp_path, "quick")
    assert rc == 0, log
    assert verdicts == dict(ROW.findall(TEXT)), log


def test_the_finding_validates_and_its_witness_reproduces(example):
    root, paper = example
    res = cli("findings", str(paper), "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)
    assert [f["id"] for f in found["findings"]] == ["mypaper/lemma-2-constant"] and not found["errors"]
    witness = subprocess.run([sys.executable, str(paper / "witnesses" / "lemma-2-constant.py")],
                             capture_output=True, text=True, timeout=600, check=False, env=ENV)
    assert witness.returncode == 0, witness.stdout + witness.stderr


@pytest.mark.slow
def test_without_the_rounding_scale_the_identity_reads_violated(tmp_path):
    """The page says so: the same claim, the estimator without extras["scale"], reads violated on rounding alone."""
    files = snippets()
    files["claims/mypaper/extension.py"] = files["claims/mypaper/extension.py"].replace(SCALE, "")
    paper = write(tmp_path / "noscale", files)
    assert "Without it this claim would read\n**violated** on rounding alone" in TEXT
    rc, verdicts, log = run(tmp_path / "noscale", paper / "lemma-3-homogeneity.toml", tmp_path, "noscale")
    assert verdicts == {"mypaper/lemma-3/homogeneity": "violated"}, log
    assert rc == 1  # a verdict that differs from the claim's expectation
