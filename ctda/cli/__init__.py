"""Command-line interface: one module per command, all registered on one typer app.

``ctda --help`` (and any command's start) imports every command module to build the app;
the library behind them (numpy, pandas, numba, the stores) loads only when a command first
uses it: the modules the commands import at the top are registered here as lazy, so
``from ctda import api`` binds a module that executes on its first attribute access.
"""

from __future__ import annotations

import importlib.util
import sys

#: heavy modules the command modules import at the top but need only when a command runs
LAZY = ("ctda.api", "ctda.whatif.blind")


def _lazy(name: str) -> None:
    """Put a module into ``sys.modules`` that loads itself on first use (unless loaded)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot find {name}")
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    # ``from ctda import api`` finds the attribute and binds it; without it the import
    # system would look the module up, read its ``__spec__`` and so load it
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)


for _name in LAZY:
    _lazy(_name)
