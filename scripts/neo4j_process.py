"""The operating-system side of a Neo4j server, for ``neo4j_server.py``: free loopback
ports, the Bolt handshake, the console log (started, a port clash, its tail for an error)
and the server's process group (alive, signalled, gone; a pid since taken by another
program). Standard library only; loaded by path from ``neo4j_server.py`` (``scripts/`` is
no package).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

CONSOLE_LOG = "console.log"

# Popen objects of servers started by this process, so stop() can reap them
# and Popen.__del__ does not warn about a still-running child.
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def free_ports(count: int) -> list[int]:
    """Distinct currently-free TCP ports on 127.0.0.1."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tail(path: Path, lines: int = 40) -> str:
    """Last ``lines`` lines of a log file, or a note that it is missing."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path} not found)"
    return "\n".join(text.splitlines()[-lines:])


def logs_tail(instance: Path) -> str:
    """Console and debug log tails for error messages."""
    logs = instance / "logs"
    return (
        f"--- {logs / CONSOLE_LOG} ---\n{_tail(logs / CONSOLE_LOG)}\n"
        f"--- {logs / 'debug.log'} ---\n{_tail(logs / 'debug.log', 15)}"
    )


def bolt_answers(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> bool:
    """Tell whether a Bolt server on ``port`` completes the version handshake."""
    # Magic preamble, then four proposals: 5.0-5.8, 4.2-4.4 and two empty slots.
    handshake = bytes.fromhex("6060b01700080805000204040000000000000000")
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(handshake)
            reply = sock.recv(4)
    except OSError:
        return False
    return len(reply) == 4 and reply != b"\x00\x00\x00\x00"


def started(instance: Path) -> bool:
    """Whether the console log shows Neo4j's ``Started.`` line."""
    try:
        text = (instance / "logs" / CONSOLE_LOG).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(r"\sStarted\.\s*$", text, re.MULTILINE) is not None


def port_clash(instance: Path) -> bool:
    """Whether startup failed because another process grabbed our port."""
    text = _tail(instance / "logs" / CONSOLE_LOG, 200) + _tail(instance / "logs" / "debug.log", 200)
    return "Address already in use" in text


def group_alive(pgid: int) -> bool:
    """Whether any process of the server's process group is still running."""
    child = CHILDREN.get(pgid)
    if child is not None and child.poll() is not None:
        CHILDREN.pop(pgid, None)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group, ignoring one that is already gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def wait_gone(pgid: int, timeout: float) -> bool:
    """Poll until the process group is empty; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    return not group_alive(pgid)


def pid_reused(pid: int) -> bool:
    """Whether ``pid`` now belongs to something other than a Neo4j launcher.

    A stale server.json could otherwise make us kill an unrelated process
    group that happened to get the same id.  Without /proc we cannot tell.
    """
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"neo4j" not in cmdline.lower()
