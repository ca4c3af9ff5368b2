"""ctda: cross-thread dependency-aware critical path analysis for PyTorch profiler traces.

The public API (:mod:`ctda.api`) is importable from here: ``ctda.analyze``,
``ctda.open_store``, ``ctda.report``, ``ctda.compare``, ... (``ctda.whatif`` is the
package of the what-if engine, so the in-memory what-if is ``ctda.api.whatif``). It is
loaded on first use, so ``import ctda`` (and the command line) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctda import lazy

__version__ = "0.1.0"

#: name -> module that defines it
_EXPORTS = {
    "CtdaError": "ctda.errors",
    "OptionError": "ctda.options",
    "AnalysisOptions": "ctda.options",
    "validate_options": "ctda.options",
    **{
        name: "ctda.api"
        for name in (
            "analyze",
            "compare",
            "convert",
            "export",
            "named_queries",
            "open_store",
            "opportunities",
            "read",
            "report",
            "run_names",
            "summarize",
            "validate",
        )
    },
}

__all__ = [
    "AnalysisOptions",
    "CtdaError",
    "OptionError",
    "__version__",
    "analyze",
    "api",
    "compare",
    "convert",
    "export",
    "named_queries",
    "open_store",
    "opportunities",
    "read",
    "report",
    "run_names",
    "summarize",
    "validate",
    "validate_options",
]

if TYPE_CHECKING:
    from ctda.api import (
        analyze,
        compare,
        convert,
        export,
        named_queries,
        open_store,
        opportunities,
        read,
        report,
        run_names,
        summarize,
        validate,
    )
    from ctda.errors import CtdaError
    from ctda.options import AnalysisOptions, OptionError, validate_options


_lookup = lazy.exports(globals(), _EXPORTS, modules={"api": "ctda.api"})


def __getattr__(name: str) -> Any:
    return _lookup(name)
