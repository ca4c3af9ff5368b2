"""The README cannot drift from the program: its sample outputs are what the commands print,
and its Commands table names exactly the app's commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ctda.cli.app import app, register

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def samples() -> list[tuple[str, list[str]]]:
    """Each ``text`` block that starts with one ``$ ctda ...`` line over shipped files:
    the command and the lines shown under it."""
    out = []
    for block in re.findall(r"```text\n(.*?)```", README, re.DOTALL):
        first, *shown = block.rstrip("\n").split("\n")
        if not first.startswith("$ ctda ") or any(line.startswith("$ ") for line in shown):
            continue
        args = shlex.split(first[len("$ ctda ") :])
        if all((ROOT / a).exists() for a in args if "/" in a):
            out.append((first[2:], shown))
    return out


def test_the_readme_has_a_runnable_sample() -> None:
    assert any(cmd.startswith("ctda analyze tests/data/") for cmd, _ in samples())


@pytest.mark.parametrize(("command", "shown"), samples(), ids=[c for c, _ in samples()])
def test_a_readme_sample_is_what_the_command_prints(
    command: str, shown: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every line the README shows is printed, in the README's order (it may leave lines out)."""
    register()
    monkeypatch.chdir(ROOT)
    done = CliRunner(env={"COLUMNS": "200"}).invoke(app, shlex.split(command)[1:])
    assert done.exit_code == 0, done.output
    printed = [line.rstrip() for line in done.stdout.splitlines()]
    at = 0
    for line in shown:
        assert line.rstrip() in printed[at:], f"the README shows a line `{command}` does not print: {line!r}"
        at = printed.index(line.rstrip(), at) + 1


def test_the_commands_table_names_every_command() -> None:
    section = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `ctda")]
    listed = {name for row in rows for name in re.findall(r"`ctda ([a-z][\w-]*)", row.split(" | ")[0])}
    register()
    root = typer.main.get_command(app)
    commands = set(root.list_commands(root.context_class(root, info_name="ctda")))  # type: ignore[attr-defined]
    assert len(commands) > 15
    assert listed == commands, (sorted(listed - commands), sorted(commands - listed))
