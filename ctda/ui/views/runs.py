"""Runs page: what the store holds, ingest by upload, delete."""

from __future__ import annotations

from typing import Any

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
    for r, breakdown in zip(runs, data.run_breakdowns(s, runs), strict=True):
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
                "CP breakdown": breakdown,
                "events": r.events,
                "ingested at": r.ingested_at.replace("T", " ").replace("+00:00", " UTC"),
            }
        )
    return pd.DataFrame(rows)


#: the table's columns in order (the numbers right-aligned); the source files are listed
#: under it, where a long path can wrap (in the table it pushed the table past 1280 px)
SHOWN = ("run", "steps", "mean step (ms)", CP_COLUMN, "CP breakdown", "events", "ingested at")
_MS = ("mean step (ms)", CP_COLUMN)
_COUNTS = ("steps", "events")


def as_markdown(df: pd.DataFrame) -> str:
    """The runs table as a Markdown table (every name escaped), then each run's source file.

    Not a data grid: the first page a session opens is this one, and the grid's script
    (~1.3 MB with its Arrow formatting) took 0.4 s of the app's first load in the browser
    here (2.2 s against 1.4 s, medians of five fresh browsers), for a list of a few runs.
    """

    def cell(col: str, v: Any) -> str:
        if col in _MS:
            return "-" if v != v else f"{float(v):,.3f}"  # NaN: a run without steps
        if col in _COUNTS:
            return f"{int(v):,}"
        return widgets.md(one_line(v))  # a newline would end the table

    head = "| " + " | ".join(widgets.md(c) for c in SHOWN) + " |"
    rule = "|" + "|".join("---:" if c in _MS + _COUNTS else ":---" for c in SHOWN) + "|"
    records = df.to_dict("records")
    rows = ["| " + " | ".join(cell(c, r[c]) for c in SHOWN) + " |" for r in records]
    files = [f"- {widgets.md(one_line(r['run']))}: {code(one_line(r['source file']))}" for r in records]
    return "\n".join([head, rule, *rows, "", "Source files:", "", *files])


def one_line(v: object) -> str:
    return " ".join(str(v).split())


def code(text: str) -> str:
    """``text`` as inline code (it wraps anywhere), or escaped where it holds a backtick."""
    return widgets.md(text) if "`" in text else f"`{text}`"


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
        st.markdown(as_markdown(table(s, runs)))
        st.caption(
            "Mean step and mean critical path: over the run's steps (ms). CP breakdown: the share "
            "of the whole critical path each class bounds."
        )
    else:
        st.info(f"The store `{s.location}` holds no runs yet.")
    ingest_form(s)
    delete_form(s, runs)


if __name__ == "__main__":
    render()
