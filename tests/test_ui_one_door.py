"""The UI goes through ``ctda.api`` where the API keeps a rule: the Runs page cannot delete a
run that belongs to a job (the job goes as a whole, as with ``ctda rm``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest

from ctda import api

APP = Path(__file__).resolve().parents[1] / "ctda" / "ui" / "app.py"
JOB = Path(__file__).parent / "data" / "multirank" / "g_ddp_ws2_compute30_r1"
TINY = Path(__file__).parent / "data" / "hta" / "cuda_event_sync_tiny.json.gz"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store holding the shipped two-rank job and one run of its own."""
    db = tmp_path / "store.lbug"
    with api.open_store(db) as s:
        s.ingest_job(JOB, name="job", executor="serial")
        s.ingest(TINY, run="alone")
    monkeypatch.setenv("CTDA_DB", str(db))
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(tmp_path / "uploads"))
    return db


def _delete(name: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.selectbox(key="delete_name").select(name)
    at.checkbox(key="delete_sure").check().run()
    at.button(key="delete").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_runs_page_refuses_to_delete_a_jobs_run(store: Path) -> None:
    with api.open_store(store) as s:
        members = sorted(r.name for r in s.runs() if "job" in r.extra)
    assert members == ["job/r0", "job/r1"]
    at = _delete("job/r1")
    (error,) = [e.value for e in at.error]
    assert "job/r1" in error and "belongs to job 'job'" in error and "\n" not in error
    with api.open_store(store) as s:
        assert sorted(r.name for r in s.runs()) == ["alone", "job/r0", "job/r1"]  # nothing went
        (job,) = s.jobs()
        assert job.name == "job"
    # a run of its own still goes
    at = _delete("alone")
    assert not at.error and any("Deleted run **alone**" in m.value for m in at.success)
    with api.open_store(store) as s:
        assert sorted(r.name for r in s.runs()) == ["job/r0", "job/r1"]
