"""The UI benchmark's driver, run on a small real trace so it cannot rot unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from bench import ui_bench

TRACE = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"


def test_measure_every_page(tmp_path: Path) -> None:
    rows = ui_bench.measure(TRACE, 110, quick=True, reps=1, store_dir=tmp_path)
    pages = {r["page"] for r in rows}
    assert pages == {"runs", "critical path", "hotspots", "what-if", "compare", "console"}
    assert all(r["error"] is None for r in rows), [r for r in rows if r["error"]]
    assert all(r["windows"] == 2 and r["events"] == 110 for r in rows)
    warm = [r for r in rows if r["kind"] == "warm"]
    assert warm and all(r["goal_s"] == ui_bench.GOAL_S for r in warm)
    assert all(r["goal_s"] is None and r["meets_goal"] is None for r in rows if r["kind"] == "cold")


def test_spread_picks_distinct_other_windows() -> None:
    assert ui_bench._spread(1, 5) == []
    assert ui_bench._spread(2, 5) == [1]
    picks = ui_bench._spread(84, 5)
    assert len(picks) == 5 and min(picks) == 1 and max(picks) == 83
