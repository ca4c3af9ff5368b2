"""What ``test_hostile.py`` and ``test_hostile_reading.py`` share: the command line as a
process, and gzip decompression bombs."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

#: ``ctda`` as a child process of this interpreter
CTDA = [sys.executable, "-c", "from ctda.cli.app import main; main()"]


def gzip_member(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def gzip_bomb(path: Path, gib: int = 10) -> Path:
    """``{"traceEvents":[`` and ``gib`` GiB of blanks: valid JSON as far as it goes, about
    10 MB as gzip (identical members, compressed once)."""
    unit = gzip_member(b" " * (64 << 20))
    with path.open("wb") as fh:
        fh.write(gzip_member(b'{"traceEvents":['))
        for _ in range(gib * 16):
            fh.write(unit)
    return path
