"""``ctda ui``: the Streamlit app over the store, in a child process."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import signal
import subprocess
import sys
from pathlib import Path

import typer

from ctda.cli.common import DbOption, app, console, err_console, fail
from ctda.ui.settings import DEFAULT_MAX_EVENTS, DEFAULT_MAX_TRACE_MB, DEFAULT_MAX_UPLOAD_MB

#: ``ctda ui`` serves this machine only unless told otherwise (the UI has no login)
LOOPBACK = "127.0.0.1"


def command(
    db: str | None,
    port: int,
    address: str,
    max_upload_mb: int,
    max_events: int,
    uploads: str | None,
    max_trace_mb: int | None = None,
    run: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` command line and environment for these options."""
    from ctda.ui.settings import Settings, to_argv

    script = Path(__file__).resolve().parents[1] / "ui" / "app.py"
    env = dict(os.environ)
    # a URI with credentials goes through the environment, never onto a command line
    # that every local user can read in the process list
    ui_db = db
    if db and "@" in db:
        env["CTDA_DB"], ui_db = db, None
    settings = Settings(
        db=ui_db, max_upload_mb=max_upload_mb, max_events=max_events, uploads=uploads, run=run
    )
    if max_trace_mb is not None:
        settings = dataclasses.replace(settings, max_trace_mb=max_trace_mb)
    cmd = [
        sys.executable,
        "-m",
        "ctda.ui.serve",  # Streamlit's command line, after warming the engine (ctda.ui.warm)
        "run",
        str(script),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--server.maxUploadSize",
        str(max_upload_mb),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "viewer",
        # Streamlit runs a full garbage collection after every script run, holding the GIL:
        # with pandas, Arrow and the app's modules loaded that is ~0.2 s here, and the next
        # run (a slider's next notch) waits for it. Python's own generational collector
        # still collects cycles; the app's caches are bounded.
        "--runner.postScriptGC",
        "false",
        "--",
        *to_argv(settings),
    ]
    return cmd, env


@app.command("ui")
def ui_cmd(
    db: DbOption = None,
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to serve on."),
    address: str = typer.Option(
        LOOPBACK,
        "--host",
        "--address",
        help="Interface to listen on. The default serves this machine only: the UI has no login, "
        "so share it behind an authenticating reverse proxy (README, The UI) rather than on 0.0.0.0.",
    ),
    max_upload_mb: int = typer.Option(
        DEFAULT_MAX_UPLOAD_MB, "--max-upload-mb", min=1, help="Largest trace upload accepted."
    ),
    max_events: int = typer.Option(
        DEFAULT_MAX_EVENTS, "--max-events", min=100, help="Events drawn per timeline (critical ones first)."
    ),
    uploads: str = typer.Option(
        None, "--uploads", help="Folder for uploaded traces (default: beside the embedded store)."
    ),
    max_trace_mb: int = typer.Option(
        None,
        "--max-trace-mb",
        min=1,
        help=f"Largest decompressed trace accepted (default {DEFAULT_MAX_TRACE_MB}).",
    ),
    run: str = typer.Option(
        None,
        "--run",
        help="The run the UI opens on (default: the first in the sidebar); it is loaded before "
        "the server listens, so its pages open warm.",
    ),
) -> None:
    """Browse runs, critical paths, hotspots and what-if scenarios in a web UI (Streamlit)."""
    from ctda.store.config import resolve

    try:
        import streamlit  # noqa: F401
    except ImportError as exc:
        fail(f"the UI needs streamlit (pip install 'ctda[ui]'): {exc}")
    if run is not None:
        _check_run(db, run)
    cmd, env = command(db, port, address, max_upload_mb, max_events, uploads, max_trace_mb, run)
    console.print(f"ctda ui: store {resolve(db).location}, http://{address}:{port}", highlight=False)
    if not is_loopback(address):
        err_console.print(
            f"note: serving on {address} with no login: anyone who reaches port {port} can read the "
            "store and upload traces; put an authenticating reverse proxy in front (README, The UI)",
            highlight=False,
            soft_wrap=True,
        )
    raise typer.Exit(serve(cmd, env))


def _check_run(db: str | None, run: str) -> None:
    """``--run`` names a complete run of the store (a one-line error, exit 2, if not)."""
    from ctda.api import StoreError, open_store

    try:
        with open_store(db) as store:
            names = [r.name for r in store.runs()]
    except StoreError as exc:
        fail(str(exc))
    if run not in names:
        known = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "") if names else "none yet"
        fail(f"--run {run!r}: no such run in the store (runs: {known})")


def is_loopback(address: str) -> bool:
    """Whether ``address`` serves only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def serve(cmd: list[str], env: dict[str, str]) -> int:
    """Run the server until it exits; SIGTERM/SIGINT to us stop it too (no orphan left
    holding the port), then its exit code is ours."""
    child = subprocess.Popen(cmd, env=env)

    def stop(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:  # the handler already passed it on; keep waiting
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if code in (-signal.SIGTERM, -signal.SIGINT) else code
