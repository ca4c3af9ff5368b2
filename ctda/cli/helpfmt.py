"""typer's help module without the two rich modules ctda's help never uses.

typer formats help (and usage errors) with ``typer.rich_utils``, imported on first use. Its
top imports ``rich.markdown`` (markdown-it, for the ``"markdown"`` markup mode) and
``rich.traceback`` (for pretty tracebacks): about a third of ``ctda --help``'s start-up,
though ctda's app uses the ``"rich"`` markup mode and has pretty exceptions off. While that
module is imported, each of the two names it takes from them (``Markdown``, ``Traceback``)
is a stand-in class that loads the real module the moment it is called or an attribute is
read, so any use still gets rich's own class; the stand-in modules are gone from
``sys.modules`` once typer's is imported, so every other import gets the real ones.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

#: the module whose import is intercepted, and the (module, class) pairs it takes
HELP_MODULE = "typer.rich_utils"
DEFERRED = (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback"))


class _Later(type):
    """The type of a stand-in: calling it or reading an attribute loads the real class."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls.real()(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls.real(), name)

    def real(cls) -> Any:
        return getattr(importlib.import_module(cls.__module__), cls.__name__)


def _stand_in(module: str, name: str) -> type:
    return _Later(name, (), {"__module__": module})


class _Loader(importlib.abc.Loader):
    """Executes the real module with the stand-ins in place, then removes them."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        placed: dict[str, types.ModuleType] = {}
        for name, cls in DEFERRED:
            if name not in sys.modules:  # already loaded: typer takes the real one
                stub = placed[name] = types.ModuleType(name)
                setattr(stub, cls, _stand_in(name, cls))
                sys.modules[name] = stub
        try:
            self.real.exec_module(module)
        except ImportError:
            # a typer that takes more from these modules than the stand-ins offer: import
            # it the ordinary way (slower help, never a broken one)
            self._drop(placed)
            placed = {}
            self.real.exec_module(module)
        finally:
            self._drop(placed)

    @staticmethod
    def _drop(placed: dict[str, types.ModuleType]) -> None:
        for name, stub in placed.items():
            if sys.modules.get(name) is stub:
                del sys.modules[name]


class _Finder(importlib.abc.MetaPathFinder):
    """Finds :data:`HELP_MODULE` as usual and wraps its loader (once)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != HELP_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Intercept the first import of typer's help module (no-op once it is loaded)."""
    if HELP_MODULE in sys.modules or any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _Finder())
