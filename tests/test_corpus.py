"""The regression corpus: a hunt's counterexample is saved beside its claim and replays identically."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lemmacheck import corpus
from lemmacheck.claims import load_claims, load_extension
from lemmacheck.hunt import hunt

PLANTED = Path(__file__).parent / "planted"


@pytest.fixture
def claim(tmp_path):
    load_extension(PLANTED)  # registered once, from its one path; the copies below are claim files only
    folder = tmp_path / "planted"
    shutil.copytree(PLANTED, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return next(c for c in load_claims([folder])[0] if c.id.endswith("structured"))


def test_counterexample_is_saved_beside_the_claim_and_replays_identically(claim):
    ce = hunt(claim, examples=100, seed=0).counterexample
    assert ce is not None
    path = corpus.save(claim, ce)
    assert path == claim.source.parent / "corpus" / "structured.json"
    corpus.save(claim, ce)  # saved once
    assert len(json.loads(path.read_text())["entries"]) == 1
    first = corpus.replay(claim)
    second = corpus.replay(claim)
    assert len(first) == 1
    (saved, a), (_, b) = first[0], second[0]
    assert a.to_json() == b.to_json()  # identical on a second run
    assert a.slack_min == saved.slack_min and a.violations == saved.violations and a.significant


def test_planned_entries_run_the_pinned_claim(claim):
    assert corpus.plans(claim) == []
    ce = hunt(claim, examples=100, seed=0).counterexample
    corpus.save(claim, ce)
    [(params, seed, reps, definition)] = corpus.plans(claim)
    assert params == ce.params and seed == ce.seed and reps == ce.replicates
    assert json.loads(definition)["inputs"]["points"] == ce.points


def test_malformed_corpus_names_the_file(claim):
    path = corpus.corpus_path(claim)
    path.parent.mkdir()
    path.write_text('{"claim": "other/x/y", "entries": []}')
    with pytest.raises(ValueError, match=r"structured.json: malformed corpus .*other/x/y"):
        corpus.load(claim)


def test_every_run_replays_the_corpus_first(claim, tmp_path):
    import copy

    from lemmacheck.claims import parse_claim
    from lemmacheck.runner import InProcessExecutor, evaluate, run_claims
    from lemmacheck.store import Store

    # the quick profile's sweep over degenerate datasets off (its hexagon breaks the claim): only the corpus can
    raw = copy.deepcopy(claim.raw)
    raw["profiles"]["quick"]["hunt"] = 0
    claim = parse_claim(raw, claim.source)
    store = Store(tmp_path / "r.db")
    before = evaluate(store, run_claims([claim], store, executor=InProcessExecutor()), [claim])[0]
    assert before.verdict == "holds"  # the quick profile's iid datasets never break it
    ce = hunt(claim, examples=100, seed=0).counterexample
    corpus.save(claim, ce)
    results = [evaluate(store, run_claims([claim], store, seed=s, executor=InProcessExecutor()), [claim])[0]
               for s in (0, 1)]
    for res in results:
        assert res.verdict == "violated"
        first = res.configs[0]  # the corpus entry, planned before the profile's configurations
        assert first.params == ce.params and first.seed == ce.seed and first.violations == ce.violations
        assert first.slack_min == ce.slack_min  # the same draws whatever the run's seed


def test_report_section_shows_how_hard_it_was_hunted_and_draws_the_dataset(claim):
    from lemmacheck.report.pages import hunt_section

    assert hunt_section(claim) == ""  # never hunted
    res = hunt(claim, examples=100, seed=0)
    corpus.record_hunt(claim, res, seed=0, replicates=8)
    html = hunt_section(claim)
    assert "<h2>Hunts</h2>" in html and "counterexample" in html
    assert f"<td>{len(res.probes)}</td>" in html  # cases probed
    assert html.count("<circle") == 1 + 2  # the unit circle and the two points of the minimal dataset
    assert "dataset, 2 points in 2 dimensions" in html
    assert [e.points for e in corpus.load(claim)] == [[[1.0, 0.0], [-1.0, 0.0]]]


def test_sibling_settings_are_parsed_once_per_version_of_the_file(tmp_path):
    """Planning reads every sibling claim file's setting (network and inputs) once per version of that file, so a
    file edited between two plans in one process is read again."""
    import os
    import types

    from lemmacheck.corpus import _file_setting, _shares_setting

    sib = tmp_path / "sibling.toml"
    sib.write_text('network = "zou2018"\ninputs = { kind = "unit-sphere", n = "n", d = "d" }\n')
    me = types.SimpleNamespace(raw={"network": "zou2018", "inputs": {"kind": "unit-sphere", "n": "n", "d": "d"}})
    misses = _file_setting.cache_info().misses
    assert _shares_setting(me, sib) and _shares_setting(me, sib)
    assert _file_setting.cache_info().misses == misses + 1
    st = sib.stat()
    sib.write_text('network = "du2018"\ninputs = { kind = "unit-sphere", n = "n", d = "d" }\n')
    os.utime(sib, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert not _shares_setting(me, sib)
    assert not _shares_setting(me, tmp_path / "missing.toml")
