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

import statistics
import time
from typing import Any

from bench.suite_analyze import child_row
from bench.suites import Context, SuiteResult, fmt_num, markdown_table, register
from bench.synth import targets

__all__ = ["SCENARIOS", "measure_whatif"]

GOAL_MS_1E6 = 100.0
#: scenarios tried on every trace; those matching no event are skipped
SCENARIOS = (
    "cat=kernel=0.5",
    "class=cpu=0.5",
    "class=launch_overhead=0",
    "name~^aten::=0.8",
    "class=gpu_comm=0.5",
    "class=sync_wait=0",
    "class=gpu_memcpy=2",
)
REPEAT = 3  #: runs per scenario; the fastest counts (the median is over scenarios)


def _time_scenarios(a: Any, specs: tuple[str, ...]) -> dict[str, Any]:
    """Fastest-of-REPEAT ``scenario.run`` per matching spec; median and max over specs."""
    from ctda.whatif import scenario
    from ctda.whatif.select import SelectionError, parse_scale

    overrides = []
    for spec in specs:
        try:
            overrides.append(parse_scale(a, spec))
        except SelectionError:
            continue
    if not overrides:
        return {"n_scenarios": 0}
    scenario.run(a, overrides[:1])  # warm-up: caches and compiled code
    per: dict[str, float] = {}
    changes: dict[str, float] = {}
    for o in overrides:
        best = float("inf")
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            sc = scenario.run(a, [o])
            best = min(best, time.perf_counter() - t0)
        per[o.label] = best * 1000
        st = sc.step_times()
        base = float(st.base_ns.sum())
        changes[o.label] = float(st.predicted_ns.sum()) / base - 1 if base > 0 else 0.0
    ms = list(per.values())
    return {
        "n_scenarios": len(ms),
        "median_ms": statistics.median(ms),
        "max_ms": max(ms),
        "per_scenario_ms": per,
        "predicted_change": changes,
    }


def measure_whatif(a: Any, specs: tuple[str, ...] = SCENARIOS) -> dict[str, Any]:
    """What-if timings on ``a`` in memory and on its snapshot round trip (see module doc)."""
    from ctda.analysis import snapshot

    out: dict[str, Any] = {"in_memory": _time_scenarios(a, specs)}
    t0 = time.perf_counter()
    blob = snapshot.dump(a)
    out["snapshot_dump_s"] = time.perf_counter() - t0
    out["snapshot_mb"] = len(blob) / 1e6
    t0 = time.perf_counter()
    loaded = snapshot.load(blob)
    out["snapshot_load_s"] = time.perf_counter() - t0
    del blob
    out["loaded"] = _time_scenarios(loaded, specs)
    return out


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
        "n_scenarios": loaded.get("n_scenarios", 0),
        "loaded_median_ms": loaded.get("median_ms"),
        "loaded_max_ms": loaded.get("max_ms"),
        "memory_median_ms": mem.get("median_ms"),
        "memory_max_ms": mem.get("max_ms"),
        "snapshot_load_s": w.get("snapshot_load_s"),
        "snapshot_mb": w.get("snapshot_mb"),
        "per_scenario_ms": loaded.get("per_scenario_ms"),
        "per_scenario_ms_in_memory": mem.get("per_scenario_ms"),
        "predicted_change": loaded.get("predicted_change"),
    }


def _goal_ok(r: dict[str, Any]) -> bool | None:
    """Within goal at ~1e6 events (the goal is stated there; other sizes are unmarked)."""
    if r.get("size_class") != 1_000_000 or r.get("loaded_median_ms") is None:
        return None
    return bool(r["loaded_median_ms"] <= GOAL_MS_1E6 and (r["memory_median_ms"] or 0) <= GOAL_MS_1E6)


def _table(rows: list[dict[str, Any]]) -> str:
    header = [
        "trace",
        "events",
        "analysed",
        "edges",
        "scenarios",
        "loaded: median ms",
        "loaded: max ms",
        "in memory: median ms",
        "in memory: max ms",
        "snapshot load s",
    ]
    body = []
    for r in rows:
        if "error" in r:
            body.append([f"`{r['trace']}`", *[""] * 8, f"**{r['error']}**"])
            continue
        ok = _goal_ok(r)
        mark = "" if ok is None else (" ✓" if ok else " ✗")
        body.append(
            [
                f"`{r['trace']}`",
                fmt_num(r["events"]),
                fmt_num(r["analysed_events"]),
                fmt_num(r["edges"]),
                str(r["n_scenarios"]),
                fmt_num(r["loaded_median_ms"], 1) + mark,
                fmt_num(r["loaded_max_ms"], 1),
                fmt_num(r["memory_median_ms"], 1) + mark,
                fmt_num(r["memory_max_ms"], 1),
                fmt_num(r["snapshot_load_s"], 2),
            ]
        )
    return markdown_table(header, body, align="lrrrrrrrrr")


def _section(rows: list[dict[str, Any]], notes: list[str], quick: bool) -> str:
    parts = [
        "Wall milliseconds of one `ctda.whatif.scenario.run` (factors, re-weigh, replay, per-window "
        "critical paths), fastest of "
        f"{REPEAT} per scenario, then the median and the max over the scenarios that match the trace "
        f"({', '.join(f'`{s}`' for s in SCENARIOS)}). *loaded*: on the run rebuilt from its store "
        "snapshot (what `ctda whatif RUN` does); *in memory*: on the fresh analysis (with the "
        "GIL-contention re-weighing).",
        f"Goal: **≤ {GOAL_MS_1E6:.0f} ms at 1e6 events** (✓/✗ on the 1M rows).",
    ]
    if quick:
        parts.append("*Quick run (`--quick`): fewer and smaller inputs.*")
    for family, title in (("corpus", "Largest corpus traces"), ("synthetic", "Synthetic (bench.replicate)")):
        fam = [r for r in rows if r["family"] == family]
        if fam:
            parts += [f"### {title}", _table(fam)]
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes))
    return "\n\n".join(parts)


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
                f"in memory median {row['memory_median_ms'] or 0:.1f} ms"
            )
    at_1m = [r for r in rows if _goal_ok(r) is not None]
    goals: dict[str, Any] = {}
    if at_1m:
        ok = all(_goal_ok(r) for r in at_1m)
        goals["whatif_le_100ms_at_1e6"] = ok
        worst = max(max(r["loaded_median_ms"], r["memory_median_ms"] or 0) for r in at_1m)
        notes.append(
            f"Goal ≤ {GOAL_MS_1E6:.0f} ms at 1e6 events: **{'met' if ok else 'NOT met'}** "
            f"(worst median {worst:,.1f} ms over {len(at_1m)} traces)."
        )
    else:
        notes.append("No 1e6-event trace in this run (quick run): the what-if goal was not checked.")
    return SuiteResult(
        rows=rows, markdown=_section(rows, notes, ctx.quick), notes=notes, extra={"goals": goals}
    )
