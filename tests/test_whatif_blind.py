"""Notes on what a prediction cannot see, on real traces recorded for the accuracy bench."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.ingest.reader import read_trace
from ctda.whatif import blind
from ctda.whatif.scenario import run
from ctda.whatif.select import parse_scale

TRACES = Path(__file__).resolve().parents[1] / "bench" / "traces"
#: 4 DataLoader worker processes feed the training loop; only the main process is traced
LOADER = TRACES / "g_loader_oversub_before.pt.trace.json.gz"
#: a telemetry thread beside the training loop, data loaded in the main process
THREAD = TRACES / "i_telemetry_before.pt.trace.json.gz"


@pytest.fixture(scope="module")
def loader() -> Analysis:
    return analyze(read_trace(LOADER), AnalysisOptions())


def test_changing_the_workers_batches_says_their_load_is_not_modelled(loader: Analysis) -> None:
    (line,) = blind.notes(run(loader, [parse_scale(loader, "class=data_loading=0.3333")]))
    assert "worker processes" in line and "\n" not in line


def test_no_note_where_the_trace_shows_the_change(loader: Analysis) -> None:
    # the training ops of the same trace (some of them inside the loader's iteration, but
    # not its waits): their time is in the trace, nothing to say
    assert blind.notes(run(loader, [parse_scale(loader, "name~^aten::=0.5")])) == []
    # the Python frames around the loop scale what they hold, the waits for batches too
    assert len(blind.notes(run(loader, [parse_scale(loader, "class=cpu=0.5")]))) == 1
    # data loading changed, but in a trace without worker processes
    a = analyze(read_trace(THREAD), AnalysisOptions())
    assert blind.notes(run(a, [parse_scale(a, "class=data_loading=0.5")])) == []


def test_the_cli_prints_the_note_on_stderr_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "CTDA_DB": str(tmp_path / "s.lbug")}
    proc = subprocess.run(
        [sys.executable, "-m", "ctda.cli.app", "whatif", str(LOADER), "--dry-run", "--format", "json",
         "--scale", "class=data_loading=0.3333"],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notes = [s for s in proc.stderr.splitlines() if s.startswith("note: ")]
    assert len(notes) == 1 and "worker processes" in notes[0]
    assert proc.stdout.lstrip().startswith("{")  # the JSON on stdout is untouched


def test_the_whatif_page_shows_the_note_beside_the_prediction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("streamlit")
    from ctda.store.config import resolve
    from ctda.store.ingest import ingest
    from tests.test_ui_pages import app, ok

    db = tmp_path / "s.lbug"
    ingest(LOADER, resolve(str(db)), AnalysisOptions(), name="loader")
    monkeypatch.setenv("CTDA_DB", str(db))
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(tmp_path / "uploads"))
    at = app("whatif", run="loader")
    at.selectbox(key="wi_kind_0").set_value("name (regex)").run()
    at.text_input(key="wi_name_0").input("^aten::").run()
    at.slider(key="wi_f_0").set_value(0.5).run()
    ok(at)
    assert not any("worker processes" in w.value for w in at.warning)
    at.selectbox(key="wi_kind_0").set_value("class").run()
    at.selectbox(key="wi_class_0").set_value("data_loading").run()
    at.slider(key="wi_f_0").set_value(0.3).run()
    ok(at)
    (note,) = [w.value for w in at.warning if "worker processes" in w.value]
    assert note.startswith("Not in this prediction: the batches come from DataLoader worker processes")
