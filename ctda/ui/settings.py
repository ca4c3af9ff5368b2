"""What the UI process was started with: the store, upload limits, drawing caps.

``ctda ui`` passes these as arguments after ``--`` on the ``streamlit run`` command line;
each also has an environment variable so tests (Streamlit's AppTest runs the script
in-process, with pytest's own argv) and deployments can set them without a command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctda.api import StoreFacts

# the API is imported where a property needs it: ``ctda ui --help`` reads the defaults
# below, and importing the library loads the engine (numpy, pandas, numba)

#: compressed size of one upload; Kineto traces compress 10-30x, so 512 MB holds a trace
#: of several GiB of JSON, more than the decompressed cap below lets through anyway
DEFAULT_MAX_UPLOAD_MB = 512
#: decompressed size of an uploaded trace (the upload limit counts compressed bytes). The
#: UI is a shared server: reading and analysing a trace takes about 2-4x its JSON size in
#: memory, so 2 GiB keeps one upload within a few GiB; ``--max-trace-mb`` raises it
DEFAULT_MAX_TRACE_MB = 2048
#: bars per timeline. The timeline is the costliest element of the pages that show it: in
#: headless Chromium on 2 cores a Critical path page switch took 0.76 s with 2,000 bars and
#: 0.59-0.75 s with 1,000 (medians; README, *Benchmarks*). 1,000 bars still give each of a
#: few lanes a bar every few pixels of a wide screen; ``--max-events`` draws more.
DEFAULT_MAX_EVENTS = 1000

ENV_DB = "CTDA_DB"
ENV_MAX_UPLOAD = "CTDA_UI_MAX_UPLOAD_MB"
ENV_MAX_TRACE = "CTDA_UI_MAX_TRACE_MB"
ENV_MAX_EVENTS = "CTDA_UI_MAX_EVENTS"
ENV_UPLOADS = "CTDA_UI_UPLOADS"
ENV_RUN = "CTDA_UI_RUN"


@dataclass(frozen=True)
class Settings:
    """The UI's configuration; immutable for the life of the server process."""

    db: str | None  # --db value (None: $CTDA_DB or the default embedded store)
    max_upload_mb: int = DEFAULT_MAX_UPLOAD_MB
    max_trace_mb: int = DEFAULT_MAX_TRACE_MB  # decompressed bytes of one upload
    max_events: int = DEFAULT_MAX_EVENTS  # events drawn per timeline, critical ones first
    uploads: str | None = None  # where uploaded traces are kept (None: beside the store)
    #: the run a new session opens on (None: the sidebar's first); the server loads it
    #: before it listens (``ctda.ui.warm``), so its pages' first visits are warm
    run: str | None = None

    @property
    def facts(self) -> StoreFacts:
        """Where the store is and what serves it (its engine's ``title``, its ``dialect``)."""
        from ctda.api import store_facts

        return store_facts(self.db)

    @property
    def location(self) -> str:
        """The store, printable (no credentials)."""
        return self.facts.location

    @property
    def uploads_dir(self) -> Path:
        """Uploaded traces are kept so a run's ``file`` names a real file."""
        if self.uploads:
            return Path(self.uploads).expanduser()
        folder = self.facts.folder
        if folder is not None:
            return folder / "uploads"
        from platformdirs import user_data_dir

        return Path(user_data_dir("ctda", appauthor=False)) / "uploads"


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctda-ui", add_help=False)
    p.add_argument("--db", default=None)
    p.add_argument("--max-upload-mb", type=int, default=None)
    p.add_argument("--max-trace-mb", type=int, default=None)
    p.add_argument("--max-events", type=int, default=None)
    p.add_argument("--uploads", default=None)
    p.add_argument("--run", default=None)
    return p


def from_argv(argv: list[str] | None = None) -> Settings:
    """Settings from the script's arguments, then the environment, then defaults."""
    # unknown arguments are ignored: under AppTest, argv is pytest's own command line
    ns, _ = parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    return Settings(
        db=ns.db or os.environ.get(ENV_DB) or None,
        max_upload_mb=ns.max_upload_mb or _int_env(ENV_MAX_UPLOAD, DEFAULT_MAX_UPLOAD_MB),
        max_trace_mb=ns.max_trace_mb or _int_env(ENV_MAX_TRACE, DEFAULT_MAX_TRACE_MB),
        max_events=max(ns.max_events or _int_env(ENV_MAX_EVENTS, DEFAULT_MAX_EVENTS), 100),
        uploads=ns.uploads or os.environ.get(ENV_UPLOADS) or None,
        run=ns.run or os.environ.get(ENV_RUN) or None,
    )


def to_argv(s: Settings) -> list[str]:
    """The script arguments that reproduce ``s`` (for ``ctda ui``)."""
    out = ["--max-upload-mb", str(s.max_upload_mb), "--max-events", str(s.max_events)]
    out += ["--max-trace-mb", str(s.max_trace_mb)]
    if s.db:
        out += ["--db", s.db]
    if s.uploads:
        out += ["--uploads", s.uploads]
    if s.run:
        out += ["--run", s.run]
    return out
