"""Bring a store written by an older schema version up to this one.

Each step is a function of the rows the old layout holds, so both backends share it; each
backend applies the result its own way (Ladybug must recreate a relationship table whose
endpoints changed, Neo4j re-points relationships in place). The version in ``Meta`` moves
only after a step completed, so a step cut short is redone by the next writer.

Schema 1 -> 2: critical paths hung off their ``Window`` node; they now hang off
``Segment`` nodes of at most :data:`schema.SEGMENT_SIZE` stretches (see :mod:`schema`).

Schema 2 -> 3: distributed jobs. Only new tables (labels), which every writer's DDL
creates when missing, so the step itself moves no rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctda.errors import CtdaError
from ctda.store import schema

if TYPE_CHECKING:
    import pyarrow as pa

#: schema 1's paths with what a segment needs of its window (Ladybug returns Arrow)
V1_PATHS = (
    "MATCH (w:Window)-[c:CP]->(e:Event) "
    "RETURN w.key AS window_key, w.run_id AS run_id, w.scenario AS scenario, w.idx AS window, "
    "e.key AS event_key, " + ", ".join(f"c.{p} AS {p}" for p in schema.CP.columns)
)


def v1_segments(paths: pa.Table) -> dict[str, pa.Table]:
    """Segment, HAS_SEGMENT and CP rows (ready for COPY) for schema 1's ``paths``
    (the columns of :data:`V1_PATHS`)."""
    # the engine's tables load only for a migration: a reader asks :func:`outdated` alone
    import numpy as np
    import pyarrow as pa

    from ctda.store.model import path_segments

    out: dict[str, list[pa.Table]] = {"Segment": [], "HAS_SEGMENT": [], "CP": []}
    keys = paths.column("window_key").to_numpy(zero_copy_only=False).astype(str)
    wkeys, w = np.unique(keys, return_inverse=True)
    first = np.unique(w, return_index=True)[1]
    run_of = np.asarray(paths.column("run_id").to_numpy(), np.int64)
    scen_of = paths.column("scenario").to_numpy(zero_copy_only=False).astype(str)
    widx_of = np.asarray(paths.column("window").to_numpy(), np.int64)
    pos = np.asarray(paths.column("pos").to_numpy(), np.int64)
    # one call per (run, scenario): a segment row carries both
    groups = sorted({(int(run_of[i]), str(scen_of[i])) for i in first})
    for run_id, scen in groups:
        rows = np.flatnonzero((run_of == run_id) & (scen_of == scen))
        segs = path_segments(run_id, scen, w[rows], list(wkeys), widx_of[first], pos[rows])
        out["Segment"].append(segs.rows)
        out["HAS_SEGMENT"].append(segs.links)
        cp = paths.take(pa.array(rows))
        out["CP"].append(
            pa.table(
                {"from": segs.cp_from(), "to": cp.column("event_key")}
                | {c: cp.column(c) for c in schema.CP.columns}
            )
        )
    return {name: pa.concat_tables(parts) for name, parts in out.items() if parts}


#: schema 1 -> 2 on Neo4j, one batch of stretches per call (it returns how many it moved)
V1_TO_V2_NEO4J = (
    "MATCH (w:Window)-[c:CP]->(e:Event) WITH w, c, e LIMIT $n "
    "WITH w, c, e, c.pos / $size AS k "
    "MERGE (g:Segment {key: w.key + '/' + toString(k)}) "
    "ON CREATE SET g.run_id = w.run_id, g.scenario = w.scenario, g.window = w.idx, "
    "g.idx = k, g.pos = k * $size "
    "MERGE (w)-[:HAS_SEGMENT]->(g) "
    "CREATE (g)-[x:CP]->(e) SET x = properties(c) "
    "DELETE c RETURN count(*) AS n"
)


def outdated(store: Any) -> bool:
    """The store was written by an older schema: a reader must have it migrated first."""
    try:
        have = store._read("MATCH (m:Meta {key: $k}) RETURN m.schema_version AS v", {"k": schema.META_KEY})
    except CtdaError:  # no schema at all yet: nothing to migrate
        return False
    return bool(have) and have[0]["v"] is not None and int(have[0]["v"]) < schema.SCHEMA_VERSION


def backfill_breakdowns(store: Any) -> None:
    """Give every run of a store older than the breakdown tables its rows, computed from the
    analysis snapshot stored with it (a run without one keeps none: re-ingest it)."""
    from ctda.analysis import snapshot
    from ctda.store.model import breakdown_rows, keyed_rows

    for run in store.runs(include_incomplete=True):
        blob = store.get_blob(run.id, "snapshot")
        if blob is None:
            continue
        for name, rows in breakdown_rows(snapshot.load(blob)).items():
            # a backfill cut short left some: start the run's rows afresh
            store._write(f"MATCH (x:{name}) WHERE x.run_id = $r DELETE x", {"r": run.id})
            label = next(x for x in schema.BREAKDOWN_LABELS.values() if x.name == name)
            store._add_nodes(label, keyed_rows(run.id, rows))
