"""UI responsiveness in a real browser: ``ctda ui`` served on a stored big run, driven by a
headless Chromium like a person would use it (see :mod:`bench.browser` for the clock).

Rows have the shape of :mod:`bench.ui_bench`'s, with ``via: browser``. Measured: switching
pages, changing the run, changing the step, and moving a what-if factor until the new
prediction is drawn. The first visit of each page after a run is loaded (analysis load,
first report, first re-propagation) is reported as ``cold``. The server is started on the big
run (``ctda ui --run``), which it loads before it listens: the first visits are those of the
run a session opens on; "change run" rows load a run that was not preloaded.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import browser

Row = dict[str, Any]
#: a second, small run in the same store, so "change run" has somewhere to go
SMALL = Path(__file__).resolve().parents[1] / "tests" / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"
PAGES = ("Critical path", "Hotspots", "Breakdowns", "What-if", "Compare", "Runs")


def _log(msg: str) -> None:
    print(f"[ui-browser] {msg}", file=sys.stderr, flush=True)


def add_small_run(db: Path) -> str:
    """The small run ingested into ``db`` beside the big one (a no-op when there)."""
    from ctda.analysis.engine import AnalysisOptions
    from ctda.store.config import resolve
    from ctda.store.ingest import default_name, ingest

    name = default_name(SMALL)
    ingest(SMALL, resolve(str(db)), AnalysisOptions(), name=name)
    return name


def window_labels(db: Path, run: str) -> list[str]:
    """The run's window labels, from the store (the bench never loads the analysis)."""
    from ctda.queries import loader
    from ctda.store import open_store

    with open_store(str(db), read_only=True) as s:
        recs = loader.run(s, "steps", run=run).records()
    return [str(r["window"]) for r in recs]


def choose_typed(d: Any, label: str, prefix: str, nth: int = 0) -> float:
    """Pick the option starting with ``prefix`` by typing it into the box (long option lists
    are drawn lazily, so the option is filtered into view like a person would)."""
    from selenium.webdriver.common.by import By

    box = browser._box(d, label, nth)
    field = box.find_element(By.CSS_SELECTOR, "input[role='combobox']")
    field.click()
    field.send_keys(prefix)
    xpath = f'//*[@role="option"][starts-with(normalize-space(.), "{prefix}")]'
    el = browser.wait(d, lambda d: d.find_elements(By.XPATH, xpath), f"option {prefix}")[0]
    return browser.timed(d, el.click)


def _row(
    base: Row,
    page: str,
    what: str,
    times: list[float],
    cold: bool,
    error: str | None = None,
    running: list[float] | None = None,
    goal: float | None = None,
) -> Row:
    """``goal``: seconds the worst time must stay under (default: 1 s warm, none cold)."""
    worst = max(times) if times else float("nan")
    goal = goal if goal is not None or cold else GOAL_WARM_S
    running = running or []
    return {
        **base,
        "page": page,
        "interaction": what,
        "kind": "cold" if cold else "warm",
        "n": len(times),
        "median_s": round(sorted(times)[len(times) // 2], 4) if times else None,
        "max_s": round(worst, 4) if times else None,
        # of which the page showed a script run going: the server's work, and the drawing of
        # the elements that arrived during it (the browser draws while the script runs)
        "running_median_s": round(sorted(running)[len(running) // 2], 4) if running else None,
        "goal_s": goal,
        "meets_goal": None if goal is None else (error is None and bool(times) and worst < goal),
        "error": error,
    }


#: the goals: a warm interaction, and the first load of the app or of a page
GOAL_WARM_S = 1.0
GOAL_FIRST_S = 2.0

#: the least a first page load costs here: Streamlit's own page, a title and a line
BARE_APP = 'import streamlit as st\nst.title("Runs")\nst.write("A bare Streamlit page.")\n'


#: installed before the page's own scripts: the long tasks and the page's changes from
#: navigation on, so a first load ends where every other interaction's does
_FROM_NAVIGATION = """
window.__ctdaLongEnd = 0;
window.__ctdaChanged = 0;
window.__ctdaLong = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    window.__ctdaLongEnd = Math.max(window.__ctdaLongEnd, e.startTime + e.duration);
  }
});
window.__ctdaLong.observe({type: 'longtask', buffered: true});
new MutationObserver(() => { window.__ctdaChanged = performance.now(); })
  .observe(document, {attributes: true, childList: true, subtree: true, characterData: true});
"""


def first_load(d: Any, url: str, text: str) -> float:
    """Seconds from opening ``url`` until the page is still with ``text`` on it: the last
    change to the page or the end of the main thread's last long task, whichever is later
    (as for every other interaction), from the moment the page was asked for.

    The wall clock of the wait itself is not the figure: it adds the polling and the calm
    that :func:`bench.browser.settled` waits for (0.5-1 s)."""
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _FROM_NAVIGATION})
    asked = time.time()
    d.get(url + "/")
    browser.wait(d, lambda d: text in browser.body(d), repr(text))
    browser.settled(d)
    origin_ms, still_ms = d.execute_script(
        "return [performance.timeOrigin, Math.max(window.__ctdaChanged, window.__ctdaLongEnd)];"
    )
    return float(origin_ms) / 1e3 - asked + float(still_ms) / 1e3


def bare_load(work: Path) -> float:
    """Seconds to load :data:`BARE_APP` in a fresh browser, served with ``ctda ui``'s flags:
    the part of a first page load that is Streamlit's and the browser's, not ctda's."""
    chromium, chromedriver = browser.find_browser()
    app = work / "bare_app.py"
    app.write_text(BARE_APP)
    server = browser.Server(work / "none.lbug", work / "bare-uploads", work / "bare.log", bare=app)
    d = None
    try:
        d = browser.new_driver(chromium, chromedriver, work / "bare-profile")
        return first_load(d, server.url, "A bare Streamlit page")
    finally:
        if d is not None:
            d.quit()
        server.stop()


def measure(trace: Path, n_events: int, quick: bool, reps: int, store_dir: Path | None = None) -> list[Row]:
    """Every measured interaction on one trace, in one fresh server and browser."""
    from bench import ui_bench

    base: Row = {
        "suite": "ui",
        "via": "browser",
        "trace": trace.name,
        "events": n_events,
        "quick": quick,
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
    }
    try:
        chromium, chromedriver = browser.find_browser()
    except browser.BrowserMissing as exc:
        _log(f"skipped: {exc}")
        return [_row(base, "-", "browser measurement", [], True, f"skipped: {exc}")]
    db, name = ui_bench.stored_run(trace, store_dir or ui_bench.CACHE / "ui_store")
    small = add_small_run(db)
    labels = window_labels(db, name)
    base["windows"] = len(labels)
    work = Path(tempfile.mkdtemp(prefix="ctda-ui-browser-"))
    rows: list[Row] = []

    def took(secs: float) -> tuple[float, float]:
        """An interaction's seconds, and those the page reported a script run going (the
        server's work plus the drawing of what arrived meanwhile)."""
        return secs, (browser.last_server_s() if secs > 0 else 0.0)

    def add(
        page: str, what: str, pairs: list[tuple[float, float]], cold: bool = False, goal: float | None = None
    ) -> None:
        times, mine = [p[0] for p in pairs], [p[1] for p in pairs]
        rows.append(_row(base, page, what, times, cold, running=mine, goal=goal))
        _log(
            f"{page:14s} {what:48s} "
            + " ".join(f"{t:6.2f}" for t in times)
            + "  running "
            + " ".join(f"{t:5.2f}" for t in mine)
        )

    # sessions open on the big run (``ctda ui --run``), as for a user who just ingested it:
    # the server loads it before it listens, and its first visits are measured warm
    server = browser.Server(db, work / "uploads", work / "server.log", run=name)
    d = None
    try:
        add("runs", "server start (warm-up and the run's preload)", [(server.start_s, 0.0)], cold=True)
        d = browser.new_driver(chromium, chromedriver, work / "profile")
        load = first_load(d, server.url, "Ingest a trace")
        add("runs", "first page load", [(load, 0.0)], cold=True, goal=GOAL_FIRST_S)
        add("runs", "first page load of a bare Streamlit page (reference)", [(bare_load(work), 0.0)], True)
        picked = browser.choose(d, "Run", name)  # 0: the big run is what sessions open on
        if picked:
            add("runs", "pick the big run", [took(picked)], cold=True)
        # first visits: the analysis, the report of all steps, the what-if choices, the comparison
        for page in PAGES:
            add(page.lower(), "first visit", [took(browser.open_page(d, page))], cold=True, goal=GOAL_FIRST_S)
            browser.settled(d)
        switches: dict[str, list[tuple[float, float]]] = {p: [] for p in PAGES}
        for _ in range(reps):
            for page in PAGES:
                switches[page].append(took(browser.open_page(d, page)))
                browser.settled(d)
        for page, times in switches.items():
            add(page.lower(), "page switch", times)
        # the drill-down: a hotspot's instances, their edges and why each edge exists
        browser.open_page(d, "Hotspots")
        browser.settled(d)
        names = [o for o in browser.options(d, "Hotspot") if not o.startswith("(")]
        drills = [took(browser.choose(d, "Hotspot", n)) for n in names[1 : reps + 1]]
        add("hotspots", "drill into a name", [t for t in drills if t[0] > 0])

        browser.open_page(d, "Critical path")
        browser.settled(d)
        add(
            "critical path",
            "change run (first load of the small run)",
            [took(browser.choose(d, "Run", small))],
            True,
        )
        back = [took(browser.choose(d, "Run", name))]
        for _ in range(reps - 1):
            took(browser.choose(d, "Run", small))
            back.append(took(browser.choose(d, "Run", name)))
        add("critical path", "change run (to the big run)", back)
        picks = ui_bench._spread(len(labels), reps)
        if picks:
            steps = [took(choose_typed(d, "Step", labels[k] + " ·")) for k in picks]
            add("critical path", "change step", steps)

        browser.open_page(d, "What-if")
        browser.settled(d)
        add(
            "what-if",
            "first move of a factor (first re-propagation)",
            [took(browser.slide(d, -1))],
            cold=True,
        )
        moves = [took(browser.slide(d, k)) for k in ([-4, 2, -3, 5, -2][:reps] if reps > 1 else [-4])]
        add("what-if", "move a factor (prediction drawn)", moves)
        # save the what-if (each time another factor: a new scenario), then Save's way on to
        # Compare (the run as observed against the scenario: both sides the big run)
        saves, compares = [], []
        for _ in range(reps):
            browser.slide(d, -1)
            browser.settled(d)
            saves.append(took(timed_to(d, browser.button(d, "Save scenario").click, "Saved scenario")))
            browser.settled(d)
            go = browser.button(d, "Compare with the run").click
            compares.append(took(timed_to(d, go, "Predicted change b − a")))
            browser.settled(d)
            browser.open_page(d, "What-if")
            browser.settled(d)
        add("what-if", "save the scenario", saves)
        add("compare", "compare with the run (Save's button)", compares)
        for r in rows:
            r["windows"] = base["windows"]
    except Exception as exc:  # one failed step must not lose the rows measured so far
        if d is not None:
            d.save_screenshot(str(work / "failed.png"))
        _log(f"browser measurement failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        _log(server.log_tail()[-1500:])
        rows.append(_row(base, "-", "browser measurement", [], True, f"{type(exc).__name__}: {exc}"[:300]))
    finally:
        if d is not None:
            d.quit()
        server.stop()
        forget_scenarios(db, name)
        shutil.rmtree(work, ignore_errors=True)
    return rows


def timed_to(d: Any, act: Callable[[], object], text: str) -> float:
    """Seconds from ``act`` until ``text`` is on the page and the page is still: for an
    action whose script reruns (Save) or switches page (Compare with ...), where the first
    run's end is not the end of what the person waits for."""
    secs = browser.timed(d, act)
    if text in browser.body(d):
        return secs
    browser.wait(d, lambda d: text in browser.body(d), repr(text))
    browser.settled(d)
    end = d.execute_script("return Math.max(window.__ctdaLast, window.__ctdaLongEnd) - window.__ctdaT0;")
    return max(secs, float(end) / 1e3)


def forget_scenarios(db: Path, run: str) -> None:
    """Delete the scenarios the bench saved (the store is kept between bench runs)."""
    from ctda import api

    with api.open_store(str(db)) as s:
        stored = s.load(run).run
        if stored is not None:
            for sc in stored.scenarios():
                stored.delete_scenario(str(sc["name"]))
