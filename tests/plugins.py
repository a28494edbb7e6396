"""The shipped papers' plugins, loaded as lemmacheck loads them beside their claims (one module per folder)."""

from pathlib import Path
from types import ModuleType

from lemmacheck.claims import load_extension

CLAIMS = Path(__file__).resolve().parents[1] / "claims"


def paper(key: str) -> ModuleType:
    """claims/<key>/extension: its `network`, `quantities` (and any other modules it imports)."""
    module = load_extension(CLAIMS / key)
    if module is None:
        raise LookupError(f"claims/{key} has no extension")
    return module


def cli_json(argv: list[str], capsys) -> dict:
    """Run `lemmacheck ARGV` in-process (argv ending in `--json -`) and parse what it printed on stdout."""
    import json

    from lemmacheck.cli import main

    main(argv)
    return json.loads(capsys.readouterr().out)
