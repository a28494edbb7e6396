"""Running shards on a Dask cluster (`lemmacheck run --scheduler tcp://host:8786`).

The runner takes any `concurrent.futures.Executor`; this adapts a `distributed.Client` to one and tells the
runner how many shards to keep in flight (twice the cluster's worker threads, as for the process pool).
Results are bit-identical to a local run: every shard carries its own seed and the claim snapshot.

What the workers need: lemmacheck installed (same version), and the claim folders at the same path as on the
submitting machine when claims bring an `extension.py` (a shared file system, or the same checkout). The
store stays on the submitting machine: workers only return shard records.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

from .errors import LemmacheckError


class DaskExecutor(Executor):
    """A `concurrent.futures.Executor` over a Dask `Client` (the scheduler address, or a Client to borrow)."""

    def __init__(self, scheduler: str | Any):
        try:
            from distributed import Client
        except ImportError as exc:
            raise LemmacheckError("--scheduler needs Dask's distributed package: pip install 'lemmacheck[dask]'") \
                from exc
        self._own = isinstance(scheduler, str)
        self.client = Client(scheduler) if self._own else scheduler
        self._cf = self.client.get_executor(pure=False)  # shards are random draws: never deduplicate them
        # read by runner._drain to size its in-flight window, like ProcessPoolExecutor's attribute
        self._max_workers = max(1, sum(self.client.nthreads().values()))

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
        return self._cf.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._cf.shutdown(wait=wait)
        if self._own:
            self.client.close()
