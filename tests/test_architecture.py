"""The engine's shape: no paper inside it, and imports that form a DAG (lazy, function-level imports included)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lemmacheck

SRC = Path(lemmacheck.__file__).parent
PAPERS = [p.name for p in (Path(__file__).resolve().parents[1] / "claims").iterdir() if (p / "extension").is_dir()]


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the lemmacheck modules it imports anywhere in its body."""
    files = {_module(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from . import svg` imports the submodule; `from .data import X` imports .data
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                targets = [node.args[0].value]
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod and t != "lemmacheck":
                    graph[mod].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cyc := visit(nxt)):
                return cyc
        stack.pop()
        state[node] = 2
        return None

    for n in sorted(graph):
        if n not in state and (cyc := visit(n)):
            return cyc
    return None


def test_engine_imports_form_a_dag():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in the engine: " + " -> ".join(cycle)


def test_cycle_finder_sees_a_lazy_back_edge():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_engine_names_no_paper():
    assert len(PAPERS) >= 5
    pattern = re.compile("|".join(PAPERS), re.IGNORECASE)
    hits = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, f"paper names in the engine: {hits}"
