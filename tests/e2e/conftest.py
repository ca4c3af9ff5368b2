"""A real ``ctda ui`` server and a real headless Chromium driven by Selenium.

The browser machinery (server process, driver, waiting and timing helpers) lives in
:mod:`bench.browser`, shared with the UI bench. Without the browser the tests skip with
the reason, unless ``CTDA_REQUIRE_BROWSER=1`` (CI) turns the skip into a failure.
Screenshots land in ``test-artifacts/ui/`` (gitignored; ``CTDA_ARTIFACTS`` moves them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CTDA_ARTIFACTS") or REPO / "test-artifacts") / "ui"


def _skip(reason: str) -> None:
    if os.environ.get("CTDA_REQUIRE_BROWSER", "").strip() == "1":
        pytest.fail(f"browser test cannot run: {reason} -- and CTDA_REQUIRE_BROWSER=1", pytrace=False)
    pytest.skip(f"browser test skipped: {reason} (run scripts/install_browser.sh)")


@pytest.fixture(scope="session")
def browser_paths() -> tuple[str, str]:
    try:
        return browser.find_browser()
    except browser.BrowserMissing as exc:
        _skip(str(exc))
        raise AssertionError("unreachable") from None


@pytest.fixture(scope="module")
def ui_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded store the module's server works on (tests may write to it with the CLI)."""
    return tmp_path_factory.mktemp("ui-e2e") / "store.lbug"


@pytest.fixture(scope="module")
def ui_server(ui_store: Path, browser_paths: tuple[str, str]) -> Iterator[str]:
    """``ctda ui`` on a fresh embedded store and a free port; yields its base URL."""
    root = ui_store.parent
    server = browser.Server(ui_store, root / "uploads", root / "server.log")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def driver(browser_paths: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium, chromedriver = browser_paths
    d = browser.new_driver(chromium, chromedriver, tmp_path_factory.mktemp("chromium-profile"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield d
    finally:
        d.quit()
