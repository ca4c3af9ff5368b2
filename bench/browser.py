"""A real ``ctda ui`` server driven by a real headless Chromium (Selenium), shared by the
end-to-end test (``tests/e2e``) and the browser half of the UI bench (``bench.ui_bench``).

The browser is Debian's ``chromium`` with its matching ``chromium-driver``
(``scripts/install_browser.sh``); the driver path is given explicitly, so Selenium
Manager never runs and nothing is downloaded at run time.

Waiting for a page and timing an interaction are in :mod:`bench.browser_timing`, what the
charts' canvases draw in :mod:`bench.browser_canvas`; both are re-exported here, so
``from bench import browser`` reaches all of it.
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
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.browser_canvas import canvas_hash as canvas_hash
from bench.browser_canvas import canvas_ink as canvas_ink
from bench.browser_canvas import color_scheme as color_scheme
from bench.browser_canvas import colour_pixels as colour_pixels
from bench.browser_canvas import hover_color as hover_color
from bench.browser_canvas import plots as plots
from bench.browser_canvas import zoom_canvas as zoom_canvas
from bench.browser_timing import LAST_MARKS as LAST_MARKS
from bench.browser_timing import WAIT_S as WAIT_S
from bench.browser_timing import body as body
from bench.browser_timing import last_server_s as last_server_s
from bench.browser_timing import script_state as script_state
from bench.browser_timing import settled as settled
from bench.browser_timing import timed, wait

CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver", "chromedriver")
START_TIMEOUT_S = 90


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


# --- acting like a person (waiting for the page: bench.browser_timing) ------------------


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
