"""Stage: which files make a job, and which rank each file is.

Contract: ``job_files(paths)`` expands a directory into its trace files (or keeps the files
given); ``identify(names, metas)`` gives each file its rank, the job's world size and the
ranks the job lacks. Rank identity comes from the trace's ``distributedInfo`` (``rank``,
``world_size``, ``pg_config``) and, failing that, from the file name (``rank3``, ``_3.``).
Two files claiming one rank is an error; a subset of the ranks is a partial job. Rank
numbers and world sizes are bounded (:data:`MAX_WORLD_SIZE`) before anything is sized by them.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ctda.errors import CtdaError
from ctda.ingest.table import TraceMeta

TRACE_SUFFIXES = (".json", ".json.gz", ".parquet")
#: the largest world size (and so rank number + 1) accepted: a job is sized by it (its list
#: of missing ranks, the report), so a claim like ``world_size: 1e9`` is refused, not built
MAX_WORLD_SIZE = 1 << 20
#: how far into a file ``traceEvents`` is looked for (metadata keys come first)
PEEK_BYTES = 1 << 20
_RANK_IN_NAME = (
    re.compile(r"(?i)rank[_\-.]?(\d+)"),
    re.compile(r"(?i)(?:^|[_\-.])r(\d+)(?:[_\-.]|$)"),
    re.compile(r"(\d+)(?:\.pt)?\.(?:trace\.)?(?:json(?:\.gz)?|parquet)$"),
)


class JobError(CtdaError, ValueError):
    """A set of traces that is not one job; the message is one line naming the file(s)."""


def job_files(paths: Sequence[Path]) -> list[Path]:
    """The trace files of a job: a directory's traces (sorted), or the files as given."""
    if len(paths) == 1 and paths[0].is_dir():
        found = sorted(
            p
            for p in paths[0].iterdir()
            if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and looks_like_trace(p)
        )
        if not found:
            raise JobError(f"{paths[0]}: no trace files (*.json, *.json.gz, *.parquet) in this directory")
        return found
    for p in paths:
        if p.is_dir():
            raise JobError(f"{p}: a directory; give one directory or several trace files")
    return list(paths)


def looks_like_trace(path: Path) -> bool:
    """A cheap look at a directory entry: Parquet, a bare event list, or ``traceEvents`` near
    the top (other JSON beside the traces, such as a run's notes, is skipped)."""
    try:
        if path.name.endswith(".parquet"):
            return True
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as fh:
            head = fh.read(PEEK_BYTES)
    except (OSError, EOFError):
        return True  # unreadable: let the reader report it
    return head.lstrip().startswith(b"[") or b'"traceEvents"' in head


def rank_from_name(path: Path) -> int | None:
    """A rank number written in the file name, if any."""
    for rx in _RANK_IN_NAME:
        m = rx.search(path.name)
        if m:
            return int(m.group(1))
    return None


@dataclass(frozen=True)
class RankId:
    """Who one trace file is in the job."""

    path: str
    rank: int
    source: str  # "distributedInfo" or "file name"
    host: str | None
    world_size: int | None
    groups: tuple[dict[str, Any], ...] = ()  # distributedInfo.pg_config, as written


@dataclass
class JobLayout:
    """The ranks present, the world size, and what is missing."""

    ranks: list[RankId]  # sorted by rank
    world_size: int
    missing: list[int] = field(default_factory=list)
    groups: tuple[dict[str, Any], ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.missing)


def rank_of(path: str, meta: TraceMeta) -> RankId:
    """Rank identity of one trace: ``distributedInfo`` first, then the file name."""
    di = meta.distributed_info
    groups = tuple(g for g in di.get("pg_config", []) if isinstance(g, dict))
    if meta.rank is not None:
        return RankId(path, meta.rank, "distributedInfo", meta.host_name, meta.world_size, groups)
    by_name = rank_from_name(Path(path))
    if by_name is None:
        raise JobError(f"{path}: no rank in distributedInfo and none in the file name")
    return RankId(path, by_name, "file name", meta.host_name, meta.world_size, groups)


def identify(ids: Sequence[RankId]) -> JobLayout:
    """Check the ranks are distinct and within the world size; list the missing ones."""
    seen: dict[int, str] = {}
    for r in ids:
        if r.rank in seen:
            raise JobError(f"{r.path}: claims rank {r.rank}, as does {seen[r.rank]}")
        seen[r.rank] = r.path
    for r in ids:
        _check_bounds(r)
    sizes = {r.world_size for r in ids if r.world_size is not None}
    if len(sizes) > 1:
        raise JobError(f"{ids[0].path}: the traces disagree on the world size ({sorted(sizes)})")
    world = sizes.pop() if sizes else max(seen) + 1
    bad = [r for r in ids if r.rank < 0 or r.rank >= world]
    if bad:
        raise JobError(f"{bad[0].path}: rank {bad[0].rank} is outside the world size {world}")
    ranks = sorted(ids, key=lambda r: r.rank)
    groups = next((r.groups for r in ranks if r.groups), ())
    return JobLayout(ranks, world, missing_ranks(world, seen), groups)


def _check_bounds(r: RankId) -> None:
    """A rank number or world size beyond :data:`MAX_WORLD_SIZE` is refused before anything
    is sized by it (a file named ``rank99999999999.json`` is not a job of 10^11 ranks)."""
    if r.world_size is not None and not 1 <= r.world_size <= MAX_WORLD_SIZE:
        raise JobError(
            f"{r.path}: distributedInfo.world_size {r.world_size} is outside 1..{MAX_WORLD_SIZE:,} "
            "(the largest job ctda accepts)"
        )
    if not 0 <= r.rank < MAX_WORLD_SIZE:
        raise JobError(
            f"{r.path}: rank {r.rank} (from its {r.source}) is outside 0..{MAX_WORLD_SIZE - 1:,} "
            "(the largest job ctda accepts)"
        )


def missing_ranks(world: int, present: Iterable[int]) -> list[int]:
    """The ranks below ``world`` not in ``present`` (sizes bounded by :data:`MAX_WORLD_SIZE`)."""
    have = np.zeros(world, dtype=bool)
    have[np.fromiter(present, dtype=np.int64)] = True
    return np.flatnonzero(~have).tolist()  # type: ignore[no-any-return]
