"""Estimate what a profile costs before running it: per claim, time a sample of its shards and extrapolate.

    python scripts/profile_cost.py claims --profile full --workers 2 --out cost.csv

For each claim the plan is expanded exactly as `lemmacheck run` would (corpus replays, hunts, grid, explored
configurations); then the shard of the largest configuration (by the product of its parameters) and up to
`--sample` shards drawn uniformly at random are run through the same `execute_shard` the runner uses, until
`--cap-s` seconds of estimator time are spent on the claim. The estimate is the number of shards times the mean
time of the uniform sample (unbiased for the total when the cap does not bite), and never less than the largest
configuration's shards at its measured time; when the cap leaves fewer than 3 uniform draws, the largest shard's
time scaled by each configuration's parameter product (a rough model: most estimators cost at least linearly in
width x depth x n). Draws are not recorded: this measures cost, not verdicts.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import math
import random
import sys
import time

from lemmacheck import runner
from lemmacheck.claims import load_claims


def _size(params: dict[str, float]) -> float:
    return math.prod(abs(float(v)) for v in params.values() if isinstance(v, (int, float)) and abs(v) >= 1)


def estimate(claim, profile: str, sample: int, cap_s: float, memory: int, seed: int = 0) -> dict:
    plans = runner.plan(claim, profile, seed)
    # `lemmacheck run` refuses a run with a configuration whose shard cannot fit a worker: count, do not draw them
    fits = [runner.memory_estimate(claim, p.params, p.shard_replicates(0)) <= memory for p in plans]
    shards = [(j, k) for j, p in enumerate(plans) for k in range(p.n_shards) if fits[j]]
    row = {"claim": claim.id, "configs": len(plans), "too_big": fits.count(False), "shards": len(shards),
           "sampled": 0, "largest_s": 0.0, "mean_s": 0.0, "estimate_s": 0.0, "errors": 0}
    if not shards:
        return row
    big = max((j for j in range(len(plans)) if fits[j]), key=lambda j: _size(plans[j].params))
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
        row["estimate_s"] = max(len(shards) * row["mean_s"], plans[big].n_shards * row["largest_s"])
    else:  # too few uniform draws: scale the largest shard by each configuration's parameter product
        sb = _size(plans[big].params)
        row["estimate_s"] = sum(row["largest_s"] * _size(plans[j].params) / sb * plans[j].n_shards
                                for j in range(len(plans)) if fits[j])
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["claims"])
    ap.add_argument("--profile", default="full")
    ap.add_argument("--sample", type=int, default=6, help="uniformly drawn shards per claim (default 6)")
    ap.add_argument("--cap-s", type=float, default=20.0, help="estimator seconds per claim at most (default 20)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default="-", help="CSV file ('-': stdout)")
    a = ap.parse_args()
    claims, errors = load_claims(a.paths)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    claims = [c for c in claims if c.check is not None and a.profile in c.profiles]
    t0 = time.time()
    memory = runner.available_memory() // max(1, a.workers)
    out = sys.stdout if a.out == "-" else open(a.out, "w", newline="")  # noqa: SIM115 (stdout or a file)
    w = csv.DictWriter(out, ["claim", "configs", "too_big", "shards", "sampled", "largest_s", "mean_s",
                             "estimate_s", "errors"])
    w.writeheader()
    rows: list[dict] = []
    todo, retried = list(claims), set()
    while todo:  # a worker killed by the OS (memory) breaks the pool: restart it, record the claims it held
        ex = runner.make_executor(a.workers)
        futs = {ex.submit(estimate, c, a.profile, a.sample, a.cap_s, memory): c for c in todo}
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
            rows.append(row)
            w.writerow(row)
            out.flush()
        ex.shutdown(wait=False, cancel_futures=True)
    rows = [r for r in rows if "estimate_s" in r]
    total = sum(r["estimate_s"] for r in rows)
    print(f"{len(rows)} claims, {sum(r['shards'] for r in rows)} shards: about {total / 60:.0f} estimator-minutes "
          f"({total / 60 / max(a.workers, 1):.0f} min wall on {a.workers} workers); measured in "
          f"{time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
