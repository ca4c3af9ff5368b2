"""The shared tables: one answer for every surface (report, UI frames, store rows, stored report)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctda.analysis import report, tables
from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.analysis.rules.context import RuleOptions
from ctda.ingest.reader import read_trace
from ctda.store import model

DATA = Path(__file__).parent / "data" / "hta"
MINITOY = DATA / "rocm62_mi250_minitoy_train.json.gz"
#: ProfilerStep#1 and the optimizer step nested inside it
NESTED = r"^ProfilerStep#1$|^Optimizer\.step"


def i64(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def test_window_of_takes_the_innermost_window() -> None:
    starts, ends = i64(0, 10), i64(100, 20)
    ts = i64(50, 15, 10, 5, 20, 100, -1)
    assert tables.window_of(starts, ends, ts).tolist() == [0, 1, 1, 0, 0, -1, -1]
    # equally long windows: the first; windows given out of start order keep their index
    assert tables.window_of(i64(0, 0), i64(10, 10), i64(5)).tolist() == [0]
    assert tables.window_of(i64(10, 0), i64(20, 100), i64(15, 50)).tolist() == [0, 1]
    # disjoint windows (the fast path) agree with the general rule
    assert tables.window_of(i64(0, 10, 30), i64(10, 20, 40), i64(0, 9, 10, 25, 39, 40)).tolist() == [
        0,
        0,
        1,
        -1,
        2,
        -1,
    ]
    assert tables.window_of(i64(), i64(), ts).tolist() == [-1] * len(ts)


@pytest.fixture(scope="module")
def nested() -> Analysis:
    return analyze(read_trace(MINITOY), AnalysisOptions(windows=NESTED))


def test_overlapping_windows_give_one_answer_everywhere(nested: Analysis, tmp_path: Path) -> None:
    from ctda.store import open_store
    from ctda.store import report as store_report
    from ctda.store.config import resolve
    from ctda.store.ingest import ingest
    from ctda.ui import frames

    a = nested
    assert [w.label for w in a.windows] == ["ProfilerStep#1", "Optimizer.step#SGD.step"]
    starts, ends = a.window_bounds()
    assert starts[0] < starts[1] and ends[1] < ends[0]  # the optimizer step is inside the step
    ts = tables.event_starts(a)
    inner = (ts >= starts[1]) & (ts < ends[1])
    outer = (ts >= starts[0]) & (ts < ends[0])
    want = np.where(inner, 1, np.where(outer, 0, -1))
    assert inner.sum() > 0 and (outer & ~inner).sum() > 0

    # the UI's frames
    wins = frames.Windows(a)
    assert wins.of_event.tolist() == want.tolist()
    names = frames.Names(a)
    inst = frames.instances(a, names, wins, "Optimizer.step#SGD.step", [0, 1])
    assert list(inst.window) == ["Optimizer.step#SGD.step"]

    # the store's rows: each event's window, and window self times that add up
    data = model.build(a, "nested", str(MINITOY), "0" * 64)
    stored = data.events.column("window").to_numpy(zero_copy_only=False)[: a.nodes.n]
    assert np.nan_to_num(stored.astype(float), nan=-1).astype(np.int64).tolist() == want.tolist()
    self_ns = report.self_time(a)
    assert data.windows.column("self_ns").to_pylist() == [int(self_ns[want == k].sum()) for k in (0, 1)]

    # the report: step 1 counts the events of ProfilerStep#1 outside the optimizer step
    rep = report.build(a, step="1", top=10**6)
    assert int(rep.hotspots["count"].sum()) == int((want == 0).sum())
    assert int(rep.hotspots.total_ns.sum()) == int(self_ns[want == 0].sum())
    whole = report.build(a, top=10**6)
    assert int(whole.hotspots["count"].sum()) == int((want >= 0).sum())

    # the stored run's report says the same
    db = resolve(str(tmp_path / "store.lbug"))
    ingest(MINITOY, db, AnalysisOptions(windows=NESTED), name="nested")
    with open_store(db, read_only=True) as s:
        got = store_report.build(s, "nested", step="1", top=10**6)
    assert int(got.hotspots["count"].sum()) == int(rep.hotspots["count"].sum())
    assert int(got.hotspots.total_ns.sum()) == int(rep.hotspots.total_ns.sum())


def test_steps_table_is_the_same_for_report_ui_and_store(nested: Analysis) -> None:
    from ctda.ui import frames

    a = nested
    w = tables.window_table(a)
    rep = report.build(a)
    assert rep.steps.to_dict("list") == w[report.STEP_COLUMNS].to_dict("list")
    ui = frames.steps(a)
    assert list(ui.bound_by) == list(w.bound_by)
    assert np.allclose(ui.cp_ms * 1e6, w.cp_ns)
    stored = model.build(a, "nested", str(MINITOY), "0" * 64).windows
    assert stored.column("bound_by").to_pylist() == list(w.bound_by)
    assert stored.column("cp_ns").to_pylist() == list(w.cp_ns)
    # the class that bounds a window has the largest share of its path
    for i, row in w.iterrows():
        by = tables.by_class(a.charges[a.charges.window == i])
        assert row.bound_by == by["class"].iloc[0] and row.bound_by_share == pytest.approx(by.share.iloc[0])


def test_ties_go_to_the_first_class() -> None:
    import pandas as pd

    from ctda.analysis.classify import CLASSES

    ch = pd.DataFrame({"cls": [3, 1, 2], "ns": [5, 5, 1]})
    assert tables.by_class(ch)["class"].tolist() == [CLASSES[1], CLASSES[3], CLASSES[2]]


def test_options_round_trip() -> None:
    o = AnalysisOptions(windows="trace", cross_thread=("gil",), mode="ctda", rule_options=RuleOptions())
    d = tables.options_dict(o)
    assert AnalysisOptions.from_dict(d) == o
    assert tables.options_key(AnalysisOptions.from_dict(d)) == tables.options_key(o)
    assert AnalysisOptions.from_dict({}) == AnalysisOptions()
    want = {"windows": "trace", "cross_thread": ["gil"], "mode": "ctda", "step": "3"}
    assert tables.report_options(d, "3") == want


def test_names_fold_steps_and_addresses() -> None:
    assert tables.fold_name("ProfilerStep#12") == "ProfilerStep#*"
    assert tables.fold_name("<built-in method foo of Bar object at 0x7f00ab>") == (
        "<built-in method foo of Bar object>"
    )
    assert tables.fold_name("aten::mm") == "aten::mm"


def test_rule_docs_cover_both_modes(nested: Analysis) -> None:
    hta = analyze(nested.table, AnalysisOptions(mode="hta"))
    docs = tables.rule_docs()
    for a in (nested, hta):
        assert set(a.graph.rule_names) <= set(docs), set(a.graph.rule_names) - set(docs)
