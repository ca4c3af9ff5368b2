"""``ctda --help`` starts in a fraction of a second: building every command's help loads no
numba, pandas, pyarrow or numpy (figures: ``make bench``, suite ``startup``); the names the
help lists without the engine are the registries' own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctda.analysis import breakdowns, modes, names
from ctda.analysis.rules import registry

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "pandas", "pyarrow", "numpy")


def test_building_the_cli_loads_no_engine() -> None:
    """A fresh interpreter imports the app and registers every command: none of the heavy
    libraries is loaded (each command loads them when it runs)."""
    code = (
        "import sys; from ctda.cli.app import register; register(); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_help_names_are_the_registries() -> None:
    assert list(names.MODE_SUMMARIES) == list(modes.MODES)
    assert {m.name: m.summary for m in modes.MODES.values()} == names.MODE_SUMMARIES
    assert names.CROSS_THREAD == registry.names("cross_thread") == modes.get("ctda").selectable
    assert tuple(breakdowns.KINDS) == names.BREAKDOWN_KINDS
