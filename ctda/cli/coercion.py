"""Option values that need no conversion skip typer's Pydantic coercion (and its import).

Newer typer converts every option value with a Pydantic ``TypeAdapter``, built the first
time an option is processed: the first command-line option of a run (``--db``, or the root's
``--max-trace-bytes`` that every command passes through) imports Pydantic and its plugin
loader, about a quarter of a second of start-up. Most values need no converting: an option
not given (None, which typer's coercion answers itself: None, or ``()`` for a repeatable
option), a string for a ``str`` option, strings for a repeatable ``list[str]`` option
(``--param k=v``, answered as a new list, as the adapter does), or an option's own default
(``Format.table`` for ``--format``). Those are returned as typer's coercion returns them;
every other value (``--top 5``, ``--format json``, a path, a list of paths) goes to typer's
own coercion, built on first use, so conversions and error messages stay typer's. An older
typer has no such coercion and is left alone.
"""

from __future__ import annotations

from typing import Any, get_args, get_origin

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

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # an option not given: typer's coercion answers before any adapter
            return () if param.multiple or param.nargs == -1 else None
        annotation = self.descriptor.annotation
        # ``type(...) is``: a subclass (bool for int) still takes typer's path
        if self.plain and type(value) is annotation and not (param.multiple or param.nargs != 1):
            return value
        multi = param.multiple and param.nargs == 1
        if self.strings and multi and isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
            return list(value)
        if self.real is None:
            from typer._coercion import build_runtime_param

            self.real = build_runtime_param(self.descriptor)
        return self.real.coerce(value, param=param, ctx=ctx)


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
