"""Render scenarios, opportunity rankings and comparisons (table or JSON)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from rich.text import Text

from ctda.analysis.engine import Analysis
from ctda.analysis.report import build
from ctda.render.analyze import CLASS_COLS, HOT_COLS, ms, pct
from ctda.render.output import Block, Bullets, Col, Document, Section, Shown, clip
from ctda.whatif.compare import Comparison, json_ready
from ctda.whatif.scenario import Scenario


def scenario_dict(sc: Scenario, top: int) -> dict[str, Any]:
    st = sc.step_times()
    rep = build(sc.analysis, top=top)
    on, off = sc.moved()
    names = sc.base.table.decoded("name", sc.base.nodes.uid)
    base_total, pred_total = int(st.base_ns.sum()), int(st.predicted_ns.sum())
    return {
        "scenario": sc.name,
        "overrides": [o.to_json() for o in sc.overrides],
        "applied": sc.applied,
        "assumptions": sc.assumptions,
        "events_changed": sc.n_changed,
        "base_ns": base_total,
        "predicted_ns": pred_total,
        "delta_ns": pred_total - base_total,
        "speedup": base_total / pred_total if pred_total else float("inf"),
        "steps": json_ready(st.to_dict(orient="records")),
        "bound_by": json_ready(rep.by_class.to_dict(orient="records")),
        "hotspots": json_ready(rep.hotspots.to_dict(orient="records")),
        "moved_onto_path": sorted({str(x) for x in names[on]})[:top],
        "moved_off_path": sorted({str(x) for x in names[off]})[:top],
    }


def headline(kind: str, name: str, d: dict[str, Any], detail: str = "") -> Text:
    """One line: the scenario, its total before -> after (green when faster) and the change."""
    speedup = f", {d['speedup']:.2f}x" if "speedup" in d else ""
    return Text.assemble(
        (kind, "bold"),
        (clip(name), "cyan"),
        f": {detail}total {ms(d['base_ns'])} ms -> ",
        (f"{ms(d['predicted_ns'])} ms", "bold green" if d["delta_ns"] < 0 else "bold red"),
        f" ({d['delta_ns'] / max(d['base_ns'], 1):+.1%}{speedup})",
    )


def scenario_doc(sc: Scenario, top: int) -> Document:
    """The predicted step times, bound-by classes and hotspots of a scenario."""
    d = scenario_dict(sc, top)
    head = headline("what-if ", sc.name, d, f"{d['events_changed']:,} events changed; ")
    step_cols = [
        Col("window", "window"),
        Col("base_ns", "base ms", "ms"),
        Col("predicted_ns", "predicted ms", "ms"),
        Col("delta_ns", "delta ms", "ms"),
    ]
    blocks: list[Block] = [
        head,
        Section.of("steps", "Per window", pd.DataFrame(d["steps"]), step_cols),
        Section.of("bound_by", "Bound by (predicted)", pd.DataFrame(d["bound_by"]), CLASS_COLS),
        Section.of("hotspots", "Top hotspots (predicted)", pd.DataFrame(d["hotspots"]), HOT_COLS),
    ]
    if d["assumptions"]:
        blocks.insert(1, Bullets("Assumptions (named optimisations)", d["assumptions"]))
    if d["moved_onto_path"]:
        blocks.append(Bullets("Moved onto the path", [clip(x) for x in d["moved_onto_path"]]))
    if d["moved_off_path"]:
        blocks.append(Bullets("Moved off the path", [clip(x) for x in d["moved_off_path"]]))
    return Document(f"What-if {clip(sc.name)}", blocks, data=d, source=sc.name)


OPPORTUNITY_COLS = [
    Col("group", "by"),
    Col("name", "name"),
    Col("events", "events", "int"),
    Col("saving_2x_ns", "2x faster: ms", "ms"),
    Col("saving_2x_share", "2x faster: %", "pct"),
    Col("saving_removed_ns", "removed: ms", "ms"),
    Col("saving_removed_share", "removed: %", "pct"),
]


OPTIMISATION_COLS = [
    Col("name", "optimisation"),
    Col("events", "changed", "int"),
    Col("saving_ns", "saving: ms", "ms"),
    Col("saving_share", "saving: %", "pct"),
    Col("predicted_ns", "predicted ms", "ms"),
]


def opportunities_doc(df: pd.DataFrame, a: Analysis, opts: pd.DataFrame | None = None) -> Document:
    """What each hotspot group would save at 2x faster, or removed; and what each named
    optimisation that applies would save (JSON: its rows follow, ``group`` "optimisation")."""
    s, e = a.window_bounds()
    head = Text(f"Opportunities over {len(s)} window(s), {ms(float((e - s).sum()))} ms in all", style="bold")
    blocks: list[Block] = [head, Section.of("opportunities", "Predicted saving", df, OPPORTUNITY_COLS)]
    rows = json_ready(df.to_dict(orient="records"))
    if opts is not None and len(opts):
        blocks.append(
            Section.of(
                "optimisations", "Named optimisations (ctda whatif --apply NAME)", opts, OPTIMISATION_COLS
            )
        )
        blocks.append(
            Bullets("Their assumptions", [f"{line}" for items in opts.assumptions for line in items])
        )
        rows += json_ready(opts.to_dict(orient="records"))
    return Document("Opportunities", blocks, data=rows)


def comparison_doc(c: Comparison, top: int) -> Document:
    """Two results side by side; the prediction error when one side is a prediction."""
    summary = [
        (
            Shown(r["metric"], str(r["metric"]).replace(" ns", "")),
            *(_metric(r["metric"], r[k]) for k in "ab"),
            _metric(r["metric"], r["delta"]),
        )
        for r in c.summary.to_dict(orient="records")
    ]
    metric_cols = [
        Col("metric", "metric"),
        Col("a", "A", "num"),
        Col("b", "B", "num"),
        Col("delta", "delta", "num"),
    ]
    cols = [Col("a_ns", "A ms", "ms"), Col("b_ns", "B ms", "ms"), Col("delta_ns", "delta ms", "ms")]
    blocks: list[Block] = [
        Text(f"A = {clip(c.a)}   B = {clip(c.b)}", style="bold"),
        Section("summary", "Summary", metric_cols, summary),
        Section.of("bound_by", "Bound by", c.by_class, [Col("class", "class"), *cols]),
        Section.of(
            "hotspots", "Hotspots (largest changes)", c.hotspots.head(top), [Col("name", "name"), *cols]
        ),
        Section.of(
            "call_paths",
            "Call paths (largest changes)",
            c.call_paths.head(top),
            [Col("call_path", "call path"), *cols],
        ),
    ]
    if c.prediction_error:
        blocks.append(Text(prediction_line(c.prediction_error), style="bold"))
    return Document(f"Comparison of {clip(c.a)} and {clip(c.b)}", blocks, data=c.to_dict())


def prediction_line(pe: dict[str, Any]) -> str:
    """The prediction against the measured side: the change it predicts when that side is the
    run it re-times, else its error against that other measurement."""
    pred, meas = ms(pe["predicted_mean_step_ns"]), ms(pe["measured_mean_step_ns"])
    delta, rel = ms(pe["error_ns"]), pct(pe["relative_error"])
    if pe.get("versus") == "base":
        return f"prediction: {pred} ms per step vs {meas} ms measured (predicted change {delta} ms, {rel})"
    return f"prediction: {pred} ms per step vs measured {meas} ms (error {delta} ms, {rel})"


def _metric(metric: object, value: Any) -> Shown:
    text = f"{ms(float(value))} ms" if str(metric).endswith("ns") else f"{value:g}"
    return Shown(value.item() if isinstance(value, np.generic) else value, text)
