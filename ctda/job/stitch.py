"""Stage (cross-rank, skeletons only): each job step's critical path, walked rank to rank.

Contract: ``skeleton_steps(skeletons, offsets, ends)`` -> the job steps (``ctda.job.steps``,
as ``job_steps`` gives them from the job graph); ``stitched_paths(skeletons, matching,
offsets, steps)`` -> the job path of every step, the same rows the job graph's backtracking
gives, computed from the ranks' collectives and binding chains (``ctda.job.segments``) alone.

The walk: from the job step's end (the completion that ended its last collective), follow
that rank's chain. A chain ends at a collective's completion: the job graph's binding edge
there is the latest of the rank's own (local) predecessor and the other participants'
arrivals, so the walk either stays on the rank or jumps to the rank that arrived last (a
``CROSS_RANK`` row: the transfer). It ends where an edge starts at or before the job step's
start; rows are clipped to the step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.analysis.edges import EdgeType
from ctda.job.match import ClockOffsets, Matching
from ctda.job.skeleton import Skeleton
from ctda.job.steps import define_steps

COLUMNS = ["label", "t0", "t1", "etype", "event", "cls", "ns", "rank", "name"]


def skeleton_steps(skels: dict[int, Skeleton], offsets: ClockOffsets, ends: pd.DataFrame) -> pd.DataFrame:
    """The job steps (``ctda.job.steps``) from the ranks' windows and the collectives' ends."""
    rows = []
    for r, s in skels.items():
        o = offsets.offset.get(r, 0)
        w = s.windows
        for k, (label, step, t0, t1, start, end) in enumerate(
            zip(
                w.label.tolist(),
                w.step.tolist(),
                w.t_start.tolist(),
                w.t_end.tolist(),
                w.start_node.tolist(),
                w.end_node.tolist(),
            )
        ):
            rows.append((label, step, r, k, t0 + o, t1 + o, start, end))
    cols = ["label", "step", "rank", "win", "t_start", "t_end", "start_node", "end_node"]
    return define_steps(pd.DataFrame(rows, columns=cols), ends, sorted(skels))


def stitched_paths(
    skels: dict[int, Skeleton], matching: Matching, offsets: ClockOffsets, steps: pd.DataFrame
) -> pd.DataFrame:
    """The job path of each step from skeletons (rows in time order, ``event`` = job id)."""
    base, acc = {}, 0
    for r in sorted(skels):
        base[r] = acc
        acc += skels[r].n_events
    p = matching.parts
    off = p["rank"].map(offsets.offset).fillna(0).to_numpy(dtype=np.int64)
    arrive = p.t_arrive.to_numpy(dtype=np.int64) + off
    # completion node (rank, node) -> (collective, its event), and each collective's parts
    done_of = {(int(r), 2 * int(e) + 1): (int(c), int(e)) for r, e, c in zip(p["rank"], p.event, p.cid)}
    parts: dict[int, list[tuple[int, int, int]]] = {}
    for c, r, e, t in zip(p.cid.tolist(), p["rank"].tolist(), p.event.tolist(), arrive.tolist()):
        parts.setdefault(c, []).append((r, e, t))
    cls_of = {(int(r), int(e)): int(k) for r, e, k in zip(p["rank"], p.event, p.cls)}
    # each completion's time and name on its rank, looked up once
    done_at = {
        (r, int(e)): (int(t), str(n))
        for r, sk in skels.items()
        for e, t, n in zip(sk.collectives.event, sk.collectives.t_done, sk.collectives["name"])
    }
    # the job's SOURCE: what a rank's RELEASE edges start from in the job graph
    t_source = min(sk.segments.source_time + offsets.offset.get(r, 0) for r, sk in skels.items())
    cols = {r: _rank_columns(sk, r, base[r], offsets.offset.get(r, 0), t_source) for r, sk in skels.items()}
    out = []
    for s in steps.itertuples():
        out.append(_walk_step(skels, cols, offsets, done_of, parts, cls_of, done_at, base, s))
    frame = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=COLUMNS)
    return frame[COLUMNS]


def _rank_columns(sk: Skeleton, rank: int, base: int, off: int, t_source: int) -> dict[str, np.ndarray]:
    """A rank's chain rows as job-clock numpy columns (job event ids), made once per job."""
    rows = sk.segments.rows
    t0 = rows.t0.to_numpy(dtype=np.int64) + off
    t0[rows.etype.to_numpy() == int(EdgeType.RELEASE)] = t_source
    ev = rows.event.to_numpy(dtype=np.int64)
    return {
        "t0": t0,
        "t1": rows.t1.to_numpy(dtype=np.int64) + off,
        "etype": rows.etype.to_numpy(dtype=np.int64),
        "event": np.where(ev >= 0, ev + base, -1),
        "cls": rows.cls.to_numpy(dtype=np.int64),
        "name": _names(rows["name"]),
        "rank": np.full(len(rows), rank, dtype=np.int64),
    }


def _names(col: pd.Series) -> np.ndarray:
    """Strings of a (categorical) name column, decoded through its categories once."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = np.asarray(col.cat.categories.astype(object), dtype=object)
        return cats[col.cat.codes.to_numpy()] if len(cats) else np.full(len(col), "", dtype=object)
    return np.asarray(col.astype(str), dtype=object)


def _walk_step(skels, cols, offsets, done_of, parts, cls_of, done_at, base, s) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    lo, hi = int(s.t_start), int(s.t_end)
    r, v = int(s.end_rank), int(s.end_node)
    pieces: list[dict[str, np.ndarray]] = []
    while True:
        seg = skels[r].segments
        c_r = cols[r]
        if (r, v) in done_of:
            c, ev = done_of[(r, v)]
            a, b, _ = seg.index[v]
            local_t = int(c_r["t0"][a]) if b > a else None
            q, eq, tq = max(((pr, pe, pt) for pr, pe, pt in parts[c] if pr != r), key=lambda x: (x[2], -x[0]))
            if local_t is None or tq > local_t:
                t_done, name = done_at[(r, ev)]
                pieces.append(
                    {
                        "t0": np.array([tq]),
                        "t1": np.array([t_done + offsets.offset.get(r, 0)]),
                        "etype": np.array([int(EdgeType.CROSS_RANK)]),
                        "event": np.array([base[r] + ev]),
                        "cls": np.array([cls_of.get((r, ev), 0)]),
                        "name": np.array([name], dtype=object),
                        "rank": np.array([r]),
                    }
                )
                if tq <= lo:
                    break
                r, v = q, 2 * eq
                continue
        if v not in seg.index:  # SOURCE, or a node nothing binds
            break
        a, b, end = seg.index[v]
        stop = np.flatnonzero(c_r["t0"][a:b] <= lo)
        last = a + int(stop[0]) + 1 if len(stop) else b
        pieces.append({k: col[a:last] for k, col in c_r.items()})
        if len(stop) or b == a or end == seg.source:
            break
        v = end
    if not pieces:
        return pd.DataFrame(columns=COLUMNS)
    path = pd.DataFrame({k: np.concatenate([pc[k] for pc in pieces])[::-1] for k in COLUMNS[1:] if k != "ns"})
    path["ns"] = np.minimum(path.t1, hi) - np.maximum(path.t0, lo)
    path = path[path.ns > 0].reset_index(drop=True)
    path["label"] = s.label
    return path
