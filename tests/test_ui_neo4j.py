"""``ctda ui`` on a Neo4j store: the same pages, the Neo4j dialect of the named queries."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest

from ctda.analysis.engine import AnalysisOptions
from ctda.store import open_store
from ctda.store.config import resolve
from ctda.store.ingest import ingest
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_ui_pages import runs_shown

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

pytestmark = pytest.mark.neo4j

TRACE = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"
APP = Path(__file__).resolve().parents[1] / "ctda" / "ui" / "app.py"


@pytest.fixture
def neo4j_run(
    neo4j_server: ServerInfo,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[str]:
    """The minitoy trace as a uniquely named run on the session's server; removed afterwards."""
    pytest.importorskip("neo4j")
    monkeypatch.setenv("CTDA_NEO4J_USER", neo4j_server.user)
    monkeypatch.setenv("CTDA_NEO4J_PASSWORD", neo4j_server.password)
    monkeypatch.setenv("CTDA_DB", neo4j_server.uri)
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(tmp_path / "uploads"))
    name = f"ui-{uuid.uuid4().hex[:8]}"
    # force: the same bytes may already be stored under another name by other tests
    ingest(TRACE, resolve(neo4j_server.uri), AnalysisOptions(), name=name, force=True)
    try:
        yield name
    finally:
        with open_store(neo4j_server.uri) as s:
            s.delete_run(name)


def test_pages_on_neo4j(neo4j_run: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.session_state["run"] = neo4j_run
    at.run()
    assert not at.exception
    runs = runs_shown(at).set_index("run")
    assert runs.loc[neo4j_run, "steps"] == 2
    assert "launch_overhead" in runs.loc[neo4j_run, "CP breakdown"]
    for page in ("critical_path", "hotspots", "whatif", "compare", "job"):
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
    at.switch_page("views/console.py").run()
    at.selectbox(key="cq_pick").set_value("hotspots_by_class").run()
    at.button(key="cq_run").click().run()
    assert not at.error and not at.exception
    assert at.dataframe[0].value["class"].iloc[0] == "launch_overhead"
    assert "Neo4j dialect" in " ".join(c.value for c in at.caption)
