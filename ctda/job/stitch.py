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
    t0s = {r: _rank_t0(sk, offsets.offset.get(r, 0), t_source) for r, sk in skels.items()}
    # every rank's rows one after the other; a step's path is a list of row ranges in it
    first, acc = {}, 0
    for r in t0s:
        first[r] = acc
        acc += len(t0s[r])
    walk = _Walk(skels, t0s, first, acc, offsets, done_of, parts, cls_of, done_at, base)
    ranges = [walk.step(s) for s in steps.itertuples()]
    if not any(ranges):
        return pd.DataFrame(columns=COLUMNS)
    rows = _Rows(skels, t0s, first, acc, walk.cross, base, offsets)
    return _path_frame(rows, ranges, steps)


class _Rows:
    """The rows a path takes, read from the ranks' chains only where the path has them (the
    ranks' chains are many times longer than the paths through them)."""

    def __init__(self, skels, t0s, first, n_rows, cross, base, offsets):  # type: ignore[no-untyped-def]
        self.skels, self.t0s, self.n_rows, self.cross = skels, t0s, n_rows, cross
        self.ranks = list(first)
        self.firsts = np.array([first[r] for r in self.ranks], dtype=np.int64)
        self.base, self.offsets = base, offsets

    def take(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """Columns (``COLUMNS`` but ``label`` and ``ns``) of rows ``idx``, in that order."""
        keys = [k for k in COLUMNS[1:] if k != "ns"]
        out = {k: np.empty(len(idx), dtype=object if k == "name" else np.int64) for k in keys}
        pos = np.searchsorted(self.firsts, idx, side="right") - 1
        extra = idx >= self.n_rows
        for k in keys:
            out[k][extra] = np.asarray(self.cross[k], dtype=out[k].dtype)[idx[extra] - self.n_rows]
        for j, r in enumerate(self.ranks):
            sel = np.flatnonzero((pos == j) & ~extra)
            if len(sel):
                got = _rank_rows(
                    self.skels[r],
                    r,
                    self.base[r],
                    self.offsets.offset.get(r, 0),
                    self.t0s[r],
                    idx[sel] - self.firsts[j],
                )
                for k in keys:
                    out[k][sel] = got[k]
        return out


def _path_frame(rows: _Rows, ranges: list[list[tuple[int, int]]], steps: pd.DataFrame) -> pd.DataFrame:
    """The steps' rows (each range reversed, the ranges in reverse: time order), clipped to
    their step; rows left empty by the clip are dropped."""
    lo_hi = list(zip(steps.t_start.astype(np.int64).tolist(), steps.t_end.astype(np.int64).tolist()))
    a = np.array([a for rs in ranges for a, _ in reversed(rs)], dtype=np.int64)
    b = np.array([b for rs in ranges for _, b in reversed(rs)], dtype=np.int64)
    step = np.repeat(np.arange(len(ranges)), [len(rs) for rs in ranges])
    n = b - a
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    idx = np.repeat(b - 1, n) - within  # each range from its last row back to its first
    row_step = np.repeat(step, n)
    lo = np.array([x for x, _ in lo_hi], dtype=np.int64)[row_step]
    hi = np.array([y for _, y in lo_hi], dtype=np.int64)[row_step]
    path = pd.DataFrame(rows.take(idx))
    path["ns"] = np.minimum(path.t1.to_numpy(), hi) - np.maximum(path.t0.to_numpy(), lo)
    keep = path.ns.to_numpy() > 0
    path = path[keep].reset_index(drop=True)
    path["label"] = steps.label.to_numpy(dtype=object)[row_step[keep]]
    return path[COLUMNS]


def _rank_t0(sk: Skeleton, off: int, t_source: int) -> np.ndarray:
    """A rank's chain rows' start times on the job clock (a RELEASE edge: the job's SOURCE)."""
    rows = sk.segments.rows
    t0 = rows.t0.to_numpy(dtype=np.int64) + off
    t0[rows.etype.to_numpy() == int(EdgeType.RELEASE)] = t_source
    return t0


def _rank_rows(
    sk: Skeleton, rank: int, base: int, off: int, t0: np.ndarray, at: np.ndarray
) -> dict[str, np.ndarray]:
    """Rows ``at`` of a rank's chains as job-clock columns (job event ids)."""
    rows = sk.segments.rows
    ev = rows.event.to_numpy()[at].astype(np.int64)
    return {
        "t0": t0[at],
        "t1": sk.segments.t1()[at] + off,
        "etype": rows.etype.to_numpy()[at].astype(np.int64),
        "event": np.where(ev >= 0, ev + base, -1),
        "cls": rows.cls.to_numpy()[at].astype(np.int64),
        "name": _names(rows["name"], at),
        "rank": np.full(len(at), rank, dtype=np.int64),
    }


def _names(col: pd.Series, at: np.ndarray) -> np.ndarray:
    """Strings of rows ``at`` of a (categorical) name column, decoded through its categories."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = np.asarray(col.cat.categories.astype(object), dtype=object)
        return cats[col.cat.codes.to_numpy()[at]] if len(cats) else np.full(len(at), "", dtype=object)
    return np.asarray(col.astype(str), dtype=object)[at]


class _Walk:
    """Walks one step's path over the chains; a path is a list of ``[a, b)`` ranges of the
    ranks' concatenated rows (``first[r]``: rank ``r``'s first row) in walk order (latest
    first), a transfer row being one row appended to ``cross`` (indexed from ``n_rows``)."""

    def __init__(self, skels, t0s, first, n_rows, offsets, done_of, parts, cls_of, done_at, base):  # type: ignore[no-untyped-def]
        self.skels, self.t0s, self.first, self.n_rows = skels, t0s, first, n_rows
        self.offsets, self.done_of, self.parts = offsets, done_of, parts
        self.cls_of, self.done_at, self.base = cls_of, done_at, base
        self.cross: dict[str, list[object]] = {k: [] for k in COLUMNS[1:] if k != "ns"}

    def _transfer(self, r: int, ev: int, tq: int) -> tuple[int, int]:
        t_done, name = self.done_at[(r, ev)]
        row = {
            "t0": tq,
            "t1": t_done + self.offsets.offset.get(r, 0),
            "etype": int(EdgeType.CROSS_RANK),
            "event": self.base[r] + ev,
            "cls": self.cls_of.get((r, ev), 0),
            "name": name,
            "rank": r,
        }
        k = self.n_rows + len(self.cross["t0"])
        for key, v in row.items():
            self.cross[key].append(v)
        return (k, k + 1)

    def step(self, s) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
        lo = int(s.t_start)
        r, v = int(s.end_rank), int(s.end_node)
        pieces: list[tuple[int, int]] = []
        while True:
            seg = self.skels[r].segments
            t0 = self.t0s[r]
            if (r, v) in self.done_of:
                c, ev = self.done_of[(r, v)]
                a, b, _ = seg.index[v]
                local_t = int(t0[a]) if b > a else None
                q, eq, tq = max(
                    ((pr, pe, pt) for pr, pe, pt in self.parts[c] if pr != r), key=lambda x: (x[2], -x[0])
                )
                if local_t is None or tq > local_t:
                    pieces.append(self._transfer(r, ev, tq))
                    if tq <= lo:
                        break
                    r, v = q, 2 * eq
                    continue
            if v not in seg.index:  # SOURCE, or a node nothing binds
                break
            a, b, end = seg.index[v]
            stop = np.flatnonzero(t0[a:b] <= lo)
            last = a + int(stop[0]) + 1 if len(stop) else b
            pieces.append((self.first[r] + a, self.first[r] + last))
            if len(stop) or b == a or end == seg.source:
                break
            v = end
        return pieces
