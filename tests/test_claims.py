"""Claim-file validation: every malformed file gets one clear error naming the file, the field and the fix."""

import json
from pathlib import Path

import pytest

from conftest import NORM_CLAIM
from lemmacheck.claims import load_claim, load_claims, load_paper
from lemmacheck.errors import ClaimError


def _write(dirpath: Path, text: str, name: str = "c.toml") -> Path:
    p = dirpath / name
    p.write_text(text)
    return p


def test_valid_claim_loads(claims_dir):
    c = load_claim(_write(claims_dir, NORM_CLAIM))
    assert c.id == "toy/lemma-1/norm" and c.mode == "probabilistic" and c.expect == "holds"
    assert c.check.bound.evaluate({"B": 1.5}) == 1.5
    assert c.delta({"delta": 0.1}) == pytest.approx(0.1)
    assert len(c.profiles["quick"].configs) == 2 and len(c.profiles["full"].configs) == 4
    # unspecified parameters take their first declared value
    assert c.profiles["quick"].configs[0] == {"m": 16, "L": 2, "n": 3, "d": 8, "B": 100.0, "delta": 0.1}


@pytest.mark.parametrize("old,new,field,words", [
    ('title     = "A toy norm bound"\n', "", "title", "missing"),
    ('quantity    = "max-layer-output-norm"', 'quantity    = "max-layer-norm"', "check.quantity", "unknown quantity"),
    ('bound       = "B"', 'bound       = "B * ("', "check.bound", "cannot parse"),
    ('bound       = "B"', 'bound       = "B * K"', "check.bound", "unknown name(s) ['K']"),
    ('requires    = "m >= 32"', 'requires    = "m >= C0"', "check.requires", "unknown name(s) ['C0']"),
    ("L = { min = 1, max = 4 }", "L = { min = 5, max = 4 }", "params.L", "min 5 > max 4"),
    ('relation    = "<="', 'relation    = "=<"', "check.relation", "not a relation"),
    ('network   = "zou2018"', 'network   = "zou2019"', "network", "unknown network"),
    ("{ m = 16, L = 2, B = 100.0 }", "{ m = 16, L = 9, B = 100.0 }", "profiles.quick.configs[0].L", "outside"),
    ("{ m = 16, L = 2, B = 100.0 }", "{ m = 16, K = 2 }", "profiles.quick.configs[0].K", "not a declared"),
    ('kind      = "norm-at-init"', 'kind      = "norm-at-init"\ncolour = "red"', "colour", "unknown field"),
    ('probability = "1 - delta"', 'probability = "1 - epsilon"', "check.probability", "unknown name"),
    ('kind      = "norm-at-init"', 'kind      = "norm-at-init"\nexpect = "violated"', "finding",
     "must record the finding"),
    ('inputs    = { kind = "unit-sphere", n = "n", d = "d" }', 'inputs    = { kind = "unit-cube" }',
     "inputs.kind", "unknown input generator"),
    ("d = { value = 8 }", "d = { value = nan }", "params.d.values", "not a finite number"),
    # a hidden-constant claim is a scaling law: a profile that does not sweep cannot fit one
    ('bound       = "B"', 'bound       = "C * B"\nconstants = ["C"]\n', "profiles.quick", "needs a sweep"),
    ('relation    = "<="', 'relation    = "<="\nstatistic = "min-log"', "check.statistic", "wrong tail"),
    ('probability = "1 - delta"', 'probability = "always"\nstatistic = "tail-log"', "check.statistic",
     "needs a stated failure probability"),
])
def test_malformed_claim_names_file_and_field(claims_dir, old, new, field, words):
    assert old in NORM_CLAIM
    text = NORM_CLAIM.replace(old, new)
    if field == "profiles.quick":  # the quick profile's configurations differ only in m: make them one point
        text = text.replace("{ m = 16, L = 2, B = 100.0 }, { m = 64, L = 2, B = 100.0 }", "{ m = 64, L = 2, B = 100.0 }")
    p = _write(claims_dir, text)
    with pytest.raises(ClaimError) as ei:
        load_claim(p)
    err = ei.value
    assert err.field == field
    assert str(p) in str(err) and f"field '{field}'" in str(err) and words in str(err)


def test_not_toml_is_reported(claims_dir):
    p = _write(claims_dir, "id = ")
    with pytest.raises(ClaimError, match="not valid TOML"):
        load_claim(p)


def test_one_bad_file_does_not_stop_the_others(claims_dir):
    _write(claims_dir, NORM_CLAIM, "good.toml")
    _write(claims_dir, NORM_CLAIM.replace('id        = "toy/lemma-1/norm"', 'id = "toy/x"')
           .replace('bound       = "B"', 'bound       = "Q"'), "bad.toml")
    claims, errors = load_claims([claims_dir])
    assert [c.id for c in claims] == ["toy/lemma-1/norm"]
    assert len(errors) == 1 and "bad.toml" in str(errors[0]) and "check.bound" in str(errors[0])


def test_duplicate_ids_are_rejected(claims_dir):
    _write(claims_dir, NORM_CLAIM, "a.toml")
    _write(claims_dir, NORM_CLAIM, "b.toml")
    claims, errors = load_claims([claims_dir])
    assert len(claims) == 1 and "duplicate id" in str(errors[0])


def test_modes(claims_dir):
    det = load_claim(_write(claims_dir, NORM_CLAIM.replace('"1 - delta"', '"always"'), "d.toml"))
    assert det.mode == "deterministic" and det.delta({}) == 0.0
    sc = load_claim(_write(claims_dir, NORM_CLAIM.replace('bound       = "B"', 'bound       = "C * B"\n'
                                                          'constants = ["C"]'), "s.toml"))
    assert sc.mode == "scaling"
    inf = load_claim(_write(claims_dir, NORM_CLAIM.split("[params]")[0] + 'infeasible = "width 1e50"\n', "i.toml"))
    assert inf.mode == "infeasible" and inf.expect == "infeasible"


def _uniform_plugin_paper(root: Path, paper: str, quantity: str, network: str = "scalar") -> Path:
    """A paper folder with a plugin registering `quantity` (a uniform draw; and `network`, unless it is the built-in
    scalar one) and one claim, u <= 1, on it."""
    d = root / "claims" / paper
    d.mkdir(parents=True)
    own_network = "" if network == "scalar" else (
        f"NETWORKS.register('{network}', 'a network only this plugin registers')(__name__)\n")
    (d / "extension.py").write_text(
        "import torch\n"
        "from lemmacheck.context import Observation\n"
        "from lemmacheck.registry import NETWORKS, QUANTITIES\n"
        + own_network
        + f"@QUANTITIES.register('{quantity}', 'a uniform draw on [0, 1]', networks=('{network}',))\n"
        "def uniform(ctx):\n"
        "    return Observation(torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64))\n")
    (d / "u.toml").write_text(
        f'id = "{paper}/fact-1/uniform"\npaper = "{paper}"\nresult = "Fact 1"\ntitle = "u <= 1"\n'
        f'statement = "u \\\\le 1"\nkind = "probability-tool"\nnetwork = "{network}"\n'
        f'[check]\nquantity = "{quantity}"\nrelation = "<="\nbound = "1"\nprobability = "always"\n')
    return d


def test_extension_module_registers_a_quantity_without_touching_src(tmp_path):
    """A new paper's quantity lives beside its claims (claims/<paper>/extension.py)."""
    claims, errors = load_claims([_uniform_plugin_paper(tmp_path, "newpaper", "test-ext-uniform")])
    assert not errors and claims[0].check.quantity == "test-ext-uniform"


def test_a_claim_sent_to_a_fresh_process_brings_its_papers_plugin(tmp_path):
    """A Claim object pickled to a worker (a process pool, Dask) names a network and a quantity that resolve only
    once its paper's plugin is registered there: unpickling loads it, so re-parsing the claim (a hunt's pinned
    dataset does) works in a process that never loaded the paper. Its errors travel back whole (ClaimError's
    fields survive pickling; by default they did not, and the failed unpickling broke the process pool)."""
    import pickle
    import subprocess
    import sys

    d = _uniform_plugin_paper(tmp_path, "netpaper", "test-pickled-uniform", network="test-pickled-net")
    claims, errors = load_claims([d])
    assert not errors
    (tmp_path / "claim.pkl").write_bytes(pickle.dumps(claims[0]))
    child = ("import pickle, sys\n"
             "from lemmacheck.claims import parse_claim\n"
             "c = pickle.loads(open(sys.argv[1], 'rb').read())\n"
             "print(parse_claim(c.raw, c.source).network)\n")
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "claim.pkl")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "test-pickled-net"
    err = pickle.loads(pickle.dumps(ClaimError("a/b.toml", "check.x", "bad", "fix it")))
    assert (err.path, err.field, err.problem, err.fix) == ("a/b.toml", "check.x", "bad", "fix it")
    assert str(err) == "a/b.toml: field 'check.x': bad (fix: fix it)"


def test_a_worker_registers_installed_extensions_before_the_claim_it_runs(tmp_path, monkeypatch):
    """A shard's worker rebuilds its claim from the run's snapshot; a network or quantity an installed package
    registers (entry point `lemmacheck.extensions`) must be there too, as it is for load_claim."""
    import torch

    from lemmacheck import builtin
    from lemmacheck.claims import claim_from_snapshot
    from lemmacheck.context import Observation
    from lemmacheck.registry import NETWORKS, QUANTITIES

    class InstalledPackage:
        def load(self):
            NETWORKS.register("test-installed-net", "a network an installed package registers")("test_installed")

            @QUANTITIES.register("test-installed-uniform", "a uniform draw", networks=("test-installed-net",))
            def uniform(ctx):
                return Observation(torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64))

    monkeypatch.setattr(builtin, "entry_points", lambda group: [InstalledPackage()])
    monkeypatch.setattr(builtin, "_installed_loaded", False)  # a fresh worker: nothing loaded yet
    raw = {"id": "installedpaper/fact-1/uniform", "paper": "installedpaper", "result": "Fact 1", "title": "u <= 1",
           "statement": "u \\le 1", "kind": "probability-tool", "network": "test-installed-net",
           "check": {"quantity": "test-installed-uniform", "relation": "<=", "bound": "1", "probability": "always"}}
    (tmp_path / "installedpaper").mkdir()
    claim = claim_from_snapshot(str(tmp_path / "installedpaper" / "u.toml"), json.dumps(raw, sort_keys=True))
    assert claim.network == "test-installed-net"


PAPER = """
key     = "toy"
title   = "A toy paper"
authors = "A. Author"
venue   = "nowhere"
scope   = "every numbered result"
results = ["Lemma 1", "Lemma 2", "Theorem 3"]
"""


def test_paper_coverage_counts_sub_items_but_not_proof_claims(claims_dir):
    (claims_dir / "_paper.toml").write_text(PAPER)
    paper = load_paper(claims_dir)
    done, missing = paper.coverage(["Lemma 1", "Theorem 3 (ii)", "Lemma 2 (proof, eq. 7)"])
    assert done == ["Lemma 1", "Theorem 3"] and missing == ["Lemma 2"]
    assert load_claims([claims_dir]) == ([], [])  # metadata is not a claim file


@pytest.mark.parametrize("old,new,field,words", [
    ('key     = "toy"', 'key     = "toi"', "key", "differs from the folder name"),
    ('results = ["Lemma 1", "Lemma 2", "Theorem 3"]', 'results = ["Lemma 1", "Lemma 1"]', "results", "listed twice"),
    ('results = ["Lemma 1", "Lemma 2", "Theorem 3"]', "results = []", "results", "non-empty list"),
    ('title   = "A toy paper"', "", "title", "missing"),
    ('scope   = "every numbered result"', 'scope   = "all"\ndoi = "x"', "doi", "unknown field"),
])
def test_malformed_paper_file_names_file_and_field(claims_dir, old, new, field, words):
    (claims_dir / "_paper.toml").write_text(PAPER.replace(old, new))
    with pytest.raises(ClaimError) as ei:
        load_paper(claims_dir)
    assert ei.value.field == field and "_paper.toml" in str(ei.value) and words in str(ei.value)


def test_every_paper_in_the_suite_lists_its_results_and_every_claim_label_is_one_of_them():
    """Keeps coverage honest as claims are added: a claim whose `result` matches no listed result (a typo,
    or a result missing from _paper.toml) fails here."""
    root = Path(__file__).resolve().parents[1] / "claims"
    claims, errors = load_claims([root])
    assert not errors
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        paper = load_paper(folder)
        assert paper is not None, f"{folder}: no _paper.toml"
        labels = [c.result for c in claims if c.paper == folder.name and "(proof" not in c.result]
        unknown = [lab for lab in labels if not any(lab == r or lab.startswith(r + " (") for r in paper.results)]
        assert not unknown, f"{folder.name}: claim labels not in _paper.toml: {unknown}"


def test_a_profile_may_expect_its_own_verdict(claims_dir, tmp_path):
    """A full profile that decides what the quick budget cannot (or the reverse) records its own expectation; the
    run's profile picks which one a verdict answers to (pytest, exit status, report)."""
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    # max_replicates = 40: a budget that cannot decide (by default the full profile draws on until decided)
    text = NORM_CLAIM.replace("[profiles.full]\n", '[profiles.full]\nexpect = "inconclusive"\nmax_replicates = 40\n')
    c = load_claim(_write(claims_dir, text))
    assert c.expect == "holds" and c.expected("quick") == "holds" and c.expected("full") == "inconclusive"
    store = Store(tmp_path / "r.db")
    # 40 clean draws per configuration cannot put a 1e-4 Clopper-Pearson bound below delta = 0.1: inconclusive
    full = evaluate(store, run_claims([c], store, profile="full"), [c])[0]
    assert full.verdict == "inconclusive" and full.expect == "inconclusive" and full.ok
    quick = evaluate(store, run_claims([c], store, profile="quick"), [c])[0]
    assert quick.expect == "holds"  # the quick run answers to the claim's own expectation


@pytest.mark.parametrize("value,field,words", [
    ('"maybe"', "profiles.full.expect", "not a verdict"),
    ('"infeasible"', "profiles.full.expect", "cannot expect 'infeasible'"),
    ('"violated"', "finding", "record the finding"),
])
def test_a_profile_expectation_is_validated(claims_dir, value, field, words):
    text = NORM_CLAIM.replace("[profiles.full]\n", f"[profiles.full]\nexpect = {value}\n")
    with pytest.raises(ClaimError) as e:
        load_claim(_write(claims_dir, text))
    assert e.value.field == field and words in str(e.value)
