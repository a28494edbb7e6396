"""From per-replicate observations to verdicts, exactly as DESIGN.md defines them.

Per configuration (V violations among N replicates whose hypotheses held, stated failure probability δ):
    probabilistic  violated if the lower end of the interval on P(violation) exceeds δ; holds only if its upper
                   end is below δ ("not refuted at this confidence", never "proved"); inconclusive otherwise
                   or when N = 0. The interval is two-sided Clopper–Pearson at α, or the anytime-valid
                   confidence sequence when the configuration stopped early.
    deterministic  violated on one counterexample; holds otherwise.
    scaling        judged over the sweep: the implied constant Ĉ = quantity / shape (shape = bound with the
                   hidden constants set to 1) must not grow: fitted exponents of log Ĉ with their intervals, violated
                   only by growth at the top of the sweep (_persistence), a falling slope extending the sweep.
Per claim: in-regime configurations decide; a violation outside the regime only adds the flag
`violated-out-of-regime`. When no configuration is in regime, the verdict is flagged `out-of-regime`: a
violation there is not a refutation of the printed statement.
Intervals use stats.DEFAULT_ALPHA per configuration; see README "False alarms" for the suite-wide rate.
Comparisons forgive rounding: ROUNDING_ULPS units of the dtype's precision times the operands' magnitude.
A run's family-wise chance of any false "violated" is bounded in `family_wise_bound`, every claim kind included.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .claims import Claim, in_regime
from .stats import (
    DEFAULT_ALPHA,
    bernoulli_confidence_sequence,
    box_slope_interval,
    clopper_pearson,
    draws_for_quantile,
    draws_to_decide,
    fit_quantile_scaling,
    fit_scaling,
    log_growth_test,
    quantile_interval,
    reducer,
    scaling_verdict,
    top_window,
    worst_level,
)

# Scaling verdicts: a slope interval at 1 - SCALING_ALPHA (simultaneous over the claim's configurations) AND a
# slope tolerance (check.tolerance, default 0.1) must both be exceeded before a hidden-constant claim is called
# violated: two margins against a false alarm; a false "violated" has probability <= SCALING_ALPHA / 2 per claim.
SCALING_ALPHA = 1e-3
SCALING_BOOT = 2000
ORDER = {"holds": 0, "inconclusive": 1, "violated": 2}


@dataclass
class ConfigResult:
    index: int
    params: dict[str, float]
    seed: int
    replicates: int  # replicates whose hypotheses held (N)
    drawn: int  # all replicates drawn
    violations: int
    violation_ci: tuple[float, float]
    slack_min: float | None
    slack_median: float | None
    in_regime: bool
    verdict: str
    bound: float
    delta: float
    vacuous: bool
    value_max: float | None
    value_median: float | None
    conditioning_failures: int
    worst: dict[str, Any] | None  # shard and replicate of the largest violation (or smallest margin)
    method: str
    seconds: float
    errors: list[str] = field(default_factory=list)
    shard_size: int = 0  # how replicates were split into seeded shards: repro needs it
    interval: str = "clopper-pearson"  # "confidence-sequence" when the configuration stopped early
    nonpositive: int = 0  # scaling lower bound: draws <= 0, violations for every hidden constant
    not_reached: int = 0  # trajectory draws that did not reach their target within `budget` steps
    budget: int | None = None
    planned: int = 0  # replicates the profile allows this configuration (drawn < planned: it stopped early)
    sequential: bool = False  # drawn shard by shard until decided (early stop); see false_violation_bound
    pinned: dict[str, Any] | None = None  # a hunted or corpus configuration's fixed dataset/labels/search
    # undecided probabilistic configuration: the draws at which the anytime-valid sequence would decide it if the
    # rate stayed at its estimate (stats.draws_to_decide); None when decided, or when no number would
    draws_needed: int | None = None
    # undecided, and its interval lies within RATE_RESOLUTION of delta: the rate sits at the bound (at_the_bound)
    at_bound: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["violation_ci"] = list(self.violation_ci)
        return d


@dataclass
class ClaimResult:
    claim: Claim
    verdict: str
    flags: list[str]
    configs: list[ConfigResult]
    scaling: dict[str, Any] | None
    worst_index: int | None
    message: str = ""
    profile: str = "quick"  # the profile whose draws these are: it decides the expected verdict
    regime_path: dict[str, Any] | None = None  # regime_trend along the claim's declared path (None: none declared)
    probes: list[dict[str, Any]] = field(default_factory=list)  # where its hunt probed (corpus.probe_cells)
    hunt_error: str | None = None  # the exception its hunt raised (a bug), with its traceback

    @property
    def expect(self) -> str:
        return self.claim.expected(self.profile)

    @property
    def ok(self) -> bool:
        return self.verdict == self.expect and not any(c.errors for c in self.configs)


# Rounding allowance: a comparison forgives ROUNDING_ULPS units of the dtype's precision, relative to the
# operands' magnitude max(|value|, |bound|, scale). `scale` is what an estimator reports in extras["scale"]
# when its value is a difference of larger terms (||a + b|| - ||a|| - ||b||: the terms are O(1), the value
# O(eps)): cancellation leaves rounding of the terms' size, which the value alone cannot show. 128 ulps is
# 2.8e-14 relative in float64 (a 1e-12 excess is still caught) and 1.5e-5 in float32.
ROUNDING_ULPS = 128
EPS = {"float64": float(np.finfo(np.float64).eps), "float32": float(np.finfo(np.float32).eps)}


def comparison_tolerance(value: np.ndarray, bound: float, dtype: str = "float64",
                         scale: np.ndarray | None = None) -> np.ndarray:
    """Per-draw absolute tolerance: ROUNDING_ULPS * eps(dtype) * max(|value|, |bound|, |scale|)."""
    if dtype not in EPS:
        raise ValueError(f"unknown dtype {dtype!r}: one of {sorted(EPS)}")
    mag = np.maximum(np.abs(np.asarray(value, dtype=float)), abs(bound))
    if scale is not None:
        mag = np.maximum(mag, np.abs(np.asarray(scale, dtype=float)))
    return ROUNDING_ULPS * EPS[dtype] * mag


def violates(relation: str, value: np.ndarray, bound: float, dtype: str = "float64",
             scale: np.ndarray | None = None) -> np.ndarray:
    """Draws that violate `value relation bound` by more than rounding (comparison_tolerance). A strict
    relation is violated at equality within rounding too: rounding can neither make nor break a tie."""
    value = np.asarray(value, dtype=float)
    tol = comparison_tolerance(value, bound, dtype, scale)
    if relation == "<=":
        return value > bound + tol
    if relation == "<":
        return value >= bound - tol
    if relation == ">=":
        return value < bound - tol
    return value <= bound + tol  # ">"


def slack(relation: str, value: np.ndarray, bound: float, dtype: str = "float64",
          scale: np.ndarray | None = None) -> np.ndarray:
    """How far a draw is from violating, as a ratio: 1 is tight, below 1 a violation, defined for every sign.

    Upper bound (value <= bound): bound/value when bound > 0 (+inf for value <= 0), value/bound when
    bound < 0. Lower bound (value >= bound): value/bound when bound > 0, bound/value when bound < 0 (+inf for
    value >= 0). A bound of 0 (a sign claim) has no ratio: +inf on the right side, 1 at it, 0 across it.
    Draws within rounding of the bound (comparison_tolerance) read 1: tight, as the comparison treats them.
    The ratio never orders the violations of a sign claim: the worst draw comes from `excess`."""
    value = np.asarray(value, dtype=float)
    upper = relation in ("<=", "<")
    # a ratio beyond float64 (bound far above a tiny value) is +inf: as safe as it can be, not a warning
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if bound == 0:
            good = value < 0 if upper else value > 0
            out = np.where(good, np.inf, np.where(value == 0, 1.0, 0.0))
        elif upper == (bound > 0):  # upper with bound > 0, lower with bound < 0: bound/value
            # a value of the opposite sign (or 0) lies beyond any ratio on the safe side
            out = np.where(value * bound > 0, bound / value, np.inf)
        else:  # upper with bound < 0, lower with bound > 0: value/bound (<= 0 across zero: a violation)
            out = value / bound
    at_bound = np.abs(value - bound) <= comparison_tolerance(value, bound, dtype, scale)
    return np.where(at_bound, 1.0, out)


def excess(relation: str, value: np.ndarray, bound: float) -> np.ndarray:
    """Signed amount by which a draw exceeds its bound (positive: a violation): the worst draw is its argmax."""
    value = np.asarray(value, dtype=float)
    return value - bound if relation in ("<=", "<") else bound - value


# A probabilistic configuration stops drawing, undecided, once its interval for the violation rate lies within
# delta (1 -+ RATE_RESOLUTION): the rate is known to sit at the stated bound, and telling 0.9 delta from 1.1 delta
# would take up to the whole budget (at delta = 0.05, ~5,000 draws establish "within 25%"; 131,072 may not split
# it). Under the anytime-valid sequence this never stops a configuration whose true rate lies outside that band,
# except with probability alpha (the sequence covers the true rate at every look), so it costs no power there.
RATE_RESOLUTION = 0.25


def at_the_bound(ci: tuple[float, float], delta: float, resolution: float = RATE_RESOLUTION) -> bool:
    """Whether a violation-rate interval lies within delta (1 -+ resolution) (and so contains no decision)."""
    return 0.0 < delta < 1.0 and ci[0] >= delta * (1 - resolution) and ci[1] <= delta * (1 + resolution)


def config_result(claim: Claim, index: int, params: dict[str, float], seed: int, value: np.ndarray,
                  valid: np.ndarray, shard_of: np.ndarray, pos_in_shard: np.ndarray, method: str, seconds: float,
                  errors: list[str], alpha: float = DEFAULT_ALPHA, shard_size: int = 0,
                  anytime: bool = False, dtype: str | None = None, scale: np.ndarray | None = None,
                  reached: np.ndarray | None = None, budget: np.ndarray | None = None, planned: int = 0,
                  sequential: bool = False) -> ConfigResult:
    """`anytime`: replicates were drawn until a decision (optional stopping), so the interval must be the
    anytime-valid confidence sequence; a fixed-size Clopper-Pearson interval would be too narrow.
    `sequential` (early stop): the configuration was drawn shard by shard until the confidence sequence decided
    (then `anytime`) or until its `planned` replicates were spent (then Clopper-Pearson at the full size: the
    verdict a fixed-size run gives); false_violation_bound charges such a configuration for both looks.
    `dtype` (default: the claim's) and `scale` (the estimator's extras["scale"], per replicate) set the
    rounding tolerance of the comparison (comparison_tolerance).
    `reached` / `budget` (a trajectory's extras: target reached (1/0), step budget): a draw that did not reach
    its target within the budget is a draw (its value the budget's, a lower bound), never dropped; when the
    claim states the budget (check.args.budget_stated) non-arrival is itself a violation, otherwise the count is
    reported as "not reached within N steps" and keeps the claim from "holds" unless its rate is below δ."""
    chk = claim.check
    assert chk is not None
    dtype = dtype or chk.dtype
    bound = chk.bound.evaluate({**chk.regime_constants, **params}) if chk.constants else chk.bound.evaluate(params)
    inside = in_regime(claim, params)
    delta = claim.delta(params)
    finite = np.isfinite(value)
    bad = valid & ~finite  # NaN on a draw whose hypotheses failed is the estimator's way of saying "no value"
    if bad.any() and not errors:
        errors = errors + [f"{int(bad.sum())} replicate(s) gave NaN/inf for quantity '{chk.quantity}'"]
    ok = valid & finite
    v = value[ok]
    sc = None if scale is None else np.asarray(scale, dtype=float)[ok]
    n = int(ok.sum())
    viol = violates(chk.relation, v, bound, dtype, sc)
    k = int(viol.sum())
    interval = bernoulli_confidence_sequence if anytime else clopper_pearson
    ci = interval(k, n, alpha) if n else (0.0, 1.0)
    sl = slack(chk.relation, v, bound, dtype, sc)
    nonpositive = 0
    if claim.mode == "scaling" and chk.relation in (">=", ">"):
        # Against a positive lower bound C * shape, a draw <= 0 is a violation for every constant C: it never
        # enters the log-log fit, so it must decide here.
        shape = chk.bound.with_constants({c: 1.0 for c in chk.constants}).evaluate(params)
        nonpositive = int((v <= 0).sum()) if shape > 0 else 0
    miss = np.zeros(n, bool) if reached is None else np.asarray(reached, dtype=float)[ok] < 0.5
    not_reached = int(miss.sum())
    steps = None if budget is None or not len(budget) else int(np.nanmax(budget))
    stated = bool(chk.args.get("budget_stated", False))
    if stated:
        # the statement promises arrival within this budget: a miss refutes it whatever the value says
        viol = viol | miss
        k = int(viol.sum())
        ci = interval(k, n, alpha) if n else (0.0, 1.0)
    decided = nonpositive if claim.mode == "scaling" else k  # violations that refute for every constant
    if claim.mode == "scaling" and stated:
        decided += not_reached
    # a miss within a budget of the claim's own choice is unknown, not a pass: "holds" needs the rate of
    # violations and misses together below δ
    unknown = 0 if stated else int((miss & ~viol).sum()) if claim.mode != "scaling" else not_reached
    dci = interval(decided, n, alpha) if n else (0.0, 1.0)
    # violations and unknowns together: what "holds" and the at-the-bound stop read
    uci = dci if not unknown else interval(decided + unknown, n, alpha) if n else (0.0, 1.0)
    if errors:
        verdict = "inconclusive"
    elif n == 0 and not valid.all():
        verdict = "n/a"  # every draw failed the statement's own hypotheses: no evidence either way
    elif n == 0:
        verdict = "inconclusive"
    elif claim.mode == "scaling" and not decided and not unknown:
        verdict = "n/a"  # the fit over the sweep decides
    elif claim.mode == "deterministic" or (claim.mode == "scaling" and delta == 0):
        verdict = "violated" if decided else "inconclusive" if unknown else "holds"
    elif dci[0] > delta:
        verdict = "violated"
    elif uci[1] < delta:
        # "holds" is evidence, not a point estimate: even the interval's upper end (at the run's confidence,
        # anytime-valid under early stopping) keeps the violation rate below δ. With no violation that needs
        # n > log(2/α)/δ ≈ 10/δ draws.
        verdict = "holds"
    else:
        verdict = "inconclusive"
    if claim.mode == "scaling" and verdict == "holds":
        verdict = "n/a"  # these draws do not refute any constant: the fit decides
    needed, at_bound = None, False
    if claim.mode == "probabilistic" and verdict == "inconclusive" and n and not errors:
        needed = draws_to_decide(decided + unknown, n, delta, alpha)
        at_bound = at_the_bound(uci, delta)
    vacuous = delta >= 1.0 or not math.isfinite(bound)  # stated probability 0, or no finite bound
    if chk.trivial is not None:
        t = chk.trivial.evaluate(params)
        vacuous = vacuous or (bound >= t if chk.relation in ("<=", "<") else bound <= t)
    worst = None
    if n:
        # the largest violation (or the draw closest to one): slack ratios cannot order a sign claim's draws
        idx = np.flatnonzero(ok)[int(np.argmax(excess(chk.relation, v, bound)))]
        worst = {"shard": int(shard_of[idx]), "replicate": int(pos_in_shard[idx]), "value": float(value[idx])}
    return ConfigResult(
        index, params, seed, n, len(value), k, (float(ci[0]), float(ci[1])),
        float(sl.min()) if n else None, float(np.median(sl)) if n else None,
        inside, verdict, float(bound), float(delta), bool(vacuous),
        float(v.max()) if n else None, float(np.median(v)) if n else None,
        int((~valid).sum()), worst, method, seconds, errors, shard_size or len(value),
        "confidence-sequence" if anytime else "clopper-pearson", nonpositive, not_reached, steps,
        planned or len(value), bool(sequential), draws_needed=needed, at_bound=at_bound)


def deciding(configs: list[ConfigResult]) -> list[ConfigResult]:
    """The configurations a claim's verdict rests on: those inside the stated regime, or all when none is."""
    return [c for c in configs if c.in_regime] or configs


def _aggregate(verdicts: list[str]) -> str | None:
    vs = [v for v in verdicts if v in ORDER]
    return max(vs, key=ORDER.__getitem__) if vs else None


# check.statistic -> how a configuration's log Ĉ samples are summarised (stats.fit_scaling's `reduce`)
STATISTIC_REDUCE = {"mean-log": "mean", "max-log": "max", "min-log": "min", "tail-log": "quantile"}


def scaling_analysis(claim: Claim, configs: list[ConfigResult], samples: list[np.ndarray]) -> dict[str, Any]:
    """The scaling verdict, decided like every other verdict by the stated regime: the fit over in-regime
    configurations decides when there are enough of them; a fit over all configurations is kept beside it
    (`all_configs`) and, if only that one shows growth, flagged "violated-out-of-regime". With too few in-regime
    configurations the fit over all of them is reported with "out-of-regime": informative, never a refutation."""
    inside = [(c, v) for c, v in zip(configs, samples) if c.in_regime]
    everything = _scaling_fit(claim, configs, samples)
    if len(inside) == len(configs):
        return dict(everything, regime="all configurations (all in regime)")
    fit_in = _scaling_fit(claim, [c for c, _ in inside], [v for _, v in inside]) if inside else None
    if fit_in is not None and fit_in["fitted"]:
        out = dict(fit_in, regime="in-regime configurations", all_configs=everything)
        if everything["verdict"] == "violated" and fit_in["verdict"] != "violated":
            out["flag"] = "violated-out-of-regime"
        return out
    return dict(everything, regime="all configurations (too few in regime to fit)", flag="out-of-regime")


def _scaling_fit(claim: Claim, configs: list[ConfigResult], samples: list[np.ndarray]) -> dict[str, Any]:
    """Fit log Ĉ (implied constant) against log of every parameter that varies; Ĉ must not grow.

    tail-log, max-log and min-log fit a quantile of log Ĉ per configuration (the stated 1 - δ tail; for a
    claim about every draw, the highest level its draws can bound, stats.worst_level) with intervals that
    hold by construction (stats.fit_quantile_scaling: exact order-statistic intervals, Bonferroni over the
    configurations, LS slope bounded over their box). An interval end the draws cannot give is infinite and
    the verdict inconclusive, with the number of draws that would decide (`min_draws`). mean-log keeps the
    stratified bootstrap of the mean (approximate; an explicit choice with its reason in the claim's notes).
    A quantile that is still rising at the top of the sweep gets `still_growing` (see _still_growing)."""
    chk = claim.check
    assert chk is not None
    shape = chk.bound.with_constants({c: 1.0 for c in chk.constants})
    how = STATISTIC_REDUCE[chk.statistic]
    upper = chk.relation in ("<=", "<")
    rows, resp, used, deltas, floors = [], [], [], [], []
    zero_configs: list[int] = []  # upper bound: configurations whose draws are all <= 0 (Ĉ = 0 there)
    for cfg, vals in zip(configs, samples):
        b = shape.evaluate(cfg.params)
        vals = vals[np.isfinite(vals)]
        pos = vals > 0
        if not pos.any() or not b > 0:
            if upper and b > 0 and vals.size:
                zero_configs.append(cfg.index)
            continue
        logc = np.log(vals[pos]) - math.log(b)
        floor = -np.inf
        if upper and not pos.all():
            # a draw <= 0 satisfies an upper bound for every constant: it stays in the sample, below every
            # other draw, so the quantile levels keep their meaning. The stand-in value is arbitrary, so only
            # interval ends above it carry information (see the exclusion below) and no mean is taken over it.
            floor = logc.min() - 1.0
            logc = np.r_[np.full(int((~pos).sum()), floor), logc]
        # (against a lower bound, draws <= 0 are counted as violations by config_result and decide there)
        rows.append(cfg.params)
        resp.append(logc)
        used.append(cfg.index)
        deltas.append(cfg.delta)
        floors.append(floor)

    n_min = min((len(r) for r in resp), default=0)
    alpha_cfg = SCALING_ALPHA / max(len(resp), 1)
    statistic_note = None
    if how == "mean" and any(np.isfinite(f) for f in floors):
        # log Ĉ = -inf for a draw <= 0: the mean of log Ĉ does not exist, and a mean over stand-ins would move
        # with their arbitrary value. The median of log Ĉ exists; its exact intervals decide instead.
        how = "quantile"
        statistic_note = "median-log: draws <= 0 make the mean of log Ĉ undefined"
        levels = [0.5] * len(resp)
    elif how == "quantile":  # the stated tail: 1 - δ quantile of an upper bound, δ of a lower one
        levels = [1.0 - d if upper else d for d in deltas]
    elif how in ("max", "min"):
        top = worst_level(n_min, alpha_cfg) if n_min else None
        levels = [] if top is None else [top if upper else 1.0 - top] * len(resp)
    else:
        levels = [0.5] * len(resp)  # mean-log: its bootstrap decides; medians only for the still-growing test
    if levels:
        # A configuration whose tracked quantile may itself be a draw <= 0 (its interval's upper end is a
        # stand-in) has Ĉ = 0 at that level: it meets the bound for every constant and says nothing about a
        # slope, and its arbitrary stand-in must not pull the fit down. Excluded and listed; the other
        # stand-ins only widen the box of intervals (lower ends), which errs toward inconclusive.
        keep = [j for j in range(len(resp)) if not (np.isfinite(floors[j])
                and quantile_interval(resp[j], levels[j], alpha_cfg)[1] <= floors[j])]
        zero_configs += [used[j] for j in range(len(resp)) if j not in keep]
        rows, resp, used, deltas, levels = ([xs[j] for j in keep] for xs in (rows, resp, used, deltas, levels))
        n_min = min((len(r) for r in resp), default=0)
    names = [k for k in claim.params if len({r[k] for r in rows}) > 1 and all(r[k] > 0 for r in rows)]
    out: dict[str, Any] = {"shape": shape.text, "constants": list(chk.constants), "tolerance": chk.tolerance,
                           "statistic": chk.statistic, "configs_used": used, "fitted": False,
                           "implied_constant": [float(np.exp(reducer(how, q if how == "quantile" else None)(r)))
                                                  for r, q in zip(resp, levels or [None] * len(resp))],
                           "draws_min": n_min}
    if levels and how != "mean":
        out["quantile_level"] = levels[0] if len(set(levels)) == 1 else levels
    if statistic_note:
        out["statistic_used"] = statistic_note
    if zero_configs:
        out["zero_configs"] = sorted(zero_configs)  # Ĉ = 0 at the tracked level: bound met, not fitted
    if not names or len(rows) <= len(names):
        out.update(verdict="inconclusive", reason=f"need more configurations than swept parameters {names}")
        return out
    if not levels:
        need = draws_for_quantile(0.5, alpha_cfg)
        out.update(verdict="inconclusive", min_draws=need,
                   reason=f"a worst-case statistic needs at least {need} draws per configuration to bound even the "
                          f"median of Ĉ at {1 - SCALING_ALPHA:g} (has {n_min})")
        return out
    # A parameter whose regime is toward 0 is fitted in log(1/x): slopes, intervals and the still-growing test
    # then all look the way the statement does (a lower bound Omega(delta) met by delta^2 shows as decay in 1/delta).
    sign = np.array([-1.0 if k in chk.limits else 1.0 for k in names])
    log_x = np.log(np.array([[r[k] for k in names] for r in rows], dtype=float)) * sign
    try:
        qfit, lo, hi = fit_quantile_scaling(names, log_x, resp, levels, SCALING_ALPHA)
        if how == "mean":
            fit = fit_scaling(names, log_x, resp, n_boot=SCALING_BOOT, alpha=SCALING_ALPHA, seed=0, reduce="mean")
        else:
            fit = qfit
    except ValueError as exc:  # e.g. two swept parameters that move together: their exponents are not separable
        out.update(verdict="inconclusive", reason=f"scaling fit impossible: {exc}")
        return out
    mid = {k: float(np.exp(np.mean(np.log([r[k] for r in rows])))) for k in names}
    claimed = {k: sg * shape.log_elasticity(k, {**{p: rows[0][p] for p in rows[0]}, **mid})
               for k, sg in zip(names, sign)}
    whole = scaling_verdict(fit, relation=chk.relation, tolerance=chk.tolerance)
    ys = np.array([np.quantile(r, q) for r, q in zip(resp, levels)])
    top = _top_slopes(names, log_x, resp, how, ys, lo, hi)
    consts = [float(np.exp(reducer(how, q if how == "quantile" else None)(r)))
              for r, q in zip(resp, levels if how == "quantile" else [None] * len(resp))]
    logs = _log_growth(names, log_x, ys, lo, hi, upper)
    verdict, why, extend = _persistence(names, fit, top, logs, upper, chk.tolerance, log_x, sign, consts)
    out.update(
        fitted=True,
        whole_sweep_verdict=whole,  # the whole-sweep slope's verdict: growth at the bottom alone never refutes
        top_slopes=top,
        interval_level=1 - SCALING_ALPHA,
        interval="bootstrap (mean)" if how == "mean" else "order-statistic box (exact, Bonferroni)",
        swept=names,
        toward_zero=[k for k in names if k in chk.limits],  # slopes of these are in log(1/k)
        implied_constant_slopes={k: float(s) for k, s in zip(names, fit.slopes)},
        slope_ci={k: [float(a), float(b)] for k, a, b in zip(names, fit.ci_low, fit.ci_high)},
        claimed_exponents=claimed,
        fitted_exponents={k: float(s) + claimed[k] for k, s in zip(names, fit.slopes)},
        implied_constant_max=float(max(np.exp(r.max()) for r in resp)),
        implied_constant_min=float(min(np.exp(r.min()) for r in resp)),
    )
    if why:
        out["reason"] = why
    if extend:
        out["extend"] = extend  # where a longer sweep would decide: the runner doubles these (extend_sweeps)
    if how != "mean" and verdict == "inconclusive" and not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        need = max(draws_for_quantile(q, alpha_cfg) for q in set(levels))
        out.update(min_draws=need, reason=f"too few draws to bound the {levels[0]:g} quantile of Ĉ at "
                                          f"{1 - SCALING_ALPHA:g}: {need} per configuration decide (has {n_min})")
    rising = _still_growing(names, log_x, lo, hi, upper) if verdict != "violated" else {}
    if rising:  # (a violated fit already says the constant grows)
        out["still_growing"] = rising
        if verdict == "holds":
            verdict = "inconclusive"
            out["reason"] = ("implied constant still rising at the top of the sweep "
                             + ", ".join(f"{k} (local slope >= {v:.3g})" for k, v in rising.items()))
    # the decades of each swept parameter the verdict rests on (of 1/x for a parameter whose regime is toward 0)
    out["decades"] = {k: float(np.ptp(log_x[:, j]) / math.log(10.0)) for j, k in enumerate(names)}
    if logs:
        out["log_growth"] = logs
        out["log_exponent_max"] = {k: v["b_ci"][1] for k, v in logs.items()}  # the largest b the sweep could miss
    # the largest power slope of growth (for a lower bound: of decay) the sweep could have missed
    out["slope_max"] = {k: float(h if upper else -lw) for k, lw, h in zip(names, fit.ci_low, fit.ci_high)}
    growing = {k: v for k, v in logs.items() if v["growing"]}
    out["power_law_verdict"] = verdict  # the slope and still-growing tests alone, before the log-growth test
    if growing and verdict != "violated":  # (a violated power-law fit already says the constant grows)
        out["log_growth_flag"] = True
        k, g = max(growing.items(), key=lambda kv: kv[1]["b"])
        what = (f"implied constant {'grows' if upper else 'decays'} like (log {k})^{'' if upper else '-'}b: b = {g['b']:.2g} "
                f"[{g['b_ci'][0]:.2g}, {g['b_ci'][1]:.2g}] over {g['decades']:.1f} decades, "
                f"{g['b_top']:.2g} [{g['b_top_ci'][0]:.2g}, {g['b_top_ci'][1]:.2g}] at the top")
        if any(v["decisive"] for v in growing.values()):
            verdict = "violated"
            out["reason"] = what + "; no constant converging from below fits (concave in log log x rejected)"
        else:
            verdict = "inconclusive"
            out["reason"] = (what + (f"; {out['reason']}" if out.get("reason") else "")
                             + "; convergence not ruled out")
    out["verdict"] = verdict
    return out


def _top_slopes(names: list[str], log_x: np.ndarray, resp: list[np.ndarray], how: str, ys: np.ndarray,
                lo: np.ndarray, hi: np.ndarray) -> dict[str, dict[str, Any]]:
    """The local exponent of Ĉ at the top of the sweep, per swept parameter: the fit restricted to the
    configurations in that parameter's top decade (stats.top_window), with the other swept parameters as
    covariates where they vary there. Quantile statistics bound it over the same simultaneous box of intervals
    as the whole-sweep fit (no further error); mean-log bootstraps the window's mean (as its whole fit does)."""
    out: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(names):
        sel = np.flatnonzero(top_window(log_x[:, k]))
        sub = log_x[sel]
        cols = [c for c in range(len(names)) if np.ptp(sub[:, c]) > 1e-12]
        design = np.column_stack([np.ones(len(sel)), sub[:, cols]])
        if len(sel) <= len(cols) or np.linalg.matrix_rank(design) < design.shape[1]:
            # the other parameters do not separate there: the line through the top configuration
            t = sel[np.argmax(sub[:, k])]
            others = [c for c in range(len(names)) if c != k]
            sel = np.array([j for j in sel if np.all(log_x[j, others] == log_x[t, others])])
            cols = [k]
            if len(np.unique(log_x[sel, k])) < 2:
                continue
        col = cols.index(k)
        if how == "mean":
            try:
                f = fit_scaling([names[c] for c in cols], log_x[np.ix_(sel, cols)], [resp[j] for j in sel],
                                n_boot=SCALING_BOOT, alpha=SCALING_ALPHA, seed=0, reduce="mean")
            except ValueError:
                continue
            slope, low, high = float(f.slopes[col]), float(f.ci_low[col]), float(f.ci_high[col])
        else:
            slope, low, high = box_slope_interval(log_x[np.ix_(sel, cols)], ys[sel], lo[sel], hi[sel], col)
        out[name] = {"slope": slope, "ci": [low, high], "configs": [int(j) for j in sel],
                     "from": float(log_x[sel, k].min()), "to": float(log_x[sel, k].max()),
                     "decades": float(np.ptp(log_x[sel, k]) / math.log(10.0))}
    return out


def _persistence(names: list[str], fit: Any, top: dict[str, dict[str, Any]], logs: dict[str, dict[str, Any]],
                 upper: bool, tol: float,
                 log_x: np.ndarray, sign: np.ndarray, consts: list[float]) -> tuple[str, str, dict[str, float]]:
    """The scaling verdict from where the sweep ends. Per swept parameter (growth of Ĉ for an upper bound, of 1/Ĉ
    for a lower one): it grows when the local exponent over the top decade excludes the tolerance (the
    whole-sweep slope only where no top fit exists); it is flat when the whole-sweep slope or the top one lies
    within the tolerance, the top one only on a plateau (its log exponent over the top decade at most
    LOG_PLATEAU_B: slow growth like sqrt(log x) flattens the power slope without one). violated: some parameter
    grows; holds: every one is flat; else inconclusive. A slope
    that excludes the tolerance over the whole sweep but not at the top is a rise that slows down: the reason
    says so, and `extend` names the values of a longer sweep (doubling the parameter) that would decide it.
    Returns (verdict, reason, extend)."""
    grows, flat, reasons, extend = [], [], [], {}
    word = "grows" if upper else "shrinks"
    for j, k in enumerate(names):
        w = [float(fit.slopes[j]), float(fit.ci_low[j]), float(fit.ci_high[j])]
        if not upper:
            w = [-w[0], -w[2], -w[1]]
        t = top.get(k)
        tv = None
        if t is not None:
            tv = [t["slope"], t["ci"][0], t["ci"][1]] if upper else [-t["slope"], -t["ci"][1], -t["ci"][0]]
        g = tv[1] > tol if tv is not None else w[1] > tol
        b_hi = logs.get(k, {}).get("b_topdec_ci", [math.nan, math.nan])[1]
        plateau = tv is not None and tv[2] <= tol and b_hi <= LOG_PLATEAU_B
        f = w[2] <= tol or plateau
        grows.append(g)
        flat.append(f)
        if tv is None:
            continue
        a, b = (float(np.exp(sign[j] * v)) for v in (t["from"], t["to"]))
        c_top = [consts[i] for i in t["configs"]]
        span = f"{k} = {min(a, b):.4g}..{max(a, b):.4g}"
        local = f"local slope {tv[0]:.3g} [{tv[1]:.3g}, {tv[2]:.3g}] over {span}"
        if g:
            reasons.append(f"implied constant {word} at the top of the sweep: {local}, beyond the tolerance {tol:g} "
                           f"(Ĉ {min(c_top):.4g} to {max(c_top):.4g} there)")
        elif w[2] > tol and (f or w[1] > tol):  # the whole sweep does not rule out growth; its top decides
            rise = (f"Ĉ {word} with {k} over the sweep (slope {w[0]:.3g} [{w[1]:.3g}, {w[2]:.3g}])" if w[1] > tol
                    else f"Ĉ's slope in {k} over the sweep, {w[0]:.3g} [{w[1]:.3g}, {w[2]:.3g}], leaves growth open")
            if f:
                reasons.append(f"{rise}{' and the rise stops' if w[1] > tol else '; its top is a plateau'}: {local}, "
                               f"within the tolerance {tol:g}, log exponent at "
                               f"most {b_hi:.2g} there; the constant that fits every configuration is "
                               f"Ĉ = {max(consts) if upper else min(consts):.4g}")
            else:  # the rise over the whole sweep is significant, its top says neither growth nor a plateau
                why = ("a log factor (log " + k + f")^b with b up to {b_hi:.2g} is not ruled out there"
                       if tv[2] <= tol else "it decides neither growth nor a plateau")
                top_x = float(np.exp(sign[j] * log_x[:, j].max()))
                top_x = float(round(top_x)) if abs(top_x - round(top_x)) <= 1e-9 * top_x else top_x
                extend[k] = top_x / 2.0 if sign[j] < 0 else top_x * 2.0
                reasons.append(f"{rise}, but the slope falls along it: {local}; {why} (a sweep beyond "
                               f"{k} = {top_x:.4g} would decide)")
        elif w[2] > tol:  # neither the whole sweep nor its top excludes the tolerance, nor lies within it
            reasons.append(f"Ĉ's slope in {k}, {w[0]:.3g} [{w[1]:.3g}, {w[2]:.3g}] over the sweep and {local}, "
                           f"neither excludes the tolerance {tol:g} nor lies within it: narrower intervals (more "
                           f"draws a configuration) or more levels of {k} would decide")
    verdict = "violated" if any(grows) else "holds" if all(flat) else "inconclusive"
    if verdict == "violated":
        reasons = [r for r in reasons if r.startswith("implied constant")] or reasons
    return verdict, "; ".join(reasons), extend


# Logarithmic growth (stats.log_growth_test): along each swept parameter, the implied constant's tracked statistic
# in s = log log x. It is "growing" (flag log-growth, never holds) when the log exponent's lower interval end
# exceeds LOG_GROWTH_B_TOP over the top two thirds of the sweep, or LOG_GROWTH_B over the whole sweep, unless the
# last step shows it has flattened (its exponent's upper end at most LOG_GROWTH_B_TOP: deceleration, which true
# log growth with b > LOG_GROWTH_B_TOP shows with probability at most SCALING_ALPHA): growth
# like (log x)^b that a power-law slope under the tolerance cannot see. It is "decisive" (violated) when besides
# no function concave in log log x fits the intervals (every constant converging from below is concave there) over
# at least LOG_VIOLATED_DECADES decades. Exact under the box: a flat constant is flagged, and a constant converging
# at a rate (log x)^-beta or x^-gamma (gamma >= 1/4) reads violated, with probability at most SCALING_ALPHA.
# Calibrated in docs/calibration.md (constants converging like 1 - 1/log m reach whole-sweep exponents near 0.15).
LOG_GROWTH_B_TOP = 0.1
LOG_GROWTH_B = 0.2
# A plateau: the log exponent b of Ĉ over the top decade is at most LOG_PLATEAU_B (upper interval end). sqrt(log x)
# has b = 1/2 everywhere and log log x has b = 1/log log x >= 0.32 up to x = 4e9, so with the box covering (probability
# >= 1 - SCALING_ALPHA) neither shows one; a constant converging like 2 - x^-1/2 has b = 0.10 from x = 64 to 512 and
# less above. Growth that slows at the top of the sweep reads holds only on a plateau (else the runner extends the
# sweep), and a plateau clears the log-growth flag.
LOG_PLATEAU_B = 0.25
LOG_VIOLATED_DECADES = 3.0


def _log_growth(names: list[str], log_x: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                upper: bool) -> dict[str, dict[str, Any]]:
    """stats.log_growth_test along each swept parameter, on the line (other swept parameters fixed) with the
    most values of it. For a lower bound the constant's decay matters: the test runs on -log Ĉ."""
    if not upper:
        y, lo, hi = -y, -hi, -lo
    out: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(names):
        others = np.delete(log_x, k, axis=1)
        groups: dict[tuple[float, ...], list[int]] = {}
        for j, row in enumerate(others):
            groups.setdefault(tuple(row), []).append(j)
        idx = max(groups.values(), key=lambda g: (len({log_x[j, k] for j in g}), len(g)))
        if len({log_x[j, k] for j in idx}) < len(idx):
            continue
        res = log_growth_test(log_x[idx, k], y[idx], lo[idx], hi[idx])
        if res is None:
            continue
        res["direction"] = "growth" if upper else "decay"  # b is the exponent of Ĉ (of 1/Ĉ for a lower bound)
        res["growing"] = bool((res["b_top_ci"][0] > LOG_GROWTH_B_TOP or res["b_ci"][0] > LOG_GROWTH_B)
                              and res["b_last_ci"][1] > LOG_GROWTH_B_TOP
                              and not res["b_topdec_ci"][1] <= LOG_PLATEAU_B)
        res["decisive"] = bool(res["growing"] and res["concave_rejected"]
                               and res["concave_decades"] >= LOG_VIOLATED_DECADES)
        out[name] = res
    return out


# An implied constant whose quantile rises, at the top of a sweep, by more than STILL_GROWING_SLOPE per unit of
# log(parameter) beyond its intervals has not settled: a power-law slope under the tolerance (0.1) cannot see
# growth like sqrt(log m) (local slope 1/(2 log m) ≈ 0.05 at m = 32768) or m^0.05, while a constant converging
# from below like 1 - m^-1/2 rises at a local slope m^-1/2 / 2 (0.005 from m = 4096 to 32768). Calibrated in
# docs/calibration.md: at 0.02, sqrt(log m) read "holds" in 3% of seeds; at 0.01 in none, converging never flagged.
STILL_GROWING_SLOPE = 0.01
# ... and by more than 3% in all (log rise 0.03): a bounded domain's last few percent (a scalar lemma's Ĉ going
# 0.0532 -> 0.0545 from theta = 0.3 to 1, away from its asymptotic theta -> 0) is not growth; sqrt(log m) rises 12%
# from m = 4096 to 32768 (flagged in 60/60 calibration seeds at 0.03, 55/60 at 0.05).
STILL_GROWING_RISE = 0.03


def _still_growing(names: list[str], log_x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   upper: bool) -> dict[str, float]:
    """Swept parameters along which the top configuration's quantile interval lies above the interval at the
    next-lower value (other swept parameters equal) by more than STILL_GROWING_RISE in log and more than
    STILL_GROWING_SLOPE per unit log x. Uses the
    fit's simultaneous intervals, so a Ĉ that does not increase is flagged with probability at most the fit's
    SCALING_ALPHA (for a lower bound: a Ĉ still falling)."""
    out: dict[str, float] = {}
    for k, name in enumerate(names):
        others = np.delete(log_x, k, axis=1)
        top = log_x[:, k].max()
        best = -np.inf
        for t in np.flatnonzero(log_x[:, k] == top):
            same = np.flatnonzero(np.all(others == others[t], axis=1) & (log_x[:, k] < top))
            if not same.size:
                continue
            p = same[np.argmax(log_x[same, k])]
            rise = (lo[t] - hi[p]) if upper else (lo[p] - hi[t])
            if rise > STILL_GROWING_RISE:
                best = max(best, rise / (top - log_x[p, k]))
        if np.isfinite(best) and best > STILL_GROWING_SLOPE:
            out[name] = float(best)
    return out


# Regime paths. A violation that fades as the width grows (along the claim's declared path) is a finite-width
# effect: the verdict keeps what the draws show but is flagged "finite-width" and never reads plain "violated".
# Fading is a one-sided Cochran-Armitage test for a falling violation rate across the levels (scores log level)
# at TREND_ALPHA: a rate that is constant along the path is called fading with probability <= TREND_ALPHA
# (tests/test_findings.py). A scaling claim is fitted at each level separately; its violation fades when the
# bottom level's fit reads violated and the top level's does not, or the steepest implied-constant slope's
# interval at the top level lies below the bottom level's.
TREND_ALPHA = 0.01


def _path_configs(path: Any, configs: list[ConfigResult], level: float, exact: bool = True) -> list[int]:
    """Indices of the configurations at `level` of the path (its `at` values; exact: the other parameters at
    the path's own configuration too, else any value: a scaling claim's sweep at that level)."""
    out = []
    for i, c in enumerate(configs):
        p = c.params
        if p.get(path.param) != level or any(p.get(k) != v for k, v in path.at.items()):
            continue
        out.append(i)
    return out[:1] if exact else out


def cochran_armitage_decrease(violations: list[int], totals: list[int], scores: list[float]) -> float:
    """One-sided p-value of the Cochran-Armitage test that the violation rate falls as the score rises."""
    v, n, x = (np.asarray(a, dtype=float) for a in (violations, totals, scores))
    if n.sum() == 0:
        return 1.0
    pbar = v.sum() / n.sum()
    if pbar in (0.0, 1.0):
        return 1.0
    t = float(np.sum(x * (v - n * pbar)))
    var = pbar * (1 - pbar) * (float(np.sum(n * x**2)) - float(np.sum(n * x)) ** 2 / float(n.sum()))
    if var <= 0:
        return 1.0
    return float(0.5 * math.erfc(-(t / math.sqrt(var)) / math.sqrt(2)))  # P(Z <= z)


def regime_trend(claim: Claim, configs: list[ConfigResult], samples: list[np.ndarray], path: Any,
                 scaling: dict[str, Any] | None = None) -> dict[str, Any]:
    """Whether a violation persists along the declared regime path: 'fades', 'persists', 'no violation' or
    'incomplete' (a level did not run), with the per-level numbers behind it. For a scaling claim each level's fit
    sweeps the other parameters; growth along the path's own parameter is the claim's fit (`scaling`), reported
    beside them as `along` (its verdict and local slope at the top), so the line agrees with the verdict."""
    out: dict[str, Any] = {"param": path.param, "levels": list(path.levels), "at": dict(path.at),
                           "path": path.describe(), "alpha": TREND_ALPHA}
    if claim.mode == "scaling":
        fits = []
        for lev in path.levels:
            idx = _path_configs(path, configs, lev, exact=False)
            fit = _scaling_fit(claim, [configs[i] for i in idx], [samples[i] for i in idx]) if len(idx) >= 2 else None
            fits.append(fit)
        along = None
        if scaling and scaling.get("fitted") and path.param in scaling.get("swept", []):
            t = (scaling.get("top_slopes") or {}).get(path.param)
            upper = claim.check is not None and claim.check.relation in ("<=", "<")
            tol = scaling.get("tolerance", 0.1)
            grows = t is not None and (t["ci"][0] > tol if upper else t["ci"][1] < -tol)
            grows = grows or bool((scaling.get("log_growth") or {}).get(path.param, {}).get("decisive"))
            along = {"verdict": scaling["verdict"], "slope": None if t is None else t["slope"],
                     "ci": None if t is None else t["ci"], "grows": bool(grows and scaling["verdict"] == "violated")}
            out["along"] = along
        if any(f is None or not f.get("fitted") for f in fits):
            if along is not None:  # one configuration per level: the claim's own fit along the path decides
                trend = "persists" if along["grows"] else "no violation"
                return dict(out, trend=trend, verdicts=[], reason="each level has one configuration")
            return dict(out, trend="incomplete", reason="a level has fewer than two fitted configurations")
        verdicts_ = [f["verdict"] for f in fits]
        out["verdicts"] = verdicts_
        out["slopes"] = [f.get("implied_constant_slopes") for f in fits]
        out["slope_ci"] = [f.get("slope_ci") for f in fits]
        bottom, top = fits[0], fits[-1]
        steep = max(bottom["implied_constant_slopes"], key=lambda k: abs(bottom["implied_constant_slopes"][k]))
        lo_b = bottom.get("slope_ci", {}).get(steep, (math.nan, math.nan))[0]
        hi_t = top.get("slope_ci", {}).get(steep, (math.nan, math.nan))[1]
        if along is not None and along["grows"]:
            trend = "persists"  # Ĉ grows along the path's own parameter at the top of its sweep
        elif "violated" not in verdicts_:
            trend = "no violation"
        elif verdicts_[0] == "violated" and verdicts_[-1] != "violated" or hi_t < lo_b:
            trend = "fades"
        else:
            trend = "persists"
        out.update(trend=trend, statistic=f"implied-constant slope in {steep}", bottom_low=lo_b, top_high=hi_t)
        return out
    rows = []
    defaults = {p.name: p.default for p in claim.params.values()}
    for lev, want in zip(path.levels, path.configs(defaults)):
        # the path's own configuration (the other parameters at `at` or their defaults), else any at this level
        idx = [i for i, c in enumerate(configs) if all(c.params.get(k) == v for k, v in want.items())]
        idx = idx or _path_configs(path, configs, lev)
        if not idx:
            return dict(out, trend="incomplete", reason=f"no configuration at {path.param} = {lev:g}")
        rows.append(configs[idx[0]])
    v, n = [c.violations for c in rows], [c.replicates for c in rows]
    out.update(slack_median=[c.slack_median for c in rows], slack_min=[c.slack_min for c in rows],
               verdicts=[c.verdict for c in rows], **violation_trend(v, n, list(path.levels)))
    return out


def violation_trend(violations: list[int], totals: list[int], levels: list[float]) -> dict[str, Any]:
    """The one rule for "does a violation persist as the width grows", for a run's regime path and a hunt's replay
    of its counterexample alike: 'fades' when the violation rate decreases along log(level) (one-sided
    Cochran-Armitage, TREND_ALPHA), 'persists' when it does not and the widest level still violates, 'undecided'
    when violations stop before the widest level without a significant decrease (too few draws to tell),
    'no violation' when none does."""
    rates = [vi / ni if ni else math.nan for vi, ni in zip(violations, totals)]
    pval = cochran_armitage_decrease(violations, totals, [math.log(max(lev, 1e-300)) for lev in levels])
    if not any(violations):
        trend = "no violation"
    elif pval < TREND_ALPHA and rates[-1] < rates[0]:
        trend = "fades"
    elif violations[-1] > 0:
        trend = "persists"
    else:
        trend = "undecided"
    return {"violations": list(violations), "replicates": list(totals), "rates": rates, "p_decrease": pval,
            "trend": trend}


def trend_text(t: dict[str, Any]) -> str:
    """One line: the measured trend along the regime path."""
    if t.get("trend") == "incomplete":
        return f"regime path {t['path']}: incomplete ({t.get('reason', '')})"
    if "rates" in t:
        vals = ", ".join(f"{v}/{n}" for v, n in zip(t["violations"], t["replicates"]))
        return (f"regime path {t['path']}: violations {vals}; {t['trend']} (one-sided trend p = "
                f"{t['p_decrease']:.2g} vs {t['alpha']:g})")
    along = t.get("along")
    if along is not None:
        slope = ("" if along.get("slope") is None else
                 f"Ĉ local slope at the top {along['slope']:.3g} [{along['ci'][0]:.3g}, {along['ci'][1]:.3g}], ")
        what = "the claim's violation" if along["grows"] else "no violation along it"
        levels = f"per-level fits of the other parameters {t.get('verdicts')}; " if t.get("verdicts") else ""
        return f"regime path {t['path']}: {levels}along {t['param']}: {slope}{what}; {t['trend']}"
    return f"regime path {t['path']}: per-level fits {t.get('verdicts')}; {t['trend']}"


def claim_result(claim: Claim, configs: list[ConfigResult], samples: list[np.ndarray] | None = None,
                 profile: str = "quick") -> ClaimResult:
    if claim.mode == "infeasible":
        return ClaimResult(claim, "infeasible", [], [], None, None, claim.infeasible, profile)
    flags: list[str] = []
    scaling = None
    inside = [c for c in configs if c.in_regime]
    outside = [c for c in configs if not c.in_regime]
    if claim.mode == "scaling":
        scaling = scaling_analysis(claim, configs, samples or [])
        verdict = scaling["verdict"]
        if "flag" in scaling:
            flags.append(scaling["flag"])
        # Non-positive draws against a positive lower bound refute every constant: they decide beside the fit.
        decide = inside if scaling.get("regime", "").startswith("in-regime") else configs
        per_config = _aggregate([c.verdict for c in decide])
        if per_config is not None and ORDER[per_config] > ORDER[verdict]:
            verdict = per_config
        if any(c.nonpositive for c in configs):
            flags.append("non-positive")
        if scaling.get("log_growth_flag"):
            flags.append("log-growth")
        if scaling.get("still_growing"):
            flags.append("still-growing")
    else:
        v_in, v_out = _aggregate([c.verdict for c in inside]), _aggregate([c.verdict for c in outside])
        if inside:
            # The stated regime decides (inconclusive when no in-regime draw met the statement's hypotheses).
            verdict = v_in or "inconclusive"
            if v_out == "violated":
                flags.append("violated-out-of-regime")  # informative, never a refutation
        else:
            verdict = v_out or "inconclusive"
            flags.append("out-of-regime")
    if configs and all(c.vacuous for c in configs):
        flags.append("vacuous")
    elif any(c.vacuous for c in configs):
        flags.append("partly-vacuous")
    if any(c.errors for c in configs):
        # A failed estimator or a NaN draw leaves a hole where a violation could be: never "holds". A
        # violation found by error-free configurations (a counterexample, a significant rate) still stands;
        # a scaling fit with a missing configuration decides nothing.
        flags.append("errors")
        clean_violation = any(c.verdict == "violated" and not c.errors for c in configs)
        if verdict != "violated" or not clean_violation:
            verdict = "inconclusive"
    if any(c.conditioning_failures for c in configs):
        flags.append("conditioned")
    cands = [c for c in configs if c.slack_min is not None]
    # a vacuous configuration (probability 1 - delta <= 0, no finite bound) refutes nothing: never the worst
    cands = [c for c in cands if not c.vacuous] or cands
    worst = min(cands, key=lambda c: c.slack_min).index if cands else None
    prof = claim.profiles.get(profile)
    trend = None
    if prof is not None and prof.regime_path is not None and configs:
        trend = regime_trend(claim, configs, samples or [], prof.regime_path, scaling)
        if verdict == "violated" and trend["trend"] == "fades":
            flags.append("finite-width")  # fades as the width grows: a lead, never a plain refutation
    elif claim.mode == "probabilistic" and verdict == "violated":
        trend = width_trend(claim, inside or configs)
        if trend is not None and trend["trend"] == "fades":
            flags.append("finite-width")
    return ClaimResult(claim, verdict, flags, configs, scaling, worst, profile=profile, regime_path=trend)


# A probabilistic claim with no declared regime path is tested along its width all the same: the first of these
# that it declares (a paper's other names for a width declare a regime_path).
WIDTH_PARAMS = ("m", "width")


def width_trend(claim: Claim, configs: list[ConfigResult]) -> dict[str, Any] | None:
    """The trend test of a declared regime path, by default: the configurations that differ only in the width
    (WIDTH_PARAMS; the same other parameters and pinned dataset) form a path along its levels, and each path
    holding a violated configuration is tested (violation_trend). 'fades' only when every such path fades (a
    violation at a width that nothing wider was drawn beside, or that persists, keeps the verdict plain
    "violated"); the path shown is the one with the most violations. None without a width parameter, or
    when no violated configuration has a wider or narrower sibling."""
    width = next((w for w in WIDTH_PARAMS if w in claim.params), None)
    if width is None:
        return None
    groups: dict[str, list[ConfigResult]] = {}
    for c in configs:
        if width in c.params:
            key = json.dumps([{k: v for k, v in c.params.items() if k != width}, c.pinned], sort_keys=True,
                             default=str)
            groups.setdefault(key, []).append(c)
    paths = []
    for c in configs:
        if c.verdict != "violated" or width not in c.params:
            continue
        rows = sorted(groups[json.dumps([{k: v for k, v in c.params.items() if k != width}, c.pinned],
                                        sort_keys=True, default=str)], key=lambda r: r.params[width])
        levels = [r.params[width] for r in rows]
        if len(set(levels)) < 2:
            return None  # a violation with no sibling along the width: nothing says it fades
        t = violation_trend([r.violations for r in rows], [r.replicates for r in rows], levels)
        at = {k: v for k, v in rows[0].params.items() if k != width}
        paths.append(dict(t, param=width, levels=levels, at=at, alpha=TREND_ALPHA, default=True,
                          path=f"{width} = " + ", ".join(f"{v:g}" for v in levels) + " at "
                          + ", ".join(f"{k} = {v:g}" for k, v in at.items()) + " (default: the width levels)",
                          slack_min=[r.slack_min for r in rows], verdicts=[r.verdict for r in rows]))
    if not paths:
        return None
    keep = [t for t in paths if t["trend"] != "fades"] or paths  # "fades" only when every path does
    return dict(max(keep, key=lambda t: sum(t["violations"])), paths=len(paths))


def false_violation_bound(res: ClaimResult) -> float:
    """An upper bound on the chance that this claim reads "violated" while true, from its in-regime tests:
    α/2 per probabilistic configuration (one side of the two-sided Clopper–Pearson interval; α for the
    anytime-valid sequence, which is not split evenly; 3α/2 for an early-stopping configuration, whichever way it
    ended: its verdict is wrong only if the sequence ever excluded the true rate (α) or the full-size interval did
    (α/2), a union bound), SCALING_ALPHA/2 per scaling fit (the lower ends of its
    simultaneous interval box) plus α/2 per configuration whose non-positive draws are tested against δ;
    a fit that ran the log-growth test charges SCALING_ALPHA in all (its concavity test uses both ends of the
    box: any failure of the box's coverage), and a mean-log fit SCALING_ALPHA/2 more (its slope comes from a
    bootstrap, not from the box). Comparisons of deterministic claims are exact up to rounding: 0. A mean-log
    fit's bootstrap is approximate: its SCALING_ALPHA/2 is nominal."""
    if res.claim.mode == "infeasible":
        return 0.0
    inside = deciding(res.configs)
    total = 0.0
    if res.claim.mode == "probabilistic":
        total += sum(1.5 * DEFAULT_ALPHA if c.sequential else DEFAULT_ALPHA if c.interval == "confidence-sequence"
                     else DEFAULT_ALPHA / 2 for c in inside)
    elif res.claim.mode == "scaling":
        if res.scaling and res.scaling.get("fitted"):
            boot = res.scaling.get("interval", "").startswith("bootstrap")
            total += SCALING_ALPHA * (0.5 * boot + 1.0) if res.scaling.get("log_growth") else SCALING_ALPHA / 2
        total += sum(DEFAULT_ALPHA / 2 for c in inside if c.delta > 0)
    return float(total)


def family_wise_bound(results: list[ClaimResult]) -> dict[str, Any]:
    """Run level (Bonferroni over every claim kind): P(any true claim reads "violated") <= the sum of the
    claims' false_violation_bound, whatever the dependence between them."""
    by_mode: dict[str, float] = {}
    for r in results:
        by_mode[r.claim.mode] = by_mode.get(r.claim.mode, 0.0) + false_violation_bound(r)
    return {"bound": float(sum(by_mode.values())), "by_mode": by_mode, "alpha_per_config": DEFAULT_ALPHA,
            "scaling_alpha_per_claim": SCALING_ALPHA,
            "holds_means": "not refuted at this confidence (never a proof): a probabilistic claim's violation-rate "
                           "interval lies below delta; a scaling claim's implied-constant slope interval lies below "
                           "its tolerance and the constant has stopped rising"}
