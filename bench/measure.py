"""Parent side of a measurement: run ``bench.child`` and watch its whole process tree's memory.

The child's own ``VmHWM`` is exact but misses helper processes the code under test may
fork (the reader forks a decode worker on multi-core machines). So while the child runs,
the parent samples the summed PSS of the child and all its descendants: PSS splits shared
pages between the processes sharing them, so the sum counts fork-shared memory once.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Measured", "run_sampled", "run_timed", "tree_pss_mb"]


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux ``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text()
            out += [int(c) for c in text.split()]
    except OSError:
        pass  # the process or thread just exited
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _pss_kb(pid: int) -> int:
    """PSS of one process in KiB; VmRSS where smaps_rollup is unavailable; 0 once gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_mb(pid: int) -> tuple[float, int]:
    """(summed PSS of ``pid`` and its descendants in MB, number of processes)."""
    pids = _tree(pid)
    return sum(_pss_kb(p) for p in pids) * 1024 / 1e6, len(pids)


@dataclass
class Measured:
    """A finished child run: its JSON report (when it succeeded) and the sampled tree peak."""

    returncode: int | None
    report: dict[str, Any] | None
    stderr: str
    tree_peak_mb: float = 0.0
    max_procs: int = 0
    timed_out: bool = False
    error: str = field(default="")


def run_sampled(
    cmd: list[str], env: dict[str, str], timeout_s: float, interval_s: float | None = 0.05
) -> Measured:
    """Run ``cmd`` (a ``bench.child`` command), sampling its tree's PSS every ``interval_s``
    (None: not at all, only waiting for it; see :func:`run_timed`)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        peak, procs, deadline = 0.0, 0, time.monotonic() + timeout_s
        timed_out = False
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                timed_out = True
                break
            if interval_s is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(max(deadline - time.monotonic(), 0.0))
                continue
            mb, n = tree_pss_mb(proc.pid)
            peak, procs = max(peak, mb), max(procs, n)
            time.sleep(interval_s)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    m = Measured(proc.returncode, None, stderr, peak, procs, timed_out)
    if timed_out:
        m.error = f"timeout after {timeout_s:.0f} s"
    elif proc.returncode != 0:
        m.error = f"exit {proc.returncode}: {(stderr.strip().splitlines() or ['?'])[-1]}"
    else:
        m.report = json.loads(stdout.strip().splitlines()[-1])
    return m


def run_timed(cmd: list[str], env: dict[str, str], timeout_s: float, repeat: int) -> list[Measured]:
    """``repeat`` runs left alone, then one whose tree's memory is sampled (the last).

    Sampling reads every process's page tables (``smaps_rollup``) and holds its memory
    lock while it does, so it slows what it watches: on a 1.78M-event read, 1.21-1.26 s
    left alone against 1.36-1.63 s sampled every 50 ms. Time the first ``repeat`` runs;
    take memory from all (the sampled run's tree peak, every run's ``VmHWM``).
    """
    runs = [run_sampled(cmd, env, timeout_s, interval_s=None) for _ in range(max(repeat, 1))]
    if all(r.report is not None for r in runs):
        runs.append(run_sampled(cmd, env, timeout_s))
    return runs


def timed_runs(runs: list[Measured], repeat: int) -> list[Measured]:
    """The runs of :func:`run_timed` left alone (the sampled one follows them only when
    they all succeeded)."""
    return runs[: max(repeat, 1)]
