"""The documents of a job's analysis and of a job what-if (see :mod:`ctda.render.output`)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.text import Text

from ctda.job.report import JobReport
from ctda.render.output import Col, Document, Section

STEP_COLS = [
    Col("step", "step"),
    Col("job_step_ns", "job step ms", "ms"),
    Col("ended", "ended by"),
    Col("rank_step_ns", "slowest rank's own ms", "ms"),
    Col("slowest", "slowest"),
    Col("straggler", "straggler"),
    Col("late_ns", "late ms", "ms"),
    Col("noise_ns", "noise ± ms", "ms"),
    Col("verdict", "verdict"),
    Col("path_by_rank", "path by rank"),
    Col("straggler_top", "top item on straggler"),
    Col("straggler_own", "its extra work / stalls ms"),
    Col("last", "last to arrive"),
    Col("host_contention", "stalls it caused on its host"),
]
PATH_COLS = [
    Col("rank", "rank"),
    Col("name", "name"),
    Col("class", "class"),
    Col("cp_ns", "CP ms", "ms"),
    Col("share", "share", "pct"),
]
WAIT_COLS = [
    Col("label", "step"),
    Col("op", "op"),
    Col("rank", "on rank"),
    Col("waited_for", "waited for"),
    Col("wait_ns", "wait ms", "ms"),
    Col("transfer_ns", "transfer ms", "ms"),
]
CLOCK_COLS = [
    Col("rank", "rank"),
    Col("host", "host"),
    Col("rank_from", "rank from"),
    Col("offset_ns", "offset ms", "ms"),
    Col("how", "how"),
]
WHATIF_COLS = [
    Col("label", "step"),
    Col("base_ns", "base ms", "ms"),
    Col("predicted_ns", "predicted ms", "ms"),
    Col("delta_ns", "change ms", "ms"),
    Col("ended_by_before", "ended by before"),
    Col("ended_by_after", "ended by after"),
]


def _r(rank: Any) -> str:
    return f"r{int(rank)}" if int(rank) >= 0 else "-"


def _counted(per_rank: dict[int, int]) -> str:
    """A per-rank count as its total and, where any, the ranks that have some:
    ``3 (r0 2, r1 1)``; ``0``."""
    total = sum(per_rank.values())
    some = ", ".join(f"{_r(r)} {n}" for r, n in sorted(per_rank.items()) if n)
    return f"{total} ({some})" if some else str(total)


def _keys(method: object) -> str:
    """How collectives were keyed, per backend where it varies: ``gloo order, nccl seq``."""
    if isinstance(method, dict):
        return ", ".join(f"{k} {v}" for k, v in method.items()) or "none"
    return str(method)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def job_doc(rep: JobReport) -> Document:
    """A job's steps, stragglers, path, waits at collectives, lateness, clocks and matching."""
    present = f"{len(rep.ranks)} of {rep.world_size} ranks"
    if rep.missing:
        present += f" (missing {', '.join(map(str, rep.missing))})"
    steps = rep.steps.copy()
    total = int(steps.job_step_ns.sum()) if len(steps) else 0
    steps["slowest"] = [_r(x) for x in steps.get("slowest_rank", [])]
    steps["ended"] = [_r(x) for x in steps.get("ended_by", [-1] * len(steps))]
    for col in ("rank_step_ns", "noise_ns"):
        if col not in steps:
            steps[col] = 0
    if "verdict" not in steps:
        steps["verdict"] = ""
    steps["straggler"] = [_r(x) for x in steps.get("straggler", [])]
    steps["last"] = [_r(x) for x in steps.get("last_to_arrive", [])]
    blocks: list[Any] = [
        Text(
            f"job {rep.name}: {present}, {len(steps)} step(s), job critical path {_ms(total)} ms",
            style="bold",
        ),
        *(Text(f"note: {n}") for n in rep.notes),
        *(
            [Text(str(rep.checks["step_definition"]), style="dim")]
            if rep.checks.get("step_definition")
            else []
        ),
        *([Text(_noise_text(rep.checks["noise"]), style="dim")] if rep.checks.get("noise") else []),
        Section.of(
            "steps",
            "Per step (job step: from the end of the previous step's last collective to the end of"
            " this step's, all ranks; the slowest rank's own ProfilerStep beside it; straggler: the"
            " latest to arrive at its collectives once stalls on a shared host are charged to their"
            " cause, named only beyond the job's noise band)",
            steps,
            # the host column only where some straggler slowed ranks of its host
            STEP_COLS
            if steps.get("host_contention", pd.Series(dtype=str)).astype(bool).any()
            else STEP_COLS[:-1],
        ),
        Section.of("path", "Job critical path (all steps)", _ranked(rep.path_items), PATH_COLS),
    ]
    if len(rep.waits):
        waits = _ranked(rep.waits, "rank", "waited_for")
        blocks.append(
            Section.of(
                "waits",
                "Collectives on the path: waiting for the last rank vs the transfer",
                waits,
                WAIT_COLS,
            )
        )
    if len(steps) and rep.ranks:
        late = pd.DataFrame(
            {"step": steps.step, **{f"r{r}": [s.get(r, 0) for s in steps.late_by_rank] for r in rep.ranks}}
        )
        cols = [Col("step", "step"), *(Col(f"r{r}", f"r{r}", "ms") for r in rep.ranks)]
        blocks.append(
            Section.of(
                "lateness",
                "Lateness per step and rank, ms (arrival at the step's collectives minus the median)",
                late,
                cols,
            )
        )
    blocks.append(Section.of("clocks", "Clock offsets", _ranked(rep.clocks), CLOCK_COLS))
    m, c = rep.matching, rep.checks
    blocks.append(
        Text(
            f"collectives: {m['collectives']} matched"
            f" ({', '.join(f'{n} on {k} ranks' for k, n in m['by_ranks'].items())});"
            f" unmatched {_counted(m['unmatched'])}; inconsistent {_counted(m['inconsistent'])};"
            f" keys {_keys(m['method'])}"
        )
    )
    blocks.append(
        Text(
            f"checks: every rank replays exactly: {'yes' if c['replay_exact'] else 'no'};"
            f" CP vs job step max error {c['cp_vs_job_step_max_error_ns']} ns;"
            f" cross-rank edges {c['cross_rank_edges']}",
            style="dim",
        )
    )
    return Document(f"Job {rep.name}", blocks, data=rep.to_json(), source=rep.name)


def job_whatif_doc(name: str, scenario: str, steps: pd.DataFrame, notes: list[str] | None = None) -> Document:
    """Base vs predicted job step per step (``steps`` from ``ctda.job.whatif.predicted_steps``);
    ``notes`` say how the prediction was made (the cores shared per host, and whence)."""
    base, pred = float(steps.base_ns.mean()), float(steps.predicted_ns.mean())
    shown = _ranked(steps, "ended_by_before", "ended_by_after")
    data = {
        "job": name,
        "scenario": scenario,
        "mean_base_ns": base,
        "mean_predicted_ns": pred,
        "notes": list(notes or []),
        "steps": [
            {k: (v if isinstance(v, str) else int(v)) for k, v in r.items()}
            for r in steps.to_dict(orient="records")
        ],
    }
    return Document(
        f"Job {name}: what-if {scenario}",
        [
            Text(f"job {name}, what-if: {scenario}", style="bold"),
            Section.of(
                "steps",
                "Predicted job step in the re-timed job graph, by the observed step's definition"
                " (collective end to collective end)",
                shown,
                WHATIF_COLS,
            ),
            Text(f"mean job step: {_ms(base)} ms -> {_ms(pred)} ms ({pred / base - 1:+.1%})"),
            *[Text(n, style="dim") for n in notes or []],
        ],
        data=data,
        source=name,
    )


def _noise_text(n: dict[str, Any]) -> str:
    """The job's noise line (``ctda.job.noise``)."""
    return (
        f"noise: a rank's lateness moves {n['sigma_ns'] / 1e6:.1f} ms from step to step (measured over"
        f" {n['from']}); a straggler is named when its lateness exceeds {n['k']:g} x that (plus the"
        " clock offsets' uncertainty), or it is late throughout the job beyond the band of a mean"
        " (where it then arrived in time, by its extra work there beyond that band)"
    )


def _ranked(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    """``df`` with its rank columns shown as ``rN`` (``rank`` when none are named)."""
    out = df.copy()
    for c in cols or ("rank",):
        if c in out:
            out[c] = [_r(x) for x in out[c]]
    return out
