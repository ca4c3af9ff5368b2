"""Edge rules: one function per dependency family, each returning an EdgeBatch.

Every rule is declared once with :func:`~ctda.analysis.rules.registry.rule` (name, family;
its docstring names the trace fields it reads and why the dependency is real). Importing
this package declares ctda's own rules, in the order the graph builder runs them:
structural rules first, then the cross-thread ones ``--cross-thread`` switches by name.
HTA's rules are declared by :mod:`ctda.analysis.hta`; :mod:`ctda.analysis.modes` says
which rules each analysis mode runs.
"""

from __future__ import annotations

# imported for their declarations, in the order the rules of a family run
from ctda.analysis.rules import cpu  # noqa: F401

# isort: split
from ctda.analysis.rules import gpu  # noqa: F401

# isort: split
from ctda.analysis.rules import cross_thread  # noqa: F401

# isort: split
from ctda.analysis.rules import wake  # noqa: F401
from ctda.analysis.rules.context import RuleContext
from ctda.analysis.rules.registry import RuleSpec, rule

__all__ = ["RuleContext", "RuleSpec", "rule"]
