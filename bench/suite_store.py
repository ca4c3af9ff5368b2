"""The store suite: write speed of both stores, the engines' floors, the report read back.

The measurement lives in :mod:`bench.store_bench` (its docstring says what is timed);
this module registers it with ``make bench`` and renders its rows.
"""

from __future__ import annotations

from typing import Any

from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register

Row = dict[str, Any]


def _speed(r: Row, key: str = "rows_per_s") -> str:
    if key not in r:
        return f"skipped: {r.get('skipped', '')}"
    return fmt_num(r[key], 0) + (mark(r.get("ok")) if key == "rows_per_s" else "")


def write_table(rows: list[Row]) -> str:
    body = [
        [
            str(r["store"]),
            f"`{r['trace']}`",
            str(r.get("pass", "")),
            fmt_num(r["rows"]),
            fmt_num(r.get("seconds"), 2),
            _speed(r),
            fmt_num(r["goal_rows_per_s"]),
            fmt_num(r["all_rows"]),
            _speed(r, "all_rows_per_s"),
            fmt_num(r.get("server_cpu_s"), 1),
            fmt_num(r.get("report_s"), 2),
            fmt_num(r.get("delete_s"), 2),
        ]
        for r in rows
    ]
    header = [
        "store",
        "trace",
        "pass",
        "rows (events + edges)",
        "s",
        "rows/s",
        "goal rows/s",
        "all rows written",
        "all rows/s",
        "server CPU s",
        "report s",
        "delete a run s",
    ]
    return markdown_table(header, body, align="lllrrrrrrrrr")


def floor_table(floors: list[Row], writes: list[Row]) -> str:
    body = []
    for f in floors:
        best = max(
            (
                w["rows_per_s"]
                for w in writes
                if w["store"] == f["store"] and w["trace"] == f["trace"] and "rows_per_s" in w
            ),
            default=None,
        )
        share = f"{best / f['rows_per_s']:.0%}" if best else ""
        what = "events and edges with every property" if f.get("properties") else "keys only"
        body.append(
            [
                str(f["store"]),
                f"`{f['trace']}`",
                what,
                fmt_num(f["rows"]),
                fmt_num(f["seconds"], 2),
                _speed(f),
                share,
            ]
        )
    header = ["store", "trace", "written", "rows", "s", "rows/s", "ctda's best write as share"]
    return markdown_table(header, body, align="lllrrrr")


def whatif_table(rows: list[Row]) -> str:
    """The same scenario re-timed by the Python engine and by the database's procedure."""
    body = [
        [
            f"`{r['trace']}`",
            fmt_num(r["events"]),
            fmt_num(r["python_s"], 3),
            fmt_num(r["in_db_s"], 2),
            "yes" if r["same_ns"] else "**NO**",
        ]
        for r in rows
    ]
    header = ["trace", "events", "Python what-if s", "ctda.replay s (read + replay + paths)", "same ns"]
    return markdown_table(header, body, align="lrrrl")


def verdicts(writes: list[Row]) -> list[str]:
    """One line per store: the best pass per trace against the goal."""
    out = []
    for store in dict.fromkeys(r["store"] for r in writes):
        best: dict[str, Row] = {}
        for r in (r for r in writes if r["store"] == store and "rows_per_s" in r):
            if r["trace"] not in best or r["rows_per_s"] > best[r["trace"]]["rows_per_s"]:
                best[r["trace"]] = r
        if not best:
            continue
        goal = next(iter(best.values()))["goal_rows_per_s"]
        figures = ", ".join(
            f"{fmt_num(r['rows_per_s'], 0)} ({r['trace'].split(' ')[0]})" for r in best.values()
        )
        met = all(r["ok"] for r in best.values())
        out.append(
            f"{store}: goal {fmt_num(goal)} rows/s **{'met' if met else 'NOT met'}**, best pass {figures}."
        )
    return out


def floor_notes(floors: list[Row]) -> list[str]:
    """Where a floor is itself below the goal: no write of the model can reach it here."""
    out = []
    for f in floors:
        if f.get("rows_per_s", 0) < f["goal_rows_per_s"]:
            what = (
                "events and edges with the model's properties alone" if f.get("properties") else "keys only"
            )
            out.append(
                f"{f['store']} floor, {what}, `{f['trace']}`: {fmt_num(f['rows_per_s'], 0)} rows/s, "
                f"below the {fmt_num(f['goal_rows_per_s'])} goal on this machine before anything else "
                "is written."
            )
    return out


@register("store", title="Store: write speed and report read-back", order=35)
def run_store(ctx: Context) -> SuiteResult:
    """Rows/s per store, pass and trace; the key-only floors; the report's read time."""
    from bench import store_bench

    ctx.log("  bench.store_bench.run(quick) ...")
    rows = store_bench.run(ctx.quick)
    writes = [r for r in rows if r["kind"] == "write"]
    floors = [r for r in rows if r["kind"] == "floor"]
    whatifs = [r for r in rows if r["kind"] == "whatif"]
    notes = verdicts(writes) + floor_notes(floors)
    intro = (
        "Write speed of one stored run (`Store.write_run`, the trace analysed beforehand): rows = analysed "
        "events + dependency edges; *all rows written* adds the windows' critical-path relationships and "
        "the windows. Pass 1 and 2 write the same trace as two runs: Ladybug gets a store per trace, so "
        "pass 1 loads an empty store and pass 2 appends to one holding a run; Neo4j is one server, JIT-cold "
        "in pass 1. *report s*: `ctda report` read back from the store after pass 2. The floor writes the "
        "same events and edges into an empty store by the same bulk path, with keys only (the engine's own "
        "limit on this machine) and with every property the model keeps but nothing else."
    )
    parts = [intro]
    if ctx.quick:
        parts.append("*Quick run (`--quick`).*")
    parts.append(write_table(writes))
    if floors:
        parts += ["### Engine floor", floor_table(floors, writes)]
    if whatifs:
        parts += ["### What-if inside Neo4j", whatif_table(whatifs)]
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes))
    return SuiteResult(rows=rows, markdown="\n\n".join(parts), notes=notes)
