"""Hunting for violations: Hypothesis explores a claim's declared configuration space, targeted at the
smallest slack, and (for deterministic claims) shrinks a violating configuration to a minimal one.

Hypothesis only chooses configurations; the Monte-Carlo draws inside each still come from the seeded
generator of that configuration (runner.config_seed), so every configuration it reports replays exactly
with `lemmacheck repro`. A hunt that finds nothing proves nothing: it is a search, not a certificate.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from .claims import Claim, config_values
from .runner import ShardTask, config_seed, execute_shard, param_strategy, shard_seed
from .verdicts import slack, violates


@dataclass
class Probe:
    params: dict[str, float]
    seed: int
    slack_min: float
    violations: int
    in_regime: bool


@dataclass
class HuntResult:
    claim_id: str
    examples: int
    probes: list[Probe] = field(default_factory=list)
    counterexample: Probe | None = None  # deterministic claims: the shrunk, minimal violating configuration

    def worst(self, in_regime_only: bool = False) -> Probe | None:
        cands = [p for p in self.probes if p.in_regime or not in_regime_only]
        return min(cands, key=lambda p: p.slack_min) if cands else None


def probe(claim: Claim, params: dict[str, float], run_seed: int, replicates: int) -> Probe:
    chk = claim.check
    assert chk is not None
    seed = config_seed(run_seed, claim.id, params)
    rec = execute_shard(ShardTask(str(claim.source), claim.snapshot, claim.id, 0, 0, params, shard_seed(seed, 0), replicates))
    if rec.error:
        raise RuntimeError(rec.error)
    vals = rec.value[rec.valid & np.isfinite(rec.value)]
    bound = chk.bound.evaluate({**chk.regime_constants, **params})
    sl = slack(chk.relation, vals, bound) if len(vals) else np.array([math.inf])
    in_regime = True if chk.requires is None else chk.requires.holds(config_values(claim, params))
    return Probe(dict(params), seed, float(np.nanmin(sl)), int(violates(chk.relation, vals, bound).sum()), in_regime)


def hunt(claim: Claim, *, examples: int = 50, replicates: int = 8, seed: int = 0,
         in_regime_only: bool = False) -> HuntResult:
    from hypothesis import HealthCheck, Phase, assume, given, settings, target
    from hypothesis import seed as hseed
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable

    if claim.check is None:
        raise ValueError(f"{claim.id} is infeasible: nothing to hunt")
    result = HuntResult(claim.id, examples)
    strat = st.fixed_dictionaries({k: param_strategy(p) for k, p in claim.params.items()})
    deterministic = claim.mode == "deterministic"
    seen: dict[str, Probe] = {}

    class Found(AssertionError):
        pass

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.generate, Phase.target, Phase.shrink] if deterministic else [Phase.generate, Phase.target])
    @given(strat)
    def search(params: dict[str, float]) -> None:
        params = dict(sorted(params.items()))
        key = json.dumps(params)
        if key not in seen:
            try:
                seen[key] = probe(claim, params, seed, replicates)
            except RuntimeError:
                assume(False)  # configurations the estimator cannot handle (e.g. odd width) are skipped
            result.probes.append(seen[key])
        p = seen[key]
        if in_regime_only:
            assume(p.in_regime)
        target(-math.log(max(p.slack_min, 1e-300)) if math.isfinite(p.slack_min) else -1e9, label="-log slack")
        if deterministic and p.violations and (p.in_regime or not in_regime_only):
            result.counterexample = p  # the last one recorded is Hypothesis's shrunk example
            raise Found(f"violation at {params}")

    try:
        search()
    except Found:
        pass
    except Unsatisfiable:
        pass
    return result
