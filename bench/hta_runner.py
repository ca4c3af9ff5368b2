"""HolisticTraceAnalysis critical path on one trace; run by the HTA venv's python, not ctda's.

``python hta_runner.py TRACE [--annotation A]`` prints one JSON line: the wall time of
loading the trace (``TraceAnalysis(...)``: parse, align, filter), of
``critical_path_analysis`` (graph construction and the longest path) and of
``get_critical_path_breakdown`` (HTA's per-event report), each also in CPU seconds
(``*_cpu_s``), the peak RSS, and what HTA found. Failures are reported in the JSON
(``error``: exception type and the first line of its message, ``stage``: where it
happened) with exit status 0, so the caller can tell a failure of HTA from a crash of
this script.

Stand-alone on purpose: it imports only the standard library and ``hta`` (it runs in a
separate virtual environment that has HTA 0.5 and ``pandas<3``; ctda is not installed
there and HTA is never a dependency of ctda).

The whole trace is analysed (``annotation=""``, HTA's "look up full trace" mode, with the
last profiler step kept), so HTA sees the same events that ``ctda analyze`` builds its
graph from. The trace is passed as ``trace_files={rank: path}``, the rank taken from the
trace's ``distributedInfo`` when present (HTA's own file discovery needs it in the file).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

_RANK_RE = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


def rss_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process in MB (0 where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return 0.0


def trace_rank(path: Path, head_bytes: int = 1 << 20) -> int:
    """``distributedInfo.rank`` when it is near the start of the file (where Kineto puts it), else 0."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        head = fh.read(head_bytes)
    m = _RANK_RE.search(head)
    return int(m.group(1)) if m else 0


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def run(path: Path, annotation: str, out: dict[str, Any]) -> None:
    """Load, analyse, report into ``out``; one timing per stage; raises at the first failure."""
    out.update(ok=False, stage="import")
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis  # timed: HTA's import is heavy

    out["import_s"] = time.perf_counter() - t0
    out["baseline_rss_mb"] = rss_mb("VmRSS")
    rank = trace_rank(path)
    out["rank"] = rank

    out["stage"] = "load"
    t0, c0 = time.perf_counter(), time.process_time()
    analysis = TraceAnalysis(
        trace_files={rank: str(path.resolve())},
        trace_dir=str(path.resolve().parent),
        include_last_profiler_step=True,
    )
    out["load_s"], out["load_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    df = analysis.t.get_trace(rank)
    out["events"] = len(df)
    out["load_peak_rss_mb"] = rss_mb("VmHWM")

    out["stage"] = "critical_path_analysis"
    t0, c0 = time.perf_counter(), time.process_time()
    result = analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=None)
    out["cp_s"], out["cp_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    if result is None:
        raise RuntimeError("critical_path_analysis returned None (annotation not found)")
    graph, success = result
    out["cp_success"] = bool(success)
    out["graph_nodes"] = graph.number_of_nodes()
    out["graph_edges"] = graph.number_of_edges()
    out["cp_events"] = len(graph.critical_path_events_set)

    out["stage"] = "breakdown"
    t0, c0 = time.perf_counter(), time.process_time()
    breakdown = graph.get_critical_path_breakdown() if success else None
    out["report_s"], out["report_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    if breakdown is not None and "duration" in breakdown:
        out["cp_length_us"] = float(breakdown["duration"].sum())
    out["stage"] = "done"
    out["ok"] = bool(success)
    if not success:
        out["error"] = "critical_path_analysis reported failure (success=False)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--annotation", default="", help='HTA annotation ("" = whole trace)')
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # HTA logs a warning per missing sync event type
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        run(args.trace, args.annotation, out)
    except Exception as exc:  # any HTA failure is a result to report
        out["ok"] = False
        out["error"] = first_line(exc)
        # results are committed: show HTA's own files relative to its site-packages
        tail = traceback.format_exc().strip().splitlines()[-3:]
        out["traceback_tail"] = [re.sub(r'"[^"]*/site-packages/', '"', line) for line in tail]
    out["total_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = rss_mb("VmHWM")
    print(json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
