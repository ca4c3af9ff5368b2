"""Files ctda writes for the user (``merge -o``, ``export --perfetto``): checked, then
written atomically.

Contract: :func:`check_output` refuses, with one line naming the path, an output that is
not a regular file or a new name in an existing directory: a directory, a device node, a
FIFO, a socket, or a symbolic link (dangling or not: its target is never written through
or replaced), and an output that is one of the command's inputs (by inode, so a hard link
or another spelling of the path counts). :func:`atomic_output` writes to a new temporary
file in the same directory (created exclusively, so no planted link is followed) and
renames it over the output only once everything is written: an interrupted or failed
command leaves the old file, or none, never half of one.
"""

from __future__ import annotations

import gzip
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from ctda.ingest.errors import TraceError

#: permissions of a new output (an existing one keeps its own)
NEW_FILE_MODE = 0o644


def check_output(out: Path, inputs: Iterable[str | Path] = ()) -> None:
    """Raise :class:`TraceError` unless ``out`` may be written (see the module's contract)."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise TraceError(out, f"cannot write ({exc.strerror or exc})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise TraceError(
                out, "is a symbolic link; give a regular file path (a link is never written through)"
            )
        if stat.S_ISDIR(st.st_mode):
            raise TraceError(out, "is a directory; give the output file's name")
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(
                out,
                "is not a regular file (a device, FIFO or socket): the output must be a regular file or new",
            )
        for p in inputs:
            try:
                other = os.stat(p)
            except OSError:
                continue
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                raise TraceError(out, f"is one of the inputs ({p}): write to a new file, not over an input")
    if not out.parent.is_dir():
        raise TraceError(out, "cannot write (its directory does not exist)")


@contextmanager
def atomic_output(out: Path, compress: bool | None = None, level: int = 6) -> Iterator[IO[bytes]]:
    """A binary stream whose bytes become ``out`` when the block ends without an error.

    ``compress`` (default: ``out`` ends in ``.gz``) writes gzip. An ``OSError`` while writing
    becomes a one-line :class:`TraceError` naming ``out``; the temporary file is removed on
    any error. Callers turn their own read errors into :class:`TraceError` first.
    """
    gz = out.name.endswith(".gz") if compress is None else compress
    try:
        mode = stat.S_IMODE(os.stat(out).st_mode)
    except OSError:
        mode = NEW_FILE_MODE
    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:
        raise TraceError(out, f"cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            if gz:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0) as fh:
                    yield fh  # type: ignore[misc]  # a GzipFile is a binary stream
            else:
                yield raw
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, out)
    except OSError as exc:
        _remove(tmp)
        raise TraceError(out, f"cannot write ({exc.strerror or exc})") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    with suppress(OSError):
        os.unlink(path)
