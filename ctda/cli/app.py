"""Entry point: import every command module so it registers itself on the app."""

from __future__ import annotations

import importlib

from ctda.cli.common import app

COMMAND_MODULES = ("inspect_cmd", "convert_cmd", "analyze_cmd", "whatif_cmds", "store_cmds", "ui_cmd")


def _register() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"ctda.cli.{name}")


def main() -> None:
    """Console-script entry point."""
    _register()
    app()


if __name__ == "__main__":
    main()
