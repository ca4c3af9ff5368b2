"""Shared links under Streamlit's AppTest: the run, step, scenario and Compare pair of a
link are what a page opens on, and what the session shows stays in the URL (the step picked
on one page is the next page's); the step a page opens on is the representative one."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest

from tests import test_ui_pages
from tests.test_ui_pages import APP, MINITOY, SIMPLE, TIMEOUT, app, keyed, ok, timelines

# the fixtures of test_ui_pages, the module-scoped two-run store and the app pointed at it:
# found here as this module's own (one store for this module's tests)
store = test_ui_pages.store
env = test_ui_pages.env


# --- shared links ----------------------------------------------------------------------


def test_representative_step() -> None:
    """The median step after the leading outliers; even counts take the lower median."""
    from ctda.ui.share import representative, warmup

    assert warmup([9.3, 0.05]) == 1 and representative([9.3, 0.05]) == 1
    assert warmup([5.0, 1.0, 1.2, 0.9, 1.1]) == 1
    assert representative([5.0, 1.0, 1.2, 0.9, 1.1]) == 1  # 0.9 1.0 1.1 1.2: lower median 1.0
    assert warmup([1.0, 1.2, 0.9]) == 0 and representative([1.0, 1.2, 0.9]) == 0
    assert warmup([3.0]) == 0 and representative([3.0]) == 0
    assert warmup([9.0, 8.0, 1.0, 1.0, 1.0]) == 2  # two warm-up steps at most


def linked(path: str, **query: str) -> AppTest:
    """The app opened from a link: page ``path`` (a views script) with ``query``."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    at.switch_page(f"views/{path}.py").run()
    ok(at)
    return at


def test_a_link_opens_its_run_step_and_scenario(env: Path) -> None:
    """run, step and scenario of a link are what the page shows, and stay in the URL."""
    import ctda

    with ctda.open_store(env) as store:
        store.whatif(MINITOY, scale=["name~hipLaunchKernel=2"], name="slow-launch")
    try:
        shown_by_link(env)
    finally:
        with ctda.open_store(env) as store:
            store.load(MINITOY).run.delete_scenario("slow-launch")  # type: ignore[union-attr]


def shown_by_link(env: Path) -> None:
    at = linked("critical_path", run=SIMPLE, step="1", scenario="slow-launch")
    assert at.sidebar.selectbox(key="run").value == SIMPLE
    at.sidebar.selectbox(key="run").set_value(MINITOY).run()
    ok(at)
    # the step and scenario of the link belong to the run it named: MINITOY opens afresh
    assert keyed(at, "selectbox", "cp_view").value == "baseline"
    assert at.query_params["run"] == MINITOY and "scenario" not in at.query_params
    at = linked("critical_path", run=MINITOY, step="1", scenario="slow-launch")
    assert at.sidebar.selectbox(key="run").value == MINITOY
    assert keyed(at, "selectbox", "cp_view").value == "slow-launch"
    assert keyed(at, "selectbox", "cp_step").value == 0  # ProfilerStep#1, not the median one
    assert timelines(at)[0][0]["title"].startswith("ProfilerStep#1")
    assert at.query_params == {"run": MINITOY, "step": "1", "scenario": "slow-launch"}


def test_ctda_ui_run_is_what_a_session_opens_on_and_a_link_wins(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ctda ui --run`` (here its environment twin) names the run a new session opens on;
    without it the sidebar's first (by name) is; a shared link still opens its own."""
    assert linked("critical_path").sidebar.selectbox(key="run").value == MINITOY
    monkeypatch.setenv("CTDA_UI_RUN", SIMPLE)
    at = linked("critical_path")
    assert at.sidebar.selectbox(key="run").value == SIMPLE and at.query_params["run"] == SIMPLE
    assert linked("critical_path", run=MINITOY).sidebar.selectbox(key="run").value == MINITOY
    monkeypatch.setenv("CTDA_UI_RUN", "no such run")  # gone since the server started
    assert linked("critical_path").sidebar.selectbox(key="run").value == MINITOY


def test_a_link_opens_its_compare_pair(env: Path) -> None:
    """The pair of a link wins over the default pair (the older run first)."""
    at = linked("compare", run=MINITOY, a=SIMPLE, b=MINITOY)
    assert at.selectbox(key="cmp_run_a").value == SIMPLE and at.selectbox(key="cmp_run_b").value == MINITOY
    assert at.query_params["a"] == SIMPLE and at.query_params["b"] == MINITOY
    assert "step" not in at.query_params  # Compare shows no step


def test_changing_the_run_writes_the_url(env: Path) -> None:
    at = app("critical_path")
    assert at.query_params["run"] == MINITOY
    at.sidebar.selectbox(key="run").set_value(SIMPLE).run()
    ok(at)
    assert at.query_params["run"] == SIMPLE


def test_the_step_survives_a_page_switch(env: Path) -> None:
    """A step picked on Critical path is the one Hotspots opens on, and still the one
    Critical path shows on coming back."""
    at = app("critical_path")
    keyed(at, "selectbox", "cp_step").set_value(0).run()
    at.switch_page("views/hotspots.py").run()
    ok(at)
    assert keyed(at, "selectbox", "hs_step").value == 0
    assert at.query_params["step"] == "1"
    at.switch_page("views/runs.py").run()
    at.switch_page("views/critical_path.py").run()
    ok(at)
    assert keyed(at, "selectbox", "cp_step").value == 0
    assert timelines(at)[0][0]["title"].startswith("ProfilerStep#1")
