"""Stage: match each collective across the ranks that took part, and align the clocks.

Contract: ``match(skeletons)`` -> :class:`Matching` (one row per rank's part of a matched
collective, plus what could not be matched); ``clock_offsets(skeletons, matching)`` -> the
offset to add to each rank's times. Both read only the skeletons, never a rank's graph.

Keys, strongest first: process group + sequence number where every row of a group has
one; else per-group order, choosing for each rank the alignment with the reference rank
(the one with the most collectives in the group) whose operations agree and whose
completion times move together (ranks' profiled ranges need not start at the same
collective). Rows outside the overlap are *unmatched*; aligned rows whose operation or
size differ are *inconsistent*; both are counted per rank and left out of the job graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.job.skeleton import Skeleton

I64 = npt.NDArray[np.int64]
#: alignments tried around the best guess (profiled ranges differ by a few collectives)
MAX_SHIFT = 64


@dataclass
class Matching:
    """Matched collectives: ``parts`` has one row per (collective, rank).

    ``parts`` columns: ``cid`` (job-wide collective id), ``rank``, ``row`` (in the rank's
    skeleton), ``event``, ``issue``, ``op``, ``group``, ``t_arrive``, ``t_done`` (rank clock).
    """

    parts: pd.DataFrame
    unmatched: dict[int, int] = field(default_factory=dict)  # rank -> rows with no partner
    inconsistent: dict[int, int] = field(default_factory=dict)  # rank -> aligned but different
    method: dict[str, str] = field(default_factory=dict)  # group -> "seq" or "order"

    @property
    def n_collectives(self) -> int:
        return int(self.parts.cid.nunique()) if len(self.parts) else 0

    def summary(self) -> dict[str, object]:
        ranks_per = self.parts.groupby("cid")["rank"].nunique() if len(self.parts) else pd.Series(dtype=int)
        return {
            "collectives": self.n_collectives,
            "rank_parts": len(self.parts),
            "by_ranks": _int_dict(ranks_per.value_counts().sort_index()),
            "unmatched": dict(self.unmatched),
            "inconsistent": dict(self.inconsistent),
            "method": dict(self.method),
        }


def match(skeletons: list[Skeleton]) -> Matching:
    """Match collectives across ranks, group by group."""
    frames = []
    for s in skeletons:
        f = s.collectives.reset_index(drop=True).assign(rank=s.rank)
        f["row"] = np.arange(len(f))
        frames.append(f)
    allrows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out = Matching(parts=pd.DataFrame(), unmatched={s.rank: 0 for s in skeletons})
    out.inconsistent = {s.rank: 0 for s in skeletons}
    parts = []
    next_cid = 0
    for group, rows in allrows.groupby("group", sort=True) if len(allrows) else []:
        by_seq = bool((rows.seq >= 0).all())
        out.method[str(group) or "default"] = "seq" if by_seq else "order"
        keyed = _by_seq(rows) if by_seq else _by_order(rows)
        keyed = _consistent(keyed, out)
        keyed["cid"] = pd.factorize(keyed.cid, sort=True)[0] + next_cid
        next_cid = int(keyed.cid.max()) + 1 if len(keyed) else next_cid
        parts.append(keyed)
    cols = [
        "cid",
        "rank",
        "row",
        "event",
        "issue",
        "op",
        "group",
        "size",
        "t_arrive",
        "t_done",
        "window",
        "cls",
    ]
    out.parts = pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
    # a collective seen on one rank only has no partner to meet
    alone = out.parts.groupby("cid")["rank"].transform("nunique") < 2
    for r, n in out.parts[alone]["rank"].value_counts().items():
        out.unmatched[int(r)] += int(n)
    out.parts = out.parts[~alone].sort_values(["cid", "rank"]).reset_index(drop=True)
    return out


def _int_dict(s: pd.Series) -> dict[int, int]:
    return dict(zip(s.index.astype(int).tolist(), s.astype(int).tolist()))


def _by_seq(rows: pd.DataFrame) -> pd.DataFrame:
    keyed = rows.copy()
    keyed["cid"] = pd.factorize(keyed.seq)[0]
    return keyed


def _by_order(rows: pd.DataFrame) -> pd.DataFrame:
    """Align every rank's sequence with the reference rank's; ``cid`` = reference position."""
    seqs = {int(cast(int, r)): g.sort_values("row") for r, g in rows.groupby("rank")}
    ref_rank = max(seqs, key=lambda r: (len(seqs[r]), -r))
    ref = seqs[ref_rank]
    out = []
    for r, g in seqs.items():
        shift = 0 if r == ref_rank else best_shift(ref, g)
        pos = np.arange(len(g)) + shift
        out.append(g.assign(cid=pos))
    keyed = pd.concat(out, ignore_index=True)
    return keyed


def best_shift(ref: pd.DataFrame, other: pd.DataFrame) -> int:
    """Position shift ``s`` (other's ``j`` is ref's ``j + s``) that best aligns two sequences.

    Scored by: most positions whose operation agrees, then the steadiest difference of
    completion times (a clock offset is constant; a misalignment is not).
    """
    a_op, b_op = ref.op.to_numpy(), other.op.to_numpy()
    a_t, b_t = ref.t_done.to_numpy(), other.t_done.to_numpy()
    best: tuple[int, float, int] | None = None
    best_s = 0
    for s in range(-min(len(b_op) - 1, MAX_SHIFT), min(len(a_op), MAX_SHIFT + 1)):
        j0, j1 = max(0, -s), min(len(b_op), len(a_op) - s)
        if j1 <= j0:
            continue
        agree = int((a_op[j0 + s : j1 + s] == b_op[j0:j1]).sum())
        d = (b_t[j0:j1] - a_t[j0 + s : j1 + s]).astype(np.float64)
        spread = float(np.median(np.abs(d - np.median(d))))
        score = (-agree, spread, abs(s))
        if best is None or score < best:
            best, best_s = score, s
    return best_s


def _consistent(keyed: pd.DataFrame, out: Matching) -> pd.DataFrame:
    """Drop aligned rows whose operation (or known size) differs from the collective's majority."""
    major = keyed.groupby("cid").op.agg(lambda s: s.mode().iloc[0])
    bad = keyed.op.to_numpy() != major.reindex(keyed.cid).to_numpy()
    sized = keyed[keyed["size"] >= 0]
    if len(sized):
        msize = sized.groupby("cid")["size"].agg(lambda s: s.mode().iloc[0])
        m = msize.reindex(keyed.cid).to_numpy()
        bad |= (keyed["size"].to_numpy() >= 0) & ~np.isnan(m) & (keyed["size"].to_numpy() != m)
    for r, n in keyed[bad]["rank"].value_counts().items():
        out.inconsistent[int(r)] += int(n)
    return keyed[~bad]


@dataclass
class ClockOffsets:
    """Per rank: ns to add to its times to put them on the reference rank's clock."""

    offset: dict[int, int]
    how: dict[int, str]  # "reference", "same host", "consistent", "estimated", "inconsistent", ...
    #: per rank: how far the offset may be off (ns): the farthest end of its bounds from the
    #: offset taken (the half-width where they cross); 0 on the reference rank's host
    uncertainty: dict[int, int] = field(default_factory=dict)


def clock_offsets(skeletons: list[Skeleton], m: Matching) -> ClockOffsets:
    """Offsets from matched collectives: no rank completes one before the last rank arrived.

    Ranks on the reference rank's host share its clock. For another host, every matched
    collective bounds its offset ``o``: ``done_r + o >= arrive_q`` and ``done_q >= arrive_r + o``
    for its ranks ``r`` and the reference host's ranks ``q``. If 0 is within the bounds no
    correction is needed; else the middle of the bounds is taken (when they cross, the
    clocks disagree with the matching and the middle is the least-bad choice).
    """
    ranks = [s.rank for s in skeletons]
    host = {s.rank: s.host for s in skeletons}
    ref = min(ranks)
    offset = {ref: 0}
    how = {ref: "reference"}
    unc = {r: 0 for r in ranks}
    ref_group = {r for r in ranks if host[r] is not None and host[r] == host[ref]}
    ref_group.add(ref)
    for r in ranks:
        if r in ref_group and r != ref:
            offset[r], how[r] = 0, "same host"
    others: dict[object, list[int]] = {}
    for r in ranks:
        if r not in ref_group:
            others.setdefault(host[r] if host[r] is not None else ("rank", r), []).append(r)
    p = m.parts
    for members in others.values():
        lo, hi = _bounds(p, members, sorted(ref_group))
        u = 0
        if lo is None or hi is None:
            o, note = 0, "no shared collective"
        elif lo <= 0 <= hi:
            o, note, u = 0, "consistent", max(hi, -lo)
        else:
            o, note = (lo + hi) // 2, "estimated" if lo <= hi else "inconsistent"
            u = abs(hi - lo) // 2
        for r in members:
            offset[r], how[r], unc[r] = int(o), note, int(u)
    return ClockOffsets(offset, how, unc)


def _bounds(p: pd.DataFrame, members: list[int], refs: list[int]) -> tuple[int | None, int | None]:
    mine = p[p["rank"].isin(members)].groupby("cid").agg(a=("t_arrive", "max"), d=("t_done", "min"))
    theirs = p[p["rank"].isin(refs)].groupby("cid").agg(a=("t_arrive", "max"), d=("t_done", "min"))
    both = mine.merge(theirs, left_index=True, right_index=True, suffixes=("_m", "_r"))
    if both.empty:
        return None, None
    lo = int((both.a_r - both.d_m).max())
    hi = int((both.d_r - both.a_m).min())
    return lo, hi
