"""``ctda ingest`` without the CLI: read, analyse and store one trace, idempotently.

Order matters for "bad input leaves the store unchanged": the file's digest is looked up
with a read-only open (an embedded store that does not exist is not created), the trace
is read and analysed, and only then is the store opened for writing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ctda.analysis import snapshot
from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.analysis.tables import options_key
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import check_regular
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable
from ctda.store import open_store
from ctda.store.base import Progress, RunInfo, StoreError
from ctda.store.config import Target
from ctda.store.model import RunData, build, file_digest

_SUFFIXES = (".gz", ".json", ".trace", ".pt", ".parquet")


def default_name(path: Path) -> str:
    """Run name from a file name: ``rank0.pt.trace.json.gz`` -> ``rank0``."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def check_run_name(name: str, option: str = "--run", file: Path | None = None) -> str:
    """``name`` if a new run (or job) may take it; ``@`` is refused because ``RUN@SCENARIO``
    names a stored scenario (runs stored under such names before stay readable by name).
    ``file``: the name was derived from this file's name (the message says so)."""
    origin = f"{file}: the name {name!r} taken from it" if file is not None else f"the name {name!r}"
    if "@" in name:
        raise StoreError(
            f"{origin} contains '@', which ctda reads as RUN@SCENARIO; pick another with {option}"
        )
    if not name.strip():
        raise StoreError(f"{origin} is empty; pick one with {option}")
    return name


def digest(path: Path) -> str:
    """The sha256 of a trace file, the idempotency key; a FIFO or a device is refused first
    (hashing it would never end)."""
    check_regular(path)
    try:
        return file_digest(str(path))
    except OSError as exc:
        raise TraceError(path, exc.strerror or str(exc)) from None


def run_data(a: Analysis, name: str, path: Path, sha: str) -> RunData:
    """A run's rows with its analysis snapshot (what-ifs re-time the run from it). The
    trace's path is stored absolute: a job's what-if reads its ranks' files again, from
    whatever directory the store is opened in (symbolic links are kept as given)."""
    data = build(a, name, str(path.absolute()), sha)
    data.blobs["snapshot"] = snapshot.dump(a)
    return data


@dataclass
class Ingested:
    """What happened to one trace."""

    run: RunInfo
    stored: bool  # False: the same file and options were already stored (a no-op)
    analysis: Analysis | None = None
    seconds: float = 0.0  # time spent writing
    rows: int = 0  # events + dependency edges written


def ingest(
    path: Path,
    target: Target,
    options: AnalysisOptions,
    *,
    name: str | None = None,
    force: bool = False,
    fail_after: int | None = None,
    read: Callable[[Path], EventTable] | None = None,
    progress: Progress | None = None,
) -> Ingested:
    """Store ``path`` as a run in ``target``; a no-op if it is already there (unless ``force``)."""
    run_name = check_run_name(name) if name else check_run_name(default_name(path), file=path)
    sha = digest(path)
    okey = options_key(options)
    with open_store(target, read_only=True) as store:
        same = store.find_content(sha, okey)
        if same is not None and not force:
            return Ingested(same, stored=False)
        clash = store.find_run(run_name)
    if clash is not None and not force:
        raise StoreError(
            f"run {run_name!r} already holds {clash.file} (other content or options); "
            "use --force to replace it, or --run to pick another name"
        )
    table = read(path) if read is not None else read_trace(path)
    try:
        a = analyze(table, options)
    except ValueError as exc:  # OptionError, GraphCycleError: this input cannot be analysed
        raise TraceError(path, str(exc)) from None
    data = run_data(a, run_name, path, sha)
    with open_store(target) as store:
        t0 = time.perf_counter()
        info = store.write_run(data, replace=force, fail_after=fail_after, progress=progress)
        seconds = time.perf_counter() - t0
    return Ingested(info, stored=True, analysis=a, seconds=seconds, rows=data.n_rows)
