"""The browser half of the UI bench, on two small real traces, so it cannot rot unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import ui_browser_bench

TRACE = Path(__file__).resolve().parents[1] / "data" / "hta" / "trace_compare_base_tiny.json.gz"

pytestmark = pytest.mark.slow


def test_browser_bench_measures_every_interaction(browser_paths: tuple[str, str], tmp_path: Path) -> None:
    rows = ui_browser_bench.measure(TRACE, 0, quick=True, reps=1, store_dir=tmp_path)
    assert all(r["error"] is None for r in rows), [r["error"] for r in rows if r["error"]]
    assert all(r["via"] == "browser" for r in rows)
    got = {(r["page"], r["interaction"]) for r in rows if r["kind"] == "warm"}
    assert {("critical path", "page switch"), ("what-if", "page switch"), ("hotspots", "page switch")} <= got
    assert ("critical path", "change run (to the big run)") in got
    assert ("what-if", "move a factor (prediction drawn)") in got
    assert {("hotspots", "drill into a name"), ("what-if", "save the scenario")} <= got
    assert ("compare", "compare with the run (Save's button)") in got
    # the floor of a first page load here: Streamlit's own page in a fresh browser
    [bare] = [r for r in rows if r["interaction"].startswith("first page load of a bare Streamlit page")]
    assert bare["kind"] == "cold" and bare["median_s"] > 0
    # the app's first load and each page's first visit are held to 2 s, the rest to 1 s warm
    firsts = [r for r in rows if r["interaction"] in ("first page load", "first visit")]
    assert len(firsts) == 7 and all(r["goal_s"] == 2.0 for r in firsts)
    assert all(r["goal_s"] == 1.0 for r in rows if r["kind"] == "warm")
    for r in rows:
        # real, positive wall-clock figures; the browser cannot answer faster than a frame
        assert r["n"] >= 1 and 0.0 < r["median_s"] <= r["max_s"] < 300
    windows = rows[0]["windows"]
    assert (("critical path", "change step") in got) == (windows > 1)
