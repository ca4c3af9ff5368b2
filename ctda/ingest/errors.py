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
