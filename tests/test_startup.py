"""``ctda --help`` starts in a fraction of a second: building every command's help loads no
numba, pandas, pyarrow or numpy, and no command's help (``ctda runs --help``, ``ctda query
--help``) loads Pydantic either (figures: ``make bench``, suite ``startup``); the names the
help lists without the engine are the registries' own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctda.analysis import breakdowns, modes, names
from ctda.analysis.rules import registry

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "pandas", "pyarrow", "numpy")
#: what a command's start-up (parsing its options, printing its help) must not load either:
#: the Neo4j driver, Pydantic (which newer typer converts option values with) and the
#: library behind ctda.api (bound lazily: ctda.api_store runs only when the API is used)
NOT_AT_START = (*HEAVY, "neo4j", "pydantic", "ctda.api_store", "ctda.store")


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


def _loaded(*args: str) -> tuple[list[str], str]:
    """Run ``ctda ARGS`` in a fresh interpreter: the modules of :data:`NOT_AT_START` it
    loaded (each a package or a submodule of one), and its output."""
    code = (
        "import sys; from ctda.cli.app import main; sys.argv = ['ctda', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print(sorted({{m.split('.')[0] if m.split('.')[0] != 'ctda' else m for m in sys.modules}}"
        f" & set({NOT_AT_START!r})), file=sys.stderr)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    return eval(res.stderr.strip().splitlines()[-1]), res.stdout  # a list literal printed above


def test_command_help_loads_no_library() -> None:
    """``runs`` and ``query`` parse their options and print their help without the library,
    the store drivers or Pydantic (the root option ``--max-trace-bytes`` is processed too)."""
    for command in ("runs", "query"):
        loaded, out = _loaded(command, "--help")
        assert loaded == [], command
        assert "--db" in out and "--format" in out, command
    loaded, _ = _loaded("--max-trace-bytes", "1G", "runs", "--help")
    assert loaded == []


def test_typed_option_values_still_convert() -> None:
    """A value that needs converting (``--format json`` to the enum) takes typer's own
    coercion, which then loads Pydantic: the fast path above only skips values that are
    already what the option holds. A wrong value is still typer's one-line error."""
    loaded, out = _loaded("query", "--list", "--format", "json")
    assert "pydantic" in loaded and out.lstrip().startswith("[")
    res = subprocess.run(
        [sys.executable, "-c", "from ctda.cli.app import main; main()", "query", "--list", "--format", "xml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "xml" in res.stderr and "Traceback" not in res.stderr
