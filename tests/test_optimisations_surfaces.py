"""Named optimisations where they are used: ``ctda whatif --apply`` (assumptions beside the
answer), stored scenarios that keep them, ``ctda opportunities``' ranking, and the What-if
page, each on the synthetic launch-bound step of ``tests/optimisation_steps.py`` or a real
trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctda
from ctda.analysis.engine import AnalysisOptions, analyze
from ctda.cli.app import _register
from ctda.cli.common import app
from ctda.ingest.reader import read_trace
from ctda.store.config import resolve
from ctda.store.ingest import ingest
from ctda.whatif.opportunities import by_optimisation
from tests.optimisation_steps import LAUNCH_BOUND, US, _a, _step_ns, _trace
from tests.test_ui_pages import DATA as HTA_DATA
from tests.test_ui_pages import MINITOY
from tests.test_ui_pages import app as ui_app
from tests.test_ui_pages import ok as ui_ok

_register()  # the CLI's commands, as the ctda script registers them


# --- CLI, stored scenarios, opportunities -----------------------------------------------------


def test_cli_prints_the_assumptions_beside_the_answer(tmp_path: Path) -> None:
    trace = _trace(tmp_path, LAUNCH_BOUND)
    cli = CliRunner()
    r = cli.invoke(app, ["whatif", str(trace), "--apply", "cuda-graphs", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "Assumptions" in r.output and "graph launch 1.30 µs" in r.output
    r = cli.invoke(app, ["whatif", str(trace), "--apply", "cuda-graphs", "--dry-run", "--format", "json"])
    d = json.loads(r.output)
    assert d["applied"] == ["cuda-graphs"] and len(d["assumptions"]) == 3
    assert d["steps"][0]["predicted_ns"] == _step_ns(analyze(read_trace(trace)), "cuda-graphs")
    # combinable with --scale: k3 at half its time
    r = cli.invoke(
        app,
        [
            "whatif",
            str(trace),
            "--apply",
            "cuda-graphs",
            "--scale",
            "name~^k3$=0.5",
            "--format",
            "json",
            "--dry-run",
        ],
    )
    assert json.loads(r.output)["steps"][0]["predicted_ns"] == d["steps"][0]["predicted_ns"] - 25 * US
    r = cli.invoke(app, ["whatif", str(trace), "--apply", "warp-speed", "--dry-run"])
    assert (
        r.exit_code == 2 and "unknown optimisation 'warp-speed'" in r.output and "Traceback" not in r.output
    )


def test_stored_scenarios_keep_the_optimisations(tmp_path: Path) -> None:
    trace = _trace(tmp_path, LAUNCH_BOUND)
    with ctda.open_store(str(tmp_path / "runs.lbug")) as store:
        store.ingest([str(trace)], run="r")
        sc = store.whatif("r", apply=["cuda-graphs"], name="graphed")
        saved = store.scenarios("r")
        back = store.scenario("r", "graphed")
    rec = next(s for s in saved if s["name"] == "graphed")
    assert rec["apply"] == ["cuda-graphs"] and rec["assumptions"] == sc.assumptions
    assert back.step_times().predicted_ns.tolist() == sc.step_times().predicted_ns.tolist()


def test_opportunities_rank_the_optimisations(tmp_path: Path) -> None:
    a = _a(tmp_path, LAUNCH_BOUND)
    df = by_optimisation(a)
    row = df[df.name == "cuda-graphs"].iloc[0]
    assert row.saving_ns == 200 * US - _step_ns(a, "cuda-graphs")
    assert list(df.saving_ns) == sorted(df.saving_ns, reverse=True)
    r = CliRunner().invoke(
        app, ["opportunities", str(_trace(tmp_path, LAUNCH_BOUND, "o.json")), "--format", "json"]
    )
    rows = json.loads(r.output)
    assert any(x["group"] == "optimisation" and x["name"] == "cuda-graphs" for x in rows)


# --- the What-if page ---------------------------------------------------------------------------


@pytest.fixture
def page_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An embedded store with the page tests' real GPU trace; the app reads it from CTDA_DB."""
    db = tmp_path / "store.lbug"
    ingest(HTA_DATA / f"{MINITOY}.json.gz", resolve(str(db)), AnalysisOptions(), name=MINITOY)
    monkeypatch.setenv("CTDA_DB", str(db))
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(tmp_path / "uploads"))
    return db


def test_whatif_page_applies_a_named_optimisation(page_store: Path) -> None:
    """The page lists the optimisations that apply to the run; picking one predicts with it,
    its assumptions shown, the same answer as the API's."""
    at = ui_app("whatif")
    choices = at.multiselect(key="wi_apply").options
    assert "cuda-graphs" in choices
    # the page opens on the ranking: its optimisation rows are ctda opportunities' rows
    ranked = at.dataframe[0].value
    with ctda.open_store(str(page_store)) as session:
        expected_rows = by_optimisation(session.analysis(MINITOY))
    named = [
        c.removeprefix("named optimisation ") for c in ranked.change if c.startswith("named optimisation ")
    ]
    assert named == [n for n in expected_rows.name if n in named] and named[0] == "cuda-graphs"
    at.multiselect(key="wi_apply").select("cuda-graphs").run()
    ui_ok(at)
    assert any("Assumed: cuda-graphs: graph launch" in c.value for c in at.caption)
    with ctda.open_store(str(page_store)) as session:
        sc = session.whatif(MINITOY, apply=["cuda-graphs"], save=False)
    expected = float(sc.step_times().predicted_ns.mean()) / 1e6
    shown = float(at.metric[1].value.split()[0])
    assert shown == pytest.approx(expected, abs=0.002)
