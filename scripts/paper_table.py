"""Print a paper's results table (markdown) from a quick-profile and a full-profile store.

    python scripts/paper_table.py zou2018 .lemmacheck/quick.db .lemmacheck/full.db [--write claims/zou2018/README.md]

One row per claim, in the paper's label order: verdict and flags (other than "conditioned") per profile; for
explicit-constant claims the configurations in regime and the smallest in-regime slack, for scaling claims the
implied-constant slopes with their intervals. The claim papers' READMEs paste this table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lemmacheck.claims import load_claims
from lemmacheck.report.data import label_key, latest_finished
from lemmacheck.runner import evaluate
from lemmacheck.store import Store
from lemmacheck.verdicts import ClaimResult


def cell(res: ClaimResult | None) -> str:
    if res is None:
        return "not run"
    flags = [f for f in res.flags if f != "conditioned"]
    text = res.verdict + (f" ({', '.join(flags)})" if flags else "")
    sc = res.scaling
    if sc and sc.get("fitted"):
        slopes = "; ".join(f"{k} {v:+.2f} [{sc['slope_ci'][k][0]:+.2f}, {sc['slope_ci'][k][1]:+.2f}]"
                           for k, v in sc["implied_constant_slopes"].items())
        return f"{text}; slopes {slopes} ({sc.get('statistic')}, {sc.get('regime')})"
    if sc:
        return f"{text}; {sc.get('reason', '')}"
    inside = [c for c in res.configs if c.in_regime]
    if not res.configs:
        return text
    worst = min((c.slack_min for c in inside if c.slack_min is not None), default=None)
    tail = f", worst in-regime slack {worst:.3g}" if worst is not None else ""
    return f"{text}; {len(inside)}/{len(res.configs)} configs in regime{tail}"


def results(db: str, paper: str) -> dict[str, ClaimResult]:
    store = Store(db, readonly=True)
    run_id = latest_finished(store)  # an interrupted later run must not hide the finished one
    if run_id is None:
        raise SystemExit(f"{db}: no finished run")
    have = set(store.claim_ids(run_id))
    claims = [c for c in load_claims([Path("claims") / paper])[0] if c.id in have]
    return {r.claim.id: r for r in evaluate(store, run_id, claims)}


def table(paper: str, quick_db: str, full_db: str) -> list[str]:
    claims = sorted(load_claims([Path("claims") / paper])[0], key=lambda c: (label_key(c.result), c.id))
    quick, full = results(quick_db, paper), results(full_db, paper)
    lines = ["| result | claim | mode | expect | quick | full |", "|---|---|---|---|---|---|"]
    for c in claims:
        short = c.id.split("/", 1)[1]
        full_expect = c.expected("full")
        expect = c.expect if full_expect == c.expect else f"{c.expect} (full: {full_expect})"
        lines.append(f"| {c.result} | `{short}` | {c.mode} | {expect} | {cell(quick.get(c.id))} | "
                     f"{cell(full.get(c.id))} |")
    return lines


def write_into(readme: Path, lines: list[str]) -> None:
    """Replace the README's results table (the block from its `| result | claim |` header to the first line that
    is not a table row) with `lines`; a README without one gets it appended."""
    text = readme.read_text().splitlines()
    start = next((i for i, t in enumerate(text) if t.startswith("| result | claim |")), None)
    if start is None:
        text += [""] + lines
    else:
        end = start
        while end < len(text) and text[end].startswith("|"):
            end += 1
        text[start:end] = lines
    readme.write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (3, 5) or (len(args) == 5 and args[3] != "--write"):
        raise SystemExit("usage: paper_table.py PAPER QUICK_DB FULL_DB [--write README]")
    rows = table(*args[:3])
    if len(args) == 5:
        write_into(Path(args[4]), rows)
    else:
        print("\n".join(rows))
