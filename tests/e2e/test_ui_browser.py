"""End to end: ``ctda ui`` in a real headless Chromium.

Upload a real trace through the page, then open every page and check what it renders;
a screenshot of each lands in ``test-artifacts/ui/`` (gitignored) for people to look at.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS

TRACE = Path(__file__).resolve().parents[1] / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"
RUN = "rocm62_mi250_minitoy_train"
WAIT_S = 90

pytestmark = pytest.mark.slow


def body(d: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(d.find_element(By.TAG_NAME, "body").text)


def wait(d: Any, cond: Callable[[Any], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``cond`` until truthy; on timeout, fail with a screenshot and the page text."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = cond(d)
            if got:
                return got
        except WebDriverException:
            pass  # the page is re-rendering under us
        time.sleep(0.3)
    shot(d, f"FAILED-{what.replace(' ', '_')[:40]}")
    raise AssertionError(f"timed out waiting for {what}; page text:\n{body(d)[:3000]}")


def wait_text(d: Any, *texts: str, timeout: float = WAIT_S) -> None:
    wait(d, lambda d: all(t in body(d) for t in texts), f"text {texts!r}", timeout)


def settled(d: Any) -> None:
    """Wait until Streamlit has finished the script run the last action started."""
    from selenium.webdriver.common.by import By

    time.sleep(0.5)
    wait(
        d,
        lambda d: not d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'),
        "the run to finish",
    )
    time.sleep(0.3)


def shot(d: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    d.save_screenshot(str(path))
    return path


def click_button(d: Any, label: str) -> None:
    from selenium.webdriver.common.by import By

    xpath = f"//button[normalize-space(.)='{label}']"
    wait(
        d,
        lambda d: d.find_elements(By.XPATH, xpath) and d.find_element(By.XPATH, xpath).is_enabled(),
        f"button {label}",
    )
    d.find_element(By.XPATH, xpath).click()


def go(d: Any, page: str) -> None:
    """Follow the sidebar link to ``page`` (client-side navigation keeps the session)."""
    from selenium.webdriver.common.by import By

    xpath = f"//a[@data-testid='stSidebarNavLink'][.//span[normalize-space(.)='{page}']]"
    wait(d, lambda d: d.find_elements(By.XPATH, xpath), f"nav link {page}")
    d.find_element(By.XPATH, xpath).click()
    wait(d, lambda d: d.find_elements(By.XPATH, f"//h1[normalize-space(.)='{page}']"), f"page {page}")
    settled(d)


def choose(d: Any, label: str, option: str, nth: int = 0) -> None:
    """Pick ``option`` in the ``nth`` selectbox labelled ``label``."""
    from selenium.webdriver.common.by import By

    xpath = f"//div[@data-testid='stSelectbox'][.//label[normalize-space(.)='{label}']]"
    wait(d, lambda d: len(d.find_elements(By.XPATH, xpath)) > nth, f"selectbox {label}")
    box = d.find_elements(By.XPATH, xpath)[nth]
    box.find_element(By.CSS_SELECTOR, 'button[aria-label="Open"]').click()
    opt = f'//*[@role="option"][normalize-space(.)="{option}"]'  # the label may hold an apostrophe
    wait(d, lambda d: d.find_elements(By.XPATH, opt), f"option {option}")
    d.find_element(By.XPATH, opt).click()
    settled(d)


def selected(d: Any, label: str, nth: int = 0) -> str:
    """The value shown by the ``nth`` selectbox labelled ``label`` (a combobox input)."""
    from selenium.webdriver.common.by import By

    xpath = (
        f"//div[@data-testid='stSelectbox'][.//label[normalize-space(.)='{label}']]//input[@role='combobox']"
    )
    return str(d.find_elements(By.XPATH, xpath)[nth].get_attribute("value"))


def plots(d: Any) -> int:
    from selenium.webdriver.common.by import By

    return len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot"))


def test_ui_in_a_real_browser(ui_server: str, driver: Any) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d = driver
    d.get(ui_server + "/")
    wait_text(d, "Runs", "holds no runs yet")
    settled(d)
    shot(d, "01-runs-empty")

    # upload a real trace through the file input, then ingest it
    upload = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "input[type=file]"), "the file input")[0]
    upload.send_keys(str(TRACE))
    settled(d)
    click_button(d, "Ingest")  # waits for it to be enabled: the upload has arrived
    wait_text(d, f"Stored run {RUN}", timeout=120)
    settled(d)
    # the runs table is a canvas grid (no DOM text); the sidebar now works on the new run
    assert d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')
    assert selected(d, "Run") == RUN
    shot(d, "02-runs-ingested")

    go(d, "Critical path")
    wait(d, lambda d: plots(d) >= 3, "three charts")
    wait_text(
        d, "Windows", "Bound by", "launch_overhead", "ProfilerStep#1", "GPU 2 stream 0", "critical path"
    )
    assert "on its critical path" in body(d)
    shot(d, "03-critical-path")

    go(d, "Hotspots")
    wait_text(d, "Drill down", "instance(s) of", "Its dependency edges", "Why each edge exists")
    assert d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')
    shot(d, "04-hotspots")

    go(d, "What-if")
    wait_text(d, "Select by", "Factor")
    # the slider's range input is visually hidden: focus it, then use the keyboard like a person
    slider = d.find_element(By.CSS_SELECTOR, '[data-testid="stSlider"] input[type="range"]')
    d.execute_script("arguments[0].focus();", slider)
    keys = ActionChains(d)
    for _ in range(10):  # 1.00 -> 0.50 in steps of 0.05
        keys.send_keys(Keys.ARROW_LEFT)
    keys.perform()
    wait(d, lambda d: slider.get_attribute("value") == "0.5", "the factor to reach 0.5")
    settled(d)
    wait_text(d, "Mean step (predicted)", "Predicted path of step")
    wait(d, lambda d: plots(d) >= 3, "what-if charts")
    shot(d, "05-whatif")

    go(d, "Compare")
    wait_text(d, "a (before)", "b (after)")
    assert selected(d, "Run", 1) == RUN and selected(d, "Run", 2) == RUN  # [0] is the sidebar's
    choose(d, "What", "this session's what-if (unsaved)", nth=1)
    wait_text(d, "Prediction error", "Hotspot deltas")
    shot(d, "06-compare")

    go(d, "Cypher console")
    area = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "textarea"), "the query box")[0]
    area.click()
    area.send_keys("MATCH (r:Run) RETURN r.name AS name, r.steps AS steps")
    area.send_keys(Keys.CONTROL, Keys.ENTER)  # commits the text area's value
    settled(d)
    click_button(d, "Run")
    wait_text(d, "1 row(s)", "Download CSV")
    shot(d, "07-console")
