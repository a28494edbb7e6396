"""The CLI contract that other tools read: list/run JSON shapes, exit codes, repro reproducing numbers."""

import json
import re

import pytest

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
    # the box's speed is recorded with the run (lemmacheck.yardstick), so its cost compares across machines
    assert re.fullmatch(r"float64 GEMM [\d.]+ GFLOP/s, float64 randn [\d.]+ M/s \(one thread, best of 3\)",
                        doc["run"]["versions"]["yardstick"])
    # and where its time went: the parts add up to the shards' estimator seconds, the run's wall time is stated
    cost = doc["run"]["cost"]
    assert cost["shards"] > 0 and cost["wall_s"] is not None and cost["wall_s"] >= 0
    assert abs(sum(cost["estimator_s_by_part"].values()) - cost["estimator_s"]) < 0.2
    assert cost["estimator_s"] == pytest.approx(sum(cfg["seconds"] for c in doc["claims"] for cfg in c["configs"]),
                                                abs=0.2)
    c = doc["claims"][0]
    assert CLAIM_KEYS <= set(c) and c["verdict"] == "holds" and c["mode"] == "probabilistic"
    assert all(CONFIG_KEYS <= set(cfg) for cfg in c["configs"])
    assert [cfg["in_regime"] for cfg in c["configs"]] == [False, True]  # requires m >= 32
    # A verdict that differs from the recorded expectation exits non-zero.
    (claims_dir / "norm.toml").write_text(NORM_CLAIM.replace("B = 100.0 }, { m = 64, L = 2, B = 100.0 }",
                                                             "B = 0.5 }, { m = 64, L = 2, B = 0.5 }"))
    assert main(["run", str(claims_dir), "--db", str(tmp_path / "r2.db")]) == 1


def test_a_malformed_claim_file_exits_2_while_the_other_claims_run(tmp_path, claims_dir, capsys):
    """The README's contract: exit 2 is a user error (one line naming the file and field), and the good claims
    beside the bad file still run and report."""
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    (claims_dir / "bad.toml").write_text(NORM_CLAIM.replace("lemma-1/norm", "lemma-9/bad").replace('relation    = "<="',
                                                                                                     'relation = "<<"'))
    out = tmp_path / "r.json"
    assert main(["run", str(claims_dir), "--db", str(tmp_path / "r.db"), "--json", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "relation" in err
    assert [c["id"] for c in json.loads(out.read_text())["claims"]] == ["toy/lemma-1/norm"]
    assert main(["list", str(claims_dir)]) == 2


def test_update_refuses_to_drop_the_results_of_a_claim_file_that_failed_to_load(tmp_path, claims_dir, capsys):
    """A malformed file is not a deleted claim: `run --update` with a load error runs nothing and keeps every stored
    shard (it used to drop the broken claim's results as if its file were gone)."""
    from lemmacheck.store import Store

    a = claims_dir / "a.toml"
    a.write_text(NORM_CLAIM)
    (claims_dir / "b.toml").write_text(NORM_CLAIM.replace('id        = "toy/lemma-1/norm"', 'id        = "toy/lemma-2/norm"'))
    db = tmp_path / "u.db"
    base = ["run", str(claims_dir), "--db", str(db)]
    assert main(base) == 0
    a.write_text(NORM_CLAIM.replace('relation    = "<="', 'relation    = "<=>"'))  # malformed
    capsys.readouterr()
    assert main([*base, "--update"]) == 2
    err = capsys.readouterr().err
    assert "a.toml" in err and "failed to load" in err and "nothing was run" in err
    store = Store(db)
    run_id = store.find_latest(0, "quick", [str(claims_dir)])
    assert store.claim_ids(run_id) == ["toy/lemma-1/norm", "toy/lemma-2/norm"]
    assert store.done_shards(run_id, "toy/lemma-1/norm")
    a.write_text(NORM_CLAIM)  # repaired: the update keeps it (unchanged definition, nothing redrawn)
    assert main([*base, "--update"]) == 0


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


# --- errors, streams, help ---------------------------------------------------------------------

FULL_PARAMS = {"m": 64, "L": 2, "n": 3, "d": 8, "B": 100.0, "delta": 0.1}


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_repro_refuses_incomplete_undeclared_or_malformed_params(claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    base = ["repro", "toy/lemma-1/norm", "--seed", "1", "--replicates", "4", "--shard-size", "4", "--claims",
            str(claims_dir), "--params"]
    cases = {json.dumps({"m": 64}): "lacks ['B', 'L', 'd', 'delta', 'n']",
             json.dumps({**FULL_PARAMS, "zz": 1}): "names ['zz'], which toy/lemma-1/norm does not declare",
             '{"m": 64,': "--params is not valid JSON",
             "[64]": "--params must be a JSON object"}
    for params, message in cases.items():
        assert main([*base, params]) == 2
        assert message in _one_error_line(capsys.readouterr().err)
    assert main([*base, json.dumps(FULL_PARAMS)]) == 0
    assert "toy/lemma-1/norm" in capsys.readouterr().out


def test_a_bug_gets_a_traceback_and_a_hint_a_user_error_one_line(monkeypatch, capsys, claims_dir):
    from lemmacheck import cli

    def broken(a):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_list", broken)
    assert main(["list", str(claims_dir)]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom" in err and "this is a bug in lemmacheck" in err
    monkeypatch.undo()
    assert main(["list", str(claims_dir / "missing")]) == 2
    assert "missing: no such claim file or folder" in _one_error_line(capsys.readouterr().err)


def test_a_closed_pipe_ends_quietly(tmp_path):
    import subprocess
    import sys

    # the reader closes before lemmacheck writes a byte: every write meets a broken pipe
    proc = subprocess.Popen([sys.executable, "-m", "lemmacheck.cli", "list", "--quantities", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err


def test_bound_syntax_errors_speak_the_claims_terms(claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM.replace('bound       = "B"', 'bound       = "B * sqrt(m * (L + 1)"'))
    assert main(["list", str(claims_dir)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "field 'check.bound'" in line and "unbalanced '(' at column 9: it is never closed (add ')')" in line
    assert "EOF" not in line and "tokenize" not in line
    (claims_dir / "norm.toml").write_text(NORM_CLAIM.replace('bound       = "B"', 'bound       = "B * m +"'))
    assert main(["list", str(claims_dir)]) == 2
    assert "ends with the operator '+' at column 7" in _one_error_line(capsys.readouterr().err)


def test_a_bad_grid_entry_is_named_as_grid(claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM.replace("grid = { m = [16, 64], L = [1, 2] }",
                                                             "grid = { m = [16, 64], L = [1, 9] }"))
    assert main(["list", str(claims_dir)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "field 'profiles.full.grid.L': 9 lies outside the declared domain of 'L'" in line


def test_a_result_label_missing_from_the_papers_list_is_warned(claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    (claims_dir / "_paper.toml").write_text('key = "toy"\ntitle = "T"\nauthors = "A"\nvenue = "V"\nscope = "S"\n'
                                            'results = ["Lemma 2"]\n')
    assert main(["list", str(claims_dir)]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "field 'result': 'Lemma 1' is not among the results listed in" in err
    (claims_dir / "_paper.toml").write_text((claims_dir / "_paper.toml").read_text().replace("Lemma 2", "Lemma 1"))
    assert main(["list", str(claims_dir)]) == 0
    assert capsys.readouterr().err == ""


def test_show_reads_the_latest_store_by_default_and_names_it(tmp_path, claims_dir, capsys, monkeypatch):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    monkeypatch.chdir(tmp_path)
    assert main(["show", "toy/lemma-1/norm", "--claims", str(claims_dir)]) == 0
    assert "last results: none" in capsys.readouterr().out
    assert main(["run", str(claims_dir), "--quiet"]) == 0  # the default store
    (tmp_path / "runs").mkdir()
    assert main(["run", str(claims_dir), "--quiet", "--db", "runs/later.db", "--seed", "5"]) == 0
    capsys.readouterr()
    assert main(["show", "toy/lemma-1/norm", "--claims", str(claims_dir)]) == 0
    out = capsys.readouterr().out
    assert "last results (store runs/later.db, run 1, quick, seed 5" in out and "--db to choose another" in out
    assert main(["show", "toy/lemma-1/norm", "--claims", str(claims_dir), "--db", ".lemmacheck/results.db"]) == 0
    assert "store .lemmacheck/results.db, run 1, quick, seed 0" in capsys.readouterr().out


def test_every_option_of_every_command_is_documented():
    from lemmacheck.cli import parser

    sub = next(a for a in parser()._actions if a.dest == "cmd")
    undocumented = [f"{name} {'/'.join(act.option_strings) or act.dest}"
                    for name, p in sub.choices.items() for act in p._actions
                    if act.dest != "help" and not act.help]
    assert undocumented == []


def test_summary_table_headers_and_scaling_claims_show_their_fit(tmp_path, claims_dir, capsys):
    scaling = (NORM_CLAIM.replace('bound       = "B"', 'bound       = "C * B"\nconstants   = ["C"]')
               .replace("toy/lemma-1/norm", "toy/lemma-1/scaling")
               .replace("configs = [ { m = 16, L = 2, B = 100.0 }, { m = 64, L = 2, B = 100.0 } ]",
                        "grid = { m = [16, 64], L = [1, 2] }"))
    (claims_dir / "scaling.toml").write_text(scaling)
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    main(["run", str(claims_dir), "--db", str(tmp_path / "r.db"), "--quiet"])
    lines = capsys.readouterr().out.splitlines()
    header, rule = lines[0], lines[1]
    starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
    assert all(header[i] != " " for i in starts), "a column without a header"
    row = next(x for x in lines if x.startswith("toy/lemma-1/scaling"))
    col = header.index("worst slack")
    assert row[col:col + 11].strip() == "-"  # not the slack at the illustrative constant
    assert "C slope in " in row[header.index("scaling fit"):]


def test_show_skips_a_damaged_store_it_was_not_asked_for(tmp_path, claims_dir, capsys, monkeypatch):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(claims_dir), "--quiet"]) == 0
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "broken.db").write_bytes(b"not sqlite" * 50)  # the newest file, but unreadable
    capsys.readouterr()
    assert main(["show", "toy/lemma-1/norm", "--claims", str(claims_dir)]) == 0
    cap = capsys.readouterr()
    assert "store .lemmacheck/results.db, run 1" in cap.out and "warning: skipped runs/broken.db" in cap.err
    assert main(["show", "toy/lemma-1/norm", "--claims", str(claims_dir), "--db", "runs/broken.db"]) == 2
