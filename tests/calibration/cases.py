"""Claims of exactly known truth, run through the real runner.

Each Case is a claim file (TOML) over a quantity of tests/calibration/extension.py, its true state ("true" or
"false") and, where one exists, the exact probability of each verdict (probabilistic claims: a binomial sum
over the Clopper-Pearson decision). Shared by tests/calibration/test_calibration.py (fixed seeds, cheap) and
scripts/calibration.py (many seeds, the published table in docs/calibration.md).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as sps

from lemmacheck.claims import parse_claim
from lemmacheck.runner import evaluate, run_claims
from lemmacheck.stats import DEFAULT_ALPHA, clopper_pearson
from lemmacheck.store import Store
from lemmacheck.verdicts import ClaimResult

from . import extension  # noqa: F401 - registers the calibration quantities

DELTA = 0.1


def _toml(name: str, quantity: str, relation: str, bound: str, probability: str, args: str, params: str,
          grid: str, replicates: int, extra: str = "", dtype: str = "float64") -> str:
    return f'''
id = "calib/{name}"
paper = "calib"
result = "Calibration"
title = "{name}"
statement = "known truth"
kind = "calibration"
network = "scalar"
notes = "calibration case"

[params]
{params}

[check]
quantity = "{quantity}"
relation = "{relation}"
bound = "{bound}"
probability = "{probability}"
args = {{ {args} }}
dtype = "{dtype}"
{extra}

[profiles.quick]
replicates = {replicates}
shard_size = {replicates}
grid = {{ {grid} }}

[profiles.full]
replicates = {replicates}
shard_size = {replicates}
grid = {{ {grid} }}
'''


@dataclass(frozen=True)
class Case:
    name: str
    truth: str  # "true" or "false": the claim's exact state
    text: str
    replicates: int
    configs: int = 1
    rate: float | None = None  # probabilistic: the exact violation rate (exact verdict probabilities exist)
    what: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)

    def claim(self):
        return parse_claim(tomllib.loads(self.text), Path(f"calib/{self.name}.toml"))

    def exact(self) -> dict[str, float] | None:
        """P(verdict) for a one-configuration probabilistic claim: sum over k ~ Bin(n, rate) of the CP decision."""
        if self.rate is None:
            return None
        n = self.replicates
        k = np.arange(n + 1)
        pk = sps.binom.pmf(k, n, self.rate)
        ends = np.array([clopper_pearson(int(i), n, DEFAULT_ALPHA) for i in k])
        return {"holds": float(pk[ends[:, 1] < DELTA].sum()), "violated": float(pk[ends[:, 0] > DELTA].sum()),
                "inconclusive": float(pk[(ends[:, 1] >= DELTA) & (ends[:, 0] <= DELTA)].sum())}


def _rate_case(factor: float, n: int) -> Case:
    text = _toml(f"rate-{factor:g}delta-n{n}", "calib-bernoulli", "<=", "0.5", f"1 - {DELTA}",
                 f"rate = {factor * DELTA!r}", "x = { values = [1] }", "x = [1]", n)
    return Case(f"violation rate {factor:g} delta, n = {n}", "true" if factor <= 1 else "false", text, n,
                rate=factor * DELTA, what="probabilistic")


SCALING_PARAMS = "m = { values = [64, 512, 4096, 32768] }"
SCALING_GRID = "m = [64, 512, 4096, 32768]"


def _scaling_case(growth: str, truth: str, relation: str = "<=", probability: str = f"1 - {DELTA}", n: int = 200,
                  extra_args: str = "", statistic: str = "", what: str = "", mean_log_reason: bool = False) -> Case:
    args = f'growth = "{growth}", sigma = 0.05{extra_args}'
    extra = 'constants = ["C"]\n' + (f'statistic = "{statistic}"' if statistic else "")
    text = _toml(f"scaling-{growth}-{'upper' if relation == '<=' else 'lower'}{'-always' if probability == 'always' else ''}",
                 "calib-scaling", relation, "C * sqrt(m)", probability, args, SCALING_PARAMS, SCALING_GRID, n, extra)
    if mean_log_reason:  # the validator asks the notes for the reason a claim tracks the typical draw
        text = text.replace('notes = "calibration case"', 'notes = "calibration case: mean-log, the typical draw"')
    return Case(what or f"scaling, C(m) {growth}", truth, text, n, configs=4, what="scaling")


LOG_SIGMA = 0.2  # the implied constant's spread: e^(0.2 Z), the measured case's
LOG_DRAWS = 256
LOG_LEVELS = 8
LOG_M0 = 64


def log_grid(decades: float, levels: int = LOG_LEVELS) -> list[int]:
    """`levels` widths from LOG_M0 up, equally spaced in log m over `decades` decades (6.3: 64 to 1.3e8)."""
    return [round(LOG_M0 * 10 ** (decades * i / (levels - 1))) for i in range(levels)]


def log_case(growth: str, truth: str, decades: float = 6.3, what: str = "") -> Case:
    """C(m) e^(0.2 Z) stated as "<= C with probability 1 - delta" (shape 1: the quantity is the implied constant),
    m over `decades` decades from 64 in LOG_LEVELS levels, LOG_DRAWS draws each."""
    grid = log_grid(decades)
    values = ", ".join(map(str, grid))
    args = f'growth = "{growth}", sigma = {LOG_SIGMA}, power = 0'
    text = _toml(f"log-{growth}-{decades:g}dec", "calib-scaling", "<=", "C", f"1 - {DELTA}", args,
                 f"m = {{ values = [{values}] }}", f"m = [{values}]", LOG_DRAWS, 'constants = ["C"]')
    return Case(what or f"log factor: C(m) {growth}, {decades:g} decades", truth, text, LOG_DRAWS,
                configs=LOG_LEVELS, what="log-scaling")


# The logarithmic cases: C(m) e^(0.2 Z) <= C w.p. 1 - delta, m from 64 to 1.3e8 (6.3 decades) in 8 levels.
LOG_CASES = [
    ("sqrtlog", "false", "log factor: sqrt(log m) e^(0.2 Z) <= C, m 64..1.3e8"),
    ("log", "false", "log factor: log m e^(0.2 Z) <= C, m 64..1.3e8"),
    ("loglog", "false", "log factor: log log m e^(0.2 Z) <= C, m 64..1.3e8"),
    ("conv-sqrt", "true", "log factor: (1 - 1/sqrt m) e^(0.2 Z) <= C, m 64..1.3e8"),
    ("conv-m", "true", "log factor: (1 - 1/m) e^(0.2 Z) <= C, m 64..1.3e8"),
    ("conv-log", "true", "log factor: (1 - 1/log m) e^(0.2 Z) <= C, m 64..1.3e8"),
    ("flat", "true", "log factor: flat constant e^(0.2 Z) <= C, m 64..1.3e8"),
]
# power against the decades swept (scripts/calibration.py): the false cases over these sweeps, 8 levels each
POWER_DECADES = (1.0, 2.0, 3.0, 4.5, 6.3, 9.0)

# Constants rising from far below their limit and saturating (true: a plateau, never violated), and slow growth from
# m = 1 and from m = 16 (false: never holds). The sweep starts where a user's would; the runner may extend it.
H_GRID = [1, 2, 4, 16, 64, 256, 512]
LOGISTIC_GRID = [1, 4, 16, 64, 256, 1024, 4096, 16384]
FROM1_GRID = [1, 4, 16, 64, 256, 1024, 4096]
FROM16_GRID = [16, 64, 256, 1024, 4096, 16384, 65536]
SAT_DRAWS = 200


def grid_case(name: str, what: str, truth: str, grid: list[int], growth: str = "", quantity: str = "calib-scaling",
              bound: str = "C * sqrt(m)", power: float = 0.5, sigma: float = 0.05, draws: int = SAT_DRAWS,
              statistic: str = "", tags: tuple[str, ...] = ()) -> Case:
    """A hidden-constant claim "quantity <= bound w.p. 1 - delta" over `grid` (m), C(m) = `growth`."""
    values = ", ".join(map(str, grid))
    args = f'growth = "{growth}", sigma = {sigma}, power = {power}' if quantity == "calib-scaling" else ""
    extra = 'constants = ["C"]\n' + (f'statistic = "{statistic}"' if statistic else "")
    text = _toml(name, quantity, "<=", bound, f"1 - {DELTA}", args, f"m = {{ values = [{values}] }}",
                 f"m = [{values}]", draws, extra)
    if statistic == "mean-log":
        text = text.replace('notes = "calibration case"', 'notes = "calibration case: mean-log, an expectation"')
    return Case(what, truth, text, draws, configs=len(grid), what="grid-scaling", tags=tags)


def saturation_cases() -> list[Case]:
    return [
        grid_case("gauss-norm-tail", "saturating: ||G||_2 <= C sqrt(h) w.p. 1 - delta, G h x h Gaussian, h 1..512",
                  "true", H_GRID, quantity="calib-gauss-norm"),
        grid_case("gauss-norm-mean", "saturating: E||G||_2 <= C sqrt(h) (mean-log), G h x h Gaussian, h 1..512",
                  "true", H_GRID, quantity="calib-gauss-norm", statistic="mean-log"),
        grid_case("sat-sqrt", "saturating: C(h) = 2 - h^-1/2, h 1..512", "true", H_GRID, "sat-sqrt"),
        grid_case("sat-logistic", "saturating: logistic rise 0.14 -> 2 over two decades, h 1..16384", "true",
                  LOGISTIC_GRID, "sat-logistic"),
        grid_case("maxabs-from1", "slow growth: E max of n |N(0,1)| <= C (mean-log), n 1..4096", "false", FROM1_GRID,
                  quantity="calib-max-abs", bound="C", statistic="mean-log"),
        grid_case("maxabs-from16", "slow growth: E max of n |N(0,1)| <= C (mean-log), n 16..65536", "false",
                  FROM16_GRID, quantity="calib-max-abs", bound="C", statistic="mean-log"),
        grid_case("sqrtlog-from1", "slow growth: C(n) = sqrt(1 + log n), n 1..4096", "false", FROM1_GRID,
                  "sqrtlog-e", power=0, bound="C", sigma=LOG_SIGMA, draws=LOG_DRAWS),
        grid_case("loglog-from1", "slow growth: C(n) = 1 + log(1 + log n), n 1..4096", "false", FROM1_GRID,
                  "loglog-e", power=0, bound="C", sigma=LOG_SIGMA, draws=LOG_DRAWS),
        grid_case("sqrtlog-from16", "slow growth: C(n) = sqrt(log n), n 16..65536", "false", FROM16_GRID,
                  "sqrtlog", power=0, bound="C", sigma=LOG_SIGMA, draws=LOG_DRAWS),
        grid_case("loglog-from16", "slow growth: C(n) = log log n, n 16..65536", "false", FROM16_GRID,
                  "loglog", power=0, bound="C", sigma=LOG_SIGMA, draws=LOG_DRAWS),
    ]


def cases() -> list[Case]:
    out = [_rate_case(f, n) for f in (0.5, 1.0, 1.3, 2.0) for n in (100, 200, 1000)]
    out += [
        _scaling_case("flat", "true", what="scaling: flat constant (tail-log)"),
        _scaling_case("converge", "true", what="scaling: constant converging from below, 2(1 - m^-1/2)"),
        _scaling_case("flat", "true", probability="always", what="scaling: flat constant, for every draw (max-log)"),
        _scaling_case("pow0.1", "false", what="scaling: C(m) ~ m^0.1 (at the slope tolerance 0.1)"),
        _scaling_case("pow0.2", "false", what="scaling: C(m) ~ m^0.2"),
        _scaling_case("sqrtlog", "false", what="scaling: C(m) ~ sqrt(log m)"),
        _scaling_case("widening", "false", what="scaling: flat median, 1 - delta tail ~ m^0.3"),
        _scaling_case("zeros", "false", relation=">=", what="scaling lower bound: 30% exact zeros"),
        _scaling_case("flat", "true", relation=">=", what="scaling lower bound: flat constant"),
        _scaling_case("thinning-zeros", "true", statistic="mean-log", mean_log_reason=True,
                      what="scaling upper bound, mean-log: flat constant, zeros thinning from 30% to 0"),
        _scaling_case("pow0.2-zero-top", "false", statistic="mean-log", mean_log_reason=True,
                      what="scaling upper bound, mean-log: C(m) ~ m^0.2, 70% zeros at the top m"),
        _scaling_case("nan-above", "unknown", extra_args=", threshold = 32768",
                      what="scaling: NaN at the largest m (an estimator failure)"),
    ]
    out += [log_case(g, t, what=w) for g, t, w in LOG_CASES]
    out += saturation_cases()
    tight = "x = { values = [1] }"
    out += [
        Case("tight inequality ||a+b|| - ||a|| - ||b|| <= 0, float64", "true",
             _toml("triangle-64", "calib-tight", "<=", "0", "always", 'form = "triangle"', tight, "x = [1]", 200),
             200, what="tight"),
        Case("tight inequality ||a+b|| - ||a|| - ||b|| <= 0, float32", "true",
             _toml("triangle-32", "calib-tight", "<=", "0", "always", 'form = "triangle"', tight, "x = [1]", 200,
                   dtype="float32"), 200, what="tight"),
        Case("equality ratio sum x^2 / x.x <= 1, float32", "true",
             _toml("ratio-32", "calib-tight", "<=", "1", "always", 'form = "ratio"', tight, "x = [1]", 200,
                   dtype="float32"), 200, what="tight"),
        Case("equality ratio sum x^2 / x.x >= 1, float64", "true",
             _toml("ratio-64", "calib-tight", ">=", "1", "always", 'form = "ratio"', tight, "x = [1]", 200),
             200, what="tight"),
        Case("1e-6 relative excess over <= 1, float64", "false",
             _toml("excess-64", "calib-tight", "<=", "1", "always", 'form = "excess", excess = 1e-6', tight,
                   "x = [1]", 20), 20, what="tight"),
        Case("negative bound: -2 e^(0.1 Z) <= -1", "true",
             _toml("negative-true", "calib-negative", "<=", "-1", f"1 - {DELTA}", "sigma = 0.1", tight, "x = [1]",
                   200), 200, what="negative"),
        Case("negative bound: -2 e^(0.1 Z) + 1.2 <= -1 (always violated)", "false",
             _toml("negative-false", "calib-negative", "<=", "-1", f"1 - {DELTA}", "sigma = 0.1, shift = 1.2", tight,
                   "x = [1]", 200), 200, what="negative"),
        Case("trajectory: 30% never reach the target within the claim's own budget", "unknown",
             _toml("hitting-own", "calib-hitting", "<=", "1000", f"1 - {DELTA}", "reach = 0.7, kmax = 100", tight,
                   "x = [1]", 200), 200, what="trajectory"),
        Case("trajectory: 30% never reach the target within the stated budget", "false",
             _toml("hitting-stated", "calib-hitting", "<=", "1000", f"1 - {DELTA}",
                   "reach = 0.7, kmax = 100, budget_stated = true", tight, "x = [1]", 200), 200, what="trajectory"),
    ]
    return out


def run_case(case: Case, seed: int, store: Store | None = None) -> ClaimResult:
    """One run of the case's quick profile through the real runner (in-process, in-memory store)."""
    claim = case.claim()
    store = store or Store(":memory:")
    run_id = run_claims([claim], store, profile="quick", seed=seed, paths=[claim.id])
    return evaluate(store, run_id, [claim])[0]
