"""Claim files: the TOML schema, loading and validation.

One claim per file under claims/<paper>/. Every problem is reported as a ClaimError naming the file, the
field and the fix; `load_claims` collects them so one malformed file never stops the others.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
import tomllib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache, cached_property, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .builtin import load_installed_extensions
from .errors import ClaimError
from .expressions import Expr, ExpressionError, parse
from .functions import ROLES as FUNCTION_ROLES
from .functions import FunctionSpecError, check_function_spec
from .inputs import (
    NONZERO,
    QUANTIFIED,
    check_points,
    check_premises,
    check_quantified,
    coefficient_spec,
    label_pattern,
)
from .registry import INPUTS, NETWORKS, QUANTITIES

VERDICTS = ("holds", "violated", "inconclusive", "infeasible")
# Non-quick profiles: the most draws an undecided probabilistic configuration takes (a profile's max_replicates)
DRAW_BUDGET = 131072
MODES = ("probabilistic", "deterministic", "scaling", "infeasible")
RELATIONS = ("<=", "<", ">=", ">")
SEARCHES = ("none", "exact", "random", "gradient", "adversarial", "exhaustive")
PROFILES = ("quick", "full")
EXTENSION_FILE = "extension.py"  # a claims folder's own settings/quantities, imported before its claims
PAPER_FILE = "_paper.toml"  # a claims folder's paper: citation and the list of its results (for coverage)
FINDINGS_FILE = "findings.toml"  # a claims folder's reviewed findings and leads (lemmacheck.findings), not a claim
GRAPH_FILE = "graph.toml"  # a claims folder's proof graph (lemmacheck.graph), not a claim
NOT_CLAIMS = (FINDINGS_FILE, GRAPH_FILE)

_TOP_FIELDS = {
    "id", "paper", "result", "title", "statement", "kind", "network", "inputs", "params", "check",
    "profiles", "notes", "expect", "finding", "infeasible", "reading", "variant_of", "edges_skipped",
}
_CHECK_FIELDS = {
    "quantity", "relation", "bound", "probability", "requires", "constants", "regime_constants", "search",
    "args", "trivial", "whp_delta", "tolerance", "dtype", "statistic", "limits", "regime_path",
}
_PROFILE_FIELDS = {"configs", "grid", "replicates", "shard_size", "explore", "early_stop", "hunt", "expect",
                   "regime_path", "max_replicates"}


@dataclass(frozen=True)
class RegimePath:
    """A path along which a statement's hidden quantities grow (width up at fixed delta): `param` takes each of
    `levels` (increasing) with the other parameters at `at` (the rest at their defaults). Its configurations join
    the profile's, and the verdict measures whether a violation persists or fades along it (verdicts.regime_trend)."""
    param: str
    levels: tuple[float, ...]
    at: dict[str, float]

    def configs(self, defaults: Mapping[str, float]) -> list[dict[str, float]]:
        return [{**defaults, **self.at, self.param: v} for v in self.levels]

    def describe(self) -> str:
        fixed = ", ".join(f"{k} = {v:g}" for k, v in self.at.items())
        return f"{self.param} = " + ", ".join(f"{v:g}" for v in self.levels) + (f" at {fixed}" if fixed else "")


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple[float | int, ...] | None = None  # a finite set
    low: float | None = None  # or a range
    high: float | None = None
    log: bool = False
    integer: bool = False

    @property
    def default(self) -> float | int:
        if self.values:
            return self.values[0]
        assert self.low is not None
        return self.low

    def contains(self, x: float) -> bool:
        if self.values is not None:
            return any(math.isclose(x, v, rel_tol=1e-12, abs_tol=0.0) or x == v for v in self.values)
        assert self.low is not None and self.high is not None
        return self.low <= x <= self.high and (not self.integer or float(x).is_integer())


@dataclass(frozen=True)
class Profile:
    configs: tuple[dict[str, float | int], ...]
    replicates: int
    shard_size: int
    explore: int  # extra configurations drawn by Hypothesis from the declared domain (full profile)
    early_stop: bool = True  # probabilistic claims: stop a configuration once its anytime-valid interval excludes delta
    hunt: int = 0  # examples of a bounded hunt (data, labels, parameters) whose worst case joins the configurations
    # This profile's own expected verdict, when its budget reads differently from the claim's `expect` (a quick
    # budget too small to narrow a fit: inconclusive in quick, holds in full); None: the claim's `expect`.
    expect: str | None = None
    regime_path: RegimePath | None = None  # the profile's own path, else the check's (its configurations included)
    # early stop: the most draws a probabilistic configuration takes while its confidence sequence is undecided
    # (`replicates` are the first batch, read shard by shard; 0: `replicates`)
    max_replicates: int = 0


@dataclass(frozen=True)
class Check:
    quantity: str
    relation: str
    bound: Expr
    probability: str  # the text: "always", "whp" or an expression
    prob_expr: Expr | None
    requires: Expr | None
    constants: tuple[str, ...]
    regime_constants: dict[str, float]
    search: str
    args: dict[str, Any]
    trivial: Expr | None
    whp_delta: float
    tolerance: float
    dtype: str
    statistic: str
    # Scaling claims: parameters whose asymptotic regime is toward 0 (delta, eps, tau), fitted in log(1/x) so that
    # "the implied constant must not grow" looks in the direction the statement is about (default: toward infinity).
    limits: dict[str, str] = field(default_factory=dict)
    regime_path: RegimePath | None = None  # where a violation must persist to count as a refutation (see RegimePath)

    def hidden_constants_at(self) -> str:
        """"C = 1, Cu = 1": the values at which a scaling claim's bound is drawn and its slack computed."""
        return ", ".join(f"{k} = {self.regime_constants.get(k, 1.0):g}" for k in self.constants)


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    result: str
    title: str
    statement: str
    kind: str
    network: str
    inputs: dict[str, Any]
    params: dict[str, Param]
    check: Check | None
    profiles: dict[str, Profile]
    notes: str
    expect: str
    finding: str
    infeasible: str
    source: Path
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A claim sent to another process (a worker pool, Dask) names its network and quantity, which resolve only
        # once its paper's plugin is registered there: load it with the claim, as load_claim does.
        self.__dict__.update(state)
        load_plugins(Path(self.source).parent)

    @cached_property
    def snapshot(self) -> str:
        """The claim as run: canonical JSON of its file's contents, stored with the run and sent to workers
        (computed once per claim: every shard task carries it)."""
        return json.dumps(self.raw, sort_keys=True, default=str)

    @property
    def mode(self) -> str:
        if self.infeasible:
            return "infeasible"
        assert self.check is not None
        if self.check.constants:
            return "scaling"
        if self.check.probability == "always":
            return "deterministic"
        return "probabilistic"

    def delta(self, values: Mapping[str, float]) -> float:
        """The stated failure probability at a configuration (0 for 'always')."""
        assert self.check is not None
        if self.check.probability == "always":
            return 0.0
        if self.check.probability == "whp":
            return self.check.whp_delta
        assert self.check.prob_expr is not None
        return 1.0 - self.check.prob_expr.evaluate(values)

    def expected(self, profile: str) -> str:
        """The verdict a run of `profile` should reach: the profile's own `expect`, else the claim's."""
        prof = self.profiles.get(profile)
        return prof.expect if prof is not None and prof.expect is not None else self.expect

    def quantifiers(self) -> str:
        """The quantifiers in words, for reports and failure messages."""
        if self.check is None:
            return "not checked: " + self.infeasible
        c = self.check
        if c.probability == "always":
            p = "for every draw (deterministic)"
        elif c.probability == "whp":
            p = f"with high probability (unspecified; checked as failure rate <= {c.whp_delta})"
        else:
            p = f"with probability >= {c.probability}"
        s = f"{p}; search: {c.search}"
        if c.constants:
            s += f"; hidden constants {', '.join(c.constants)} (checked as a scaling law)"
        if c.requires is not None:
            s += f"; regime: {c.requires.text}"
            if c.regime_constants:
                s += " (evaluated with " + ", ".join(f"{k} = {v:g}" for k, v in c.regime_constants.items()) + ")"
        return s


def _req(raw: Mapping[str, Any], key: str, path: Path, typ: type | tuple[type, ...], where: str = "") -> Any:
    name = f"{where}{key}"
    if key not in raw:
        raise ClaimError(path, name, "missing", f"add `{key} = ...`")
    val = raw[key]
    if not isinstance(val, typ) or isinstance(val, bool) and typ is not bool:
        tname = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise ClaimError(path, name, f"expected {tname}, got {type(val).__name__} {val!r}")
    return val


def _check_unknown(raw: Mapping[str, Any], allowed: set[str], path: Path, where: str = "") -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        raise ClaimError(path, f"{where}{extra[0]}", "unknown field", f"allowed fields: {sorted(allowed)}")


def _param_table(raw: dict, name: str, params: dict, path: Path, example: str, where: str = "") -> dict:
    """A table keyed by declared parameters (`edges_skipped`, `check.limits`): its keys checked, the table returned."""
    table = raw.get(name, {})
    if not isinstance(table, dict):
        raise ClaimError(path, where + name, "expected a table keyed by parameter names", example)
    for k in table:
        if k not in params:
            raise ClaimError(path, f"{where}{name}.{k}", f"'{k}' is not a declared parameter", f"one of {sorted(params)}")
    return table


def _parse_param(name: str, spec: Any, path: Path) -> Param:
    where = f"params.{name}"
    if not name.isidentifier() or name in ("lambda",):
        raise ClaimError(path, where, f"'{name}' is not a valid parameter name", "use a Python identifier")
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        spec = {"value": spec}
    if not isinstance(spec, dict):
        raise ClaimError(path, where, f"expected a table, got {spec!r}", "e.g. `{ values = [64, 128] }`")
    _check_unknown(spec, {"value", "values", "min", "max", "log", "integer"}, path, where + ".")
    if "value" in spec or "values" in spec:
        vals = [spec["value"]] if "value" in spec else spec["values"]
        if not isinstance(vals, list) or not vals:
            raise ClaimError(path, where + ".values", "expected a non-empty list of numbers")
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ClaimError(path, where + ".values", f"{v!r} is not a finite number")
        return Param(name, values=tuple(vals), integer=all(isinstance(v, int) for v in vals))
    if "min" not in spec or "max" not in spec:
        raise ClaimError(path, where, "needs `values`, `value`, or both `min` and `max`")
    lo, hi = spec["min"], spec["max"]
    for k, v in (("min", lo), ("max", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ClaimError(path, f"{where}.{k}", f"{v!r} is not a finite number")
    if lo > hi:
        raise ClaimError(path, where, f"min {lo} > max {hi}", "swap them")
    log = bool(spec.get("log", False))
    if log and lo <= 0:
        raise ClaimError(path, where + ".min", f"log-scaled range needs min > 0, got {lo}")
    integer = bool(spec.get("integer", isinstance(lo, int) and isinstance(hi, int)))
    return Param(name, low=lo, high=hi, log=log, integer=integer)


def _parse_regime_path(raw: Any, params: dict[str, Param], path: Path, where: str) -> RegimePath:
    example = '`regime_path = { param = "m", levels = [64, 256, 1024], at = { delta = 0.1 } }`'
    if not isinstance(raw, dict):
        raise ClaimError(path, where, "expected an inline table", example)
    _check_unknown(raw, {"param", "levels", "at"}, path, where + ".")
    name = _req(raw, "param", path, str, where + ".")
    if name not in params:
        raise ClaimError(path, f"{where}.param", f"'{name}' is not a declared parameter", f"one of {sorted(params)}")
    levels = raw.get("levels")
    if (not isinstance(levels, list) or len(levels) < 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in levels)):
        raise ClaimError(path, f"{where}.levels", "expected a list of at least 3 numbers (a trend needs three levels)",
                         example)
    if any(b <= a for a, b in itertools.pairwise(levels)):
        raise ClaimError(path, f"{where}.levels", f"levels {levels} must increase", "list them from small to large")
    for v in levels:
        if not params[name].contains(v):
            raise ClaimError(path, f"{where}.levels", f"{v} lies outside the declared domain of '{name}'",
                             "widen [params] or change the level")
    at = raw.get("at", {})
    if not isinstance(at, dict):
        raise ClaimError(path, f"{where}.at", "expected a table of parameter values", example)
    for k, v in at.items():
        if k not in params or k == name:
            raise ClaimError(path, f"{where}.at.{k}", f"'{k}' is not a declared parameter other than '{name}'",
                             f"one of {sorted(set(params) - {name})}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not params[k].contains(v):
            raise ClaimError(path, f"{where}.at.{k}", f"{v!r} is not a value in the declared domain of '{k}'")
    return RegimePath(name, tuple(levels), dict(at))


def _parse_profile(name: str, raw: Any, params: dict[str, Param], path: Path) -> Profile:
    where = f"profiles.{name}"
    if not isinstance(raw, dict):
        raise ClaimError(path, where, "expected a table")
    _check_unknown(raw, _PROFILE_FIELDS, path, where + ".")
    defaults = {p.name: p.default for p in params.values()}
    configs: list[dict[str, Any]] = []
    origins: list[str] = []  # the field each configuration came from, so an error names what the file says
    for j, cfg in enumerate(raw.get("configs", [])):
        if not isinstance(cfg, dict):
            raise ClaimError(path, f"{where}.configs[{j}]", "expected an inline table of parameter values")
        configs.append({**defaults, **cfg})
        origins.append(f"{where}.configs[{j}]")
    grid = raw.get("grid")
    if grid is not None:
        if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
            raise ClaimError(path, f"{where}.grid", "expected a table of non-empty lists", "`grid = { m = [64, 128] }`")
        keys = list(grid)
        for combo in itertools.product(*(grid[k] for k in keys)):
            configs.append({**defaults, **dict(zip(keys, combo))})
            origins.append(f"{where}.grid")
    if not configs:
        configs = [dict(defaults)]
        origins.append(f"params (defaults for {where})")
    for cfg, origin in zip(configs, origins):
        for k, v in cfg.items():
            f = f"{origin}.{k}" if k in (grid or {}) or origin.endswith("]") else f"{origin} (default of {k})"
            if k not in params:
                raise ClaimError(path, f, f"'{k}' is not a declared parameter", f"declare it under [params]; "
                                 f"declared: {sorted(params)}")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ClaimError(path, f, f"{v!r} is not a finite number")
            if not params[k].contains(v):
                raise ClaimError(path, f, f"{v} lies outside the declared domain of '{k}'",
                                 "widen [params] or change the configuration")
    reps = raw.get("replicates", 64 if name == "quick" else 256)
    shard = raw.get("shard_size", min(reps, 32))
    explore = raw.get("explore", 0)
    hunt = raw.get("hunt", 0)
    for k, v in (("replicates", reps), ("shard_size", shard), ("explore", explore), ("hunt", hunt)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if k in ("explore", "hunt") else 1):
            raise ClaimError(path, f"{where}.{k}", f"expected a positive integer, got {v!r}")
    # Early stop is the default (probabilistic claims only; the runner ignores it elsewhere): a configuration's
    # shards run one at a time until the anytime-valid confidence sequence excludes delta, and a configuration it
    # never decides spends its replicates and reads the same fixed-size interval as without it, so it only saves
    # draws (where replicates > shard_size) and never turns a fixed-size verdict inconclusive.
    # `early_stop = false` keeps every planned draw (a claim whose full sample is wanted, e.g. for its slack).
    early = raw.get("early_stop", True)
    if not isinstance(early, bool):
        raise ClaimError(path, f"{where}.early_stop", f"expected true or false, got {early!r}")
    expect = raw.get("expect")
    if expect is not None and expect not in VERDICTS:
        raise ClaimError(path, f"{where}.expect", f"'{expect}' is not a verdict", f"one of {VERDICTS}")
    rpath = (_parse_regime_path(raw["regime_path"], params, path, f"{where}.regime_path")
             if "regime_path" in raw else None)
    # Draws until decided: past its `replicates` an undecided probabilistic configuration draws on, in waves that
    # double its draws, up to max_replicates (docs/verdicts.md). The quick profile stops at its replicates (what
    # pytest runs stays cheap); every other profile draws up to DRAW_BUDGET, enough to read a rate 1.5 delta at
    # delta = 0.003 violated (tests/calibration/test_sequential.py).
    cap = raw.get("max_replicates", reps if name == "quick" else max(reps, DRAW_BUDGET))
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < reps:
        raise ClaimError(path, f"{where}.max_replicates", f"expected an integer >= replicates ({reps}), got {cap!r}",
                         "the draws an undecided configuration may take, counting its first `replicates`")
    return Profile(tuple(configs), reps, shard, explore, early, hunt, expect, rpath, cap)


def _expr(text: Any, allowed: set[str], path: Path, field_name: str) -> Expr:
    try:
        if isinstance(text, (str, int, float)):
            return _parsed(text, frozenset(allowed))
        return parse(text, allowed)
    except ExpressionError as exc:
        raise ClaimError(path, field_name, str(exc)) from None


@lru_cache(maxsize=4096, typed=True)  # typed: 1 and 1.0 are other texts ("1", "1.0")
def _parsed(text: str | float, allowed: frozenset[str]) -> Expr:
    """An expression parsed once: a hunt parses its claim pinned to each dataset it probes (hunt.pinned), the same
    bound and regime every time."""
    return parse(text, allowed)


def parse_claim(raw: dict[str, Any], path: Path) -> Claim:
    """Validate one claim table; raise ClaimError on the first problem."""
    _check_unknown(raw, _TOP_FIELDS, path)
    cid = _req(raw, "id", path, str)
    paper = _req(raw, "paper", path, str)
    if not cid.startswith(paper + "/"):
        raise ClaimError(path, "id", f"'{cid}' must start with the paper key '{paper}/'")
    result = _req(raw, "result", path, str)
    title = _req(raw, "title", path, str)
    statement = _req(raw, "statement", path, str)
    kind = _req(raw, "kind", path, str)
    notes = raw.get("notes", "")
    infeasible = raw.get("infeasible", "")
    for k, v in (("notes", notes), ("infeasible", infeasible)):
        if not isinstance(v, str):
            raise ClaimError(path, k, f"expected a string, got {v!r}")
    expect = raw.get("expect", "infeasible" if infeasible else "holds")
    if expect not in VERDICTS:
        raise ClaimError(path, "expect", f"'{expect}' is not a verdict", f"one of {VERDICTS}")
    finding = raw.get("finding", "")
    if expect == "violated" and not finding:
        raise ClaimError(path, "finding", "a claim expected to be violated must record the finding",
                         "describe what fails, the minimal configuration and the repro command")
    params = {}
    for name, spec in (raw.get("params") or {}).items():
        params[name] = _parse_param(name, spec, path)
    for k, v in _param_table(raw, "edges_skipped", params, path, '`edges_skipped = { m = "why" }`').items():
        if not isinstance(v, str) or not v.strip():
            raise ClaimError(path, f"edges_skipped.{k}", "expected the reason the full profile does not reach the "
                             "edges of this parameter, as a non-empty string")
    if infeasible:
        if expect != "infeasible":
            raise ClaimError(path, "expect", "an infeasible claim can only expect 'infeasible'")
        return Claim(cid, paper, result, title, statement, kind, str(raw.get("network", "")), {}, params, None,
                     {}, notes, expect, finding, infeasible, path, raw)
    network = _req(raw, "network", path, str)
    if network not in NETWORKS:
        raise ClaimError(path, "network", f"unknown network '{network}'", f"one of {NETWORKS.names()} "
                         "(`lemmacheck list --networks`)")
    check_raw = _req(raw, "check", path, dict)
    _check_unknown(check_raw, _CHECK_FIELDS, path, "check.")
    qname = _req(check_raw, "quantity", path, str, "check.")
    if qname not in QUANTITIES:
        raise ClaimError(path, "check.quantity", f"unknown quantity '{qname}'",
                         "see `lemmacheck list --quantities`")
    q = QUANTITIES.get(qname)
    if q.networks and "*" not in q.networks and network not in q.networks:
        raise ClaimError(path, "check.quantity", f"quantity '{qname}' is defined for networks {list(q.networks)}, "
                         f"not '{network}'")
    relation = _req(check_raw, "relation", path, str, "check.")
    if relation not in RELATIONS:
        raise ClaimError(path, "check.relation", f"'{relation}' is not a relation", f"one of {RELATIONS}")
    constants = check_raw.get("constants", [])
    if not isinstance(constants, list) or not all(isinstance(c, str) and c.isidentifier() for c in constants):
        raise ClaimError(path, "check.constants", "expected a list of names", '`constants = ["C"]`')
    clash = set(constants) & set(params)
    if clash:
        raise ClaimError(path, "check.constants", f"{sorted(clash)} are both constants and parameters")
    allowed = set(params) | set(constants)
    bound = _expr(_req(check_raw, "bound", path, (str, int, float), "check."), allowed, path, "check.bound")
    prob = check_raw.get("probability", "always")
    prob_expr = None
    if not isinstance(prob, (str, int, float)) or isinstance(prob, bool):
        raise ClaimError(path, "check.probability", f"expected a string, got {prob!r}")
    if prob not in ("always", "whp"):
        prob_expr = _expr(prob, set(params), path, "check.probability")
        prob = str(prob)
    # Hidden constants of the stated regime (e.g. C_bar in a width condition) are evaluated at
    # regime_constants (default 1, the optimistic reading); reports say which values were used.
    rc_raw = check_raw.get("regime_constants", {})
    if not isinstance(rc_raw, dict) or not all(
            isinstance(k, str) and k.isidentifier() and isinstance(v, (int, float)) and not isinstance(v, bool)
            for k, v in rc_raw.items()):
        raise ClaimError(path, "check.regime_constants", "expected a table of names -> numbers", "`{ C = 1 }`")
    if set(rc_raw) & set(params):
        raise ClaimError(path, "check.regime_constants", f"{sorted(set(rc_raw) & set(params))} are parameters")
    regime_constants = {**{c: 1.0 for c in constants}, **{k: float(v) for k, v in rc_raw.items()}}
    requires = None
    if "requires" in check_raw:
        req = check_raw["requires"]
        if isinstance(req, list):
            req = " and ".join(f"({r})" for r in req)
        requires = _expr(req, allowed | set(regime_constants), path, "check.requires")
    search = check_raw.get("search", "none")
    if search not in SEARCHES:
        raise ClaimError(path, "check.search", f"'{search}' is not a search", f"one of {SEARCHES}")
    args = check_raw.get("args", {})
    if not isinstance(args, dict):
        raise ClaimError(path, "check.args", "expected a table of estimator options")
    trivial = _expr(check_raw["trivial"], set(params), path, "check.trivial") if "trivial" in check_raw else None
    whp_delta = float(check_raw.get("whp_delta", 0.1))
    tolerance = float(check_raw.get("tolerance", 0.1))
    limits = _param_table(check_raw, "limits", params, path, '`limits = { delta = "0" }`', where="check.")
    for k, v in limits.items():
        if v not in ("0", "inf"):
            raise ClaimError(path, f"check.limits.{k}", f"{v!r} is not a limit",
                             '"0" (the statement is about the parameter going to 0) or "inf"')
    dtype = check_raw.get("dtype", "float64")
    if dtype not in ("float64", "float32"):
        raise ClaimError(path, "check.dtype", f"'{dtype}' unsupported", "float64 or float32")
    # Which per-configuration statistic of log Ĉ a scaling fit tracks. A claim for every draw ("always") is
    # about the worst draw: the largest Ĉ for an upper bound, the smallest for a lower one. A claim with
    # probability 1 - δ (or whp) is about its stated tail: the 1 - δ quantile of Ĉ (δ for a lower bound). The
    # typical draw (mean-log) can stay flat while that tail grows, so it is only an explicit choice whose
    # reason the notes give.
    worst = "max-log" if relation in ("<=", "<") else "min-log"
    statistic = check_raw.get("statistic", worst if prob == "always" else "tail-log")
    if statistic == "mean-log" and constants and "mean-log" not in str(raw.get("notes", "")):
        raise ClaimError(path, "check.statistic", "mean-log tracks the typical draw, not the stated tail",
                         "use tail-log (the default), or say in `notes` why mean-log (name it) is the right reading")
    if statistic not in ("mean-log", "max-log", "min-log", "tail-log"):
        raise ClaimError(path, "check.statistic", f"'{statistic}' unsupported",
                         "mean-log, tail-log (the stated 1 - delta tail), max-log or min-log")
    if statistic == "tail-log" and prob == "always":
        raise ClaimError(path, "check.statistic", "tail-log needs a stated failure probability",
                         f"'{worst}' for a claim about every draw")
    if statistic in ("max-log", "min-log") and statistic != worst:
        raise ClaimError(path, "check.statistic", f"'{statistic}' tracks the wrong tail for relation '{relation}'",
                         f"'{worst}' (the worst case of this inequality) or 'mean-log'")
    inputs = raw.get("inputs", {})
    if not isinstance(inputs, dict):
        raise ClaimError(path, "inputs", "expected a table", '`inputs = { kind = "unit-sphere", n = "n", d = "d" }`')
    if inputs:
        ik = inputs.get("kind")
        # Labels alone (a quantity that draws labels but no data) need no generator.
        if ik not in INPUTS and not (ik is None and set(inputs) <= {"labels", "coefficients", "nonzero",
                                                                     *FUNCTION_ROLES, *QUANTIFIED}):
            raise ClaimError(path, "inputs.kind", f"unknown input generator {ik!r}", f"one of {INPUTS.names()}")
        spec = INPUTS.get(ik).extra.get("fields", {}) if ik is not None else {}
        for k, v in inputs.items():
            if k == "kind":
                continue
            if k == "labels":  # drawn by ctx.labels for every generator: a family name or an explicit pattern
                try:
                    label_pattern(v)
                except ValueError as e:
                    raise ClaimError(path, "inputs.labels", str(e)) from None
                continue
            if k == "coefficients":  # drawn by ctx.coefficients: a family name or an explicit list
                try:
                    coefficient_spec(v)
                except ValueError as e:
                    raise ClaimError(path, "inputs.coefficients", str(e)) from None
                continue
            if k == "premises":  # hypotheses on the data (inputs.PREMISES), met by every dataset run or hunted
                try:
                    check_premises(v)
                except ValueError as e:
                    raise ClaimError(path, "inputs.premises", str(e)) from None
                continue
            if k in FUNCTION_ROLES:  # a function class drawn by ctx.function (functions.CLASSES)
                try:
                    check_function_spec(v)
                except FunctionSpecError as e:
                    raise ClaimError(path, ".".join(filter(None, ("inputs", k, e.field))), e.problem, e.fix) from None
                continue
            if k == "nonzero":  # what the statement requires nonzero: hunts never try its zero stratum
                if not isinstance(v, list) or not set(v) <= set(NONZERO):
                    raise ClaimError(path, "inputs.nonzero", f"{v!r}: a list of {list(NONZERO)}")
                continue
            if k in QUANTIFIED:  # "for all W": matrices drawn by ctx.weights / ctx.perturbation in a declared ball
                for f, problem in check_quantified(k, v):
                    raise ClaimError(path, ".".join(filter(None, ("inputs", k, f))), problem)
                radii = v.get("radius")
                for j, r in enumerate(radii if isinstance(radii, list) else [] if radii is None else [radii]):
                    _expr(r, set(params), path, f"inputs.{k}.radius" + (f"[{j}]" if isinstance(radii, list) else ""))
                continue
            if k == "points":  # a pinned dataset (a hunt's counterexample): every replicate uses it
                try:
                    check_points(v)
                except ValueError as e:
                    raise ClaimError(path, "inputs.points", str(e)) from None
                continue
            if k not in spec:
                raise ClaimError(path, f"inputs.{k}", f"input generator '{ik}' has no option '{k}'",
                                 f"its options: {sorted(spec)}")
            if spec[k] == "expr":
                _expr(v, set(params), path, f"inputs.{k}")
            elif isinstance(spec[k], tuple) and v not in spec[k]:
                raise ClaimError(path, f"inputs.{k}", f"{v!r} is not one of {list(spec[k])}")
    rpath = (_parse_regime_path(check_raw["regime_path"], params, path, "check.regime_path")
             if "regime_path" in check_raw else None)
    check = Check(qname, relation, bound, str(prob), prob_expr, requires, tuple(constants), regime_constants,
                  search, args, trivial, whp_delta, tolerance, dtype, statistic,
                  {k: v for k, v in limits.items() if v == "0"}, rpath)
    profiles_raw = raw.get("profiles", {})
    if not isinstance(profiles_raw, dict):
        raise ClaimError(path, "profiles", "expected a table with [profiles.quick] and [profiles.full]")
    for name in profiles_raw:
        if name not in PROFILES:
            raise ClaimError(path, f"profiles.{name}", "unknown profile", f"one of {PROFILES}")
    # The profiles follow from the [profiles] and [params] tables, the check's regime path and whether it has hidden
    # constants; parsed once per such key (a hunt parses its claim pinned to each dataset it probes, profiles alike).
    key = json.dumps([profiles_raw, raw.get("params"), check_raw.get("regime_path"), bool(check.constants)],
                     sort_keys=True, default=str)
    if key not in _PROFILES:
        _PROFILES[key] = _parse_profiles(profiles_raw, params, check, path)
    profiles = dict(_PROFILES[key])
    for name, prof in profiles.items():
        if prof.expect == "violated" and not finding:
            raise ClaimError(path, "finding", f"profiles.{name} expects a violation: record the finding")
        if prof.expect == "infeasible":
            raise ClaimError(path, f"profiles.{name}.expect", "a checked claim's profile cannot expect 'infeasible'")
    return Claim(cid, paper, result, title, statement, kind, network, inputs, params, check, profiles, notes,
                 expect, finding, "", path, raw)


_PROFILES: dict[str, dict[str, Profile]] = {}


def _parse_profiles(profiles_raw: dict[str, Any], params: dict[str, Param], check: Check,
                    path: Path) -> dict[str, Profile]:
    profiles = {name: _parse_profile(name, profiles_raw.get(name, {}), params, path) for name in PROFILES}
    defaults = {p.name: p.default for p in params.values()}
    for name, prof in profiles.items():
        # A regime path's configurations always run with the profile (the trend needs every level).
        rp = prof.regime_path or check.regime_path
        if rp is not None:
            extra = [c for c in rp.configs(defaults) if c not in prof.configs]
            profiles[name] = replace(prof, configs=prof.configs + tuple(extra), regime_path=rp)
    for name, prof in profiles.items() if check.constants else ():
        # Each profile gives its own verdict, so each must sweep (Hypothesis-explored configurations vary).
        varying = {k for cfg in prof.configs for k in cfg if len({c[k] for c in prof.configs}) > 1}
        if not varying and not prof.explore:
            raise ClaimError(path, f"profiles.{name}", "a scaling claim needs a sweep: no parameter varies",
                             "add a grid over the swept parameters")
    return profiles


def load_extension(folder: Path) -> ModuleType | None:
    """Import the folder's plugin once and return it (None if it has none): `extension.py`, or an `extension/`
    package whose `__init__.py` imports its modules (a paper's network and quantities). The module's name is
    derived from the resolved path, so the claims, the workers and a test that loads the same folder share one
    module (and one registration)."""
    ext = folder / EXTENSION_FILE
    package = folder / EXTENSION_FILE.removesuffix(".py")
    if package.is_dir() and (package / "__init__.py").is_file():
        entry, search = package / "__init__.py", [str(package)]
    elif ext.is_file():
        entry, search = ext, None
    else:
        return None
    full = str(entry.resolve())
    modname = f"lemmacheck_ext_{folder.resolve().name.replace('-', '_').replace('.', '_')}_{zlib.crc32(full.encode()):08x}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, entry, submodule_search_locations=search)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[modname]  # a broken plugin is retried (and its error shown again) on the next load
        raise
    return module


def load_plugins(folder: Path) -> None:
    """Register everything a claim in `folder` may name: installed packages' extensions and the folder's plugin."""
    load_installed_extensions()
    load_extension(folder)


def load_claim(path: str | Path) -> Claim:
    """Load and validate one claim file, read afresh on every call (an edited file is never served stale)."""
    path = Path(path)
    load_plugins(path.parent)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ClaimError(path, "<toml>", f"not valid TOML: {exc}") from None
    except OSError as exc:
        raise ClaimError(path, "<file>", f"cannot read: {exc}") from None
    return parse_claim(raw, path)


@dataclass(frozen=True)
class Paper:
    """A paper's metadata (claims/<paper>/_paper.toml): what it is, and every formal result it states, in order."""
    key: str
    title: str
    authors: str
    venue: str
    link: str
    scope: str
    results: tuple[str, ...]
    source: Path

    def coverage(self, labels: list[str]) -> tuple[list[str], list[str]]:
        """(encoded, missing) results given claims' `result` labels. A claim covers a result when its label is
        the result's, or the result's with a sub-item such as "(ii)"; an embedded "(proof, ...)" claim does not
        count as encoding the result itself."""
        own = {lab for lab in labels if "(proof" not in lab}
        done = [r for r in self.results if r in own or any(lab.startswith(r + " (") for lab in own)]
        return done, [r for r in self.results if r not in done]


def load_paper(folder: Path) -> Paper | None:
    """The folder's paper metadata, None if it has none; a malformed file is a ClaimError naming the field."""
    path = folder / PAPER_FILE
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ClaimError(path, "<toml>", f"not valid TOML: {exc}") from None
    known = {"key", "title", "authors", "venue", "link", "scope", "results"}
    for k in raw:
        if k not in known:
            raise ClaimError(path, k, "unknown field", f"one of {sorted(known)}")
    for k in ("key", "title", "authors", "venue", "scope"):
        if not isinstance(raw.get(k), str) or not raw[k].strip():
            raise ClaimError(path, k, "missing or not a non-empty string")
    if raw["key"] != folder.name:
        raise ClaimError(path, "key", f"'{raw['key']}' differs from the folder name '{folder.name}'")
    results = raw.get("results")
    if not isinstance(results, list) or not results or not all(isinstance(r, str) and r for r in results):
        raise ClaimError(path, "results", "expected a non-empty list of result labels, e.g. [\"Lemma A.1\"]")
    dup = sorted({r for r in results if results.count(r) > 1})
    if dup:
        raise ClaimError(path, "results", f"listed twice: {dup}")
    return Paper(raw["key"], raw["title"], raw["authors"], raw["venue"], str(raw.get("link", "")), raw["scope"],
                 tuple(results), path)


@cache
def claim_from_snapshot(source: str, text: str) -> Claim:
    """Rebuild a claim from its `Claim.snapshot` (cached: a worker parses each definition once). Workers run what
    the run recorded, even if the file is edited while the run is going."""
    path = Path(source)
    load_plugins(path.parent)
    return parse_claim(json.loads(text), path)


def is_claim_name(path: Path) -> bool:
    """A .toml file that may hold a claim: not a paper's metadata (`_*.toml`), findings.toml or graph.toml."""
    return path.suffix == ".toml" and not path.name.startswith("_") and path.name not in NOT_CLAIMS


def claim_files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.toml") if is_claim_name(q)))
        elif p.suffix == ".toml" and p.name not in NOT_CLAIMS:
            out.append(p)
        elif not p.exists():
            raise FileNotFoundError(f"{p}: no such claim file or folder")
    return out


def load_claims(paths: list[str | Path]) -> tuple[list[Claim], list[ClaimError]]:
    """Load every claim under `paths`; malformed files are returned as errors, the rest still load."""
    claims, errors = [], []
    seen: dict[str, Path] = {}
    for f in claim_files(paths):
        try:
            c = load_claim(f.resolve())
        except ClaimError as exc:
            errors.append(exc)
            continue
        if c.id in seen:
            errors.append(ClaimError(f, "id", f"duplicate id '{c.id}' (also in {seen[c.id]})"))
            continue
        seen[c.id] = f
        claims.append(c)
    return claims, errors


def result_label_warnings(claims: list[Claim]) -> list[str]:
    """One line per claim whose `result` is not a label its folder's _paper.toml lists (verbatim, or with a
    sub-item such as "(ii)"): a typo there silently drops the claim from the paper's coverage. A malformed
    _paper.toml is reported once per folder."""
    out: list[str] = []
    papers: dict[Path, Paper | None | str] = {}
    for c in claims:
        folder = c.source.parent
        if folder not in papers:
            try:
                papers[folder] = load_paper(folder)
            except ClaimError as exc:
                papers[folder] = str(exc)
                out.append(str(exc))
        paper = papers[folder]
        if isinstance(paper, Paper) and not any(c.result == r or c.result.startswith(r + " (")
                                                for r in paper.results):
            out.append(f"{c.source}: field 'result': '{c.result}' is not among the results listed in "
                       f"{paper.source} (fix: use the paper's label verbatim, or add it to that file's `results`)")
    return out


def edges(claim: Claim) -> list[tuple[str, str, float]]:
    """(parameter, "min"/"max", value): the boundary of every declared parameter domain."""
    out = []
    for name, p in claim.params.items():
        lo, hi = (min(p.values), max(p.values)) if p.values is not None else (p.low, p.high)
        assert lo is not None and hi is not None
        out.append((name, "min", lo))
        if hi != lo:
            out.append((name, "max", hi))
    return out


def config_values(claim: Claim, params: Mapping[str, float]) -> dict[str, float]:
    """Parameter values plus the regime constants, for evaluating `requires`."""
    assert claim.check is not None
    return {**claim.check.regime_constants, **params}


def in_regime(claim: Claim, params: Mapping[str, float]) -> bool:
    """Whether a configuration meets the statement's `requires` (its parameters alone decide it)."""
    assert claim.check is not None
    return claim.check.requires is None or bool(claim.check.requires.holds(config_values(claim, params)))
