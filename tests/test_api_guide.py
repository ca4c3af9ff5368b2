"""What the guided What-if and Compare pages compute through ``ctda.api`` (``api_views``):
the ranked candidates, a group's events with errors in a page's words, two results step by
step, where they differ most; and the charts' colours and theme (``ctda.ui.charts``)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctda import api
from ctda.whatif.opportunities import by_optimisation, rank

MINITOY = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"


@pytest.fixture(scope="module")
def minitoy() -> api.Analysis:
    return api.analyze(MINITOY)


def test_candidates_are_the_opportunities_and_optimisations_best_first(minitoy: api.Analysis) -> None:
    got = api.whatif_candidates(minitoy)
    groups, named = rank(minitoy, 5), by_optimisation(minitoy)
    assert len(got) == len(groups) + len(named)
    assert list(got.saving_ns) == sorted(got.saving_ns, reverse=True)
    # each hotspot or class row is ctda opportunities' 2x row; each optimisation its own row
    by_target = got.set_index(["kind", "target"])
    for r in groups.itertuples():
        row = by_target.loc[("hotspot" if r.group == "name" else "class", r.name)]
        assert (row.saving_ns, row.removed_ns, row.factor) == (r.saving_2x_ns, r.saving_removed_ns, 0.5)
    for r in named.itertuples():
        assert by_target.loc[("optimisation", r.name)].saving_ns == r.saving_ns
    assert "cuda-graphs" in set(got[got.kind == "optimisation"].target)
    # the best one here: cuda-graphs collapses the launch-bound host work
    assert (got.kind.iloc[0], got.target.iloc[0]) == ("optimisation", "cuda-graphs")


def test_step_annotations_are_no_candidate(minitoy: api.Analysis) -> None:
    """``ProfilerStep#*`` is the second hotspot by critical time of this trace, but scaling
    the step annotation is no change to make: neither ``ctda opportunities`` nor the page's
    candidates offer it, and the next hotspot takes its place."""
    hot = [n for n in api.report(minitoy, top=30).hotspots.name if not n.startswith("(")]
    assert hot[1] == "ProfilerStep#*"
    opp = api.opportunities(minitoy, top=10)
    assert set(opp[opp.group == "name"].name) == set(hot[:11]) - {"ProfilerStep#*"}
    got = api.whatif_candidates(minitoy)
    assert set(got[got.kind == "hotspot"].target) == set(hot[:6]) - {"ProfilerStep#*"}
    # the event of a window defined by another annotation is not offered either
    by_opt = api.analyze(MINITOY, windows=r"^Optimizer\.step#SGD\.step$")
    assert [w.label for w in by_opt.windows] == ["Optimizer.step#SGD.step"]
    assert api.report(by_opt).hotspots.name.iloc[0] == "Optimizer.step#SGD.step"
    assert "Optimizer.step#SGD.step" not in set(api.opportunities(by_opt, top=10).name)


def test_a_candidate_group_predicts_what_its_row_says(minitoy: api.Analysis) -> None:
    """A hotspot or class row, set up as a group, saves what the table said it would."""
    got = api.whatif_candidates(minitoy)
    base = int(sum(e - s for s, e in zip(*minitoy.window_bounds())))
    for r in got[got.kind != "optimisation"].head(3).itertuples():
        sc = api.retime(minitoy, [api.select_group(minitoy, r.kind, r.target, r.factor)], name="x")
        total = int(sum(e - s for s, e in zip(*sc.analysis.window_bounds())))
        assert base - total == r.saving_ns, r.target


def test_group_errors_are_in_the_words_of_the_page(minitoy: api.Analysis) -> None:
    cases = {
        ("name", "no_such_event_anywhere"): "No event named like 'no_such_event_anywhere' in this run.",
        ("category", "no_such_category"): "No event in category 'no_such_category' in this run.",
        ("hotspot", "aten::nothing"): "No event named 'aten::nothing' in this run.",
        ("class", "gpu_comm"): "No event bound by 'gpu_comm' in this run.",
    }
    for (kind, value), said in cases.items():
        with pytest.raises(api.SelectionError) as exc:
            api.select_group(minitoy, kind, value, 0.5)
        assert str(exc.value) == said
    with pytest.raises(api.SelectionError, match=r"^'\(' is not a valid name pattern: missing \)"):
        api.select_group(minitoy, "name", "(", 0.5)
    with pytest.raises(api.SelectionError, match=r"^The factor must be a number from 0 to"):
        api.select_group(minitoy, "class", "cpu", -1.0)
    # the label is the command line's spec, so a saved scenario reads the same in both
    o = api.select_group(minitoy, "name", "^aten::", 0.5)
    assert o.label == "name~^aten::=0.5"
    assert np.array_equal(o.events, api.overrides(minitoy, ["name~^aten::=0.5"])[0].events)


def test_step_pairs_and_where_two_results_differ(minitoy: api.Analysis) -> None:
    sc = api.retime(minitoy, [api.select_group(minitoy, "class", "launch_overhead", 0.0)], name="no-launch")
    steps = api.step_pairs(minitoy, sc.analysis)
    stt = sc.step_times()
    assert list(steps.step) == ["ProfilerStep#1", "ProfilerStep#2"]
    assert list(steps.a_ns) == list(stt.base_ns) and list(steps.b_ns) == list(stt.predicted_ns)
    assert list(steps.delta_ns) == list(steps.b_ns - steps.a_ns) and steps.delta_ns.iloc[0] < 0
    # the sides swapped: every delta changes sign (b − a, consistently)
    back = api.step_pairs(sc.analysis, minitoy)
    assert list(back.delta_ns) == list(-steps.delta_ns)
    cmp = api.compare(minitoy, sc)
    notes = api.difference_notes(cmp)
    assert notes[0].startswith("hotspots: ") and notes[1].startswith("bound by: launch_overhead -")
    top = cmp.hotspots.iloc[0]
    assert f"{top['name']} {top.delta_ns / 1e6:+,.3f} ms" in notes[0]


def _lab(hex_color: str) -> np.ndarray:
    """CIE L*a*b* of an sRGB colour (D65)."""
    rgb = np.array([int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ lin / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_class_colours_are_told_apart_on_light_and_dark_pages() -> None:
    from ctda.ui import charts

    c = charts.CLASS_COLORS

    def delta_e(a: str, b: str) -> float:
        return float(np.linalg.norm(_lab(a) - _lab(b)))

    # the pairs people mixed up, apart by a clear margin (ΔE 25 and more)
    for a, b in [("cpu_gap", "gpu_gap"), ("gpu_comm", "communication"), ("gpu_comm", "cross_thread")]:
        assert delta_e(c[a], c[b]) >= 25, (a, b)
    assert delta_e(c["communication"], c["cross_thread"]) >= 25
    assert min(delta_e(c[a], c[b]) for a, b in itertools.combinations(c, 2)) >= 20
    # every class stands out from a dark page as from a light one, and so does the path
    for colour in [*c.values(), charts.PATH_COLOR_DARK]:
        assert delta_e(colour, "#0E1117") >= 40, colour
    assert delta_e(charts.PATH_COLOR, "#FFFFFF") >= 80


def test_long_labels_are_cut_but_stay_distinct() -> None:
    from ctda.ui import charts

    long = "aten::" + "x" * 80
    labels = pd.Series([long + "a", long + "b", "aten::mm"])
    cut = charts.short_labels(labels)
    assert cut.str.len().max() <= charts.LABEL_CHARS + 3 and cut.iloc[2] == "aten::mm"
    assert cut.is_unique and cut.iloc[0].endswith("… #1")
    from ctda.ui import bars

    chart = bars.deltas(pd.DataFrame({"name": labels, "delta_ms": [1.0, -2.0, 0.5]}), "name", "t")
    # the bars' rows are the cut labels; the full name when pointed at
    assert list(chart.data.row) == list(cut) and list(chart.data.name) == list(labels)
    assert chart.spec["layer"][0]["encoding"]["tooltip"][0] == {"field": "name", "title": "name"}


def test_the_straggler_mark_reads_on_every_cell_and_page() -> None:
    """The Job heatmap's straggler outline is not themed by the server (a live theme switch
    reruns nothing): it stands apart from every colour of the lateness scale and from light
    and dark pages."""
    from ctda.ui import jobcharts

    backgrounds = [*jobcharts.LATENESS_COLORS, "#FFFFFF", "#0E1117"]
    apart = [float(np.linalg.norm(_lab(jobcharts.STRAGGLER_COLOR) - _lab(b))) for b in backgrounds]
    assert min(apart) >= 80, apart
