"""UI responsiveness: time of each page interaction of ``ctda ui`` on a big run.

``run(quick)`` measures a stored run of >= 1M events (quick: >= 100k) twice over:

- in a real headless Chromium against a real ``ctda ui`` server (``via: browser``): from
  the click or key press to the moment the page has finished the script run it caused and
  painted the result -- what a person waits for (see :mod:`bench.browser`);
- with Streamlit's AppTest (``via: apptest``): the server-side script rerun alone, per
  page and widget, which tells where the time goes when the browser figure is high.

The goal is under 1 s per interaction once a run is loaded; loading a run's analysis
(once per run and server process) and first computations are ``cold`` rows, no goal.

The trace is a synthetic replica cached in ``bench/.cache`` (``python -m bench.replicate``
or the analyze suite make them); the store it is ingested into is cached there too, so
only the first run pays for the ingest.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
CACHE = BENCH_DIR / ".cache"
APP = REPO / "ctda" / "ui" / "app.py"
GOAL_S = 1.0
#: replicas tried first: a plain GPU training run (many steps), then a backward thread
#: (cross-thread edges, one huge window)
PREFERRED = ("resnet50_v100_nw0_2021", "mi300_resnet18_train_bwd_thread")
FALLBACK_SOURCE = REPO / "tests" / "data" / "hta" / "simple_add_param_benchmark.json.gz"

Row = dict[str, Any]


def _log(msg: str) -> None:
    print(f"[ui-bench] {msg}", file=sys.stderr, flush=True)


def find_traces(min_events: int, limit: int) -> list[tuple[Path, int]]:
    """Up to ``limit`` cached replicas of ``min_events`` to 4x that many events, preferred
    ones first (one is generated when there is none)."""
    found: list[tuple[int, str, Path, int]] = []
    for meta in CACHE.glob("*.json.gz.meta.json"):
        trace = meta.with_name(meta.name.removesuffix(".meta.json"))
        try:
            n = int(json.loads(meta.read_text())["n_events"])
        except (OSError, ValueError, KeyError):
            continue
        if trace.is_file() and min_events <= n < 4 * min_events:
            rank = next((k for k, p in enumerate(PREFERRED) if trace.name.startswith(p)), len(PREFERRED))
            found.append((rank, trace.name, trace, n))
    if found:
        return [(trace, n) for _, _, trace, n in sorted(found)[:limit]]
    from bench import corpus

    _log(f"no cached replica of >= {min_events:,} events: generating one from {FALLBACK_SOURCE.name}")
    syn = corpus.synthetic(FALLBACK_SOURCE, CACHE, min_events=min_events, min_bytes=0, log=_log)
    return [(syn.path, syn.n_events)]


def stored_run(trace: Path, folder: Path = CACHE / "ui_store") -> tuple[Path, str]:
    """The trace ingested into a cached embedded store (a no-op when already there)."""
    from ctda.analysis.engine import AnalysisOptions
    from ctda.store.base import StoreError
    from ctda.store.config import resolve
    from ctda.store.ingest import default_name, ingest

    name = default_name(trace)
    db = folder / f"{name}.lbug"
    for attempt in (1, 2):
        try:
            t = time.perf_counter()
            out = ingest(trace, resolve(str(db)), AnalysisOptions(), name=name)
            if out.stored:
                _log(f"ingested {trace.name} in {time.perf_counter() - t:.1f} s")
            return db, name
        except StoreError as exc:
            if attempt == 2:
                raise
            # a store written by an older ctda (schema change): start it afresh
            _log(f"re-creating the cached store ({exc})")
            shutil.rmtree(folder, ignore_errors=True)
    raise AssertionError("unreachable")


class Driver:
    """An AppTest session plus a stopwatch around each interaction.

    Widgets re-keyed by what they show (``widgets.scoped``) are found by their base key."""

    def __init__(self, run_name: str) -> None:
        from streamlit.testing.v1 import AppTest

        self.at = AppTest.from_file(str(APP), default_timeout=900)
        self.at.session_state["run"] = run_name

    def time(self, act: Callable[[Any], object] | None = None) -> tuple[float, str | None]:
        t = time.perf_counter()
        if act is not None:
            act(self.at)
        self.at.run()
        dt = time.perf_counter() - t
        problems = [e.message for e in self.at.exception] + [e.value for e in self.at.error]
        return dt, (str(problems[0]).splitlines()[0] if problems else None)

    def page(self, name: str) -> tuple[float, str | None]:
        return self.time(lambda at: at.switch_page(f"views/{name}.py"))

    def widget(self, kind: str, key: str) -> Any:
        for w in getattr(self.at, kind):
            if w.key == key or str(w.key).startswith(f"{key}@"):
                return w
        raise KeyError(f"no {kind} keyed {key!r}")

    def pick(self, key: str, index: int) -> tuple[float, str | None]:
        """Choose the ``index``-th option of selectbox ``key``."""
        return self.time(lambda at: self.widget("selectbox", key).select_index(index))

    def set(self, kind: str, key: str, value: Any) -> tuple[float, str | None]:
        """Set widget ``key`` of ``kind`` (``selectbox``, ``slider``, ...) to ``value``."""
        return self.time(lambda at: self.widget(kind, key).set_value(value))

    def options(self, key: str) -> list[str]:
        return list(self.widget("selectbox", key).options)


def _row(
    base: Row, page: str, interaction: str, times: list[float], errors: list[str | None], cold: bool
) -> Row:
    err = next((e for e in errors if e), None)
    worst = max(times)
    return {
        **base,
        "page": page,
        "interaction": interaction,
        "kind": "cold" if cold else "warm",
        "n": len(times),
        "median_s": round(statistics.median(times), 4),
        "max_s": round(worst, 4),
        "goal_s": None if cold else GOAL_S,
        "meets_goal": None if cold else (err is None and worst < GOAL_S),
        "error": err,
    }


def measure(
    trace: Path, n_events: int, quick: bool, reps: int, store_dir: Path = CACHE / "ui_store"
) -> list[Row]:
    """Every page's interactions on one trace, in one fresh AppTest session."""
    db, name = stored_run(trace, store_dir)
    uploads = Path(tempfile.mkdtemp(prefix="ctda-ui-bench-"))
    saved = {k: os.environ.get(k) for k in ("CTDA_DB", "CTDA_UI_UPLOADS")}
    os.environ["CTDA_DB"], os.environ["CTDA_UI_UPLOADS"] = str(db), str(uploads)
    base: Row = {
        "suite": "ui",
        "via": "apptest",
        "trace": trace.name,
        "events": n_events,
        "quick": quick,
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
    }
    rows: list[Row] = []

    def add(page: str, what: str, results: list[tuple[float, str | None]], cold: bool = False) -> None:
        if not results:
            return
        rows.append(_row(base, page, what, [r[0] for r in results], [r[1] for r in results], cold))
        err = rows[-1]["error"]
        _log(f"{page:14s} {what:40s} {rows[-1]['max_s']:7.3f} s" + (f"  ERROR {err}" if err else ""))

    try:
        d = Driver(name)
        add("runs", "open (first script run)", [d.time()], cold=True)
        add("runs", "rerun", [d.time() for _ in range(reps)])
        add("critical path", "open: load the run's analysis", [d.page("critical_path")], cold=True)
        base["windows"] = len(d.options("cp_step"))
        add("critical path", "rerun", [d.time() for _ in range(reps)])
        picks = _spread(base["windows"], reps)
        add("critical path", "change step", [d.pick("cp_step", k) for k in picks])
        add("hotspots", "open: report of all steps (first)", [d.page("hotspots")], cold=True)
        d.page("runs")
        add("hotspots", "open again", [d.page("hotspots")])
        # hs_step has "all windows" first: window k is option k + 1
        add("hotspots", "change step", [d.pick("hs_step", k + 1) for k in picks])
        sorts = ("count", "smallest slack", "critical-path time")
        add("hotspots", "sort", [d.set("selectbox", "hs_sort", v) for v in sorts])
        names = [k for k, n in enumerate(d.options("hs_pick")) if not n.startswith("(")][:reps]
        add("hotspots", "drill into a name", [d.pick("hs_pick", k) for k in names])
        n_inst = len(d.options("hs_instance"))
        add(
            "hotspots",
            "pick an instance (edges, rules)",
            [d.pick("hs_instance", k) for k in range(min(n_inst, reps))],
        )
        # the page's first visit ranks the run's what-if candidates (the server preloads
        # them for the run it opens on); then a visit as every later one
        add("what-if", "open: rank the candidates (first)", [d.page("whatif")], cold=True)
        d.page("runs")
        add("what-if", "open again", [d.page("whatif")])
        # the server's first re-propagation also loads compiled code: reported apart
        add("what-if", "first re-propagation in the process", [d.set("slider", "wi_f_0", 0.95)], cold=True)
        factors = [0.5, 0.8, 0.3, 0.0, 1.5][:reps]
        add("what-if", "move a factor (re-propagate)", [d.set("slider", "wi_f_0", f) for f in factors])
        n_cls = len(d.options("wi_class_0"))
        add(
            "what-if",
            "change the class",
            [d.pick("wi_class_0", k) for k in range(1, min(n_cls, 1 + min(reps, 3)))],
        )
        add("what-if", "change the predicted path's step", [d.pick("wi_step", k) for k in picks])
        d.page("compare")
        # the store may hold other runs (the browser bench adds a small one): side b is
        # this run, whose unsaved what-if is offered
        d.set("selectbox", "cmp_run_b", name)
        first = d.set("selectbox", "cmp_what_b", "this session's what-if (unsaved)")
        add("compare", "observed vs what-if (first)", [first], cold=True)
        add("compare", "rerun", [d.time() for _ in range(reps)])
        add("console", "open", [d.page("console")])
        d.set("selectbox", "cq_pick", "steps")
        add("console", "run a named query (steps)", [d.time(lambda at: at.button(key="cq_run").click())])
        for r in rows:  # known only once the run was loaded
            r["windows"] = base["windows"]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(uploads, ignore_errors=True)
    return rows


def _spread(n: int, k: int) -> list[int]:
    """Up to ``k`` distinct window indices spread over ``1..n-1`` (0 is already shown;
    with a single window there is nothing to change to)."""
    if n <= 1:
        return []
    return sorted({1 + round(i * (n - 2) / max(k - 1, 1)) for i in range(k)})
