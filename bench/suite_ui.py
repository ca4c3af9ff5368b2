"""The UI suite: page response times of the Streamlit app on a large stored run.

The measurement itself lives in :mod:`bench.ui_bench` (AppTest, no browser); this module
only registers it with ``make bench`` and renders its rows.
"""

from __future__ import annotations

from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register


@register("ui", title="UI: page response times", order=60)
def run_ui(ctx: Context) -> SuiteResult:
    """Median and worst seconds per interaction; goal < 1 s for warm interactions."""
    from bench import ui_bench

    ctx.log("  bench.ui_bench.run(quick) ...")
    rows = ui_bench.run(ctx.quick)
    body = [
        [
            f"`{r.get('trace', '')}`",
            str(r["page"]),
            str(r["interaction"]),
            str(r["kind"]),
            fmt_num(r["median_s"], 3),
            fmt_num(r["max_s"], 3) + mark(r["meets_goal"]),
        ]
        for r in rows
    ]
    table = markdown_table(
        ["trace", "page", "interaction", "kind", "median s", "max s"], body, align="llllrr"
    )
    warm = [r for r in rows if r["kind"] == "warm"]
    met = all(r["meets_goal"] for r in warm) if warm else None
    note = (
        f"Goal < 1 s per warm interaction: **{'met' if met else 'NOT met'}** "
        f"({sum(1 for r in warm if r['meets_goal'])} of {len(warm)})."
        if warm
        else "No stored run large enough for the UI bench (build the synthetic traces first)."
    )
    intro = "Streamlit AppTest reruns (whole script), per page and interaction; cold = first load of a run."
    return SuiteResult(rows=rows, markdown=f"{intro}\n\n{table}\n\n- {note}", notes=[note])
