"""Every page of ``ctda ui`` under Streamlit's AppTest, on a store loaded with real traces:
each page renders, and the Runs (uploads too), Critical path, Breakdowns, Hotspots and
Console pages show what the store holds. The helpers here drive the app for the other UI
tests too (links and the URL: ``test_ui_links.py``; What-if and Compare:
``test_ui_whatif_compare.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest

from ctda.analysis.engine import AnalysisOptions
from ctda.store import open_store
from ctda.store.config import resolve
from ctda.store.ingest import ingest
from ctda.ui.pages import BUILTIN, Page, registry
from tests.conftest import CORPUS, SKIP_CORPUS

DATA = Path(__file__).parent / "data" / "hta"
APP = Path(__file__).resolve().parents[1] / "ctda" / "ui" / "app.py"
MINITOY = "rocm62_mi250_minitoy_train"
SIMPLE = "simple_add_param_benchmark"
TIMEOUT = 120


def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded store holding the two real traces the acceptance criteria name
    (MINITOY ingested first, then SIMPLE)."""
    db = tmp_path_factory.mktemp("ui-store") / "store.lbug"
    for name in (MINITOY, SIMPLE):
        ingest(DATA / f"{name}.json.gz", resolve(str(db)), AnalysisOptions(), name=name)
    return db


def point_at(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the app (which runs in this process) at ``store``; uploads go to a tmp dir."""
    monkeypatch.setenv("CTDA_DB", str(store))
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(tmp_path / "uploads"))
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_runs(tmp_path_factory)


@pytest.fixture
def env(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return point_at(store, tmp_path, monkeypatch)


def app(page: str | None = None, run: str | None = MINITOY) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if run is not None:
        at.session_state["run"] = run
    at.run()
    if page is not None:
        at.switch_page(f"views/{page}.py").run()
    ok(at)
    return at


def ok(at: AppTest) -> None:
    """No exception on the page, and no error box."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def runs_shown(at: AppTest) -> pd.DataFrame:
    """The Runs page's table (Markdown) as it reads: cells unescaped, numbers as numbers,
    and each run's source file from the list under it."""
    from ctda.ui.views import runs

    [text] = [m.value for m in at.main.markdown if m.value.startswith("| run |")]
    table, files = text.split("\n\nSource files:\n\n")
    lines = table.split("\n")
    cells = [[unescape(c.strip()) for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]
    assert tuple(cells[0]) == runs.SHOWN and set(lines[1]) <= set("|-:")
    df = pd.DataFrame(cells[2:], columns=cells[0])
    for col in ("steps", "events", "mean step (ms)", runs.CP_COLUMN):
        df[col] = pd.to_numeric(df[col].str.replace(",", ""), errors="coerce")
    source = dict(unescape(ln[2:]).split(": `", 1) for ln in files.split("\n"))
    df["source file"] = [source[r].rstrip("`") for r in df.run]
    return df


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def keyed(at: AppTest, kind: str, key: str) -> Any:
    """The ``kind`` widget keyed ``key`` re-keyed by what it shows (``widgets.scoped``)."""
    found = [w for w in getattr(at, kind) if str(w.key).startswith(f"{key}@")]
    assert len(found) == 1, [w.key for w in getattr(at, kind)]
    return found[0]


def figures(at: AppTest) -> list[dict[str, Any]]:
    """Plotly charts on the page: none (every chart is on a canvas; Plotly's script took
    the browser about 2 s to load at a page's first Plotly chart)."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def canvases(at: AppTest) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Each canvas (Vega-Lite) chart on the page: its spec and its table."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    return [
        (json.loads(c.proto.spec), convert_arrow_bytes_to_pandas_df(c.proto.data.data))
        for c in at.get("vega_lite_chart")
    ]


def timelines(at: AppTest) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Each timeline on the page: its title (the bold line above it), spec and table."""
    titles = [m.value.strip("*") for m in at.markdown if m.value.startswith("**") and " ms**" in m.value]
    charts = [(spec, table) for spec, table in canvases(at) if "kind" in table.columns]
    assert len(titles) == len(charts), titles
    return [({**spec, "title": t}, table) for t, (spec, table) in zip(titles, charts)]


# --- every page -------------------------------------------------------------------------


@pytest.mark.parametrize("page", BUILTIN, ids=[p.url for p in BUILTIN])
def test_every_page_renders(env: Path, page: Page) -> None:
    """Each page of the menu, opened on a stored run: its title, no exception, no error."""
    at = app(Path(page.script).stem)
    assert at.title[0].value == page.title
    assert len(at.main.children) > 1  # more than the title


def test_pages_are_the_views() -> None:
    """Every script under views/ is a built-in page of the menu, the registry lists the
    built-ins first, and every page's script exists."""
    views = sorted(p.name for p in (APP.parent / "views").glob("*.py") if p.name != "__init__.py")
    assert sorted(Path(p.script).name for p in BUILTIN) == views
    pages = registry()
    assert pages[: len(BUILTIN)] == BUILTIN
    assert all(p.path.is_file() for p in pages)
    assert len({p.url for p in pages}) == len(pages)


# --- Runs -----------------------------------------------------------------------------


def test_runs_page_lists_runs(env: Path) -> None:
    at = app()
    assert at.title[0].value == "Runs"
    df = runs_shown(at)
    assert list(df.run) == [MINITOY, SIMPLE]
    row = df.set_index("run").loc[MINITOY]
    assert row.steps == 2
    assert row["source file"].endswith(f"{MINITOY}.json.gz")
    assert row["mean step (ms)"] == pytest.approx((9288291 + 49073) / 2 / 1e6, abs=5e-4)
    # per step too, not the sum over the steps beside a mean step
    import ctda

    with ctda.open_store(env) as s:
        info = next(r for r in s.runs() if r.name == MINITOY)
    assert info.steps == 2 and row["mean critical path (ms)"] == pytest.approx(info.cp_ns / 2 / 1e6, abs=5e-4)
    assert "%" in row["CP breakdown"] and "launch_overhead" in row["CP breakdown"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row["ingested at"]), row["ingested at"]
    # the sidebar names the store and offers the runs
    assert str(env) in " ".join(c.value for c in at.sidebar.caption)
    assert at.sidebar.selectbox(key="run").options == [MINITOY, SIMPLE]


def test_upload_ingest_and_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "fresh.lbug"
    uploads = tmp_path / "uploads"
    monkeypatch.setenv("CTDA_DB", str(db))
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(uploads))
    at = app(run=None)
    assert any("holds no runs" in i.value for i in at.main.info)
    trace = DATA / "cuda_event_sync_tiny.json.gz"
    at.file_uploader(key="upload").set_value((trace.name, trace.read_bytes(), "application/gzip"))
    at.run()
    at.text_input(key="upload_name").input("tiny")
    at.button(key="ingest").click().run()
    ok(at)
    assert any("Stored run **tiny**" in s.value for s in at.success)
    assert list(runs_shown(at).run) == ["tiny"]
    assert at.sidebar.selectbox(key="run").value == "tiny"
    kept = list(uploads.iterdir())
    assert len(kept) == 1 and kept[0].name.endswith(trace.name)
    # the same bytes again: a no-op that says so
    at.button(key="ingest").click().run()
    ok(at)
    assert any("Already stored as run **tiny**" in s.value for s in at.info)
    # delete needs the confirmation box
    assert at.button(key="delete").disabled
    at.selectbox(key="delete_name").select("tiny")
    at.checkbox(key="delete_sure").check().run()
    at.button(key="delete").click().run()
    ok(at)
    assert any("Deleted run **tiny**" in s.value for s in at.success)
    with open_store(str(db), read_only=True) as s:
        assert s.runs() == []
    assert list(uploads.iterdir()) == []  # the kept upload went with its run


def test_upload_of_a_bad_file_is_one_line(env: Path, tmp_path: Path) -> None:
    at = app()
    at.file_uploader(key="upload").set_value(("broken.json", b'{"traceEvents": [', "application/json"))
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception
    assert len(at.error) == 1
    msg = at.error[0].value
    assert msg.startswith("broken.json: ") and "\n" not in msg
    assert str(tmp_path) not in msg  # names the upload, not where it was kept
    assert list((tmp_path / "uploads").iterdir()) == []
    assert len(runs_shown(at)) == 2  # nothing was added


def test_upload_limit(env: Path, tmp_path: Path) -> None:
    from ctda.ui import data
    from ctda.ui.settings import Settings

    s = Settings(db=str(env), max_upload_mb=1, uploads=str(tmp_path / "up"))
    with pytest.raises(data.UIError, match="over the upload limit of 1 MB"):
        data.ingest_upload(
            s, "big.json", b"x" * ((1 << 20) + 1), name=None, force=False, step=lambda m, f: None
        )


# --- Critical path ---------------------------------------------------------------------


def test_critical_path_page(env: Path) -> None:
    """The page opens on the representative step: ProfilerStep#1 (9.29 ms against 0.05 ms)
    is warm-up, so the headline and the default step are ProfilerStep#2's."""
    at = app("critical_path")
    assert at.title[0].value == "Critical path"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Windows"] == "1 of 2"
    assert metrics["Mean step"] == "0.049 ms"  # ProfilerStep#2 alone: 49,073 ns
    picker = keyed(at, "selectbox", "cp_step")
    assert picker.value == 1
    assert picker.options[0].endswith("· warm-up") and not picker.options[1].endswith("warm-up")
    assert at.query_params["step"] == "2"
    breakdown = canvases(at)[-1][1]  # the step's bound-by bars, under its timeline
    steps = canvases(at)[0][1]
    assert set(steps[steps.selected].step) == {"ProfilerStep#2"}
    [(spec, table)] = timelines(at)
    assert "bar" in set(table.kind) and "critical" in set(table.path)
    assert spec["title"].startswith("ProfilerStep#2")
    assert breakdown.row.iloc[0] == metrics["Bound by"]
    listing = at.dataframe[0].value
    assert listing.ms.sum() > 0 and {"class", "event", "rule"} <= set(listing.columns)
    # another step redraws the timeline for that window only
    keyed(at, "selectbox", "cp_step").set_value(0).run()
    ok(at)
    [(spec, table)] = timelines(at)
    assert spec["title"].startswith("ProfilerStep#1")
    assert {"bar", "link"} <= set(table.kind) and "critical" in set(table.path)
    # the drawn range is the window, set by the frame row (no time in the spec)
    [(lo, hi)] = table.loc[table.kind == "frame", ["x0", "x1"]].to_numpy().tolist()
    assert "domain" not in spec["layer"][1]["encoding"]["x"]["scale"]
    bars = table[table.kind == "bar"]
    assert bars.x0.min() >= lo and bars.x1.max() <= hi
    links = table[table.kind == "link"]
    assert len(links) >= 1 and links.x0.min() >= lo - 1e-9 and links.x1.max() <= hi + 1e-9
    lanes = set(table.lane.dropna())
    assert any(x.startswith("thread ") for x in lanes) and any(x.startswith("GPU ") for x in lanes)
    assert canvases(at)[-1][1].row.iloc[0] == "launch_overhead"
    assert at.query_params["step"] == "1"


def test_critical_path_caps_drawn_events(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTDA_UI_MAX_EVENTS", "100")
    at = app("critical_path", run=SIMPLE)
    [(_, table)] = timelines(at)
    assert (table.kind == "bar").sum() == 100
    assert any("drew 100 of" in c.value for c in at.caption)


# --- Breakdowns ----------------------------------------------------------------------


def test_breakdowns_page(env: Path) -> None:
    """The same tables as ``ctda breakdown``, drawn and listed for the picked run."""
    from ctda.analysis.breakdowns import Breakdowns
    from ctda.api import analyze

    at = app("breakdowns")
    b = Breakdowns(analyze(DATA / f"{MINITOY}.json.gz"))
    whole = b.temporal[b.temporal.window < 0].iloc[0]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["idle (whole trace)"] == f"{whole.idle_share:.1%}"
    (spec, temporal), (queue_spec, queue) = canvases(at)  # shares per step, then the queue
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [
        "compute",
        "communication",
        "memory",
        "idle",
    ]
    idle = temporal[temporal.part == "idle"]
    assert idle.share.tolist() == pytest.approx(b.temporal.idle_share.tolist())
    assert idle.row.tolist() == spec["layer"][0]["encoding"]["y"]["sort"]
    assert set(queue.series) == {"stream 0"} and queue.value.max() == 1
    assert queue_spec["layer"][0]["mark"]["interpolate"] == "step-after"  # a length holds till the next
    idle, launches, classes, kernels = (d.value for d in at.dataframe)  # no communication here
    assert launches.launches.tolist() == b.table("launches").launches.tolist()
    assert idle.on_path_ms.sum() == pytest.approx(b.idle.cp_ns.sum() / 1e6)
    assert classes["class"].tolist() == ["compute", "communication", "memory"]
    assert kernels.total_ms.sum() == pytest.approx(b.kernels.total_ns.sum() / 1e6)


@SKIP_CORPUS
def test_breakdowns_page_draws_the_allocator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace recorded with profile_memory: the allocator table and each device's curve."""
    assert CORPUS is not None
    trace = CORPUS / "tracelens" / "h100_bert_small_inference.json.gz"
    db = tmp_path / "store.lbug"
    ingest(trace, resolve(str(db)), AnalysisOptions(), name="bert")
    monkeypatch.setenv("CTDA_DB", str(db))
    at = app("breakdowns", run="bert")
    memory = at.dataframe[-1].value
    whole = memory[memory.label == "(trace)"].set_index("device")
    assert whole.loc[0, "peak_mb"] == pytest.approx(101.305344)  # Total Allocated's peak in the trace
    curves = canvases(at)[-1][1].groupby("series").value.max()
    assert curves["device 0"] == pytest.approx(101.305344) and "host" in curves.index


# --- Hotspots --------------------------------------------------------------------------


def test_hotspots_page_sort_and_drill_down(env: Path) -> None:
    at = app("hotspots")
    table = at.dataframe[0].value
    assert {"name", "category", "cp_ms", "cp_share", "total_share", "count", "min_slack_ms"} <= set(
        table.columns
    )
    assert table.name.iloc[0] == "hipLaunchKernel"
    assert list(table.cp_ms) == sorted(table.cp_ms, reverse=True)
    at.selectbox(key="hs_sort").set_value("count").run()
    ok(at)
    counts = list(at.dataframe[0].value["count"])
    assert counts == sorted(counts, reverse=True)
    # drill into a hotspot: its instances, one instance's edges, and why they exist
    keyed(at, "selectbox", "hs_pick").set_value("hipLaunchKernel").run()
    ok(at)
    instances = at.dataframe[1].value
    assert len(instances) == 12 and instances.cp_ms.iloc[0] > 6
    edges = next(d.value for d in at.dataframe if "why" in d.value.columns)
    assert {"direction", "type", "rule", "binding", "on_cp"} <= set(edges.columns)
    assert edges.on_cp.any()
    assert all(isinstance(w, str) and w and not w.startswith("(no documentation") for w in edges.why)
    assert any(e.label.startswith("rule `") for e in at.expander)
    rules = {e.label for e in at.expander}
    assert "rule `launch`" in rules or "rule `duration`" in rules


def test_hotspots_wait_rows_and_steps(env: Path) -> None:
    at = app("hotspots")
    keyed(at, "selectbox", "hs_step").set_value(0).run()
    at.number_input(key="hs_top").set_value(5000).run()
    ok(at)
    table = at.dataframe[0].value
    assert table.cp_ms.sum() == pytest.approx(9.288291, rel=1e-6)  # ProfilerStep#1 only
    wait = next(n for n in table.name if n.startswith("("))
    keyed(at, "selectbox", "hs_pick").set_value(wait).run()
    ok(at)
    waits = at.dataframe[1].value
    assert {"edge", "rule", "waiting", "why"} <= set(waits.columns) and len(waits) > 0


# --- Console ----------------------------------------------------------------------------


def test_console_named_query_and_csv(env: Path) -> None:
    at = app("console")
    at.selectbox(key="cq_pick").set_value("steps").run()
    assert at.text_input(key="cq_steps_run").value == MINITOY  # the current run by default
    at.button(key="cq_run").click().run()
    ok(at)
    df = at.dataframe[0].value
    assert list(df.window) == ["ProfilerStep#1", "ProfilerStep#2"]
    dl = at.get("download_button")
    assert len(dl) == 1 and dl[0].proto.label == "Download CSV"


def test_console_typed_query_is_read_only(env: Path) -> None:
    at = app("console")
    at.text_area(key="cq_text").input(
        "MATCH (r:Run) WHERE r.name = $run RETURN r.name AS name, r.steps AS steps"
    ).run()
    at.button(key="cq_run").click().run()
    ok(at)
    assert at.dataframe[0].value.to_dict("records") == [{"name": MINITOY, "steps": 2}]
    at.text_area(key="cq_text").input("MATCH (r:Run) DETACH DELETE r").run()
    at.button(key="cq_run").click().run()
    assert any("read-only" in e.value for e in at.error)
    with open_store(str(env), read_only=True) as s:
        assert len(s.runs()) == 2
    at.text_area(key="cq_text").input("MATCH (r:Nope) RETURN r").run()
    at.button(key="cq_run").click().run()
    assert not at.exception and len(at.error) == 1 and "\n" not in at.error[0].value


def test_names_are_escaped_for_markdown() -> None:
    """An event, run or scenario name is shown as written: ``__next__`` is not bold."""
    from ctda.ui.widgets import md

    assert md("__next__") == r"\_\_next\_\_"
    assert md("aten::mm [*] $x") == r"aten\:\:mm \[\*\] \$x"
    assert md("ProfilerStep#1 · 2.5 ms") == r"ProfilerStep\#1 · 2.5 ms"
