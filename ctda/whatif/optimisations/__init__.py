"""Named optimisations: scenarios derived from the trace, with no factor to guess.

``ctda whatif RUN --apply cuda-graphs --apply bf16`` (the API: ``whatif(a, apply=[...])``)
re-times a trace as if a known optimisation had been made. Each optimisation reads what it
needs off the trace itself (launch costs, the device's inter-kernel gap, the device's
peaks, which kernels are matrix products) and returns an :class:`~ctda.whatif.effect.Effect`
with the assumptions it made, printed next to the answer and stored with the scenario.

The registry: every optimisation is declared once with :func:`optimisation` in a module of
its own (one file each in this package); third-party packages add theirs through the entry
point group ``ctda.optimisations`` (an entry point names a module, imported for its
declarations, or a declared :class:`Optimisation`). A new optimisation is one more file
(plus its line in the list below, or its entry point): the CLI, API, stored scenarios,
``ctda opportunities`` and the UI pick it up from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from ctda.analysis.engine import Analysis
from ctda.analysis.rules.registry import Documented
from ctda.errors import CtdaError
from ctda.whatif.effect import Effect

#: the optimisations shipped with ctda, imported in this order for their declarations
BUILTIN = ("cuda_graphs", "bf16", "fp16", "no_sync", "overlap")
GROUP = "ctda.optimisations"

ApplyFn = Callable[[Analysis, str | None], Effect]
CandidatesFn = Callable[[Analysis], list[str]]


class OptimisationError(CtdaError, ValueError):
    """An unknown optimisation, a bad argument, or one that does not apply to this trace."""


@dataclass(frozen=True)
class Optimisation(Documented):
    """One registered optimisation: ``fn(analysis, arg) -> Effect`` (its docstring is its
    documentation), what its argument means, and which specs ``ctda opportunities`` tries."""

    name: str
    fn: ApplyFn
    arg: str = ""  # what NAME:ARG's ARG is ("" when it takes none)
    needs_arg: bool = False
    candidates: CandidatesFn | None = None

    def specs_for(self, a: Analysis) -> list[str]:
        """The specs worth trying on ``a`` (for opportunities): none when it cannot apply."""
        if self.candidates is not None:
            return self.candidates(a)
        return [] if self.needs_arg else [self.name]


_REGISTRY: dict[str, Optimisation] = {}
_LOADED = False


def optimisation(
    name: str, *, arg: str = "", needs_arg: bool = False, candidates: CandidatesFn | None = None
) -> Callable[[ApplyFn], ApplyFn]:
    """Declare ``fn`` as the optimisation ``name`` (names are unique)."""

    def register(fn: ApplyFn) -> ApplyFn:
        old = _REGISTRY.get(name)
        if old is not None and old.fn is not fn:
            raise ValueError(
                f"optimisation {name!r} is declared twice ({old.fn.__module__} and {fn.__module__})"
            )
        _REGISTRY[name] = Optimisation(name, fn, arg, needs_arg, candidates)
        return fn

    return register


def _load() -> None:
    """Import the built-in modules, then every entry point of :data:`GROUP` (once)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in BUILTIN:
        importlib.import_module(f"{__name__}.{mod}")
    for ep in entry_points(group=GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin must not take ctda down with it
            raise OptimisationError(
                f"optimisation plugin {ep.name!r} ({ep.value}) failed to load: {exc}"
            ) from None
        if isinstance(obj, Optimisation) and obj.name not in _REGISTRY:
            _REGISTRY[obj.name] = obj


def registry() -> dict[str, Optimisation]:
    """Every declared optimisation, by name, in declaration order."""
    _load()
    return dict(_REGISTRY)


def specs_for(a: Analysis) -> list[str]:
    """Every registered optimisation's candidate specs for ``a`` (``NAME[:ARG]``), in
    registry order."""
    return [spec for opt in registry().values() for spec in opt.specs_for(a)]


def parse(spec: str) -> tuple[Optimisation, str | None]:
    """``NAME`` or ``NAME:ARG`` -> (the optimisation, ARG or None)."""
    name, sep, arg = str(spec).strip().partition(":")
    reg = registry()
    if name not in reg:
        raise OptimisationError(f"unknown optimisation {name!r}; choose from {', '.join(reg)}")
    opt = reg[name]
    value = arg.strip() if sep else None
    if opt.needs_arg and not value:
        raise OptimisationError(f"optimisation {name!r} needs an argument: {name}:{opt.arg}")
    if value and not opt.arg:
        raise OptimisationError(f"optimisation {name!r} takes no argument (got {value!r})")
    return opt, value


def apply(a: Analysis, specs: Iterable[str]) -> list[Effect]:
    """The effects of ``specs`` on ``a``, in order (each labelled with its spec)."""
    effects = []
    for spec in specs:
        opt, arg = parse(spec)
        effect = opt.fn(a, arg)
        effect.label = str(spec).strip()
        effects.append(effect)
    return effects


__all__ = ["Effect", "Optimisation", "OptimisationError", "apply", "optimisation", "parse", "registry"]
