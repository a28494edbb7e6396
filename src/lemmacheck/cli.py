"""`lemmacheck list | run | repro | show | hunt | findings | graph | report`.

Streams: stdout carries a command's result (a table, a listing, JSON), so it can be piped; progress, notes,
warnings and errors go to stderr. A user error is one line "error: ..." and exit 2; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import re
import signal
import sqlite3
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from .errors import LemmacheckError
from .registry import INPUTS, NETWORKS, QUANTITIES, describe

DEFAULT_DB = ".lemmacheck/results.db"
BUG_HINT = ("this is a bug in lemmacheck, not in your input: please report it (the command line, the claim file "
            "and this traceback) in the lemmacheck issue tracker")


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _load(paths: list[str]):
    # Claims (and with them torch and sympy) load only when a command needs them: `--help` stays cheap.
    from .claims import load_claims, result_label_warnings

    claims, errors = load_claims(paths or ["claims"])
    for e in errors:
        _err(f"error: {e}")
    for w in result_label_warnings(claims):
        _err(f"warning: {w}")
    return claims, errors


def _progress_mode(a: argparse.Namespace) -> str:
    """Nothing with --quiet or when stdout carries JSON (`--json -`); a bar on a terminal, lines elsewhere."""
    if getattr(a, "quiet", False) or getattr(a, "json", None) == "-":
        return "off"
    return "auto"


def _input_details(reg, items: list[dict]) -> None:
    """Add each input generator's declared fields and, where a field chooses a geometry, every geometry's
    description (`list --inputs` lists what a claim's `inputs` may say, in full)."""
    from .inputs import GEOMETRIES

    for it in items:
        fields = reg.get(it["name"]).extra.get("fields") or {}
        it["fields"] = {k: (v if isinstance(v, str) else list(v)) for k, v in fields.items()}
        if fields.get("geometry") is not None and not isinstance(fields["geometry"], str):
            it["geometries"] = {g: GEOMETRIES[g].description for g in fields["geometry"] if g in GEOMETRIES}


def cmd_list(a: argparse.Namespace) -> int:
    if a.quantities or a.networks or a.inputs:
        from .builtin import load_installed_extensions  # the engine's own register on import of builtin
        from .claims import claim_files, load_extension

        load_installed_extensions()
        paths = a.paths or (["claims"] if Path("claims").is_dir() else [])
        for folder in sorted({f.parent for f in claim_files(paths)}):
            load_extension(folder)  # each paper's plugin, as loading its claims would
        reg = QUANTITIES if a.quantities else NETWORKS if a.networks else INPUTS
        items = describe(reg)
        if a.inputs:
            _input_details(reg, items)
        if a.json:
            print(json.dumps(items, indent=2))
        else:
            import shutil
            import textwrap

            width = max(80, shutil.get_terminal_size((110, 24)).columns)
            for it in items:
                nets = f" [{', '.join(it['networks'])}]" if it["networks"] else ""
                # wrapped, never cut: every generator's fields and every geometry with what it does
                print(textwrap.fill(f"{it['name']:32s} {it['description']}{nets}", width, subsequent_indent=" " * 33))
                for name, kind in (it.get("fields") or {}).items():
                    what = (kind if isinstance(kind, str) else "one of the geometries below"
                            if name == "geometry" and it.get("geometries") else "one of " + ", ".join(kind))
                    print(textwrap.fill(f"{'':33s}{name}: {what}", width, subsequent_indent=" " * 35))
                for g, text in (it.get("geometries") or {}).items():
                    print(textwrap.fill(f"{'':35s}{g}: {text}", width, subsequent_indent=" " * 37))
        return 0
    claims, errors = _load(a.paths)
    rows = [{"id": c.id, "paper": c.paper, "result": c.result, "kind": c.kind, "title": c.title, "mode": c.mode,
             "expect": c.expect, "source": str(c.source)} for c in claims]
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['id']:60s} {r['result']:22s} {r['mode']:13s} {r['title']}")
    return 2 if errors else 0  # a malformed claim file is a user error, as everywhere


# A claim file's top-level `id = "..."` line (a basic string without escapes, or a literal string): read as text,
# so finding one claim among hundreds parses no TOML and no expression but its own.
_ID_LINE = re.compile(r"""^id\s*=\s*(?:"([^"\\]*)"|'([^']*)')\s*(?:#.*)?$""")


def _declared_id(path: Path) -> str | None:
    """The `id` a claim file declares, read from its lines up to the first table header; a file whose id is
    written otherwise (escapes, a quoted key) is parsed as TOML (the id only: no claim validation here)."""
    import tomllib

    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                text = line.strip()
                if text.startswith("["):
                    break  # past the top-level keys: `id` must be written some other way
                match = _ID_LINE.match(text)
                if match:
                    return match.group(1) if match.group(1) is not None else match.group(2)
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # loading it by path gives the error that names the file
    cid = raw.get("id")
    return cid if isinstance(cid, str) else None


def _find_claim(claim_id: str, roots: list[str]):
    """The claim with this id under `roots`: each file's `id` line is read, and only the matching file is loaded
    and validated, so `repro`, `show` and `hunt` cost the same whatever the size of the suite."""
    from .claims import claim_files, load_claim

    found = [f for f in claim_files(roots) if _declared_id(f) == claim_id]
    if len(found) > 1:
        raise LemmacheckError(f"the id '{claim_id}' is declared by {len(found)} claim files: "
                              f"{', '.join(map(str, found))} (fix: give each claim its own id)")
    if not found:
        raise LemmacheckError(f"no claim with id '{claim_id}' under {roots}")
    claim = load_claim(found[0].resolve())
    if claim.id != claim_id:  # an `id = ...` line inside a multi-line string before the real one
        raise LemmacheckError(f"{found[0]}: a line reads id = '{claim_id}' but the file's id is '{claim.id}' "
                              "(fix: move the `id` line to the top of the file)")
    return claim


def _use_device(device: str) -> None:
    """`--device`: shards run there (runner.current_device reads it; worker processes inherit it)."""
    if device != "cpu":
        import torch

        if not device.startswith("cuda") or not torch.cuda.is_available():
            raise LemmacheckError(f"--device {device}: no such device here (torch {torch.__version__}, CUDA "
                                  f"{'available' if torch.cuda.is_available() else 'not available'}); use cpu or cuda[:N]")
    os.environ["LEMMACHECK_DEVICE"] = device


def cmd_run(a: argparse.Namespace) -> int:
    from .store import Store

    if a.workers < 1:
        raise LemmacheckError(f"--workers {a.workers}: expected 1 or more (1 runs in this process)")
    _use_device(a.device)
    claims, errors = _load(a.paths)
    if errors and (a.update or a.rerun):
        # --update drops the stored results of claims that are no longer there: a file that failed to load is not
        # a deleted claim, and its stored shards (perhaps hours of draws) must not go with it.
        raise LemmacheckError(f"{len(errors)} claim file(s) failed to load (above); --update would drop their stored "
                              "results as if the claims were deleted, so nothing was run (fix: correct the files, or "
                              "delete them on purpose)")
    if a.profile == "full":  # the full profile must reach every declared edge, or the claim says why
        from .shards import edge_warnings

        for w in edge_warnings(claims):
            _err(f"warning: {w}")
    Path(a.db).parent.mkdir(parents=True, exist_ok=True)
    store = Store(a.db)
    try:
        if a.seeds is not None:
            return _run_seeds(a, claims, errors, store)
        return _run_into(a, claims, errors, store)
    finally:
        store.close()  # checkpointed now, not whenever it is garbage-collected: `show` picks the newest store by mtime


def _run_into(a: argparse.Namespace, claims, errors, store) -> int:
    from .progress import RunProgress
    from .runner import evaluate, run_claims
    from .summary import cost_text, run_json, table

    paths = sorted(str(Path(p)) for p in (a.paths or ["claims"]))
    progress = RunProgress(claims, verbose=a.verbose, mode=_progress_mode(a))
    executor = None
    if a.scheduler:
        from .cluster import DaskExecutor
        executor = DaskExecutor(a.scheduler)
    try:
        with store.run_lock(), progress:
            run_id = run_claims(claims, store, profile=a.profile, seed=a.seed, workers=a.workers, resume=a.resume,
                                update=a.update or bool(a.rerun), rerun=a.rerun, paths=paths, progress=progress,
                                executor=executor)
    except KeyboardInterrupt:
        _err(f"\ninterrupted: completed shards are saved in {a.db}; rerun with --resume to continue")
        return 130
    finally:
        if executor is not None:
            executor.shutdown(wait=False)
    results = evaluate(store, run_id, claims)
    doc = run_json(store.run_info(run_id), results)
    doc["run"]["cost"] = store.cost(run_id)  # where the time went (docs/performance.md)
    if getattr(a, "collect", None) is not None:  # run --seeds: one seed of several, its document handed back
        a.collect.append(doc)
    human = _emit_json(doc, a.json)
    if not (a.quiet and human is sys.stderr):
        print(table(results), file=human)
    if not a.quiet:
        _err(cost_text(doc["run"]["cost"]))
    if a.report:
        from .progress import Progress
        from .report import build_report

        with Progress("report", "page", mode=_progress_mode(a)) as rp:
            build_report(a.db, a.report, progress=rp)
        if not a.quiet:
            _err(f"report written to {a.report}/index.html")
    bad = [r for r in results if not r.ok]
    if _report_bugs(results, a):
        return 70  # EX_SOFTWARE: the run finished, but an estimator raised what it should not
    if errors:
        return 2  # a claim file failed to load (named above); the others ran
    return 1 if bad else 0


def _emit_json(doc: dict, target: str | None):
    """`--json`: '-' prints the document alone on stdout, a path gets it written atomically (never a half-written
    file); returns the stream the human-readable table goes to."""
    if target == "-":
        print(json.dumps(doc, indent=1))
        return sys.stderr
    if target:
        tmp = Path(target).with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        os.replace(tmp, target)
    return sys.stdout


def _run_seeds(a: argparse.Namespace, claims, errors, store) -> int:
    """`run --seeds K`: K runs at seeds seed, seed+1, ..., each a run of its own in the store (resumable as any),
    then per claim how many seeds give its expected verdict (table, JSON, report)."""
    import contextlib
    import io

    from .replication import agreement, summary, table

    if a.seeds < 1:
        raise LemmacheckError(f"--seeds {a.seeds}: expected 1 or more")
    docs: dict[int, dict] = {}
    codes = []
    for k, s in enumerate(range(a.seed, a.seed + a.seeds)):
        sub = argparse.Namespace(**{**vars(a), "seed": s, "json": None, "report": None, "seeds": None,
                                    "collect": []})
        with contextlib.redirect_stdout(io.StringIO()):  # one table at the end, not K
            codes.append(_run_into(sub, claims, errors, store))
        if not sub.collect:  # interrupted
            return codes[-1]
        docs[s] = sub.collect[0]
        off = sum(1 for c in docs[s]["claims"] if not c["ok"])
        if not a.quiet:
            _err(f"seed {s} ({k + 1}/{a.seeds}): {len(docs[s]['claims'])} claims, {off} not as expected")
    rows = agreement({s: d["claims"] for s, d in docs.items()})
    doc = {"seeds": sorted(docs), "replication": summary(rows), "claims": rows,
           "runs": [d["run"] for _, d in sorted(docs.items())]}
    print(table(rows), file=_emit_json(doc, a.json))
    if a.report:
        from .report import build_report

        s_ = doc["replication"]
        off = [r for r in rows if r["agree"] < r["seeds"]]
        line = (f"Replication at seeds {', '.join(map(str, doc['seeds']))}: {s_['all_agree']} of {s_['claims']} claims "
                f"give their expected verdict at every seed; this report shows seed {max(docs)}."
                + ("" if not off else " Not at every seed: " + "; ".join(
                    f"{r['id']} (expect {r['expect']}: {', '.join(f'{v} {n}' for v, n in r['counts'].items())})"
                    for r in off)) + " The full table: replication.json.")
        build_report(a.db, a.report, extra_notes=[line])
        (Path(a.report) / "replication.json").write_text(json.dumps(doc, indent=1))
        if not a.quiet:
            _err(f"report written to {a.report}/index.html")
    if 70 in codes:
        return 70
    return 1 if any(codes) else 0


def _report_bugs(results, a: argparse.Namespace) -> int:
    """Name every configuration whose shards raised an unexpected exception (stderr), with one traceback per
    distinct bug; the number of such configurations."""
    from .shards import BUG_MARK, is_bug

    hits = [(r.claim.id, c.params, e) for r in results for c in r.configs for e in c.errors[:1] if is_bug(e)]
    hunts = [(r.claim.id, r.hunt_error) for r in results if getattr(r, "hunt_error", None)]
    for cid, tb in hunts:
        _err(f"\nhunt bug: {cid}'s hunt raised (the claim ran its profile without it; --resume hunts again after a "
             f"fix):\n    " + tb.rstrip().replace("\n", "\n    "))
    if not hits:
        return len(hunts)
    _err(f"\nestimator bugs: {len(hits)} configuration(s) raised an unexpected exception (recorded as their "
         "error; those claims read inconclusive):")
    shown: set[str] = set()
    for cid, params, e in hits:
        head, _, tb = e.partition("\n")
        bug = head.partition(BUG_MARK)[2]
        _err(f"  {cid} at {json.dumps(params, sort_keys=True)}: {bug}")
        if bug not in shown:
            shown.add(bug)
            _err("    " + tb.rstrip().replace("\n", "\n    "))
    _err("fix the estimator, then rerun the same command with --resume: only those shards are drawn again "
         "(same seeds); the run exits 70 until then")
    return len(hits) + len(hunts)


def _repro_params(claim, text: str) -> dict[str, float]:
    """--params as the claim declares them: a JSON object naming every declared parameter and nothing else (an
    undeclared name would otherwise be echoed into the repro line while changing nothing)."""
    try:
        params = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LemmacheckError(f"--params is not valid JSON ({exc.msg} at column {exc.colno}): {text}") from None
    if not isinstance(params, dict):
        raise LemmacheckError(f"--params must be a JSON object such as '{{\"m\": 64}}', got {text}")
    declared = set(claim.params)
    extra = sorted(set(params) - declared)
    missing = sorted(declared - set(params))
    if extra:
        raise LemmacheckError(f"--params names {extra}, which {claim.id} does not declare (its parameters: "
                              f"{sorted(declared)}; declared in {claim.source})")
    if missing:
        raise LemmacheckError(f"--params lacks {missing}: {claim.id} needs a value for every declared parameter "
                              f"{sorted(declared)} (copy them from the configuration's `params` in the results)")
    for k, v in params.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise LemmacheckError(f"--params: '{k}' must be a number, got {v!r}")
        if not claim.params[k].contains(v):
            _err(f"warning: --params {k}={v} lies outside the declared domain of '{k}' in {claim.source}")
    return params


def _repro_pinned(claim, text: str | None) -> dict | None:
    """--pinned: the dataset, labels and search a hunted or corpus configuration fixed (JSON, or @FILE)."""
    if not text:
        return None
    from .hunt import apply_pins

    where = "--pinned"
    if text.startswith("@"):
        where = text[1:]
        try:
            text = Path(where).read_text()
        except OSError as exc:
            raise LemmacheckError(f"--pinned {where}: cannot read ({exc.strerror})") from None
    try:
        pins = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LemmacheckError(f"{where}: not JSON ({exc.msg}); expected "
                              '{"points": [[1.0, 0.0], ...], "labels": "+-", "search": "adversarial"}') from None
    if not isinstance(pins, dict):
        raise LemmacheckError(f"{where}: expected a JSON object with points, labels and/or search")
    try:
        apply_pins(claim, pins)  # the same checks a claim file's inputs.points/labels get
    except (ValueError, LemmacheckError) as exc:  # a malformed dataset or labels: the claim parser's message
        raise LemmacheckError(f"{where}: {exc}") from None
    return pins


def cmd_repro(a: argparse.Namespace) -> int:
    # The imports and the claim's load (torch above all) make about a million objects that live as long as the
    # process: the collector's passes over them free nothing and cost ~0.1 s of a one-configuration repro. Paused
    # while they load, then frozen out of later passes.
    gc.disable()
    try:
        from .runner import repro
        from .summary import claim_json, failure_text

        _use_device(a.device)
        claim = _find_claim(a.id, a.claims)
    finally:
        gc.freeze()
        gc.enable()
    if claim.check is None:
        raise LemmacheckError(f"{claim.id} is infeasible ({claim.infeasible}): nothing to reproduce")
    for k in ("replicates", "shard_size"):
        if getattr(a, k) < 1:
            raise LemmacheckError(f"--{k.replace('_', '-')} {getattr(a, k)}: expected a positive integer")
    res = repro(claim, _repro_params(claim, a.params), a.seed, a.replicates, a.shard_size,
                pinned=_repro_pinned(claim, a.pinned))
    note = ""
    if claim.check.constants:  # a hidden-constant claim: its verdict is a fit across configurations
        note = (f"note: {claim.id} is checked as a scaling law, and one configuration cannot fit a slope, so this "
                "replay reads inconclusive whatever the run said; it reproduces this configuration's draws exactly. "
                f"To replay the whole fit, rerun the claim at the run's seed: lemmacheck run {claim.source} "
                "--profile <quick|full> --seed <run seed>")
    if a.json:
        _err(failure_text(res) + (f"\n{note}" if note else ""))  # stdout is the JSON document alone
        print(json.dumps(claim_json(res), indent=1))
    else:
        print(failure_text(res) + (f"\n{note}" if note else ""))
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    claim = _find_claim(a.id, a.claims)
    print(f"{claim.id}\n  paper: {claim.paper}, {claim.result}\n  title: {claim.title}")
    print(f"  statement: {claim.statement}")
    if claim.check:
        c = claim.check
        print(f"  checks: {c.quantity} {c.relation} {c.bound.text}")
        print(f"  quantifiers: {claim.quantifiers()}")
        print(f"  mode: {claim.mode}; expect: {claim.expect}"
              + "".join(f" ({p}: {claim.expected(p)})" for p in claim.profiles if claim.expected(p) != claim.expect))
    else:
        print(f"  infeasible: {claim.infeasible}")
    if claim.notes:
        print(f"  notes: {claim.notes.strip()}")
    if claim.finding:
        print(f"  finding: {claim.finding.strip()}")
    db, run_id = _latest_results(claim.id, a.db)
    if db is None:
        where = a.db or f"{DEFAULT_DB}, runs/*.db"
        print(f"  last results: none (no run of this claim in {where}; --db names a store)")
        return 0
    from .runner import evaluate
    from .store import Store
    from .summary import failure_text

    store = Store(db, readonly=True)
    info = store.run_info(run_id)
    how = "" if a.db else "; the most recently written store with this claim, --db to choose another"
    print(f"  last results (store {db}, run {run_id}, {info['profile']}, seed {info['seed']}, "
          f"{info['started']}{how}):")
    print("    " + failure_text(evaluate(store, run_id, [claim])[0]).replace("\n", "\n    "))
    return 0


def _latest_results(claim_id: str, db: str | None) -> tuple[str | None, int | None]:
    """(store, run) of the newest run holding this claim: in `db` when given, else in the most recently
    modified of the default store and runs/*.db."""
    from .store import Store

    if db is not None:
        if not Path(db).is_file():
            raise LemmacheckError(f"{db}: no such results store")
        cands = [Path(db)]
    else:
        cands = sorted({p for p in [Path(DEFAULT_DB), *Path("runs").glob("*.db")] if p.is_file()},
                       key=lambda p: p.stat().st_mtime, reverse=True)
    for path in cands:
        try:
            store = Store(path, readonly=True)
        except LemmacheckError as exc:
            if db is not None:
                raise
            _err(f"warning: skipped {exc}")  # one damaged store among runs/*.db must not hide the others
            continue
        try:
            for run_id in range(store.latest_run() or 0, 0, -1):
                if claim_id in store.claim_ids(run_id):
                    return str(path), run_id
        finally:
            store.close()
    return None, None


def cmd_hunt(a: argparse.Namespace) -> int:
    from .hunt import hunt
    from .progress import Progress
    from .runner import repro_command

    claim = _find_claim(a.id, a.claims)
    if claim.check is None:
        raise LemmacheckError(f"{claim.id} is infeasible ({claim.infeasible}): nothing to hunt")
    with Progress("hunt", "configuration", mode=_progress_mode(a)) as prog:
        prog.add_total(a.examples)
        # hunt() calls progress.advance() per probed case (when it takes the hook: the search is extended apart)
        hook = {"progress": prog} if "progress" in inspect.signature(hunt).parameters else {}
        res = hunt(claim, examples=a.examples, replicates=a.replicates, seed=a.seed, in_regime_only=a.in_regime,
                   data=a.data, labels=a.labels, confirm=a.confirm, adversary_steps=a.adversary_steps, **hook)
    tried = res.tried()
    over = ", ".join(["parameters"] + (["datasets"] if res.data else []) + (["labels"] if res.labels else [])
                     + ([f"perturbations ({res.search} search)"] if res.search not in ("", "none", "exact") else [])
                     + (["function classes"] if tried.get("functions") else []))
    print(f"{claim.id}: {tried['cases']} cases probed over {over} ({a.replicates} replicates each), targeted at "
          "the smallest slack. A search can refute a universal statement, never prove it.")
    if tried["geometries"]:
        print("  datasets tried: " + ", ".join(f"{g} {k}" for g, k in sorted(tried["geometries"].items())))
    if res.labels:
        print(f"  label patterns tried: {tried['label_patterns']}")
    if tried.get("functions"):
        print(f"  function members tried: {len(tried['functions'])} (" + ", ".join(sorted(tried["functions"])) + ")")
    for note in res.notes:
        print(f"  {note}")
    for p in sorted(res.probes, key=lambda p: p.slack_min)[:a.top]:
        extra = f"  {p.geometry}" if p.geometry else ""
        extra += f"  labels {_signs(p.labels)}" if p.labels else ""
        if p.functions:
            from .functions import parse_member
            extra += "".join(f"  {r} {parse_member(m).name}" for r, m in p.functions.items())
        print(f"  slack {p.slack_min:9.4g}  violations {p.violations:3d}/{p.replicates}  "
              f"{'in regime ' if p.in_regime else 'OUT of regime'}  {p.params}{extra}")
    if a.save:
        from .corpus import record_hunt
        if not res.counterexample:
            print(f"  hunt recorded in {record_hunt(claim, res, seed=a.seed, replicates=a.replicates)}")
    if res.counterexample:
        ce = res.counterexample
        print(f"counterexample (shrunk by Hypothesis, {ce.found_by}): {ce.params}")
        if ce.points is not None:
            print(f"  dataset ({ce.geometry}): {ce.points}")
        if ce.labels is not None:
            print(f"  labels: {_signs(ce.labels)}")
        for role, member in (ce.functions or {}).items():
            from .functions import parse_member
            print(f"  {role}: {parse_member(member).name}")
        for role, family in (ce.quantified or {}).items():  # "for all W": where the seeded ascent started
            print(f"  {role}: from the {family} family, {ce.search or claim.check.search} search")
        if a.save:
            print(f"  saved to {record_hunt(claim, res, seed=a.seed, replicates=a.replicates)}: every later run "
                  "of the claim replays it first")
        # one shard of ce.replicates draws from the configuration seed, the dataset/labels/search pinned: exact
        pins = {k: v for k, v in (("points", ce.points), ("labels", _signs(ce.labels) if ce.labels else None),
                                  ("search", ce.search or None), ("coefficients", ce.coefficients)) if v is not None}
        pins.update(ce.functions or {})  # the member of each function class the hunt pinned
        pins.update({r: {"family": f} for r, f in (ce.quantified or {}).items()})  # where its W / U search started
        print("  reproduce: " + repro_command(claim, ce.params, ce.seed, ce.replicates, ce.replicates, pins or None))
        return 1
    return 0


def _signs(labels: list[int]) -> str:
    return "".join("+" if v > 0 else "-" for v in labels)


def _paper_folder(arg: str) -> Path:
    """A paper key (KEY: claims/KEY) or a folder."""
    p = Path(arg)
    if p.exists() or os.sep in arg or not (Path("claims") / arg).is_dir():
        return p
    return Path("claims") / arg


def _run_verdicts(db: str, claims: list) -> dict[str, str]:
    """The latest run's verdict for each of `claims` that it ran (recomputed from its shards, as `run` does)."""
    from .runner import evaluate
    from .store import Store

    store = Store(db, readonly=True)
    try:
        rid = store.latest_run()
        if rid is None:
            return {}
        ran = set(store.claim_ids(rid))
        return {r.claim.id: r.verdict for r in evaluate(store, rid, [c for c in claims if c.id in ran])}
    finally:
        store.close()


def findings_doc(paths: list[str], db: str | None = None) -> tuple[dict, list[str]]:
    """Every findings.toml under `paths` (default: claims), validated against its folder's claims:
    ({"findings": [...], "leads": [...], "papers": {folder: PaperFindings | None}}, errors). `db`: a results store
    whose latest run gives the consequences' verdicts (default: each claim's `expect`)."""
    from .claims import FINDINGS_FILE, load_claims
    from .errors import ClaimError
    from .findings import findings_folders, load_findings

    doc: dict[str, Any] = {"findings": [], "leads": [], "papers": {}, "verdicts": {}}
    errors: list[str] = []
    for folder in findings_folders([_paper_folder(p) for p in paths] or ["claims"]):
        claims, errs = load_claims([folder])
        claims = [c for c in claims if c.source.resolve().parent == folder.resolve()]
        if not claims and not (folder / FINDINGS_FILE).is_file():
            continue
        errors += [str(e) for e in errs]
        try:
            pf = load_findings(folder, claims)
        except ClaimError as exc:
            errors.append(str(exc))
            continue
        doc["papers"][folder] = pf
        verdicts: dict[str, str] = {}
        if pf is not None and db:
            wanted = {q.claim for f in pf.findings for q in f.consequences if q.claim}
            verdicts = _run_verdicts(db, [c for c in claims if c.id in wanted])
            doc["verdicts"].update(verdicts)
        if pf is not None:
            doc["findings"] += [f.to_json(verdicts) for f in pf.findings]
            doc["leads"] += [lead.to_json() for lead in pf.leads]
    return doc, errors


def cmd_findings(a: argparse.Namespace) -> int:
    from .findings import letter, readme_block, write_readme_block

    doc, errors = findings_doc(a.paths, a.db)
    papers = doc.pop("papers")
    verdicts = doc.pop("verdicts")
    for e in errors:
        _err(f"error: {e}")
    if a.readme and a.format != "md":
        _err("error: --readme writes the markdown block: use it with --format md")
        return 2
    if a.json:
        print(json.dumps(dict(doc, errors=errors), indent=1))
        return 2 if errors else 0
    if not errors and not any(pf is not None for pf in papers.values()):
        where = ", ".join(map(str, papers)) or ", ".join(a.paths) or "claims"
        print(f"{where}: no findings.toml, no findings or leads declared")
        return 0
    if a.format == "md":
        for folder, pf in papers.items():
            if a.readme:
                readme = folder / "README.md"
                if pf is None:  # no findings.toml: nothing to list, and no README written for it
                    _err(f"{readme}: no findings.toml beside it, no findings block written")
                    continue
                changed = write_readme_block(readme, readme_block(pf))
                _err(f"{readme}: findings block {'written' if changed else 'already current'}")
            elif pf is not None:
                print(letter(pf, verdicts=verdicts))
        return 2 if errors else 0
    print(f"Confirmed findings ({len(doc['findings'])}): published statements that fail, reviewed "
          "(in regime, independent of hidden constants, with a standalone witness)")
    for f in doc["findings"]:
        print(f"\n{f['id']}  [{', '.join(f['results'])}]  {f['kind']}, {f['severity']}, evidence {f['evidence']}")
        for k in ("statement", "configuration", "regime_path", "impact", "repair"):
            if f[k]:
                print(f"  {k}: {' '.join(f[k].split())}")
        print(f"  claims: {', '.join(f['claims'])}")
        print(f"  reproduce: {f['reproduce']}")
        print(f"  witness: python {f['witness']}")
        print(f"  reach: {', '.join(f['reach']) or '-'}" + (f" ({f['reach_note']})" if f.get("reach_note") else ""))
        for q in f["consequences"]:
            how = {"shown": f"shown {q.get('verdict')} by {q.get('claim')}",
                   "absorbed": f"absorbed: {q.get('absorbed')} \"{q.get('line')}\"",
                   "gap": f"survives ({q.get('claim')}: {q.get('verdict')}), gap: {q.get('gap')} \"{q.get('line')}\""}
            print(f"  consequence for {q['result']}: {' '.join(how[q['status']].split())}")
    print(f"\nLeads ({len(doc['leads'])}): read violated somewhere, not refutations")
    for lead in doc["leads"]:
        print(f"\n{lead['id']}  [{', '.join(lead['results'])}]")
        for k in ("reason", "decide", "measurements"):
            print(f"  {k}: {' '.join(lead[k].split())}")
        print(f"  claims: {', '.join(lead['claims'])}")
    return 2 if errors else 0


def cmd_graph(a: argparse.Namespace) -> int:
    from .claims import GRAPH_FILE
    from .graph import load_graph

    folder = _paper_folder(a.paper)
    if not folder.is_dir():
        raise FileNotFoundError(2, "no such paper or claims folder", str(folder))
    g = load_graph(folder)
    if g is None:
        _err(f"error: {folder / GRAPH_FILE}: no proof graph declared (docs/findings.md says how)")
        return 2
    print(json.dumps(g.to_json(), indent=1) if a.json else g.to_text())
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .progress import Progress
    from .report import build_report

    with Progress("report", "page", mode=_progress_mode(a)) as prog:
        build_report(a.db, a.out, compare=a.compare, progress=prog)
    if not a.quiet:
        _err(f"report written to {a.out}/index.html")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lemmacheck", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    ls = sub.add_parser("list", help="list claims (or --quantities, --networks, --inputs)",
                        description="List the claims under PATHS (default: claims/), or the registered building "
                        "blocks a claim file can name.")
    ls.add_argument("paths", nargs="*", metavar="PATH", help="claim files or folders (default: claims)")
    ls.add_argument("--json", action="store_true", help="JSON on stdout instead of a table")
    ls.add_argument("--quantities", action="store_true", help="list the quantity estimators instead")
    ls.add_argument("--networks", action="store_true", help="list the network settings instead")
    ls.add_argument("--inputs", action="store_true", help="list the input generators instead")
    ls.set_defaults(fn=cmd_list)
    rn = sub.add_parser("run", help="run claims and record results",
                        description="Run the claims under PATHS, record every shard in the results store, print "
                        "the summary table (stdout) and exit 1 when a verdict differs from the claim's recorded "
                        "expectation. Progress goes to stderr: a bar on a terminal, elsewhere plain lines (the plan, then at "
                        "most one every 10 s).")
    rn.add_argument("paths", nargs="*", metavar="PATH", help="claim files or folders (default: claims)")
    rn.add_argument("--profile", choices=["quick", "full"], default="quick",
                    help="which [profiles.*] of each claim to run (default: quick)")
    rn.add_argument("--seed", type=int, default=0, help="run seed; configurations derive theirs from it (default: 0)")
    rn.add_argument("--seeds", type=int, default=None, metavar="K",
                    help="replicate: run at K seeds (--seed, --seed+1, ...), each its own run in the store, and "
                    "report per claim how many agree with its expected verdict (table, JSON, report); exit 1 when "
                    "any seed gives another verdict")
    rn.add_argument("--db", default=DEFAULT_DB, help=f"results store (SQLite; default: {DEFAULT_DB})")
    rn.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': to stdout, and "
                    "the table to stderr)")
    rn.add_argument("--workers", type=int, default=1, help="local worker processes (default 1: in this process)")
    rn.add_argument("--device", default="cpu", help="where estimators run: cpu (default) or cuda[:N] (a GPU: same laws, "
                    "other random draws than on the CPU); with a GPU each configuration runs where it is cheaper, the "
                    "wide ones on the GPU, the rest on the CPU ($LEMMACHECK_DEVICE_MIN_COST: the threshold; 0 sends "
                    "every shard to the GPU)")
    rn.add_argument("--scheduler", help="run shards on a Dask cluster at this address (tcp://host:8786) instead "
                    "of local workers; needs lemmacheck[dask]")
    rn.add_argument("--resume", action="store_true", help="continue the last unfinished run with the same "
                    "seed, profile and paths")
    rn.add_argument("--update", action="store_true", help="bring the latest run with the same seed, profile and "
                    "paths (finished or not) up to date with the claim files: re-run changed claims, add new "
                    "ones, drop deleted ones, keep the rest (estimator code changes are not detected)")
    rn.add_argument("--rerun", action="append", default=[], metavar="ID",
                    help="with --update semantics, also redraw this claim (after fixing its estimator); repeatable")
    rn.add_argument("--report", metavar="DIR", help="also write the HTML report to this folder")
    rn.add_argument("-v", "--verbose", action="store_true", help="also print one line per shard (stderr)")
    rn.add_argument("-q", "--quiet", action="store_true", help="no progress or notes on stderr (errors still)")
    rn.set_defaults(fn=cmd_run)
    rp = sub.add_parser("repro", help="re-run one configuration exactly",
                        description="Re-run one configuration with its recorded seed and shard split: the same "
                        "draws, the same numbers. Every failure text ends with this command line.")
    rp.add_argument("id", help="claim id")
    rp.add_argument("--params", required=True, help="the configuration's parameters as a JSON object (all declared "
                    "parameters)")
    rp.add_argument("--seed", type=int, required=True, help="the configuration's seed (from results)")
    rp.add_argument("--replicates", type=int, required=True, help="replicates drawn in that configuration")
    rp.add_argument("--shard-size", type=int, required=True, help="the claim profile's shard_size")
    rp.add_argument("--pinned", default=None, metavar="JSON|@FILE",
                    help="a hunted or corpus configuration's fixed dataset, labels and search, as its reproduce "
                    'line gives them: {"points": [[...], ...], "labels": "+-", "search": "adversarial"}')
    rp.add_argument("--claims", nargs="*", default=["claims"], metavar="PATH", help="where the claim lives "
                    "(default: claims)")
    rp.add_argument("--json", action="store_true", help="the result as JSON on stdout (the text goes to stderr)")
    rp.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]; a GPU replays other draws than the CPU "
                    "(placed as `run --device` places the configuration)")
    rp.set_defaults(fn=cmd_repro)
    sh = sub.add_parser("show", help="statement, bound, quantifiers and last results of a claim")
    sh.add_argument("id", help="claim id")
    sh.add_argument("--db", default=None, help=f"results store to read (default: the most recently written of "
                    f"{DEFAULT_DB} and runs/*.db that holds the claim)")
    sh.add_argument("--claims", nargs="*", default=["claims"], metavar="PATH", help="where the claim lives")
    sh.set_defaults(fn=cmd_show)
    hu = sub.add_parser("hunt", help="Hypothesis-targeted search of a claim's domain for the smallest slack")
    hu.add_argument("id", help="claim id")
    hu.add_argument("--examples", type=int, default=50, help="configurations to probe (default: 50)")
    hu.add_argument("--replicates", type=int, default=8, help="draws per configuration (default: 8)")
    hu.add_argument("--seed", type=int, default=0, help="search seed (default: 0)")
    hu.add_argument("--top", type=int, default=10, help="how many of the tightest configurations to list")
    hu.add_argument("--in-regime", action="store_true", help="only configurations meeting `requires`")
    hu.add_argument("--data", action=argparse.BooleanOptionalAction, default=None,
                    help="search datasets (default: when the claim's quantity draws unit-sphere inputs)")
    hu.add_argument("--labels", action=argparse.BooleanOptionalAction, default=None,
                    help="search label patterns (default: when the claim's quantity draws labels)")
    hu.add_argument("--confirm", type=int, default=400,
                    help="replicates that confirm a probabilistic violation is significant (default: 400)")
    hu.add_argument("--adversary-steps", type=int, default=0,
                    help="gradient steps moving the worst dataset on the sphere (differentiable quantities)")
    hu.add_argument("--save", action="store_true",
                    help="record the hunt (and its counterexample, replayed by later runs) in the claim's corpus")
    hu.add_argument("--claims", nargs="*", default=["claims"], metavar="PATH", help="where the claim lives")
    hu.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    hu.set_defaults(fn=cmd_hunt)
    fi = sub.add_parser("findings", help="the reviewed findings and leads of each paper (findings.toml)",
                        description="List every finding (a published statement that fails, reviewed: kind, "
                        "severity, evidence, configuration, impact, repair, reproduce command, witness) and every "
                        "lead (violated somewhere, not a refutation: reason and what would decide it) from the "
                        "findings.toml files under PATHS, validated against their claims; exit 2 on a problem.")
    fi.add_argument("paths", nargs="*", metavar="PATH", help="claim folders (default: claims)")
    fi.add_argument("--json", action="store_true", help="JSON on stdout: {findings, leads, errors}; each finding "
                    "with its `reach` (from graph.toml) and `consequences`")
    fi.add_argument("--format", choices=["text", "md"], default="text",
                    help="md: the referee's letter per paper (statement, counterexample, witness, checked reach, "
                    "repair; then the leads)")
    fi.add_argument("--readme", action="store_true", help="with --format md: write each paper's generated "
                    "findings block into its README.md, between <!-- findings:begin --> and <!-- findings:end --> "
                    "(appended when the markers are absent)")
    fi.add_argument("--db", help="results store whose latest run gives the consequence claims' verdicts "
                    "(default: each claim's expect)")
    fi.set_defaults(fn=cmd_findings)
    gr = sub.add_parser("graph", help="a paper's proof graph (graph.toml): uses and used-by of every result",
                        description="Print the proof graph of a paper (claims/<paper>/graph.toml), validated "
                        "against its _paper.toml: one line per result with what its proof uses and what uses it, "
                        "main results marked with *. Exit 2 with one line naming file and field on a problem.")
    gr.add_argument("paper", metavar="PAPER", help="a paper key (claims/<key>) or a claims folder")
    gr.add_argument("--json", action="store_true",
                    help="JSON on stdout: {paper, main, nodes: [{label, main, uses: [{result, line, in}], used_by}]}")
    gr.set_defaults(fn=cmd_graph)
    rep = sub.add_parser("report", help="render the static HTML report from a results store")
    rep.add_argument("--db", default=DEFAULT_DB, help=f"results store (default: {DEFAULT_DB})")
    rep.add_argument("--out", required=True, help="folder to write the site into")
    rep.add_argument("--compare", help="an older results store to mark changes against")
    rep.add_argument("-q", "--quiet", action="store_true", help="no progress or notes on stderr")
    rep.set_defaults(fn=cmd_report)
    return p


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # `kill` stops a run as Ctrl-C does: shards stored so far kept, workers ended


def main(argv: list[str] | None = None) -> int:
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None
    try:
        return _main(argv)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    a = parser().parse_args(argv)
    try:
        rc = a.fn(a)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not in the interpreter's exit
        return rc
    except LemmacheckError as exc:  # ClaimError, ExpressionError, store errors: the user's to fix
        _err(f"error: {exc}")
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        _err(f"error: {exc.filename or ''}: {exc.strerror or exc}" if exc.filename else f"error: {exc}")
        return 2
    except sqlite3.DatabaseError as exc:  # a store damaged after it was opened (opening checks the rest)
        _err(f"error: results store {getattr(a, 'db', None) or ''}: {exc} (the file is damaged: restore it from a "
             "copy, or pass another --db)")
        return 2
    except BrokenPipeError:
        # the reader went away (`lemmacheck list --json | head`): stop quietly, as `cat` would; point stdout at
        # /dev/null so the interpreter's final flush cannot raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by the broken pipe
    except KeyboardInterrupt:
        _err("\ninterrupted")
        return 130
    except Exception:  # noqa: BLE001  (the last resort: a bug gets its traceback and a pointer)
        traceback.print_exc()
        _err(f"lemmacheck: {BUG_HINT}")
        return 70  # EX_SOFTWARE


if __name__ == "__main__":
    sys.exit(main())
