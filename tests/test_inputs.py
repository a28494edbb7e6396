"""Input generators: every geometry meets its separation, keeps its planted structure, and fails loudly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from lemmacheck.context import Context
from lemmacheck.errors import EstimatorError
from lemmacheck.inputs import (
    GEOMETRIES,
    LABELS,
    all_patterns,
    chord_angle,
    draw_labels,
    label_pattern,
    min_separation,
    rademacher,
    simplex_vertices,
    unit_sphere,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("geometry", ["random", "close-pair", "clustered", "antipodal-pairs"])
def test_points_are_unit_and_separated(geometry):
    X = unit_sphere(_gen(), 50, n=10, d=5, separation=0.1, geometry=geometry)
    assert X.shape == (50, 10, 5)
    torch.testing.assert_close(X.norm(dim=-1), torch.ones(50, 10, dtype=X.dtype), rtol=0, atol=1e-12)
    assert bool((min_separation(X) >= 0.1 * (1 - 1e-6)).all())


def test_close_pair_is_planted_at_the_separation():
    X = unit_sphere(_gen(), 30, n=6, d=4, separation=0.05, geometry="close-pair")
    torch.testing.assert_close((X[:, 0] - X[:, 1]).norm(dim=-1), torch.full((30,), 0.05, dtype=X.dtype))


def test_antipodal_pairs_are_antipodal():
    X = unit_sphere(_gen(), 8, n=6, d=3, geometry="antipodal-pairs")
    torch.testing.assert_close(X[:, 1::2], -X[:, 0::2])


@pytest.mark.parametrize("geometry", ["close-pair", "clustered"])
def test_crowded_low_dimensional_configurations_are_redrawn_not_rejected(geometry):
    # d = 2, n = 11, phi = 0.032: the other points of a close-pair draw often land within phi of each other
    # (this configuration, drawn by Hypothesis in a full run, used to fail with EstimatorError).
    X = unit_sphere(_gen(3), 200, n=11, d=2, separation=0.032, geometry=geometry)
    assert bool((min_separation(X) >= 0.032 * (1 - 1e-6)).all())


def test_redraw_keeps_unaffected_replicates_deterministic():
    a = unit_sphere(_gen(7), 40, n=11, d=2, separation=0.032, geometry="close-pair")
    b = unit_sphere(_gen(7), 40, n=11, d=2, separation=0.032, geometry="close-pair")
    assert torch.equal(a, b)


def test_impossible_separation_names_the_configuration():
    # 13 points on the circle are at best 2 sin(pi/13) ~ 0.478 apart, so 0.6 cannot be met.
    with pytest.raises(EstimatorError, match=r"n=13 points on S\^1 with separation 0.6"):
        unit_sphere(_gen(), 4, n=13, d=2, separation=0.6, geometry="random")


def test_random_geometry_is_uniform_on_the_circle():
    # Angles of iid uniform points on S^1 are uniform: a coarse chi-square check (false-alarm rate 1e-6).
    X = unit_sphere(_gen(11), 4000, n=1, d=2)
    angle = torch.atan2(X[:, 0, 1], X[:, 0, 0]).numpy()
    counts, _ = np.histogram(angle, bins=16, range=(-math.pi, math.pi))
    assert stats.chisquare(counts).pvalue > 1e-6


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_every_admitted_n_keeps_unit_norm_and_separation(geometry):
    # Every n from 1 to 13 (not only powers of two) in a low and a high dimension: either the family admits
    # the configuration and every dataset keeps unit norm and separation, or it refuses with its reason.
    admitted = 0
    for d in (2, 3, 9):
        for n in range(1, 14):
            why = GEOMETRIES[geometry].admits(n, d, 0.2)
            if why:
                with pytest.raises(EstimatorError, match=f"geometry '{geometry}' cannot place n={n}"):
                    unit_sphere(_gen(n), 3, n=n, d=d, separation=0.2, geometry=geometry)
                continue
            try:
                X = unit_sphere(_gen(n), 3, n=n, d=d, separation=0.2, geometry=geometry)
            except EstimatorError as e:  # iid families redraw a bounded number of times in crowded circles
                assert not GEOMETRIES[geometry].deterministic_shape and d == 2, (geometry, n, d, e)
                assert f"n={n} points on S^1 with separation 0.2" in str(e)
                continue
            assert X.shape == (3, n, d)
            torch.testing.assert_close(X.norm(dim=-1), torch.ones(3, n, dtype=X.dtype), rtol=0, atol=1e-12)
            assert bool((min_separation(X) >= 0.2 * (1 - 1e-12)).all()), (geometry, n, d)
            admitted += 1
    assert admitted >= 13  # each family admits every n at least in one of these dimensions


def test_polygon_is_regular_in_a_random_plane():
    X = unit_sphere(_gen(), 4, n=7, d=5, separation=0.5, geometry="polygon")
    side = (X[:, 1:] - X[:, :-1]).norm(dim=-1)
    torch.testing.assert_close(side, torch.full_like(side, 2 * math.sin(math.pi / 7)))
    assert torch.linalg.matrix_rank(X[0]).item() == 2
    assert not torch.allclose(X[0], X[1])  # a different random plane per replicate


def test_simplex_vertices_are_equidistant():
    V = simplex_vertices(5)
    D = torch.cdist(V, V) + torch.eye(5, dtype=V.dtype) * math.sqrt(10 / 4)
    torch.testing.assert_close(D, torch.full((5, 5), math.sqrt(10 / 4), dtype=V.dtype))
    X = unit_sphere(_gen(), 2, n=5, d=4, geometry="simplex")
    torch.testing.assert_close(X.sum(1), torch.zeros(2, 4, dtype=X.dtype), rtol=0, atol=1e-12)


def test_cross_polytope_is_orthogonal_or_antipodal():
    X = unit_sphere(_gen(), 2, n=5, d=3, geometry="cross-polytope")
    G = (X[0] @ X[0].T).round(decimals=9)
    assert set(G.flatten().tolist()) <= {0.0, 1.0, -1.0}


def test_arc_and_duplicated_directions_sit_at_the_separation_limit():
    X = unit_sphere(_gen(), 3, n=11, d=4, separation=0.3, geometry="arc")
    torch.testing.assert_close((X[:, 1:] - X[:, :-1]).norm(dim=-1), torch.full((3, 10), 0.3, dtype=X.dtype))
    torch.testing.assert_close(min_separation(X), torch.full((3,), 0.3, dtype=X.dtype))
    X = unit_sphere(_gen(), 5, n=7, d=6, separation=0.1, geometry="duplicated-directions")
    torch.testing.assert_close((X[:, 1::2] - X[:, 0:6:2]).norm(dim=-1), torch.full((5, 3), 0.1, dtype=X.dtype))


def test_many_points_at_a_small_separation_limit_are_placed():
    """32 points exactly 0.02 apart on an arc: the separation check measures distances directly (cdist's
    matrix-product form, used above 25 points, read them 3e-13 too close and refused the dataset)."""
    X = unit_sphere(_gen(), 2, n=32, d=2, separation=0.02, geometry="arc")
    assert float((min_separation(X) - 0.02).abs().max()) < 1e-15


def test_nearly_collinear_points_lie_in_a_narrow_cap():
    X = unit_sphere(_gen(), 3, n=12, d=4, separation=0.05, geometry="nearly-collinear")
    c = X.mean(1, keepdim=True)
    cos = (X * c / c.norm(dim=-1, keepdim=True)).sum(-1)
    assert bool((cos > math.cos(3 * chord_angle(0.05))).all())
    torch.testing.assert_close(min_separation(X), torch.full((3,), 0.05, dtype=X.dtype))


def test_nearly_orthogonal_points_are_nearly_orthogonal():
    X = unit_sphere(_gen(), 3, n=6, d=64, geometry="nearly-orthogonal")
    G = X @ X.transpose(1, 2) - torch.eye(6, dtype=X.dtype)
    assert float(G.abs().max()) < 0.1


def test_lattice_uses_the_simplest_directions_first():
    X = unit_sphere(_gen(), 1, n=4, d=2, geometry="lattice")
    G = (X[0] @ X[0].T).abs()
    # (1,0), (0,1), (1,1), (1,-1): two orthogonal pairs, and 45 degrees between the pairs.
    assert sorted(round(v, 6) for v in G[torch.triu_indices(4, 4, 1).unbind()].tolist()) == \
        [0.0, 0.0, 0.707107, 0.707107, 0.707107, 0.707107]


def test_fixed_configurations_that_cannot_meet_the_separation_are_refused():
    with pytest.raises(EstimatorError, match="regular 13-gon"):
        unit_sphere(_gen(), 2, n=13, d=3, separation=0.6, geometry="polygon")
    with pytest.raises(EstimatorError, match="n <= d"):
        unit_sphere(_gen(), 2, n=5, d=4, geometry="nearly-orthogonal")


# ---------------------------------------------------------------------------------------------- labels


def test_default_labels_are_the_rademacher_draws_of_before():
    ctx = Context("c", {"n": 6, "d": 3}, 5, _gen(4))
    ref = rademacher(_gen(4), (5, 6))
    assert torch.equal(ctx.labels(6), ref)


def test_constant_and_explicit_patterns():
    ctx = Context("c", {}, 3, _gen(), inputs_spec={"labels": "constant"})
    assert torch.equal(ctx.labels(4), torch.ones(3, 4, dtype=torch.float64))
    assert label_pattern("+-+") == [1, -1, 1] and label_pattern([1, -1]) == [1, -1]
    y = draw_labels(_gen(), "+--", 2, 3)
    assert torch.equal(y, torch.tensor([[1.0, -1, -1]] * 2, dtype=torch.float64))
    with pytest.raises(EstimatorError, match="2 entries for n=3"):
        draw_labels(_gen(), "+-", 2, 3)
    with pytest.raises(ValueError, match="one of"):
        label_pattern("+x")


def test_by_cluster_labels_follow_the_clusters():
    ctx = Context("c", {"n": 8, "d": 6}, 10, _gen(1),
                  inputs_spec={"kind": "unit-sphere", "separation": 0.01, "geometry": "clustered",
                               "labels": "by-cluster"})
    X = ctx.inputs()
    y = ctx.labels(8)  # uses the datasets drawn just before
    # "clustered" alternates the two clusters: even points in one, odd in the other.
    assert bool((y[:, 0::2] == y[:, :1]).all()) and bool((y[:, 1::2] == -y[:, :1]).all())
    assert torch.equal(ctx.labels(8, X), y)


def test_half_space_labels_are_linearly_separable():
    X = unit_sphere(_gen(), 20, n=9, d=3)
    y = draw_labels(_gen(2), "half-space", 20, 9, X)
    # Certificate: a perceptron through the origin separates every replicate (it terminates on separable data).
    for r in range(20):
        w = torch.zeros(3, dtype=X.dtype)
        for _ in range(10_000):
            wrong = (y[r] * (X[r] @ w) <= 0).nonzero()
            if len(wrong) == 0:
                break
            w = w + y[r, wrong[0, 0]] * X[r, wrong[0, 0]]
        assert bool((y[r] * (X[r] @ w) > 0).all())
    with pytest.raises(EstimatorError, match="depend on the data"):
        draw_labels(_gen(), "half-space", 2, 3)


def test_every_label_pattern_of_small_n():
    P = all_patterns(4)
    assert len(P) == 8 and len({tuple(p) for p in P}) == 8 and all(p[0] == 1 for p in P)
    assert set(LABELS) == {"rademacher", "constant", "by-cluster", "half-space", "parity", "null-vector"}


@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_geometry_places_unit_points_on_the_line_or_refuses(n):
    """d = 1 (inputs on S^0 = {-1, +1}) is the smallest dimension a statement admits: a geometry that moves a point
    along a tangent has none there and must refuse (its `admits`), never return NaN rows (a hunted dataset with a
    NaN row stopped a full profile's hunt)."""
    from lemmacheck.errors import EstimatorError
    from lemmacheck.inputs import GEOMETRIES, unit_sphere

    for name, geo in GEOMETRIES.items():
        if geo.admits(n, 1, 0.0) is not None:
            continue
        try:
            X = unit_sphere(torch.Generator().manual_seed(0), 3, n=n, d=1, separation=0.0, geometry=name)
        except EstimatorError:  # a clear refusal is fine too
            continue
        assert torch.isfinite(X).all() and torch.allclose(X.abs(), torch.ones_like(X)), name
