"""What-if suite: time of one scenario re-propagation on an analysed (and on a stored) run.

A scenario (:func:`ctda.whatif.scenario.run`) turns overrides into per-event factors,
re-weighs the calibrated graph, replays it (forward pass, path, slack) and recomputes every
window's critical path. That is what ``ctda whatif`` and ``ctda opportunities`` pay per
question once a run is loaded, so it is timed alone: selections are parsed beforehand.

Two runs are measured per trace, in the analyze suite's child process
(:mod:`bench.suite_analyze`), after one untimed warm-up scenario:

- *in memory*: the Analysis ``ctda analyze`` just built (with the GIL-contention model);
- *loaded*: the same run after a round trip through the store's columnar snapshot
  (:mod:`ctda.analysis.snapshot`, what ``ctda whatif RUN`` works on).
"""

from __future__ import annotations

from typing import Any

from bench.suite_analyze import child_row
from bench.suites import Context, SuiteResult, family_sections, fmt_num, mark, markdown_table, register
from bench.synth import targets
from bench.whatif_timing import LOADED_MAX_EVENTS, REPEAT, SCENARIOS, measure_whatif

__all__ = ["SCENARIOS", "measure_whatif"]

GOAL_MS_1E6 = 100.0


def _row(r: dict[str, Any]) -> dict[str, Any]:
    """A what-if row from an analyze-suite child report."""
    base = {
        k: r.get(k) for k in ("family", "trace", "file", "size_class", "events", "analysed_events", "edges")
    }
    if "error" in r:
        return {**base, "error": r["error"]}
    w = r.get("whatif") or {}
    mem, loaded = w.get("in_memory", {}), w.get("loaded", {})
    return {
        **base,
        "n_scenarios": mem.get("n_scenarios", 0),
        "loaded_median_ms": loaded.get("median_ms"),
        "loaded_median_cpu_ms": loaded.get("median_cpu_ms"),
        "loaded_max_ms": loaded.get("max_ms"),
        "memory_median_ms": mem.get("median_ms"),
        "memory_median_cpu_ms": mem.get("median_cpu_ms"),
        "memory_max_ms": mem.get("max_ms"),
        "snapshot_load_s": w.get("snapshot_load_s"),
        "snapshot_mb": w.get("snapshot_mb"),
        "per_scenario_ms": loaded.get("per_scenario_ms"),
        "per_scenario_ms_in_memory": mem.get("per_scenario_ms"),
        "per_scenario_cpu_ms_in_memory": mem.get("per_scenario_cpu_ms"),
        "predicted_change": mem.get("predicted_change"),
    }


def _worst(r: dict[str, Any], kind: str) -> float | None:
    """The larger of the loaded and in-memory medians (``kind``: "ms" or "cpu_ms")."""
    values = [r.get(f"{run}_median_{kind}") for run in ("loaded", "memory")]
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _goal_ok(r: dict[str, Any], kind: str = "ms") -> bool | None:
    """Within goal at ~1e6 events (the goal is stated there; other sizes are unmarked)."""
    worst = _worst(r, kind)
    if r.get("size_class") != 1_000_000 or worst is None:
        return None
    return bool(worst <= GOAL_MS_1E6)


def _table(rows: list[dict[str, Any]]) -> str:
    header = [
        "trace",
        "events",
        "analysed",
        "edges",
        "scenarios",
        "loaded: median ms",
        "loaded: median CPU ms",
        "in memory: median ms",
        "in memory: median CPU ms",
        "max ms",
        "snapshot load s",
    ]
    body = []
    for r in rows:
        if "error" in r:
            body.append([f"`{r['trace']}`", *[""] * 9, f"**{r['error']}**"])
            continue
        wall, cpu = mark(_goal_ok(r, "ms")), mark(_goal_ok(r, "cpu_ms"))
        body.append(
            [
                f"`{r['trace']}`",
                fmt_num(r["events"]),
                fmt_num(r["analysed_events"]),
                fmt_num(r["edges"]),
                str(r["n_scenarios"]),
                (fmt_num(r["loaded_median_ms"], 1) + wall) if r["loaded_median_ms"] is not None else "–",
                (fmt_num(r["loaded_median_cpu_ms"], 1) + cpu)
                if r["loaded_median_cpu_ms"] is not None
                else "–",
                fmt_num(r["memory_median_ms"], 1) + wall,
                fmt_num(r["memory_median_cpu_ms"], 1) + cpu,
                fmt_num(max(v for v in (r["loaded_max_ms"], r["memory_max_ms"]) if v is not None), 1),
                fmt_num(r["snapshot_load_s"], 2) if r["snapshot_load_s"] is not None else "–",
            ]
        )
    return markdown_table(header, body, align="lrrrrrrrrrr")


def _section(rows: list[dict[str, Any]], notes: list[str], quick: bool) -> str:
    parts = [
        "Wall milliseconds of one `ctda.whatif.scenario.run` (factors, re-weigh, replay, per-window "
        "critical paths), fastest of "
        f"{REPEAT} per scenario, then the median and the max over the scenarios that match the trace "
        f"({', '.join(f'`{s}`' for s in SCENARIOS)}). *loaded*: on the run rebuilt from its store "
        "snapshot (what `ctda whatif RUN` does; skipped above "
        f"{LOADED_MAX_EVENTS / 1e6:g}M events to keep the suite short); *in memory*: on "
        "the fresh analysis (with the GIL-contention re-weighing). *CPU ms*: the same runs in CPU time "
        "of the process (unaffected by other load on a shared machine); *max*: the slowest scenario.",
        f"Goal: **≤ {GOAL_MS_1E6:.0f} ms at 1e6 events** (✓/✗ on the 1M rows, wall and CPU).",
    ]
    return family_sections(parts, rows, _table, notes, quick)


@register("whatif", title="What-if: re-propagation time", order=30)
def run(ctx: Context) -> SuiteResult:
    """What-if timings per target (shares the analyze suite's child runs)."""
    notes: list[str] = []
    rows = []
    for t in targets(ctx, notes):
        ctx.log(f"  whatif {t.label} [{t.path.name}] ...")
        row = _row(child_row(ctx, t, whatif=True))
        rows.append(row)
        if "error" in row:
            ctx.log(f"    FAILED: {row['error']}")
        else:
            ctx.log(
                f"    {row['n_scenarios']} scenarios: loaded median {row['loaded_median_ms'] or 0:.1f} ms, "
                f"in memory median {row['memory_median_ms'] or 0:.1f} ms "
                f"({row['memory_median_cpu_ms'] or 0:.1f} ms CPU)"
            )
    at_1m = [r for r in rows if _goal_ok(r) is not None]
    goals: dict[str, Any] = {}
    if at_1m:
        ok = all(_goal_ok(r) for r in at_1m)
        ok_cpu = all(_goal_ok(r, "cpu_ms") for r in at_1m)
        goals["whatif_le_100ms_at_1e6"] = ok
        goals["whatif_le_100ms_at_1e6_cpu"] = ok_cpu
        worst = max(_worst(r, "ms") or 0.0 for r in at_1m)
        worst_cpu = max(_worst(r, "cpu_ms") or 0.0 for r in at_1m)
        notes.append(
            f"Goal ≤ {GOAL_MS_1E6:.0f} ms at 1e6 events: **{'met' if ok else 'NOT met'}** in wall time "
            f"(worst median {worst:,.1f} ms over {len(at_1m)} traces), **{'met' if ok_cpu else 'NOT met'}** "
            f"in CPU time (worst median {worst_cpu:,.1f} ms)."
        )
    else:
        notes.append("No 1e6-event trace in this run (quick run): the what-if goal was not checked.")
    return SuiteResult(
        rows=rows, markdown=_section(rows, notes, ctx.quick), notes=notes, extra={"goals": goals}
    )
