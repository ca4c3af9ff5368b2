#!/usr/bin/env python3
"""Manage a throwaway Neo4j Community 5.26 LTS server for tests and CI.

Sub-commands::

    neo4j_server.py fetch [--cache-dir DIR] [--version 5.26.N]
    neo4j_server.py start [--cache-dir DIR] [--data-dir DIR] [--password PW]
    neo4j_server.py stop --instance DIR [--keep]

``fetch`` (``scripts/neo4j_fetch.py``) places a Neo4j home in the cache directory (``$CTDA_CACHE_DIR`` or
``~/.cache/ctda/neo4j``).  It first looks for the ``unix`` tar.gz of
``org.neo4j.assembly:neo4j-community-standalone`` on Maven Central and checks
it against the published ``.sha1``/``.md5``.  Neo4j does not attach that tarball
to its Maven deployment (the assembly pom says ``<attach>false</attach>``), so
when it is missing the same distribution is built from the jars that *are* on
Maven Central: ``mvn -C dependency:copy-dependencies`` on the assembly pom
(``-C`` makes Maven reject any jar whose checksum does not match the one
Central publishes), plus small generated ``bin/`` launchers.

``start`` creates a fresh instance directory (own conf/data/logs/run/import/
plugins), sets the initial password with ``neo4j-admin``, runs
``bin/neo4j console`` on free loopback ports, waits for Bolt, and prints one
JSON line that also goes to ``<instance>/server.json``.

Only the standard library is used.  The same steps can be imported:
``fetch()``, ``start()`` and ``stop()``.  Their parts are sibling scripts, loaded by
path (``scripts/`` is no package): ``neo4j_fetch.py`` (the home), ``neo4j_instance.py``
(Java, an instance's conf and environment) and ``neo4j_process.py`` (ports, Bolt, the
console log, the process group).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

MIN_PASSWORD_LENGTH = 8  # Neo4j 5 default for dbms.security.auth_minimum_password_length
DEFAULT_START_TIMEOUT = 120.0
DEFAULT_STOP_TIMEOUT = 30.0
PLUGINS_START_TIMEOUT = 360.0
INSTANCE_MARKER = ".ctda-neo4j-instance"
SERVER_JSON = "server.json"
START_ATTEMPTS = 3
USER = "neo4j"


def _sibling(file: str, name: str) -> ModuleType:
    """A module of ``scripts/`` loaded by path, like this script (``scripts/`` is no package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
    if spec is None or spec.loader is None:
        raise RuntimeError(f"scripts/{file} is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


_fetching = _sibling("neo4j_fetch.py", "ctda_neo4j_fetch_script")
Neo4jServerError = _fetching.Neo4jServerError
FetchError = _fetching.FetchError
VERSION_LINE: str = _fetching.VERSION_LINE
fetch = _fetching.fetch
default_cache_dir = _fetching.default_cache_dir
_log = _fetching._log

_instance = _sibling("neo4j_instance.py", "ctda_neo4j_instance_script")
MIN_JAVA: int = _instance.MIN_JAVA
java_major_version = _instance.java_major_version

_process = _sibling("neo4j_process.py", "ctda_neo4j_process_script")


_ErrorBase: Any = _fetching.Neo4jServerError  # a class of the sibling module, typed Any here


class StartError(_ErrorBase):
    """A Neo4j instance could not be brought up."""


@dataclasses.dataclass(frozen=True)
class ServerInfo:
    """Everything a client needs to reach, and later stop, one instance."""

    uri: str
    user: str
    password: str
    pid: int
    home: str
    instance: str

    def to_json(self) -> str:
        """Serialise as the single JSON line the CLI prints."""
        return json.dumps(dataclasses.asdict(self), sort_keys=False)

    @classmethod
    def from_json(cls, text: str) -> ServerInfo:
        """Parse what :meth:`to_json` wrote."""
        raw = json.loads(text)
        return cls(
            uri=str(raw["uri"]),
            user=str(raw["user"]),
            password=str(raw["password"]),
            pid=int(raw["pid"]),
            home=str(raw["home"]),
            instance=str(raw["instance"]),
        )

    @classmethod
    def load(cls, instance: Path) -> ServerInfo:
        """Read ``server.json`` from an instance directory."""
        return cls.from_json((instance / SERVER_JSON).read_text(encoding="utf-8"))

    @property
    def bolt_port(self) -> int:
        """Port part of :attr:`uri`."""
        return int(self.uri.rsplit(":", 1)[1])


# --------------------------------------------------------------------------
# start
# --------------------------------------------------------------------------


def _check_java() -> None:
    """Fail early with a clear message instead of an obscure JVM error."""
    java = _instance._java_for_launchers()
    major = java_major_version(java)
    if major is None:
        raise StartError(f"cannot run `{java} -version`; Neo4j 5 needs Java {MIN_JAVA}+")
    if major < MIN_JAVA:
        raise StartError(f"`{java}` is Java {major}; Neo4j 5 needs Java {MIN_JAVA}+")


def _make_instance(home: Path, base_dir: Path | None) -> Path:
    """Create an empty instance directory with a private copy of conf."""
    if base_dir is not None:
        base_dir.mkdir(parents=True, exist_ok=True)
    instance = Path(tempfile.mkdtemp(prefix="ctda-neo4j-", dir=base_dir)).resolve()
    (instance / INSTANCE_MARKER).write_text(str(home) + "\n", encoding="utf-8")
    shutil.copytree(home / "conf", instance / "conf")
    for name in ("data", "logs", "run", "import", "plugins"):
        (instance / name).mkdir()
    return instance


def _set_initial_password(home: Path, instance: Path, password: str) -> None:
    """Store the admin password before the first start, as Neo4j requires."""
    command = [str(home / "bin" / "neo4j-admin"), "dbms", "set-initial-password", password]
    result = subprocess.run(
        command,
        env=_instance.neo4j_env(home, instance),
        capture_output=True,
        text=True,
        timeout=DEFAULT_START_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        raise StartError(f"neo4j-admin set-initial-password failed: {output}")


def _launch(home: Path, instance: Path) -> subprocess.Popen[bytes]:
    """Run ``bin/neo4j console`` detached in its own process group."""
    log_path = instance / "logs" / _process.CONSOLE_LOG
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(home / "bin" / "neo4j"), "console"],
            env=_instance.neo4j_env(home, instance),
            cwd=instance,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Its own session lets stop() signal the launcher JVM and the
            # server JVM it forks together, and outlive the CLI process.
            start_new_session=True,
        )
    _process.CHILDREN[process.pid] = process
    return process


def _wait_until_ready(process: subprocess.Popen[bytes], instance: Path, port: int, timeout: float) -> None:
    """Block until Bolt answers, the server dies, or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _process.started(instance) and _process.bolt_answers(port):
            return
        if process.poll() is not None:
            said = _process.logs_tail(instance)
            raise StartError(f"Neo4j exited with code {process.returncode} before it was ready\n" + said)
        time.sleep(0.25)
    raise StartError(
        f"Neo4j did not answer on Bolt port {port} within {timeout:.0f} s\n" + _process.logs_tail(instance)
    )


def new_password() -> str:
    """A random password for a throwaway instance. Hex only: a URL-safe token starts with
    '-' once in 64 draws, and neo4j-admin then reads it as an option (a CI run failed so)."""
    return secrets.token_hex(16)


def _check_password(password: str) -> None:
    """Reject passwords Neo4j would refuse, with a clearer message than its own."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise StartError(f"password must have at least {MIN_PASSWORD_LENGTH} characters")
    if password.startswith("-"):
        raise StartError("password must not start with '-' (neo4j-admin reads it as an option)")


def start(
    *,
    cache_dir: Path | None = None,
    data_dir: Path | None = None,
    password: str | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    version: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    plugins: bool = False,
    hardened: bool = True,
    only: Sequence[str] = (),
) -> ServerInfo:
    """Start a fresh Neo4j instance and return how to reach it.

    ``plugins`` installs Graph Data Science, APOC core and ctda's own procedures
    (``scripts/neo4j_plugins.py``) into the instance, with the settings that harden the
    server against its users' queries, or without them when ``hardened`` is false (the
    check that each refusal is the hardening's). ``only`` keeps the plugin jars whose names
    start with one of its prefixes (``APOC_JARS``: APOC alone).

    ``data_dir`` is the parent directory for the new instance directory
    (default: the system temp dir); each call gets its own directory, so
    instances never share state.  ``extra_conf`` overrides neo4j.conf keys.
    """
    home = fetch(cache_dir, version)
    _check_java()
    secret = password if password is not None else new_password()
    _check_password(secret)
    jars: list[Path] | None = None
    apoc: Mapping[str, str] = {}
    extra = dict(extra_conf or {})
    if plugins:
        helper = _plugins_module()
        try:
            folder = helper.plugin_dir((cache_dir or default_cache_dir()).expanduser().resolve())
        except helper.PluginError as error:
            raise FetchError(str(error)) from error
        jars = [j for j in sorted(folder.glob("*.jar")) if not only or j.name.startswith(tuple(only))]
        extra = {**(helper.SETTINGS if hardened else helper.OPEN_SETTINGS), **extra}
        apoc = helper.APOC_CONF if hardened else helper.OPEN_APOC_CONF
        # GDS and APOC load thousands of classes at start: slow on a small, busy machine
        timeout = max(timeout, PLUGINS_START_TIMEOUT)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return _start_once(home, data_dir, secret, timeout, extra, jars, apoc)
        except _PortClashError:
            _log(f"port taken by another process, retrying ({attempt}/{START_ATTEMPTS})")
    raise StartError(f"could not find free ports after {START_ATTEMPTS} attempts")


class _PortClashError(Exception):
    """Internal signal that startup lost a race for its ports."""


def _plugins_module() -> ModuleType:
    """``scripts/neo4j_plugins.py``, loaded by path like this script."""
    return _sibling("neo4j_plugins.py", "ctda_neo4j_plugins_script")


def _start_once(
    home: Path,
    data_dir: Path | None,
    password: str,
    timeout: float,
    extra: Mapping[str, str],
    jars: list[Path] | None = None,
    apoc: Mapping[str, str] | None = None,
) -> ServerInfo:
    """One start attempt; cleans up after itself when it fails."""
    instance = _make_instance(home, data_dir)
    if jars is not None:
        (instance / "conf" / "apoc.conf").write_text("".join(f"{k}={v}\n" for k, v in (apoc or {}).items()))
        for jar in jars:
            try:
                os.link(jar, instance / "plugins" / jar.name)
            except OSError:
                shutil.copy2(jar, instance / "plugins" / jar.name)
    process: subprocess.Popen[bytes] | None = None
    try:
        bolt, http = _process.free_ports(2)
        _instance.write_conf(instance, {**_instance.instance_settings(instance, bolt, http), **extra})
        _set_initial_password(home, instance, password)
        process = _launch(home, instance)
        info = ServerInfo(f"bolt://127.0.0.1:{bolt}", USER, password, process.pid, str(home), str(instance))
        _wait_until_ready(process, instance, bolt, timeout)
    except BaseException as error:
        clash = isinstance(error, StartError) and _process.port_clash(instance)
        if process is not None:
            _terminate_group(process.pid, DEFAULT_STOP_TIMEOUT)
        # The error already carries the log tails; keep the rest on request.
        if clash or os.environ.get("CTDA_NEO4J_KEEP_FAILED") != "1":
            shutil.rmtree(instance, ignore_errors=True)
        if clash:
            raise _PortClashError from error
        raise
    (instance / SERVER_JSON).write_text(info.to_json() + "\n", encoding="utf-8")
    return info


# --------------------------------------------------------------------------
# stop
# --------------------------------------------------------------------------


def _terminate_group(pgid: int, timeout: float) -> None:
    """SIGTERM for a clean checkpoint, SIGKILL if that takes too long."""
    if not _process.group_alive(pgid):
        return
    _process.signal_group(pgid, signal.SIGTERM)
    if _process.wait_gone(pgid, timeout):
        return
    _log(f"Neo4j (pgid {pgid}) ignored SIGTERM for {timeout:.0f} s; sending SIGKILL")
    _process.signal_group(pgid, signal.SIGKILL)
    _process.wait_gone(pgid, 10.0)


def stop(info: ServerInfo, *, keep: bool = False, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop the server in ``info`` and delete its instance unless ``keep``."""
    if _process.pid_reused(info.pid):
        _log(f"pid {info.pid} is no longer a Neo4j server; not signalling it")
    else:
        _terminate_group(info.pid, timeout)
    instance = Path(info.instance)
    # Guard against deleting a directory this script did not create.
    if not keep and (instance / INSTANCE_MARKER).is_file():
        shutil.rmtree(instance, ignore_errors=True)


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """Argument parser for the three sub-commands."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    fetch_p = sub.add_parser("fetch", help="download or assemble Neo4j into the cache")
    start_p = sub.add_parser("start", help="start a fresh instance; prints one JSON line")
    for p in (fetch_p, start_p):
        p.add_argument(
            "--cache-dir", type=Path, default=None, help="default: $CTDA_CACHE_DIR or ~/.cache/ctda/neo4j"
        )
        p.add_argument("--version", default=None, help=f"exact {VERSION_LINE}.N (default: newest)")
    start_p.add_argument("--data-dir", type=Path, default=None, help="parent dir for the instance dir")
    start_p.add_argument("--password", default=None, help="default: random")
    start_p.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT)
    start_p.add_argument(
        "--plugins", action="store_true", help="install GDS, APOC core and ctda's procedures"
    )
    stop_p = sub.add_parser("stop", help="stop an instance and delete it")
    stop_p.add_argument("--instance", type=Path, required=True)
    stop_p.add_argument("--keep", action="store_true", help="keep the instance directory")
    stop_p.add_argument("--timeout", type=float, default=DEFAULT_STOP_TIMEOUT)
    return parser


def _run(args: argparse.Namespace) -> None:
    """Dispatch one parsed command."""
    if args.command == "fetch":
        print(fetch(args.cache_dir, args.version))
    elif args.command == "start":
        info = start(
            cache_dir=args.cache_dir,
            data_dir=args.data_dir,
            password=args.password,
            timeout=args.timeout,
            version=args.version,
            plugins=args.plugins,
        )
        print(info.to_json(), flush=True)
    else:
        try:
            info = ServerInfo.load(args.instance)
        except (OSError, ValueError, KeyError) as error:
            raise StartError(f"{args.instance} is not a running instance: {error}") from error
        stop(info, keep=args.keep, timeout=args.timeout)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        _run(args)
    except FetchError as error:
        print(f"neo4j_server: error: {error}", file=sys.stderr)
        return 2
    except Neo4jServerError as error:
        print(f"neo4j_server: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
