"""Tests for lemmacheck.stats: exact and simulated coverage, scaling fits, verdict branches.

Every random draw uses a fixed seed, so each test is deterministic.  Simulation thresholds are the
nominal rate plus a few binomial standard errors of the Monte-Carlo estimate; each simulation test
is paired with a check that a deliberately wrong method fails the same criterion, so the criterion
has teeth.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from lemmacheck.stats import (
    DEFAULT_ALPHA,
    ScalingFit,
    bernoulli_confidence_sequence,
    clopper_pearson,
    draws_for_quantile,
    ecdf,
    fit_quantile_scaling,
    fit_scaling,
    quantile_interval,
    scaling_verdict,
)

# --------------------------------------------------------------------------- helpers


def _intervals(method, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    bounds = np.array([method(k, n, alpha) for k in range(n + 1)])
    return bounds[:, 0], bounds[:, 1]


def _exact_coverage(lower: np.ndarray, upper: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """P_p(interval(K) contains p) for K ~ Binomial(n, p): the sum of the pmf over covering k."""
    k = np.arange(n + 1)[:, None]
    covers = (lower[:, None] <= p[None, :]) & (p[None, :] <= upper[:, None])
    return (sps.binom.pmf(k, n, p[None, :]) * covers).sum(axis=0)


def _probe_points(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    # Coverage is piecewise smooth and drops just outside an interval endpoint, so probe a dense
    # grid plus both sides of every endpoint: that is where the infimum is approached.
    ends = np.concatenate([lower, upper])
    ends = ends[(ends > 0) & (ends < 1)]
    p = np.concatenate([np.linspace(0.0005, 0.9995, 1000), ends - 1e-9, ends + 1e-9])
    return p[(p > 0) & (p < 1)]


def _wald(k: int, n: int, alpha: float) -> tuple[float, float]:
    """The textbook normal interval, known to under-cover: used to show the checks can fail."""
    p_hat = k / n
    half = sps.norm.ppf(1 - alpha / 2) * math.sqrt(p_hat * (1 - p_hat) / n)
    return p_hat - half, p_hat + half


def _synthetic(exponents=(0.5, -2.0), *, const=3.0, sigma=0.3, reps=30, seed=0):
    """y = const * x1^e1 * x2^e2 * lognormal(0, sigma), on a 5 x 4 grid of (x1, x2)."""
    rng = np.random.default_rng(seed)
    x1, x2 = np.meshgrid([2.0, 4.0, 8.0, 16.0, 32.0], [1.0, 2.0, 4.0, 8.0], indexing="ij")
    log_x = np.log(np.column_stack([x1.ravel(), x2.ravel()]))
    mean = math.log(const) + log_x @ np.asarray(exponents)
    samples = [m + sigma * rng.standard_normal(reps) for m in mean]
    return log_x, samples


def _fit(low, high, names=None) -> ScalingFit:
    low = np.atleast_1d(np.asarray(low, dtype=float))
    high = np.atleast_1d(np.asarray(high, dtype=float))
    names = names or tuple(f"x{i}" for i in range(low.size))
    return ScalingFit(
        names=names,
        slopes=(low + high) / 2,
        intercept=0.0,
        ci_low=low,
        ci_high=high,
        n_configs=10,
        residual_sd=0.1,
    )


# --------------------------------------------------------------------------- DEFAULT_ALPHA


def test_default_alpha_gives_one_percent_family_wise_rate_for_100_tests():
    assert DEFAULT_ALPHA == 1e-4
    assert DEFAULT_ALPHA * 100 <= 0.01  # Bonferroni bound quoted in the docs


# --------------------------------------------------------------------------- Clopper-Pearson


@pytest.mark.parametrize("alpha", [0.05, 0.2])
@pytest.mark.parametrize("n", [10, 50, 200])
def test_clopper_pearson_exact_coverage_at_least_nominal(n, alpha):
    lower, upper = _intervals(clopper_pearson, n, alpha)
    p = _probe_points(lower, upper)
    coverage = _exact_coverage(lower, upper, n, p)
    assert coverage.min() >= 1 - alpha - 1e-9
    # Conservative but not absurdly so: CP's worst case is close to nominal.
    assert coverage.min() <= 1 - alpha / 3


@pytest.mark.parametrize("n", [10, 50, 200])
def test_exact_coverage_check_catches_an_undercovering_interval(n):
    lower, upper = _intervals(_wald, n, 0.05)
    coverage = _exact_coverage(lower, upper, n, _probe_points(lower, upper))
    assert coverage.min() < 0.95 - 0.05


@pytest.mark.parametrize("p", [0.02, 0.3, 0.5])
def test_clopper_pearson_simulated_coverage(p):
    n, alpha, draws = 50, 0.05, 20_000
    lower, upper = _intervals(clopper_pearson, n, alpha)
    k = np.random.default_rng(12345).binomial(n, p, size=draws)
    miss = np.mean((p < lower[k]) | (p > upper[k]))
    # True non-coverage is <= alpha (exact result above); the estimate's standard error is at most
    # sqrt(alpha (1 - alpha) / draws) ~ 0.0015, so alpha + 4 SE ~ 0.056 is a generous margin.
    assert miss <= alpha + 4 * math.sqrt(alpha * (1 - alpha) / draws)
    # And the simulation agrees with the exact coverage to within the same margin.
    exact_miss = 1 - _exact_coverage(lower, upper, n, np.array([p]))[0]
    assert abs(miss - exact_miss) <= 4 * math.sqrt(alpha * (1 - alpha) / draws)


def test_simulated_coverage_check_catches_an_undercovering_interval():
    n, alpha, draws, p = 50, 0.05, 20_000, 0.02
    lower, upper = _intervals(_wald, n, alpha)
    k = np.random.default_rng(12345).binomial(n, p, size=draws)
    miss = np.mean((p < lower[k]) | (p > upper[k]))
    assert miss > alpha + 4 * math.sqrt(alpha * (1 - alpha) / draws)


@pytest.mark.parametrize(
    ("k", "n", "alpha"),
    [(0, 10, 0.05), (3, 10, 0.05), (10, 10, 0.05), (7, 50, 0.2), (1, 200, 0.01), (123, 1000, 1e-4)],
)
def test_clopper_pearson_matches_scipy_binomtest(k, n, alpha):
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="exact")
    # binomtest finds the ends by root-finding on the binomial cdf (relative tolerance ~1e-8); the beta
    # quantiles are more accurate (see the closed-form edge cases below), hence rtol 1e-7.
    np.testing.assert_allclose(clopper_pearson(k, n, alpha), (ref.low, ref.high), rtol=1e-7, atol=0)


def test_clopper_pearson_edge_cases():
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    assert clopper_pearson(0, 0, 0.5) == (0.0, 1.0)
    lo, hi = clopper_pearson(0, 20, 0.05)
    assert lo == 0.0
    assert hi == pytest.approx(1 - 0.025 ** (1 / 20), rel=1e-12)  # closed form for k = 0
    lo, hi = clopper_pearson(20, 20, 0.05)
    assert hi == 1.0
    assert lo == pytest.approx(0.025 ** (1 / 20), rel=1e-12)
    # numpy integers and integral floats are counts too
    assert clopper_pearson(np.int64(3), np.int64(10)) == clopper_pearson(3, 10)
    assert clopper_pearson(3.0, 10.0) == clopper_pearson(3, 10)
    # closed form for k = 1 lower end: P(X >= 1) = 1 - (1-p)^n = alpha/2
    assert clopper_pearson(1, 200, 0.01)[0] == pytest.approx(-math.expm1(math.log1p(-0.005) / 200), rel=1e-13)


def test_clopper_pearson_is_nested_in_alpha_and_covers_mle():
    for k in (0, 1, 5, 9, 10):
        wide = clopper_pearson(k, 10, 1e-4)
        narrow = clopper_pearson(k, 10, 0.2)
        assert wide[0] <= narrow[0] <= k / 10 <= narrow[1] <= wide[1]


@pytest.mark.parametrize("func", [clopper_pearson, bernoulli_confidence_sequence])
@pytest.mark.parametrize(
    ("k", "n", "alpha"),
    [
        (-1, 10, 0.05),
        (11, 10, 0.05),
        (0, -1, 0.05),
        (2.5, 10, 0.05),
        ("3", 10, 0.05),
        (3, 10, 0.0),
        (3, 10, 1.0),
        (3, 10, -0.1),
        (3, 10, 1.5),
        (3, 10, float("nan")),
    ],
)
def test_invalid_arguments_raise(func, k, n, alpha):
    with pytest.raises(ValueError):
        func(k, n, alpha)


# --------------------------------------------------------------------------- confidence sequence


@pytest.mark.parametrize("alpha", [DEFAULT_ALPHA, 0.05, 0.2, 0.5])
def test_confidence_sequence_contains_clopper_pearson(alpha):
    for n in (1, 2, 3, 5, 10, 50, 200):
        for k in range(n + 1):
            cs_lo, cs_hi = bernoulli_confidence_sequence(k, n, alpha)
            cp_lo, cp_hi = clopper_pearson(k, n, alpha)
            assert 0.0 <= cs_lo <= cp_lo <= k / n <= cp_hi <= cs_hi <= 1.0, (k, n)
    # and is genuinely wider once n is not tiny (the price of optional stopping)
    cs_lo, cs_hi = bernoulli_confidence_sequence(50, 200, alpha)
    cp_lo, cp_hi = clopper_pearson(50, 200, alpha)
    assert cs_hi - cs_lo > 1.05 * (cp_hi - cp_lo)


@pytest.mark.parametrize(("k", "n", "alpha"), [(1, 10, 0.05), (5, 10, 0.2), (37, 200, 1e-4), (3, 1000, 0.01)])
def test_confidence_sequence_endpoints_solve_the_mixture_equation(k, n, alpha):
    # The set {p: B(k+1, n-k+1) / (p^k (1-p)^(n-k)) < 1/alpha} is {p: pmf(k; n, p) > alpha/(n+1)};
    # check the endpoints against scipy's binomial pmf, an independent computation.
    lo, hi = bernoulli_confidence_sequence(k, n, alpha)
    level = math.log(alpha / (n + 1))
    assert sps.binom.logpmf(k, n, lo) == pytest.approx(level, abs=1e-8)
    assert sps.binom.logpmf(k, n, hi) == pytest.approx(level, abs=1e-8)
    log_ratio = special.betaln(k + 1, n - k + 1) - k * np.log(lo) - (n - k) * np.log1p(-lo)
    assert log_ratio == pytest.approx(-math.log(alpha), abs=1e-8)


def test_confidence_sequence_edge_cases_and_symmetry():
    assert bernoulli_confidence_sequence(0, 0) == (0.0, 1.0)
    lo, hi = bernoulli_confidence_sequence(0, 100, 0.05)
    assert lo == 0.0
    assert hi == pytest.approx(1 - (0.05 / 101) ** (1 / 100), rel=1e-12)  # (1-p)^n = alpha/(n+1)
    lo, hi = bernoulli_confidence_sequence(100, 100, 0.05)
    assert hi == 1.0
    assert lo == pytest.approx((0.05 / 101) ** (1 / 100), rel=1e-12)
    for k in (0, 1, 7, 30):
        lo, hi = bernoulli_confidence_sequence(k, 30, 0.05)
        mirror_lo, mirror_hi = bernoulli_confidence_sequence(30 - k, 30, 0.05)
        assert lo == pytest.approx(1 - mirror_hi, abs=1e-12)
        assert hi == pytest.approx(1 - mirror_lo, abs=1e-12)


def test_confidence_sequence_shrinks_and_extreme_counts_are_finite():
    widths = []
    for n in (10, 100, 1000, 10**5):
        lo, hi = bernoulli_confidence_sequence(n // 10, n, 0.05)
        widths.append(hi - lo)
    assert all(later < earlier for earlier, later in itertools.pairwise(widths))
    lo, hi = bernoulli_confidence_sequence(1, 10**9, 1e-6)
    assert 0.0 < lo < 1e-9 < hi < 1e-7


def _ever_excludes(bounds, p: float, paths: np.ndarray) -> float:
    """Fraction of paths whose running interval excludes p at some time n = 1..N.

    ``bounds(k, n)`` maps arrays of distinct (k, n) pairs to arrays (lower, upper).
    """
    k_path = np.cumsum(paths, axis=1)
    n_path = np.broadcast_to(np.arange(1, paths.shape[1] + 1), k_path.shape)
    # Evaluate each distinct (k, n) once; the paths share most of them.
    stride = paths.shape[1] + 1
    keys, inverse = np.unique(k_path * stride + n_path, return_inverse=True)
    lower, upper = bounds(keys // stride, keys % stride)
    excluded = (p < lower) | (p > upper)
    return float(excluded[inverse.reshape(k_path.shape)].any(axis=1).mean())


def test_confidence_sequence_time_uniform_coverage():
    p, alpha, n_paths, length = 0.1, 0.05, 2000, 500
    paths = np.random.default_rng(2024).random((n_paths, length)) < p
    margin = 4 * math.sqrt(alpha * (1 - alpha) / n_paths)  # 4 Monte-Carlo SEs of the rate, ~0.02

    def cs_bounds(k, n):
        pairs = zip(k.tolist(), n.tolist())
        return np.array([bernoulli_confidence_sequence(ki, ni, alpha) for ki, ni in pairs]).T

    # Ville's inequality: P(the sequence ever excludes p) <= alpha.
    assert _ever_excludes(cs_bounds, p, paths) <= alpha + margin

    # Teeth: the fixed-n Clopper-Pearson interval, monitored after every draw, is not anytime-valid,
    # and the same criterion rejects it.  (Vectorised beta quantiles: the same numbers as
    # clopper_pearson, checked on a few pairs, but thousands of pairs in milliseconds.)
    def cp_bounds(k, n):
        k, n = k.astype(float), n.astype(float)
        with np.errstate(all="ignore"):
            lower = np.where(k == 0, 0.0, special.betaincinv(k, n - k + 1, alpha / 2))
            upper = np.where(k == n, 1.0, special.betaincinv(k + 1, n - k, 1 - alpha / 2))
        return lower, upper

    for k, n in [(0, 5), (3, 40), (60, 500), (500, 500)]:
        vec = cp_bounds(np.array([k]), np.array([n]))
        assert (vec[0][0], vec[1][0]) == clopper_pearson(k, n, alpha)
    assert _ever_excludes(cp_bounds, p, paths) > alpha + margin


# --------------------------------------------------------------------------- fit_scaling


def test_fit_scaling_recovers_known_exponents():
    log_x, samples = _synthetic()
    fit = fit_scaling(["x1", "x2"], log_x, samples, alpha=0.01)
    assert fit.names == ("x1", "x2")
    assert fit.n_configs == 20
    assert fit.slopes.shape == fit.ci_low.shape == fit.ci_high.shape == (2,)
    truth = np.array([0.5, -2.0])
    assert np.all(fit.ci_low <= truth) and np.all(truth <= fit.ci_high)
    np.testing.assert_allclose(fit.slopes, truth, atol=0.06)
    assert fit.intercept == pytest.approx(math.log(3.0), abs=0.1)
    assert np.all(fit.ci_low <= fit.slopes) and np.all(fit.slopes <= fit.ci_high)
    # Exact power law: residuals are only noise, sd ~ sigma / sqrt(reps).
    assert fit.residual_sd == pytest.approx(0.3 / math.sqrt(30), rel=0.5)


def test_fit_scaling_worst_case_reductions_track_the_tail_not_the_centre():
    """The centre stays flat while the upper tail grows like x^0.5 (and the lower tail shrinks like
    x^-0.5): reduce="mean" sees no trend, "max"/"min" see the tail's, with non-degenerate intervals."""
    rng = np.random.default_rng(5)
    xs = np.array([1.0, 4.0, 16.0, 64.0, 256.0])
    up, down = [], []
    for x in xs:
        z = rng.standard_normal(200)
        up.append(np.where(z > 0, z * math.log(x) * 0.5 / 2.6, 0.0))  # spread grows with log x
        down.append(-up[-1])
    mean = fit_scaling(["x"], np.log(xs), up, alpha=0.01)
    top = fit_scaling(["x"], np.log(xs), up, alpha=0.01, reduce="max")
    bottom = fit_scaling(["x"], np.log(xs), down, alpha=0.01, reduce="min")
    assert abs(mean.slopes[0]) < 0.25 < top.slopes[0]
    assert bottom.slopes[0] == pytest.approx(-top.slopes[0], abs=0.15)
    assert top.ci_low[0] < top.ci_high[0]  # resampling the extreme still gives an interval
    with pytest.raises(ValueError, match="reduce"):
        fit_scaling(["x"], np.log(xs), up, reduce="median")
    # the 0.95 quantile follows the tail too, and equals numpy's quantile per configuration
    q95 = fit_scaling(["x"], np.log(xs), up, alpha=0.01, reduce="quantile", levels=[0.95] * len(xs))
    y = np.array([np.quantile(u, 0.95) for u in up])
    slope = np.polyfit(np.log(xs), y, 1)[0]
    assert q95.slopes[0] == pytest.approx(slope, rel=1e-9) and q95.slopes[0] > 0.25
    with pytest.raises(ValueError, match="one level"):
        fit_scaling(["x"], np.log(xs), up, reduce="quantile")


def test_fit_scaling_interval_width_matches_ols_standard_error():
    # Tightness: the bootstrap interval should be as wide as the textbook OLS interval,
    # 2 z SE with SE = sigma/sqrt(reps) * sqrt(diag((X'X)^-1)): not inflated, not collapsed.
    # Expected ratio ~0.98 (plug-in variance (m-1)/m) up to the noise in the sample sd (~3%) and in
    # the bootstrap quantiles; an interval too wide by sqrt(2) gives ~1.35 and is caught.
    log_x, samples = _synthetic()
    fit = fit_scaling(["x1", "x2"], log_x, samples, alpha=0.1, n_boot=2000)
    design = np.column_stack([np.ones(len(log_x)), log_x])
    se = 0.3 / math.sqrt(30) * np.sqrt(np.diag(np.linalg.inv(design.T @ design)))[1:]
    ratio = (fit.ci_high - fit.ci_low) / (2 * sps.norm.ppf(0.95) * se)
    assert np.all((ratio > 0.8) & (ratio < 1.15)), ratio


def test_fit_scaling_bootstrap_calibration():
    # Over 100 independent data sets, nominal-80% intervals should contain the truth about 80% of the
    # time; with SE 0.04 the band [0.65, 0.93] catches gross miscalibration (e.g. unstratified or
    # mis-scaled resampling) without being fragile.
    hits = np.zeros(2)
    for rep in range(100):
        log_x, samples = _synthetic(sigma=0.5, reps=10, seed=1000 + rep)
        fit = fit_scaling(["x1", "x2"], log_x, samples, n_boot=200, alpha=0.2, seed=rep)
        hits += (fit.ci_low <= [0.5, -2.0]) & ([0.5, -2.0] <= fit.ci_high)
    rate = hits / 100
    assert np.all((rate >= 0.65) & (rate <= 0.93)), rate


def test_fit_scaling_is_deterministic_and_seeded():
    log_x, samples = _synthetic(seed=7)
    a = fit_scaling(["x1", "x2"], log_x, samples, seed=3)
    b = fit_scaling(["x1", "x2"], log_x, samples, seed=3)
    assert a.names == b.names and a.n_configs == b.n_configs
    for name in ("slopes", "intercept", "ci_low", "ci_high", "residual_sd"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name  # bit-identical
    c = fit_scaling(["x1", "x2"], log_x, samples, seed=4)
    assert np.array_equal(a.slopes, c.slopes)  # the point estimate does not depend on the seed
    assert not np.array_equal(a.ci_low, c.ci_low)  # the bootstrap does


def test_fit_scaling_result_is_immutable():
    log_x, samples = _synthetic()
    fit = fit_scaling(["x1", "x2"], log_x, samples, n_boot=20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.intercept = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        fit.slopes[0] = 1.0


def test_fit_scaling_single_regressor_accepts_1d_log_x():
    log_x = np.log([1.0, 2.0, 4.0, 8.0])
    samples = [np.array([2.0 * lx - 0.01, 2.0 * lx + 0.01]) for lx in log_x]
    fit = fit_scaling(["n"], log_x, samples, n_boot=50)
    assert fit.slopes == pytest.approx([2.0])
    assert fit.ci_low[0] == pytest.approx(2.0, abs=0.02) and fit.ci_high[0] == pytest.approx(2.0, abs=0.02)


def test_fit_scaling_exact_fit_has_nan_residual_sd():
    log_x = np.array([[0.0], [1.0]])
    fit = fit_scaling(["n"], log_x, [np.array([1.0, 1.2]), np.array([2.0, 2.2])], n_boot=10)
    assert fit.slopes[0] == pytest.approx(1.0)
    assert math.isnan(fit.residual_sd)


def test_fit_scaling_rejects_constant_column_by_name():
    log_x, samples = _synthetic()
    log_x = np.column_stack([log_x, np.full(len(log_x), math.log(5.0))])
    with pytest.raises(ValueError, match=r"'depth'.*constant"):
        fit_scaling(["x1", "x2", "depth"], log_x, samples)


def test_fit_scaling_rejects_too_few_configurations():
    log_x = np.log([[2.0, 1.0], [4.0, 3.0]])  # J = 2 = P
    with pytest.raises(ValueError, match="too few"):
        fit_scaling(["a", "b"], log_x, [np.zeros(3), np.zeros(3)])


@pytest.mark.parametrize(
    "mutate",
    [
        lambda x, s, nm: (np.column_stack([x, 2 * x[:, 0]]), s, [*nm, "twice_x1"]),  # collinear
        lambda x, s, nm: (x, s[:-1], nm),  # samples/rows mismatch
        lambda x, s, nm: (x, s, nm[:1]),  # names/columns mismatch
        lambda x, s, nm: (x, [np.array([])] + s[1:], nm),  # empty configuration
        lambda x, s, nm: (x, [np.array([0.0, -np.inf])] + s[1:], nm),  # log of zero
        lambda x, s, nm: (np.where(np.arange(x.size).reshape(x.shape) == 0, np.nan, x), s, nm),
    ],
)
def test_fit_scaling_rejects_bad_inputs(mutate):
    # (the collinear case must not fall through to lstsq's silent minimum-norm solution)
    log_x, samples = _synthetic()
    x, s, nm = mutate(log_x, list(samples), ["x1", "x2"])
    with pytest.raises(ValueError):
        fit_scaling(nm, x, s)


# --------------------------------------------------------------------------- scaling_verdict


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        ([0.3], [0.6], "violated"),  # implied constant grows significantly
        ([-0.2], [0.05], "holds"),
        ([-0.2], [0.1], "holds"),  # ci_high == tolerance still holds
        ([0.1], [0.4], "inconclusive"),  # ci_low == tolerance is not a violation
        ([-0.05], [0.3], "inconclusive"),
        ([-0.1, 0.2], [0.05, 0.5], "violated"),  # any exponent violating is enough
        ([-0.1, -0.1], [0.05, 0.2], "inconclusive"),  # holds needs every exponent
        ([-5.0], [-3.0], "holds"),  # shrinking implied constant is fine for an upper bound
        ([np.nan], [np.nan], "inconclusive"),
    ],
)
def test_scaling_verdict_upper_bound(low, high, expected):
    assert scaling_verdict(_fit(low, high), relation="<=", tolerance=0.1) == expected


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        ([-0.6], [-0.3], "violated"),
        ([-0.05], [0.2], "holds"),
        ([-0.1], [0.2], "holds"),  # ci_low == -tolerance still holds
        ([-0.4], [-0.1], "inconclusive"),  # ci_high == -tolerance is not a violation
        ([-0.3], [0.05], "inconclusive"),
        ([0.0, -0.5], [0.1, -0.2], "violated"),
        ([3.0], [5.0], "holds"),
        ([np.nan], [np.nan], "inconclusive"),
    ],
)
def test_scaling_verdict_lower_bound(low, high, expected):
    assert scaling_verdict(_fit(low, high), relation=">=", tolerance=0.1) == expected


def test_scaling_verdict_tolerance_and_bad_relation():
    fit = _fit([0.15], [0.3])
    assert scaling_verdict(fit, relation="<=", tolerance=0.1) == "violated"
    assert scaling_verdict(fit, relation="<=", tolerance=0.3) == "holds"
    for bad in ("<", "=<", "le", ""):
        with pytest.raises(ValueError):
            scaling_verdict(fit, relation=bad)
    with pytest.raises(ValueError):
        scaling_verdict(fit, relation="<=", tolerance=-0.1)


def test_scaling_verdict_end_to_end():
    # Implied constant of quantity / x1^0.5: grows like x1^0.5 if the true shape is x1^1.
    log_x, samples = _synthetic(exponents=(0.5, 0.0), sigma=0.2)
    fit = fit_scaling(["x1", "x2"], log_x, samples, alpha=2 * DEFAULT_ALPHA)
    assert scaling_verdict(fit, relation="<=") == "violated"
    assert scaling_verdict(fit, relation=">=") == "holds"
    log_x, samples = _synthetic(exponents=(0.0, 0.0), sigma=0.2)
    fit = fit_scaling(["x1", "x2"], log_x, samples)
    assert scaling_verdict(fit, relation="<=") == "holds"
    assert scaling_verdict(fit, relation=">=") == "holds"


# --------------------------------------------------------------------------- ecdf


def test_ecdf_sorts_finite_values_and_drops_the_rest():
    x, prob = ecdf(np.array([3.0, np.nan, 1.0, np.inf, 2.0, -np.inf, 2.0]))
    np.testing.assert_array_equal(x, [1.0, 2.0, 2.0, 3.0])
    np.testing.assert_array_equal(prob, [0.25, 0.5, 0.75, 1.0])
    x, prob = ecdf(np.array([[0.5, 0.1], [0.3, 0.2]]))  # any shape is flattened
    np.testing.assert_array_equal(x, [0.1, 0.2, 0.3, 0.5])
    assert prob[-1] == 1.0


def test_ecdf_empty():
    for values in (np.array([]), np.array([np.nan])):
        x, prob = ecdf(values)
        assert x.shape == prob.shape == (0,)


# --------------------------------------------------------------------------- quantile intervals


def test_quantile_interval_covers_at_least_nominally_by_simulation():
    rng = np.random.default_rng(5)
    q, alpha, n, reps = 0.9, 0.05, 60, 3000
    truth = sps.norm.ppf(q)
    hits = sum(lo <= truth <= hi for lo, hi in (quantile_interval(rng.standard_normal(n), q, alpha)
                                                  for _ in range(reps)))
    assert hits / reps >= 1 - alpha - 3 * math.sqrt(alpha * (1 - alpha) / reps)


def test_quantile_interval_ends_are_infinite_below_the_minimum_draw_count():
    for q, alpha in ((0.5, 1e-3), (0.9, 2.5e-4), (0.99, 0.01)):
        n = draws_for_quantile(q, alpha)
        x = np.arange(n, dtype=float)
        assert all(map(math.isfinite, quantile_interval(x, q, alpha)))
        assert not all(map(math.isfinite, quantile_interval(x[:-1], q, alpha)))


def test_fit_quantile_scaling_slope_interval_covers_the_true_quantile_slope():
    """The box construction covers the slope of the true quantiles with probability >= 1 - alpha (simulated
    with a heavy right tail, where a bootstrap of an extreme under-covers)."""
    rng = np.random.default_rng(11)
    log_m = np.log([64.0, 256.0, 1024.0, 4096.0])
    alpha, reps, q = 0.05, 300, 0.9
    covered = 0
    for _ in range(reps):
        samples = [0.2 * lm + rng.standard_t(3, 120) for lm in log_m]  # quantile slope exactly 0.2
        fit, lo, hi = fit_quantile_scaling(["m"], log_m, samples, [q] * 4, alpha)
        covered += fit.ci_low[0] <= 0.2 <= fit.ci_high[0]
        assert np.all(lo <= hi)
    assert covered / reps >= 1 - alpha


def test_draws_to_decide_is_where_the_sequence_first_excludes_delta_at_the_current_rate():
    from lemmacheck.stats import draws_to_decide

    for k, n, delta in [(25, 200, 0.1), (3, 200, 0.1), (0, 256, 0.003), (18, 4096, 0.003)]:
        need = draws_to_decide(k, n, delta)
        rate = k / n

        def decided(m, rate=rate, delta=delta):
            lo, hi = bernoulli_confidence_sequence(round(m * rate), m)
            return lo > delta if rate > delta else hi < delta

        assert need > n and decided(need) and not decided(int(need * 0.99))  # within the stated 0.1%..1%
    assert draws_to_decide(20, 200, 0.1) is None  # the estimate is delta: no number of draws decides it
    assert draws_to_decide(60, 100, 0.1) == 100  # already decided


def test_top_window_is_the_top_decade_with_at_least_two_values():
    from lemmacheck.stats import top_window

    log_h = np.log([1.0, 2, 4, 16, 64, 256, 512])
    assert top_window(log_h).tolist() == [False, False, False, True, True, True, True]  # 16..512: 1.5 decades
    # 64..512 spans only 0.9 decades: the window reaches down to the next value, 16
    assert top_window(np.log([64.0, 512, 4096, 32768])).tolist() == [False, True, True, True]
    assert top_window(np.log([64.0, 128])).tolist() == [True, True]  # a sweep under a decade: all of it
    assert top_window(np.log([8.0, 8, 100, 100])).tolist() == [True] * 4  # repeats (other parameters) count once


def test_box_slope_interval_bounds_the_slope_of_any_values_inside_the_box():
    """The LS slope is linear in y, so its extremes over the box are attained at corners: no value inside the box
    gives a slope outside [low, high], and the bound is attained."""
    from lemmacheck.stats import box_slope_interval

    rng = np.random.default_rng(3)
    x = np.log([16.0, 64, 256, 512])
    lo, hi = np.array([0.1, 0.3, 0.35, 0.36]), np.array([0.2, 0.35, 0.4, 0.45])
    slope, low, high = box_slope_interval(x, (lo + hi) / 2, lo, hi, 0)
    assert low < slope < high
    for _ in range(200):
        y = lo + rng.random(4) * (hi - lo)
        assert low - 1e-12 <= np.polyfit(x, y, 1)[0] <= high + 1e-12
    w = x - x.mean()
    assert np.polyfit(x, np.where(w > 0, hi, lo), 1)[0] == pytest.approx(high)
    assert all(math.isnan(v) for v in box_slope_interval(np.zeros(3), lo[:3], lo[:3], hi[:3], 0))  # singular
