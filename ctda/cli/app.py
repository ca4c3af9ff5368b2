"""Entry point: import every command module so it registers itself on the app."""

from __future__ import annotations

import importlib
import logging

from ctda.api import tune_memory
from ctda.cli import ending
from ctda.cli.common import app

COMMAND_MODULES = (
    "inspect_cmd",
    "convert_cmd",
    "analyze_cmd",
    "whatif_cmds",
    "store_cmds",
    "job_store_cmds",
    "ui_cmd",
    "validate_cmd",
    "job_cmd",
    "breakdown_cmd",
)


def register() -> None:
    """Import every command module, so that each adds its commands to ``app``."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"ctda.cli.{name}")


_register = register  # the older name, still imported by tests


def _quiet_driver() -> None:
    # Parallel Neo4j writers now and then deadlock on a shared node; the driver retries the
    # transaction and logs a multi-line warning that the user can do nothing about. Real
    # failures still surface: they end the retries and become one-line store errors.
    logging.getLogger("neo4j").setLevel(logging.ERROR)


def main() -> None:
    """Console-script entry point."""
    tune_memory()
    register()
    _quiet_driver()
    ending.clear()
    try:
        app()
    except SystemExit as exc:
        ending.ending(exc.code)  # without the interpreter's teardown, where the command asked
        raise


if __name__ == "__main__":
    main()
