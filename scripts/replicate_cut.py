"""What cutting a profile's replicates would cost in verdicts and save in time, read off a run already made.

    python scripts/replicate_cut.py --db full.db --fraction 0.5 --fraction 0.25 [--claims claims] [--out cut.csv]
    python scripts/replicate_cut.py --db full.db --fraction 0.5 --save 1500 [--write]

A shard's draws depend only on its configuration's seed and its index (shards.shard_seed), never on how many shards
the configuration has, so a configuration cut to its first k shards is exactly what a run at k x shard_size
replicates would have drawn there. A finished run therefore answers, per claim and without drawing anything, which
verdict the profile would reach with a fraction of its replicates and how many estimator seconds that would not
spend. An early-stopping configuration keeps its sequential rule (one that stopped within k shards is unchanged; one
still undecided reads the fixed-size interval at k shards, as the cut run would).

What it cannot answer, and says: a one-shard configuration cannot be cut this way (its shard size, hence its draws,
would change); the default hunt's budget scales with the profile's draws (corpus.hunt_budget), so a cut that lowers
it hunts less and pins other configurations: such claims are counted (pin `hunt = N` in the claim file to keep the
hunt as it was). The hunts' seconds are not cut.

Per fraction: the verdict tally, every verdict that changes, the seconds saved; `--out` a CSV per claim.

`--save SECONDS` (one fraction) chooses a budget cut: the claims whose verdict on these draws is the same at the
fraction, costliest saving first, until the saving reaches SECONDS (`--keep ID` leaves a claim out: one whose notes
say why it draws what it draws); `--write` then sets their replicates in the
claim files, pinning `hunt` where the default hunt would shrink, so that re-running them draws exactly the kept
shards and hunts as before.
"""
from __future__ import annotations

import argparse
import collections
import csv
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from lemmacheck import corpus, runner
from lemmacheck.claims import load_claims
from lemmacheck.store import ShardRecord, Store


class TruncatedStore:
    """A read-only view of a store in which every configuration of two or more shards keeps its first
    ceil(fraction x shards) of them, with its replicates cut to match; `saved` sums the seconds of the rest."""

    def __init__(self, store: Store, fraction: float):
        if not 0 < fraction <= 1:
            raise ValueError(f"--fraction must lie in (0, 1], got {fraction}")
        self.store, self.fraction = store, fraction
        self.kept: dict[tuple[str, int], int] = {}
        self.dropped: dict[tuple[str, int, int], float] = {}  # (claim, config, shard) -> seconds, however often read

    @property
    def saved(self) -> collections.Counter[str]:
        """Seconds of the dropped shards read so far, per claim."""
        out: collections.Counter[str] = collections.Counter()
        for (cid, _, _), s in self.dropped.items():
            out[cid] += s
        return out

    def __getattr__(self, name: str) -> Any:  # everything else (run_info, probes, hunt_error) as stored
        return getattr(self.store, name)

    def configs(self, run_id: int, claim_id: str) -> list[dict[str, Any]]:
        out = []
        for c in self.store.configs(run_id, claim_id):
            n = -(-c["replicates"] // c["shard_size"])
            k = n if n < 2 else max(1, math.ceil(n * self.fraction))
            self.kept[(claim_id, c["index"])] = k
            out.append({**c, "replicates": min(c["replicates"], k * c["shard_size"])})
        return out

    def shards(self, run_id: int, claim_id: str, config_index: int) -> Iterator[ShardRecord]:
        k = self.kept[(claim_id, config_index)]
        for rec in self.store.shards(run_id, claim_id, config_index):
            if rec.shard_index < k:
                yield rec
            else:
                self.dropped[(claim_id, config_index, rec.shard_index)] = rec.seconds


def hunt_shrinks(claim: Any, fraction: float, profile: str) -> bool:
    """Whether the profile's hunt (corpus.hunt_budget) would get fewer examples at the cut replicates."""
    prof = claim.profiles.get(profile)
    if prof is None:
        return False
    n = -(-prof.replicates // prof.shard_size)
    cut = prof.replicates if n < 2 else math.ceil(n * fraction) * prof.shard_size  # as TruncatedStore cuts
    smaller = replace(claim, profiles={**claim.profiles, profile: replace(prof, replicates=cut)})
    return corpus.hunt_budget(smaller, profile) < corpus.hunt_budget(claim, profile)


def chosen(rows: dict[str, dict[str, Any]], fraction: float, target: float, keep: frozenset[str] = frozenset()
           ) -> list[str]:
    """The claims a budget cut takes: costliest saving first among those whose verdict at `fraction` is their
    full verdict (on these draws), leaving out `keep`, until the savings reach `target` seconds."""
    ok = [r for r in rows.values() if r[f"verdict_{fraction:g}"] == r["verdict"] and r[f"saved_s_{fraction:g}"] > 0
          and r["claim"] not in keep]
    out, saved = [], 0.0
    for r in sorted(ok, key=lambda r: (-r[f"saved_s_{fraction:g}"], r["claim"])):
        if saved >= target:
            break
        out.append(r["claim"])
        saved += r[f"saved_s_{fraction:g}"]
    return out


def cut_replicates(replicates: int, shard_size: int, fraction: float) -> int:
    """What TruncatedStore keeps of a configuration of `replicates` draws: its first ceil(fraction x shards)
    shards (a one-shard configuration whole)."""
    n = -(-replicates // shard_size)
    return replicates if n < 2 else min(replicates, math.ceil(n * fraction) * shard_size)


def write_cut(claim: Any, fraction: float, profile: str) -> str:
    """The claim file's text with [profiles.<profile>] at the cut replicates (and `hunt` pinned at the default
    budget the full replicates gave, where the cut would shrink it), a comment saying why."""
    prof = claim.profiles[profile]
    new = cut_replicates(prof.replicates, prof.shard_size, fraction)
    lines = claim.source.read_text().splitlines(keepends=True)
    head = next((i for i, ln in enumerate(lines) if ln.strip() == f"[profiles.{profile}]"), None)
    if head is None:
        raise ValueError(f"{claim.source}: no [profiles.{profile}] table to edit")
    # the table ends at the next table header (unindented, so a multi-line array's rows do not end it)
    end = next((i for i in range(head + 1, len(lines)) if re.match(r"\[[A-Za-z_]", lines[i])), len(lines))
    pin = (f"hunt = {corpus.hunt_budget(claim, profile)}\n" if hunt_shrinks(claim, fraction, profile) else "")
    note = (f"# {new} replicates, not the design's {prof.replicates}: the full profile's hour (reports/README.md, Cost);"
            f"\n# the published run reads the same verdict on its first {new} draws of each configuration.\n")
    for i in range(head + 1, end):
        if re.match(r"replicates\s*=", lines[i]):
            lines[i] = note + f"replicates = {new}\n" + pin
            break
    else:
        lines.insert(head + 1, note + f"replicates = {new}\n" + pin)
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the results store of a finished run")
    ap.add_argument("--run", type=int, help="its run id (default: the latest)")
    ap.add_argument("--fraction", type=float, action="append", required=True,
                    help="share of each configuration's shards kept (repeatable)")
    ap.add_argument("--claims", nargs="*", default=["claims"], help="where the claims live (default: claims)")
    ap.add_argument("--out", help="CSV: per claim, its seconds and its verdict at each fraction")
    ap.add_argument("--save", type=float, metavar="SECONDS",
                    help="with one --fraction: choose claims to cut until SECONDS of shards are saved")
    ap.add_argument("--keep", action="append", default=[], metavar="CLAIM_ID",
                    help="with --save: a claim not to cut, e.g. one whose notes say why it draws what it draws")
    ap.add_argument("--write", action="store_true", help="with --save: edit the chosen claim files")
    args = ap.parse_args(argv)
    if (args.save is not None or args.write) and (len(args.fraction) != 1 or args.save is None):
        ap.error("--save takes exactly one --fraction, and --write needs --save")
    claims, errors = load_claims(args.claims)
    for e in errors:
        print(e, file=sys.stderr)
    store = Store(args.db, readonly=True)
    run_id = args.run or store.latest_run()
    profile = store.run_info(run_id)["profile"]
    stored = set(store.claim_ids(run_id))
    claims = [c for c in claims if c.id in stored]
    seconds = collections.Counter()
    for c in claims:
        for cfg in store.configs(run_id, c.id):
            seconds[c.id] += sum(r.seconds for r in store.shards(run_id, c.id, cfg["index"]))
    full = {r.claim.id: r.verdict for r in runner.evaluate(store, run_id, claims)}
    rows = {cid: {"claim": cid, "seconds": round(seconds[cid], 1), "verdict": v} for cid, v in full.items()}
    total = sum(seconds.values())
    print(f"run {run_id} ({profile} profile): {len(claims)} claims, {total:.0f} estimator-seconds of shards; "
          f"verdicts {dict(collections.Counter(full.values()))}")
    for f in args.fraction:
        view = TruncatedStore(store, f)
        cut = {r.claim.id: r.verdict for r in runner.evaluate(view, run_id, claims)}
        saved = view.saved
        changed = sorted((cid, full[cid], v) for cid, v in cut.items() if v != full[cid])
        shrink = sum(hunt_shrinks(c, f, profile) for c in claims)
        print(f"\nfraction {f:g}: saves {sum(saved.values()):.0f} of {total:.0f} shard seconds; verdicts "
              f"{dict(collections.Counter(cut.values()))}; {len(changed)} change; the default hunt of {shrink} "
              "claim(s) would shrink (not simulated)")
        for cid, was, now in changed:
            print(f"  {cid}: {was} -> {now}")
        for cid, v in cut.items():
            rows[cid][f"verdict_{f:g}"] = v
            rows[cid][f"saved_s_{f:g}"] = round(saved[cid], 1)
    # The cut a lead could choose claim by claim: each claim at the smallest fraction at which it, and every larger
    # fraction asked for, reads its full verdict (on these draws: another seed may need more)
    best: dict[str, float] = {}
    for cid, row in rows.items():
        for f in sorted(args.fraction, reverse=True):
            if row[f"verdict_{f:g}"] != row["verdict"]:
                break
            best[cid] = f
    kept = sum(rows[cid][f"saved_s_{f:g}"] for cid, f in best.items())
    print(f"\nverdict-preserving per claim: {len(best)} of {len(rows)} claims cut "
          f"({dict(collections.Counter(best.values()))} by fraction), saving {kept:.0f} shard seconds")
    if args.save is not None:
        f = args.fraction[0]
        pick = chosen(rows, f, args.save, frozenset(args.keep))
        by_id = {c.id: c for c in claims}
        print(f"\nbudget cut at fraction {f:g}: {len(pick)} claims, saving "
              f"{sum(rows[cid][f'saved_s_{f:g}'] for cid in pick):.0f} shard seconds")
        for cid in pick:
            prof = by_id[cid].profiles[profile]
            print(f"  {cid}: {rows[cid]['seconds']:.0f} s, replicates {prof.replicates} -> "
                  f"{cut_replicates(prof.replicates, prof.shard_size, f)}, saves {rows[cid][f'saved_s_{f:g}']:.0f} s"
                  + (", hunt pinned" if hunt_shrinks(by_id[cid], f, profile) else ""))
            if args.write:
                by_id[cid].source.write_text(write_cut(by_id[cid], f, profile))
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(next(iter(rows.values()))))
            w.writeheader()
            w.writerows(rows.values())
    return 0


if __name__ == "__main__":
    sys.exit(main())
