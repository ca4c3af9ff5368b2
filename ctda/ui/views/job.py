"""Job page: a stored multi-rank job, who made each step late, and its path across ranks.

Everything drawn here comes from the job's tables (:mod:`ctda.ui.jobframes`), computed once
per job and step and cached (:mod:`ctda.ui.jobdata`); this script only lays them out.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from ctda.api import CtdaError, StoreError
from ctda.ui import canvas, data, figures, jobdata, jobframes, share, widgets
from ctda.ui.settings import Settings

HOW_TO_STORE = (
    "The store holds no jobs yet. Store one from a directory of per-rank traces with "
    "`ctda ingest DIR` (each rank is stored as a run, plus the job)."
)


def ms(label: str) -> Any:
    """A column of milliseconds, to the microsecond like every table of ctda."""
    return st.column_config.NumberColumn(label, format="%.3f")


def headline(t: jobframes.JobTables) -> None:
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Ranks", len(t.lateness.ranks))
    c2.metric("Steps", len(t.lateness.steps))
    c3.metric("Mean job step", widgets.ms(t.mean_step_ms) if len(t.steps) else "-")
    c4.metric("Straggler most often", t.top_straggler)
    st.caption(t.summary)
    for note in t.notes:
        st.warning(note)


def steps_table(t: jobframes.JobTables) -> None:
    st.markdown(
        "**Per step** (job step: from the end of the previous step's last collective to the end of"
        " this step's, all ranks; the slowest rank's own ProfilerStep beside it; straggler: the latest"
        " to arrive at its collectives once stalls on a shared host are charged to their cause, named"
        " only when its lateness is beyond the job's noise band)"
    )
    config: dict[str, Any] = {
        "step": "step",
        "job_step_ms": ms("job step ms"),
        "ended_by": "ended by",
        "rank_step_ms": ms("slowest rank's own ms"),
        "slowest": "slowest",
        "straggler": "straggler",
        "late_ms": ms("late ms"),
        "noise_ms": ms("noise ± ms"),
        "verdict": st.column_config.TextColumn("verdict", width="medium"),
        "straggler_top": st.column_config.TextColumn("top item on straggler", width="medium"),
        "path_by_rank": st.column_config.TextColumn("path by rank", width="small"),
        "straggler_own": st.column_config.TextColumn("its extra work / stalls ms", width="small"),
        "last": "last to arrive",
        "host_contention": st.column_config.TextColumn("stalls it caused on its host", width="medium"),
    }
    st.dataframe(t.steps, hide_index=True, width="stretch", column_config=config)


def step_timeline(s: Settings, job: jobdata.StoredJobs, key: str, t: jobframes.JobTables) -> None:
    assert job.report is not None
    steps = list(t.steps.step)
    if not steps:
        st.info("The job has no steps to draw.")
        return
    wkey = widgets.scoped("job_step", s.location, t.name)
    scope = share.job_scope(t.name)
    share.seed(wkey, steps, next((x for x in steps if str(x) == share.kept_step(scope)), None))
    step = widgets.choice(
        "Step",
        steps,
        key=wkey,
        format_func=t.step_labels.get,
        help="The job step whose path the timeline draws across the ranks.",
    )
    share.keep_step(scope, str(step))  # kept for the job across pages, and in the URL
    tl, chart = jobdata.timeline(s, job, key, t, step)
    figures.show(chart, "job_timeline")
    stored = f"the own events of {tl.ranks_drawn} of {len(tl.bands)} ranks (from their stored runs)"
    if tl.ranks_drawn < len(tl.bands):
        stored += "; a rank whose run is not in the store has its path row only"
    if len(tl.busy) < tl.busy_total:
        stored += (
            f"; drew {len(tl.busy):,} of their {tl.busy_total:,} events, picked as on the Critical path page"
        )
    st.caption(
        f"{len(tl.path):,} path stretches, the path changes rank {len(tl.jumps)} time(s); {stored}. "
        f"{canvas.ZOOM_HELP}"
    )


#: ranks offered as a button each; a larger job picks its rank in a box
RANK_BUTTONS = 16


def open_rank(job: jobdata.StoredJobs) -> None:
    """One click from a rank to its own run on the Critical path page (its threads and
    streams, its steps, its hotspots)."""
    ranks = sorted(job.runs)
    if not ranks:
        return
    st.markdown("**Open a rank's run** (on the Critical path page)")
    if len(ranks) <= RANK_BUTTONS:
        cols = st.columns(RANK_BUTTONS)  # one narrow column each, from the left
        picked = next((r for r, c in zip(ranks, cols) if c.button(f"r{r}", key=f"job_open_r{r}")), None)
    else:
        c1, c2 = st.columns([3, 1])
        rank = c1.selectbox("Rank", ranks, key="job_open_rank", format_func=lambda r: f"r{r}")
        picked = rank if c2.button("Open its run", key="job_open_run") else None
    if picked is not None:
        widgets.select_run(job.runs[picked].name)
        st.switch_page("views/critical_path.py")


def waits_and_clocks(t: jobframes.JobTables) -> None:
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Collectives on the path**: waiting for the last rank vs the transfer")
        if len(t.waits):
            st.dataframe(
                t.waits,
                hide_index=True,
                width="stretch",
                column_config={
                    "on_rank": "on rank",
                    "waited_for": "waited for",
                    "wait_ms": ms("wait ms"),
                    "transfer_ms": ms("transfer ms"),
                },
            )
        else:
            st.caption("No collective on the job path.")
    with right:
        st.markdown("**Clock offsets** (added to each rank's times for the job's clock)")
        st.dataframe(
            t.clocks,
            hide_index=True,
            width="stretch",
            column_config={"rank_from": "rank from", "offset_ms": ms("offset ms")},
        )


def whatif(s: Settings, key: str, name: str, t: jobframes.JobTables) -> None:
    """The job's predicted step if its stragglers kept up, or one rank were faster, with
    the ranks sharing each host's cores or not; on request (the ranks are re-analysed)."""
    st.subheader("What if")
    c1, c2, c3, c4 = st.columns([3, 2, 2, 2])
    median = c1.checkbox(
        "Each step's straggler as fast as the median rank",
        key="job_wi_median",
        help="Its extra work (what no other rank does in the step) removed; the rest keeps its time.",
    )
    ranks = [None, *t.lateness.ranks]
    rank = c2.selectbox(
        "Scale a rank", ranks, key="job_wi_rank", format_func=lambda r: "none" if r is None else f"r{r}"
    )
    factor = c3.number_input(
        "its time ×", 0.0, 10.0, 1.0, step=0.05, key="job_wi_factor", disabled=rank is None
    )
    cpus = int(
        c4.number_input(
            "Cores per host",
            0,
            4096,
            0,
            key="job_wi_cpus",
            help="The ranks of a host share its cores at the predicted times (0: not modelled).",
        )
    )
    scale = () if rank is None or factor == 1.0 else (f"rank={rank}={factor:g}",)
    if not median and not scale:
        st.caption("Make the stragglers keep up, or scale a rank, to predict the job step.")
        return
    asked = (key, scale, median, cpus)
    if st.button("Predict the job step", key="job_wi_run"):
        st.session_state["_job_wi_asked"] = asked
    if st.session_state.get("_job_wi_asked") != asked:
        st.caption("The prediction reads the ranks' traces again: seconds to minutes.")
        return
    try:
        got = jobdata.whatif(s.db, key, name, scale, median, cpus)
    except (StoreError, CtdaError) as exc:
        st.error(f"Cannot predict job {name}: {exc}")
        return
    steps = got.scenario.steps
    base, pred = float(steps.base_ns.mean()) / 1e6, float(steps.predicted_ns.mean()) / 1e6
    m1, m2, m3 = st.columns(3)
    m1.metric("Mean job step (observed)", widgets.ms(base))
    m2.metric("Mean job step (predicted)", widgets.ms(pred))
    m3.metric(
        "Predicted change",
        widgets.pct((pred - base) / base if base else 0.0),
        delta=widgets.ms(pred - base),
        delta_color="inverse",
    )
    for note in got.scenario.notes:
        st.caption(f"Assumed: {note}")
    per = pd.DataFrame({"label": steps.label, "a_ms": steps.base_ns / 1e6, "b_ms": steps.predicted_ns / 1e6})
    figures.show(
        canvas.step_compare(per, "observed", "predicted", "Job step, observed and predicted"), "job_wi"
    )
    st.dataframe(
        pd.DataFrame(
            {
                "step": steps.label,
                "observed ms": steps.base_ns / 1e6,
                "predicted ms": steps.predicted_ns / 1e6,
                "predicted − observed ms": steps.delta_ns / 1e6,
                "ended by": [f"r{x}" for x in steps.ended_by_before],
                "ended by, predicted": [f"r{x}" for x in steps.ended_by_after],
            }
        ),
        hide_index=True,
        width="stretch",
    )


def render() -> None:
    s = widgets.settings()
    st.title("Job")
    try:
        jobs = jobdata.listing(s.db, data.store_stamp(s.db))
    except StoreError as exc:
        st.error(f"store {s.location}: {exc}")
        return
    if not jobs.names:
        st.info(HOW_TO_STORE)
        return
    share.seed("job_name", jobs.names, share.wanted("job"))  # a shared link's job
    name = widgets.choice("Job", jobs.names, key="job_name", help="A stored multi-rank job.")
    share.put("job", name)
    key = jobdata.job_key(s, jobs, name)
    try:
        job = jobdata.stored(s.db, key, name)
    except StoreError as exc:
        st.error(f"job {name}: {exc}")
        return
    if job.report is None:
        st.info(f"No job {name!r} in the store any more.")
        return
    t = jobdata.tables(key, job.report)
    headline(t)
    figures.show(jobdata.heatmap(key, t), "job_heatmap")
    open_rank(job)
    steps_table(t)
    step_timeline(s, job, key, t)
    waits_and_clocks(t)
    whatif(s, key, name, t)


if __name__ == "__main__":
    render()
