"""The edge-rule registry: every rule is declared once, with :func:`rule`.

A declaration gives the rule's name (what its edges are labelled with, what
``--cross-thread`` selects and what stores file its documentation under), its family, and
the function; the function's docstring is the rule's documentation. The engine, option
parsing, stored rule docs and the README's rule table are all derived from here.

Rules run in the order they were declared; modules that declare rules are imported in a
fixed order by their package (:mod:`ctda.analysis.rules`, :mod:`ctda.analysis.hta`), so the
order is deterministic. It matters: when two rules produce the same edge the first one
keeps it, and structural rules must win over heuristic ones. Other packages add rules
through the entry point group ``ctda.rules`` (an entry point names a module, imported for
its declarations, or a declared :class:`RuleSpec`); they come after ctda's own, last in
their family. HTA's package is imported only when its family (or every rule) is asked
for: a ctda-mode analysis does not load it, nor the numba kernels it runs.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from typing import Any, Literal, get_args

from ctda.analysis.edges import EdgeBatch
from ctda.analysis.names import HTA_RULES
from ctda.analysis.rules.context import RuleContext
from ctda.errors import CtdaError

Family = Literal["structural", "cross_thread", "hta"]
FAMILIES: tuple[Family, ...] = get_args(Family)
RuleFn = Callable[[RuleContext], EdgeBatch]
#: packages whose import declares ctda's own rules, in the order they run
BUILTIN = ("ctda.analysis.rules", "ctda.analysis.hta")
#: builtin packages that declare rules of one family only: imported when it is asked for
ON_DEMAND: dict[str, Family] = {"ctda.analysis.hta": "hta"}
GROUP = "ctda.rules"


class RuleError(CtdaError, ValueError):
    """A rule plugin that cannot be loaded (one line naming it)."""


class Documented:
    """A registry entry documented by its function's docstring (rules, optimisations)."""

    fn: Callable[..., Any]  # declared by each subclass's dataclass fields

    @property
    def doc(self) -> str:
        """The entry's documentation: its function's docstring, dedented."""
        return inspect.cleandoc(self.fn.__doc__ or "")

    @property
    def summary(self) -> str:
        """First paragraph of :attr:`doc` on one line (for tables)."""
        return " ".join(self.doc.split("\n\n", 1)[0].split())


@dataclass(frozen=True)
class RuleSpec(Documented):
    """One registered rule: its name, family and function (whose docstring documents it)."""

    name: str
    family: Family
    fn: RuleFn

    def __call__(self, ctx: RuleContext) -> EdgeBatch:
        """Run the rule; its edges carry the registered name whatever the function wrote."""
        batch = self.fn(ctx)
        return batch if batch.rule == self.name else replace(batch, rule=self.name)


_RULES: dict[str, RuleSpec] = {}
_LOADED = False


def rule(name: str, family: Family) -> Callable[[RuleFn], RuleFn]:
    """Declare ``fn`` as the edge rule ``name`` of ``family`` (names are unique)."""
    if family not in FAMILIES:
        raise ValueError(f"rule {name!r}: unknown family {family!r}; choose from {', '.join(FAMILIES)}")

    def register(fn: RuleFn) -> RuleFn:
        old = _RULES.get(name)
        if old is not None and old.fn is not fn:
            raise ValueError(f"rule {name!r} is declared twice ({_where(old.fn)} and {_where(fn)})")
        if name in HTA_RULES and not _inside(fn.__module__, BUILTIN):  # HTA's, not imported yet
            raise ValueError(f"rule {name!r} is declared twice ({_where(fn)} and ctda's HTA mode)")
        _RULES[name] = RuleSpec(name, family, fn)
        return fn

    return register


def _where(fn: RuleFn) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def _load(families: tuple[Family, ...] = ()) -> None:
    """Import ctda's own rule packages that declare ``families`` (all: every one), then,
    once, every entry point of :data:`GROUP`."""
    global _LOADED
    for module in BUILTIN:
        if module not in ON_DEMAND or not families or ON_DEMAND[module] in families:
            importlib.import_module(module)
    if _LOADED:
        return
    _LOADED = True
    for ep in entry_points(group=GROUP):
        if _inside(ep.value.split(":", 1)[0], tuple(ON_DEMAND)):
            continue  # ctda's own entry point into a package imported above when wanted
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin: one line naming it, not a traceback
            raise RuleError(f"edge rule plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None
        # ctda's own rules keep their names, HTA's too before its package is imported
        if isinstance(obj, RuleSpec) and obj.name not in _RULES and obj.name not in HTA_RULES:
            _RULES[obj.name] = obj


def _inside(module: str, packages: tuple[str, ...]) -> bool:
    return f"{module}.".startswith(tuple(f"{p}." for p in packages))


def _plugin(spec: RuleSpec) -> bool:
    """Whether a rule comes from another package (it runs after ctda's own, which may
    have been declared after it: HTA's are imported on demand)."""
    return not _inside(spec.fn.__module__, BUILTIN)


def specs(*families: Family) -> tuple[RuleSpec, ...]:
    """Every declared rule (ctda's and the ``ctda.rules`` plugins'), in declaration
    order, optionally only of ``families``."""
    _load(families)
    return tuple(sorted((s for s in _RULES.values() if not families or s.family in families), key=_plugin))


def names(*families: Family) -> tuple[str, ...]:
    return tuple(s.name for s in specs(*families))
