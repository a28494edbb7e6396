"""The CLI contract that other tools read: list/run JSON shapes, exit codes, repro reproducing numbers."""

import json

from conftest import NORM_CLAIM
from lemmacheck.cli import main

RUN_KEYS = {"seed", "profile", "started", "versions", "device"}
CLAIM_KEYS = {"id", "paper", "result", "kind", "mode", "verdict", "flags", "configs", "repro"}
CONFIG_KEYS = {"params", "replicates", "violations", "violation_ci", "slack_min", "slack_median", "in_regime",
               "verdict", "seed"}


def test_list_json_contract(claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    (claims_dir / "inf.toml").write_text(NORM_CLAIM.split("[params]")[0].replace("lemma-1/norm", "lemma-2/x")
                                         + 'infeasible = "needs width 1e50"\n')
    assert main(["list", str(claims_dir), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"]: r["mode"] for r in rows} == {"toy/lemma-1/norm": "probabilistic", "toy/lemma-2/x": "infeasible"}
    assert all({"id", "paper", "result", "kind", "title", "mode"} <= set(r) for r in rows)


def test_list_quantities_and_networks(capsys):
    assert main(["list", "--quantities", "--json"]) == 0
    q = {x["name"]: x for x in json.loads(capsys.readouterr().out)}
    assert "max-layer-output-norm" in q and q["max-layer-output-norm"]["description"]
    assert main(["list", "--networks"]) == 0
    assert "zou2018" in capsys.readouterr().out


def test_run_json_contract_and_exit_codes(tmp_path, claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    out = tmp_path / "r.json"
    assert main(["run", str(claims_dir), "--db", str(tmp_path / "r.db"), "--json", str(out), "--seed", "3"]) == 0
    table = capsys.readouterr().out
    assert "toy/lemma-1/norm" in table and "holds" in table
    doc = json.loads(out.read_text())
    assert RUN_KEYS <= set(doc["run"]) and doc["run"]["seed"] == 3 and doc["run"]["profile"] == "quick"
    c = doc["claims"][0]
    assert CLAIM_KEYS <= set(c) and c["verdict"] == "holds" and c["mode"] == "probabilistic"
    assert all(CONFIG_KEYS <= set(cfg) for cfg in c["configs"])
    assert [cfg["in_regime"] for cfg in c["configs"]] == [False, True]  # requires m >= 32
    # A verdict that differs from the recorded expectation exits non-zero.
    (claims_dir / "norm.toml").write_text(NORM_CLAIM.replace("B = 100.0 }, { m = 64, L = 2, B = 100.0 }",
                                                             "B = 0.5 }, { m = 64, L = 2, B = 0.5 }"))
    assert main(["run", str(claims_dir), "--db", str(tmp_path / "r2.db")]) == 1


def test_repro_prints_the_same_numbers(tmp_path, claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    out = tmp_path / "r.json"
    main(["run", str(claims_dir), "--db", str(tmp_path / "r.db"), "--json", str(out)])
    capsys.readouterr()
    c = json.loads(out.read_text())["claims"][0]
    cfg = c["configs"][1]
    assert main(["repro", c["id"], "--params", json.dumps(cfg["params"]), "--seed", str(cfg["seed"]),
                 "--replicates", str(cfg["drawn"]), "--shard-size", "10", "--claims", str(claims_dir),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["configs"][0]  # stdout is the JSON alone
    for k in ("violations", "slack_min", "slack_median", "value_max", "violation_ci"):
        assert rep[k] == cfg[k], k


def test_show_and_unknown_claim(tmp_path, claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    db = tmp_path / "r.db"
    main(["run", str(claims_dir), "--db", str(db)])
    capsys.readouterr()
    assert main(["show", "toy/lemma-1/norm", "--claims", str(claims_dir), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "with probability >= 1 - delta" in out and "last results" in out and "reproduce:" in out
    assert main(["show", "toy/nope", "--claims", str(claims_dir)]) == 2
    assert "no claim with id 'toy/nope'" in capsys.readouterr().err
