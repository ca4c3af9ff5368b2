"""Benchmark inputs: the shared real-trace corpus and cached synthetic traces.

The corpus is ``$CTDA_TRACE_CORPUS`` or ``../shared/traces`` beside the repository (the
same lookup as the test suite). Synthetic traces are made by :mod:`bench.replicate` into a
cache directory once and reused while the source, the targets and the replicator's own
code are unchanged (recorded in a ``.meta.json`` beside each file).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import replicate as rep
from ctda.ingest.source import open_stream

__all__ = ["SyntheticTrace", "corpus_dir", "corpus_traces", "json_size", "largest", "synthetic"]

Log = Callable[[str], None]


def corpus_dir(repo: Path, override: Path | None = None) -> Path | None:
    """The shared corpus directory (one holding MANIFEST.tsv), or None when absent."""
    env = os.environ.get("CTDA_TRACE_CORPUS")
    candidates = [override] if override else []
    candidates += [Path(env)] if env else []
    candidates.append(repo.parent / "shared" / "traces")
    for c in candidates:
        if c is not None and (c / "MANIFEST.tsv").is_file():
            return c
    return None


def corpus_traces(corpus: Path) -> list[Path]:
    """Every trace listed in MANIFEST.tsv plus the generated ones."""
    with (corpus / "MANIFEST.tsv").open(newline="") as fh:
        paths = [corpus / r["path"] for r in csv.DictReader(fh, delimiter="\t")]
    paths += sorted((corpus / "generated").glob("*.json.gz"))
    return [p for p in paths if p.is_file()]


def json_size(path: Path) -> int:
    """Uncompressed size without decompressing: the gzip trailer's ISIZE.

    ISIZE is the size modulo 2**32; fine for ranking corpus traces (all far below 4 GiB).
    """
    with path.open("rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return path.stat().st_size
        fh.seek(-4, os.SEEK_END)
        return int(struct.unpack("<I", fh.read(4))[0])


def largest(paths: list[Path], n: int) -> list[Path]:
    """The ``n`` largest traces by uncompressed JSON size, largest first."""
    return sorted(paths, key=json_size, reverse=True)[:n]


# --- synthetic traces -------------------------------------------------------------------
@dataclass
class SyntheticTrace:
    """A cached replicated trace and what it holds."""

    path: Path
    source: str
    n_events: int
    n_bytes: int
    copies: int
    generated_s: float | None  #: generation time when made in this run, None when reused


def _replicator_version() -> str:
    """Changes whenever the replicator's code does, so stale caches are rebuilt."""
    return hashlib.sha256(Path(rep.__file__).read_bytes()).hexdigest()[:12]


def _key(source: Path, min_events: int, min_bytes: int) -> dict[str, Any]:
    st = source.stat()
    return {
        "source": source.name,
        "source_size": st.st_size,
        "min_events": min_events,
        "min_bytes": min_bytes,
        "replicator": _replicator_version(),
    }


def _cached(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    meta_path = path.with_name(path.name + ".meta.json")
    if not (path.is_file() and meta_path.is_file()):
        return None
    try:
        meta: dict[str, Any] = json.loads(meta_path.read_text())
    except ValueError:
        return None
    return meta if meta.get("key") == key else None


def _progress(log: Log, every_s: float = 2.0) -> rep.Progress:
    last = [0.0]

    def show(k: int, total: int, nbytes: int) -> None:
        now = time.perf_counter()
        if k == total or now - last[0] >= every_s:
            last[0] = now
            log(f"    copy {k}/{total}, {nbytes / 1e6:,.0f} MB JSON")

    return show


def synthetic(
    source: Path, cache: Path, *, min_events: int, min_bytes: int, log: Log, plain: bool = False
) -> SyntheticTrace:
    """A ``.json.gz`` (or, with ``plain``, ``.json``) replica of ``source`` meeting both targets.

    Generated once into ``cache`` (written to a temporary name, then renamed, so an
    interrupted run never leaves a truncated trace that looks valid).
    """
    cache.mkdir(parents=True, exist_ok=True)
    stem = source.name.removesuffix(".gz").removesuffix(".json")
    name = f"{stem}__{min_events // 1000}kev_{min_bytes // 10**6}MB.json"
    gz_path = cache / (name + ".gz")
    key = _key(source, min_events, min_bytes)
    meta = _cached(gz_path, key)
    generated_s = None
    if meta is None:
        want = f">= {min_events:,} events, >= {min_bytes / 1e6:,.0f} MB"
        log(f"  generating {gz_path.name} from {source.name} ({want})")
        tmp = gz_path.with_name(gz_path.name + ".tmp.gz")
        res = rep.replicate(source, tmp, events=min_events, nbytes=min_bytes, progress=_progress(log))
        tmp.replace(gz_path)
        meta = {"key": key, "n_events": res.n_events, "n_bytes": res.n_bytes, "copies": res.copies}
        gz_path.with_name(gz_path.name + ".meta.json").write_text(json.dumps(meta, indent=1))
        generated_s = res.seconds
        log(f"  generated {res.n_events:,} events, {res.n_bytes / 1e6:,.0f} MB JSON in {res.seconds:.1f} s")
    path = _plain(gz_path, key, log) if plain else gz_path
    return SyntheticTrace(path, source.name, meta["n_events"], meta["n_bytes"], meta["copies"], generated_s)


def _plain(gz_path: Path, key: dict[str, Any], log: Log) -> Path:
    """The uncompressed twin of a cached ``.json.gz`` (same events, byte for byte)."""
    path = gz_path.with_suffix("")  # drop .gz
    if _cached(path, key) is not None:
        return path
    log(f"  decompressing {gz_path.name} -> {path.name}")
    tmp = path.with_name(path.name + ".tmp")
    with open_stream(gz_path) as src, tmp.open("wb") as dst:
        shutil.copyfileobj(src, dst, 16 << 20)
    tmp.replace(path)
    shutil.copyfile(gz_path.with_name(gz_path.name + ".meta.json"), path.with_name(path.name + ".meta.json"))
    return path
