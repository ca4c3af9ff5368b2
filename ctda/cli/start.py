"""The console script's entry: start what the command will need before the command line is built.

Building the command line (typer, rich and every command module) takes about 0.1 s. A
command whose work runs in a worker process can have that worker forked first, so the
worker's own imports overlap it: ``ctda query`` (:func:`ctda.api.start_query_worker`, which
also opens the store ``--db`` names meanwhile).
Only the query worker's module is imported here before that fork, not the command line.
"""

from __future__ import annotations

import sys

#: arguments after which a ``ctda query`` runs no query (it prints help or the list)
NO_QUERY = frozenset({"--help", "-h", "--list"})


def runs_a_query(args: list[str]) -> bool:
    """Whether ``ctda ARGS`` is a query that a worker process will answer."""
    return len(args) > 1 and args[0] == "query" and not NO_QUERY.intersection(args)


def named_store(args: list[str]) -> str | None:
    """The ``--db`` value in ``ARGS`` (the first; None if there is none). Only a hint for
    the worker forked ahead: the command line parses its options itself, and a worker
    that opened another store than the query names opens that one instead."""
    for i, arg in enumerate(args):
        if arg == "--db" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--db="):
            return arg.removeprefix("--db=")
    return None


def main() -> None:
    """Console-script entry point (``ctda``)."""
    if runs_a_query(sys.argv[1:]):
        from ctda import api

        api.start_query_worker(named_store(sys.argv[1:]))
    from ctda.cli.app import main as run

    run()
