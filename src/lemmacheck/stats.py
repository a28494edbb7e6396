"""Statistics for turning Monte-Carlo draws into verdicts.

Two kinds of question come up:

* *Violation rates.*  A claim "with probability at least 1 - delta" is checked by counting the
  configurations/draws that violate it: ``k`` violations out of ``n``.  :func:`clopper_pearson` gives
  an exact fixed-``n`` interval; :func:`bernoulli_confidence_sequence` gives an interval that stays
  valid when a runner looks after every draw and stops as soon as it can decide.
* *Scaling claims.*  "quantity = O(width^a depth^b)" is checked by regressing the log of the implied
  constant on the logs of the parameters (:func:`fit_scaling`) and asking whether the fitted
  exponents are significantly positive (:func:`scaling_verdict`).

Error control.  Every interval here is two-sided at level ``1 - alpha``.  The default per-test
``alpha`` is :data:`DEFAULT_ALPHA` = 1e-4.  The suite runs hundreds of tests against claims that are
(mostly) true, and a correct claim must not fail CI by chance.  By the union bound (Bonferroni),
whatever the dependence between tests,

    P(any false alarm among m tests) <= m * DEFAULT_ALPHA,

so 100 tests give at most a 1% chance of any false alarm in a whole run, 1000 tests at most 10%.
Runners that need a tighter family-wise rate should divide their budget by the number of tests.

Pure numpy/scipy: no torch here, so this module can be used (and tested) without a GPU stack. scipy's
special functions, optimize and stats load where a function first needs them (scipy.stats and scipy.optimize
alone cost a second or more of start-up): a one-claim `repro` or `show` pays only for what it computes.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_ALPHA",
    "ScalingFit",
    "bernoulli_confidence_sequence",
    "clopper_pearson",
    "ecdf",
    "fit_scaling",
    "scaling_verdict",
]

DEFAULT_ALPHA: float = 1e-4
"""Per-test two-sided error rate.

Family-wise control by Bonferroni: P(any false alarm) <= DEFAULT_ALPHA * number_of_tests, e.g. below 1%
for 100 tests, with no assumption on how the tests depend on each other.
"""


# --------------------------------------------------------------------------- argument checks


def _as_count(value: object, name: str) -> int:
    # Counts often arrive as numpy integers or as float sums of indicator arrays; accept any
    # integral real, but never silently truncate 2.5 to 2 or parse a string.
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        pass
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    raise ValueError(f"{name} must be an integer, got {value!r}")


def _check_counts(k: object, n: object) -> tuple[int, int]:
    k_int, n_int = _as_count(k, "k"), _as_count(n, "n")
    if n_int < 0:
        raise ValueError(f"n must be >= 0, got {n_int}")
    if not 0 <= k_int <= n_int:
        raise ValueError(f"k must satisfy 0 <= k <= n, got k={k_int}, n={n_int}")
    return k_int, n_int


def _check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    # `not (0 < alpha < 1)` also rejects NaN.
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return alpha


# --------------------------------------------------------------------------- violation rates


def clopper_pearson(k: int, n: int, alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """Exact two-sided ``(1 - alpha)`` Clopper-Pearson interval for a binomial proportion.

    ``k`` successes in ``n`` trials.  The interval inverts two one-sided binomial tests at
    ``alpha / 2`` each, so its coverage is at least ``1 - alpha`` for every true ``p`` and ``n``
    (conservative, never anti-conservative).  Edge cases: ``n == 0`` gives ``(0.0, 1.0)``; ``k == 0``
    gives lower bound ``0.0``; ``k == n`` gives upper bound ``1.0``.

    Raises ``ValueError`` for ``k < 0``, ``k > n``, non-integral counts, or ``alpha`` not in (0, 1).
    """
    k, n = _check_counts(k, n)
    alpha = _check_alpha(alpha)
    if n == 0:
        return 0.0, 1.0
    # Beta quantiles are the standard closed form of the inverted binomial tails (scipy.stats.beta.ppf's numbers,
    # through scipy.special: tests/test_startup.py checks them equal).
    return _clopper_pearson_fast(k, n, alpha)


def _softplus(t: float) -> float:
    # log(1 + e^t) without overflow; in logit coordinates -log(p) = softplus(-t), -log(1-p) = softplus(t).
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


def _expit(t: float) -> float:
    from scipy import special

    return float(special.expit(t))


def bernoulli_confidence_sequence(k: int, n: int, alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """Anytime-valid ``(1 - alpha)`` confidence sequence for a Bernoulli mean.

    ``k`` successes in the first ``n`` observations.  Construction: Robbins' mixture martingale with a
    uniform Beta(1, 1) mixing prior (Robbins 1970, "Statistical methods related to the law of the
    iterated logarithm"; see also Howard et al. 2021, "Time-uniform, nonparametric, nonasymptotic
    confidence sequences").  For each candidate ``p``,

        M_n(p) = B(k + 1, n - k + 1) / (p^k (1 - p)^(n - k))

    is the ratio of the Beta(1,1)-mixture likelihood to the likelihood under ``p``; under the true
    ``p`` it is a non-negative martingale with ``M_0 = 1``.  Ville's inequality gives
    ``P(exists n: M_n(p) >= 1/alpha) <= alpha``, so the sets ``{p : M_n(p) < 1/alpha}`` cover the true
    ``p`` at every ``n`` simultaneously, with probability at least ``1 - alpha``.  A runner may
    therefore look after every draw and stop as soon as the interval excludes its threshold, without
    inflating the error rate (a fixed-``n`` interval checked repeatedly would).

    Equivalently the set is ``{p : binom.pmf(k; n, p) > alpha / (n + 1)}``: an interval, because the
    log-likelihood is concave in ``p``.  A tail-sum bound shows it contains the Clopper-Pearson
    interval at the same ``alpha`` (with equality at ``n == 1``), so it is the wider of the two: the
    price of optional stopping is about a ``log(n)`` term in the width.  The returned interval is the
    hull of the two, which only matters at floating-point ties and keeps containment exact.

    ``n == 0`` gives ``(0.0, 1.0)``.  Raises ``ValueError`` like :func:`clopper_pearson`.
    """
    k, n = _check_counts(k, n)
    alpha = _check_alpha(alpha)
    if n == 0:
        return 0.0, 1.0

    log_level = math.log(alpha / (n + 1))  # boundary: log pmf(k; n, p) == log_level

    if k == 0:
        # (1-p)^n = alpha/(n+1) in closed form; expm1 keeps precision when the endpoint is tiny.
        lower, upper = 0.0, -math.expm1(log_level / n)
    elif k == n:
        lower, upper = math.exp(log_level / n), 1.0
    else:
        from scipy import special

        log_beta = float(special.betaln(k + 1, n - k + 1))
        log_inv_alpha = -math.log(alpha)

        def log_excess(t: float) -> float:
            # log M_n(p) - log(1/alpha) at p = expit(t); negative inside the sequence.  Working in
            # logit coordinates gives relative precision for endpoints near 0 or 1.
            return log_beta + k * _softplus(-t) + (n - k) * _softplus(t) - log_inv_alpha

        t_hat = math.log(k / (n - k))  # the MLE minimises M_n, and M_n(p_hat) <= 1 < 1/alpha
        lower = _expit(_root_away_from(log_excess, t_hat, -1.0))
        upper = _expit(_root_away_from(log_excess, t_hat, +1.0))

    cp_lower, cp_upper = _clopper_pearson_fast(k, n, alpha)
    return min(lower, cp_lower), max(upper, cp_upper)


def draws_to_decide(k: int, n: int, delta: float, alpha: float = DEFAULT_ALPHA,
                    limit: int = 1 << 40) -> int | None:
    """The draws at which :func:`bernoulli_confidence_sequence` would exclude ``delta`` if the violation rate
    stayed at its current estimate ``k / n``: the least ``N >= n`` whose interval at ``round(N k / n)``
    violations lies wholly above ``delta`` (rate above it) or below it (rate below it; ``k = 0``: no violation
    in ``N`` draws).  ``None`` when no ``N`` up to ``limit`` would (the rate estimate equals ``delta``, or it is
    too close to tell apart within ``limit`` draws).  A projection, not a promise: the rate moves as draws
    come, so it says roughly how many draws an undecided configuration needs, never what they would show."""
    k, n = _check_counts(k, n)
    alpha = _check_alpha(alpha)
    if n == 0 or not 0.0 < delta < 1.0:
        return None
    rate = k / n
    if rate == delta:
        return None
    above = rate > delta

    def decides(m: int) -> bool:
        lo, hi = bernoulli_confidence_sequence(min(m, round(m * rate)), m, alpha)
        return lo > delta if above else hi < delta

    if decides(n):
        return n
    # the interval narrows as N grows at a fixed rate (up to rounding of the count): bracket by doubling, bisect
    lo_n, hi_n = n, 2 * n
    while not decides(hi_n):
        if hi_n >= limit:
            return None
        lo_n, hi_n = hi_n, min(2 * hi_n, limit)
    while hi_n - lo_n > max(1, lo_n // 1000):  # 0.1%: a projection needs no more digits
        mid = (lo_n + hi_n) // 2
        lo_n, hi_n = (lo_n, mid) if decides(mid) else (mid, hi_n)
    return hi_n


def _clopper_pearson_fast(k: int, n: int, alpha: float) -> tuple[float, float]:
    # Same numbers as clopper_pearson (scipy's beta.ppf is boost's ibeta_inv, as is betaincinv) without
    # the ~0.2 ms of scipy.stats dispatch: runners call the confidence sequence after every draw.
    if k in (0, n):
        # Beta(n, 1) and Beta(1, n) quantiles in closed form: a configuration without violations (or all) loads
        # no scipy (~0.3 s of a repro's start-up). Written to give betaincinv's numbers bit for bit (random n and
        # alpha, tests/test_startup.py): 1 - (1 - alpha/2) is its rounded argument, not alpha/2.
        lower = (alpha / 2) ** (1 / n) if k else 0.0
        upper = -math.expm1(math.log(1 - (1 - alpha / 2)) / n) if k < n else 1.0
        return lower, upper
    from scipy import special

    return float(special.betaincinv(k, n - k + 1, alpha / 2)), float(special.betaincinv(k + 1, n - k, 1 - alpha / 2))


def _root_away_from(f: Callable[[float], float], t0: float, direction: float) -> float:
    """Root of the convex ``f`` (with ``f(t0) < 0``) on the side of ``t0`` given by ``direction``."""
    step = 1.0
    t1 = t0 + direction * step
    # f grows at least linearly away from its minimum, so doubling finds a bracket in a few steps.
    while f(t1) <= 0.0:
        step *= 2.0
        t1 = t0 + direction * step
    a, b = (t1, t0) if direction < 0 else (t0, t1)
    from scipy import optimize

    return float(optimize.brentq(f, a, b, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=200))


# --------------------------------------------------------------------------- scaling fits


@dataclass(frozen=True)
class ScalingFit:
    """Result of :func:`fit_scaling`: ``log y = intercept + sum_k slopes[k] * log x_k``."""

    names: tuple[str, ...]  # regressor names (parameters that vary)
    slopes: np.ndarray  # fitted exponents, shape (P,)
    intercept: float
    ci_low: np.ndarray  # bootstrap percentile interval per slope, shape (P,)
    ci_high: np.ndarray
    n_configs: int
    residual_sd: float  # sqrt(RSS / (J - P - 1)) over configuration means; NaN when J == P + 1


_REDUCERS = {"mean": np.mean, "max": np.max, "min": np.min}


def reducer(reduce: str, level: float | None = None) -> Callable[..., Any]:
    """The per-configuration summary of a sample that `fit_scaling` fits: mean, max, min, or the quantile at
    `level` (reduce="quantile"). Called as f(values) or f(values, axis=...)."""
    if reduce == "quantile":
        if level is None or not 0.0 <= level <= 1.0:
            raise ValueError(f"reduce='quantile' needs a level in [0, 1], got {level!r}")
        return partial(np.quantile, q=float(level))
    if reduce not in _REDUCERS:
        raise ValueError(f"reduce must be one of {sorted(_REDUCERS) + ['quantile']}, got {reduce!r}")
    return _REDUCERS[reduce]


def fit_scaling(
    names: Sequence[str],
    log_x: np.ndarray,
    samples: Sequence[np.ndarray],
    *,
    n_boot: int = 400,
    alpha: float = 0.05,
    seed: int = 0,
    reduce: str = "mean",
    levels: Sequence[float] | None = None,
) -> ScalingFit:
    """Fit ``log y = c + sum_k e_k log x_k`` by least squares over configurations.

    ``log_x`` has shape ``(J, P)`` (a 1-D array is accepted when ``P == 1``); ``samples[j]`` holds the
    per-replicate values of ``log y`` at configuration ``j``, and the response of configuration ``j``
    is their mean (``reduce="max"`` / ``"min"``: their largest / smallest, to track a worst case;
    ``reduce="quantile"``: their empirical quantile at ``levels[j]``, to track a stated tail such as the
    1 - delta quantile of a "with probability 1 - delta" claim).
    Intervals are bootstrap percentile intervals at level ``1 - alpha``: replicates are resampled
    *within* each configuration (stratified, so the design stays fixed), the same reduction is applied,
    the model is refitted, and the ``alpha/2`` and ``1 - alpha/2`` quantiles of each slope are taken.
    For ``max``/``min`` the bootstrap of an extreme is known to be rough (a resample repeats the sample
    extreme with probability about 0.63), so those intervals are indicative, not exact.

    Caveats: the intervals reflect replicate noise only.  A configuration with a single replicate
    contributes no resampling variability, and lack of fit (a non-power-law trend) is not in them;
    look at ``residual_sd`` for that.  With few replicates the percentile bootstrap is somewhat
    narrow (the plug-in variance is smaller by ``(m - 1)/m``).

    Deterministic: draws come from ``numpy.random.default_rng(seed)``, so equal inputs give
    bit-identical output.  Raises ``ValueError`` for a constant column of ``log_x`` (named in the
    message), collinear columns, ``J <= P``, mismatched shapes, empty or non-finite samples.
    """
    names_t = tuple(str(name) for name in names)
    x = np.asarray(log_x, dtype=float)
    if x.ndim == 1 and len(names_t) == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"log_x must have shape (J, P), got shape {x.shape}")
    n_configs, n_params = x.shape
    if n_params != len(names_t):
        raise ValueError(f"log_x has {n_params} columns but {len(names_t)} names were given")
    if n_params == 0:
        raise ValueError("need at least one regressor")
    if len(samples) != n_configs:
        raise ValueError(f"log_x has {n_configs} rows but {len(samples)} sample arrays were given")
    if n_configs <= n_params:
        raise ValueError(
            f"too few configurations: {n_configs} configurations cannot determine {n_params} exponents "
            "and an intercept (need J > P)"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("log_x contains non-finite values")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    alpha = _check_alpha(alpha)

    for col, name in enumerate(names_t):
        column = x[:, col]
        # A constant column is confounded with the intercept: its exponent is not identifiable.
        if np.ptp(column) <= 1e-12 * max(1.0, float(np.max(np.abs(column)))):
            raise ValueError(f"log_x column {col} ({name!r}) is constant: its exponent cannot be fitted")

    reps: list[np.ndarray] = []
    for j, sample in enumerate(samples):
        values = np.asarray(sample, dtype=float).reshape(-1)
        if values.size == 0:
            raise ValueError(f"configuration {j} has no samples")
        if not np.all(np.isfinite(values)):
            raise ValueError(f"configuration {j} has non-finite samples (log of zero or negative y?)")
        reps.append(values)

    design = np.column_stack([np.ones(n_configs), x])
    if np.linalg.matrix_rank(design) < n_params + 1:
        # lstsq would silently return the minimum-norm solution, splitting one effect arbitrarily.
        raise ValueError(f"columns of log_x are collinear (with each other or the intercept): {names_t}")

    if reduce == "quantile" and (levels is None or len(levels) != n_configs):
        raise ValueError("reduce='quantile' needs one level in [0, 1] per configuration")
    stats = [reducer(reduce, levels[j] if reduce == "quantile" else None) for j in range(n_configs)]
    y = np.array([stat(values) for stat, values in zip(stats, reps)])
    coef, _, _, _ = np.linalg.lstsq(design, y, rcond=None)
    residuals = y - design @ coef
    dof = n_configs - n_params - 1
    residual_sd = float(np.sqrt(residuals @ residuals / dof)) if dof > 0 else float("nan")

    # Stratified bootstrap: one (n_boot, m_j) index draw per configuration, in a fixed order.
    rng = np.random.default_rng(seed)
    y_boot = np.empty((n_configs, n_boot))
    for j, values in enumerate(reps):
        idx = rng.integers(0, values.size, size=(n_boot, values.size))
        y_boot[j] = stats[j](values[idx], axis=1)
    coef_boot, _, _, _ = np.linalg.lstsq(design, y_boot, rcond=None)  # one solve for all resamples
    slopes_boot = coef_boot[1:]
    ci_low = np.quantile(slopes_boot, alpha / 2, axis=1)
    ci_high = np.quantile(slopes_boot, 1 - alpha / 2, axis=1)

    slopes = coef[1:].copy()
    for array in (slopes, ci_low, ci_high):
        array.setflags(write=False)  # the dataclass is frozen; keep its arrays frozen too
    return ScalingFit(
        names=names_t,
        slopes=slopes,
        intercept=float(coef[0]),
        ci_low=ci_low,
        ci_high=ci_high,
        n_configs=n_configs,
        residual_sd=residual_sd,
    )


def quantile_interval(sample: np.ndarray, q: float, alpha: float) -> tuple[float, float]:
    """Exact distribution-free two-sided ``(1 - alpha)`` interval for the ``q`` quantile from order statistics.

    With ``n`` iid draws, ``#{X_i <= xi_q} ~ Binomial(n, q)`` for a continuous law, so ``X_(l) <= xi_q`` fails
    with probability ``P(Bin(n, q) < l)`` and ``X_(u) >= xi_q`` with ``P(Bin(n, q) >= u)``; ``l`` and ``u`` are the
    tightest order statistics whose failure probability is at most ``alpha / 2`` (conservative for ties too).
    An end that no order statistic can give at this ``n`` is ``-inf`` / ``+inf``: too few draws for that level.
    """
    alpha = _check_alpha(alpha)
    x = np.sort(np.asarray(sample, dtype=float).reshape(-1))
    n = x.size
    if n == 0 or not 0.0 < q < 1.0:
        raise ValueError(f"quantile_interval needs draws and 0 < q < 1, got n={n}, q={q!r}")
    from scipy import stats as sps

    ks = np.arange(n + 1)
    cdf = sps.binom.cdf(ks - 1, n, q)  # P(Bin < l) for l = 0..n
    ok_low = np.flatnonzero(cdf[1:] <= alpha / 2)  # l = 1..n
    lower = x[ok_low[-1]] if ok_low.size else -np.inf
    sf = sps.binom.sf(ks - 1, n, q)  # P(Bin >= u) for u = 0..n
    ok_high = np.flatnonzero(sf[1:] <= alpha / 2)
    upper = x[ok_high[0]] if ok_high.size else np.inf
    return float(lower), float(upper)


def draws_for_quantile(q: float, alpha: float) -> int:
    """The fewest draws whose :func:`quantile_interval` at level ``q`` has both ends finite."""
    alpha = _check_alpha(alpha)
    # both ends exist once the extreme order statistics qualify: (1 - q)^n <= alpha/2 and q^n <= alpha/2
    p = max(q, 1.0 - q)
    return max(1, math.ceil(math.log(alpha / 2) / math.log(p) - 1e-9))


WORST_LEVELS = (0.5, 0.75, 0.9, 0.95, 0.99, 0.999)


def worst_level(n: int, alpha: float) -> float | None:
    """For a worst-case statistic: the highest level of WORST_LEVELS whose quantile ``n`` draws can bound on
    both sides at ``alpha`` (a lower bound of the worst case: its growth refutes a claim about every draw).
    None when even the median cannot be bounded: too few draws to decide anything."""
    best = None
    for q in WORST_LEVELS:
        if draws_for_quantile(q, alpha) <= n:
            best = q
    return best


def fit_quantile_scaling(names: Sequence[str], log_x: np.ndarray, samples: Sequence[np.ndarray],
                         levels: Sequence[float], alpha: float) -> tuple[ScalingFit, np.ndarray, np.ndarray]:
    """Least-squares slopes of the configurations' ``levels[j]`` quantiles against ``log_x``, with intervals
    whose coverage holds by construction (no bootstrap of an extreme).

    Each configuration gets an exact order-statistic interval (:func:`quantile_interval`) at ``alpha / J``,
    so with probability at least ``1 - alpha`` all J intervals cover their quantiles at once (Bonferroni). A
    least-squares slope is linear in the responses, ``slope_k = sum_j w_kj y_j``, so its smallest and largest
    values over the box of intervals (lower ends where ``w_kj > 0`` and upper ends elsewhere, and the reverse)
    bound the slope of the true quantiles with probability at least ``1 - alpha``, for every k together.
    Returns the fit (point slopes from the sample quantiles) and the per-configuration interval ends.
    """
    x = np.asarray(log_x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    n_configs, n_params = x.shape
    if n_configs <= n_params:
        raise ValueError(f"too few configurations: {n_configs} cannot determine {n_params} exponents and an "
                         "intercept (need J > P)")
    design = np.column_stack([np.ones(n_configs), x])
    if np.linalg.matrix_rank(design) < n_params + 1:
        raise ValueError(f"columns of log_x are collinear (with each other or the intercept): {tuple(names)}")
    weights = np.linalg.pinv(design)[1:]  # (P, J): slope_k = weights[k] @ y
    y = np.array([np.quantile(np.asarray(v, dtype=float), q) for v, q in zip(samples, levels)])
    ends = np.array([quantile_interval(v, q, alpha / n_configs) for v, q in zip(samples, levels)])
    lo, hi = ends[:, 0], ends[:, 1]

    def combine(pos_end: np.ndarray, neg_end: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            terms = np.where(weights > 0, weights * pos_end, np.where(weights < 0, weights * neg_end, 0.0))
        return terms.sum(axis=1)

    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    resid = y - design @ coef
    dof = n_configs - n_params - 1
    fit = ScalingFit(tuple(str(n) for n in names), coef[1:], float(coef[0]), combine(lo, hi), combine(hi, lo),
                     n_configs, float(np.sqrt(resid @ resid / dof)) if dof > 0 else float("nan"))
    return fit, lo, hi


def scaling_verdict(fit: ScalingFit, *, relation: str, tolerance: float = 0.1) -> str:
    """Verdict on an implied-constant fit, whose response is ``log(quantity / shape)``.

    If the claimed shape is right, the implied constant does not grow, so every exponent is about 0.
    ``tolerance`` absorbs slowly varying factors (logs, finite-size effects) that are not violations.

    * relation ``'<='`` (upper bound): ``'violated'`` if any ``ci_low > tolerance`` (the implied
      constant grows significantly), ``'holds'`` if every ``ci_high <= tolerance``, else
      ``'inconclusive'``.
    * relation ``'>='`` (lower bound): mirror image: ``'violated'`` if any ``ci_high < -tolerance``,
      ``'holds'`` if every ``ci_low >= -tolerance``, else ``'inconclusive'``.

    NaN interval ends never count as evidence either way, so they lead to ``'inconclusive'``.
    """
    tolerance = float(tolerance)
    if not tolerance >= 0.0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    low = np.asarray(fit.ci_low, dtype=float)
    high = np.asarray(fit.ci_high, dtype=float)
    if relation == "<=":
        if np.any(low > tolerance):
            return "violated"
        if np.all(high <= tolerance):
            return "holds"
        return "inconclusive"
    if relation == ">=":
        if np.any(high < -tolerance):
            return "violated"
        if np.all(low >= -tolerance):
            return "holds"
        return "inconclusive"
    raise ValueError(f"relation must be '<=' or '>=', got {relation!r}")


TOP_DECADES = 1.0  # the top of a sweep: its highest values of x spanning at least this many decades


def top_window(log_x: np.ndarray, decades: float = TOP_DECADES) -> np.ndarray:
    """Which entries of ``log_x`` (one swept parameter's logs, repeats allowed) lie in the top of the sweep: the
    fewest highest distinct values that span at least ``decades`` decades (the whole sweep if it spans less), and
    at least two of them. A whole-sweep slope averages a rise at the bottom with a plateau at the top; the slope
    over this window is the local exponent where the sweep ends."""
    col = np.asarray(log_x, dtype=float)
    vals = np.unique(col)
    reach = vals[-1] - decades * math.log(10.0) + 1e-9
    below = vals[vals <= reach]
    start = below[-1] if below.size else vals[0]
    if len(vals) >= 2:
        start = min(start, vals[-2])
    return col >= start - 1e-12


def box_slope_interval(log_x: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                       column: int) -> tuple[float, float, float]:
    """Least-squares slope of ``y`` on column ``column`` of ``log_x`` (with an intercept and the other columns),
    and its smallest and largest values over the box [lo, hi] of the responses: exact bounds on the true values'
    slope whenever the box covers them (the slope is linear in y). NaN when the design is singular."""
    x = np.asarray(log_x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    design = np.column_stack([np.ones(len(x)), x])
    if len(x) <= x.shape[1] or np.linalg.matrix_rank(design) < design.shape[1]:
        return math.nan, math.nan, math.nan
    return _linear_over_box(np.linalg.pinv(design)[1 + column], np.asarray(y, dtype=float), lo, hi)


def _linear_over_box(w: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float, float]:
    """w @ y, and the smallest and largest values of w @ v over the box lo <= v <= hi (a linear statistic of the
    responses, such as a least-squares slope: exact bounds on its true value whenever the box covers it)."""
    with np.errstate(invalid="ignore"):
        low = float(np.where(w > 0, w * lo, np.where(w < 0, w * hi, 0.0)).sum())
        high = float(np.where(w > 0, w * hi, np.where(w < 0, w * lo, 0.0)).sum())
    return float(w @ y), low, high


# --------------------------------------------------------------------------- logarithmic growth

# A hidden constant that grows like (log x)^b has a power-law slope b / log x: 0.03-0.12 over any reachable
# sweep, under a slope tolerance of 0.1. It is seen in the coordinate s = log log x, where (log x)^b is the
# straight line log C = log a + b s, and a constant converging from below is concave (see log_growth_test).
LOG_MIN_LOG_X = 1.0  # points with log x >= 1 (x >= e) have a finite s = log log x >= 0
# Concavity in s is what convergence must show: C_inf - c (log x)^-beta is concave in s for every beta > 0, and
# C_inf - c x^-gamma wherever gamma log x >= 1; the concavity test therefore uses the points with log x >= 4
# (x >= 55), which covers every power rate gamma >= 1/4. A constant converging slower than x^-1/4 is outside
# what a finite sweep can tell from logarithmic growth.
LOG_CONCAVE_LOG_X = 4.0


def _box_slope(s: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float, float]:
    """LS slope of y on s, and its smallest and largest values over the box [lo, hi] (exact when the box
    covers the true values: the slope is linear in y)."""
    d = s - s.mean()
    return _linear_over_box(d / float(d @ d), y, lo, hi)


def concave_fits_box(s: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether some function concave in s passes through every interval [exp(lo_j), exp(hi_j)] (a small LP;
    s strictly increasing). The box is in log C; concavity is asked of C itself."""
    n = len(s)
    if n < 3:
        return True
    ref = float(np.nanmedian(np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi, np.nan))))
    low = np.exp(np.clip(lo - ref, -700, 700))
    high = np.where(np.isfinite(hi), np.exp(np.clip(hi - ref, -700, 700)), np.inf)
    rows = []
    for j in range(n - 2):  # slope(j, j+1) >= slope(j+1, j+2), written as A f <= 0
        a, b = 1.0 / (s[j + 1] - s[j]), 1.0 / (s[j + 2] - s[j + 1])
        row = np.zeros(n)
        row[j], row[j + 1], row[j + 2] = a, -a - b, b
        rows.append(row)
    bounds = [(float(lw), None if not np.isfinite(hg) else float(hg)) for lw, hg in zip(low, high)]
    from scipy import optimize

    res = optimize.linprog(np.zeros(n), A_ub=np.array(rows), b_ub=np.zeros(n - 2), bounds=bounds,
                           method="highs")
    return res.status != 2  # 2: infeasible; feasible, or the solver could not tell: never evidence of growth


def log_growth_test(log_x: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray, *,
                    top_share: float = 2 / 3) -> dict[str, Any] | None:
    """Logarithmic growth of a tracked statistic along one swept parameter.

    ``log_x``: the configurations' log x (one line: other swept parameters fixed), ``y``: the statistic's log
    (log of the implied constant's quantile), ``[lo, hi]``: intervals covering the true values simultaneously
    (stats.fit_quantile_scaling's box at 1 - alpha). Only points with log x >= LOG_MIN_LOG_X are used; None
    with fewer than 3. In s = log log x the model a (log x)^b is the line y = log a + b s, so:

    * ``b`` (with ``b_ci``): the LS slope of y on s over the whole sweep; ``b_top`` (with ``b_top_ci``) over
      its top ``top_share`` of points (at least 3): the log exponent the constant still shows where the
      sweep ends; ``b_last`` (with ``b_last_ci``) over its last step (the top two points); ``b_topdec`` (with
      ``b_topdec_ci``) over its top decade (:func:`top_window`). The intervals
      bound the LS slope of the true values over the box, exact whatever the true
      curve (no model assumed); ``b_ci[1]`` is the largest log exponent the sweep could have missed.
    * ``concave_rejected``: no function concave in s (every constant converging from below at a rate
      (log x)^-beta, or x^-gamma with gamma >= 1/LOG_CONCAVE_LOG_X) fits the box over the points with
      log x >= LOG_CONCAVE_LOG_X: growth that does not decelerate the way convergence must. A converging
      constant is rejected with probability at most the box's alpha.
    * ``decades``: log10(x_max / x_min) over the points used; ``concave_decades`` over the concavity test's.
    """
    log_x = np.asarray(log_x, dtype=float)
    order = np.argsort(log_x)
    t, y, lo, hi = (np.asarray(a, dtype=float)[order] for a in (log_x, y, lo, hi))
    use = t >= LOG_MIN_LOG_X
    if use.sum() < 3 or len(np.unique(t[use])) < use.sum():
        return None
    t, y, lo, hi = t[use], y[use], lo[use], hi[use]
    s = np.log(t)
    b, b_lo, b_hi = _box_slope(s, y, lo, hi)
    k = max(3, math.ceil(top_share * len(s)))
    bt, bt_lo, bt_hi = _box_slope(s[-k:], y[-k:], lo[-k:], hi[-k:])
    bl, bl_lo, bl_hi = _box_slope(s[-2:], y[-2:], lo[-2:], hi[-2:])
    win = top_window(t)  # the top decade (at least two points): the log exponent where the sweep ends
    bd, bd_lo, bd_hi = _box_slope(s[win], y[win], lo[win], hi[win])
    cc = t >= LOG_CONCAVE_LOG_X
    rejected = bool(cc.sum() >= 3 and not concave_fits_box(s[cc], lo[cc], hi[cc]))
    ln10 = math.log(10.0)
    return {"b": b, "b_ci": [b_lo, b_hi], "b_top": bt, "b_top_ci": [bt_lo, bt_hi], "top_points": int(k),
            "b_last": bl, "b_last_ci": [bl_lo, bl_hi], "b_topdec": bd, "b_topdec_ci": [bd_lo, bd_hi],
            "points": len(s), "decades": float((t[-1] - t[0]) / ln10),
            "concave_points": int(cc.sum()),
            "concave_decades": float((t[cc][-1] - t[cc][0]) / ln10) if cc.sum() >= 2 else 0.0,
            "concave_rejected": rejected}


# --------------------------------------------------------------------------- plots


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of the finite entries of ``values``, for slack ECDF plots.

    Returns the sorted finite values and their cumulative probabilities ``i / n`` for
    ``i = 1..n``, where ``n`` counts finite values only (NaN/inf slacks are dropped, not plotted at
    an end).  Empty input gives two empty arrays.
    """
    flat = np.asarray(values, dtype=float).reshape(-1)
    finite = np.sort(flat[np.isfinite(flat)])
    n = finite.size
    return finite, np.arange(1, n + 1, dtype=float) / max(n, 1)
