"""A real ``ctda ui`` server driven by a real headless Chromium (Selenium), shared by the
end-to-end test (``tests/e2e``) and the browser half of the UI bench (``bench.ui_bench``).

The browser is Debian's ``chromium`` with its matching ``chromium-driver``
(``scripts/install_browser.sh``); the driver path is given explicitly, so Selenium
Manager never runs and nothing is downloaded at run time.

Timing: :func:`timed` measures one interaction as a person sees it, from the input event
to the moment Streamlit has finished the script run it caused and the browser has painted
the result (two animation frames after the app's ``data-test-script-state`` leaves
``running``), with the clock in the page itself, so WebDriver round trips do not count.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver", "chromedriver")
START_TIMEOUT_S = 90
WAIT_S = 90


class BrowserMissing(Exception):
    """No Chromium, no ChromeDriver, or no selenium package (the message says which)."""


def _find(candidates: tuple[str, ...]) -> str | None:
    for c in candidates:
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.access(path, os.X_OK):
            return path
    return None


def find_browser() -> tuple[str, str]:
    """Paths of Chromium and ChromeDriver; :class:`BrowserMissing` says what is missing."""
    chromium, driver = _find(CHROMIUM), _find(CHROMEDRIVER)
    if chromium is None:
        raise BrowserMissing("no chromium on PATH or at /usr/bin/chromium")
    if driver is None:
        raise BrowserMissing("no chromedriver on PATH or at /usr/bin/chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        raise BrowserMissing("the selenium package is not installed (pip install selenium)") from None
    return chromium, driver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``ctda ui`` in its own process group (so stopping it ends only what it started)."""

    def __init__(
        self,
        db: Path,
        uploads: Path,
        log: Path,
        max_events: int | None = None,
        bare: Path | None = None,
        run: str | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTDA_DB")}
        cmd = [
            sys.executable, "-m", "ctda.cli.app", "ui",
            "--db", str(db), "--port", str(self.port), "--uploads", str(uploads),
        ]  # fmt: skip
        if max_events is not None:
            cmd += ["--max-events", str(max_events)]
        if run is not None:  # the run sessions open on, loaded before the server listens
            cmd += ["--run", run]
        if bare is not None:  # the Streamlit script ``bare`` served as ``ctda ui`` serves its app
            from ctda.cli.ui_cmd import command

            full, _ = command(str(db), self.port, "127.0.0.1", 512, 1000, str(uploads))
            cmd = [sys.executable, "-m", "streamlit", "run", str(bare), *full[5 : full.index("--")]]
        self._log = log.open("w")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        #: from the command to a healthy server (imports, warm-up, the run's preload)
        self.start_s = time.perf_counter() - t0

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ctda ui exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"ctda ui did not answer within {START_TIMEOUT_S}s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text()[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def new_driver(chromium: str, chromedriver: str, profile: Path, size: str = "1440,2000") -> Any:
    """Headless Chromium with its network log on (see :func:`requests_made`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={size}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    d.set_page_load_timeout(60)
    return d


def requests_made(d: Any) -> list[str]:
    """URLs the page asked for since the last call (from Chromium's network log)."""
    urls = []
    for entry in d.get_log("performance"):
        try:
            msg = json.loads(entry["message"])["message"]
        except (KeyError, ValueError):
            continue
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(str(msg["params"]["request"]["url"]))
    return urls


def external(urls: list[str], base: str) -> list[str]:
    """The ``urls`` that leave the machine: not the server itself, not inline data."""
    host = urlsplit(base).hostname
    out = []
    for u in urls:
        parts = urlsplit(u)
        if parts.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
            continue
        if parts.hostname in (host, "127.0.0.1", "localhost"):
            continue
        out.append(u)
    return out


# --- waiting and acting like a person ----------------------------------------------------


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


def button(d: Any, label: str) -> Any:
    from selenium.webdriver.common.by import By

    xpath = f"//button[normalize-space(.)='{label}']"
    wait(
        d,
        lambda d: d.find_elements(By.XPATH, xpath) and d.find_element(By.XPATH, xpath).is_enabled(),
        f"button {label}",
    )
    return d.find_element(By.XPATH, xpath)


def nav_link(d: Any, page: str) -> Any:
    from selenium.webdriver.common.by import By

    xpath = f"//a[@data-testid='stSidebarNavLink'][.//span[normalize-space(.)='{page}']]"
    return wait(d, lambda d: d.find_elements(By.XPATH, xpath), f"nav link {page}")[0]


def open_page(d: Any, page: str) -> float:
    """Follow the sidebar link to ``page`` (client-side: the session is kept); seconds."""
    from selenium.webdriver.common.by import By

    link = nav_link(d, page)
    secs = timed(d, link.click)
    wait(d, lambda d: d.find_elements(By.XPATH, f"//h1[normalize-space(.)='{page}']"), f"page {page}")
    return secs


def _box(d: Any, label: str, nth: int) -> Any:
    from selenium.webdriver.common.by import By

    xpath = f"//div[@data-testid='stSelectbox'][.//label[normalize-space(.)='{label}']]"
    wait(d, lambda d: len(d.find_elements(By.XPATH, xpath)) > nth, f"selectbox {label}")
    return d.find_elements(By.XPATH, xpath)[nth]


def options(d: Any, label: str, nth: int = 0) -> list[str]:
    """The options of a selectbox (opens and closes its list)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _box(d, label, nth).find_element(By.CSS_SELECTOR, 'button[aria-label="Open"]').click()
    opts = wait(d, lambda d: d.find_elements(By.XPATH, '//*[@role="option"]'), f"options of {label}")
    out = [str(o.text).strip() for o in opts]
    d.switch_to.active_element.send_keys(Keys.ESCAPE)
    return out


def choose(d: Any, label: str, option: str, nth: int = 0) -> float:
    """Pick ``option`` in the ``nth`` selectbox labelled ``label``; seconds until done
    (0 when it is already picked: that causes no script run)."""
    from selenium.webdriver.common.by import By

    if selected(d, label, nth) == option:
        return 0.0

    _box(d, label, nth).find_element(By.CSS_SELECTOR, 'button[aria-label="Open"]').click()
    opt = f'//*[@role="option"][normalize-space(.)="{option}"]'  # the label may hold an apostrophe
    el = wait(d, lambda d: d.find_elements(By.XPATH, opt), f"option {option}")[0]
    return timed(d, el.click)


def selected(d: Any, label: str, nth: int = 0) -> str:
    """The value shown by the ``nth`` selectbox labelled ``label`` (a combobox input)."""
    from selenium.webdriver.common.by import By

    xpath = (
        f"//div[@data-testid='stSelectbox'][.//label[normalize-space(.)='{label}']]//input[@role='combobox']"
    )
    return str(d.find_elements(By.XPATH, xpath)[nth].get_attribute("value"))


def slide(d: Any, steps: int, nth: int = 0) -> float:
    """Move the ``nth`` slider ``steps`` notches (negative: left) with the keyboard, like a
    person; seconds from the key presses until the prediction is drawn."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    # the range input is visually hidden: focus it, then press arrow keys
    slider = d.find_elements(By.CSS_SELECTOR, '[data-testid="stSlider"] input[type="range"]')[nth]
    d.execute_script("arguments[0].focus();", slider)
    keys = ActionChains(d)
    for _ in range(abs(steps)):
        keys.send_keys(Keys.ARROW_LEFT if steps < 0 else Keys.ARROW_RIGHT)
    return timed(d, keys.perform)


def slider_value(d: Any, nth: int = 0) -> str:
    from selenium.webdriver.common.by import By

    return str(
        d.find_elements(By.CSS_SELECTOR, '[data-testid="stSlider"] input[type="range"]')[nth].get_attribute(
            "value"
        )
    )


def plots(d: Any) -> int:
    """Charts on the page (Vega-Lite, each on a canvas)."""
    from selenium.webdriver.common.by import By

    return len(d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]'))


_FIND_COLOR = """
const [r, g, b] = arguments[0];
const all = Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas'));
for (const c of all.slice(arguments[1]).slice(0, 1)) {
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const scale = c.width / c.getBoundingClientRect().width;
  // the middle of the widest horizontal run of the colour, from the bottom up (the legend, on
  // top, has a small swatch of every colour too; a bar's edge may be a pixel wide)
  let best = null;
  for (let y = c.height - 1; y >= 0; y--) {
    let run = 0;
    for (let x = 0; x <= c.width; x++) {
      const i = 4 * (y * c.width + x);
      if (x < c.width && Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 6) {
        run++;
      } else if (run) {
        if (!best || run > best[0]) best = [run, x - run / 2, y];
        run = 0;
      }
    }
  }
  if (best) {
    return [best[1] / scale, best[2] / scale, c.getBoundingClientRect().width,
            c.getBoundingClientRect().height, all.indexOf(c)];
  }
}
return null;
"""


def hover_color(d: Any, rgb: tuple[int, int, int], nth: int = -1) -> str:
    """Point the mouse at the widest mark of colour ``rgb`` on the ``nth`` Vega-Lite canvas
    (the middle of its widest run of pixels); the tooltip's text then."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    found = d.execute_script(_FIND_COLOR, list(rgb), nth)
    if not found:
        raise AssertionError(f"no pixel of colour {rgb} on canvas {nth}")
    x, y, w, h, nth = found
    canvas = d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas')[int(nth)]
    ActionChains(d).move_to_element_with_offset(canvas, int(x - w / 2), int(y - h / 2)).perform()
    tip = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#vg-tooltip-element.visible"), "a tooltip")
    return str(tip[0].get_attribute("textContent"))


def canvas_hash(d: Any, nth: int = -1) -> int:
    """A digest of what the ``nth`` Vega-Lite canvas shows (to see that it was redrawn)."""
    return int(
        d.execute_script(
            """
const all = document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas');
const c = Array.from(all).slice(arguments[0])[0];
const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let h = 0;
for (let i = 0; i < px.length; i += 7) h = (h * 31 + px[i]) | 0;
return h;""",
            nth,
        )
    )


def zoom_canvas(d: Any, clicks: int, nth: int = -1) -> None:
    """Ctrl + mouse wheel over the middle of the ``nth`` Vega-Lite canvas, like a person
    zooming in (``clicks`` > 0) or out."""
    from selenium.webdriver.common.action_chains import ActionChains, ScrollOrigin
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    canvas = d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas')[nth]
    chain = ActionChains(d).move_to_element(canvas).key_down(Keys.CONTROL)
    for _ in range(abs(clicks)):
        chain.scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -120 if clicks > 0 else 120)
    chain.key_up(Keys.CONTROL).perform()


def canvas_ink(d: Any) -> list[int]:
    """Pixels not of the background on each Vega-Lite chart's canvas: what a canvas draws
    is not in the page's DOM, so this is how a test sees that marks were drawn."""
    return [
        int(n)
        for n in d.execute_script(
            """
return Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas')).map(c => {
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 0 && px[i] + px[i + 1] + px[i + 2] < 720) n++;
  return n;
});"""
        )
    ]


def color_scheme(d: Any, scheme: str) -> None:
    """Make the browser prefer a ``"dark"`` or ``"light"`` theme, as a person's system
    setting does (the page follows it at once, without a script run)."""
    feature = {"name": "prefers-color-scheme", "value": scheme}
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [feature]})


def colour_pixels(d: Any, colours: list[str], nth: int = -1) -> list[int]:
    """Pixels of each of ``colours`` (``#RRGGBB``) on the ``nth`` Vega-Lite canvas (a
    channel sum within 6 of it, nearly opaque): what a canvas draws in which colour."""
    rgb = [[int(c[k : k + 2], 16) for k in (1, 3, 5)] for c in colours]
    return [
        int(n)
        for n in d.execute_script(
            """
const all = document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas');
const c = Array.from(all).slice(arguments[1])[0];
const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
const out = arguments[0].map(() => 0);
for (let i = 0; i < px.length; i += 4) {
  if (px[i + 3] < 200) continue;
  arguments[0].forEach(([r, g, b], k) => {
    if (Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 6) out[k]++;
  });
}
return out;""",
            rgb,
            nth,
        )
    ]
