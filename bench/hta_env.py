"""Private virtual environments with HolisticTraceAnalysis, for the peer benchmark only.

HTA is never a dependency of ctda: the ``hta`` suite creates ``<cache>/hta-venv`` once
(``python -m venv`` + ``pip install HolisticTraceAnalysis==0.5.0 'pandas<3'``; HTA 0.5
fails with pandas 3), records what it installed in a stamp file, and runs
:mod:`bench.hta_runner` with that environment's interpreter. Its successor on PyPI,
``traceinsight`` 0.6.1 (the same ``hta`` package, published under a new name), gets
``<cache>/traceinsight-venv`` the same way (:data:`PEERS`), installed without its notebook
dependencies (JupyterLab, which its code never imports) but with the three its code imports
that it does not declare (psutil, PyYAML, ijson).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HTA", "PEERS", "REQUIREMENTS", "TRACEINSIGHT", "HtaEnv", "Peer", "ensure"]


@dataclass(frozen=True)
class Peer:
    """One packaging of HTA the suite compares with: its venv and what goes into it."""

    key: str  #: short name: the venv is ``<cache>/<key>-venv``
    dist: str  #: the distribution whose version is reported
    requirements: tuple[str, ...]  #: installed with their dependencies
    bare: tuple[str, ...] = ()  #: installed without their dependencies


HTA = Peer("hta", "HolisticTraceAnalysis", ("HolisticTraceAnalysis==0.5.0", "pandas<3"))
TRACEINSIGHT = Peer(
    "traceinsight",
    "traceinsight",
    ("numpy", "pandas<3", "networkx", "plotly", "pydot", "psutil", "pyyaml", "ijson"),
    ("traceinsight==0.6.1",),
)
PEERS = (HTA, TRACEINSIGHT)
REQUIREMENTS = HTA.requirements


def _versions(peer: Peer) -> str:
    return (
        "import importlib.metadata as m, json; "
        "print(json.dumps({p: m.version(p) for p in "
        f"({peer.dist!r}, 'pandas', 'numpy', 'networkx')}}))"
    )


@dataclass
class HtaEnv:
    """A usable HTA environment, or why there is none."""

    python: Path | None
    versions: dict[str, str]
    error: str = ""
    setup_s: float | None = None  #: seconds spent creating it in this run (None: reused)


def _python_of(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs or lines or ["?"])[0].strip()


def ensure(cache: Path, log: Callable[[str], None], timeout_s: float = 1200.0, peer: Peer = HTA) -> HtaEnv:
    """The venv of ``peer`` under ``cache``, created (or repaired) when missing or stale."""
    venv = cache / f"{peer.key}-venv"
    stamp = venv / "ctda-bench-stamp.json"
    py = _python_of(venv)
    want = {"requirements": [*peer.requirements, *peer.bare], "base_python": sys.version.split()[0]}
    if stamp.is_file() and py.is_file():
        try:
            have = json.loads(stamp.read_text())
        except ValueError:
            have = {}
        if have.get("want") == want:
            return HtaEnv(py, have.get("versions", {}))
    log(f"  creating {venv} with {' '.join(want['requirements'])} (once; reused by later runs)")
    t0 = time.perf_counter()
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    try:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        for args in ([*peer.requirements], ["--no-deps", *peer.bare] if peer.bare else []):
            if args:
                subprocess.run([*pip, *args], check=True, capture_output=True, text=True, timeout=timeout_s)
        out = subprocess.run(
            [str(py), "-c", _versions(peer)], check=True, capture_output=True, text=True, timeout=120
        )
        versions = json.loads(out.stdout)
    except subprocess.CalledProcessError as exc:
        why = _first_line(exc.stderr or exc.stdout or str(exc))
        return HtaEnv(None, {}, f"{peer.dist} install failed: {why}")
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return HtaEnv(None, {}, f"{peer.dist} install failed: {_first_line(str(exc))}")
    stamp.write_text(json.dumps({"want": want, "versions": versions}, indent=1))
    return HtaEnv(py, versions, setup_s=time.perf_counter() - t0)
