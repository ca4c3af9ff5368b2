"""One measurement in a fresh process: ``python -m bench.child TASK PATH`` prints one JSON line.

A fresh process per trace makes the peak RSS (``VmHWM``) belong to that trace alone and
keeps one run's garbage, caches and fragmentation out of the next. Imports and JIT loading
happen before the clock starts (a tiny warm-up trace), and the RSS right before the
measured call is reported as the baseline, so callers can separate the interpreter's own
footprint from the trace's.

Tasks are functions ``task(path) -> dict`` in :data:`TASKS`; suites add their own.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctda.api import tune_memory

__all__ = ["TASKS", "rss_mb"]

_WARMUP_TRACE = {
    "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 2,
            "args": {"correlation": 1},
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": 1},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 3,
            "args": {"correlation": 1, "device": 0, "stream": 7},
        },
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 5, "bp": "e"},
    ]
}


_MAXRSS_SCALE = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux


def rss_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) in MB; ru_maxrss where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _MAXRSS_SCALE / 1e6


def cpu_seconds() -> tuple[float, float]:
    """(user+sys CPU seconds of this process, of its finished helper processes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def children_peak_mb() -> float:
    """Largest peak RSS of any finished helper process (e.g. a forked decode worker)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * _MAXRSS_SCALE / 1e6


def _read(path: Path) -> dict[str, Any]:
    """The reader: read_trace on one file."""
    from ctda.ingest.reader import read_trace

    table = read_trace(path)
    return {
        "events": len(table),
        "json_bytes": table.meta.n_bytes,
        "flows": len(table.flows),
        "warnings": table.meta.warnings,
    }


def _warm_reader() -> None:
    """Import the reader and load its numba code before timing anything."""
    from ctda.ingest.reader import read_trace

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "warmup.json"
        p.write_text(json.dumps(_WARMUP_TRACE))
        read_trace(p)


#: task name -> (warm-up, measured function)
TASKS: dict[str, tuple[Callable[[], None], Callable[[Path], dict[str, Any]]]] = {
    "read": (_warm_reader, _read),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in TASKS:
        print(f"usage: python -m bench.child {{{','.join(TASKS)}}} PATH", file=sys.stderr)
        return 2
    tune_memory()  # as the command line does
    warm, task = TASKS[args[0]]
    warm()
    baseline = rss_mb("VmRSS")
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    out = task(Path(args[1]))
    seconds = time.perf_counter() - t0
    cpu1 = cpu_seconds()
    out.update(
        seconds=seconds,
        # CPU time is the figure to trust on a busy machine: wall time includes waiting
        cpu_s=cpu1[0] - cpu0[0],
        cpu_s_helpers=cpu1[1] - cpu0[1],
        peak_rss_mb=rss_mb("VmHWM"),
        baseline_rss_mb=baseline,
        children_peak_rss_mb=children_peak_mb(),
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
