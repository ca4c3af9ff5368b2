"""Stage: run per-rank work in parallel (local processes by default, or a Dask cluster).

Contract: ``map_ranks(fn, paths, options, executor)`` -> ``[fn(path, options) for path in
paths]`` in order, computed serially (``"serial"``), by local processes (``None``/``"local"``),
by a Dask cluster started on this machine (``"dask-local"``), or by a running Dask
scheduler (``"tcp://HOST:PORT"``; its workers need ctda installed and the trace paths
readable). Dask is the optional ``dist`` extra, imported only when asked for.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from ctda.analysis.engine import AnalysisOptions
from ctda.errors import CtdaError

T = TypeVar("T")


class ExecutorError(CtdaError, ValueError):
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
    if spec == "dask-local" or spec.startswith(("tcp://", "tls://")):
        return _dask_map(fn, paths, options, spec)
    raise ExecutorError(f"unknown executor {spec!r}: use local, serial, dask-local or tcp://HOST:PORT")


def _dask_map(
    fn: Callable[[str, AnalysisOptions], T], paths: Sequence[str], options: AnalysisOptions, spec: str
) -> list[T]:
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise ExecutorError(f"--executor {spec}: Dask is not installed (pip install 'ctda[dist]')") from None
    # a worker shut down at the end of a job is expected; say only what is wrong
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if spec == "dask-local":
        workers = max(1, min(len(paths), os.cpu_count() or 1))
        # as local processes run: glibc's default trimming (Dask's nannies set
        # MALLOC_TRIM_THRESHOLD_=64 KiB, which made a rank's analysis 1.6 times as slow: it
        # returns and re-faults the large arrays' pages), no memory limit (a worker near it
        # pauses, spills or is restarted, and a rank's analysis is one large task) and no
        # statistical profiler (it samples every thread's stack every 10 ms, taking the GIL)
        environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
        environ.pop("MALLOC_TRIM_THRESHOLD_", None)
        config = {"distributed.worker.profile.enabled": False, "distributed.nanny.pre-spawn-environ": environ}
        if sys.platform.startswith("linux"):
            # workers forked from this process, as local processes are: a spawned worker
            # imports Dask, numpy, pandas and ctda again and exits slowly, which made a
            # 4-rank job 9.0 s instead of 5.5 s (12 CPU s instead of 5.6). The fork is made
            # by the cluster's event-loop thread while this one only waits for it.
            config["distributed.worker.multiprocessing-method"] = "fork"
        with (
            dask.config.set(config),
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                memory_limit=0,
            ) as cluster,
            Client(cluster) as client,
        ):
            return _gather(client, fn, paths, options)
    try:
        client = Client(spec, timeout=30)
    except OSError as exc:
        raise ExecutorError(f"--executor {spec}: cannot reach the Dask scheduler ({exc})") from None
    with client:
        return _gather(client, fn, paths, options)


def _gather(
    client: Any, fn: Callable[[str, AnalysisOptions], T], paths: Sequence[str], options: AnalysisOptions
) -> list[T]:
    from distributed import as_completed

    # one task per rank, never retried elsewhere with a different result; pure=False so two
    # identical paths (a mistake the job loader reports) still run as two tasks
    futures = client.map(fn, list(paths), options=options, pure=False)
    where = {f.key: i for i, f in enumerate(futures)}
    out: list[Any] = [None] * len(futures)
    # each result is fetched as soon as its rank is done, while the others still compute
    # (gathering them all at the end moved every skeleton, ~37 MB per 1M-event rank,
    # after the last rank: a serial tail of ~1 s on 8 ranks)
    for future, result in as_completed(futures, with_results=True):
        out[where[future.key]] = result
    return out
