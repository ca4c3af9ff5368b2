"""Start-up suite: how long ``ctda --help``, ``ctda --version``, ``ctda runs`` and ``ctda
query`` take to start.

Each runs in a fresh interpreter, as a user types it; wall time is the fastest of the runs
(the least disturbed on a shared machine), CPU time the child's user + system. The command
line imports the library (numpy, pandas, numba, the stores) only when a command runs, so
the help stays near the interpreter's and typer's own start-up; the goal is 0.3 s. ``ctda
runs`` (on an embedded store that does not exist yet: nothing to list) and ``ctda query
--list`` run the command, so they show what the library costs to load.
"""

from __future__ import annotations

import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register

GOAL_S = 0.3
COMMANDS = (
    ("--help",),
    ("--version",),
    ("runs", "--help"),
    ("query", "--help"),
    ("runs", "--db", "{store}"),
    ("query", "--list"),
)
#: runs per command (the fastest is reported): start-up is short, so several are cheap
RUNS, RUNS_QUICK = 7, 3
#: libraries the help must not load (the probe prints those it finds)
HEAVY = ("numba", "pandas", "pyarrow", "numpy")
PROBE = (
    "import sys; from ctda.cli.app import register; register(); "
    f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
)


def _timed(ctx: Context, argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """One run: (wall s, CPU s of the child, its result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=ctx.child_env(), capture_output=True, text=True, timeout=ctx.timeout_s)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def measure(ctx: Context, args: tuple[str, ...], store: str = "") -> dict[str, Any]:
    """The fastest of several fresh-process runs of ``ctda ARGS`` (``{store}`` in an argument
    is the path ``store``)."""
    args = tuple(a.replace("{store}", store) for a in args)
    argv = [ctx.python(), "-c", "from ctda.cli.app import main; main()", *args]
    n = max(ctx.repeat, RUNS_QUICK if ctx.quick else RUNS)
    runs = [_timed(ctx, argv) for _ in range(n)]
    failed = [r for _, _, r in runs if r.returncode != 0]
    shown = " ".join(a.replace(store, "EMPTY.lbug") if store else a for a in args)
    row: dict[str, Any] = {"command": "ctda " + shown, "runs": n}
    if failed:
        return {**row, "error": (failed[0].stderr or failed[0].stdout).strip().splitlines()[-1:]}
    return {**row, "wall_s": min(w for w, _, _ in runs), "cpu_s": min(c for _, c, _ in runs)}


@register("startup", title="Command-line start-up", order=5)
def run(ctx: Context) -> SuiteResult:
    with tempfile.TemporaryDirectory(prefix="ctda-startup-") as d:
        rows = [measure(ctx, args, str(Path(d) / "runs.lbug")) for args in COMMANDS]
    probe = subprocess.run([ctx.python(), "-c", PROBE], env=ctx.child_env(), capture_output=True, text=True)
    loaded = probe.stdout.strip() if probe.returncode == 0 else f"probe failed: {probe.stderr.strip()}"
    table = markdown_table(
        ["command", "wall s (fastest)", "CPU s", f"goal {GOAL_S} s"],
        [
            [f"`{r['command']}`", fmt_num(r.get("wall_s"), 3), fmt_num(r.get("cpu_s"), 3), r.get("error", "")]
            if "error" in r
            else [
                f"`{r['command']}`",
                fmt_num(r["wall_s"], 3),
                fmt_num(r["cpu_s"], 3),
                mark(r["wall_s"] <= GOAL_S),
            ]
            for r in rows
        ],
        "lrrl",
    )
    shown = loaded or "none of " + ", ".join(HEAVY)
    body = f"{table}\n\nLibraries loaded to build every command's help: {shown}."
    return SuiteResult(rows, body, extra={"goal_s": GOAL_S, "heavy_loaded": loaded})
