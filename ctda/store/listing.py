"""Stage: a store's list of complete runs, kept between processes while the store is unchanged.

Contract: ``complete_runs(target, read)`` -> ``read()`` (the store's complete runs), or the
list an earlier process read from the same unchanged store. ``ctda runs`` and the UI's Runs
page list runs far more often than runs are written, and opening the embedded store costs
more than the rest of ``ctda runs`` (the driver's import and its open, about 0.2 s of 0.5 s).

Kept only for a backend with a :meth:`~ctda.store.contract.Engine.file_signature` (the
embedded store: its files' mtime, size and inode) and only the complete runs: an unfinished
run's status depends on its writer's heartbeat, which a clock, not the files, moves. The
list is saved only when the signature was the same before and after the read and its
newest file time was at least :data:`SETTLE_NS` old: file times move in coarse ticks, so a
write in the same tick as a read could otherwise leave the signature unchanged. Any doubt
(no cache directory, an unreadable or foreign file, another ctda version) is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctda import __version__
from ctda.store import backends
from ctda.store.config import Target
from ctda.store.contract import RunInfo

#: a store file written this recently may still change within its mtime's tick
SETTLE_NS = 1_000_000_000
#: bumped when what is kept changes shape
FORMAT = 1


def cache_dir() -> Path:
    """Where listings are kept: ``$XDG_CACHE_HOME/ctda/runs`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctda" / "runs"


def complete_runs(target: Target, read: Callable[[], list[RunInfo]]) -> list[RunInfo]:
    """The complete runs of the store at ``target``: kept ones while it is unchanged, else ``read()``."""
    backend = backends.by_kind(target.kind)
    sig = backend.file_signature(target)
    if sig is None:
        return read()
    key = _key(target, sig)
    path = cache_dir() / (hashlib.sha256(target.location.encode()).hexdigest()[:24] + ".json")
    kept = _load(path, key)
    if kept is not None:
        return kept
    runs = read()
    settled = time.time_ns() - max(f[1] for f in sig) >= SETTLE_NS
    if settled and backend.file_signature(target) == sig:
        _save(path, key, runs)
    return runs


def _key(target: Target, sig: tuple[tuple[str, int, int, int], ...]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "ctda": __version__,
        "location": target.location,
        "files": [list(f) for f in sig],
    }


def _load(path: Path, key: dict[str, Any]) -> list[RunInfo] | None:
    try:
        doc = json.loads(path.read_text())
        if doc.get("key") != key:
            return None
        return [RunInfo(**r) for r in doc["runs"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _save(path: Path, key: dict[str, Any], runs: list[RunInfo]) -> None:
    doc = {"key": key, "runs": [dataclasses.asdict(r) for r in runs]}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)  # a reader sees the old list or the new one, never half
    except OSError:
        tmp.unlink(missing_ok=True)
