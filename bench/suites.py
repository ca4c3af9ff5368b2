"""The benchmark-suite registry and what a suite gets to work with.

A suite is a function ``run(ctx) -> SuiteResult`` registered under a name::

    @register("analyze", title="Analysis time", order=20)
    def run(ctx: Context) -> SuiteResult: ...

in a module ``bench/suite_<name>.py``; :mod:`bench.run` discovers those modules, runs the
selected suites, writes ``results/<name>.json`` and the suite's section of
``results/README.md`` (sections of suites that did not run are left untouched).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Context", "Suite", "SuiteResult", "fmt_num", "markdown_table", "register", "registry"]

Row = dict[str, Any]


@dataclass
class SuiteResult:
    """Rows (one per measurement, JSON-serialisable) and the suite's Markdown section body."""

    rows: list[Row]
    markdown: str
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  #: suite-level facts for the JSON file


@dataclass
class Context:
    """Everything a suite needs: where things are, how thorough to be, how to report."""

    repo: Path
    results: Path
    cache: Path
    corpus: Path | None
    quick: bool = False
    repeat: int = 1  #: runs per measurement; suites report the fastest (noisy shared machines)
    timeout_s: float = 1800.0
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    def log(self, msg: str) -> None:
        """Progress on stderr, stamped with seconds since the run started."""
        print(f"[{time.perf_counter() - self._t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def python(self) -> str:
        return sys.executable

    def child_env(self) -> dict[str, str]:
        """Environment for measurement subprocesses: ``bench`` importable from the repo root."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.repo), env.get("PYTHONPATH", "")) if p)
        return env


@dataclass
class Suite:
    name: str
    title: str
    order: int
    run: Callable[[Context], SuiteResult]


_REGISTRY: dict[str, Suite] = {}


def register(
    name: str, *, title: str, order: int = 100
) -> Callable[[Callable[[Context], SuiteResult]], Callable[[Context], SuiteResult]]:
    """Decorator: make ``run(ctx)`` available as suite ``name`` (``--only name``)."""

    def deco(fn: Callable[[Context], SuiteResult]) -> Callable[[Context], SuiteResult]:
        _REGISTRY[name] = Suite(name, title, order, fn)
        return fn

    return deco


def registry() -> list[Suite]:
    """Registered suites in display order."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.order, s.name))


def machine_info(repo: Path) -> dict[str, Any]:
    """Where the figures were measured; benchmark numbers mean little without it."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = ""
    return {
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "system": platform.system(),
        "python": platform.python_version(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "git_rev": rev or None,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


# --- Markdown helpers ---------------------------------------------------------------------
def fmt_num(value: float | int | None, digits: int = 1) -> str:
    """Thousands separators, fixed decimals; blank for missing values."""
    if value is None:
        return ""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def mark(ok: bool | None) -> str:
    """A goal check beside a figure: ✓ met, ✗ missed, nothing when it does not apply."""
    return "" if ok is None else (" ✓" if ok else " ✗")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A GitHub Markdown table; ``align`` has one of ``l``/``r`` per column (default left)."""
    marks = {"l": ":---", "r": "---:"}
    spec = [marks.get(a, "---") for a in align.ljust(len(header), "l")]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(spec) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def family_sections(
    parts: list[str],
    rows: Sequence[Row],
    table: Callable[[list[Row]], str],
    notes: Sequence[str],
    quick: bool,
) -> str:
    """A suite's Markdown: its intro ``parts``, one table per trace family, then the notes."""
    out = list(parts)
    if quick:
        out.append("*Quick run (`--quick`): fewer and smaller inputs.*")
    for family, title in (("corpus", "Largest corpus traces"), ("synthetic", "Synthetic (bench.replicate)")):
        fam = [r for r in rows if r["family"] == family]
        if fam:
            out += [f"### {title}", table(fam)]
    if notes:
        out.append("\n".join(f"- {n}" for n in notes))
    return "\n\n".join(out)
