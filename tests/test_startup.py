"""Start-up cost: `lemmacheck --help` and a one-claim `repro` import only what they use, and finding one claim
parses that claim's file alone, whatever the size of the suite.

Asserts which modules are NOT imported and how many claim files are parsed (never times): measured with
`python -X importtime`, torch alone is ~1.4 s of a cold start here, scipy.stats ~0.6 s, sympy ~0.3 s,
hypothesis ~1 s, the report and Dask more; parsing all ~380 claim files (sympy expressions) ~1.8 s.
"""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lemmacheck import claims as claims_module
from lemmacheck import cli
from lemmacheck.claims import claim_files
from lemmacheck.errors import LemmacheckError

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import io, contextlib, gc, json, sys
from lemmacheck.cli import main
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules), "out": out.getvalue(),
                  "gc": [gc.isenabled(), gc.get_freeze_count()]}))
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


def test_one_claim_repro_imports_no_sympy_scipy_report_dask_or_hypothesis():
    params = json.dumps({"m": 64, "L": 3, "n": 4, "d": 8, "phi": 0.1, "delta": 0.1, "alternate": 0})
    res = _modules("repro", "zou2018/theorem-5.1-i/layer-output-norm", "--params", params, "--seed", "1",
                   "--replicates", "4", "--shard-size", "4")
    assert res["code"] == 0 and "zou2018/theorem-5.1-i/layer-output-norm" in res["out"]
    assert _imported(res["modules"], "torch")  # the probe ran the estimator
    # the collector paused while torch and the claim loaded, their objects then frozen out of its passes; on again
    enabled, frozen = res["gc"]
    assert enabled and frozen > 100_000, res["gc"]
    # (lemmacheck.hunt itself is light: the runner replays a hunted configuration's pins; Hypothesis is not.
    # sympy: the claim's bound, probability and regime are simple expressions (expressions._fast_value,
    # _fast_truth); scipy: 0 violations of 4 take Clopper-Pearson's closed form, not scipy.special.)
    for unused in ("lemmacheck.report", "lemmacheck.plugin", "dask", "distributed",
                   "hypothesis", "pytest", "selenium", "sympy", "mpmath", "scipy"):
        assert not _imported(res["modules"], unused), f"a one-claim repro imports {unused}"


def _count_parses(monkeypatch) -> dict[str, list]:
    """Record every claim validation (parse_claim) and every TOML parse (tomllib.load) from here on."""
    seen: dict[str, list] = {"parse_claim": [], "toml": []}
    parse, load = claims_module.parse_claim, tomllib.load

    def counting_parse(raw, path):
        seen["parse_claim"].append(path)
        return parse(raw, path)

    def counting_load(fh, *args, **kwargs):
        seen["toml"].append(getattr(fh, "name", fh))
        return load(fh, *args, **kwargs)

    monkeypatch.setattr(claims_module, "parse_claim", counting_parse)
    monkeypatch.setattr(tomllib, "load", counting_load)
    return seen


def test_finding_one_claim_parses_that_file_alone(monkeypatch):
    files = claim_files([ROOT / "claims"])
    assert len(files) > 100  # the shipped suite: the count below must not grow with it
    seen = _count_parses(monkeypatch)
    claim = cli._find_claim("zou2018/theorem-5.1-i/layer-output-norm", [str(ROOT / "claims")])
    assert claim.id == "zou2018/theorem-5.1-i/layer-output-norm"
    assert len(seen["parse_claim"]) == 1, seen["parse_claim"]  # the old lookup validated every file
    assert [Path(p).name for p in seen["toml"]] == [claim.source.name]


def test_the_id_line_reader_agrees_with_toml_on_every_shipped_claim():
    for f in claim_files([ROOT / "claims"]):
        with open(f, "rb") as fh:
            assert cli._declared_id(f) == tomllib.load(fh).get("id"), f


def _write(path: Path, head: str, cid_line: str) -> Path:
    src = (ROOT / "claims" / "zou2018" / "theorem-5.1-i-layer-output-norm.toml").read_text().splitlines()
    body = [line for line in src if not line.startswith("id ")]
    path.write_text(head + cid_line + "\n" + "\n".join(body) + "\n")
    return path


def test_find_claim_reads_other_spellings_and_refuses_ambiguity(tmp_path, monkeypatch):
    folder = tmp_path / "zou2018"
    folder.mkdir()
    ext = ROOT / "claims" / "zou2018" / "extension"
    (folder / "extension").symlink_to(ext, target_is_directory=True)
    _write(folder / "a.toml", "# comment\n", "id = 'zou2018/literal'  # a literal string")
    _write(folder / "b.toml", "", '"id" = "zou2018/quoted-key"')  # not an `id = ` line: read as TOML
    _write(folder / "c.toml", "", 'id = "zou2018/esc\\u0061ped"')  # an escape: TOML decides ("zou2018/escaped")
    seen = _count_parses(monkeypatch)
    assert cli._find_claim("zou2018/literal", [str(tmp_path)]).source.name == "a.toml"
    assert cli._find_claim("zou2018/quoted-key", [str(tmp_path)]).source.name == "b.toml"
    assert cli._find_claim("zou2018/escaped", [str(tmp_path)]).source.name == "c.toml"
    assert len(seen["parse_claim"]) == 3  # one per lookup
    with pytest.raises(LemmacheckError, match="no claim with id 'zou2018/none'"):
        cli._find_claim("zou2018/none", [str(tmp_path)])
    _write(folder / "d.toml", "", 'id = "zou2018/literal"')
    with pytest.raises(LemmacheckError, match="declared by 2 claim files"):
        cli._find_claim("zou2018/literal", [str(tmp_path)])


def test_clopper_pearson_gives_scipy_stats_beta_quantiles():
    """stats.clopper_pearson reads scipy.special (boost's ibeta_inv), not scipy.stats: the same numbers."""
    from scipy import stats as sps

    from lemmacheck.stats import clopper_pearson

    for n in [*range(1, 60), 100, 333, 1000, 4096, 65536]:
        for k in sorted({0, 1, n // 7, n // 2, n - 1, n}):
            for alpha in (1e-6, 1e-4, 1e-3, 0.05):
                lo, hi = clopper_pearson(k, n, alpha)
                assert lo == (0.0 if k == 0 else float(sps.beta.ppf(alpha / 2, k, n - k + 1)))
                assert hi == (1.0 if k == n else float(sps.beta.ppf(1 - alpha / 2, k + 1, n - k)))


def test_clopper_pearson_closed_forms_are_betaincinv_bit_for_bit():
    """0 or n violations of n: the closed forms stats._clopper_pearson_fast takes instead of loading scipy give
    betaincinv's numbers exactly (boost's own operations for Beta(1, n) and Beta(n, 1))."""
    import random

    from scipy import special

    from lemmacheck.stats import _clopper_pearson_fast

    rng = random.Random(11)
    for _ in range(20000):
        n = rng.choice([rng.randint(1, 100), rng.randint(1, 10**4), rng.randint(1, 10**7)])
        alpha = 10 ** rng.uniform(-15, -0.01)
        assert _clopper_pearson_fast(0, n, alpha) == (0.0, float(special.betaincinv(1, n, 1 - alpha / 2))), (n, alpha)
        assert _clopper_pearson_fast(n, n, alpha) == (float(special.betaincinv(n, 1, alpha / 2)), 1.0), (n, alpha)
