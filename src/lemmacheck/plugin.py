"""pytest plugin (entry point `pytest11`): every claim file under a `claims/` folder is a test item.

An item runs its claim in the chosen profile (quick by default) in-process and passes when the verdict equals
the claim's recorded expectation: `holds` normally, `violated` for a confirmed finding (so the item then
guards the finding like a strict xfail, and fails the day the verdict changes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .claims import ClaimError, is_claim_name, load_claim
from .runner import evaluate, run_claims
from .store import Store
from .summary import failure_text
from .verdicts import ClaimResult

_RESULTS_KEY = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("lemmacheck")
    g.addoption("--lemmacheck-profile", default="quick", choices=["quick", "full"], help="claim profile to run")
    g.addoption("--lemmacheck-seed", type=int, default=0, help="run seed (configurations derive theirs from it)")
    g.addoption("--lemmacheck-db", default=None, help="results store to append to (default: a temporary file)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_RESULTS_KEY] = []


def _is_claim_file(path: Path) -> bool:
    return is_claim_name(path) and path.name != "pyproject.toml" and "claims" in path.parent.parts


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if _is_claim_file(file_path):
        return ClaimFile.from_parent(parent, path=file_path)
    return None


class ClaimFile(pytest.File):
    def collect(self):
        try:
            claim = load_claim(self.path.resolve())
        except ClaimError as exc:
            yield BadClaimItem.from_parent(self, name=self.path.stem, error=exc)
            return
        yield ClaimItem.from_parent(self, name=claim.id, claim_id=claim.id)


class BadClaimItem(pytest.Item):
    def __init__(self, *, error: ClaimError, **kw):
        super().__init__(**kw)
        self.error = error

    def runtest(self) -> None:
        raise self.error

    def repr_failure(self, excinfo, style=None):
        return f"malformed claim file: {self.error}"

    def reportinfo(self):
        return self.path, None, f"claim file {self.path.name}"


class ClaimMismatch(Exception):
    def __init__(self, result: ClaimResult):
        super().__init__(result.claim.id)
        self.result = result


def _store(config: pytest.Config) -> Store:
    if not hasattr(config, "_lemmacheck_store"):
        path = config.getoption("--lemmacheck-db")
        if path is None:
            path = str(config._tmp_path_factory.mktemp("lemmacheck") / "results.db")  # type: ignore[attr-defined]
        config._lemmacheck_store = Store(path)  # type: ignore[attr-defined]
    return config._lemmacheck_store  # type: ignore[attr-defined]


class ClaimItem(pytest.Item):
    def __init__(self, *, claim_id: str, **kw):
        super().__init__(**kw)
        self.claim_id = claim_id
        self.user_properties.append(("claim", claim_id))

    def runtest(self) -> None:
        claim = load_claim(self.path.resolve())
        if claim.mode == "infeasible":
            pytest.skip(f"infeasible (recorded in the claim file): {claim.infeasible.strip()}")
        store = _store(self.config)
        profile = self.config.getoption("--lemmacheck-profile")
        seed = self.config.getoption("--lemmacheck-seed")
        run_id = run_claims([claim], store, profile=profile, seed=seed, paths=[str(claim.source)])
        result = evaluate(store, run_id, [claim])[0]
        self.config.stash[_RESULTS_KEY].append(result)
        if not result.ok:
            raise ClaimMismatch(result)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClaimMismatch):
            return failure_text(excinfo.value.result)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"claim {self.claim_id}"


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    results: list[ClaimResult] = config.stash.get(_RESULTS_KEY, [])
    if not results:
        return
    from .summary import table

    terminalreporter.section("lemmacheck claims")
    terminalreporter.write_line(table(results))
