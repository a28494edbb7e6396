"""Estimate what a profile costs before running it: per claim, time a sample of its shards and extrapolate.

    python scripts/profile_cost.py claims --profile full --workers 2 --out cost.csv

For each claim the plan is expanded exactly as `lemmacheck run` would (corpus replays, the profile's bounded hunt,
grid, regime-path levels, explored configurations), and the time that takes is the `plan_s` column: planning runs
the hunt's probes (the full profile hunts every checked claim by default, corpus.hunt_budget); `run` hunts on its
worker pool beside other claims' shards, so plan seconds share the workers with the shards. Then the shard of the largest configuration (by the product of its parameters) and up to
`--sample` shards drawn uniformly at random are run through the same `execute_shard` the runner uses, until
`--cap-s` seconds of estimator time are spent on the claim. The estimate is the number of shards (of an
early-stopping configuration, the shards a violation-free sample needs to decide: `expected_shards`) times the mean
time of the uniform sample (unbiased for the total when the cap does not bite), and never less than the largest
configuration's shards at its measured time; when the cap leaves fewer than 3 uniform draws, the largest shard's
time scaled by each configuration's parameter product (a rough model: most estimators cost at least linearly in
width x depth x n). Draws are not recorded: this measures cost, not verdicts.

With `--stored RUN_JSON` (a run's JSON, e.g. reports/results.json), a configuration that run drew with the same
parameters costs the seconds it recorded there, and only the rest (new levels, a hunt's worst case) is sampled:
an estimate of a full profile in minutes instead of hours, as accurate as that run's timings for the unchanged part.

The summary line gives the wall time as (plan seconds + shard seconds) / workers, and the claims that cost most.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import json
import math
import random
import sys
import time

from lemmacheck import runner
from lemmacheck.claims import load_claims


def _size(params: dict[str, float]) -> float:
    return math.prod(abs(float(v)) for v in params.values() if isinstance(v, (int, float)) and abs(v) >= 1)


def _key(params: dict) -> tuple:
    return tuple(sorted((k, float(v)) for k, v in params.items()))


def stored_seconds(path: str) -> dict[str, dict[tuple, float]]:
    """claim id -> configuration parameters -> estimator seconds, from a run's JSON (`lemmacheck run --json`, e.g.
    reports/results.json): what the published run spent on each configuration it drew."""
    with open(path) as fh:
        doc = json.load(fh)
    out: dict[str, dict[tuple, float]] = {}
    for c in doc["claims"]:
        for cfg in c.get("configs") or []:
            if cfg.get("seconds") is not None:
                out.setdefault(c["id"], {})[_key(cfg["params"])] = float(cfg["seconds"])
    return out


def expected_shards(claim, p) -> int:
    """Shards a configuration is expected to draw: all of them, except that an early-stopping one stops at the
    first shard where the anytime-valid confidence sequence of a violation-free sample lies below delta (what
    a configuration that holds draws; one near delta draws them all, a violated one stops sooner). On the last
    full run this predicted 4,618 shards of the 1,696 early-stopping configurations against 4,199 drawn (12,745
    planned), the same count for 1,409 of them."""
    if not p.early_stop:
        return p.n_shards
    from lemmacheck.stats import DEFAULT_ALPHA, bernoulli_confidence_sequence

    delta = claim.delta(p.params)
    for s in range(1, p.n_shards):
        if bernoulli_confidence_sequence(0, s * p.shard_size, DEFAULT_ALPHA)[1] < delta:
            return s
    return p.n_shards


def estimate(claim, profile: str, sample: int, cap_s: float, memory: int, seed: int = 0,
             stored: dict[tuple, float] | None = None) -> dict:
    t0 = time.process_time()
    plans = runner.plan(claim, profile, seed)
    plan_s = time.process_time() - t0  # the hunt's probes (a unit of work on a real run's pool)
    # `lemmacheck run` refuses a run with a configuration whose shard cannot fit a worker: count, do not draw them
    fits = [runner.memory_estimate(claim, p.params, p.shard_replicates(0)) <= memory for p in plans]
    # --stored: a configuration the published run drew costs what it cost there; only the others are sampled
    known = {_key(p.params) for p in plans} & set(stored or {})
    stored_s = sum((stored or {})[k] for k in known)
    todo = [j for j, p in enumerate(plans) if fits[j] and _key(p.params) not in known]
    counts = [expected_shards(claim, p) for p in plans]
    shards = [(j, k) for j in todo for k in range(counts[j])]
    row = {"claim": claim.id, "configs": len(plans), "too_big": fits.count(False),
           "shards": sum(n for j, n in enumerate(counts) if fits[j]), "plan_s": round(plan_s, 3),
           "stored_s": round(stored_s, 3), "sampled": 0, "largest_s": 0.0, "mean_s": 0.0, "estimate_s": stored_s,
           "errors": 0}
    if not shards:
        return row
    big = max(todo, key=lambda j: _size(plans[j].params))
    rng = random.Random(claim.id)
    picks = rng.sample(shards, min(sample, len(shards)))
    times: list[float] = []
    spent = 0.0
    for n, (j, k) in enumerate([(big, 0)] + picks):
        rec = runner.execute_shard(runner._task(claim, j, plans[j], k), "cpu")
        row["errors"] += bool(rec.error)
        spent += rec.seconds
        if n == 0:
            row["largest_s"] = rec.seconds
        else:
            times.append(rec.seconds)
        if spent > cap_s:
            break
    row["sampled"] = len(times)
    row["mean_s"] = sum(times) / len(times) if times else row["largest_s"]
    if len(times) >= 3:
        row["estimate_s"] += max(len(shards) * row["mean_s"], counts[big] * row["largest_s"])
    else:  # too few uniform draws: scale the largest shard by each configuration's parameter product
        sb = _size(plans[big].params)
        row["estimate_s"] += sum(row["largest_s"] * _size(plans[j].params) / sb * counts[j] for j in todo)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["claims"])
    ap.add_argument("--profile", default="full")
    ap.add_argument("--sample", type=int, default=6, help="uniformly drawn shards per claim (default 6)")
    ap.add_argument("--cap-s", type=float, default=20.0, help="estimator seconds per claim at most (default 20)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default="-", help="CSV file ('-': stdout)")
    ap.add_argument("--stored", metavar="RUN_JSON", help="take the seconds of configurations a published run drew "
                    "from its JSON (e.g. reports/results.json) and sample only the rest (new levels, hunts)")
    ap.add_argument("--top", type=int, default=12, help="most expensive claims listed after the summary")
    a = ap.parse_args()
    claims, errors = load_claims(a.paths)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    claims = [c for c in claims if c.check is not None and a.profile in c.profiles]
    t0 = time.time()
    stored = stored_seconds(a.stored) if a.stored else {}
    memory = runner.available_memory() // max(1, a.workers)
    out = sys.stdout if a.out == "-" else open(a.out, "w", newline="")  # noqa: SIM115 (stdout or a file)
    w = csv.DictWriter(out, ["claim", "configs", "too_big", "shards", "plan_s", "stored_s", "sampled", "largest_s",
                             "mean_s", "estimate_s", "errors"])
    w.writeheader()
    rows: list[dict] = []
    todo, retried = list(claims), set()
    while todo:  # a worker killed by the OS (memory) breaks the pool: restart it, record the claims it held
        ex = runner.make_executor(a.workers)
        futs = {ex.submit(estimate, c, a.profile, a.sample, a.cap_s, memory, 0, stored.get(c.id)): c for c in todo}
        todo = []
        for f in cf.as_completed(futs):
            try:
                row = f.result()
            except cf.process.BrokenProcessPool:
                c = futs[f]
                if c.id not in retried:  # it may only have shared the pool with the culprit
                    retried.add(c.id)
                    todo.append(c)
                    continue
                row = {"claim": c.id, "errors": "worker killed"}
            except Exception as exc:  # noqa: BLE001  (one claim that cannot be planned is named; the rest go on)
                row = {"claim": futs[f].id, "errors": f"{type(exc).__name__}: {exc}"}
            rows.append(row)
            w.writerow(row)
            out.flush()
        ex.shutdown(wait=False, cancel_futures=True)
    rows = [r for r in rows if "estimate_s" in r]
    total = sum(r["estimate_s"] for r in rows)
    planning = sum(r.get("plan_s", 0.0) for r in rows)
    wall = (planning + total) / max(a.workers, 1)  # hunts run on the pool beside the shards
    print(f"{len(rows)} claims, {sum(r['shards'] for r in rows)} shards: about {total / 60:.1f} estimator-minutes "
          f"of shards and {planning / 60:.1f} minutes of hunts, about {wall / 60:.0f} min wall on "
          f"{a.workers} workers; measured in {time.time() - t0:.0f} s", file=sys.stderr)
    top = sorted(rows, key=lambda r: r["estimate_s"] + r.get("plan_s", 0.0), reverse=True)
    for r in top[:a.top]:
        print(f"  {r['claim']:70s} shards {r['estimate_s']:8.1f} s ({r['shards']} shards)  plan {r['plan_s']:6.1f} s",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
