"""A real ``ctda ui`` server and a real headless Chromium driven by Selenium.

The browser is Debian's ``chromium`` with its matching ``chromium-driver``
(``scripts/install_browser.sh``); nothing is downloaded at run time: the driver path is
given explicitly, so Selenium Manager never runs. Without the browser the tests skip
with the reason, unless ``CTDA_REQUIRE_BROWSER=1`` (CI) turns the skip into a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "ui"
CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver", "chromedriver")
START_TIMEOUT_S = 90


def _find(candidates: tuple[str, ...]) -> str | None:
    for c in candidates:
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.access(path, os.X_OK):
            return path
    return None


def _skip(reason: str) -> None:
    if os.environ.get("CTDA_REQUIRE_BROWSER", "").strip() == "1":
        pytest.fail(f"browser test cannot run: {reason} -- and CTDA_REQUIRE_BROWSER=1", pytrace=False)
    pytest.skip(f"browser test skipped: {reason} (run scripts/install_browser.sh)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def browser_paths() -> tuple[str, str]:
    chromium, driver = _find(CHROMIUM), _find(CHROMEDRIVER)
    if chromium is None:
        _skip("no chromium on PATH or at /usr/bin/chromium")
    if driver is None:
        _skip("no chromedriver on PATH or at /usr/bin/chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        _skip("the selenium package is not installed (pip install selenium)")
    return str(chromium), str(driver)


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory, browser_paths: tuple[str, str]) -> Iterator[str]:
    """``ctda ui`` on a fresh embedded store and a free port; yields its base URL."""
    root = tmp_path_factory.mktemp("ui-e2e")
    port = free_port()
    log = (root / "server.log").open("w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTDA_DB")}
    cmd = [
        sys.executable, "-m", "ctda.cli.app", "ui",
        "--db", str(root / "store.lbug"), "--port", str(port), "--uploads", str(root / "uploads"),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, root / "server.log")
        yield url
    finally:
        # the server runs in its own session: end that group, which is only ours
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ctda ui exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"ctda ui did not answer within {START_TIMEOUT_S}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def driver(browser_paths: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = browser_paths
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
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1440,2000",
    ):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    d.set_page_load_timeout(60)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield d
    finally:
        d.quit()
