"""Where the store is: ``--db`` / ``$CTDA_DB``, and Neo4j credentials from the environment.

A ``bolt://``, ``bolt+s://``, ``neo4j://`` or ``neo4j+s://`` URI selects Neo4j; anything
else is a file path for the embedded store (default: ``store.lbug`` in the user data dir).
Credentials come from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or from
``NEO4J_AUTH=user/password`` (the Neo4j Docker image's variable), or from a URI's
``user:password@`` part; they are stripped from everything that is printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
DEFAULT_FILE = "store.lbug"


def default_path() -> Path:
    """The embedded store used when neither ``--db`` nor ``$CTDA_DB`` is given."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("ctda", appauthor=False)) / DEFAULT_FILE


@dataclass(frozen=True)
class Target:
    """A resolved store location."""

    kind: str  # "neo4j" or "ladybug"
    location: str  # URI without credentials, or a filesystem path
    auth: tuple[str, str] | None = field(default=None, repr=False)
    database: str | None = None

    def __str__(self) -> str:
        return self.location


def is_uri(spec: str) -> bool:
    return spec.split("://", 1)[0].lower() in NEO4J_SCHEMES and "://" in spec


def resolve(spec: str | None = None) -> Target:
    """``spec`` (``--db``), else ``$CTDA_DB``, else the default embedded path."""
    spec = spec or os.environ.get("CTDA_DB") or ""
    if not spec:
        return Target("ladybug", str(default_path()))
    if not is_uri(spec):
        return Target("ladybug", str(Path(spec).expanduser()))
    parts = urlsplit(spec)
    auth = _env_auth()
    if parts.username is not None and auth is None:
        auth = (unquote(parts.username), unquote(parts.password or ""))
    host = parts.hostname or "localhost"
    netloc = f"{host}:{parts.port}" if parts.port else host
    clean = urlunsplit((parts.scheme, netloc, "", "", ""))
    database = parts.path.strip("/") or os.environ.get("CTDA_NEO4J_DATABASE") or None
    return Target("neo4j", clean, auth, database)


def _env_auth() -> tuple[str, str] | None:
    user = os.environ.get("CTDA_NEO4J_USER")
    password = os.environ.get("CTDA_NEO4J_PASSWORD")
    if password is not None:
        return (user or "neo4j", password)
    raw = os.environ.get("NEO4J_AUTH", "")
    if "/" in raw:
        u, p = raw.split("/", 1)
        return (u, p)
    return None
