"""Errors that name where bad input came from, so a user can fix a claim file without reading code."""

from __future__ import annotations

from pathlib import Path


class LemmacheckError(Exception):
    """Base class for every error lemmacheck raises on purpose."""


class ClaimError(LemmacheckError):
    """A claim file is malformed: the message names the file, the field, what is wrong and the fix."""

    def __init__(self, path: str | Path | None, field: str, problem: str, fix: str = ""):
        self.path = str(path) if path is not None else "<claim>"
        self.field = field
        self.problem = problem
        self.fix = fix
        msg = f"{self.path}: field '{field}': {problem}"
        if fix:
            msg += f" (fix: {fix})"
        super().__init__(msg)

    def __reduce__(self):
        # raised in a worker process, it travels back pickled: by default Exception pickles its message alone,
        # which this __init__ cannot take, and the failed unpickling breaks the whole process pool
        return (type(self), (self.path, self.field, self.problem, self.fix))


class EstimatorError(LemmacheckError):
    """A quantity estimator produced unusable output (NaN, wrong shape) for a configuration."""


class StoreError(LemmacheckError):
    """A results store cannot be used: not a lemmacheck store, damaged, or held by another run."""
