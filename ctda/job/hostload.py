"""Stage: ranks of one host slowing each other down (host contention between processes).

Ranks that share a host share its cores. When the host runs more busy threads than it has
cores, a rank doing *extra work* (work the other ranks do not do in that step: an injected
loop, a heavier data pipeline) takes cores from its neighbours, whose *common* ops then
stall: they take far longer than the same op usually does, and the neighbour arrives late
at the next collective for a reason that is not its own. Lateness alone names the victim.

Contract:

- worker side, ``work_table(a, done)`` -> :class:`Work`: the rank's CPU events inside its
  windows with the fields the cross-rank stage needs (window, name, occurrence, span, self
  time, whether it took a core, whether it may stall), plus per window and name the count
  of events (to tell a rank's extra work from common work without sending every event);
- cross-rank, ``host_contention(skels, parts, offsets, labels)`` -> :class:`HostLoad`:
  the stalls charged to other ranks' extra work (``slowed``) and, per collective part, the
  lateness moved from the stalled rank to the rank whose extra work caused it.

The definitions (``docs/host-contention.md#definitions``, with inputs and limits):

- **Extra work** of rank r in step s: its k-th event of a name beyond the fewest any rank
  had of that name in s (so every rank has the first ``min`` of them); the rank's other
  events are *common*. Names drop object addresses (``at 0x...``), which differ per process.
- **Stall**: a common op (not a blocking wait, not communication, and not open while one
  of the rank's collectives completed, since it may then have waited for peers) whose self
  time is at least ``STALL_RATIO`` times, and ``STALL_MIN_NS`` more than, the median self
  time of the same op (name and occurrence) over every rank and step. Its *excess* is the
  self time minus that median.
- A stall's excess is charged to the other ranks *of the same host* in proportion to how
  much of the stall's span their busy extra work (not blocked, self time) overlapped; what
  their overlap does not cover stays unexplained. Ranks on other hosts, or with no host
  recorded, charge nothing; a rank with no extra work charges nothing.
- Unexplained excess on a host contended in the step (some stall charged there), of a rank
  doing no busy extra work itself, leaves the stalled rank's lateness for no rank
  (``NOISE``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.classify import CLASS_CODE
from ctda.analysis.contention import _timeline_edges
from ctda.analysis.engine import Analysis
from ctda.analysis.intervals import intersect
from ctda.analysis.rules.cross_thread import BLOCKING_FRAMES
from ctda.analysis.tables import per_name
from ctda.job.names import NameCodes

I64 = npt.NDArray[np.int64]
#: a common op stalled when its self time is this many times its median ...
STALL_RATIO = 4.0
#: ... and at least this much longer (shorter excesses are scheduling noise on any host)
STALL_MIN_NS = 2_000_000
#: events with less self time are not sent back (they can neither stall nor overlap much)
KEEP_NS = 100_000
#: ``etype`` of a job path row that is a stall's wait for another rank's extra work: not an
#: edge of any graph, so outside ``EdgeType``'s codes (docs/host-contention.md)
HOST_ROW = 100
#: the ``by`` of stall time no rank's work explains (charged to no rank, see ``_unexplained``)
NOISE = -1
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

WORK_COLUMNS = ["window", "event", "name", "k", "t0", "t1", "self_ns", "busy", "may_stall", "cls"]
#: per step and rank: its extra work's self time, and its largest extra event (rank-local index)
EXTRA_COLUMNS = ["label", "rank", "extra_ns", "top_name", "top_ns", "top_event"]
SLOWED_COLUMNS = [
    "label",
    "rank",
    "event",
    "event_name",
    "t0",
    "t1",
    "self_ns",
    "excess_ns",
    "by",
    "by_event",
    "by_name",
    "by_cls",
    "by_t1",
    "charged_ns",
]


@dataclass
class Work:
    """One rank's CPU work per window: events (``WORK_COLUMNS``) and counts per name."""

    events: pd.DataFrame
    counts: pd.DataFrame  # window, name, n


@dataclass
class HostLoad:
    """Stalls charged to other ranks' extra work, and the lateness moved with them.

    ``slowed``: one row per (stall, extra event beside it): the stalled ``rank`` and
    ``event`` (rank-local analysed index), the op, its span (job clock), self time and
    excess, the rank ``by`` and event ``by_event`` whose busy extra work overlapped it, and
    the part of the excess charged to that event. ``moved``: per collective part (``cid``,
    ``rank``) and causing rank ``by`` (``NOISE``: no rank), the charged stall time the
    part's rank spent before it arrived. ``extra``: per step and rank, the self time of its
    extra work and its largest extra event.
    """

    slowed: pd.DataFrame
    moved: pd.DataFrame
    extra: pd.DataFrame
    #: per step and rank, the excess of all its stalls (charged to others or not)
    stalls: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["label", "rank", "stall_ns"]))


def bare(name: str) -> str:
    """One event name without object addresses."""
    return _ADDRESS.sub("", name)


def normalize(names: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
    """Event names without object addresses (``<built-in method conv2d of ... at 0x7f..>``)."""
    return per_name(names, bare, object)


def work_table(a: Analysis, window: I64, done: I64, names: NameCodes | None = None) -> Work:
    """The rank's CPU events in its windows (``window``: per analysed event, -1 outside;
    ``names``: of the analysed events).

    ``done``: completion times of the rank's collectives (its clock); an event open while
    one completed may have waited for peers, so it neither stalls nor counts as busy.
    """
    n, g = a.nodes, a.graph
    e = _timeline_edges(g)
    own = g.owner[e]
    d = (n.time[g.dst[e]] - n.time[g.src[e]]).astype(np.float64)
    self_ns = np.bincount(own[own >= 0], weights=d[own >= 0], minlength=n.n).astype(np.int64)
    ev = np.flatnonzero(~n.is_gpu & (window >= 0))
    ev = ev[np.lexsort((n.ts[ev], window[ev]))]
    # names without addresses, as codes: grouped as integers, sent back as categories
    bare_names = (names or NameCodes.of(a.table, n.uid))[ev].mapped(bare)
    frame = pd.DataFrame({"window": window[ev], "name": bare_names.codes, "event": ev})
    frame["k"] = frame.groupby(["window", "name"], sort=False).cumcount()
    counts = frame.groupby(["window", "name"], sort=False).size().reset_index(name="n")
    done = np.sort(done)
    # a completion inside (ts, end]: the event may have been waiting for the collective
    waited = np.searchsorted(done, n.end[ev], side="right") > np.searchsorted(done, n.ts[ev], side="right")
    rx = re.compile(BLOCKING_FRAMES)
    blocking = bare_names.map(lambda v: rx.match(v) is not None, bool)
    comm = a.event_cls[ev] == CLASS_CODE["communication"]
    frame["t0"], frame["t1"], frame["self_ns"] = n.ts[ev], n.end[ev], self_ns[ev]
    frame["busy"] = ~blocking & ~waited
    frame["may_stall"] = ~blocking & ~waited & ~comm
    frame["cls"] = a.event_cls[ev].astype(np.int8)
    keep = frame.self_ns.to_numpy() >= KEEP_NS
    events = frame.loc[keep, WORK_COLUMNS].reset_index(drop=True)
    # names as categories: each distinct name is sent back once, not once per event
    events["name"] = NameCodes(events.name.to_numpy(dtype=np.int64), bare_names.values).categorical()
    counts["name"] = NameCodes(counts.name.to_numpy(dtype=np.int64), bare_names.values).categorical()
    return Work(events, counts)


def host_contention(
    works: dict[int, Work],
    hosts: dict[int, str | None],
    labels: dict[int, list[str]],
    offsets: dict[int, int],
    parts: pd.DataFrame,
    steps: list[str],
) -> HostLoad:
    """Charge stalls to same-host ranks' extra work; move the lateness they caused."""
    w, counts = _gather(works, labels, offsets, steps)
    empty = HostLoad(
        pd.DataFrame(columns=SLOWED_COLUMNS),
        pd.DataFrame(columns=["cid", "rank", "by", "charged_ns"]),
        pd.DataFrame(columns=EXTRA_COLUMNS),
    )
    if w.empty:
        return empty
    ranks = sorted(works)
    # fewest of each name any rank had in the step: the others' k-th beyond it is extra
    per = counts.pivot_table(index=["label", "name"], columns="rank", values="n", aggfunc="sum", fill_value=0)
    per = per.reindex(columns=ranks, fill_value=0)
    common = per.min(axis=1).rename("common")
    w = w.join(common, on=["label", "name"])
    w["extra"] = w.k.to_numpy() >= w.common.fillna(0).to_numpy()
    extra = _extra(w)
    w["med"] = _median_self(w, per.min(axis=1), len(ranks))
    stall = w[
        ~w.extra & w.may_stall & (w.self_ns >= STALL_RATIO * w.med) & (w.self_ns - w.med >= STALL_MIN_NS)
    ]
    busy = w[w.extra & w.busy]
    host = {r: hosts.get(r) for r in ranks}
    slowed = _charge(stall, busy, host)
    stalls = (stall.self_ns - stall.med).groupby([stall.label, stall["rank"]]).sum().rename("stall_ns")
    stalls = stalls.round().astype(np.int64).reset_index()
    if slowed.empty:
        return HostLoad(empty.slowed, empty.moved, extra, stalls)
    noise = _unexplained(stall, slowed, busy, host)
    charges = pd.concat([slowed, noise], ignore_index=True) if len(noise) else slowed
    moved = _moved(charges, parts, offsets)
    return HostLoad(slowed, moved, extra, stalls)


def _gather(
    works: dict[int, Work], labels: dict[int, list[str]], offsets: dict[int, int], steps: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every rank's rows on the job clock, with step labels; only steps every rank has."""
    rows, counts = [], []
    for r, wk in works.items():
        lab = np.array(labels[r] or [""], dtype=object)
        ev = wk.events.assign(rank=r, label=lab[wk.events.window.to_numpy()])
        off = offsets.get(r, 0)
        ev["t0"] = ev.t0 + off
        ev["t1"] = ev.t1 + off
        rows.append(ev)
        counts.append(wk.counts.assign(rank=r, label=lab[wk.counts.window.to_numpy()]))
    w = pd.concat(rows, ignore_index=True)
    c = pd.concat(counts, ignore_index=True)
    w["name"] = w.name.astype(object)
    c["name"] = c.name.astype(object)
    keep = set(steps)
    return w[w.label.isin(keep)].reset_index(drop=True), c[c.label.isin(keep)]


def _extra(w: pd.DataFrame) -> pd.DataFrame:
    """Per step and rank: self time of its extra work and its largest extra event."""
    x = w[w.extra]
    if x.empty:
        return pd.DataFrame(columns=EXTRA_COLUMNS)
    tot = x.groupby(["label", "rank"]).self_ns.sum().rename("extra_ns")
    top = x.sort_values("self_ns", ascending=False, kind="stable").groupby(["label", "rank"]).head(1)
    top = top.set_index(["label", "rank"])[["name", "self_ns", "event"]].rename(
        columns={"name": "top_name", "self_ns": "top_ns", "event": "top_event"}
    )
    return pd.concat([tot, top], axis=1).reset_index()


def _median_self(w: pd.DataFrame, common: pd.Series, n_ranks: int) -> npt.NDArray[np.float64]:
    """Per row: the median self time of its op (name, occurrence) over every rank and step
    that has it as common work; instances not sent back (below ``KEEP_NS``) count as 0."""
    m = w.loc[~w.extra, ["name", "k", "self_ns"]]
    if m.empty:
        return np.zeros(len(w))
    # instances of (name, k): the steps whose common count of the name exceeds k, times ranks
    cnt = common.rename("common").reset_index()[["name", "common"]]
    keys = m[["name", "k"]].drop_duplicates().merge(cnt, on="name")
    keys = keys[keys.common > keys.k].groupby(["name", "k"]).size().mul(n_ranks).rename("total")
    v = m.sort_values(["name", "k", "self_ns"], kind="stable").join(keys, on=["name", "k"])
    g = v.groupby(["name", "k"], sort=False)
    total = v.total.to_numpy(dtype=np.int64)
    # position in the list padded with the unsent instances (zeros, first)
    at = g.cumcount().to_numpy() + total - g.self_ns.transform("size").to_numpy()
    vals = v.self_ns.to_numpy(dtype=np.float64)
    lo = np.where(at == (total - 1) // 2, vals, 0.0)
    hi = np.where(at == total // 2, vals, 0.0)
    med = (pd.Series(lo + hi, index=v.index).groupby([v.name, v.k]).sum() / 2).rename("med")
    return w.join(med, on=["name", "k"]).med.fillna(0).to_numpy(dtype=np.float64)


def _charge(stall: pd.DataFrame, busy: pd.DataFrame, host: dict[int, str | None]) -> pd.DataFrame:
    """Each stall's excess, charged to same-host ranks by their busy extra work's overlap."""
    out = []
    hosts = {h for h in host.values() if h}
    for h in sorted(hosts):
        on = [r for r, x in host.items() if x == h]
        a = stall[stall["rank"].isin(on)].sort_values("t0", kind="stable")
        b = busy[busy["rank"].isin(on)].sort_values("t0", kind="stable")
        if a.empty or b.empty:
            continue
        a0, a1 = a.t0.to_numpy(np.int64), a.t1.to_numpy(np.int64)
        b0, b1 = b.t0.to_numpy(np.int64), b.t1.to_numpy(np.int64)
        wa, wb, ov = intersect(a0, a1, b0, b1)
        other = a["rank"].to_numpy()[wa] != b["rank"].to_numpy()[wb]
        wa, wb, ov = wa[other], wb[other], ov[other]
        if len(wa) == 0:
            continue
        # the busy event's own time only (its children are rows of their own)
        own = b.self_ns.to_numpy() / np.maximum(b1 - b0, 1)
        pairs = pd.DataFrame({"i": wa, "j": wb, "ov": ov * own[wb]})
        per = pairs.groupby(["i", "j"]).ov.sum().reset_index()
        i, j = per.i.to_numpy(), per.j.to_numpy()
        span = (a1 - a0)[i].astype(np.float64)
        share = np.minimum(per.ov.to_numpy() / np.maximum(span, 1), 1.0)
        # several events overlapping one stall never get more than all of it
        tot = pd.Series(share).groupby(i).transform("sum").to_numpy()
        share = share / np.maximum(tot, 1.0)
        rows = a.iloc[i]
        excess = (rows.self_ns - rows.med).to_numpy(dtype=np.float64)
        out.append(
            pd.DataFrame(
                {
                    "label": rows.label.to_numpy(),
                    "rank": rows["rank"].to_numpy(),
                    "event": rows.event.to_numpy(),
                    "event_name": rows.name.to_numpy(),
                    "t0": rows.t0.to_numpy(),
                    "t1": rows.t1.to_numpy(),
                    "self_ns": rows.self_ns.to_numpy(),
                    "excess_ns": np.rint(excess).astype(np.int64),
                    "by": b["rank"].to_numpy()[j],
                    "by_event": b.event.to_numpy()[j],
                    "by_name": b.name.to_numpy()[j],
                    "by_cls": b.cls.to_numpy()[j],
                    "by_t1": b1[j],
                    "charged_ns": np.rint(excess * share).astype(np.int64),
                }
            )
        )
    if not out:
        return pd.DataFrame(columns=SLOWED_COLUMNS)
    s = pd.concat(out, ignore_index=True)
    return s[s.charged_ns > 0].reset_index(drop=True)


def _unexplained(
    stall: pd.DataFrame, slowed: pd.DataFrame, busy: pd.DataFrame, host: dict[int, str | None]
) -> pd.DataFrame:
    """Stall excess no other rank's work explains, on a host shown contended in that step.

    Rows of ``label``, ``rank``, ``t1``, ``by = NOISE`` and ``charged_ns`` (what ``_moved``
    reads of ``slowed``): the time leaves the stalled rank's lateness and is charged to no
    rank. A host is *contended* in a step when some stall of it was charged there: its ranks
    then run more busy work than it has cores, and a stall of a rank doing nothing extra,
    beside no extra work, is the scheduler's doing, not the rank's. A rank that did busy
    extra work in the step keeps its stalls (the scheduler makes a thread that ran long wait
    longer afterwards: its own doing), and so does every stall on other hosts and steps (a
    device wait, a page fault: the rank's own).
    """
    hot = pd.DataFrame({"h": slowed["rank"].map(host), "label": slowed.label}).drop_duplicates()
    s = stall.assign(h=stall["rank"].map(host).to_numpy()).merge(hot, on=["h", "label"])
    own = busy[["label", "rank"]].drop_duplicates().assign(busy_extra=True)
    s = s.merge(own, on=["label", "rank"], how="left")
    s = s[s.busy_extra.isna()]
    if s.empty:
        return pd.DataFrame(columns=SLOWED_COLUMNS)
    got = slowed.groupby(["rank", "event"]).charged_ns.sum()
    key = pd.MultiIndex.from_arrays([s["rank"], s.event])
    rest = (s.self_ns - s.med).to_numpy(dtype=np.float64) - got.reindex(key).fillna(0).to_numpy()
    out = s.assign(by=NOISE, charged_ns=np.rint(np.maximum(rest, 0)).astype(np.int64))
    return out.loc[out.charged_ns > 0, ["label", "rank", "t1", "by", "charged_ns"]]


def _moved(slowed: pd.DataFrame, parts: pd.DataFrame, offsets: dict[int, int]) -> pd.DataFrame:
    """Per collective part and causing rank: the stall time charged to ``by`` that the part's
    rank spent before it arrived at the collective (``cid``) in that step."""
    p = parts[["cid", "rank", "t_arrive", "label"]].copy()
    p["arr"] = p.t_arrive + p["rank"].map(offsets).fillna(0).to_numpy(dtype=np.int64)
    hit = p.merge(slowed, on=["label", "rank"])
    hit = hit[hit.t1 <= hit.arr]
    out = hit.groupby(["cid", "rank", "by"]).charged_ns.sum().reset_index()
    return out.astype({"cid": np.int64, "rank": np.int64, "by": np.int64, "charged_ns": np.int64})


def host_waits(paths: pd.DataFrame, slowed: pd.DataFrame, base: dict[int, int]) -> pd.DataFrame:
    """The job path with each charged stall's time moved onto the extra work that caused it.

    ``paths``: the stitched job path (``ctda.job.stitch.COLUMNS``, ``event`` = job id);
    ``base``: each rank's first job event id. A stalled op on the path waited, for the part
    of its excess charged to another rank's extra event, for the core that event held: that
    part of the op's longest path row becomes a ``HOST_ROW`` row on the causing rank, naming its
    event. It is placed to end when the cause ended (or the row did, if earlier), the op's
    own time around it; a row the step's window clips keeps it at its end. The step's rows
    still sum to the job step; nothing else moves.
    """
    if slowed.empty or paths.empty:
        return paths
    s = slowed.assign(job_event=slowed.event + slowed["rank"].map(base).to_numpy(dtype=np.int64))
    keys = ["label", "job_event", "by", "by_event", "by_name", "by_cls", "by_t1"]
    s = s.groupby(keys, as_index=False).charged_ns.sum()
    p = paths.reset_index(drop=True)
    hit = p[p.event.isin(s.job_event.unique())]
    # the stalled op's longest row in each step takes its charges
    row = hit.sort_values("ns", ascending=False, kind="stable").groupby(["label", "event"]).head(1)
    m = s.merge(row.reset_index(), left_on=["label", "job_event"], right_on=["label", "event"])
    total = m.groupby("index").charged_ns.transform("sum").to_numpy(dtype=np.float64)
    share = np.minimum(1.0, m.ns.to_numpy(dtype=np.float64) / np.maximum(total, 1.0))
    m["cut"] = np.floor(m.charged_ns.to_numpy() * share).astype(np.int64)
    m = m[m.cut > 0]
    if m.empty:
        return paths
    g = m.groupby("index")
    per_row = g.cut.sum()
    idx, cut = np.asarray(per_row.index, dtype=np.int64), per_row.to_numpy()
    t0, t1, ns = p.t0.to_numpy()[idx], p.t1.to_numpy()[idx], p.ns.to_numpy()[idx]
    whole = ns == t1 - t0  # not clipped by the window
    x1 = np.where(whole, np.clip(np.minimum(t1, g.by_t1.max().to_numpy()), t0 + cut, t1), t1)
    own = p.copy()
    own["_at"] = np.arange(len(own), dtype=np.float64)
    tail = own.iloc[idx[whole & (x1 < t1)]].copy()
    tail["t0"] = x1[whole & (x1 < t1)]
    tail["ns"] = tail.t1 - tail.t0
    tail["_at"] += 0.75
    own.loc[idx, "t1"] = x1 - cut
    own.loc[idx, "ns"] = np.where(whole, x1 - cut - t0, ns - cut)
    at = pd.Series(x1 - cut, index=idx).reindex(m["index"]).to_numpy()
    start = at + g.cut.cumsum().to_numpy() - m.cut.to_numpy()
    causes = pd.DataFrame(
        {
            "label": m.label.to_numpy(),
            "t0": start,
            "t1": start + m.cut.to_numpy(),
            "etype": HOST_ROW,
            "event": m.by_event.to_numpy(dtype=np.int64) + m.by.map(base).to_numpy(dtype=np.int64),
            "cls": m.by_cls.to_numpy(dtype=np.int64),
            "ns": m.cut.to_numpy(),
            "rank": m.by.to_numpy(dtype=np.int64),
            "name": m.by_name.to_numpy(dtype=object),
            "_at": m["index"].to_numpy(dtype=np.float64) + 0.5,
        }
    )
    out = pd.concat([own[own.ns > 0], causes, tail], ignore_index=True).sort_values("_at", kind="stable")
    return out.drop(columns="_at").reset_index(drop=True)[paths.columns]
