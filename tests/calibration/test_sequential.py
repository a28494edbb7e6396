"""Draws until decided (tests/calibration/sequential.py): a failure rate 1.5 delta at delta = 0.003 reads violated
within the full profile's default budget; a rate 0.8 delta never reads violated, keeps drawing near delta and, when
undecided, states the draws that would decide it.

False alarms: the seeds are fixed, so each test is deterministic. Over seeds, a 1.5 delta run ends without
"violated" with probability below 1e-6 (sequential.miss_at_budget: the budget's fixed-size reading alone), and a
0.8 delta run reads "violated" with probability at most 1.5 alpha = 1.5e-4 (anytime-valid sequence, alpha, plus the
interval at the budget, alpha/2)."""

import pytest

from calibration.sequential import FIRST, SEQ_DELTA, miss_at_budget, run_sequential
from lemmacheck.claims import DRAW_BUDGET
from lemmacheck.summary import failure_text

SEEDS = range(3)


def test_the_budget_has_the_power_it_claims():
    assert miss_at_budget(1.5) < 1e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rate_one_and_a_half_delta_reads_violated_within_the_full_profiles_budget(seed):
    res = run_sequential(1.5, seed)
    (cfg,) = res.configs
    assert res.verdict == "violated" and cfg.violation_ci[0] > SEQ_DELTA
    assert FIRST < cfg.drawn <= DRAW_BUDGET  # the claim's replicates alone could not decide it


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rate_point_eight_delta_never_reads_violated_and_draws_on_near_delta(seed):
    res = run_sequential(0.8, seed)
    (cfg,) = res.configs
    assert res.verdict != "violated"
    # near delta it draws past its replicates: to the budget, or until "holds" is decided
    assert cfg.drawn == DRAW_BUDGET or (res.verdict == "holds" and cfg.drawn > FIRST)
    if res.verdict == "inconclusive":
        assert cfg.draws_needed is not None and f"{cfg.draws_needed:,} draws" in failure_text(res)
