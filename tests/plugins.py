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


def script(name: str) -> ModuleType:
    """scripts/<name>.py imported as a module (the scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, CLAIMS.parent / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli_json(argv: list[str], capsys) -> dict:
    """Run `lemmacheck ARGV` in-process (argv ending in `--json -`) and parse what it printed on stdout."""
    import json

    from lemmacheck.cli import main

    main(argv)
    return json.loads(capsys.readouterr().out)


def planted_copies(folder: Path, tmp_path_factory) -> dict:
    """A planted test-only paper's claims keyed by their last id part: its extension registered once from its own
    folder, the claim files copied to a tmp folder (so nothing a run writes lands in the repository)."""
    import shutil

    from lemmacheck.claims import load_claims

    load_extension(folder)
    copy = tmp_path_factory.mktemp("claims") / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    claims, errors = load_claims([copy])
    assert not errors
    return {c.id.split("/")[-1]: c for c in claims}


def full_result(claim, seed: int):
    """The claim's full profile (default hunt included) at `seed`, in an in-memory store: its ClaimResult."""
    from lemmacheck.runner import evaluate, run_claims
    from lemmacheck.store import Store

    store = Store(":memory:")
    return evaluate(store, run_claims([claim], store, profile="full", seed=seed), [claim])[0]
