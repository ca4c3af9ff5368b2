"""The What-if and Compare pages under Streamlit's AppTest: predictions, groups, scenarios
saved, and the way from a suggested candidate to its check against a measured run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("streamlit")


from tests.test_ui_pages import (
    MINITOY,
    SIMPLE,
    app,
    canvases,
    figures,
    keyed,
    ok,
    point_at,
    timelines,
    two_runs,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_runs(tmp_path_factory)


@pytest.fixture
def env(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return point_at(store, tmp_path, monkeypatch)


def test_whatif_page_predicts_and_exports(env: Path) -> None:
    at = app("whatif")
    assert "move a factor" in at.info[-1].value
    at.selectbox(key="wi_kind_0").set_value("class").run()
    at.selectbox(key="wi_class_0").set_value("launch_overhead").run()
    at.slider(key="wi_f_0").set_value(0.0).run()
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    observed = float(metrics["Mean step (observed)"].split()[0])
    predicted = float(metrics["Mean step (predicted)"].split()[0])
    assert predicted < observed
    assert not figures(at)  # every chart of the page is on a canvas
    by_class = next(table for _, table in canvases(at) if "row" in table.columns)
    ms = by_class.set_index(["row", "side"]).ms
    assert ms["launch_overhead", "predicted"] < ms["launch_overhead", "observed"]
    per_step = next(table for _, table in canvases(at) if "step" in table.columns and "side" in table.columns)
    mean = per_step.groupby("side").ms.mean()
    assert mean["predicted"] < mean["observed"] == pytest.approx(observed, abs=0.001)
    # the predicted path opens on the median step after the warm-up, as Critical path does
    picker = keyed(at, "selectbox", "wi_step")
    assert picker.value == 1 and picker.options[0].endswith("· warm-up")
    [(spec, table)] = timelines(at)
    assert spec["title"].startswith("ProfilerStep#2") and (table.kind == "bar").any()
    picker.set_value(0).run()
    [(spec, table)] = timelines(at)
    assert spec["title"].startswith("ProfilerStep#1") and (table.kind == "link").any()
    # the Perfetto export is prepared on request, then offered for download
    at.button(key="wi_export_prep").click().run()
    ok(at)
    dl = at.get("download_button")
    assert len(dl) == 1 and dl[0].proto.label.startswith("Download predicted timeline")
    # a second group: names by regex, and a bad regex is one warning, not a crash
    at.button(key="wi_add").click().run()
    at.selectbox(key="wi_kind_1").set_value("name (regex)").run()
    at.text_input(key="wi_name_1").input("(").run()
    assert not at.exception and any("'(' is not a valid name pattern" in w.value for w in at.warning)
    at.text_input(key="wi_name_1").input("^aten::").run()
    at.slider(key="wi_f_1").set_value(0.5).run()
    ok(at)
    # later groups win where they overlap: launches nested in aten ops now run at half time
    both = float(at.metric[1].value.split()[0])
    assert predicted < both < observed


def test_whatif_category_and_cypher_groups(env: Path) -> None:
    at = app("whatif")
    at.selectbox(key="wi_kind_0").set_value("category").run()
    assert "cuda_runtime" in at.selectbox(key="wi_cat_0").options
    at.selectbox(key="wi_cat_0").set_value("cuda_runtime").run()
    at.slider(key="wi_f_0").set_value(0.5).run()
    ok(at)
    by_cat = float(at.metric[1].value.split()[0])
    at.selectbox(key="wi_kind_0").set_value("Cypher query").run()
    at.selectbox(key="wi_qpick_0").set_value("critical runtime calls").run()
    at.button(key="wi_qrun_0").click().run()
    ok(at)
    assert any("events" in c.value or "rows" in c.value for c in at.caption)
    cypher = float(at.metric[1].value.split()[0])
    # the critical runtime calls are a subset of cuda_runtime: at most as much saved
    assert by_cat <= cypher < float(at.metric[0].value.split()[0])
    # a query that writes is refused before it reaches the store
    at.text_area(key="wi_qtext_0").input("MATCH (r:Run) DETACH DELETE r").run()
    at.button(key="wi_qrun_0").click().run()
    assert any("read-only" in e.value for e in at.error)


def test_whatif_save_scenario(env: Path) -> None:
    at = app("whatif", run=SIMPLE)
    at.selectbox(key="wi_class_0").set_value("cpu").run()
    at.slider(key="wi_f_0").set_value(0.5).run()
    at.text_input(key="wi_name").input("half-cpu").run()
    at.button(key="wi_save").click().run()
    assert not at.exception
    # a store without scenario support yet says so in one line; otherwise it is saved
    if at.error:
        assert "\n" not in at.error[0].value
        pytest.skip(f"the store cannot save scenarios yet: {at.error[0].value}")
    assert any("Saved scenario **half-cpu**" in s.value for s in at.success)
    # the saved count is right after the click, not one action later
    assert "Saved scenarios of this run (1)" in [e.label for e in at.expander]
    # the same name again is not overwritten silently: it is versioned, or replaced on request
    assert any("Replace the saved scenario" in c.label for c in at.checkbox)
    at.button(key="wi_save").click().run()
    ok(at)
    assert any("Saved scenario **half-cpu (2)**" in s.value for s in at.success)
    assert "Saved scenarios of this run (2)" in [e.label for e in at.expander]
    at.checkbox(key="wi_replace").check().run()
    at.button(key="wi_save").click().run()
    ok(at)
    assert any("Replaced scenario **half-cpu**" in s.value for s in at.success)
    assert "Saved scenarios of this run (2)" in [e.label for e in at.expander]
    assert at.checkbox(key="wi_replace").value is False  # asked again for the next save
    at.switch_page("views/compare.py").run()
    ok(at)
    at.selectbox(key="cmp_run_a").set_value(SIMPLE).run()
    at.selectbox(key="cmp_run_b").set_value(SIMPLE).run()
    assert "scenario half-cpu" in at.selectbox(key="cmp_what_b").options
    at.selectbox(key="cmp_what_b").set_value("scenario half-cpu").run()
    ok(at)
    # a scenario against its own run is a predicted change, not a prediction error
    labels = [m.label for m in at.metric]
    assert "Predicted change b − a" in labels and "Prediction error" not in labels
    # back on the What-if page: the groups and factors are as they were left
    at.switch_page("views/whatif.py").run()
    ok(at)
    assert at.selectbox(key="wi_class_0").value == "cpu"
    assert at.slider(key="wi_f_0").value == 0.5
    assert at.text_input(key="wi_name").value == "half-cpu"
    # listed on the What-if page, and deleted from there
    for name in ("half-cpu (2)", "half-cpu"):
        at.selectbox(key="wi_del_name").set_value(name).run()
        at.button(key="wi_del").click().run()
        ok(at)
        assert any(f"Deleted scenario **{name}**" in x.value for x in at.success)
    assert "Saved scenarios of this run (0)" in [e.label for e in at.expander]


# --- Compare ---------------------------------------------------------------------------


def test_compare_two_runs(env: Path) -> None:
    at = app("compare")
    assert at.selectbox(key="cmp_run_a").value == MINITOY
    assert at.selectbox(key="cmp_run_b").value == SIMPLE
    summary = at.dataframe[0].value
    assert list(summary.metric) == ["windows", "mean step (ms)", "critical path (ms)"]
    # columns carry the run names, the older run is a (before)
    assert summary[f"a: {MINITOY}"].iloc[0] == 2 and summary[f"b: {SIMPLE}"].iloc[0] == 1
    by_class = at.dataframe[1].value
    assert {"class", f"a: {MINITOY} (ms)", f"b: {SIMPLE} (ms)", "b − a (ms)"} <= set(by_class.columns)
    assert by_class[f"a: {MINITOY} (ms)"].sum() == pytest.approx(9.337364, rel=1e-6)
    hot = at.dataframe[2].value
    delta = hot["b − a (ms)"]
    assert list(delta.abs()) == sorted(delta.abs(), reverse=True)
    assert not figures(at)  # no Plotly: the hotspot deltas are on a canvas too
    deltas = next(table for _, table in canvases(at) if "delta_ms" in table.columns)
    assert 0 < len(deltas) <= 20 and (deltas.delta_ms != 0).all()
    assert list(deltas.delta_ms.abs()) == sorted(deltas.delta_ms.abs(), reverse=True)
    assert list(deltas.faster) == list(deltas.delta_ms < 0)
    pairs = next(table for _, table in canvases(at) if "row" in table.columns)
    assert pairs.groupby("side").ms.sum()[f"a: {MINITOY}"] == pytest.approx(9.337364, rel=1e-6)
    assert not any(m.label == "Prediction error" for m in at.metric)


def test_compare_prediction_against_measured(env: Path) -> None:
    at = app("whatif")
    at.selectbox(key="wi_class_0").set_value("launch_overhead").run()
    at.slider(key="wi_f_0").set_value(0.5).run()
    at.switch_page("views/compare.py").run()
    at.selectbox(key="cmp_run_b").set_value(MINITOY).run()
    at.selectbox(key="cmp_what_b").set_value("this session's what-if (unsaved)").run()
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    # against its own run, the scenario's prediction is a change (faster than observed)
    assert metrics["Predicted change b − a"].startswith("-")
    assert float(metrics["Mean step a"].split()[0]) == pytest.approx((9.288291 + 0.049073) / 2, rel=1e-3)
    # against another run it is a prediction of that run: its error is reported as such
    at.selectbox(key="cmp_run_a").set_value(SIMPLE).run()
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    assert "Prediction error" in metrics and "Predicted change b − a" not in metrics
    assert float(metrics["Mean step b (predicted)"].split()[0]) < (9.288291 + 0.049073) / 2
    # step by step, b − a: the prediction's steps against the other run's, in its order
    steps = next(d.value for d in at.dataframe if "b − a (%)" in d.value.columns)
    assert list(steps.step) == ["trace"]  # a's steps: SIMPLE has one window
    a_ms, b_ms = steps[f"a: {SIMPLE} (ms)"], steps[f"b: {MINITOY} / class=launch_overhead=0.5 (ms)"]
    assert steps["b − a (ms)"].iloc[0] == pytest.approx(b_ms.iloc[0] - a_ms.iloc[0])


def flat(node: Any, out: list[tuple[str, Any, str]] | None = None) -> list[tuple[str, Any, str]]:
    """The page's elements in the order drawn: (type, key, value as text)."""
    out = [] if out is None else out
    kids = getattr(node, "children", None)
    if kids:
        for k in sorted(kids):
            flat(kids[k], out)
    else:
        out.append((node.type, getattr(node, "key", None), str(getattr(node, "value", ""))))
    return out


def metric_ms(text: str) -> float:
    return float(text.replace(",", "").split()[0])


def test_guided_whatif_from_a_candidate_to_compare(env: Path) -> None:
    """What-if opens on the ranked candidates; one click sets one up, the factor is typed or
    removed, Save says so beside the button and opens Compare on (run, run@scenario), whose
    card and tables agree on b − a."""
    import ctda
    from ctda import api
    from ctda.ui import guide, widgets

    with ctda.open_store(env) as store:
        a = store.analysis(MINITOY)
    want = api.whatif_candidates(a).head(guide.SHOWN)
    at = app("whatif")
    table = at.dataframe[0].value
    assert list(table.change) == [guide.describe(k, t) for k, t in zip(want.kind, want.target)]
    np.testing.assert_allclose(table["saves ms"], want.saving_ns / 1e6)
    k = list(table.change).index("class cpu 2x faster")
    at.button(key=f"wi_try_{k}").click().run()
    ok(at)
    assert at.selectbox(key="wi_kind_0").value == "class" and at.selectbox(key="wi_class_0").value == "cpu"
    slider, typed = guide.widget_keys(at.session_state, 0)
    assert at.slider(key=slider).value == 0.5 == at.number_input(key=typed).value
    sc = api.retime(a, [api.select_group(a, "class", "cpu", 0.5)], name="x")
    assert metric_ms(at.metric[1].value) == pytest.approx(sc.step_times().predicted_ns.mean() / 1e6, abs=1e-3)
    # a typed factor moves the slider with it (drawn anew, under its next key); "removed"
    # is a factor of 0
    at.number_input(key=typed).set_value(0.25).run()
    slider, typed = guide.widget_keys(at.session_state, 0)
    assert at.slider(key=slider).value == 0.25 == at.number_input(key=typed).value
    assert slider == "wi_f_0~2" and len(at.slider) == 1  # the previous one is gone
    # a typed factor off the slider's notches is shown as typed, on finer notches
    at.number_input(key=typed).set_value(0.333).run()
    slider, typed = guide.widget_keys(at.session_state, 0)
    assert at.slider(key=slider).value == 0.333 == at.number_input(key=typed).value
    assert at.slider(key=slider).step == 0.001
    at.number_input(key=typed).set_value(0.25).run()
    slider, typed = guide.widget_keys(at.session_state, 0)
    assert at.slider(key=slider).value == 0.25 and at.slider(key=slider).step == 0.05
    quarter = metric_ms(at.metric[1].value)
    at.checkbox(key="wi_rm_0").check().run()
    gone = api.retime(a, [api.select_group(a, "class", "cpu", 0.0)], name="x")
    assert metric_ms(at.metric[1].value) == pytest.approx(
        gone.step_times().predicted_ns.mean() / 1e6, abs=1e-3
    )
    assert metric_ms(at.metric[1].value) < quarter
    at.checkbox(key="wi_rm_0").uncheck().run()
    at.text_input(key="wi_name").input("quarter-cpu").run()
    at.button(key="wi_save").click().run()
    ok(at)
    try:
        # the confirmation is right below the button, not at the top of the page
        items = flat(at.main)
        i = [it[:2] for it in items].index(("button", "wi_save"))
        assert items[i + 1][0] == "success" and "Saved scenario **quarter-cpu**" in items[i + 1][2]
        # on to the run ingested after this one (the measured "after"), or to this run's own
        assert [it[:2] for it in items[i + 2 : i + 4]] == [
            ("button", "wi_to_measured"),
            ("button", "wi_to_compare"),
        ]
        assert at.button(key="wi_to_measured").label == f"Compare with {widgets.md(SIMPLE)}"
        at.button(key="wi_to_measured").click().run()
        ok(at)
        assert at.title[0].value == "Compare"
        assert (
            at.selectbox(key="cmp_run_a").value == SIMPLE and at.selectbox(key="cmp_run_b").value == MINITOY
        )
        assert at.selectbox(key="cmp_what_a").value == "baseline (observed)"
        assert at.selectbox(key="cmp_what_b").value == "scenario quarter-cpu"
        heads = [m.value for m in at.markdown if m.value.startswith(("**a** (", "**b** ("))]
        assert heads == ["**a** (measured)", "**b** (predicted)"]
        # one sign everywhere: the error card and every b − a are predicted − measured
        metrics = {m.label: m for m in at.metric}
        error = metrics["Prediction error"]
        summary = at.dataframe[0].value.set_index("metric")
        step_delta = summary.loc["mean step (ms)", "b − a"]
        assert metric_ms(error.delta) == pytest.approx(step_delta, abs=1e-3)
        assert error.value.startswith("+") == (step_delta > 0)
        steps = next(d.value for d in at.dataframe if "b − a (%)" in d.value.columns)
        assert steps["b − a (ms)"].iloc[0] == pytest.approx(
            steps.iloc[0, 2] - steps.iloc[0, 1]
        )  # per step: the prediction (b) minus the measurement (a)
        assert any("predicted − measured" in m.value for m in at.markdown)
        at.switch_page("views/whatif.py").run()
        ok(at)
        at.button(key="wi_to_compare").click().run()
        ok(at)
        assert at.title[0].value == "Compare"
        assert at.selectbox(key="cmp_run_a").value == MINITOY == at.selectbox(key="cmp_run_b").value
        assert at.selectbox(key="cmp_what_a").value == "baseline (observed)"
        assert at.selectbox(key="cmp_what_b").value == "scenario quarter-cpu"
        assert at.query_params["a"] == MINITOY == at.query_params["b"]
        card = next(m for m in at.metric if m.label == "Predicted change b − a")
        summary = at.dataframe[0].value.set_index("metric")
        step_delta = summary.loc["mean step (ms)", "b − a"]
        assert (
            step_delta < 0
            and card.value.startswith("-")
            and metric_ms(card.delta) == pytest.approx(step_delta, abs=1e-3)
        )
        steps = next(d.value for d in at.dataframe if "b − a (%)" in d.value.columns)
        assert steps["b − a (ms)"].mean() == pytest.approx(step_delta, abs=1e-6)
        assert (steps["b − a (ms)"] <= 0).all()
        # by class and hotspot, b − a as well; the explanation names what moved most
        by_class = next(d.value for d in at.dataframe if "class" in d.value.columns).set_index("class")
        assert by_class.loc["cpu", "b − a (ms)"] < 0
        why = next(m.value for m in at.markdown if m.value.startswith("**Where they differ most**"))
        assert "bound by\\: " in why and "cpu " in why
    finally:
        with ctda.open_store(env) as store:
            store.load(MINITOY).run.delete_scenario("quarter-cpu")  # type: ignore[union-attr]


def test_whatif_factor_ignores_a_page_behind_the_server(env: Path) -> None:
    """A browser that moves the slider again before it has the server's answer to the last
    move still reports the typed box it showed then: that box's old value is no edit, and
    the factor stays what the slider says (it once jumped back to the stale value)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    import ctda
    from ctda import api
    from ctda.ui import guide

    at = app("whatif")
    at.selectbox(key="wi_class_0").set_value("launch_overhead").run()
    stale = at.number_input(key="wi_ft_0")  # the typed box as the browser shows it: 1.0
    at.slider(key="wi_f_0").set_value(0.95).run()
    ok(at)
    # the browser's next message: the slider one notch on, the typed box it still shows
    # first (Streamlit calls the changed widgets' callbacks in the message's order)
    slider, typed = guide.widget_keys(at.session_state, 0)
    assert typed != "wi_ft_0"  # the typed box was drawn anew, under its next key
    states = at._tree.get_widget_states()  # private: the only way to send a stale state
    shown = (at.slider(key=slider).id, at.number_input(key=typed).id)
    kept = [w for w in states.widgets if w.id not in shown]
    at.slider(key=slider).set_value(0.9)
    behind = [WidgetState(id=stale.id, double_value=1.0), at.slider(key=slider)._widget_state]
    del states.widgets[:]
    states.widgets.extend([*behind, *kept])
    at._run(states)
    ok(at)
    slider, typed = guide.widget_keys(at.session_state, 0)
    assert at.slider(key=slider).value == 0.9 == at.number_input(key=typed).value
    with ctda.open_store(env) as store:
        a = store.analysis(MINITOY)
    sc = api.retime(a, [api.select_group(a, "class", "launch_overhead", 0.9)], name="x")
    assert metric_ms(at.metric[1].value) == pytest.approx(sc.step_times().predicted_ns.mean() / 1e6, abs=1e-3)


def test_whatif_groups_belong_to_their_run(env: Path) -> None:
    """A run's groups stay with it: another run opens with its own (none here), and the
    first run's come back with it. A pattern that matches nothing says so in plain words."""
    at = app("whatif")
    at.selectbox(key="wi_kind_0").set_value("name (regex)").run()
    at.text_input(key="wi_name_0").input("no_such_event_xyz").run()
    assert not at.exception
    assert [w.value for w in at.warning] == ["No event named like 'no_such_event_xyz' in this run."]
    at.text_input(key="wi_name_0").input("^aten::").run()
    at.slider(key="wi_f_0").set_value(0.5).run()
    ok(at)
    predicted = at.metric[1].value
    at.sidebar.selectbox(key="run").set_value(SIMPLE).run()
    ok(at)
    assert at.selectbox(key="wi_kind_0").value == "class" and at.slider(key="wi_f_0").value == 1.0
    assert "move a factor" in at.info[-1].value
    at.sidebar.selectbox(key="run").set_value(MINITOY).run()
    ok(at)
    assert at.selectbox(key="wi_kind_0").value == "name (regex)"
    assert at.text_input(key="wi_name_0").value == "^aten::" and at.slider(key="wi_f_0").value == 0.5
    assert at.metric[1].value == predicted


# --- Cypher console --------------------------------------------------------------------


def test_a_candidate_replaces_the_groups_left_before(env: Path) -> None:
    """A suggested candidate replaces the page's groups, also those the page kept from the
    last visit (they came back: a named optimisation's scenario carried the old group)."""
    from ctda import api
    from ctda.ui import guide

    at = app("whatif")
    at.selectbox(key="wi_class_0").set_value("launch_overhead").run()
    slider, _ = guide.widget_keys(at.session_state, 0)
    at.slider(key=slider).set_value(0.5).run()
    ok(at)
    at.switch_page("views/runs.py").run()  # the groups are kept while the page is away
    at.switch_page("views/whatif.py").run()
    assert at.selectbox(key="wi_class_0").value == "launch_overhead"
    table = at.dataframe[0].value
    import ctda

    with ctda.open_store(env) as store:
        want = api.whatif_candidates(store.analysis(MINITOY)).head(guide.SHOWN)
    assert list(table.change) == [guide.describe(k, t) for k, t in zip(want.kind, want.target)]
    k = next(i for i, kind in enumerate(want.kind) if kind == "optimisation")
    at.button(key=f"wi_try_{k}").click().run()
    ok(at)
    _, name, overrides, applied = at.session_state["wi_current"]  # what Save would store
    target = str(want.target.iloc[k])
    assert (name, list(overrides), list(applied)) == (target, [], [target])
    # saved, it is compared with its optimisation applied (it was re-applied without it)
    at.button(key="wi_save").click().run()
    ok(at)
    try:
        at.button(key="wi_to_compare").click().run()
        ok(at)
        assert at.selectbox(key="cmp_what_b").value == f"scenario {target}"
        with ctda.open_store(env) as store:
            a = store.analysis(MINITOY)
        want_ms = api.retime(a, [], name="x", apply=[target]).step_times().predicted_ns.mean() / 1e6
        metrics = {m.label: m.value for m in at.metric}
        assert metric_ms(metrics["Mean step b (predicted)"]) == pytest.approx(want_ms, abs=1e-3)
        assert metric_ms(metrics["Mean step a"]) != pytest.approx(want_ms, abs=1e-3)
    finally:
        with ctda.open_store(env) as store:
            store.load(MINITOY).run.delete_scenario(target)  # type: ignore[union-attr]


def test_the_measured_run_of_a_prediction() -> None:
    """Save's "Compare with ..." checks a prediction against the run ingested just after
    its run (the "after" of a pair), else the newest other run; none when alone."""
    from ctda.api import RunInfo
    from ctda.ui import guide

    def run(name: str, at: str, id: int) -> RunInfo:
        return RunInfo(id, name, "complete", "", "", "", {}, "", at, 1, [1], 1, 1, 1)

    runs = [run("c", "2026-01-03", 3), run("a", "2026-01-01", 1), run("b", "2026-01-02", 2)]
    assert [guide.measured_after(runs, n) for n in "abc"] == ["b", "c", "b"]
    assert guide.measured_after(runs[:1], "c") is None and guide.measured_after(runs, "z") is None


def test_save_prepares_what_compare_reads(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What Save computes ahead for Compare is what Compare's sides then read: both sides'
    reports and call paths are cache hits afterwards (the keys agree), not computed again."""
    from ctda import api
    from ctda.ui import data, guide
    from ctda.ui.settings import Settings

    s = Settings(db=str(env))
    info = next(r for r in data.list_runs(s.db) if r.name == SIMPLE)
    loaded = data.load(s, info)
    a = loaded.analysis
    sc = data.scenario(loaded.tag, "cpu-half", "cpu-half", a, [api.select_group(a, "class", "cpu", 0.5)], ())
    guide._prepare_compare(loaded, sc)
    calls: list[str] = []
    monkeypatch.setattr(api, "report", lambda *a, **k: calls.append("report"))
    monkeypatch.setattr(api, "call_paths", lambda *a, **k: calls.append("call_paths"))
    run_side = data.CachedSide(SIMPLE, a, predicted=False, tag=loaded.tag)
    scenario_side = data.CachedSide("x", sc.analysis, predicted=True, tag=data.scenario_tag(loaded, sc))
    for side in (run_side, scenario_side):
        assert side.report is not None and side.call_paths is not None
    assert calls == []
    # a side nothing prepared is computed: the check above can fail
    other = data.CachedSide("y", sc.analysis, predicted=True, tag=loaded.tag + "|other")
    other.call_paths  # noqa: B018
    assert calls == ["call_paths"]
