"""Compiled loops: the native extension's where it is built, numba's otherwise.

Every loop the engine compiles is written once, in Python, for numba, and decorated with
:func:`kernel`. The ``ctda_native`` extension (``native/``, Rust) has a twin of each one the
analysis runs, giving identical results. A kernel binds on its first call: to
``ctda_native.<module>_<name>`` (``propagate._forward``: ``propagate_forward``) when the
extension is built, has that function and ``CTDA_KERNELS`` is not ``numba``; else to
numba's compilation of the Python function (as is any call with arguments the twin does
not take, such as another dtype). So a process whose kernels are all native never
imports numba: its import and the loading of its cached machine code cost each fresh
process about half a second. Kernels that have no twin (HTA mode's, the UI's) stay on
numba.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: ``numba`` forces numba's compilations (to compare); anything else: native where built
KERNELS_ENV = "CTDA_KERNELS"
#: the extension's kernels are used only when it declares this version of them: a build
#: from older sources may have a function of the same name that means something else
KERNELS_VERSION = 1

_LOCK = threading.Lock()
_ALL: list[Kernel] = []
_REBOUND: list[tuple[dict[str, Any], str, Kernel]] = []  # module globals numba compiled against


@functools.cache
def extension() -> ModuleType | None:
    """The ``ctda_native`` extension, imported once (None where it is not built); the
    reader (:mod:`ctda.ingest.native`) and the kernels share it."""
    try:
        import ctda_native  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    return ctda_native  # type: ignore[no-any-return,unused-ignore]


def _native() -> ModuleType | None:
    ext = extension()
    return ext if getattr(ext, "KERNELS_VERSION", None) == KERNELS_VERSION else None


#: every twin the extension must have for the analysis to run natively (``--version`` asks
#: before any kernel's module is imported; a test keeps this equal to the declared kernels)
TWINS: tuple[str, ...] = (
    "attribution_clip_chains",
    "calibrate_last_arrivals",
    "classify_inherit_levels",
    "contention_reweigh",
    "cross_thread_deepest_containing",
    "cross_thread_handoffs",
    "cross_thread_lock_pairs",
    "graph_counting_sort",
    "graph_first_pairs",
    "graph_kahn",
    "intervals_intersect",
    "intervals_overlap_sums",
    "invariant_chain_starts",
    "propagate_backtrack_chains",
    "propagate_backtrack_until",
    "propagate_forward",
    "propagate_rank",
    "propagate_slack",
    "scenario_scaled",
    "scenario_scaled_total",
    "segments_junctions",
    "segments_walk",
    "timeline_walk",
    "wake_match",
)


def native_built() -> bool:
    """Whether the extension is built with every twin (:data:`TWINS`)."""
    ext = _native()
    return ext is not None and all(hasattr(ext, name) for name in TWINS)


def native_wanted() -> bool:
    """Whether native kernels are allowed now (``CTDA_KERNELS``, read when a kernel binds)."""
    return os.environ.get(KERNELS_ENV, "").strip().lower() != "numba"


class Kernel:
    """A compiled loop that binds to its native twin or to numba on first call."""

    def __init__(self, fn: Callable[..., Any], native: bool) -> None:
        self.py = fn
        self.__name__, self.__qualname__ = fn.__name__, fn.__qualname__
        self.__module__, self.__doc__ = fn.__module__, fn.__doc__
        #: the extension's function, or "" for a kernel with no twin
        self.native_name = f"{fn.__module__.rsplit('.', 1)[-1]}_{fn.__name__.lstrip('_')}" if native else ""
        self.backend = ""  # "native" or "numba" once bound
        self._impl: Callable[..., Any] | None = None
        self._jit: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        impl = self._impl or self._bind()
        try:
            return impl(*args)
        except TypeError:
            if impl is self._jit:
                raise
            # arguments the twin does not take (another dtype) and numba compiles for
            return self.numba()(*args)

    def _bind(self) -> Callable[..., Any]:
        with _LOCK:
            if self._impl is None:
                fn = self.native() if native_wanted() else None
                self._impl, self.backend = (fn, "native") if fn is not None else (self.numba(), "numba")
            return self._impl

    def native(self) -> Callable[..., Any] | None:
        """The extension's twin (None: no twin, or not built), whatever ``CTDA_KERNELS`` says."""
        return getattr(_native(), self.native_name, None) if self.native_name else None

    def numba(self) -> Callable[..., Any]:
        """numba's compilation; the kernels it calls must be numba's too when it compiles,
        so the names of its module that it reads are rebound to theirs (until :func:`reset`)."""
        if self._jit is None:
            import numba

            self._jit = numba.njit(cache=True, nogil=True)(self.py)
            names = self.py.__globals__
            for name in self.py.__code__.co_names:
                callee = names.get(name)
                if isinstance(callee, Kernel):
                    names[name] = callee.numba()
                    _REBOUND.append((names, name, callee))
        return self._jit

    def __repr__(self) -> str:
        return f"<kernel {self.__module__}.{self.__qualname__} ({self.backend or 'unbound'})>"


def kernel(fn: Callable[..., Any] | None = None, *, native: bool = True) -> Any:
    """Declare a compiled loop: ``@kernel`` (one with a native twin) or
    ``@kernel(native=False)`` (numba only, e.g. a helper only other numba kernels call)."""

    def declare(f: Callable[..., Any]) -> Kernel:
        k = Kernel(f, native)
        _ALL.append(k)
        return k

    return declare(fn) if fn is not None else declare


def _native_kernels() -> list[Kernel]:
    return [k for k in _ALL if k.native_name]


def reset() -> None:
    """Unbind every kernel, so the next calls bind anew (after changing ``CTDA_KERNELS``)."""
    with _LOCK:
        for names, name, k in reversed(_REBOUND):
            names[name] = k
        _REBOUND.clear()
        for k in _ALL:
            # numba's compilation is dropped too: compiled again, it rebinds its callees
            k._impl, k._jit, k.backend = None, None, ""


def bound() -> dict[str, str]:
    """``module.name`` -> ``native`` or ``numba`` for every kernel this process has called."""
    return {f"{k.__module__}.{k.__qualname__}": k.backend for k in _ALL if k.backend}


def kernels_name() -> str:
    """Which kernels run, for ``ctda --version`` and debug output."""
    if not native_wanted():
        return f"numba (native kernels disabled by {KERNELS_ENV}=numba)"
    if extension() is None:
        return "numba (native extension not built)"
    if not native_built():
        return "numba where the native extension lacks them (built from older sources)"
    return "native (ctda_native extension)"
