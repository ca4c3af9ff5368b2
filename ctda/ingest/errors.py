"""Errors the reader raises for input it cannot interpret."""

from __future__ import annotations

from pathlib import Path

from ctda.errors import CtdaError


class TraceError(CtdaError):
    """A trace file that cannot be read; the message is one line naming file and problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())
        super().__init__(f"{self.path}: {self.problem}")

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str]]:
        # pickled by its two fields: an error raised in a worker process (a job's rank,
        # a decode worker) must come back as the same one-line error, not a TypeError
        return (type(self), (self.path, self.problem))
