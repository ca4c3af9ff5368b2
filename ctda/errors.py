"""The one base class of every error ctda raises for its user to read.

Each subclass carries a one-line message that names what is wrong (a file, an option, a
run, a query); callers that face a user (the CLI, the UI) catch :class:`CtdaError` and
show that line, so a new kind of user error needs no change in them.
"""

from __future__ import annotations


class CtdaError(Exception):
    """A problem with the user's input or environment; ``str(exc)`` is one line for them."""
