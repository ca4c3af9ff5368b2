"""A real distribution on ``sys.path`` for the plugin tests: a module and its dist-info with an
``entry_points.txt``, found by ``importlib.metadata`` like any installed package (no mocks)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def installed(root: Path, module: str, source: str, group: str, entries: str) -> Iterator[Path]:
    """``module`` (its ``source``) installed under ``root`` with ``entries`` (lines of
    ``name = target``) in entry point ``group``; removed again, module and all, on exit."""
    (root / f"{module}.py").write_text(source)
    dist = root / f"{module}-0.1.dist-info"
    dist.mkdir()
    name = module.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{entries}")
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(module, None)
