"""A paper's proof graph: claims/<paper>/graph.toml, for every numbered result the results its proof invokes.

```toml
main = ["Theorem 4.1"]                       # the paper's main results (labels of _paper.toml `results`)
nodes = ["Assumption 3.2"]                   # optional: other items proofs invoke (assumptions, facts, cited results)
[results."Theorem 4.1"]
uses = [{ result = "Lemma 5.5", line = "By Lemma 5.5 ...", in = "proof" }]   # `in`: "proof" (default) or "statement"
note = "optional"
```

Every result of the folder's _paper.toml has an entry (even with `uses = []`). The reach of a result r is every
result whose proof or statement rests on r, transitively (r excluded): what a false r may take down with it.
`load_graph` validates the file against _paper.toml and raises ClaimError naming graph.toml and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claims import GRAPH_FILE, PAPER_FILE, load_paper
from .errors import ClaimError

EDGE_KINDS = ("proof", "statement")
MAX_LINE = 300  # a use's `line` is a short verbatim excerpt a reader can grep for, not a paragraph
_TOP_FIELDS = {"main", "nodes", "results"}
_ENTRY_FIELDS = {"uses", "note"}
_USE_FIELDS = {"result", "line", "in"}


@dataclass(frozen=True)
class Use:
    """One edge: the proof (or statement) of `user` invokes `result`, at the paper's `line`."""
    user: str
    result: str
    line: str
    where: str  # "proof" | "statement"

    def to_json(self) -> dict[str, str]:
        return {"result": self.result, "line": self.line, "in": self.where}


@dataclass
class ProofGraph:
    paper: str
    source: Path
    results: tuple[str, ...]  # _paper.toml's numbered results, in the paper's order
    extra: tuple[str, ...]  # `nodes`: other items proofs invoke
    main: tuple[str, ...]
    edges: list[Use] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.results + self.extra

    def uses(self, label: str) -> list[Use]:
        """The edges out of `label`: what its proof and statement invoke."""
        return [e for e in self.edges if e.user == label]

    def used_by(self, label: str) -> list[str]:
        """The results whose proof or statement invokes `label` directly (each once, in node order)."""
        users = {e.user for e in self.edges if e.result == label}
        return [n for n in self.nodes if n in users]

    def reach(self, labels: list[str] | tuple[str, ...] | set[str]) -> set[str]:
        """Every result whose proof rests on one of `labels`, transitively via "proof" and "statement" edges;
        the labels themselves are excluded (unless one rests on another)."""
        users: dict[str, set[str]] = {}
        for e in self.edges:
            users.setdefault(e.result, set()).add(e.user)
        out: set[str] = set()
        todo = list(labels)
        while todo:
            for u in users.get(todo.pop(), ()):
                if u not in out:
                    out.add(u)
                    todo.append(u)
        return out

    def resolve(self, label: str) -> list[str]:
        """The graph's labels a paper label names: itself; else, for a sub-item ("Lemma 5.1 (ii)"), the result it
        belongs to; else, for a whole result, its sub-items ("Theorem 5.1" -> "Theorem 5.1 (i)", ...). [] if none."""
        if label in self.nodes:
            return [label]
        base = label.rsplit(" (", 1)[0] if label.endswith(")") else label
        if base != label and base in self.nodes:
            return [base]
        return [n for n in self.nodes if n.startswith(label + " (")]

    def layers(self) -> list[list[str]]:
        """Nodes by depth for drawing, every edge pointing down. What the main results rest on hangs below them
        (a node one layer below the deepest such result that uses it), so the main results are on top; a result
        no main result rests on sits just above the shallowest node it uses (a corollary of a main result above
        it), or on the bottom layer if it uses nothing."""
        below: set[str] = set(self.main)
        todo = list(self.main)
        while todo:
            for u in self.uses(todo.pop()):
                if u.result not in below:
                    below.add(u.result)
                    todo.append(u.result)
        depth: dict[str, int] = {}

        def down(n: str) -> int:  # nodes the main results rest on: longest path from a main result
            if n not in depth:
                depth[n] = max((down(u) + 1 for u in self.used_by(n) if u in below), default=0)
            return depth[n]

        for n in self.nodes:
            if n in below:
                down(n)
        bottom = max(depth.values(), default=0)

        def up(n: str) -> int:  # the rest: just above what they use (acyclic, validated)
            if n not in depth:
                depth[n] = min((up(u.result) - 1 for u in self.uses(n)), default=bottom)
            return depth[n]

        for n in self.nodes:
            up(n)
        top = min(depth.values(), default=0)
        out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) - top + 1)]
        for n in sorted(self.nodes, key=lambda n: (n not in self.main, self.nodes.index(n))):
            out[depth[n] - top].append(n)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"paper": self.paper, "main": list(self.main),
                "nodes": [{"label": n, "main": n in self.main, "numbered": n in self.results,
                           "uses": [u.to_json() for u in self.uses(n)], "used_by": self.used_by(n),
                           **({"note": self.notes[n]} if n in self.notes else {})} for n in self.nodes]}

    def to_text(self) -> str:
        lines = [(f"Proof graph of {self.paper} ({self.source}): {len(self.results)} results, "
                 f"{len(self.extra)} other nodes, {len(self.edges)} uses; * marks a main result")]
        for n in self.nodes:
            uses = ", ".join(u.result + (" [statement]" if u.where == "statement" else "") for u in self.uses(n))
            lines.append(f"{'*' if n in self.main else ' '} {n}: uses {uses or '-'}; "
                         f"used by {', '.join(self.used_by(n)) or '-'}")
        return "\n".join(lines)


def _strings(raw: dict[str, Any], key: str, path: Path) -> list[str]:
    v = raw.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise ClaimError(path, key, "expected a list of labels (strings)", f'`{key} = ["Theorem 4.1"]`')
    dup = sorted({x for x in v if v.count(x) > 1})
    if dup:
        raise ClaimError(path, key, f"lists {dup} twice")
    return v


def _cycle(labels: tuple[str, ...], edges: list[Use]) -> list[str] | None:
    """One cycle of the uses relation as [a, b, ..., a], None if acyclic."""
    out: dict[str, list[str]] = {n: [] for n in labels}
    for e in edges:
        out[e.user].append(e.result)
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in out[n]:
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in labels:
        if n not in state and (c := visit(n)):
            return c
    return None


def parse_graph(raw: dict[str, Any], path: Path, paper: str, results: tuple[str, ...]) -> ProofGraph:
    """Validate a graph table against the paper's numbered results; raise ClaimError on the first problem."""
    for k in raw:
        if k not in _TOP_FIELDS:
            raise ClaimError(path, k, "unknown field", f"one of {sorted(_TOP_FIELDS)}")
    extra = _strings(raw, "nodes", path)
    clash = sorted(set(extra) & set(results))
    if clash:
        raise ClaimError(path, "nodes", f"{clash} are numbered results of {PAPER_FILE} already",
                         "list in `nodes` only items that are not in its `results`")
    known = set(results) | set(extra)
    main = _strings(raw, "main", path)
    if not main:
        raise ClaimError(path, "main", "missing or empty", "name the paper's main results, e.g. `main = [\"Theorem 1\"]`")
    for m in main:
        if m not in results:
            raise ClaimError(path, "main", f"'{m}' is not a result of {PAPER_FILE}",
                             "main results are labels of its `results`, verbatim")
    table = raw.get("results")
    if not isinstance(table, dict):
        raise ClaimError(path, "results", "missing or not a table", 'one `[results."<label>"]` per result')
    g = ProofGraph(paper, path, results, tuple(extra), tuple(main))
    for label, entry in table.items():
        where = f"results.{label}"
        if label not in known:
            raise ClaimError(path, where, f"unknown label '{label}'",
                             f"a result of {PAPER_FILE} (verbatim) or an item listed in `nodes`")
        if not isinstance(entry, dict):
            raise ClaimError(path, where, "expected a table with `uses`")
        for k in entry:
            if k not in _ENTRY_FIELDS:
                raise ClaimError(path, f"{where}.{k}", "unknown field", f"one of {sorted(_ENTRY_FIELDS)}")
        if "uses" not in entry:
            raise ClaimError(path, f"{where}.uses", "missing", "`uses = []` when the proof invokes no result")
        uses = entry["uses"]
        if not isinstance(uses, list):
            raise ClaimError(path, f"{where}.uses", "expected a list of inline tables")
        if "note" in entry:
            if not isinstance(entry["note"], str):
                raise ClaimError(path, f"{where}.note", "expected a string")
            g.notes[label] = entry["note"].strip()
        seen: set[tuple[str, str]] = set()
        for j, u in enumerate(uses):
            uw = f"{where}.uses[{j}]"
            if not isinstance(u, dict):
                raise ClaimError(path, uw, "expected an inline table { result = ..., line = ... }")
            for k in u:
                if k not in _USE_FIELDS:
                    raise ClaimError(path, f"{uw}.{k}", "unknown field", f"one of {sorted(_USE_FIELDS)}")
            target = u.get("result")
            if not isinstance(target, str) or not target.strip():
                raise ClaimError(path, f"{uw}.result", "missing or not a label")
            if target not in known:
                raise ClaimError(path, f"{uw}.result", f"unknown label '{target}'",
                                 f"a result of {PAPER_FILE} (verbatim) or an item listed in `nodes`")
            if target == label:
                raise ClaimError(path, f"{uw}.result", f"'{label}' uses itself")
            line = u.get("line")
            if not isinstance(line, str) or not line.strip():
                raise ClaimError(path, f"{uw}.line", "missing or empty",
                                 "a short verbatim excerpt of the paper where the proof invokes the result")
            if len(line) > MAX_LINE:
                raise ClaimError(path, f"{uw}.line", f"{len(line)} characters, more than {MAX_LINE}",
                                 "quote a shorter excerpt")
            kind = u.get("in", "proof")
            if kind not in EDGE_KINDS:
                raise ClaimError(path, f"{uw}.in", f"unknown value {kind!r}", f"one of {list(EDGE_KINDS)}")
            if (target, kind) in seen:
                raise ClaimError(path, f"{uw}.result", f"'{target}' is listed twice (in the {kind})")
            seen.add((target, kind))
            g.edges.append(Use(label, target, " ".join(line.split()), kind))
    missing = [r for r in results if r not in table]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ClaimError(path, f"results.{missing[0]}", f"no entry for {len(missing)} result(s) of {PAPER_FILE}: "
                         f"{', '.join(missing[:5])}{more}", "every result has an entry, `uses = []` if none")
    cycle = _cycle(g.nodes, g.edges)
    if cycle:
        raise ClaimError(path, f"results.{cycle[0]}.uses", f"cycle: {' -> '.join(cycle)}",
                         "a proof cannot rest on a result that rests on it")
    return g


def load_graph(folder: str | Path) -> ProofGraph | None:
    """The folder's proof graph, validated against its _paper.toml; None when the folder has no graph.toml."""
    folder = Path(folder)
    path = folder / GRAPH_FILE
    if not path.is_file():
        return None
    paper = load_paper(folder)
    if paper is None:
        raise ClaimError(path, "results", f"no {PAPER_FILE} beside it: the graph's labels are checked against its "
                         "`results`", f"add {folder / PAPER_FILE}")
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ClaimError(path, "<toml>", f"not valid TOML: {exc}") from None
    return parse_graph(raw, path, paper.key, paper.results)
