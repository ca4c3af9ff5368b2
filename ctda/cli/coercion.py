"""Option values that need no conversion skip typer's Pydantic coercion (and its import).

Newer typer converts every option value with a Pydantic ``TypeAdapter``, built the first
time an option is processed: the first command-line option of a run (``--db``, or the root's
``--max-trace-bytes`` that every command passes through) imports Pydantic and its plugin
loader, about a quarter of a second of start-up. Most values need no converting: an option
not given (None, which typer's coercion answers itself: None, or ``()`` for a repeatable
option), a string for a ``str`` option, strings for a repeatable ``list[str]`` option
(``--param k=v``, answered as a new list, as the adapter does), an option's own default
(``Format.table`` for ``--format``), a number inside its bounds (``--top 3``), or a path
(``ctda analyze TRACE``, ``--scratch DIR``) of a parameter that asks for no checks of its
path (existence, resolving, ``-``, a path type, writability: typer then makes a ``Path`` of
the string, after checking that an existing one is readable). Those are returned as typer's
coercion returns them; every other value (``--top 5``, ``--format json``, an unreadable
path) goes to typer's own coercion, built on first use, so conversions and error messages
stay typer's. An older typer has no such coercion and is left alone.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import typer


class _Deferred:
    """Coercion of one option: values that need no conversion here, the rest by typer's."""

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor
        self.real: Any = None
        info = descriptor.parameter_info
        self.plain = descriptor.file_annotation is None and info.parser is None and not descriptor.is_ranged
        # a repeatable string option (``--param k=v``): typer's adapter answers a new list
        self.strings = self.plain and get_origin(descriptor.annotation) is list
        self.strings = self.strings and get_args(descriptor.annotation) == (str,)
        self.paths = _path_kind(descriptor) if self.plain else None
        # a number with bounds (``--top``): typer's coercion returns one inside them as is
        self.bounds = (
            (info.min, info.max) if descriptor.file_annotation is None and info.parser is None else None
        )

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # an option not given: typer's coercion answers before any adapter
            return () if param.multiple or param.nargs == -1 else None
        annotation = self.descriptor.annotation
        # ``type(...) is``: a subclass (bool for int) still takes typer's path
        one = not (param.multiple or param.nargs != 1)
        if self.plain and type(value) is annotation and one:
            return value
        if self.bounds is not None and annotation in (int, float) and type(value) is annotation and one:
            low, high = self.bounds
            if (low is None or value >= low) and (high is None or value <= high):
                return value
        multi = param.multiple and param.nargs == 1
        if self.strings and multi and isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
            return list(value)
        if self.paths == "one" and type(value) is str and _readable(value):
            return Path(value)
        if self.paths == "many" and isinstance(value, (list, tuple)) and all(_readable(v) for v in value):
            return [Path(v) for v in value]
        if self.real is None:
            from typer._coercion import build_runtime_param

            self.real = build_runtime_param(self.descriptor)
        return self.real.coerce(value, param=param, ctx=ctx)


def _path_kind(descriptor: Any) -> str | None:
    """``"one"`` for a ``Path`` (or ``Path | None``) parameter, ``"many"`` for a
    ``list[Path]`` one, where typer's coercion would only make ``Path`` objects of the
    strings; None for anything else."""
    info = descriptor.parameter_info
    checks = info.exists or info.resolve_path or info.allow_dash or info.writable
    if checks or info.path_type is not None or not (info.file_okay and info.dir_okay):
        return None
    annotation = descriptor.annotation
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is Path or (origin in (Union, types.UnionType) and set(args) == {Path, type(None)}):
        return "one"
    return "many" if origin is list and args == (Path,) else None


def _readable(value: Any) -> bool:
    """A string path that typer would pass: absent, or there and readable (typer refuses an
    unreadable one with its own message, which its coercion then gives)."""
    return type(value) is str and (os.access(value, os.R_OK) or not os.path.exists(value))


def install() -> None:
    """Make typer's parameters coerce through :class:`_Deferred` (once; no-op on older typer)."""
    param = getattr(typer.core, "_TyperParameter", None)
    if param is None or not callable(getattr(param, "get_runtime_param", None)):
        return
    if getattr(param.get_runtime_param, "ctda_deferred", False):
        return

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            self._runtime_param = _Deferred(self.type_descriptor)
        return self._runtime_param

    get_runtime_param.ctda_deferred = True  # type: ignore[attr-defined]
    param.get_runtime_param = get_runtime_param
