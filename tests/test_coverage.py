"""The coverage table (lemmacheck.coverage): which cells of a claim's domain ran (each admitted geometry at each n,
each edge of a declared parameter), and why the others did not: the geometry's own refusal, a declared premise,
`edges_skipped`, or "not in the profile". Small claims on tests/planted_search2's test-only quantities."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

from lemmacheck.claims import load_claim, load_extension, parse_claim
from lemmacheck.coverage import HUNTED_SYMMETRIC, coverage, skipped_reasons, text
from lemmacheck.inputs import simplex_vertices

PLANTED2 = Path(__file__).parent / "planted_search2"

CLAIM = """id = "cov/fact-1/max-cosine"
paper = "cov"
result = "Fact 1"
title = "max_(i != j) |<x_i, x_j>| <= 1 on the unit sphere"
statement = '\\max_{i \\ne j} |\\langle x_i, x_j \\rangle| \\le 1'
kind = "deterministic-inequality"
network = "scalar"
inputs = { kind = "unit-sphere", n = "n", d = "d", separation = "0.9", geometry = "polygon" }
edges_skipped = { d = "d = 2 is the plane every polygon lives in; checked in d = 3 (a random 2-plane)" }
[params]
n = { min = 2, max = 7 }
d = { values = [2, 3] }
[check]
quantity = "p2-max-cosine"
relation = "<="
bound = "1"
probability = "always"
[profiles.quick]
replicates = 4
shard_size = 4
grid = { n = [3, 5], d = [3] }
hunt = 0
[profiles.full]
replicates = 4
shard_size = 4
grid = { n = [3, 5], d = [3] }
hunt = 0
"""


@pytest.fixture(scope="module")
def claim_file(tmp_path_factory) -> Path:
    load_extension(PLANTED2)  # the p2-* quantities, registered once from their own folder
    path = tmp_path_factory.mktemp("claims") / "cov" / "max-cosine.toml"
    path.parent.mkdir()
    path.write_text(CLAIM)
    return path


@pytest.fixture(scope="module")
def claim(claim_file):
    return load_claim(claim_file)


def _cells(cov, geometry):
    row = next(r for r in cov["datasets"]["rows"] if r["geometry"] == geometry)
    return {c["n"]: c for c in row["cells"]}


def _states(cells, state):
    return sorted(n for n, c in cells.items() if c["state"] == state)


def _stored(params, pinned=None):
    return {"params": params, "pinned": pinned}


def test_two_geometries_show_exactly_the_cells_that_ran_and_why_the_others_did_not(claim):
    # A claim whose inputs admit two geometries (a list: the table reads one name or several); configurations ran
    # polygons at n = 3, 6 and a hunted simplex (its record names the geometry) at n = 4.
    two = dataclasses.replace(claim, inputs={**claim.inputs, "geometry": ["polygon", "simplex"]})
    simplex = simplex_vertices(4).tolist()
    simplex = [row + [0.0] * (3 - len(row)) for row in simplex]
    stored = [_stored({"n": 3, "d": 3}), _stored({"n": 6, "d": 3}),
              _stored({"n": 4, "d": 3}, {"points": simplex, "geometry": "simplex"})]
    cov = coverage(two, stored, "full")
    grid = cov["datasets"]
    assert grid["n_values"] == [2, 3, 4, 5, 6, 7]  # every n of the short range, odd and even
    assert [r["geometry"] for r in grid["rows"]] == ["polygon", "simplex"]

    polygon = _cells(cov, "polygon")
    assert _states(polygon, "ran") == [3, 6]
    assert _states(polygon, "refused") == [7]  # sides 2 sin(pi/7) = 0.868 < phi = 0.9, at every d
    assert "regular 7-gon" in polygon[7]["why"] and "0.9" in polygon[7]["why"]
    assert _states(polygon, "not run") == [2, 4, 5]
    assert all(polygon[n]["why"].startswith("not in the full profile") for n in (2, 4, 5))

    simplex_row = _cells(cov, "simplex")
    assert _states(simplex_row, "ran") == [4]
    assert _states(simplex_row, "refused") == [5, 6, 7]  # n <= d + 1 fails at every d in {2, 3}
    assert all("needs n <= d + 1" in simplex_row[n]["why"] for n in (5, 6, 7))
    assert _states(simplex_row, "not run") == [2, 3]  # n = 4 is refused at d = 2 but admitted at d = 3

    # n summary: which n ran, odd and even, and where sets closed under x -> -x (even n) ran: the hexagon
    assert grid["n"]["ran"] == [3, 4, 6] and grid["n"]["odd"] == [3] and grid["n"]["even"] == [4, 6]
    assert grid["n"]["smallest"] == {"n": 2, "ran": False}
    assert grid["n"]["symmetric"] == {"exist_at": [2, 4, 6], "ran_at": [6], "probed_at": []}

    # admitted: polygon 5 + simplex 3 cells + 4 edges; ran: 2 + 1 cells + the edge d = 3
    assert cov["cells"] == {"ran": 4, "probed": 0, "admitted": 12}


def test_an_edge_listed_in_edges_skipped_shows_its_reason(claim):
    cov = coverage(claim, [_stored({"n": 3, "d": 3})], "full")
    edges = {(e["param"], e["end"]): e for e in cov["edges"]}
    assert edges[("d", "min")]["state"] == "skipped" and "the plane" in edges[("d", "min")]["why"]
    assert edges[("d", "max")]["state"] == "reached" and edges[("d", "max")]["configs"] == 1
    assert edges[("n", "max")] == {"param": "n", "end": "max", "value": 7, "state": "not run",
                                   "why": "not in the full profile"}
    reasons = dict(skipped_reasons(cov))
    assert reasons["d = 2 (min)"].startswith("skipped: d = 2 is the plane")
    assert "edges not reached: n = 2, n = 7, d = 2" in text(cov)


def test_a_premise_that_every_dataset_of_a_geometry_breaks_is_named(claim):
    # A regular polygon with an even number of vertices holds antipodal pairs: no dataset of the statement there.
    raw = copy.deepcopy(claim.raw)
    raw["inputs"]["premises"] = ["no-antipodal-pair"]
    cov = coverage(parse_claim(raw, claim.source), [_stored({"n": 3, "d": 3})], "full")
    polygon = _cells(cov, "polygon")
    assert _states(polygon, "premise") == [2, 4, 6]
    assert "no-antipodal-pair" in polygon[4]["why"]
    assert _states(polygon, "not run") == [5] and _states(polygon, "refused") == [7]
    assert cov["cells"]["admitted"] == 2 + 4  # n = 3, 5, and the four edges


def test_a_hunted_dataset_without_a_recorded_geometry_counts_as_hunted(claim):
    square = [[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, -1.0, 0.0]]
    cov = coverage(claim, [_stored({"n": 3, "d": 3}), _stored({"n": 4, "d": 3}, {"points": square})], "full")
    hunted = _cells(cov, HUNTED_SYMMETRIC)
    assert _states(hunted, "ran") == [4] and hunted[2]["state"] == "-"
    assert _cells(cov, "polygon")[4]["state"] == "not run"  # the hunt's square is not the claim's own draw
    assert cov["datasets"]["n"]["symmetric"]["ran_at"] == [4]
    assert cov["cells"] == {"ran": 1 + 1 + 1, "probed": 0, "admitted": 5 + 1 + 4}  # polygon at 3, hunted at 4, the edge d = 3


def test_run_json_and_report_show_coverage_from_the_store(claim_file, tmp_path, capsys, monkeypatch):
    from lemmacheck.cli import main
    from lemmacheck.report import build_report
    from lemmacheck.store import Store

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "r.db"
    assert main(["run", str(claim_file), "--profile", "quick", "--db", str(db), "--json", "-", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cov = doc["claims"][0]["coverage"]
    polygon = _cells(cov, "polygon")
    assert _states(polygon, "ran") == [3, 5] and _states(polygon, "refused") == [7]
    assert _states(polygon, "not run") == [2, 4, 6]
    assert polygon[2]["why"].startswith("not in the quick profile")
    assert cov["cells"] == {"ran": 3, "probed": 0, "admitted": 9}  # n = 3, 5 and the edge d = 3; of 5 cells and 4 edges

    # Computed from the store alone: its recorded configurations give the same table.
    store = Store(db, readonly=True)
    rid = store.latest_run()
    again = coverage(load_claim(claim_file), store.configs(rid, "cov/fact-1/max-cosine"), "quick")
    store.close()
    assert json.loads(json.dumps(again)) == cov

    index = build_report(db, tmp_path / "site")
    page = (index.parent / "claims").glob("*.html").__next__().read_text()
    section = page[page.index("<h2>Coverage</h2>"):]
    section = section[:section.index("</div>", section.index("Not run, and why"))]
    assert "3 of 9 admitted cells ran" in section
    assert "regular 7-gon" in section and "d = 2 is the plane" in section
    assert re.search(r"polygon at n = 2, 4, 6: not run: not in the quick profile", section)
    assert section.count("<tr>") <= 2 + 1  # one header, one row per geometry: a compact table
    home = index.read_text()
    assert "domain cells ran" in home and re.search(r">3 / 9 <span", home)


def test_function_members_and_hunted_labels_are_listed(claim):
    # A claim quantifying over an activation class: its own configurations use the class's default member, a hunt
    # pinned a shifted one; hunted labels are counted as explicit patterns.
    fc = dataclasses.replace(claim, inputs={**claim.inputs, "activation": {"class": "lipschitz-smooth"},
                                            "labels": "rademacher"})
    stored = [_stored({"n": 3, "d": 3}),
              _stored({"n": 3, "d": 3}, {"activation": {"base": "tanh", "a": 1.0, "c": 0.5}, "labels": "+-+"})]
    cov = coverage(fc, stored, "full")
    assert cov["functions"] == {"activation": {"declared": "class lipschitz-smooth, member its default",
                                               "declared_configs": 1, "hunted": {"tanh(c=0.5)": 1}}}
    assert cov["labels"] == {"declared": "rademacher", "declared_configs": 1, "hunted": {"explicit pattern": 1}}
    assert "coefficients" not in cov  # neither declared nor pinned


def test_the_page_keeps_a_wide_grid_compact(claim):
    from lemmacheck.report.data import ClaimView
    from lemmacheck.report.pages import COVERAGE_COLUMNS, _coverage_section

    raw = copy.deepcopy(claim.raw)
    raw["params"]["n"] = {"min": 2, "max": 40}
    raw["inputs"]["separation"] = "0.01"
    wide = parse_claim(raw, claim.source)
    cov = coverage(wide, [_stored({"n": n, "d": 3}) for n in range(5, 21)], "full")
    assert len(cov["datasets"]["n_values"]) == 22  # 2, 3, 4, 21, 39, 40 of the long range, and the 16 that ran
    assert cov["cells"]["ran"] == 16 + 1  # every n that ran counts, shown or not; and the edge d = 3
    html = _coverage_section(ClaimView(wide.id, "x", "x.toml", {}, claim=wide, _coverage=cov))
    head = html[html.index("<thead>"):html.index("</thead>")]
    assert head.count("</th>") == 1 + COVERAGE_COLUMNS + 1  # the row label, the columns shown, one "…"
    assert "10 more n" in head


PACKAGE_EXTENSION = '''
import torch
from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES


@QUANTITIES.register("covpkg-max-cosine", "max_(i != j) |<x_i, x_j>|", networks=("scalar",))
def max_cosine(ctx):
    X = ctx.inputs()
    G = (X @ X.transpose(1, 2)).abs() - torch.eye(X.shape[1], dtype=X.dtype)
    return Observation(G.flatten(1).amax(-1))
'''


def test_a_report_rebuilt_in_a_fresh_process_shows_coverage_of_a_packaged_plugin(tmp_path, capsys):
    # A paper's plugin is usually an extension/ package: `lemmacheck report` on an existing store, in a process that
    # never loaded that paper's claims, must still rebuild its claims (and so their coverage), not 'Not evaluated'.
    import subprocess
    import sys

    from lemmacheck.cli import main

    folder = tmp_path / "covpkg"
    (folder / "extension").mkdir(parents=True)
    (folder / "extension" / "__init__.py").write_text(PACKAGE_EXTENSION)
    text_ = CLAIM.replace("cov/", "covpkg/").replace('"cov"', '"covpkg"').replace("p2-max-cosine", "covpkg-max-cosine")
    (folder / "max-cosine.toml").write_text(text_)
    db, out = tmp_path / "r.db", tmp_path / "site"
    assert main(["run", str(folder), "--profile", "quick", "--db", str(db), "-q"]) == 0
    capsys.readouterr()
    code = f"from lemmacheck.report import build_report; build_report({str(db)!r}, {str(out)!r})"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, timeout=300)
    page = next((out / "claims").glob("*.html")).read_text()
    assert "Not evaluated" not in page
    assert "<h2>Coverage</h2>" in page and "3 of 9 admitted cells ran" in page


def test_the_cells_a_hunt_probed_are_recorded_and_shown_apart_from_the_configurations(tmp_path):
    # The full profile's default hunt probes many (geometry, n) cells at a few draws each and keeps one case: the
    # run records where every probe landed, and the table shows those cells as "probed", never as "ran".
    from lemmacheck.claims import load_claims
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    claims, _ = load_claims([PLANTED2])
    claim = next(c for c in claims if c.id.endswith("/symmetric"))
    store = Store(tmp_path / "full.db")
    rid = run_claims([claim], store, profile="full", seed=0)
    probes = store.probes(rid, claim.id)
    assert len(probes) >= 10 and all("params" in p for p in probes)
    res = evaluate(store, rid, [claim])[0]
    assert res.probes == probes
    cov = coverage(claim, res.configs, "full", res.probes)
    states = {(r["geometry"], c["n"]): c["state"] for r in cov["datasets"]["rows"] for c in r["cells"]}
    probed_rows = {g for (g, _), s in states.items() if s == "probed"}
    assert len(probed_rows) >= 3  # the stratified hunt visits several geometries, not the first-listed one only
    assert cov["cells"]["probed"] == sum(s == "probed" for s in states.values()) + \
        sum(e["state"] == "probed" for e in cov["edges"])
    assert cov["datasets"]["n"]["symmetric"]["probed_at"]  # sets closed under x -> -x were probed at even n
    # the grid's own configurations still read "ran"; a probe never turns a cell the profile ran into "probed"
    assert all(states[(cov["datasets"]["rows"][0]["geometry"], int(c["n"]))] == "ran"
               for c in claim.profiles["full"].configs)


def test_an_edge_only_the_hunt_probed_gives_its_reason():
    # An edge no configuration reached but a hunt probe did reads "probed" with its reason, which the gap list and
    # the claim page print (the full site's build raised KeyError: 'why' on such an edge).
    from lemmacheck.claims import edges, load_claims
    from lemmacheck.coverage import _edges

    claims, _ = load_claims([PLANTED2])
    claim = next(c for c in claims if c.id.endswith("/symmetric"))
    (name, end, v), *_ = list(edges(claim))
    probe = {"params": {name: v}}
    out = _edges(claim, [], "full", [probe])
    mine = next(e for e in out if e["param"] == name and e["end"] == end)
    assert mine["state"] == "probed" and mine["probes"] == 1 and "1 hunt probe" in mine["why"]
    assert any("probed: 1 hunt probe" in why for _, why in skipped_reasons({"edges": out}))
