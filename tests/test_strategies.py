"""Public Hypothesis strategies: every dataset keeps unit norm and separation, labels cover every pattern of
small n, and shrinking ends at simple configurations."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lemmacheck import strategies as S
from lemmacheck.inputs import min_separation


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 7), st.integers(2, 6), st.sampled_from([0.0, 0.1, 0.4]), st.data())
def test_datasets_keep_the_assumptions(n, d, sep, data):
    origin, X = data.draw(S.datasets(n, d, sep))
    assert X.shape == (n, d)
    torch.testing.assert_close(X.norm(dim=-1), torch.ones(n, dtype=X.dtype), rtol=0, atol=1e-12)
    if n > 1:
        assert float(min_separation(X[None])[0]) >= sep * (1 - 1e-9), origin


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_structured_datasets_name_their_geometry(data):
    name, X = data.draw(S.structured_datasets(4, 3, 0.2))
    assert name in S.GEOMETRY_ORDER and X.shape == (4, 3)


def test_every_labelling_of_small_n_is_reachable():
    seen = set()

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(S.labelings(4))
    def collect(y):
        assert len(y) == 4 and set(y) <= {1, -1}
        seen.add(tuple(y))

    collect()
    assert len(seen) == 8  # all 2^3 patterns up to a global sign


def test_family_labelings_follow_the_data():
    X = torch.tensor([[1.0, 0.0], [0.9, 0.43588989435406733], [-1.0, 0.0]], dtype=torch.float64)

    @settings(max_examples=50, deadline=None, derandomize=True)
    @given(S.labelings(3, X))
    def check(y):
        assert len(y) == 3 and set(y) <= {1, -1}

    check()


def test_simplest_form_rotates_to_principal_axes():
    c, s = 0.6, 0.8
    rotated = [[c, s, 0.0], [-s, c, 0.0], [-c, -s, 0.0]]
    simple = S.simplest_form(rotated, 0.1)
    assert simple is not None
    assert sorted(abs(v) for row in simple for v in row).count(1.0) >= 2
    torch.testing.assert_close(torch.cdist(torch.tensor(simple), torch.tensor(simple)),
                               torch.cdist(torch.tensor(rotated), torch.tensor(rotated)))
