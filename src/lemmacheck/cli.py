"""`lemmacheck list | run | repro | show | hunt | report`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .claims import load_claims
from .errors import ClaimError, LemmacheckError
from .registry import INPUTS, NETWORKS, QUANTITIES, describe

DEFAULT_DB = ".lemmacheck/results.db"


def _load(paths: list[str]):
    claims, errors = load_claims(paths or ["claims"])
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return claims, errors


def cmd_list(a: argparse.Namespace) -> int:
    if a.quantities or a.networks or a.inputs:
        reg = QUANTITIES if a.quantities else NETWORKS if a.networks else INPUTS
        items = describe(reg)
        if a.json:
            print(json.dumps(items, indent=2))
        else:
            for it in items:
                nets = f" [{', '.join(it['networks'])}]" if it["networks"] else ""
                print(f"{it['name']:32s} {it['description']}{nets}")
        return 0
    claims, errors = _load(a.paths)
    rows = [{"id": c.id, "paper": c.paper, "result": c.result, "kind": c.kind, "title": c.title, "mode": c.mode,
             "expect": c.expect, "source": str(c.source)} for c in claims]
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['id']:60s} {r['result']:22s} {r['mode']:13s} {r['title']}")
    return 1 if errors else 0


def _find_claim(claim_id: str, roots: list[str]):
    claims, _ = load_claims(roots)
    for c in claims:
        if c.id == claim_id:
            return c
    raise LemmacheckError(f"no claim with id '{claim_id}' under {roots}")


def cmd_run(a: argparse.Namespace) -> int:
    from .runner import evaluate, run_claims
    from .store import Store
    from .summary import run_json, table

    claims, errors = _load(a.paths)
    Path(a.db).parent.mkdir(parents=True, exist_ok=True)
    store = Store(a.db)
    paths = sorted(str(Path(p)) for p in (a.paths or ["claims"]))
    progress = (lambda s: print(s, file=sys.stderr)) if a.verbose else None
    executor = None
    if a.scheduler:
        from .cluster import DaskExecutor
        executor = DaskExecutor(a.scheduler)
    try:
        run_id = run_claims(claims, store, profile=a.profile, seed=a.seed, workers=a.workers, resume=a.resume,
                            update=a.update or bool(a.rerun), rerun=a.rerun, paths=paths, progress=progress,
                            executor=executor)
    except KeyboardInterrupt:
        print(f"\ninterrupted: completed shards are saved in {a.db}; rerun with --resume to continue",
              file=sys.stderr)
        return 130
    finally:
        if executor is not None:
            executor.shutdown(wait=False)
    results = evaluate(store, run_id, claims)
    doc = run_json(store.run_info(run_id), results)
    if a.json:
        tmp = Path(a.json).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, a.json)  # never leave a half-written file behind
    print(table(results))
    if a.report:
        from .report import build_report

        build_report(a.db, a.report)
        print(f"report written to {a.report}/index.html")
    bad = [r for r in results if not r.ok]
    return 1 if bad or errors else 0


def cmd_repro(a: argparse.Namespace) -> int:
    from .runner import repro
    from .summary import claim_json, failure_text

    claim = _find_claim(a.id, a.claims)
    res = repro(claim, json.loads(a.params), a.seed, a.replicates, a.shard_size)
    print(failure_text(res))
    if a.json:
        print(json.dumps(claim_json(res), indent=1))
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    claim = _find_claim(a.id, a.claims)
    print(f"{claim.id}\n  paper: {claim.paper}, {claim.result}\n  title: {claim.title}")
    print(f"  statement: {claim.statement}")
    if claim.check:
        c = claim.check
        print(f"  checks: {c.quantity} {c.relation} {c.bound.text}")
        print(f"  quantifiers: {claim.quantifiers()}")
        print(f"  mode: {claim.mode}; expect: {claim.expect}")
    else:
        print(f"  infeasible: {claim.infeasible}")
    if claim.notes:
        print(f"  notes: {claim.notes.strip()}")
    if claim.finding:
        print(f"  finding: {claim.finding.strip()}")
    if Path(a.db).exists():
        from .runner import evaluate
        from .store import Store
        from .summary import failure_text

        store = Store(a.db, readonly=True)
        for run_id in range(store.latest_run() or 0, 0, -1):
            if claim.id in store.claim_ids(run_id):
                info = store.run_info(run_id)
                print(f"  last results (run {run_id}, {info['profile']}, seed {info['seed']}, {info['started']}):")
                print("    " + failure_text(evaluate(store, run_id, [claim])[0]).replace("\n", "\n    "))
                break
    return 0


def cmd_hunt(a: argparse.Namespace) -> int:
    from .hunt import hunt
    from .runner import repro_command

    claim = _find_claim(a.id, a.claims)
    res = hunt(claim, examples=a.examples, replicates=a.replicates, seed=a.seed, in_regime_only=a.in_regime)
    print(f"{claim.id}: {len(res.probes)} configurations probed ({a.replicates} replicates each), targeted at "
          "the smallest slack. A search can refute a universal statement, never prove it.")
    for p in sorted(res.probes, key=lambda p: p.slack_min)[:a.top]:
        print(f"  slack {p.slack_min:9.4g}  violations {p.violations:3d}/{a.replicates}  "
              f"{'in regime ' if p.in_regime else 'OUT of regime'}  {p.params}")
    if res.counterexample:
        ce = res.counterexample
        print(f"counterexample (shrunk by Hypothesis): {ce.params}")
        print("  reproduce: " + repro_command(claim, ce.params, ce.seed, a.replicates, a.replicates))
        return 1
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .report import build_report

    build_report(a.db, a.out, compare=a.compare)
    print(f"report written to {a.out}/index.html")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lemmacheck", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="list claims (or --quantities, --networks, --inputs)")
    ls.add_argument("paths", nargs="*")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--quantities", action="store_true")
    ls.add_argument("--networks", action="store_true")
    ls.add_argument("--inputs", action="store_true")
    ls.set_defaults(fn=cmd_list)
    rn = sub.add_parser("run", help="run claims and record results")
    rn.add_argument("paths", nargs="*")
    rn.add_argument("--profile", choices=["quick", "full"], default="quick")
    rn.add_argument("--seed", type=int, default=0)
    rn.add_argument("--db", default=DEFAULT_DB)
    rn.add_argument("--json")
    rn.add_argument("--workers", type=int, default=1, help="local worker processes (1: in this process)")
    rn.add_argument("--scheduler", help="run shards on a Dask cluster at this address (tcp://host:8786) instead "
                    "of local workers; needs lemmacheck[dask]")
    rn.add_argument("--resume", action="store_true", help="continue the last unfinished run with the same "
                    "seed, profile and paths")
    rn.add_argument("--update", action="store_true", help="bring the latest run with the same seed, profile and "
                    "paths (finished or not) up to date with the claim files: re-run changed claims, add new "
                    "ones, drop deleted ones, keep the rest (estimator code changes are not detected)")
    rn.add_argument("--rerun", action="append", default=[], metavar="ID",
                    help="with --update semantics, also redraw this claim (after fixing its estimator); repeatable")
    rn.add_argument("--report", help="also write the HTML report to this folder")
    rn.add_argument("-v", "--verbose", action="store_true")
    rn.set_defaults(fn=cmd_run)
    rp = sub.add_parser("repro", help="re-run one configuration exactly")
    rp.add_argument("id")
    rp.add_argument("--params", required=True)
    rp.add_argument("--seed", type=int, required=True, help="the configuration's seed (from results)")
    rp.add_argument("--replicates", type=int, required=True)
    rp.add_argument("--shard-size", type=int, required=True)
    rp.add_argument("--claims", nargs="*", default=["claims"])
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(fn=cmd_repro)
    sh = sub.add_parser("show", help="statement, bound, quantifiers and last results of a claim")
    sh.add_argument("id")
    sh.add_argument("--db", default=DEFAULT_DB)
    sh.add_argument("--claims", nargs="*", default=["claims"])
    sh.set_defaults(fn=cmd_show)
    hu = sub.add_parser("hunt", help="Hypothesis-targeted search of a claim's domain for the smallest slack")
    hu.add_argument("id")
    hu.add_argument("--examples", type=int, default=50)
    hu.add_argument("--replicates", type=int, default=8)
    hu.add_argument("--seed", type=int, default=0)
    hu.add_argument("--top", type=int, default=10)
    hu.add_argument("--in-regime", action="store_true", help="only configurations meeting `requires`")
    hu.add_argument("--claims", nargs="*", default=["claims"])
    hu.set_defaults(fn=cmd_hunt)
    rep = sub.add_parser("report", help="render the static HTML report from a results store")
    rep.add_argument("--db", default=DEFAULT_DB)
    rep.add_argument("--out", required=True)
    rep.add_argument("--compare", help="an older results store to mark changes against")
    rep.set_defaults(fn=cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        return a.fn(a)
    except (LemmacheckError, ClaimError, FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
