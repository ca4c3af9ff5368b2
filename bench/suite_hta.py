"""Peer suite: ctda against HolisticTraceAnalysis's critical path analysis, same traces, same run.

For every trace, in order: ctda in a fresh process (:mod:`bench.suite_analyze`), then
HTA 0.5 in a fresh process (:mod:`bench.hta_runner`, run by the interpreter of a private
venv made by :mod:`bench.hta_env`), then traceinsight 0.6.1 (HTA's successor on PyPI) the
same way, so all see the same machine conditions. HTA
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


def _row(t: Target, c: dict[str, Any], peers: dict[str, tuple[dict[str, Any] | None, str]]) -> dict[str, Any]:
    """One trace's row: ctda's figures, and per peer (``hta``, ``traceinsight``: its result
    and status) its own under its key, ``<key>_status``, and the ratios (HTA's keep their
    unprefixed names, ``ratio_analysis``; traceinsight's end in ``_ti``)."""
    row: dict[str, Any] = {
        "family": t.family,
        "trace": t.label,
        "file": t.path.name,
        "size_class": t.size_class,
        "events": c.get("events", t.events),
        "ctda": {k: v for k, v in c.items() if k not in ("family", "trace", "file", "pattern", "stages")},
    }
    for key, (h, status) in peers.items():
        row[key], row[f"{key}_status"] = h, status
    if "error" in c:
        row["ctda_error"] = c["error"]
        return row
    for key, (h, _) in peers.items():
        if not (h and h.get("ok")):
            continue
        cp = h["cp_s"] + h.get("report_s", 0.0)
        cp_cpu = h.get("cp_cpu_s", 0.0) + h.get("report_cpu_s", 0.0)
        total = h["load_s"] + cp
        tail = "" if key == hta_env.HTA.key else "_ti"
        row.update(
            {
                f"{key}_analysis_s": cp,
                f"{key}_analysis_cpu_s": cp_cpu,
                f"{key}_total_s": total,
                f"ratio_analysis{tail}": _ratio(cp, c["analyze_s"]),
                f"ratio_analysis_cpu{tail}": _ratio(cp_cpu, c.get("analyze_cpu_s")),
                f"ratio_total{tail}": _ratio(total, c["total_s"]),
            }
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
        "traceinsight analysis s",
        "× analysis (ti)",
        "traceinsight total s",
        "ctda / HTA / ti peak RSS MB",
        "HTA; traceinsight",
    ]
    body = []
    width = len(header)
    for r in rows:
        c, h, ti = r["ctda"], r.get("hta") or {}, r.get("traceinsight") or {}
        status = f"{r.get('hta_status', '')}; {r.get('traceinsight_status', '')}"
        if "ctda_error" in r:
            body.append([f"`{r['trace']}`", "", f"**ctda: {r['ctda_error']}**", *[""] * (width - 3)])
            continue
        if "analyze_s" not in c:  # no peer run and ctda not measured by this suite
            body.append([f"`{r['trace']}`", fmt_num(r["events"]), *[""] * (width - 3), status])
            continue
        rss = [fmt_num(x.get("peak_rss_mb"), 0) if x.get("peak_rss_mb") else "–" for x in (h, ti)]
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
                fmt_num(r.get("traceinsight_analysis_s"), 2),
                fmt_num(r.get("ratio_analysis_ti"), 1) if r.get("ratio_analysis_ti") else "",
                fmt_num(r.get("traceinsight_total_s"), 2),
                f"{fmt_num(c['peak_rss_mb'], 0)} / {rss[0]} / {rss[1]}",
                status,
            ]
        )
    return markdown_table(header, body, align="lrrrrrrrrrrrrl")


def _section(
    rows: list[dict[str, Any]], notes: list[str], envs: dict[str, hta_env.HtaEnv], quick: bool
) -> str:
    said = {
        k: ", ".join(f"{p} {v}" for p, v in e.versions.items()) or "not installed" for k, e in envs.items()
    }
    parts = [
        "Per trace, in this order: ctda in a fresh process, then HolisticTraceAnalysis in a fresh "
        f"process ({said[hta_env.HTA.key]}; private venv `bench/.cache/hta-venv`, "
        "`bench/hta_runner.py`), then its successor on PyPI, traceinsight, the same way "
        f"({said[hta_env.TRACEINSIGHT.key]}; `bench/.cache/traceinsight-venv`). Wall seconds.",
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
    envs = {p.key: hta_env.ensure(ctx.cache, ctx.log, peer=p) for p in hta_env.PEERS}
    for p in hta_env.PEERS:
        if envs[p.key].python is None:
            notes.append(f"{p.dist} not available ({envs[p.key].error}): its columns are empty.")
    rows = []
    for t in targets(ctx, notes):
        if (t.events or 0) > HTA_MAX_EVENTS:  # known before measuring: no pair to interleave
            status = f"not run (> {HTA_MAX_EVENTS / 1e6:g}M events)"
            rows.append(_row(t, {"events": t.events}, {p.key: (None, status) for p in hta_env.PEERS}))
            ctx.log(f"  {t.label}: {status}")
            continue
        ctx.log(f"  ctda {t.label} [{t.path.name}] ...")
        c = child_row(ctx, t, whatif=False, reuse=False)
        events = c.get("events", t.events) or 0
        peers = {p.key: _peer(ctx, p, envs[p.key], t, events) for p in hta_env.PEERS}
        row = _row(t, c, peers)
        rows.append(row)
        for p in hta_env.PEERS:
            tail = "" if p is hta_env.HTA else "_ti"
            if row.get(f"ratio_analysis{tail}"):
                ratio, cpu = row[f"ratio_analysis{tail}"], row.get(f"ratio_analysis_cpu{tail}") or 0
                ctx.log(
                    f"    ctda analysis {c['analyze_s']:.2f} s vs {p.dist} {row[f'{p.key}_analysis_s']:.2f} "
                    f"s: {ratio:.1f}x, CPU {cpu:.1f}x (end to end {row[f'ratio_total{tail}']:.1f}x)"
                )
            else:
                ctx.log(f"    {p.dist}: {peers[p.key][1]}")
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
    extra = {
        "goals": goals,
        "hta_versions": envs[hta_env.HTA.key].versions,
        "hta_setup_s": envs[hta_env.HTA.key].setup_s,
        "traceinsight_versions": envs[hta_env.TRACEINSIGHT.key].versions,
    }
    return SuiteResult(rows=rows, markdown=_section(rows, notes, envs, ctx.quick), notes=notes, extra=extra)


def _peer(
    ctx: Context, peer: hta_env.Peer, env: hta_env.HtaEnv, t: Target, events: int
) -> tuple[dict[str, Any] | None, str]:
    """``peer`` on one trace: its result (None: not run) and a status word."""
    if env.python is None:
        return None, "not installed"
    if events > HTA_MAX_EVENTS:
        return None, f"not run (> {HTA_MAX_EVENTS / 1e6:g}M events)"
    ctx.log(f"  {peer.dist} {t.label} ...")
    h = run_hta(ctx, env, t)
    if h.get("ok"):
        return h, "ok"
    if h.get("timed_out"):
        return h, f"timeout after {min(HTA_TIMEOUT_S, ctx.timeout_s):.0f} s"
    where = f" in {h['stage']}" if h.get("stage") and h.get("stage") != "done" else ""
    return h, f"failed{where}: {h.get('error', '?')}"
