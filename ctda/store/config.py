"""Where the store is: ``--db`` / ``$CTDA_DB``, and Neo4j credentials from the environment.

A URI whose scheme a backend declares (:mod:`ctda.store.backends`: ``bolt://``,
``neo4j+s://``, ... select Neo4j) selects that backend; anything else is a file path for
the embedded store (default: ``store.lbug`` in the user data dir).
Credentials come from ``CTDA_NEO4J_USER`` / ``CTDA_NEO4J_PASSWORD`` or from
``NEO4J_AUTH=user/password`` (the Neo4j Docker image's variable), or from a URI's
``user:password@`` part; they are stripped from everything that is printed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from ctda.store import backends

DEFAULT_FILE = "store.lbug"


def default_path() -> Path:
    """The embedded store used when neither ``--db`` nor ``$CTDA_DB`` is given."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("ctda", appauthor=False)) / DEFAULT_FILE


@dataclass(frozen=True)
class Target:
    """A resolved store location."""

    kind: str  # the backend (ctda.store.backends): "ladybug", "neo4j", ...
    location: str  # URI without credentials, or a filesystem path
    auth: tuple[str, str] | None = field(default=None, repr=False)
    database: str | None = None

    def __str__(self) -> str:
        return self.location

    @property
    def is_path(self) -> bool:
        """The store is a file on this machine (not a server)."""
        return not backends.by_kind(self.kind).schemes


def is_uri(spec: str) -> bool:
    """``spec`` is a URL with a scheme some backend serves."""
    scheme, sep, _ = spec.partition("://")
    return bool(sep) and backends.for_scheme(scheme) is not None


def resolve(spec: str | None = None) -> Target:
    """``spec`` (``--db``), else ``$CTDA_DB``, else the default embedded path."""
    spec = spec or os.environ.get("CTDA_DB") or ""
    if not spec:
        return Target(backends.for_paths().kind, str(default_path()))
    backend = backends.for_scheme(spec.partition("://")[0]) if "://" in spec else None
    if backend is None:
        return Target(backends.for_paths().kind, str(Path(spec).expanduser()))
    parts = urlsplit(spec)
    auth = _env_auth()
    if parts.username is not None and auth is None:
        auth = (unquote(parts.username), unquote(parts.password or ""))
    host = parts.hostname or "localhost"
    netloc = f"{host}:{parts.port}" if parts.port else host
    clean = urlunsplit((parts.scheme, netloc, "", "", ""))
    database = parts.path.strip("/") or os.environ.get("CTDA_NEO4J_DATABASE") or None
    return Target(backend.kind, clean, auth, database)


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
