"""Edges: a full profile reaches the boundary of every declared parameter, or the claim says why
(`edges_skipped`); claim validation warns otherwise."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from lemmacheck.claims import load_claims, parse_claim
from lemmacheck.errors import ClaimError
from lemmacheck.shards import edge_warnings, missed_edges

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def depth():
    claims, errors = load_claims([ROOT / "tests" / "planted"])
    assert not errors
    return next(c for c in claims if c.id.endswith("depth"))


def test_a_full_profile_that_skips_the_smallest_depth_is_flagged(depth):
    assert missed_edges(depth) == [("L", "min", 1)]  # grid L = [2, 4, 8] of the declared L in [1, 8]
    [warning] = edge_warnings([depth])
    assert "depth.toml" in warning and "L = 1 (min)" in warning and "edges_skipped" in warning


def test_a_stated_reason_or_a_configuration_at_the_edge_clears_it(depth):
    raw = copy.deepcopy(depth.raw)
    raw["edges_skipped"] = {"L": "L = 1 is the shallow network of Fact 3's own proof, checked there"}
    assert missed_edges(parse_claim(raw, depth.source)) == []
    raw = copy.deepcopy(depth.raw)
    raw["profiles"]["full"]["grid"]["L"] = [1, 2, 4, 8]
    assert edge_warnings([parse_claim(raw, depth.source)]) == []


@pytest.mark.parametrize("bad, match", [({"K": "why"}, "'K' is not a declared parameter"),
                                        ({"L": ""}, "non-empty string"), ("L", "expected a table")])
def test_malformed_edges_skipped_names_the_field(depth, bad, match):
    raw = copy.deepcopy(depth.raw)
    raw["edges_skipped"] = bad
    with pytest.raises(ClaimError, match=match):
        parse_claim(raw, depth.source)


# Papers whose full profiles reach every declared edge or say why; a new paper joins when it reaches 0 missed edges.
EDGE_CLEAN_PAPERS = ["zou2018", "du2018", "vershynin2010", "guo2024", "chatterji2021", "allenzhu2018"]


@pytest.mark.parametrize("paper", EDGE_CLEAN_PAPERS)
def test_full_profiles_reach_every_declared_edge_or_say_why(paper):
    claims, errors = load_claims([ROOT / "claims" / paper])
    assert not errors and claims
    assert edge_warnings(claims) == []
