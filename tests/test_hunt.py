"""The Hypothesis-targeted hunt finds and shrinks a planted counterexample, and replays exactly."""

from lemmacheck.claims import load_claims
from lemmacheck.hunt import hunt, probe

PLANTED_EXT = '''
import torch
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES

@QUANTITIES.register("test-planted-ramp", "x * k / 10 plus tiny noise: exceeds 1 only when x * k > 10",
                     networks=("scalar",))
def ramp(ctx):
    noise = 1e-6 * torch.rand(ctx.replicates, generator=ctx.generator, dtype=torch.float64)
    return Observation(torch.full((ctx.replicates,), ctx.p("x") * ctx.p("k") / 10, dtype=torch.float64) + noise)
'''

PLANTED = '''
id = "planted/fact-1/ramp"
paper = "planted"
result = "Fact 1"
title = "x k / 10 <= 1 (false when x k > 10)"
statement = 'x k / 10 \\le 1'
kind = "deterministic-inequality"
network = "scalar"
[params]
x = { min = 0.0, max = 4.0 }
k = { min = 1, max = 5 }
[check]
quantity = "test-planted-ramp"
relation = "<="
bound = "1"
probability = "always"
'''


def test_hunt_finds_and_shrinks_a_planted_counterexample(tmp_path):
    d = tmp_path / "claims" / "planted"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(PLANTED_EXT)
    (d / "ramp.toml").write_text(PLANTED)
    claim = load_claims([d])[0][0]
    res = hunt(claim, examples=200, replicates=4, seed=1)
    ce = res.counterexample
    assert ce is not None and ce.violations > 0
    assert ce.params["x"] * ce.params["k"] >= 10 - 1e-5
    # Shrinking moves to a simple violating configuration (Hypothesis shrinks floats towards integers).
    assert float(ce.params["x"]).is_integer()
    # The reported configuration replays exactly (same config seed, same draws).
    again = probe(claim, ce.params, 1, 4)
    assert again.slack_min == ce.slack_min and again.seed == ce.seed


def test_hunt_targets_small_slack_when_nothing_fails(tmp_path):
    d = tmp_path / "claims" / "planted"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(PLANTED_EXT.replace("test-planted-ramp", "test-planted-ramp2"))
    (d / "ramp.toml").write_text(PLANTED.replace("test-planted-ramp", "test-planted-ramp2")
                                 .replace("max = 4.0", "max = 2.0"))
    claim = load_claims([d])[0][0]
    res = hunt(claim, examples=60, replicates=2, seed=0, stratified=0)  # Hypothesis alone
    assert res.counterexample is None
    assert res.worst().slack_min < 1.3  # targeting drives x k towards its maximum 10
    # The stratified sweep visits the domain's corners: at x k = 10 exactly the noise (+1e-6) breaks the bound.
    ce = hunt(claim, examples=60, replicates=2, seed=0).counterexample
    assert ce is not None and ce.params == {"k": 5, "x": 2.0} and ce.found_by == "stratified sweep"


def test_cli_hunt_searches_data_and_saves_the_counterexample(tmp_path, capsys):
    import shutil
    from pathlib import Path

    from lemmacheck.claims import load_extension
    from lemmacheck.cli import main

    planted = Path(__file__).parent / "planted"
    load_extension(planted)
    folder = tmp_path / "planted"
    shutil.copytree(planted, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    rc = main(["hunt", "planted/fact-1/structured", "--claims", str(folder), "--examples", "60", "--save", "-q"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "over parameters, datasets" in out and "datasets tried:" in out
    assert "dataset (cross-polytope (principal axes)): [[1.0, 0.0], [-1.0, 0.0]]" in out
    assert (folder / "corpus" / "structured.json").is_file()
    # A run of the claim now replays the saved counterexample first: violated.
    assert main(["run", str(folder / "structured.toml"), "--db", str(tmp_path / "r.db"), "-q"]) == 1


VACUOUS = '''
id = "planted/fact-2/tail"
paper = "planted"
result = "Fact 2"
title = "2 - t <= 1 with probability 1 - 2 exp(-t^2/2) (a tail bound that says nothing for small t)"
statement = '2 - t \\le 1 \\text{ w.p. } 1 - 2e^{-t^2/2}'
kind = "probability-tool"
network = "scalar"
[params]
t = { min = 0.1, max = 3.0 }
[check]
quantity = "test-planted-tail"
relation = "<="
bound = "1"
probability = "1 - 2*exp(-t**2/2)"
'''


def test_a_hunt_never_probes_a_vacuous_configuration(tmp_path):
    """Below t = sqrt(2 log 2) the stated probability 1 - 2 exp(-t^2/2) is <= 0: the statement says nothing there,
    though every draw exceeds the bound (slack < 1 for t < 1). Targeting small slack would drive the hunt there
    and make it the worst case; a vacuous configuration is never probed, so the worst is where the statement
    speaks (slack above 1). Fails when hunt.vacuous is not consulted."""
    from lemmacheck.hunt import vacuous

    d = tmp_path / "claims" / "planted"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(PLANTED_EXT.replace("test-planted-ramp", "test-planted-tail")
                                    .replace('ctx.p("x") * ctx.p("k") / 10', '2 - ctx.p("t")'))
    (d / "tail.toml").write_text(VACUOUS)
    claim = load_claims([d])[0][0]
    assert vacuous(claim, {"t": 1.0}) and not vacuous(claim, {"t": 1.2})
    res = hunt(claim, examples=40, replicates=4, seed=0)
    assert res.probes and all(not vacuous(claim, p.params) for p in res.probes)
    assert res.worst().slack_min > 1 and res.counterexample is None


def _ramp(tmp_path, name, high):
    d = tmp_path / "claims" / "planted"
    d.mkdir(parents=True)
    (d / "extension.py").write_text(PLANTED_EXT.replace("test-planted-ramp", name))
    (d / "ramp.toml").write_text(PLANTED.replace("test-planted-ramp", name).replace("max = 4.0", f"max = {high}"))
    return load_claims([d])[0][0]


def _searched(monkeypatch, claim, stop, **kw):
    """The hunt's result with or without the early stop, and how many cases Hypothesis ran through the test."""
    import lemmacheck.hunt as H
    from lemmacheck.strategies import Case

    ran = []
    key = Case.key
    monkeypatch.setattr(Case, "key", lambda self: ran.append(1) or key(self))
    monkeypatch.setattr(H, "STOP_WHEN_SPENT", stop)
    res = hunt(claim, stratified=0, **kw)
    return [p.to_json() for p in res.probes], res.counterexample and res.counterexample.to_json(), len(ran)


def test_a_spent_budget_stops_hypothesis_without_changing_the_outcome(tmp_path, monkeypatch):
    """Past max_probes every new case is refused: Hypothesis would go on generating (nothing breaks the claim) or
    shrinking (one case broke it) through hundreds of refused cases. The hunt stops it there, and its probes and
    counterexample are those of the whole search. Fails when the stop is removed (as many cases run) or when it
    stops where a later case could still change the outcome."""
    holds = _ramp(tmp_path / "a", "test-planted-ramp3", 2.0)  # x k <= 10: nothing breaks it
    full = _searched(monkeypatch, holds, False, examples=60, replicates=2, seed=0, max_probes=5)
    cut = _searched(monkeypatch, holds, True, examples=60, replicates=2, seed=0, max_probes=5)
    assert cut[:2] == full[:2] and len(full[0]) == 5 and full[1] is None
    assert cut[2] <= 6 < full[2]
    breaks = _ramp(tmp_path / "b", "test-planted-ramp4", 4.0)
    full = _searched(monkeypatch, breaks, False, examples=60, replicates=2, seed=11, max_probes=3)
    cut = _searched(monkeypatch, breaks, True, examples=60, replicates=2, seed=11, max_probes=3)
    assert cut[:2] == full[:2] and full[1] is not None  # the one breaking case, which the shrinker cannot leave
    assert cut[2] < full[2]
    # two or more probed cases break it: the shrinker may still move between them, so Hypothesis is not stopped
    full = _searched(monkeypatch, breaks, False, examples=60, replicates=2, seed=2, max_probes=12)
    cut = _searched(monkeypatch, breaks, True, examples=60, replicates=2, seed=2, max_probes=12)
    assert sum(1 for p in full[0] if p["violations"]) >= 2 and cut == full
