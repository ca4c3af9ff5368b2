"""Runs page: what the store holds, ingest by upload, delete."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from ctda.api import RunInfo
from ctda.ui import data, widgets
from ctda.ui.settings import Settings

UPLOAD_TYPES = ["json", "gz", "parquet"]


#: the critical path per step, the mean over the run's steps, like "mean step (ms)"
CP_COLUMN = "mean critical path (ms)"


def table(s: Settings, runs: list[RunInfo]) -> pd.DataFrame:
    """One row per run: what it is, its step time and what bounds its critical path."""
    rows = []
    for r in runs:
        ref = data.RunRef.of(s.location, r)
        step_ms = float(np.mean(r.step_ns)) / 1e6 if r.step_ns else float("nan")
        # per step like the step time beside it (the run holds the sum over its steps)
        cp_ms = r.cp_ns / 1e6 / r.steps if r.steps else float("nan")
        rows.append(
            {
                "run": r.name,
                "source file": r.file,
                "steps": r.steps,
                "mean step (ms)": step_ms,
                CP_COLUMN: cp_ms,
                "CP breakdown": data.run_breakdown(s.db, ref.tag, r.name),
                "events": r.events,
                "ingested at": r.ingested_at,
            }
        )
    return pd.DataFrame(rows)


def ingest_form(s: Settings) -> None:
    st.subheader("Ingest a trace")
    st.caption(
        f"A Kineto trace (.json, .json.gz) or a ctda .parquet table, up to {s.max_upload_mb:,} MB. "
        f"Uploaded files are kept in `{s.uploads_dir}`."
    )
    up = st.file_uploader("Trace file", type=UPLOAD_TYPES, key="upload")
    c1, c2 = st.columns([3, 1])
    name = c1.text_input("Run name", key="upload_name", placeholder="default: the file name")
    force = c2.checkbox("Replace a run of the same name", key="upload_force")
    if not st.button("Ingest", type="primary", disabled=up is None, key="ingest"):
        return
    assert up is not None
    bar = st.progress(0.0, text="saving the upload")

    def step(text: str, frac: float) -> None:
        bar.progress(min(max(frac, 0.0), 1.0), text=text)

    try:
        out = data.ingest_upload(s, up.name, up.getvalue(), name=name, force=force, step=step)
    except data.UIError as exc:
        bar.empty()
        st.error(str(exc))
        return
    bar.empty()
    widgets.forget_runs()
    info = out.run
    if out.stored:
        widgets.flash(
            "success",
            f"Stored run **{widgets.md(info.name)}**: {info.events:,} events, {info.steps} step(s), "
            f"critical path {info.cp_ns / 1e6:,.3f} ms.",
        )
    else:
        widgets.flash("info", f"Already stored as run **{widgets.md(info.name)}** (same file and options).")
    widgets.select_run(info.name)
    st.rerun()


def delete_form(s: Settings, runs: list[RunInfo]) -> None:
    st.subheader("Delete a run")
    if not runs:
        st.caption("Nothing to delete.")
        return
    if st.session_state.pop("_delete_done", False):
        st.session_state["delete_sure"] = False  # ask again for the next one
    c1, c2, c3 = st.columns([3, 2, 1])
    name = widgets.choice("Run to delete", [r.name for r in runs], key="delete_name", where=c1)
    sure = c2.checkbox("Yes, delete it and its scenarios", key="delete_sure")
    if c3.button("Delete", disabled=not sure, key="delete"):
        try:
            gone = data.delete_run(s, name)
        except Exception as exc:  # a store error must not take the page down
            st.error(f"could not delete {name}: {exc}")
            return
        widgets.forget_runs()
        if gone:
            widgets.flash("success", f"Deleted run **{widgets.md(name)}**.")
        else:
            widgets.flash("warning", f"No run {name!r} (already deleted?).")
        st.session_state["_delete_done"] = True
        st.rerun()


def render() -> None:
    s = widgets.settings()
    st.title("Runs")
    widgets.show_flash()
    runs = widgets.runs(s)
    if runs:
        st.dataframe(
            table(s, runs),
            hide_index=True,
            width="stretch",
            column_config={
                "run": st.column_config.TextColumn(width="medium", pinned=True),
                "mean step (ms)": st.column_config.NumberColumn(format="%.3f", width="small"),
                CP_COLUMN: st.column_config.NumberColumn(
                    format="%.3f", width="small", help="critical-path time of a step, the mean over the steps"
                ),
                "steps": st.column_config.NumberColumn(width="small"),
                "events": st.column_config.NumberColumn(width="small"),
                "CP breakdown": st.column_config.TextColumn(width="medium"),
                # long paths would push every other column off screen: narrow and last,
                # the whole path shows when the cell is hovered or widened
                "source file": st.column_config.TextColumn(
                    width="small", help="the trace the run was read from"
                ),
            },
            column_order=[
                "run",
                "steps",
                "mean step (ms)",
                CP_COLUMN,
                "CP breakdown",
                "events",
                "ingested at",
                "source file",
            ],
        )
    else:
        st.info(f"The store `{s.location}` holds no runs yet.")
    ingest_form(s)
    delete_form(s, runs)


if __name__ == "__main__":
    render()
