"""Analysis options, validated and normalised in one place.

Every surface (the Python API, the CLI, the UI, a snapshot read back from a store) builds
its options through :class:`AnalysisOptions`, whose constructor checks and normalises
each field, so a bad value fails before a trace is read, with one :class:`OptionError`
line, and two spellings of the same options compare equal and share one
:meth:`AnalysisOptions.key` (the key a store uses to recognise a run it already holds).
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# the registries' names, for help texts that must not import the engine
from ctda.analysis.names import BREAKDOWN_KINDS as BREAKDOWN_KINDS
from ctda.analysis.names import CROSS_THREAD as CROSS_THREAD
from ctda.analysis.names import MODE_SUMMARIES as MODE_SUMMARIES
from ctda.analysis.rule_options import RuleOptions
from ctda.errors import CtdaError

#: ``windows`` values that are not regexes
WINDOW_KEYWORDS = ("steps", "trace")


#: set while options stored by an earlier version are read back (see ``from_dict``)
_STORED: contextvars.ContextVar[bool] = contextvars.ContextVar("ctda_options_stored", default=False)


class OptionError(CtdaError, ValueError):
    """A bad analysis option (unknown rule or mode, bad window regex, no window matches, ...)."""


def cross_thread_rules() -> tuple[str, ...]:
    """Names of the cross-thread rules, in the order the engine runs them."""
    from ctda.analysis import modes  # the registry imports every rule module: only on use

    return modes.get("ctda").selectable


def parse_cross_thread(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``all``, ``none``, a comma list or a sequence of rule names -> the canonical tuple.

    The canonical order is the engine's, whatever order the names came in: the rules run
    in that order (which decides which rule an edge found twice is credited to), so the
    same set always gives the same analysis and the same options key.
    """
    known = cross_thread_rules()
    if spec is None:
        return known
    if isinstance(spec, str):
        word = spec.strip().lower()
        if word == "all":
            return known
        if word in ("none", ""):
            return ()
        names = [s.strip().lower() for s in word.split(",")]
    else:
        try:
            names = [str(s).strip().lower() for s in spec]
        except TypeError:
            raise OptionError(
                f"cross_thread must be 'all', 'none', a comma list or a list of rule names, not {spec!r}"
            ) from None
    names = [s for s in names if s]
    unknown = [s for s in names if s not in known]
    if unknown:
        raise OptionError(
            f"unknown cross-thread rule(s) {', '.join(unknown)}; choose from {', '.join(known)}, all or none"
        )
    return tuple(r for r in known if r in names)


def parse_mode(mode: str) -> str:
    """An analysis mode of the modes registry, case-insensitively."""
    from ctda.analysis import modes

    word = str(mode).strip().lower()
    if word not in modes.MODES:
        raise OptionError(f"unknown mode {mode!r}; choose from {', '.join(modes.MODES)}")
    return word


def parse_windows(spec: str) -> str:
    """``steps``, ``trace``, or a regex over CPU event names (compiled here, so a bad one
    fails now). A plain word close to a keyword (``step``, ``Steps``, ``traces``) is
    refused: it would silently select nothing or the wrong events. Options read back from
    a store keep such a word (earlier versions took it as a regex)."""
    if not isinstance(spec, str) or not spec.strip():
        raise OptionError(f"windows must be 'steps', 'trace' or a regex over event names, not {spec!r}")
    if spec in WINDOW_KEYWORDS:
        return spec
    if re.fullmatch(r"[A-Za-z_ ]+", spec) and not _STORED.get():
        close = difflib.get_close_matches(spec.strip().lower(), WINDOW_KEYWORDS, n=1, cutoff=0.75)
        if close:
            raise OptionError(
                f"windows {spec!r} is not a keyword: did you mean {close[0]!r}? "
                f"(to select events whose name contains it, write the regex as '({spec})')"
            )
    try:
        re.compile(spec)
    except re.error as exc:
        raise OptionError(f"windows {spec!r} is not a valid regular expression: {exc}") from None
    return spec


def parse_rule_options(value: RuleOptions | Mapping[str, Any] | None) -> RuleOptions:
    """Rule tunables from a :class:`RuleOptions` or a mapping of some of its fields."""
    if value is None:
        return RuleOptions()
    if isinstance(value, RuleOptions):
        items = dataclasses.asdict(value)
    elif isinstance(value, Mapping):
        items = dict(value)
    else:
        raise OptionError(f"rule_options must be a RuleOptions or a mapping, not {type(value).__name__}")
    fields = [f.name for f in dataclasses.fields(RuleOptions)]
    for k, v in items.items():
        if k not in fields:
            raise OptionError(f"unknown rule option {k!r}{_suggest(k, fields)}; known: {', '.join(fields)}")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise OptionError(f"rule option {k} must be a non-negative integer, not {v!r}")
    return RuleOptions(**items)


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse and which rules to use; checked and normalised on construction.

    ``windows``: ``steps`` (each ``ProfilerStep#N``, the whole trace when there are none),
    ``trace``, or a regex over CPU event names. ``cross_thread``: ``all``, ``none``, a
    comma list or a sequence of rule names (stored as the canonical tuple). ``mode``: one
    of :data:`ctda.analysis.modes.MODES`, any case. ``rule_options``: a :class:`RuleOptions` or a mapping.
    """

    windows: str = "steps"
    cross_thread: tuple[str, ...] = field(default_factory=cross_thread_rules)
    mode: str = "ctda"
    rule_options: RuleOptions = field(default_factory=RuleOptions)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        set_(self, "windows", parse_windows(self.windows))
        set_(self, "cross_thread", parse_cross_thread(self.cross_thread))
        set_(self, "mode", parse_mode(self.mode))
        set_(self, "rule_options", parse_rule_options(self.rule_options))

    def to_dict(self) -> dict[str, Any]:
        """The options as plain JSON values (what a store and a snapshot keep)."""
        return {
            "windows": self.windows,
            "cross_thread": list(self.cross_thread),
            "mode": self.mode,
            "rule_options": dataclasses.asdict(self.rule_options),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AnalysisOptions:
        """Inverse of :meth:`to_dict`; missing keys take their defaults. Options a store
        has held since before a check existed still load (they are what the run holds)."""
        token = _STORED.set(True)
        try:
            return validate_options(**{k: v for k, v in d.items() if v is not None})
        finally:
            _STORED.reset(token)

    def key(self) -> str:
        """Stable digest of :meth:`to_dict`: same file + same key = same stored run."""
        canon = self.to_dict()
        # sorted, as stores have keyed runs since before the rule order was canonical
        canon["cross_thread"] = sorted(canon["cross_thread"])
        text = json.dumps(canon, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(AnalysisOptions))


def validate_options(options: AnalysisOptions | None = None, **kw: Any) -> AnalysisOptions:
    """Options from keyword arguments (names as in :class:`AnalysisOptions`), optionally
    overriding ``options``; an unknown name is an :class:`OptionError`, not a TypeError."""
    for k in kw:
        if k not in OPTION_NAMES:
            known = ", ".join(OPTION_NAMES)
            raise OptionError(f"unknown option {k!r}{_suggest(k, OPTION_NAMES)}; options: {known}")
    if options is None:
        return AnalysisOptions(**kw)
    if not isinstance(options, AnalysisOptions):
        raise OptionError(f"options must be an AnalysisOptions, not {type(options).__name__}")
    return dataclasses.replace(options, **kw) if kw else options


def parse_step(step: str | int | None) -> int | None:
    """A report's step selection: ``all`` (None) or a ProfilerStep number."""
    if step is None or (isinstance(step, str) and step.strip().lower() == "all"):
        return None
    try:
        if isinstance(step, bool):
            raise TypeError(step)
        return int(step)
    except (TypeError, ValueError):
        raise OptionError(f"step must be a ProfilerStep number or 'all', not {step!r}") from None


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
