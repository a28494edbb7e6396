"""Start-up cost: `lemmacheck --help` and a one-claim `repro` import only what they use.

Asserts which modules are NOT imported (never times): measured with `python -X importtime`, torch alone is
~2 s and sympy ~1 s of a cold start here, hypothesis ~1 s, the report and Dask more.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import io, contextlib, json, sys
from lemmacheck.cli import main
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules), "out": out.getvalue()}))
"""


def _modules(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _imported(mods: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in mods)


def test_help_imports_neither_torch_nor_sympy():
    res = _modules("--help")
    assert res["code"] == 0 and "repro" in res["out"]
    for heavy in ("torch", "sympy", "numpy", "scipy", "hypothesis", "lemmacheck.report", "lemmacheck.claims",
                  "dask", "distributed"):
        assert not _imported(res["modules"], heavy), f"`lemmacheck --help` imports {heavy}"


def test_one_claim_repro_imports_no_report_dask_or_hypothesis():
    params = json.dumps({"m": 64, "L": 3, "n": 4, "d": 8, "phi": 0.1, "delta": 0.1, "alternate": 0})
    res = _modules("repro", "zou2018/theorem-5.1-i/layer-output-norm", "--params", params, "--seed", "1",
                   "--replicates", "4", "--shard-size", "4")
    assert res["code"] == 0 and "zou2018/theorem-5.1-i/layer-output-norm" in res["out"]
    assert _imported(res["modules"], "torch")  # the probe ran the estimator
    for unused in ("lemmacheck.report", "lemmacheck.hunt", "lemmacheck.plugin", "dask", "distributed",
                   "hypothesis", "pytest", "selenium"):
        assert not _imported(res["modules"], unused), f"a one-claim repro imports {unused}"
