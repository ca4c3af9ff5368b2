"""``ctda --help`` starts in a fraction of a second: building every command's help loads no
numba, pandas, pyarrow or numpy, and no command's help (``ctda runs --help``, ``ctda query
--help``) loads Pydantic either (figures: ``make bench``, suite ``startup``); the names the
help lists without the engine are the registries' own. Listing the runs of an embedded store
and querying it load only the store's own driver: none of the engine, the other backend's
driver or Pydantic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ctda
from ctda.analysis import breakdowns, modes, names
from ctda.analysis.rules import registry

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "pandas", "pyarrow", "numpy")
#: what a command's start-up (parsing its options, printing its help) must not load either:
#: the Neo4j driver, Pydantic (which newer typer converts option values with) and the
#: library behind ctda.api (bound lazily: ctda.api_store runs only when the API is used)
NOT_AT_START = (*HEAVY, "neo4j", "pydantic", "ctda.api_store", "ctda.store")
#: what listing or querying stored runs must not load: the engine (and the HTA mode), the
#: run model, the Neo4j driver for an embedded store, Pydantic; and the embedded driver,
#: which a listing loads (the test says so) and a query leaves to its worker process
NOT_FOR_STORED = (
    *HEAVY,
    "neo4j",
    "pydantic",
    "ladybug",
    "ctda.analysis.engine",
    "ctda.analysis.hta",
    "ctda.api_analysis",
    "ctda.store.model",
)
SMALL = REPO / "tests" / "data" / "hta" / "simple_add_param_benchmark.json.gz"


#: the console script (its entry module)
CTDA = [sys.executable, "-c", "from ctda.cli.start import main; main()"]


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
    assert registry.names("hta") == names.HTA_RULES
    assert tuple(breakdowns.KINDS) == names.BREAKDOWN_KINDS


def _loaded(*args: str, watch: tuple[str, ...] = NOT_AT_START) -> tuple[list[str], str]:
    """Run ``ctda ARGS`` in a fresh interpreter: the modules of ``watch`` it loaded (each a
    package or a submodule of one, or a module of ctda), and its output."""
    code = (
        "import sys; from ctda.cli.start import main; sys.argv = ['ctda', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        f"print(sorted({{m.split('.')[0] if m.split('.')[0] != 'ctda' else m for m in sys.modules}}"
        f" & set({watch!r})), file=sys.stderr)"
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
    loaded, out = _loaded("--help")
    assert loaded == [] and "ingest" in out and "query" in out


def test_help_is_rich_without_markdown() -> None:
    """typer's help module is imported without rich's Markdown and traceback modules (see
    ctda.cli.helpfmt), and the help it prints is byte for byte what it prints with them."""
    loaded, _ = _loaded("--help", watch=("markdown_it", "pygments"))
    assert loaded == []
    for args in (["--help"], ["query", "--help"], ["query", "--bogus"]):
        res = [
            subprocess.run(
                [sys.executable, "-c", f"{pre}from ctda.cli.start import main; main()", *args],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=120,
            )
            for pre in ("", "import rich.markdown, rich.traceback; ")
        ]
        assert res[0].stdout == res[1].stdout and res[0].stderr == res[1].stderr, args
        assert res[0].returncode == res[1].returncode == (2 if "--bogus" in args else 0), args
    assert "Usage" in res[0].stderr and "--bogus" in res[0].stderr
    loaded, _ = _loaded("--max-trace-bytes", "1G", "runs", "--help")
    assert loaded == []


def test_help_survives_a_typer_that_takes_more_from_rich() -> None:
    """A typer whose help module imports a name the stand-ins lack still gets rich's real
    modules (the import is done again the ordinary way), never a failed import."""
    code = (
        "import sys, ctda.cli.helpfmt as h; "
        "h.DEFERRED = (('rich.markdown', 'Markdown'), ('rich.traceback', 'NotInRich')); h.install(); "
        "import typer.rich_utils as r; "
        "print(r.Traceback.__module__, r.Markdown.__module__, type(sys.modules['rich.markdown']).__name__)"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["rich.traceback", "rich.markdown", "module"]


def test_typed_option_values_still_convert() -> None:
    """A value that needs converting (``--format json`` to the enum) takes typer's own
    coercion, which then loads Pydantic: the fast path above only skips values that are
    already what the option holds. A wrong value is still typer's one-line error."""
    loaded, out = _loaded("query", "--list", "--format", "json")
    assert "pydantic" in loaded and out.lstrip().startswith("[")
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ctda.cli.start import main; main()",
            "query",
            "--list",
            "--format",
            "xml",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "xml" in res.stderr and "Traceback" not in res.stderr


@pytest.fixture(scope="module")
def stored_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded store holding one run (``small``) of a shipped trace."""
    db = tmp_path_factory.mktemp("startup") / "runs.lbug"
    with ctda.open_store(db) as store:
        (done,) = store.ingest(SMALL, run="small")
    assert done.stored and done.run.events > 0
    return db


def test_listing_runs_loads_only_the_store_driver(stored_db: Path) -> None:
    """``ctda runs`` on an embedded store with a run in it opens the store (so Ladybug is
    loaded) and prints the run, without the engine, Arrow, the run model, Pydantic or the
    Neo4j driver."""
    loaded, out = _loaded("runs", "--db", str(stored_db), watch=NOT_FOR_STORED)
    assert loaded == ["ladybug"]
    with ctda.open_store(stored_db) as store:
        (run,) = store.runs()
    assert run.name == "small" and f"{run.events:,}" in out and f"{run.edges:,}" in out


def test_querying_loads_no_library(stored_db: Path) -> None:
    """``ctda query NAME --param k=v`` checks the query and hands it to its worker process
    (which opens the store): the command itself loads none of the engine, Pydantic or either
    store driver, and prints the rows the API answers. Listing the named queries neither."""
    loaded, out = _loaded(
        "query",
        "--db",
        str(stored_db),
        "hotspots_by_name",
        "--param",
        "run=small",
        "-p",
        "top=3",
        watch=NOT_FOR_STORED,
    )
    assert loaded == []
    with ctda.open_store(stored_db) as store:
        rows = store.query("hotspots_by_name", {"run": "small", "top": "3"}).records()
    assert len(rows) == 3 and all(str(r["cp_ns"]) in out for r in rows)
    loaded, out = _loaded("query", "--list", watch=NOT_FOR_STORED)
    assert loaded == [] and "hotspots_by_name" in out


def test_paths_convert_without_pydantic(tmp_path: Path) -> None:
    """A path argument (``ctda inspect TRACE``) and a bounded number's default (``--top``)
    pass without typer's Pydantic coercion, and every path parameter of every command
    converts as typer's own coercion would (absent, relative and empty paths, a directory),
    every bounded number's default too. An unreadable path still gets
    typer's message (root reads everything, so that case is left to typer's own tests)."""
    import importlib
    import pkgutil

    import typer.main
    from typer._coercion import build_runtime_param

    import ctda.cli
    from ctda.cli.common import app

    loaded, out = _loaded("inspect", str(SMALL), watch=("pydantic",))
    assert loaded == [] and SMALL.name in out
    for m in pkgutil.iter_modules(ctda.cli.__path__):
        importlib.import_module("ctda.cli." + m.name)

    def commands(c: object) -> list[object]:
        subs = getattr(c, "commands", None)
        return [x for v in subs.values() for x in commands(v)] if subs is not None else [c]

    many = (str(tmp_path / "absent.json"), "rel/path", "", str(tmp_path), str(SMALL))
    seen = {"one": 0, "many": 0, "bounded": 0}
    for command in commands(typer.main.get_command(app)):
        for p in command.params:  # type: ignore[attr-defined]
            deferred = p.get_runtime_param() if hasattr(p, "get_runtime_param") else None
            if deferred is None:
                continue
            real = build_runtime_param(deferred.descriptor)
            if getattr(deferred, "bounds", None) and isinstance(p.default, (int, float)):
                # a bounded number's default (``--top 3``) as typer's coercion answers it
                got, want = deferred.coerce(p.default, p, None), real.coerce(p.default, p, None)
                assert got == want and type(got) is type(want), p.name
                seen["bounded"] += 1
            kind = deferred.paths
            if kind is None:
                continue
            seen[kind] += 1
            for value in (many,) if kind == "many" else many:
                got, want = deferred.coerce(value, p, None), real.coerce(value, p, None)
                assert got == want and type(got) is type(want), (p.name, value)
    assert seen["one"] >= 5 and seen["many"] >= 4 and seen["bounded"] >= 5


def test_the_console_script_forks_a_query_worker_before_the_command_line() -> None:
    """The entry (``ctda.cli.start``) forks the query's worker having loaded neither the
    command line's libraries nor the store's: the worker's imports overlap those."""
    code = (
        "import sys, ctda.cli.start; from ctda import api; api.start_query_worker; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'click', 'ladybug')"
        " or m.startswith(('ctda.store', 'ctda.queries.loader', 'ctda.queries.gate'))))"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
