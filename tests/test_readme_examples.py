"""The README's examples work as written: every `lemmacheck` command line parses with today's CLI (options that
exist, values of the right type) and names claims that exist; the cheap ones run for real; the claim file
example loads. Commands that need minutes (full-profile runs), a Dask cluster or a browser are only parsed:
each is listed in NOT_RUN with the reason."""

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lemmacheck.claims import load_claims, parse_claim
from lemmacheck.cli import parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# placeholders the README uses for values a reader fills in
PLACEHOLDERS = {"ID": "zou2018/theorem-5.1-i/weight-spectral-norm", "N": "1", "R": "8", "S": "8",
                """'{"m": 64, ...}'""": """'{"m": 64}'"""}
# what runs in CI; everything else parses only, for the reason given
RUN = {"lemmacheck list claims --json", "lemmacheck show zou2018/theorem-5.1-i/weight-spectral-norm",
       "lemmacheck findings --json"}
NOT_RUN = {
    "run": "full-profile or whole-suite runs take minutes to hours (the quick suite runs as pytest items)",
    "repro": "needs a configuration and seed taken from an earlier run",
    "hunt": "a 100-example search takes minutes",
    "report": "needs a results store from an earlier run (tests/test_report.py builds reports)",
    "graph": "reads a paper's graph.toml, which its paper's folder owns (tests/test_graph.py runs the command)",
}


def commands() -> list[str]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("lemmacheck "):
                out.append(line)
    return out


def _filled(line: str) -> list[str]:
    for k, v in PLACEHOLDERS.items():
        line = re.sub(rf"(?<![\w/-]){re.escape(k)}(?![\w/-])", v, line)
    return shlex.split(line)[1:]


def test_the_readme_has_commands_for_every_subcommand():
    used = {_filled(c)[0] for c in commands()}
    assert {"list", "run", "show", "repro", "hunt", "report"} <= used


@pytest.mark.parametrize("line", commands())
def test_every_readme_command_parses_and_names_real_claims(line):
    argv = _filled(line)
    a = parser().parse_args(argv)  # SystemExit (a failure) on an unknown option or a badly typed value
    if hasattr(a, "id"):
        claims, _ = load_claims([ROOT / "claims"])
        assert a.id in {c.id for c in claims}, f"{line}: no claim {a.id}"
    for p in getattr(a, "paths", []):
        assert (ROOT / p).exists(), f"{line}: {p} does not exist"
    if line not in RUN:
        assert a.cmd in NOT_RUN or a.cmd in ("list", "show", "findings"), line


@pytest.mark.parametrize("line", sorted(RUN))
def test_cheap_readme_commands_run(line):
    assert line in commands(), f"{line} is no longer in the README"
    proc = subprocess.run([sys.executable, "-m", "lemmacheck.cli", *_filled(line)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "error:" not in proc.stderr
    assert proc.stdout.strip()


def test_the_claim_file_example_loads():
    (block,) = re.findall(r"```toml\n(.*?)```", README, re.DOTALL)
    claim = parse_claim(tomllib.loads(block), ROOT / "claims" / "zou2018" / "example.toml")
    assert claim.id == "zou2018/theorem-5.1-i/layer-output-norm" and claim.mode == "probabilistic"
