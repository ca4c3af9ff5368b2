"""Start-up suite: how long ``ctda --help``, ``ctda --version``, ``ctda runs`` and ``ctda
query`` take to start.

Each runs in a fresh interpreter, as a user types it, from bytecode (compiled first, as an
installed package is); wall time is the fastest of the runs (the least disturbed on a
shared machine), CPU time the child's user + system. The command line imports the library
(numpy, pandas, numba, the stores) only when a command runs, so the help stays near the
interpreter's and typer's own start-up; the goal is 0.3 s. ``ctda runs`` runs on an
embedded store that does not exist yet (nothing to list) and on one holding a run: once
as every listing but the first after a write runs (from the listing an earlier process kept,
``ctda.store.listing``), and once with nothing kept (the store is opened: Ladybug's import
and its database open count); ``ctda query`` lists the
named queries and runs one (checked here, run by its worker process). Each row says which
of :data:`WATCH` the command loaded (one more run, in the same way).
"""

from __future__ import annotations

import compileall
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register
from ctda.store import listing

GOAL_S = 0.3
COMMANDS = (
    ("--help",),
    ("--version",),
    ("runs", "--help"),
    ("query", "--help"),
    ("runs", "--db", "{store}"),
    ("runs", "--db", "{stored}"),
    ("query", "--list"),
    ("query", "--db", "{stored}", "hotspots_by_name", "--param", "run=small", "--param", "top=3"),
)
#: the run the stored store holds (a small shipped trace)
SMALL = Path("tests") / "data" / "hta" / "simple_add_param_benchmark.json.gz"
#: runs per command (the fastest is reported): start-up is short, so several are cheap
RUNS, RUNS_QUICK = 7, 3
#: libraries the help must not load (the probe prints those it finds)
HEAVY = ("numba", "pandas", "pyarrow", "numpy")
#: libraries a row reports loading: the engine's, the store drivers, Pydantic (typer's coercion)
WATCH = (*HEAVY, "neo4j", "ladybug", "pydantic")
PROBE = (
    "import sys; from ctda.cli.app import register; register(); "
    f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
)


#: commands measured with nothing kept between processes (a fresh cache directory per run)
COLD = (("runs", "--db", "{stored}"),)


def _timed(
    ctx: Context, argv: list[str], env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """One run: (wall s, CPU s of the child, its result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=ctx.timeout_s)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


#: ``ctda ARGS`` that then prints which of :data:`WATCH` it loaded (a ``loads:`` line on stderr)
LOADS = (
    "import sys; from ctda.cli.start import main; sys.argv = ['ctda', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    f"print('loads:' + ','.join(m for m in {WATCH!r} if m in sys.modules), file=sys.stderr)"
)


def measure(
    ctx: Context, args: tuple[str, ...], paths: dict[str, str], cache: str, cold: bool = False
) -> dict[str, Any]:
    """The fastest of several fresh-process runs of ``ctda ARGS`` (``{store}`` and
    ``{stored}`` in an argument are the paths ``paths`` holds), and what it loads. ``cache``
    is the directory listings are kept in; ``cold``: a new empty one for every run."""
    shown = " ".join(a.replace("{store}", "EMPTY.lbug").replace("{stored}", "RUNS.lbug") for a in args)
    if cold:
        shown += " (nothing kept: the first listing after a write)"
    for key, path in paths.items():
        args = tuple(a.replace("{" + key + "}", path) for a in args)
    argv = [ctx.python(), "-c", "from ctda.cli.start import main; main()", *args]
    n = max(ctx.repeat, RUNS_QUICK if ctx.quick else RUNS)

    def env() -> dict[str, str]:
        return {**ctx.child_env(), "XDG_CACHE_HOME": tempfile.mkdtemp(dir=cache) if cold else cache}

    runs = [_timed(ctx, argv, env()) for _ in range(n)]
    failed = [r for _, _, r in runs if r.returncode != 0]
    row: dict[str, Any] = {"command": "ctda " + shown, "runs": n}
    if failed:
        return {**row, "error": (failed[0].stderr or failed[0].stdout).strip().splitlines()[-1:]}
    probe = subprocess.run([ctx.python(), "-c", LOADS, *args], env=env(), capture_output=True, text=True)
    said = [line for line in probe.stderr.splitlines() if line.startswith("loads:")]
    loads = said[-1].removeprefix("loads:") if said else "probe failed"
    return {**row, "wall_s": min(w for w, _, _ in runs), "cpu_s": min(c for _, c, _ in runs), "loads": loads}


def _stored(ctx: Context, directory: Path) -> str:
    """An embedded store holding run ``small`` (:data:`SMALL`), written through the API."""
    import ctda

    path = directory / "runs.lbug"
    with ctda.open_store(path) as store:
        store.ingest(ctx.repo / SMALL, run="small")
    return str(path)


@register("startup", title="Command-line start-up", order=5)
def run(ctx: Context) -> SuiteResult:
    # an installed package runs from bytecode; a checkout may not have any (or be run with
    # PYTHONDONTWRITEBYTECODE), and compiling every module would be measured instead
    compileall.compile_dir(str(ctx.repo / "ctda"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="ctda-startup-") as d:
        paths = {"store": str(Path(d) / "empty.lbug"), "stored": _stored(ctx, Path(d))}
        time.sleep(listing.SETTLE_NS / 1e9)  # a listing is kept only once the write settled
        cache = str(Path(d) / "cache")
        os.mkdir(cache)  # cold runs each make their own directory in it
        rows = [measure(ctx, args, paths, cache) for args in COMMANDS]
        rows += [measure(ctx, args, paths, cache, cold=True) for args in COLD]
    probe = subprocess.run([ctx.python(), "-c", PROBE], env=ctx.child_env(), capture_output=True, text=True)
    loaded = probe.stdout.strip() if probe.returncode == 0 else f"probe failed: {probe.stderr.strip()}"
    table = markdown_table(
        ["command", "wall s (fastest)", "CPU s", f"goal {GOAL_S} s", "loads"],
        [
            [
                f"`{r['command']}`",
                fmt_num(r.get("wall_s"), 3),
                fmt_num(r.get("cpu_s"), 3),
                r.get("error", ""),
                "",
            ]
            if "error" in r
            else [
                f"`{r['command']}`",
                fmt_num(r["wall_s"], 3),
                fmt_num(r["cpu_s"], 3),
                mark(r["wall_s"] <= GOAL_S),
                r["loads"] or "none",
            ]
            for r in rows
        ],
        "lrrll",
    )
    shown = loaded or "none of " + ", ".join(HEAVY)
    body = (
        f"{table}\n\nLibraries loaded to build every command's help: {shown}. The loads column "
        f"names those of {', '.join(WATCH)} that the command loaded."
    )
    return SuiteResult(rows, body, extra={"goal_s": GOAL_S, "heavy_loaded": loaded})
