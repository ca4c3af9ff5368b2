"""``ctda ui``: the command line it runs, and how the app reads its settings."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctda.cli.app import _register
from ctda.cli.common import app
from ctda.cli.ui_cmd import command
from ctda.ui.settings import DEFAULT_MAX_EVENTS, Settings, from_argv, to_argv


def test_command_runs_streamlit_headless_on_the_app(tmp_path: Path) -> None:
    db = str(tmp_path / "s.lbug")
    cmd, _ = command(db, 8765, "127.0.0.1", 100, 3000, None)
    # Streamlit's own command line, run by the module that warms the engine first
    assert cmd[1:4] == ["-m", "ctda.ui.serve", "run"]
    assert Path(cmd[4]).name == "app.py" and Path(cmd[4]).is_file()
    flags = dict(zip(cmd[5 : cmd.index("--") : 2], cmd[6 : cmd.index("--") : 2]))
    assert flags["--server.port"] == "8765"
    assert flags["--server.headless"] == "true"
    assert flags["--server.maxUploadSize"] == "100"
    assert flags["--runner.postScriptGC"] == "false"  # a full collection after each run delays the next
    s = from_argv(cmd[cmd.index("--") + 1 :])
    assert s == Settings(db=db, max_upload_mb=100, max_events=3000)
    cmd, _ = command(db, 8765, "127.0.0.1", 100, 3000, None, run="step 7")
    assert from_argv(cmd[cmd.index("--") + 1 :]).run == "step 7"


def test_run_must_name_a_run_of_the_store(tmp_path: Path) -> None:
    """``--run`` is checked before the server starts: one line, exit 2, nothing created."""
    _register()
    db = tmp_path / "none.lbug"
    out = CliRunner().invoke(app, ["ui", "--db", str(db), "--run", "r1"])
    assert out.exit_code == 2
    assert out.output.strip().splitlines() == ["error: --run 'r1': no such run in the store (runs: none yet)"]
    assert not db.exists()


def test_credentials_never_go_on_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTDA_DB", raising=False)
    uri = "bolt://neo4j:secret@localhost:7687"
    cmd, env = command(uri, 8501, "127.0.0.1", 10, 4000, None)
    assert not any("secret" in part for part in cmd)
    assert env["CTDA_DB"] == uri


def test_settings_fall_back_to_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CTDA_DB", str(tmp_path / "env.lbug"))
    monkeypatch.setenv("CTDA_UI_MAX_EVENTS", "250")
    monkeypatch.delenv("CTDA_UI_UPLOADS", raising=False)
    s = from_argv(["-x", "pytest-arg"])  # unknown arguments (pytest's own) are ignored
    assert s.db == str(tmp_path / "env.lbug") and s.max_events == 250
    assert s.uploads_dir == tmp_path / "uploads"  # beside the embedded store
    assert (s.facts.title, s.facts.dialect) == ("Ladybug", "ladybug")
    monkeypatch.setenv("CTDA_UI_MAX_EVENTS", "not a number")
    assert from_argv([]).max_events == DEFAULT_MAX_EVENTS
    assert from_argv(to_argv(s)) == s


def test_ui_is_a_registered_command() -> None:
    _register()
    out = CliRunner().invoke(app, ["ui", "--help"])
    assert out.exit_code == 0
    for option in ("--db", "--port", "--max-upload-mb", "--max-events"):
        assert option in out.output


def test_sigterm_stops_the_server_too(tmp_path: Path) -> None:
    """Stopping ``ctda ui`` must not leave its Streamlit child serving (and holding the port)."""
    pytest.importorskip("streamlit")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "ctda.cli.app", "ui", "--db", str(tmp_path / "s.lbug"), "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail("ctda ui did not come up")
        proc.send_signal(signal.SIGTERM)  # the parent only, as a service manager would
        assert proc.wait(timeout=30) == 0
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
