"""Peer suite: ctda against HolisticTraceAnalysis's critical path analysis, same traces, same run.

For every trace, in order: ctda in a fresh process (:mod:`bench.suite_analyze`), then
HTA 0.5 in a fresh process (:mod:`bench.hta_runner`, run by the interpreter of a private
venv made by :mod:`bench.hta_env`), so both see the same machine conditions. HTA
analyses the whole trace (``annotation=""``, last profiler step kept), the same events
ctda builds its graph from; ctda analyses every ProfilerStep window (or the whole trace).

Compared: *analysis* = HTA's ``critical_path_analysis`` (graph construction + longest
path) + ``get_critical_path_breakdown`` against ctda's ``analyze`` + ``report.build``
(graph + calibrate + CP); *end to end* adds trace loading on both sides (HTA's
``TraceAnalysis(...)``, ctda's ``read_trace``). HTA is not run above
:data:`HTA_MAX_EVENTS` events (it would need hours and tens of GB) and is stopped after
:data:`HTA_TIMEOUT_S` per trace; failures are reported with the error's first line.
"""

from __future__ import annotations

import os
from typing import Any

from bench import hta_env
from bench.measure import run_sampled
from bench.suite_analyze import child_row
from bench.suites import Context, SuiteResult, family_sections, fmt_num, mark, markdown_table, register
from bench.synth import Target, targets

HTA_MAX_EVENTS = 1_500_000
HTA_TIMEOUT_S = 600.0
GOAL_RATIO_1E6 = 20.0


def _hta_env_vars() -> dict[str, str]:
    """The parent's environment without ctda's import path (HTA's venv is separate)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def run_hta(ctx: Context, env: hta_env.HtaEnv, t: Target) -> dict[str, Any]:
    """HTA on one trace, ``ctx.repeat`` times (fastest counts); a dict with ``error`` on failure."""
    assert env.python is not None
    cmd = [str(env.python), str(ctx.repo / "bench" / "hta_runner.py"), str(t.path.resolve())]
    timeout = min(HTA_TIMEOUT_S, ctx.timeout_s)
    best: dict[str, Any] | None = None
    for _ in range(ctx.repeat):
        m = run_sampled(cmd, _hta_env_vars(), timeout)
        if m.report is None:
            out: dict[str, Any] = {"error": m.error, "tree_peak_mb": m.tree_peak_mb}
            if m.timed_out:
                out["timed_out"] = True
            return out
        rep = {**m.report, "tree_peak_mb": m.tree_peak_mb}
        rep["peak_rss_mb"] = max(rep.get("peak_rss_mb", 0.0), m.tree_peak_mb)
        if not rep.get("ok"):
            rep.setdefault("error", "failed")
            return rep
        if best is None or rep["total_s"] < best["total_s"]:
            best = {**rep, "peak_rss_mb": max(rep["peak_rss_mb"], (best or {}).get("peak_rss_mb", 0.0))}
    assert best is not None
    return best


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den and den > 0 else None


def _row(t: Target, c: dict[str, Any], h: dict[str, Any] | None, status: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "family": t.family,
        "trace": t.label,
        "file": t.path.name,
        "size_class": t.size_class,
        "events": c.get("events", t.events),
        "ctda": {k: v for k, v in c.items() if k not in ("family", "trace", "file", "pattern", "stages")},
        "hta": h,
        "hta_status": status,
    }
    if "error" in c:
        row["ctda_error"] = c["error"]
        return row
    if h and h.get("ok"):
        hta_cp = h["cp_s"] + h.get("report_s", 0.0)
        hta_cp_cpu = h.get("cp_cpu_s", 0.0) + h.get("report_cpu_s", 0.0)
        hta_total = h["load_s"] + hta_cp
        row.update(
            hta_analysis_s=hta_cp,
            hta_analysis_cpu_s=hta_cp_cpu,
            hta_total_s=hta_total,
            ratio_analysis=_ratio(hta_cp, c["analyze_s"]),
            ratio_analysis_cpu=_ratio(hta_cp_cpu, c.get("analyze_cpu_s")),
            ratio_total=_ratio(hta_total, c["total_s"]),
        )
    return row


def _goal_ok(r: dict[str, Any], key: str = "ratio_analysis") -> bool | None:
    if r.get("size_class") != 1_000_000 or r.get(key) is None:
        return None
    return bool(r[key] >= GOAL_RATIO_1E6)


def _table(rows: list[dict[str, Any]]) -> str:
    header = [
        "trace",
        "events",
        "ctda analysis s",
        "HTA analysis s",
        "× analysis",
        "× analysis (CPU)",
        "ctda total s",
        "HTA total s",
        "× total",
        "ctda / HTA peak RSS MB",
        "HTA",
    ]
    body = []
    for r in rows:
        c, h = r["ctda"], r.get("hta") or {}
        if "ctda_error" in r:
            body.append([f"`{r['trace']}`", "", f"**ctda: {r['ctda_error']}**", *[""] * 8])
            continue
        if "analyze_s" not in c:  # HTA not run and ctda not measured by this suite
            body.append([f"`{r['trace']}`", fmt_num(r["events"]), *[""] * 8, r["hta_status"]])
            continue
        hta_rss = fmt_num(h.get("peak_rss_mb"), 0) if h.get("peak_rss_mb") else "–"
        body.append(
            [
                f"`{r['trace']}`",
                fmt_num(r["events"]),
                fmt_num(c["analyze_s"], 2),
                fmt_num(r.get("hta_analysis_s"), 2),
                (fmt_num(r.get("ratio_analysis"), 1) + mark(_goal_ok(r))) if r.get("ratio_analysis") else "",
                (fmt_num(r.get("ratio_analysis_cpu"), 1) + mark(_goal_ok(r, "ratio_analysis_cpu")))
                if r.get("ratio_analysis_cpu")
                else "",
                fmt_num(c["total_s"], 2),
                fmt_num(r.get("hta_total_s"), 2),
                fmt_num(r.get("ratio_total"), 1),
                f"{fmt_num(c['peak_rss_mb'], 0)} / {hta_rss}",
                r["hta_status"],
            ]
        )
    return markdown_table(header, body, align="lrrrrrrrrrl")


def _section(rows: list[dict[str, Any]], notes: list[str], env: hta_env.HtaEnv, quick: bool) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in env.versions.items())
    parts = [
        "Per trace, in this order: ctda in a fresh process, then HolisticTraceAnalysis in a fresh "
        f"process ({versions or 'not installed'}; private venv `bench/.cache/hta-venv`, "
        "`bench/hta_runner.py`). Wall seconds.",
        "*analysis*: HTA `critical_path_analysis(rank, annotation='', instance_id=None)` (whole trace) "
        "+ `get_critical_path_breakdown()` vs ctda `analyze` + `report.build` (all ProfilerStep "
        "windows, or the whole trace); *total* adds loading the trace on both sides "
        "(`TraceAnalysis(...)` vs `read_trace`). *×* = HTA time / ctda time; *(CPU)*: the same "
        "ratio in CPU seconds of each process (both analyses are single-threaded; CPU time is not "
        "inflated by other load on a shared machine). Peak RSS: ctda's process after the report, "
        "HTA's VmHWM or sampled tree PSS, whichever is larger.",
        f"Goal: **ctda analysis ≥ {GOAL_RATIO_1E6:.0f}× faster than HTA's at 1e6 events** "
        "(✓/✗ on the 1M rows). "
        f"HTA is skipped above {HTA_MAX_EVENTS:,} events and stopped after {HTA_TIMEOUT_S:.0f} s.",
    ]
    return family_sections(parts, rows, _table, notes, quick)


@register("hta", title="Peer: HolisticTraceAnalysis critical path", order=40)
def run(ctx: Context) -> SuiteResult:
    """ctda then HTA on every target; speed ratios, memory, HTA failures."""
    notes: list[str] = []
    env = hta_env.ensure(ctx.cache, ctx.log)
    if env.python is None:
        notes.append(f"HTA not available ({env.error}): HTA columns are empty.")
    rows = []
    for t in targets(ctx, notes):
        h: dict[str, Any] | None = None
        if (t.events or 0) > HTA_MAX_EVENTS:  # known before measuring: no pair to interleave
            c = {"events": t.events}
            status = f"not run (> {HTA_MAX_EVENTS / 1e6:g}M events)"
            rows.append(_row(t, c, h, status))
            ctx.log(f"  {t.label}: {status}")
            continue
        ctx.log(f"  ctda {t.label} [{t.path.name}] ...")
        c = child_row(ctx, t, whatif=False, reuse=False)
        events = c.get("events", t.events) or 0
        if env.python is None:
            status = "not installed"
        elif events > HTA_MAX_EVENTS:
            status = f"not run (> {HTA_MAX_EVENTS / 1e6:g}M events)"
        else:
            ctx.log(f"  HTA  {t.label} ...")
            h = run_hta(ctx, env, t)
            if h.get("ok"):
                status = "ok"
            elif h.get("timed_out"):
                status = f"timeout after {min(HTA_TIMEOUT_S, ctx.timeout_s):.0f} s"
            else:
                where = f" in {h['stage']}" if h.get("stage") and h.get("stage") != "done" else ""
                status = f"failed{where}: {h.get('error', '?')}"
        row = _row(t, c, h, status)
        rows.append(row)
        if row.get("ratio_analysis"):
            ctx.log(
                f"    ctda analysis {c['analyze_s']:.2f} s vs HTA {row['hta_analysis_s']:.2f} s: "
                f"{row['ratio_analysis']:.1f}x, CPU {row.get('ratio_analysis_cpu') or 0:.1f}x "
                f"(end to end {row['ratio_total']:.1f}x)"
            )
        else:
            ctx.log(f"    HTA: {status}")
    goals: dict[str, Any] = {}
    at_1m = [r for r in rows if r.get("size_class") == 1_000_000]
    if at_1m:
        judged = [r for r in at_1m if _goal_ok(r) is not None]
        ok = bool(judged) and all(_goal_ok(r) for r in judged)
        ok_cpu = bool(judged) and all(_goal_ok(r, "ratio_analysis_cpu") for r in judged)
        goals["analysis_ge_20x_hta_at_1e6"] = ok
        goals["analysis_ge_20x_hta_at_1e6_cpu"] = ok_cpu
        ratios = ", ".join(
            f"`{r['trace']}` {r['ratio_analysis']:.1f}× ({r.get('ratio_analysis_cpu') or 0:.1f}× CPU)"
            for r in judged
        )
        failed = [r["trace"] for r in at_1m if _goal_ok(r) is None]
        notes.append(
            f"Goal ≥ {GOAL_RATIO_1E6:.0f}× at 1e6 events: **{'met' if ok else 'NOT met'}** in wall time, "
            f"**{'met' if ok_cpu else 'NOT met'}** in CPU time ({ratios or 'no HTA result at 1e6'})"
            + (f"; no HTA result for {', '.join(f'`{t}`' for t in failed)}" if failed else "")
            + "."
        )
    else:
        notes.append("No 1e6-event trace in this run (quick run): the speed goal was not checked.")
    extra = {"goals": goals, "hta_versions": env.versions, "hta_setup_s": env.setup_s}
    return SuiteResult(rows=rows, markdown=_section(rows, notes, env, ctx.quick), notes=notes, extra=extra)
