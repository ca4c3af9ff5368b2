"""Render scenarios, opportunity rankings and comparisons (table or JSON)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctda.analysis.engine import Analysis
from ctda.analysis.report import build
from ctda.render.analyze import HOT_COLS, _table, ms, pct
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


def render_scenario(sc: Scenario, console: Console, fmt: str, top: int) -> None:
    d = scenario_dict(sc, top)
    if fmt == "json":
        console.print_json(json.dumps(d, default=str))
        return
    console.print(
        Text.assemble(
            ("what-if ", "bold"),
            (sc.name, "cyan"),
            f": {d['events_changed']:,} events changed; total {ms(d['base_ns'])} ms -> ",
            (f"{ms(d['predicted_ns'])} ms", "bold green" if d["delta_ns"] < 0 else "bold red"),
            f" ({d['delta_ns'] / max(d['base_ns'], 1):+.1%}, {d['speedup']:.2f}x)",
        )
    )
    steps = pd.DataFrame(d["steps"])
    console.print(
        _table(
            "Per window",
            steps,
            [
                ("window", "window", "str"),
                ("base_ns", "base ms", "ms"),
                ("predicted_ns", "predicted ms", "ms"),
                ("delta_ns", "delta ms", "ms"),
            ],
        )
    )
    console.print(
        _table(
            "Bound by (predicted)",
            pd.DataFrame(d["bound_by"]),
            [("class", "class", "str"), ("cp_ns", "CP ms", "ms"), ("share", "% of CP", "pct")],
        )
    )
    console.print(_table("Top hotspots (predicted)", pd.DataFrame(d["hotspots"]), HOT_COLS))
    if d["moved_onto_path"]:
        console.print(Text("moved onto the path: " + ", ".join(d["moved_onto_path"]), style="yellow"))
    if d["moved_off_path"]:
        console.print(Text("moved off the path: " + ", ".join(d["moved_off_path"]), style="green"))


def render_opportunities(df: pd.DataFrame, a: Analysis, console: Console, fmt: str) -> None:
    if fmt == "json":
        console.print_json(json.dumps(json_ready(df.to_dict(orient="records")), default=str))
        return
    s, e = a.window_bounds()
    console.print(
        Text(f"Opportunities over {len(s)} window(s), {ms(float((e - s).sum()))} ms in all", style="bold")
    )
    console.print(
        _table(
            "Predicted saving",
            df,
            [
                ("group", "by", "str"),
                ("name", "name", "str"),
                ("events", "events", "int"),
                ("saving_2x_ns", "2x faster: ms", "ms"),
                ("saving_2x_share", "%", "pct"),
                ("saving_removed_ns", "removed: ms", "ms"),
                ("saving_removed_share", "%", "pct"),
            ],
        )
    )


def render_comparison(c: Comparison, console: Console, fmt: str, top: int) -> None:
    if fmt == "json":
        console.print_json(json.dumps(c.to_dict(), default=str))
        return
    t = Table(title=f"A = {c.a}   B = {c.b}", title_justify="left", show_edge=False, header_style="bold")
    for h in ("metric", "A", "B", "delta"):
        t.add_column(h, justify="left" if h == "metric" else "right")
    for r in c.summary.to_dict(orient="records"):
        is_ns = str(r["metric"]).endswith("ns")
        f = (lambda v: ms(float(v)) + " ms") if is_ns else (lambda v: f"{v:g}")
        t.add_row(str(r["metric"]).replace(" ns", ""), f(r["a"]), f(r["b"]), f(r["delta"]))
    console.print(t)
    cols = [("a_ns", "A ms", "ms"), ("b_ns", "B ms", "ms"), ("delta_ns", "delta ms", "ms")]
    console.print(_table("Bound by", c.by_class, [("class", "class", "str"), *cols]))
    console.print(
        _table("Hotspots (largest changes)", c.hotspots.head(top), [("name", "name", "str"), *cols])
    )
    console.print(
        _table(
            "Call paths (largest changes)", c.call_paths.head(top), [("call_path", "call path", "str"), *cols]
        )
    )
    if c.prediction_error:
        pe = c.prediction_error
        console.print(
            Text(
                f"prediction: {ms(pe['predicted_mean_step_ns'])} ms per step vs measured "
                f"{ms(pe['measured_mean_step_ns'])} ms "
                f"(error {ms(pe['error_ns'])} ms, {pct(pe['relative_error'])})",
                style="bold",
            )
        )


__all__ = ["np", "render_comparison", "render_opportunities", "render_scenario", "scenario_dict"]
