"""The UI server's warm-up (ctda.ui.warm): a real tiny run through every page's path."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctda import api
from ctda.ui import warm

pytest.importorskip("streamlit")


def test_the_tiny_trace_is_a_run_with_every_kind_of_candidate(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json.gz"
    path.write_bytes(gzip.compress(json.dumps(warm.tiny_trace(4)).encode()))
    a = api.analyze(api.read(path))
    assert [w.label for w in a.windows] == [f"ProfilerStep#{k}" for k in range(4)]
    # each step's path is the step (charges sum to it), and it crosses to the GPU
    s, e = a.window_bounds()
    per = a.charges.groupby("window").ns.sum().to_numpy()
    assert np.array_equal(per, e - s) and (e - s == 190_000).all()
    assert "gpu_compute" in set(api.report(a).by_class["class"])
    # the warm-up scenarios walk each kind the What-if page offers
    kinds = set(api.whatif_candidates(a).kind)
    assert kinds == {"hotspot", "class", "optimisation"}


def test_warm_up_walks_the_pages_paths_without_a_problem() -> None:
    log = io.StringIO()
    took = warm.warm_up(log)
    assert log.getvalue() == "" and 0 < took < 120


def test_a_failed_warm_up_is_reported_and_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OSError("no temporary folder")

    monkeypatch.setattr(warm, "_walk", broken)
    log = io.StringIO()
    warm.warm_up(log)
    assert log.getvalue() == "ctda ui: warm-up skipped (OSError: no temporary folder)\n"


def test_the_server_entry_hands_streamlit_its_command_line() -> None:
    """``python -m ctda.ui.serve`` is Streamlit's CLI after the warm-up (here skipped)."""
    env = {**os.environ, warm.ENV: "0"}
    out = subprocess.run(
        [sys.executable, "-m", "ctda.ui.serve", "version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0 and "Streamlit, version" in out.stdout
    assert "warmed" not in out.stderr


def test_preload_fills_the_pages_caches_with_the_run_they_open_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's first run (by name: the sidebar's default) is loaded into the pages' own
    caches: a page's ``data.load`` then returns that very analysis, and the candidates and
    the representative step's timeline are cached for it too."""
    from ctda.ui import data, settings
    from tests.test_store_suite import SMALL, STEPS

    db = tmp_path / "s.lbug"
    with api.open_store(db) as s:
        s.ingest(STEPS, "b_steps")
        s.ingest(SMALL, "a_small")
    data._load.clear()
    data.whatif_candidates.clear()
    log = io.StringIO()
    assert warm.preload(["--db", str(db)], log) == "a_small"
    assert log.getvalue() == "ctda ui: loading run 'a_small' (796 events)...\n"
    # ``ctda ui --run`` names the run the pages open on: that one is loaded
    other = io.StringIO()
    assert warm.preload(["--db", str(db), "--run", "b_steps"], other) == "b_steps"
    assert other.getvalue().startswith("ctda ui: loading run 'b_steps' (")
    st = settings.from_argv(["--db", str(db)])
    first, _ = data.list_runs(st.db)
    loaded = data.load(st, first)
    calls: list[object] = []
    monkeypatch.setattr(api, "whatif_candidates", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(api, "load_run", lambda *a, **k: calls.append(a))
    assert data.load(st, first) is loaded  # served from the cache: load_run not called
    assert len(data.whatif_candidates(loaded.tag, loaded.analysis)) > 0 and calls == []
    monkeypatch.setattr(data.frames, "hotspots", lambda *a, **k: calls.append(a))
    every = tuple(range(len(loaded.analysis.windows)))  # what Hotspots opens on
    assert len(data.hotspots(loaded.tag, "all", every, loaded.analysis)) > 0 and calls == []
    monkeypatch.setattr(data, "Breakdowns", lambda *a, **k: calls.append(a))
    assert data.breakdowns(loaded.tag, loaded.analysis).device is not None and calls == []
    # a run over the bound is left to its first visit
    monkeypatch.setattr(warm, "PRELOAD_MAX_EVENTS", 100)
    log = io.StringIO()
    assert warm.preload(["--db", str(db)], log) is None
    assert log.getvalue() == "ctda ui: run 'a_small' not preloaded (796 events)\n"
    # nothing stored: nothing to load, nothing said
    assert warm.preload(["--db", str(tmp_path / "none.lbug")], io.StringIO()) is None
