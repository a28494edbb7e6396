"""Name -> implementation registries for network settings, quantities and input generators.

A claim file refers to these by name. The engine's own (input generators, the `scalar` setting, generic
quantities) register on import of `lemmacheck.builtin`, which the claim loader imports; every paper adds its own from a plugin beside its claims
(`claims/<paper>/extension.py`, or an `extension/` package), or from another package's `lemmacheck.extensions`
entry point, without touching src/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    name: str
    description: str
    obj: Any
    networks: tuple[str, ...] = ()  # quantities: the settings they apply to ("*" = any)
    origin: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, description: str, *, networks: tuple[str, ...] = (), **extra: Any):
        """Decorator: `@QUANTITIES.register("max-layer-output-norm", "max_{l,i} ||x_{l,i}||", networks=("my-net",))`."""
        if not description or "\n" in description.strip():
            raise ValueError(f"{self.kind} '{name}' needs a one-line description")

        def deco(obj: Any) -> Any:
            old = self._entries.get(name)
            origin = getattr(obj, "__module__", "")
            if old is not None and old.origin != origin:
                raise ValueError(f"{self.kind} '{name}' registered twice ({old.origin} and {origin})")
            self._entries[name] = Entry(name, description.strip(), obj, tuple(networks), origin, dict(extra))
            return obj

        return deco

    def get(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} '{name}'") from None

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> list[Entry]:
        return [self._entries[n] for n in self.names()]


NETWORKS = Registry("network")
QUANTITIES = Registry("quantity")
INPUTS = Registry("input generator")

def describe(registry: Registry) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "description": e.description, "networks": list(e.networks), "module": e.origin}
        for e in registry.entries()
    ]


Estimator = Callable[..., Any]
