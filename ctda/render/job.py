"""Render a :class:`ctda.job.report.JobReport` as rich tables or JSON (no analysis here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from ctda.job.report import JobReport


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


LEFT = {"step", "host", "how", "name", "class", "path by rank", "top item on straggler", "op", "rank from"}


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    for h in headers:
        t.add_column(h, justify="left" if h in LEFT else "right", overflow="fold")
    for r in rows:
        t.add_row(*r)
    return t


def _rows(df: pd.DataFrame) -> Iterator[Any]:
    """Rows as attribute records with loose types (the frames' columns are known here)."""
    yield from df.itertuples()


def render_job_table(rep: JobReport, console: Console) -> None:
    present = f"{len(rep.ranks)} of {rep.world_size} ranks"
    if rep.missing:
        present += f" (missing {', '.join(map(str, rep.missing))})"
    total = sum(int(s["job_step_ns"]) for s in rep.steps.to_dict(orient="records"))
    console.print(f"job {rep.name}: {present}, {len(rep.steps)} step(s), job critical path {_ms(total)} ms")
    for n in rep.notes:
        console.print(f"note: {n}")
    console.print(
        _table(
            "Per step (job step: the slowest rank's; straggler: the latest to arrive at its collectives)",
            [
                "step",
                "job step ms",
                "slowest",
                "straggler",
                "late ms",
                "path by rank",
                "top item on straggler",
            ],
            [
                [
                    s["step"],
                    _ms(s["job_step_ns"]),
                    f"r{s['slowest_rank']}",
                    f"r{s['straggler']}" if s["straggler"] >= 0 else "-",
                    _ms(s["late_ns"]),
                    s["path_by_rank"],
                    s["straggler_top"],
                ]
                for s in rep.steps.to_dict(orient="records")
            ],
        )
    )
    console.print(
        _table(
            "Job critical path (all steps)",
            ["rank", "name", "class", "CP ms", "share"],
            [
                [f"r{r['rank']}", str(r["name"]), str(r["class"]), _ms(r["cp_ns"]), f"{r['share']:.1%}"]
                for r in rep.path_items.to_dict(orient="records")
            ],
        )
    )
    if len(rep.waits):
        console.print(
            _table(
                "Collectives on the path: waiting for the last rank vs the transfer",
                ["step", "op", "on rank", "waited for", "wait ms", "transfer ms"],
                [
                    [
                        str(w.label),
                        str(w.op),
                        f"r{w.rank}",
                        f"r{w.waited_for}",
                        _ms(w.wait_ns),
                        _ms(w.transfer_ns),
                    ]
                    for w in _rows(rep.waits)
                ],
            )
        )
    steps = rep.steps.to_dict(orient="records")
    if steps and rep.ranks:
        console.print(
            _table(
                "Lateness per step and rank, ms (arrival at the step's collectives minus the median)",
                ["step", *[f"r{r}" for r in rep.ranks]],
                [[s["step"], *[_ms(s["late_by_rank"].get(r, 0)) for r in rep.ranks]] for s in steps],
            )
        )
    console.print(
        _table(
            "Clock offsets",
            ["rank", "host", "rank from", "offset ms", "how"],
            [
                [f"r{c.rank}", str(c.host), str(c.rank_from), _ms(c.offset_ns), str(c.how)]
                for c in _rows(rep.clocks)
            ],
        )
    )
    m = rep.matching
    console.print(
        f"collectives: {m['collectives']} matched"
        f" ({', '.join(f'{n} on {k} ranks' for k, n in m['by_ranks'].items())});"
        f" unmatched {sum(m['unmatched'].values())} {m['unmatched']};"
        f" inconsistent {sum(m['inconsistent'].values())}; keys {m['method']}"
    )
    c = rep.checks
    console.print(
        f"checks: every rank replays exactly: {c['replay_exact']}; CP vs job step max error"
        f" {c['cp_vs_job_step_max_error_ns']} ns; cross-rank edges {c['cross_rank_edges']}"
    )


def render_job_json(rep: JobReport) -> str:
    return json.dumps(rep.to_json(), indent=2)


def render_job_whatif(
    name: str, scenario: str, steps: pd.DataFrame, console: Console, fmt: str = "table"
) -> None:
    """Base vs predicted job step per step (``steps`` from ``ctda.job.whatif.predicted_steps``)."""
    base, pred = float(steps.base_ns.mean()), float(steps.predicted_ns.mean())
    if fmt == "json":
        console.print_json(
            json.dumps(
                {
                    "job": name,
                    "scenario": scenario,
                    "mean_base_ns": base,
                    "mean_predicted_ns": pred,
                    "steps": [
                        {k: (v if isinstance(v, str) else int(v)) for k, v in r.items()}
                        for r in steps.to_dict(orient="records")
                    ],
                }
            )
        )
        return
    console.print(f"job {name}, what-if: {scenario}")
    console.print(
        _table(
            "Predicted job step (the slowest rank's step in the re-timed job graph)",
            ["step", "base ms", "predicted ms", "change ms", "slowest before", "slowest after"],
            [
                [
                    str(r.label),
                    _ms(r.base_ns),
                    _ms(r.predicted_ns),
                    _ms(r.delta_ns),
                    f"r{r.slowest_before}",
                    f"r{r.slowest_after}",
                ]
                for r in _rows(steps)
            ],
        )
    )
    console.print(f"mean job step: {_ms(base)} ms -> {_ms(pred)} ms ({pred / base - 1:+.1%})")
