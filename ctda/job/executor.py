"""Stage: run per-rank work in parallel (local processes by default).

Contract: ``map_ranks(fn, paths, options, executor)`` -> ``[fn(path, options) for path in
paths]`` in order, computed serially (``"serial"``), by local processes (``None``/``"local"``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from ctda.analysis.engine import AnalysisOptions

T = TypeVar("T")


class ExecutorError(ValueError):
    """An executor that cannot be used (bad address, missing extra)."""


def map_ranks(
    fn: Callable[[str, AnalysisOptions], T],
    paths: Sequence[str],
    options: AnalysisOptions,
    executor: str | None = None,
) -> list[T]:
    """``fn`` over every rank's file, in order."""
    spec = executor or "local"
    if spec == "serial" or len(paths) <= 1:
        return [fn(p, options) for p in paths]
    if spec == "local":
        workers = max(1, min(len(paths), os.cpu_count() or 1))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(fn, paths, [options] * len(paths)))
    raise ExecutorError(f"unknown executor {spec!r}: use local, serial, dask-local or tcp://HOST:PORT")
