"""Progress of run, hunt and report: a bar on a terminal, periodic plain lines elsewhere, nothing with --quiet or
`--json -`; always on stderr, so stdout stays the command's result."""

import io
import json
import os
import pty
import re
import select
import subprocess
import sys

from fault_claims import write_fault_claim

from conftest import NORM_CLAIM
from lemmacheck.claims import load_claims
from lemmacheck.cli import main
from lemmacheck.progress import Progress, RunProgress
from lemmacheck.runner import evaluate, run_claims
from lemmacheck.store import Store

LINE = re.compile(r"^run: (\d+)/(\d+) tasks \((\d+)%\), claims (\d+)/(\d+) finished, (\d+) violating configs, "
                  r"elapsed \d+:\d\d(, ETA \d+:\d\d)?$")


def test_plain_lines_count_shards_claims_and_violations(claims_dir):
    # B = 0.5 in the second configuration: every draw of it violates (layer norms are about 1)
    # early_stop = false: the lines count every planned shard (early stop would end the violated one after a shard)
    (claims_dir / "norm.toml").write_text(NORM_CLAIM.replace("{ m = 64, L = 2, B = 100.0 }", "{ m = 64, L = 2, B = 0.5 }")
                                          .replace("[profiles.quick]\n", "[profiles.quick]\nearly_stop = false\n"))
    claims, _ = load_claims([claims_dir])
    out = io.StringIO()
    prog = RunProgress(claims, mode="lines", stream=out, interval=0)
    store = Store(":memory:")
    with prog:
        rid = run_claims(claims, store, progress=prog, paths=["x"])
    lines = out.getvalue().splitlines()
    parsed = [LINE.match(x) for x in lines]
    assert all(parsed), lines
    assert [int(m[1]) for m in parsed] == list(range(21)) and {int(m[2]) for m in parsed} == {20}
    assert parsed[1][7] and not parsed[-1][7]  # an ETA while running, none when done
    assert [int(m[4]) for m in parsed] == [0] * 20 + [1]  # the claim finishes with its last shard
    res = evaluate(store, rid, claims)[0]
    assert sum(c.violations for c in res.configs) == 100  # every draw of the B = 0.5 configuration
    assert int(parsed[-1][6]) == sum(c.violations > 0 for c in res.configs) == 1  # counted once: configurations


def test_lines_are_periodic_and_off_is_silent():
    out = io.StringIO()
    with Progress("report", "page", mode="lines", stream=out, interval=3600) as p:
        p.add_total(5)
        for _ in range(5):
            p.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2  # the plan at once, then only the closing line
    assert lines[0].startswith("report: 0/5 pages (0%), elapsed 0:0") and lines[1].startswith("report: 5/5 pages")
    out = io.StringIO()
    with Progress("report", "page", mode="off", stream=out) as p:
        p.add_total(2)
        p.advance()
        p.note("x")
    assert out.getvalue() == ""


def _cli_env():
    return {**os.environ, "LEMMACHECK_PROGRESS_INTERVAL": "0", "COLUMNS": "120"}


def test_a_bar_on_a_terminal(tmp_path, claims_dir):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "lemmacheck.cli", "run", str(claims_dir), "--db",
                             str(tmp_path / "r.db")], stdout=subprocess.PIPE, stderr=slave, env=_cli_env(),
                            cwd=tmp_path)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    tty = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "\r" in tty and "20/20" in tty and "100%" in tty and "task/s" in tty  # tqdm redraws one line
    assert "claims 1/1 finished, 0 violating configs" in tty
    assert "run: 1/20 tasks" not in tty  # not the plain lines
    assert out.decode().startswith("claim ")  # the table on stdout, untouched by the bar


def test_plain_lines_off_a_terminal_and_nothing_with_quiet_or_json_stdout(tmp_path, claims_dir, capsys,
                                                                         monkeypatch):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    proc = subprocess.run([sys.executable, "-m", "lemmacheck.cli", "run", str(claims_dir), "--db",
                           str(tmp_path / "r.db")], capture_output=True, text=True, env=_cli_env(), cwd=tmp_path,
                          timeout=300, check=False)
    assert proc.returncode == 0
    *lines, cost = proc.stderr.splitlines()
    assert len(lines) == 21 and all(LINE.match(x) for x in lines), lines  # the plan, then one per shard
    assert cost.startswith("cost: wall ") and " hunts " in cost  # then where the time went (Store.cost)
    assert "\r" not in proc.stderr
    monkeypatch.setenv("LEMMACHECK_PROGRESS_INTERVAL", "0")
    assert main(["run", str(claims_dir), "--db", str(tmp_path / "q.db"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["run", str(claims_dir), "--db", str(tmp_path / "j.db"), "--json", "-"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["claims"][0]["id"] == "toy/lemma-1/norm"  # stdout: the JSON document alone
    assert "run:" not in cap.err and "toy/lemma-1/norm" in cap.err  # the table went to stderr


def test_report_and_hunt_show_progress(tmp_path, claims_dir, capsys, monkeypatch):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    monkeypatch.setenv("LEMMACHECK_PROGRESS_INTERVAL", "0")
    db = tmp_path / "r.db"
    assert main(["run", str(claims_dir), "--db", str(db), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "site")]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.splitlines()[1].startswith("report: 1/1 pages (100%)")
    fault_dir = write_fault_claim(tmp_path / "f", "test-fault-progress")  # a cheap quantity to hunt over
    assert main(["hunt", "fault/fact-1/draws", "--examples", "4", "--replicates", "2", "--claims",
                 str(fault_dir)]) in (0, 1)
    err = capsys.readouterr().err.splitlines()
    assert err and all(re.match(r"hunt: \d+/\d+ configurations", x) for x in err), err


def test_a_claim_waiting_for_its_hunt_is_not_finished():
    # The full profile hunts on the pool: a claim whose hunt has not returned has work to come, even with no shard
    # planned yet, and the hunt itself is a unit of the count.
    from types import SimpleNamespace

    from lemmacheck.corpus import HuntTask

    claim = SimpleNamespace(id="p/lemma-1/x", check=None)
    out = io.StringIO()
    prog = RunProgress([claim], mode="lines", stream=out, interval=0)
    hunt = HuntTask("p/x.toml", "{}", claim.id, 6, 0, "full")
    prog.planned([hunt])
    assert prog.describe().startswith("claims 0/1 finished") and "1 hunts to go" in prog.describe()
    shard = SimpleNamespace(claim_id=claim.id, config_index=0)
    prog.planned([shard])
    prog.hunt_done(hunt)
    assert prog.describe().startswith("claims 0/1 finished") and "hunts to go" not in prog.describe()
    prog.shard_done(shard, SimpleNamespace(error="", claim_id=claim.id, config_index=0, shard_index=0, value=[],
                                           seconds=0.0))
    assert prog.describe().startswith("claims 1/1 finished") and (prog.done, prog.total) == (2, 2)
