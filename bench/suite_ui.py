"""The UI suite: interaction times of the Streamlit app on a large stored run.

The measurements live in :mod:`bench.ui_bench` (AppTest: the server's script reruns) and
:mod:`bench.ui_browser_bench` (a real Chromium: what a person waits for); this module only
registers them with ``make bench`` and renders their rows.
"""

from __future__ import annotations

from typing import Any

from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register


@register("ui", title="UI: interaction times", order=60)
def run_ui(ctx: Context) -> SuiteResult:
    """Median and worst seconds per interaction; goal < 1 s for warm interactions."""
    ctx.log("  bench.suite_ui.measure_all(quick) ...")
    rows = measure_all(ctx.quick)
    parts = []
    notes = []
    for via, intro in (
        ("browser", "In headless Chromium against a real `ctda ui` server: from the click or key press "
         "until the script run it caused is done and painted, and the page's main thread is through "
         "with the drawing it caused (the end of its last long task; each action starts on a still page)."),
        ("apptest", "Streamlit AppTest reruns (the server's whole script run, no browser)."),
    ):  # fmt: skip
        part = [r for r in rows if r.get("via", "apptest") == via]
        if not part:
            continue
        body = [
            [
                f"`{r.get('trace', '')}`",
                str(r["page"]),
                str(r["interaction"]),
                str(r["kind"]),
                fmt_num(r["median_s"], 3) if r["median_s"] is not None else "-",
                (fmt_num(r["max_s"], 3) + mark(r["meets_goal"]))
                if r["max_s"] is not None
                else str(r["error"]),
            ]
            for r in part
        ]
        table = markdown_table(
            ["trace", "page", "interaction", "kind", "median s", "max s"], body, align="llllrr"
        )
        warm = [r for r in part if r["kind"] == "warm"]
        loads = sorted(
            {float(r["loadavg_1m_at_start"]) for r in part if r.get("loadavg_1m_at_start") is not None}
        )
        first = [r for r in part if r["kind"] == "cold" and r.get("goal_s") is not None]
        if warm:
            note = f"{via}: goal < 1 s per warm interaction {_verdict(warm)}"
            if first:
                note += f"; goal < 2 s per first load (of the app, of each page) {_verdict(first)}"
            note += "; 1-min load average at start: " + ", ".join(f"{x:g}" for x in loads)
        else:
            error = part[0].get("error") if part else None
            note = f"{via}: no warm interaction measured" + (f" ({error})" if error else "")
        notes.append(note)
        parts.append(f"{intro}\n\n{table}\n\n- {note}")
    if not parts:
        parts.append("No stored run large enough for the UI bench (build the synthetic traces first).")
    return SuiteResult(rows=rows, markdown="\n\n".join(parts), notes=notes)


def _verdict(rows: list[dict[str, Any]]) -> str:
    """``**met** (k of n)`` over rows carrying a goal."""
    met = "met" if all(r["meets_goal"] for r in rows) else "NOT met"
    return f"**{met}** ({sum(1 for r in rows if r['meets_goal'])} of {len(rows)})"


def measure_all(quick: bool, browser: bool = True) -> list[dict[str, Any]]:
    """Time every page's interactions; one row per interaction and trace (see the module doc).

    The browser measures the first replica (preferred: many ordinary steps, so changing the
    step means something); AppTest measures up to two (also one with a single huge window
    and a backward thread, the worst case for the timeline). Without Chromium the browser
    rows are left out and a note row says why.
    """
    from bench import ui_bench, ui_browser_bench

    min_events = 100_000 if quick else 1_000_000
    rows: list[dict[str, Any]] = []
    traces = ui_bench.find_traces(min_events, 1 if quick else 2)
    if browser:
        trace, n_events = traces[0]
        rows += ui_browser_bench.measure(trace, n_events, quick, reps=2 if quick else 4)
    for trace, n_events in traces:
        rows += ui_bench.measure(trace, n_events, quick, reps=2 if quick else 5)
    return rows
