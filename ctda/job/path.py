"""Stage: per job step, the job's critical path, its collectives split into wait and
transfer, and the stragglers.

Contract: ``job_steps(jg, ends)`` -> one row per step the ranks share (bounded by its
collectives: ``ctda.job.steps``); ``job_paths(jg, steps)`` -> the path of each job step through every
rank, each row charged to an event of one rank (``ns`` sums to the job step);
``collective_waits(matching, offsets, base, paths)`` -> each collective completion on the path split
into waiting for the last rank to arrive and the transfer after it; ``lateness`` and
``stragglers`` -> each rank's lateness at each collective of a step, the step's straggler
and the path's top items on it in that step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ctda.analysis import attribution
from ctda.analysis.classify import CLASSES
from ctda.analysis.propagate import Timing
from ctda.analysis.windows import Window
from ctda.job.graph import JobGraph
from ctda.job.hostload import NOISE, bare
from ctda.job.match import ClockOffsets, Matching
from ctda.job.steps import define_steps

#: items of the path on the straggler listed per step
TOP_ITEMS = 3


def job_steps(jg: JobGraph, ends: pd.DataFrame, timing: Timing | None = None) -> pd.DataFrame:
    """The job steps (``ctda.job.steps``) at the job graph's replayed times (or ``timing``'s,
    a re-timed job): the ranks' windows and ``ends`` (:func:`ctda.job.steps.collective_ends`;
    their ``t_done`` is re-read from the timing)."""
    timing = timing or jg.timing
    if len(ends):
        node = (
            2 * (ends.event.to_numpy(dtype=np.int64) + ends["rank"].map(jg.base).to_numpy(dtype=np.int64)) + 1
        )
        ends = ends.assign(t_done=timing.time[node])
    rows = []
    for r in jg.ranks:
        for k, w in enumerate(jg.windows[r]):
            t0, t1 = int(timing.time[w.start_node]), int(timing.time[w.end_node])
            start, end = _local_node(jg, r, w.start_node), _local_node(jg, r, w.end_node)
            rows.append((w.label, w.step if w.step is not None else -1, r, k, t0, t1, start, end))
    cols = ["label", "step", "rank", "win", "t_start", "t_end", "start_node", "end_node"]
    return define_steps(pd.DataFrame(rows, columns=cols), ends, jg.ranks)


def _rank_size(jg: JobGraph, rank: int) -> int:
    """Events of ``rank`` in the job graph."""
    later = [b for r, b in jg.base.items() if b > jg.base[rank]]
    return (min(later) if later else jg.nodes.n) - jg.base[rank]


def _local_node(jg: JobGraph, rank: int, node: int) -> int:
    """A job graph node as the rank's own node id (the job's SOURCE/SINK: the rank's)."""
    if node >= 2 * jg.nodes.n:
        return 2 * _rank_size(jg, rank) + (node - 2 * jg.nodes.n)
    return node - 2 * jg.base[rank]


def job_node(jg: JobGraph, rank: int, node: int) -> int:
    """A rank's own node id as the job graph's (the rank's SOURCE/SINK: the job's)."""
    n = _rank_size(jg, rank)
    if node >= 2 * n:
        return 2 * jg.nodes.n + (node - 2 * n)
    return node + 2 * jg.base[rank]


def job_paths(jg: JobGraph, steps: pd.DataFrame) -> pd.DataFrame:
    """The critical path of each job step through the job graph, with ranks."""
    wins = []
    s: Any
    for s in steps.itertuples():
        start = job_node(jg, int(s.start_rank), int(s.start_node))
        end = job_node(jg, int(s.end_rank), int(s.end_node))
        wins.append(Window(str(s.label), int(s.step), start, end, -1))
    if not wins:
        return pd.DataFrame(
            columns=["window", "edge", "t0", "t1", "etype", "rule", "event", "cls", "ns", "rank"]
        )
    ch = attribution.window_paths(jg.graph, jg.timing, wins, jg.event_cls)
    g = jg.graph
    # a wait or gap belongs to the rank of the node it leads to (SOURCE/SINK: the edge's source)
    node = np.where(g.dst[ch.edge] < 2 * jg.nodes.n, g.dst[ch.edge], g.src[ch.edge])
    ev_of_node = np.minimum(node // 2, max(jg.nodes.n - 1, 0))
    ev = ch.event.to_numpy()
    ch["rank"] = np.where(ev >= 0, jg.rank_of[np.maximum(ev, 0)], jg.rank_of[ev_of_node])
    ch["label"] = steps.label.to_numpy()[ch.window.to_numpy()]
    ch["name"] = np.where(ev >= 0, jg.names[np.maximum(ev, 0)], "")
    return ch


def collective_waits(
    matching: Matching, offsets: ClockOffsets, base: dict[int, int], paths: pd.DataFrame
) -> pd.DataFrame:
    """Each collective completion on a path: the wait for the last rank and the transfer.

    On the completing rank ``r`` the collective spans ``[arrive_r, done_r]``: up to the last
    participant's arrival it waited for that rank (the path meanwhile runs on that rank),
    after it the transfer itself (the path's row ending at the completion).
    """
    cols = ["label", "cid", "op", "rank", "waited_for", "wait_ns", "transfer_ns"]
    p = matching.parts
    if len(p) == 0 or len(paths) == 0:
        return pd.DataFrame(columns=cols)
    off = p["rank"].map(offsets.offset).fillna(0).to_numpy(dtype=np.int64)
    p = p.assign(
        event=p.event.to_numpy() + p["rank"].map(base).to_numpy(), arr=p.t_arrive + off, done=p.t_done + off
    )
    last = p.loc[p.groupby("cid").arr.idxmax(), ["cid", "rank", "arr"]]
    p = p.merge(last.rename(columns={"rank": "waited_for", "arr": "last_arrive"}), on="cid")
    hit = paths[["label", "event", "t1", "ns"]].merge(p, left_on=["event", "t1"], right_on=["event", "done"])
    if hit.empty:
        return pd.DataFrame(columns=cols)
    hit["wait_ns"] = np.maximum(hit.last_arrive - hit.arr, 0)
    hit["transfer_ns"] = hit.ns
    return hit[cols].reset_index(drop=True)


def lateness(
    offsets: ClockOffsets, matching: Matching, skeleton_windows: dict[int, list[str]]
) -> pd.DataFrame:
    """Each rank's arrival at each collective minus the median arrival of its participants.

    ``skeleton_windows`` maps rank -> its window labels (the ``window`` index of a skeleton
    row is a position in it); a collective belongs to the step its earliest part ran in.
    """
    p = matching.parts
    if len(p) == 0:
        return pd.DataFrame(columns=["label", "cid", "op", "rank", "late_ns"])
    off = p["rank"].map(offsets.offset).fillna(0).to_numpy(dtype=np.int64)
    p = p.assign(arr=p.t_arrive + off)
    p["late_ns"] = (p.arr - p.groupby("cid").arr.transform("median")).round().astype(np.int64)
    label = [skeleton_windows[int(r)][int(w)] if w >= 0 else "" for r, w in zip(p["rank"], p["window"])]
    p["label"] = label
    first = p.sort_values("arr").groupby("cid").label.first()
    p["label"] = p.cid.map(first)
    return p[["label", "cid", "op", "rank", "late_ns"]]


def stragglers(
    late: pd.DataFrame,
    paths: pd.DataFrame,
    steps: pd.DataFrame,
    moved: pd.DataFrame | None = None,
    extra: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per step: each rank's total lateness, the straggler, and the path's top items on it.

    ``moved`` (``hostload``): per collective part, the stall time a rank spent before it
    arrived that other ranks' extra work on its host caused (``charged_ns``, by cause ``by``).
    The straggler is the rank with the largest lateness once that time is
    charged to its cause; with nothing moved (other hosts, no extra work) it is the latest
    to arrive. ``last`` is the latest to arrive either way. When the path does not visit the
    straggler in a step (it ran on the ranks it slowed), or the straggler is not the latest
    to arrive, its largest extra work is listed first.
    """
    by_rank = late.groupby(["label", "rank"]).late_ns.sum()
    charged = by_rank.copy()
    if moved is not None and len(moved):
        charged = charged.add(_charged_shift(late, moved), fill_value=0)
    late_of, charged_of = _by_label(by_rank), _by_label(charged)
    top_of = _top_items(paths[paths.event >= 0])
    extra_top = {}
    if extra is not None:
        for label, r, name, ns in zip(extra.label, extra["rank"], extra.top_name, extra.top_ns):
            extra_top[(label, int(r))] = (-1, str(name), int(ns), "extra work")
    rows: list[tuple[object, ...]] = []
    for label in steps.label.tolist():
        ranks, lates = late_of.get(label, _NONE)
        c_ranks, c_vals = charged_of.get(label, _NONE)
        if len(ranks) == 0 or c_vals.max() <= 0:
            rows.append((label, -1, 0, {}, [], -1, {}))
            continue
        strag = int(c_ranks[np.argmax(c_vals)])
        last = int(ranks[np.argmax(lates)]) if lates.max() > 0 else -1
        listed = list(top_of.get((label, strag), []))
        if (label, strag) in extra_top and (not listed or strag != last):
            # named for what its extra work did to others: that work is what it was doing
            x = extra_top[(label, strag)]
            same = [it for it in listed if bare(it[1]) == bare(x[1])]
            first = same[0] if same else x
            listed = [first, *(it for it in listed if it is not first)][:TOP_ITEMS]
        late_by = {int(k): int(v) for k, v in zip(ranks.tolist(), lates.tolist())}
        charged_by = {int(k): round(float(v)) for k, v in zip(c_ranks.tolist(), c_vals.tolist())}
        rows.append((label, strag, round(float(c_vals.max())), late_by, listed, last, charged_by))
    return pd.DataFrame(
        rows,
        columns=["label", "straggler", "late_ns", "late_by_rank", "top_items", "last", "charged_by_rank"],
    )


_NONE = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def _by_label(s: pd.Series) -> dict[object, tuple[np.ndarray, np.ndarray]]:
    """A (label, rank)-indexed series as label -> (ranks, values), in the series' order
    (what ``s.loc[label]`` gives, without a lookup per step)."""
    codes, uniq = pd.factorize(s.index.get_level_values(0))
    order = np.argsort(codes, kind="stable")
    ranks = s.index.get_level_values(1).to_numpy()[order]
    vals = s.to_numpy()[order]
    cuts = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    return {u: (ranks[cuts[k] : cuts[k + 1]], vals[cuts[k] : cuts[k + 1]]) for k, u in enumerate(uniq)}


def _top_items(on_path: pd.DataFrame) -> dict[tuple[object, int], list[tuple[int, str, int, str]]]:
    """Per (step, rank): the path's ``TOP_ITEMS`` events on that rank by time (ties: the
    lower event id), as (event, name, ns, class); an event's name and class are those of
    its last row on the path."""
    items = on_path.groupby(["label", "rank", "event"], observed=True).ns.sum().reset_index()
    items = items.sort_values(["label", "rank", "ns", "event"], ascending=[True, True, False, True])
    items = items.groupby(["label", "rank"], observed=True, sort=False).head(TOP_ITEMS)
    last = on_path.drop_duplicates("event", keep="last").set_index("event")
    ev = items.event.to_numpy()
    names = last["name"].astype(str).reindex(ev).tolist()
    classes = last.cls.reindex(ev).tolist()
    out: dict[tuple[object, int], list[tuple[int, str, int, str]]] = {}
    for label, r, e, ns, name, c in zip(
        items.label, items["rank"].tolist(), ev.tolist(), items.ns.tolist(), names, classes
    ):
        out.setdefault((label, int(r)), []).append((int(e), name, int(ns), CLASSES[int(c)]))
    return out


def _charged_shift(late: pd.DataFrame, moved: pd.DataFrame) -> pd.Series:
    """Per (step, rank): lateness taken from the ranks stalled and given to the cause.

    A part's stalls move at most its own lateness (``max(late, 0)``): a stall on a rank
    that still arrived early delayed nobody, so it makes its cause no later.
    """
    m = moved.merge(late[["cid", "rank", "label", "late_ns"]], on=["cid", "rank"])
    got = m.groupby(["cid", "rank"]).charged_ns.transform("sum").to_numpy(dtype=np.float64)
    cap = np.maximum(m.late_ns.to_numpy(dtype=np.float64), 0.0)
    moved_ns = m.charged_ns.to_numpy(dtype=np.float64) * np.minimum(1.0, cap / np.maximum(got, 1.0))
    taken = pd.Series(-moved_ns).groupby([m.label.to_numpy(), m["rank"].to_numpy()]).sum()
    cause = m.by.to_numpy() != NOISE  # unexplained stall time is given to no rank
    given = pd.Series(moved_ns[cause]).groupby([m.label.to_numpy()[cause], m.by.to_numpy()[cause]]).sum()
    out = taken.add(given, fill_value=0)
    out.index = out.index.set_names(["label", "rank"])
    return out


def path_by_rank(paths: pd.DataFrame) -> pd.DataFrame:
    """Per step and rank: time of the job path spent on that rank's events and waits."""
    if len(paths) == 0:
        return pd.DataFrame(columns=["label", "rank", "ns"])
    return paths.groupby(["label", "rank"], sort=False).ns.sum().reset_index()
