"""End to end: ``ctda ui`` in a real headless Chromium.

Upload two real traces through the page, then use every page as a person would and check
what it shows: the step picker follows the run, Compare puts the older run first, What-if
keeps its groups across pages, the hotspot table follows the "Sort by" box and a row click
drills into that row, a job stored with ``ctda ingest DIR`` shows its stragglers on the Job
page, and the page never asks the internet for anything. A screenshot of
each step lands in ``test-artifacts/ui/`` (gitignored) for people to look at.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import browser
from bench.browser import body, choose, open_page, plots, selected, settled
from tests.conftest import CORPUS, SKIP_CORPUS
from tests.e2e.conftest import ARTIFACTS

DATA = Path(__file__).resolve().parents[1] / "data" / "hta"
TRACE = DATA / "rocm62_mi250_minitoy_train.json.gz"
RUN = "rocm62_mi250_minitoy_train"
SECOND = DATA / "simple_add_param_benchmark.json.gz"
# ingested second, yet first in alphabetical order: Compare must still put it second
RUN2 = "a-later-run"

pytestmark = pytest.mark.slow


def shot(d: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    d.save_screenshot(str(path))
    return path


def wait(d: Any, cond: Callable[[Any], Any], what: str, timeout: float = browser.WAIT_S) -> Any:
    """:func:`bench.browser.wait` with a screenshot when it times out."""
    return browser.wait(
        d, cond, what, timeout, on_timeout=lambda d, w: shot(d, f"FAILED-{w.replace(' ', '_')[:40]}")
    )


def wait_text(d: Any, *texts: str, timeout: float = browser.WAIT_S) -> None:
    wait(d, lambda d: all(t in body(d) for t in texts), f"text {texts!r}", timeout)


def go(d: Any, page: str) -> None:
    open_page(d, page)
    settled(d)


def upload(d: Any, trace: Path, name: str | None) -> None:
    """Ingest ``trace`` through the Runs page's upload form."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    go(d, "Runs")
    field = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "input[type=file]"), "the file input")[0]
    field.send_keys(str(trace))
    settled(d)
    if name:
        box = d.find_element(By.XPATH, "//input[@aria-label='Run name']")
        box.send_keys(name, Keys.ENTER)
        settled(d)
    browser.button(d, "Ingest").click()  # waits for it to be enabled: the upload has arrived
    wait_text(d, f"Stored run {name or RUN}", timeout=180)
    settled(d)


def timeline_title(d: Any) -> str:
    """The title of the page's timeline chart (``ProfilerStep#N: ... ms``)."""
    from selenium.webdriver.common.by import By

    # the bold line above a timeline (its marks are on a canvas)
    found = d.find_elements(By.CSS_SELECTOR, '[data-testid="stMarkdownContainer"] strong')
    titles = [str(t.get_attribute("textContent")) for t in found]
    return next((t for t in titles if " ms" in t and ":" in t), "")


def grid_rows(d: Any, nth: int = 0) -> list[list[str]]:
    """Cell texts of the ``nth`` data grid, header first, in the order it is shown (the grid
    draws on a canvas; its accessible twin lists the rows as displayed)."""
    from selenium.webdriver.common.by import By

    grid = d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')[nth]
    out = []
    for tr in grid.find_elements(By.CSS_SELECTOR, "table tr"):
        cells = tr.find_elements(By.CSS_SELECTOR, "th, td")
        out.append([str(c.get_attribute("textContent")).strip() for c in cells])
    return out


def click_grid(d: Any, x: float, y: float, nth: int = 0) -> Callable[[], None]:
    """A click at (x, y) pixels from the top left of the ``nth`` grid's canvas."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    grid = d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')[nth]
    canvas = grid.find_element(By.CSS_SELECTOR, "canvas")
    w, h = canvas.size["width"], canvas.size["height"]

    def act() -> None:
        ActionChains(d).move_to_element_with_offset(canvas, int(x - w / 2), int(y - h / 2)).click().perform()

    return act


def metric(d: Any, label: str) -> str:
    """The value shown by the metric labelled ``label``."""
    from selenium.webdriver.common.by import By

    box = f"//*[@data-testid='stMetric'][.//*[normalize-space(.)='{label}']]"
    xpath = f"{box}//*[@data-testid='stMetricValue']"
    return str(d.find_element(By.XPATH, xpath).text)


def predicted_mean_ms(cls: str, factor: float) -> float:
    """The mean step time (ms) the API predicts for TRACE with class ``cls`` scaled."""
    from ctda import api

    a = api.analyze(TRACE)
    sc = api.retime(a, [api.select_group(a, "class", cls, factor)], name="check")
    return float(sc.step_times().predicted_ns.mean() / 1e6)


#: how far the "Saved" note is below the Save button (px; negative: above it)
NEAR_SAVE = """
const save = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'Save scenario');
const note = [...document.querySelectorAll('[data-testid="stAlertContentSuccess"]')]
  .find(e => e.textContent.includes('Saved scenario'));
return note.getBoundingClientRect().top - save.getBoundingClientRect().bottom;
"""
#: the page's sideways overflow (px), the width of each chart and of each chart's canvas, and
#: whether any Plotly chart is left (its script takes the browser ~2 s to load)
LAYOUT = """
const box = e => e.getBoundingClientRect();
const main = document.querySelector('[data-testid="stMain"]');
return {
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  main: main ? main.scrollWidth - main.clientWidth : 0,
  charts: [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
    .map(e => Math.round(box(e).width)),
  plots: [...document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas')]
    .map(e => Math.round(box(e).width)),
  plotly: document.querySelectorAll('.js-plotly-plot').length,
};
"""


def fits(d: Any, page: str, width: int) -> None:
    """``page`` at the window's size (``width`` px wide): nothing wider than the page, every
    chart and its canvas a real width, and no Plotly chart."""
    go(d, page)
    last: dict[str, Any] = {}

    def fitted(d: Any) -> bool:
        last.update(d.execute_script(LAYOUT))
        return (
            last["page"] <= 1
            and last["main"] <= 1
            and all(w >= 200 for w in last["charts"])
            and all(w >= 100 for w in last["plots"])
        )

    try:
        wait(d, fitted, f"{page} to fit the window")
    finally:
        shot(d, f"{width}-{page.replace(' ', '-').lower()}")
    assert last["plotly"] == 0, last


def test_ui_in_a_real_browser(ui_server: str, driver: Any) -> None:
    from selenium.webdriver.common.by import By

    d = driver
    d.get(ui_server + "/")
    wait_text(d, "Runs", "holds no runs yet")
    settled(d)
    shot(d, "01-runs-empty")

    # a real trace through the file input; the sidebar then works on the new run
    upload(d, TRACE, None)
    # the runs table (Markdown: no data grid to load on the page a session opens on)
    cells = [c.text for c in d.find_elements(By.CSS_SELECTOR, '[data-testid="stMarkdown"] table td')]
    assert RUN in cells and not d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')
    assert selected(d, "Run") == RUN
    shot(d, "02-runs-ingested")

    go(d, "Critical path")
    wait(d, lambda d: plots(d) >= 3, "three charts")
    # it opens on the representative step: ProfilerStep#1 (9.3 ms against 0.05 ms) is warm-up
    wait(d, lambda d: timeline_title(d).startswith("ProfilerStep#2"), "the median step's timeline")
    assert selected(d, "Step").startswith("ProfilerStep#2") and "step=2" in d.current_url
    choose(d, "Step", next(o for o in browser.options(d, "Step") if o.startswith("ProfilerStep#1")))
    settled(d)
    assert selected(d, "Step").endswith("· warm-up")
    wait(d, lambda d: "step=1" in d.current_url, "the step in the URL")
    wait_text(d, "Windows", "Bound by", "ProfilerStep#1", "the path changing lane")
    # the charts' marks are on canvases: the timeline's lanes and bars were drawn there, and
    # the step's bound-by bars (launch_overhead's among them)
    wait(d, lambda d: browser.canvas_ink(d) and min(browser.canvas_ink(d)) > 2000, "the timeline drawn")
    assert "on its critical path" in body(d)
    from ctda.ui.charts import CLASS_COLORS

    assert browser.colour_pixels(d, [CLASS_COLORS["launch_overhead"]], BOUND_BY)[0] > 100
    # hovering a launch_overhead bar shows its tooltip, in ms
    tip = browser.hover_color(d, (0xF5, 0x85, 0x18), TIMELINE)
    assert "launch_overhead" in tip and "starts (ms)" in tip and "critical pathcritical" in tip, tip
    # Ctrl + wheel zooms the time axis (the canvas is redrawn); a double-click resets it
    from selenium.webdriver.common.action_chains import ActionChains

    whole = browser.canvas_hash(d, TIMELINE)
    browser.zoom_canvas(d, 5, TIMELINE)
    wait(d, lambda d: browser.canvas_hash(d, TIMELINE) != whole, "the timeline to zoom")
    canvas = d.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas')[TIMELINE]
    ActionChains(d).double_click(canvas).perform()
    wait(d, lambda d: browser.canvas_hash(d, TIMELINE) == whole, "the timeline to reset")
    choose(d, "Step", next(o for o in browser.options(d, "Step") if o.startswith("ProfilerStep#2")))
    settled(d)
    assert selected(d, "Step").startswith("ProfilerStep#2")
    assert timeline_title(d).startswith("ProfilerStep#2")
    shot(d, "03-critical-path")

    # a second run: the step picker must show *its* step, not the previous run's
    upload(d, SECOND, RUN2)
    assert selected(d, "Run") == RUN2
    go(d, "Critical path")
    wait(d, lambda d: timeline_title(d).startswith("trace"), "the second run's timeline")
    assert selected(d, "Step").startswith("trace · ")
    shot(d, "04-critical-path-second-run")
    # and back: the first run's first step again, in the box and on the chart alike
    choose(d, "Run", RUN)
    settled(d)
    wait(d, lambda d: timeline_title(d).startswith("ProfilerStep#"), "the first run's timeline")
    # ...on the step last picked for it, in the box and on the chart alike
    label = selected(d, "Step")
    assert label.startswith("ProfilerStep#2") and timeline_title(d).startswith(label.split(" · ")[0] + ":")

    go(d, "Hotspots")
    # the run's step follows it to another page; the table below is over every window
    assert selected(d, "Step").startswith("ProfilerStep#2")
    choose(d, "Step", "all 2 windows")
    settled(d)
    wait_text(d, "Drill down", "instance(s) of", "Its dependency edges", "Why each edge exists")
    rows = wait(d, lambda d: grid_rows(d), "the hotspot grid")
    header = rows[0]
    cp = header.index("CP ms")
    by_box = [float(r[cp]) for r in rows[1:]]
    assert by_box == sorted(by_box, reverse=True) and len(by_box) > 3
    # waits and idle time are marked as such (and drawn grey)
    kind = header.index("kind")
    assert any(r[kind] == "wait" for r in rows[1:]) and any(r[kind] == "event" for r in rows[1:])
    # a header click re-sorts the view...
    click_grid(d, 20 + 75 + 200, 17)()  # the header row, over the name column
    settled(d)
    shot(d, "05-hotspots-header-click")
    # ...and the box, changed afterwards, wins: one source of truth for the order
    choose(d, "Sort by", "count")
    settled(d)
    rows = wait(d, lambda d: grid_rows(d), "the re-sorted grid")
    count = rows[0].index("count")
    counts = [int(float(r[count])) for r in rows[1:]]
    assert counts == sorted(counts, reverse=True), counts
    # a click on a row's marker drills into that row, whatever the order shown
    third = rows[3][rows[0].index("name")]
    click_grid(d, 15, 35 + 2.5 * 35)()
    settled(d)
    wait(d, lambda d: selected(d, "Hotspot") == third, f"the drill-down to follow the click on {third}")
    # waits and idle time are marked as such
    shot(d, "06-hotspots")

    go(d, "What-if")
    wait_text(d, "Select by", "Factor")
    choose(d, "Class", "launch_overhead")
    browser.slide(d, -10)  # 1.00 -> 0.50 in steps of 0.05
    wait(d, lambda d: browser.slider_value(d) == "0.5", "the factor to reach 0.5")
    settled(d)
    # the typed value says the same, and the prediction is the API's for that factor
    typed = d.find_elements(By.CSS_SELECTOR, '[data-testid="stNumberInput"] input')
    assert [t.get_attribute("value") for t in typed] == ["0.5"], [t.get_attribute("value") for t in typed]
    wait_text(d, "Mean step (predicted)")
    assert metric(d, "Mean step (predicted)") == f"{predicted_mean_ms('launch_overhead', 0.5):,.3f} ms"
    wait_text(d, "Mean step (predicted)", "Predicted path of step")
    wait(d, lambda d: plots(d) >= 3, "what-if charts")
    shot(d, "07-whatif")
    predicted = [m.text for m in d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')]

    # Compare opens on the run (a) and this session's what-if of it (b): the change it predicts
    go(d, "Compare")
    wait_text(d, "a (before)", "b (after)", "Predicted change b − a", "Hotspot deltas")
    assert selected(d, "Run", 1) == RUN == selected(d, "Run", 2)  # [0] is the sidebar's
    assert selected(d, "What", 1) == "this session's what-if (unsaved)"
    assert "Prediction error" not in body(d)
    shot(d, "08-compare-whatif")
    # against the other run's baseline, the classes side by side (on a canvas) say which run
    # a bar is, when pointed at (RUN's bars are a few ms beside RUN2's seconds: too thin)
    choose(d, "What", "baseline (observed)", nth=1)
    choose(d, "Run", RUN2, nth=2)
    settled(d)
    wait(d, lambda d: browser.canvas_ink(d), "the bound-by pairs drawn")
    tip = browser.hover_color(d, (0xF5, 0x85, 0x18), 0)
    assert f"b: {RUN2}" in tip and "cpu" in tip, tip
    shot(d, "09-compare-runs")

    # back on What-if: the group, its class and factor, and the prediction are as left
    go(d, "What-if")
    wait_text(d, "Mean step (predicted)")
    assert selected(d, "Class") == "launch_overhead"
    assert browser.slider_value(d) == "0.5"
    assert [m.text for m in d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')] == predicted
    shot(d, "10-whatif-returned")
    # saved: said beside the button, which leads on to Compare on the run and the scenario
    browser.button(d, "Save scenario").click()
    wait_text(d, "Saved scenario class=launch_overhead=0.5")
    gap = d.execute_script(NEAR_SAVE)
    assert 0 < gap < 150, gap  # px below the button, not at the top of the page
    browser.button(d, "Compare with the run").click()
    wait_text(d, "b (after)", "Predicted change b − a")
    assert selected(d, "Run", 1) == RUN == selected(d, "Run", 2)
    assert selected(d, "What", 0) == "baseline (observed)"
    assert selected(d, "What", 1) == "scenario class=launch_overhead=0.5"
    shot(d, "10b-compare-saved")
    # a suggested candidate to its check against the run ingested after this one, in three
    # clicks (Try, Save, Compare with ...): the prediction's error, step by step
    go(d, "What-if")
    wait_text(d, "Where to start")
    tries = wait(
        d,
        lambda d: [b for b in d.find_elements(By.CSS_SELECTOR, "button") if b.text.startswith("Try ")],
        "the suggested candidates",
    )
    tries[0].click()
    settled(d)
    browser.button(d, "Save scenario").click()
    browser.button(d, f"Compare with {RUN2}").click()
    wait_text(
        d, "a (measured)", "b (predicted)", "Prediction error", "Per step (b − a: predicted − measured)"
    )
    assert selected(d, "Run", 1) == RUN2 and selected(d, "Run", 2) == RUN
    assert selected(d, "What", 1).startswith("scenario ")
    shot(d, "10c-compare-measured")
    # at a laptop's 1280 x 800 and a desktop's 1600 x 1000 no page scrolls sideways and no
    # chart is squeezed to nothing
    for size in ((1280, 800), (1600, 1000)):
        d.set_window_size(*size)
        for page in ("Runs", "Critical path", "Hotspots", "Breakdowns", "Job", "What-if", "Compare"):
            fits(d, page, size[0])
    d.set_window_size(1440, 2000)

    go(d, "Cypher console")
    area = wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "textarea"), "the query box")[0]
    area.click()
    area.send_keys("MATCH (r:Run) RETURN r.name AS name, r.steps AS steps")
    from selenium.webdriver.common.keys import Keys

    area.send_keys(Keys.CONTROL, Keys.ENTER)  # commits the text area's value
    settled(d)
    browser.button(d, "Run").click()
    wait_text(d, "2 row(s)", "Download CSV")
    shot(d, "11-console")

    go(d, "Runs")
    shot(d, "12-runs-two")
    # offline: every request the page made went to the server itself (or was inline data)
    outside = browser.external(browser.requests_made(d), ui_server)
    assert not outside, outside

    # a link sent to a colleague: a new session opens the same page, run and step -- here in
    # a browser set to a dark theme: the path is drawn light from the first load on
    browser.color_scheme(d, "dark")
    try:
        from urllib.parse import quote, unquote

        saved = "class=launch_overhead=0.5"  # the scenario saved above
        d.get(f"{ui_server}/critical-path?run={RUN}&step=1&scenario={quote(saved)}")
        wait(d, lambda d: timeline_title(d).startswith("ProfilerStep#1"), "the linked step's timeline")
        # the scenario's view: its steps with their predicted times
        assert selected(d, "Run") == RUN and selected(d, "Step (predicted times)").startswith(
            "ProfilerStep#1"
        )
        assert selected(d, "View") == saved
        url = unquote(d.current_url)
        assert f"run={RUN}" in url and "step=1" in url and f"scenario={saved}" in url
        settled(d)
        shot(d, "13-shared-link-dark")
        assert_path_drawn(d, on="dark", nth=TIMELINE)
        # the theme switched back with no script run: the path follows at once
        browser.color_scheme(d, "light")
        wait(d, lambda d: path_pixels(d, TIMELINE)[1] > 1000, "the path drawn dark on the light page")
        assert_path_drawn(d, on="light", nth=TIMELINE)
    finally:
        browser.color_scheme(d, "light")


def path_pixels(d: Any, nth: int = -1) -> tuple[int, int]:
    """Pixels of the timeline (the ``nth`` canvas) in the path's colour for a dark page and
    for a light one."""
    from ctda.ui import charts

    light, dark = browser.colour_pixels(d, [charts.PATH_COLOR_DARK, charts.PATH_COLOR], nth)
    return light, dark


def assert_path_drawn(d: Any, on: str, nth: int = -1) -> None:
    """The timeline's path (outlines and connectors) is drawn in the colour that shows on
    the page's theme, and hardly any of it in the other (which would not show)."""
    light, dark = path_pixels(d, nth)
    seen, unseen = (light, dark) if on == "dark" else (dark, light)
    assert seen > 1000 and unseen < seen / 10, (on, light, dark)


#: the Critical path page's canvases: the path per step, the step's timeline, its bound-by bars
TIMELINE, BOUND_BY = 1, 2


#: rank 1 sleeps 40 ms before each step's all-reduce: the straggler of every step
JOB = "g_ddp_ws2_sleep40_r1"


@SKIP_CORPUS
def test_job_page_in_a_real_browser(ui_server: str, ui_store: Path, driver: Any) -> None:
    """A job stored with the CLI while the UI is up: its lateness heatmap, the straggler
    of each step, and the job timeline with a band per rank."""
    assert CORPUS is not None
    job = CORPUS / "generated" / "multirank" / JOB
    cmd = [
        sys.executable,
        "-m",
        "ctda.cli.app",
        "ingest",
        str(job),
        "--db",
        str(ui_store),
        "--executor",
        "serial",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    d = driver
    d.get(ui_server + "/")
    settled(d)
    go(d, "Job")
    wait_text(d, "Straggler most often", "r1 (5 of 5)", "Collectives on the path", "Clock offsets")
    wait(d, lambda d: plots(d) >= 2, "the heatmap and the job timeline")
    assert selected(d, "Job") == JOB
    # the heatmap (its cells and marks are checked under AppTest) is drawn: rank 1, ~40 ms
    # late at every step, in the scale's late end; rank 0 in its early end; the stragglers
    # outlined in their own colour
    # (the legend's swatches alone are a few dozen pixels: a cell or an outline is far more)
    from ctda.ui import jobcharts

    ends = ["#B2182B", "#2166AC", jobcharts.STRAGGLER_COLOR]
    wait(d, lambda d: min(browser.colour_pixels(d, ends, 0)) > 500, "the heatmap drawn")
    assert timeline_title(d).startswith("ProfilerStep#2: ")
    # the timeline is on a canvas (its rows are checked under AppTest): drawn, and a path
    # stretch in the CPU class colour says where it is when pointed at
    wait(d, lambda d: browser.canvas_ink(d) and min(browser.canvas_ink(d)) > 2000, "the job timeline drawn")
    tip = browser.hover_color(d, (0x4C, 0x78, 0xA8))
    assert "job path" in tip and "starts (ms)" in tip, tip
    rows = grid_rows(d, 0)
    strag = rows[0].index("straggler")
    assert [r[strag] for r in rows[1:]] == ["r1"] * 5
    shot(d, "13-job")
    choose(d, "Step", next(o for o in browser.options(d, "Step") if o.startswith("ProfilerStep#5")))
    settled(d)
    wait(d, lambda d: timeline_title(d).startswith("ProfilerStep#5: "), "step 5's timeline")
    shot(d, "14-job-step5")
    # with a job drawn (the first test's check saw none yet): it fits a laptop and a desktop
    for size in ((1280, 800), (1600, 1000)):
        d.set_window_size(*size)
        fits(d, "Job", size[0])
    d.set_window_size(1440, 2000)
    # a rank's button opens its own run on the Critical path page
    from selenium.webdriver.common.by import By

    browser.button(d, "r1").click()
    wait(d, lambda d: d.find_elements(By.XPATH, "//h1[normalize-space(.)='Critical path']"), "Critical path")
    wait(d, lambda d: selected(d, "Run") == f"{JOB}/r1", "rank 1's run picked")
    outside = browser.external(browser.requests_made(d), ui_server)
    assert not outside, outside
