"""The engine's own settings, input generators and generic quantities, registered on import; installed packages'
`lemmacheck.extensions` entry points on request. Papers bring theirs as plugins beside their claims
(claims/<paper>/extension), which the claim loader imports."""

from __future__ import annotations

from importlib.metadata import entry_points

from . import generic, inputs  # noqa: F401

_installed_loaded = False


def load_installed_extensions() -> None:
    """Import every installed package's `lemmacheck.extensions` entry point, once."""
    global _installed_loaded
    if _installed_loaded:
        return
    _installed_loaded = True
    for ep in entry_points(group="lemmacheck.extensions"):
        ep.load()
