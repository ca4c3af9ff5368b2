"""Waiting for a Streamlit page, and timing one interaction on it, for :mod:`bench.browser`.

Timing: :func:`timed` measures one interaction as a person sees it, from the input event
to the moment Streamlit has finished the script run it caused and the browser has painted
the result (two animation frames after the app's ``data-test-script-state`` leaves
``running``), with the clock in the page itself, so WebDriver round trips do not count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

WAIT_S = 90


def body(d: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(d.find_element(By.TAG_NAME, "body").text)


def wait(
    d: Any,
    cond: Callable[[Any], Any],
    what: str,
    timeout: float = WAIT_S,
    on_timeout: Callable[[Any, str], object] | None = None,
) -> Any:
    """Poll ``cond`` until truthy; on timeout call ``on_timeout`` (a screenshot) and fail
    with the page text."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = cond(d)
            if got:
                return got
        except WebDriverException:
            pass  # the page is re-rendering under us
        time.sleep(0.1)
    if on_timeout is not None:
        on_timeout(d, what)
    raise AssertionError(f"timed out waiting for {what}; page text:\n{body(d)[:3000]}")


def script_state(d: Any) -> str:
    return str(
        d.execute_script(
            "const a = document.querySelector('[data-testid=\"stApp\"]');"
            "return a ? a.getAttribute('data-test-script-state') : '';"
        )
    )


def settled(d: Any, timeout: float = WAIT_S) -> None:
    """Wait until Streamlit has no script run going (and nothing is drawn stale)."""
    from selenium.webdriver.common.by import By

    time.sleep(0.3)

    def idle(d: Any) -> bool:
        if script_state(d) == "running":
            return False
        if d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'):
            return False
        return not d.find_elements(By.CSS_SELECTOR, '[data-stale="true"]')

    wait(d, idle, "the run to finish", timeout)
    # and the main thread free of long tasks for a while (a person looks before acting)
    calm = _LONG_TASKS + "return performance.now() - window.__ctdaLongEnd > 500;"
    wait(d, lambda d: bool(d.execute_script(calm)), "the page to be still", timeout)
    time.sleep(0.2)


# The end of the page's last long task (over 50 ms of the main thread), watched from the
# first time :func:`settled` or :func:`timed` runs on a page: drawing that goes on after the
# elements are in place (a canvas chart, a data grid) belongs to the action that caused it.
_LONG_TASKS = """
if (!window.__ctdaLong) {
  window.__ctdaLongEnd = 0;
  window.__ctdaLong = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      window.__ctdaLongEnd = Math.max(window.__ctdaLongEnd, e.startTime + e.duration);
    }
  });
  // buffered: the long tasks since the page loaded count too, not only those from now on
  window.__ctdaLong.observe({type: 'longtask', buffered: true});
}
"""

_ARM = (
    _LONG_TASKS
    + """
const app = document.querySelector('[data-testid="stApp"]');
window.__ctdaRan = false;
window.__ctdaMarks = [];
if (window.__ctdaObs) window.__ctdaObs.disconnect();
window.__ctdaObs = new MutationObserver((records) => {
  window.__ctdaLast = performance.now();
  for (const r of records) {
    if (r.target === app && r.attributeName === 'data-test-script-state') {
      const state = app.getAttribute('data-test-script-state');
      window.__ctdaMarks.push([state, performance.now() - window.__ctdaT0]);
      if (state === 'running') window.__ctdaRan = true;
    }
  }
});
window.__ctdaObs.observe(app, {attributes: true, childList: true, subtree: true, characterData: true});
window.__ctdaT0 = performance.now();
window.__ctdaLast = window.__ctdaT0;
"""
)


# Done when the page shows no script run, nothing stale and every canvas chart drawn
# (a redrawn canvas was checked to hold its final image by then), and either a run was seen to
# start (the usual case) or -- a run so short that React drew its start and end in one go
# leaves no "running" state to see -- the page has been still for QUIET ms since it last
# changed (the time reported is then that of the last change). The time reported is then
# moved to the end of the last long task that followed, once the main thread has been free of
# them for CALM ms: the work the browser still does for the action is the action's.
_DONE = """
const done = arguments[arguments.length - 1];
const app = document.querySelector('[data-testid="stApp"]');
const limit = performance.now() + arguments[0] * 1000;
const QUIET = 600;
const CALM = 300;
function finish(t) {
  // two frames: React has committed and the browser has painted what it drew
  requestAnimationFrame(() => requestAnimationFrame(() => calm(t)));
}
function calm(t) {
  const end = Math.max(t, window.__ctdaLongEnd);
  if (performance.now() - end < CALM && performance.now() < limit) { setTimeout(() => calm(t), 20); return; }
  done(end - window.__ctdaT0);
}
function poll() {
  const now = performance.now();
  if (now > limit) { done(-1); return; }
  // a Vega-Lite chart mounts its canvas after its library loads (on the first visit)
  const drawn = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'))
    .every(el => { const c = el.querySelector('canvas'); return c && c.width > 0; });
  const idle = app.getAttribute('data-test-script-state') !== 'running'
    && !document.querySelector('[data-stale="true"]') && drawn;
  if (idle && window.__ctdaRan) { finish(performance.now()); return; }
  if (idle && now - window.__ctdaLast > QUIET && now - window.__ctdaT0 > 2 * QUIET) {
    finish(window.__ctdaLast); return;
  }
  setTimeout(poll, 5);
}
poll();
"""


def timed(d: Any, act: Callable[[], object], timeout: float = 100.0) -> float:
    """Seconds from ``act`` (one user action) until its script run is done and painted
    (``timeout`` stays under WebDriver's own 120 s limit on one command)."""
    d.set_script_timeout(timeout + 10)
    d.execute_script(_ARM)
    act()
    ms = float(d.execute_async_script(_DONE, timeout))
    if ms < 0:
        raise AssertionError(f"no finished script run within {timeout:.0f} s")
    LAST_MARKS[:] = [(str(s), float(t) / 1e3) for s, t in d.execute_script("return window.__ctdaMarks;")]
    return ms / 1e3


#: (script state, seconds since the action) of the last :func:`timed` interaction
LAST_MARKS: list[tuple[str, float]] = []


def last_server_s() -> float:
    """Seconds the page of the last :func:`timed` interaction reported a script run going
    (from the first ``running`` to the last state change after it): the server's work, and
    the drawing of elements that arrived meanwhile (the page draws them as they come)."""
    starts = [t for s, t in LAST_MARKS if s == "running"]
    if not starts:
        return 0.0
    ends = [t for s, t in LAST_MARKS if s != "running" and t >= starts[0]]
    return (max(ends) if ends else starts[-1]) - starts[0]
