"""Replication across seeds: the same claims run at K independent seeds, and per claim how many of the K verdicts
agree with its recorded expectation (`lemmacheck run --seeds K`).

A verdict is a statement about the configurations that ran at a confidence; another seed draws other networks and
inputs, so a claim whose evidence sits on the edge of its decision can read otherwise there. The table says which
claims replicate (K of K), and for the others which verdicts the other seeds gave.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

VERDICTS = ("holds", "violated", "inconclusive", "infeasible")


def agreement(per_seed: Mapping[int, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """per_seed: seed -> that run's claims as `summary.claim_json` writes them (id, verdict, expect, flags).
    One row per claim: id, expect, the verdict at each seed, `agree` (seeds whose verdict equals expect) of `seeds`,
    and `errors` (seeds where a configuration recorded an error)."""
    seeds = sorted(per_seed)
    rows: dict[str, dict[str, Any]] = {}
    for s in seeds:
        for c in per_seed[s]:
            row = rows.setdefault(c["id"], {"id": c["id"], "expect": c["expect"], "verdicts": {}, "errors": []})
            row["verdicts"][s] = c["verdict"]
            if "errors" in (c.get("flags") or []):
                row["errors"].append(s)
    out = []
    for cid in sorted(rows):
        row = rows[cid]
        got = [row["verdicts"].get(s) for s in seeds]
        row["agree"] = sum(v == row["expect"] for v in got)
        row["seeds"] = sum(v is not None for v in got)
        row["counts"] = {v: got.count(v) for v in VERDICTS if got.count(v)}
        out.append(row)
    return out


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many claims agree with their expectation at every seed, and the rest by the number that agree."""
    k = max((r["seeds"] for r in rows), default=0)
    by_agree: dict[int, int] = {}
    for r in rows:
        by_agree[r["agree"]] = by_agree.get(r["agree"], 0) + 1
    return {"claims": len(rows), "seeds": k, "all_agree": sum(1 for r in rows if r["agree"] == r["seeds"]),
            "by_agree": dict(sorted(by_agree.items(), reverse=True))}


def _verdicts_cell(r: Mapping[str, Any]) -> str:
    return ", ".join(f"{v} {n}" for v, n in r["counts"].items())


def table(rows: Sequence[Mapping[str, Any]], all_rows: bool = False) -> str:
    """Plain text: the claims that do not agree at every seed (all of them with `all_rows`), then the totals."""
    s = summary(rows)
    shown = [r for r in rows if all_rows or r["agree"] < r["seeds"]]
    head = ("claim", "expect", "agree", "verdicts at the seeds")
    body = [(r["id"], r["expect"], f"{r['agree']}/{r['seeds']}" + (" (errors)" if r["errors"] else ""),
             _verdicts_cell(r)) for r in shown]
    lines = []
    if body:
        widths = [max(len(x[k]) for x in [head, *body]) for k in range(len(head))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head, *body]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append("")
    lines.append(f"replication: {s['all_agree']} of {s['claims']} claims give their expected verdict at all "
                 f"{s['seeds']} seeds" + ("" if s["all_agree"] == s["claims"] else
                                         "; agreeing seeds: " + ", ".join(f"{a}/{s['seeds']}: {n}"
                                                                          for a, n in s["by_agree"].items())))
    return "\n".join(lines)


def markdown(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int]) -> str:
    """The table for docs: totals, then one row per claim that does not agree at every seed."""
    s = summary(rows)
    out = [(f"{s['all_agree']} of {s['claims']} claims give their expected verdict at all {s['seeds']} seeds "
            f"({', '.join(map(str, seeds))})."), ""]
    if s["all_agree"] < s["claims"]:
        out += ["| agreeing seeds | claims |", "|---|---|"]
        out += [f"| {a}/{s['seeds']} | {n} |" for a, n in s["by_agree"].items()]
        out += ["", "| claim | expect | agree | verdicts |", "|---|---|---|---|"]
        out += [f"| `{r['id']}` | {r['expect']} | {r['agree']}/{r['seeds']}{' (errors)' if r['errors'] else ''} | "
                f"{_verdicts_cell(r)} |" for r in rows if r["agree"] < r["seeds"]]
    return "\n".join(out) + "\n"
