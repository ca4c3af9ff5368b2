"""Warm the UI server's process before it serves its first page.

The first use of the engine in a process pays for more than the work: importing pandas,
Arrow and the app's modules, numba's start-up and the loading of each compiled
function from its cache (about 2 s here before any real work). A server that pays it at
its first click makes a user wait seconds for a page that takes a fraction of that
afterwards. :func:`warm_up` pays it at start, before the server listens, by walking a
tiny run through every path the pages take: read, analyse, store and load back,
report, timeline, what-if candidates, a scenario; its temporary store is deleted.

:func:`preload` then fills the Runs table's breakdown cells (the page a session opens on),
and puts the run the pages open on (``ctda ui --run``, else the store's
first) into the pages' own caches: its analysis, the representative step's timeline and
bound-by bars, the what-if candidates, the hotspots of every step and the breakdown tables.
On a 1M-event run those are 1.1, 1.2, 1.5, 0.9 and ~0.4 s of the Critical path, What-if,
Hotspots and Breakdowns pages' first visits, paid while the server starts instead.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the warm-up is skipped with this environment variable set to 0 (a server that must
#: listen at once, e.g. behind a health check with a short deadline)
ENV = "CTDA_UI_WARM"
#: the preload of the run the pages open on is skipped with this one set to 0
ENV_PRELOAD = "CTDA_UI_PRELOAD"
#: a larger run is not preloaded: it would hold the server's start for seconds per
#: million events (a 610k-event run: 3.5 s) and its memory for a run a user may not open
PRELOAD_MAX_EVENTS = 2_000_000
#: seconds the preload spends on the Runs table's breakdown cells (~0.2 s per 1M-event
#: run); runs past it are read at the page's first visit
RUNS_TABLE_BUDGET_S = 3.0


def tiny_trace(steps: int = 3) -> dict[str, Any]:
    """A small Kineto trace of ``steps`` profiler steps: a main thread launching a kernel
    (runtime call, kernel and their flow), waiting on it, and a second thread working
    beside it; every kind of event and edge the pages draw, in a few dozen events."""
    events: list[dict[str, Any]] = []
    for k in range(steps):
        t = 1_000 + k * 200
        corr = 100 + k
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1,
             "ts": t, "dur": 190},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 5, "dur": 40,
             "args": {"External id": corr, "Input Dims": [[64, 64], [64, 64]],
                      "Input type": ["float", "float"]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 10, "dur": 20, "args": {"correlation": corr, "External id": corr}},
            {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": t + 35,
             "dur": 80, "args": {"correlation": corr, "stream": 7, "device": 0, "External id": corr}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1, "ts": t + 10},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": t + 35,
             "bp": "e"},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
             "ts": t + 50, "dur": 70},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": t + 125,
             "dur": 50},
            {"ph": "X", "cat": "cpu_op", "name": "data_loader", "pid": 1, "tid": 2, "ts": t + 20,
             "dur": 120},
        ]  # fmt: skip
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "warm-up device", "computeMajor": 9, "computeMinor": 0}],
        "traceEvents": events,
    }


def warm_up(log: Any = None) -> float:
    """Walk a tiny run through the pages' paths (see the module doc); the seconds it took.

    Never fatal: a failure is reported on ``log`` (stderr by default) and the server
    starts cold, as it would without this step.
    """
    out = log or sys.stderr
    t = time.perf_counter()
    try:
        _walk()
    except Exception as exc:  # a warm-up problem must not keep the UI from starting
        print(f"ctda ui: warm-up skipped ({type(exc).__name__}: {exc})", file=out, flush=True)
    return time.perf_counter() - t


def _walk() -> None:
    import ladybug  # noqa: F401  # the embedded store's module: its first import is ~0.3 s

    from ctda import api
    from ctda.ui import bars, canvas, charts, data, figures, frames, guide, lanes, widgets  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="ctda-warm-") as d:
        path = Path(d) / "warm.json.gz"
        path.write_bytes(gzip.compress(json.dumps(tiny_trace()).encode()))
        # stored and loaded back as a page loads a run: the store, the snapshot, the graph
        db = str(Path(d) / "warm.lbug")
        with api.open_store(db) as s:
            s.ingest(path, run="warm")
            info = s.runs()[0]
        a = api.load_run(db, info).analysis
    names = frames.Names(a)
    api.report(a, top=len(names.names))
    frames.timeline(a, 0, 1000, names)
    frames.class_by_window(a)
    candidates = api.whatif_candidates(a)
    # one scenario of each kind offered: a group at a factor, a named optimisation
    for kind, rows in candidates.groupby("kind", sort=False):
        target = str(rows.target.iloc[0])
        if kind == "optimisation":
            api.retime(a, [], name="warm", apply=[target])
        else:
            api.retime(a, [api.select_group(a, str(kind), target, 0.5)], name="warm")


def preload(argv: list[str], log: Any = None) -> str | None:
    """Load the run the pages open on into their caches (see the module doc); its name.

    ``argv``: the app's own arguments (those after ``--``: the store, the drawing caps).
    Never fatal, like :func:`warm_up`: nothing stored, a run of more than
    :data:`PRELOAD_MAX_EVENTS`, or any failure leaves the caches empty, and the pages load
    the run at their first visit.
    """
    out = log or sys.stderr
    try:
        return _preload(argv, out)
    except Exception as exc:
        print(f"ctda ui: no run preloaded ({type(exc).__name__}: {exc})", file=out, flush=True)
        return None


#: Streamlit's loggers that warn about a cache used outside a page's script run (the
#: preload's whole point): quiet while it runs
_BARE_MODE_LOGGERS = (
    "streamlit.runtime.caching.cache_data_api",
    "streamlit.runtime.scriptrunner_utils.script_run_context",
)


def _preload(argv: list[str], out: Any) -> str | None:
    import logging

    def quiet(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR

    # a filter, not a level: Streamlit sets its loggers' levels when it first uses them
    loggers = [logging.getLogger(n) for n in _BARE_MODE_LOGGERS]
    for lg in loggers:
        lg.addFilter(quiet)
    try:
        return _load_first(argv, out)
    finally:
        for lg in loggers:
            lg.removeFilter(quiet)


def _load_first(argv: list[str], out: Any) -> str | None:
    from ctda.ui import data, figures, settings, share

    s = settings.from_argv(argv)
    runs = data.list_runs(s.db)
    if not runs:
        return None
    # the Runs page, where a session opens: each run's path by class, read from the store
    data.run_breakdowns(s, runs, budget_s=RUNS_TABLE_BUDGET_S)
    # what every page opens on: the run ``--run`` names, else the sidebar's first
    first = next((r for r in runs if r.name == s.run), runs[0])
    if first.events > PRELOAD_MAX_EVENTS:
        print(f"ctda ui: run {first.name!r} not preloaded ({first.events:,} events)", file=out, flush=True)
        return None
    print(f"ctda ui: loading run {first.name!r} ({first.events:,} events)...", file=out, flush=True)
    loaded = data.load(s, first)
    a, tag = loaded.analysis, loaded.tag
    steps = data.steps(tag, a)
    if len(steps):
        # the Critical path page's opening view (its step picker's default)
        window = share.opening_window(steps)
        figures.steps(tag, window, a)
        figures.timeline(tag, window, s.max_events, a)
        figures.breakdown(tag, (window,), a)
    data.whatif_candidates(tag, a)
    # the Hotspots page's opening view: every step (its report is the page's costliest part)
    data.hotspots_of_every_step(tag, a)
    data.breakdowns(tag, a)  # the Breakdowns page's tables
    return first.name
