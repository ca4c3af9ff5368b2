"""Cypher console: named queries from ctda/queries or typed ones, read-only, as a table and CSV."""

from __future__ import annotations

import re
import time
from typing import Any

import pandas as pd
import streamlit as st

from ctda import api
from ctda.api import NamedQuery, QueryError, QueryParam, StoreError
from ctda.ui import data, widgets

TYPED = "(type a query)"
_PARAM_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def param_input(q: str, p: QueryParam, run: str | None) -> Any:
    """One widget per declared parameter, typed; ``run`` defaults to the current run."""
    key = f"cq_{q}_{p.name}"
    label = f"{p.name} ({p.type})"
    if p.name == "run":
        return st.text_input(label, value=run or "", key=key, help=p.doc)
    if p.type == "int":
        return int(st.number_input(label, value=int(p.default or 0), step=1, key=key, help=p.doc))
    if p.type == "float":
        return float(st.number_input(label, value=float(p.default or 0.0), key=key, help=p.doc))
    if p.type == "bool":
        return st.checkbox(label, value=bool(p.default), key=key, help=p.doc)
    return st.text_input(label, value="" if p.default is None else str(p.default), key=key, help=p.doc)


def typed_params(text: str, run: str | None) -> dict[str, Any]:
    """Parameters a typed query refers to: ``$run`` is the current run, others as JSON literals."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(_PARAM_REF.findall(text)):
        if name == "run":
            out[name] = st.text_input("run", value=run or "", key="cq_typed_run")
        else:
            raw = st.text_input(f"${name}", key=f"cq_typed_{name}", help="a JSON literal, or text")
            out[name] = api.guess_param(raw)
    return out


def render() -> None:
    s = widgets.settings()
    st.title("Cypher console")
    st.caption(
        f"Read-only queries on `{s.location}` ({s.facts.title} dialect), each in a worker "
        "process with a timeout, a row cap and a memory cap (CTDA_QUERY_TIMEOUT_S, "
        "CTDA_QUERY_MAX_ROWS, CTDA_QUERY_MEMORY_MB). "
        "Named queries come from ctda/queries; the data model is described in ctda/store/schema.py."
    )
    queries = api.named_queries()
    pick = widgets.choice("Query", [TYPED, *sorted(queries)], key="cq_pick")
    run = st.session_state.get(widgets.RUN_KEY)
    params: dict[str, Any]
    if pick == TYPED:
        text = st.text_area(
            "Cypher",
            key="cq_text",
            height=160,
            placeholder="MATCH (r:Run) RETURN r.name AS name, r.events AS events ORDER BY name",
        )
        params = typed_params(text, run)
    else:
        q: NamedQuery = queries[pick]
        st.caption(q.description)
        try:
            text = data.named_text(s.db, pick)
        except QueryError as exc:
            st.error(str(exc))
            return
        cols = st.columns(max(len(q.params), 1))
        params = {}
        for col, p in zip(cols, q.params):
            with col:
                params[p.name] = param_input(pick, p, run)
        with st.expander("Query text"):
            st.code(text, language="cypher")
    limit = st.number_input("Show at most", 10, 100_000, 1000, step=100, key="cq_limit")
    if st.button("Run", type="primary", key="cq_run"):
        t = time.perf_counter()
        try:
            res = data.run_query(s.db, text, params)
        except (data.UIError, StoreError, QueryError) as exc:
            st.session_state.pop("cq_result", None)
            st.error(str(exc))
            return
        st.session_state["cq_result"] = (pd.DataFrame(res.rows, columns=res.columns), time.perf_counter() - t)
    got = st.session_state.get("cq_result")
    if got is None:
        return
    df, secs = got
    st.caption(
        f"{len(df):,} row(s) in {secs * 1e3:,.0f} ms"
        + (f"; showing {int(limit):,}" if len(df) > limit else "")
    )
    st.dataframe(df.head(int(limit)), hide_index=True, width="stretch", key="cq_table")
    st.download_button(
        "Download CSV",
        df.to_csv(index=False).encode(),
        file_name=f"{pick if pick != TYPED else 'query'}.csv",
        mime="text/csv",
        key="cq_csv",
    )


if __name__ == "__main__":
    render()
