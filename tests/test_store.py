"""The results store refuses what it cannot trust (damaged, truncated, foreign files) with one clear error, and
a second run writing the same store stops at once instead of doubling or interleaving shards."""

import os
import sqlite3
import subprocess
import sys

import pytest

from conftest import NORM_CLAIM
from lemmacheck.claims import load_claims
from lemmacheck.cli import main
from lemmacheck.errors import StoreError
from lemmacheck.runner import run_claims
from lemmacheck.store import APPLICATION_ID, Store


@pytest.fixture
def real_store(tmp_path, claims_dir):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    claims, _ = load_claims([claims_dir])
    db = tmp_path / "real.db"
    store = Store(db)
    run_claims(claims, store, paths=[str(claims_dir)])
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, as after a clean exit
    store.close()
    return db


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "lemmacheck.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


def test_a_new_store_is_marked_and_reopens(tmp_path, real_store):
    con = sqlite3.connect(real_store)
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    con.close()
    assert Store(real_store, readonly=True).latest_run() == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign", "zeroed-middle"])
def test_a_damaged_or_foreign_file_is_refused_with_one_clear_error(tmp_path, real_store, damage):
    bad = tmp_path / f"{damage}.db"
    data = real_store.read_bytes()
    if damage == "garbage":
        bad.write_bytes(b"this is a text file, not SQLite\n" * 100)
    elif damage == "truncated":
        bad.write_bytes(data[: len(data) // 3])
    elif damage == "zeroed-middle":
        mid = len(data) // 2
        bad.write_bytes(data[:mid] + b"\0" * 8192 + data[mid + 8192:])
    else:
        con = sqlite3.connect(bad)
        con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        con.commit()
        con.close()
    before = bad.read_bytes()
    for readonly in (True, False):
        with pytest.raises(StoreError, match=rf"{bad.name}: (not a readable lemmacheck results store|not a lemmacheck "
                                             r"results store|the results store is damaged)"):
            Store(bad, readonly=readonly)
    assert bad.read_bytes() == before, "a refused file must be left as it was"


def test_the_cli_names_the_damaged_store_in_one_line(tmp_path, real_store, capsys):
    bad = tmp_path / "cut.db"
    bad.write_bytes(real_store.read_bytes()[:3000])
    proc = _cli("report", "--db", str(bad), "--out", str(tmp_path / "site"), cwd=tmp_path)  # the real CLI once
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [x for x in proc.stderr.splitlines() if x.startswith("error:")] == proc.stderr.splitlines()
    assert "cut.db: not a readable lemmacheck results store" in proc.stderr
    for args in (["show", "toy/lemma-1/norm", "--db", str(bad), "--claims", str(tmp_path / "claims")],
                 ["run", str(tmp_path / "claims"), "--db", str(bad)]):
        assert main(args) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and "cut.db" in err[0], err


def test_a_second_run_on_a_store_being_written_stops_with_a_clear_error(tmp_path, claims_dir, capsys):
    (claims_dir / "norm.toml").write_text(NORM_CLAIM)
    db = tmp_path / "busy.db"
    first = Store(db)
    with first.run_lock():
        assert main(["run", str(claims_dir), "--db", str(db), "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"error: {db}: another run is writing this store (pid {os.getpid()} since" in err
        assert "Traceback" not in err
        # the holder goes on writing a whole run: the refused one wrote nothing in between
        claims, _ = load_claims([claims_dir])
        rid = run_claims(claims, first, paths=[str(claims_dir)])
    assert first.latest_run() == rid == 1
    first.close()
    assert [r[0] for r in sqlite3.connect(db).execute("PRAGMA integrity_check")] == ["ok"]
    # once released, the next run takes the store
    assert main(["run", str(claims_dir), "--db", str(db), "--quiet"]) == 0
    assert Store(db, readonly=True).latest_run() == 2


def test_a_killed_holder_releases_the_lock(tmp_path):
    db = tmp_path / "k.db"
    Store(db).close()
    code = ("import sys, time; from lemmacheck.store import Store\n"
            "s = Store(sys.argv[1])\n"
            "with s.run_lock():\n    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match=f"pid {holder.pid} since"), Store(db).run_lock():
            pass
    finally:
        holder.kill()
        holder.wait()
    with Store(db).run_lock():  # the OS dropped the dead holder's lock
        pass
