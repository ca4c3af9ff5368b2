"""What one throwaway Neo4j instance needs besides a home, for ``neo4j_server.py``: a Java
the launchers accept, the private settings (test sizes, own ports and directories) written
into its ``neo4j.conf``, and the environment that points the launchers at it. Standard
library only; loaded by path from ``neo4j_server.py`` (``scripts/`` is no package).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

MIN_JAVA = 17


# --------------------------------------------------------------------------
# java
# --------------------------------------------------------------------------


def java_major_version(java: str = "java") -> int | None:
    """Major version of ``java`` (8 for 1.8), or None if it cannot be run."""
    try:
        result = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _java_for_launchers() -> str:
    """Return the java the launchers will pick, so we check the same one."""
    java_home = os.environ.get("JAVA_HOME")
    return str(Path(java_home) / "bin" / "java") if java_home else "java"


# --------------------------------------------------------------------------
# instance configuration
# --------------------------------------------------------------------------


# Sized for a 2-core / 24 GB CI box that may run a few instances at once.
TEST_SETTINGS: dict[str, str] = {
    "dbms.security.auth_enabled": "true",
    "dbms.usage_report.enabled": "false",
    "server.memory.heap.initial_size": "512m",
    "server.memory.heap.max_size": "1g",
    "server.memory.pagecache.size": "512m",
    "server.https.enabled": "false",
    "server.http.enabled": "true",
    "server.bolt.enabled": "true",
    # Preallocated 256 MB transaction logs would cost ~0.5 GB of disk per instance.
    "db.tx_log.preallocate": "false",
    "db.tx_log.rotation.retention_policy": "2 files",
    # Per-query logging only slows tests down; debug.log keeps startup errors.
    "db.logs.query.enabled": "OFF",
    # Netty's default 5 s quiet period makes every shutdown take ~10 s.
    # Internal settings (integer seconds); strict validation fails fast if a
    # later 5.26.N drops them.
    "internal.dbms.bolt.netty_server_shutdown_quiet_period": "0",
    "internal.dbms.bolt.netty_server_shutdown_timeout": "5",
}


def instance_settings(instance: Path, bolt: int, http: int) -> dict[str, str]:
    """Return settings that make one instance private: own dirs and ports."""
    settings = dict(TEST_SETTINGS)
    for name in ("data", "logs", "run", "import", "plugins"):
        settings[f"server.directories.{name}"] = str(instance / name)
    settings |= {
        "server.default_listen_address": "127.0.0.1",
        "server.default_advertised_address": "127.0.0.1",
        "server.bolt.listen_address": f"127.0.0.1:{bolt}",
        "server.bolt.advertised_address": f"127.0.0.1:{bolt}",
        "server.http.listen_address": f"127.0.0.1:{http}",
        "server.http.advertised_address": f"127.0.0.1:{http}",
    }
    return settings


def render_conf(base: str, settings: Mapping[str, str]) -> str:
    """Return ``base`` with every key in ``settings`` replaced by our value.

    Old lines are dropped rather than overridden because Neo4j warns about
    (and strict validation may reject) settings given twice.
    """
    kept = []
    for line in base.splitlines():
        key = line.split("=", 1)[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and key in settings:
            continue
        kept.append(line)
    kept.append("")
    kept.append("# Per-instance settings written by ctda's neo4j_server.py.")
    kept += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(kept) + "\n"


def write_conf(instance: Path, settings: Mapping[str, str]) -> None:
    """Rewrite the instance's neo4j.conf with ``settings`` applied."""
    conf = instance / "conf" / "neo4j.conf"
    base = conf.read_text(encoding="utf-8") if conf.exists() else ""
    conf.write_text(render_conf(base, settings), encoding="utf-8")


def neo4j_env(home: Path, instance: Path) -> dict[str, str]:
    """Environment that points the launchers at this home and instance."""
    env = dict(os.environ)
    env["NEO4J_HOME"] = str(home)
    env["NEO4J_CONF"] = str(instance / "conf")
    return env
