"""Session-scoped pytest fixture that runs a throwaway Neo4j 5.26 server.

Make the fixture visible to a test module (or to the conftest) with::

    from tests.neo4j_fixture import neo4j_server  # noqa: F401

Environment switches:

* ``CTDA_SKIP_NEO4J=1`` skips every test that uses the fixture.
* ``CTDA_REQUIRE_NEO4J=1`` (set by CI) turns every such skip into a failure,
  so a missing Java or an unreachable Maven Central cannot go unnoticed.

Without Java 17+ on ``PATH`` the tests are skipped with a loud reason.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "neo4j_server.py"
MODULE_NAME = "ctda_neo4j_server_script"
SKIP_PREFIX = "Neo4j tests skipped: "

# One server per test session even if several modules import the fixture:
# each import creates its own fixture definition, and pytest caches the value
# per definition, which would otherwise start one server per module.
_shared: dict[str, Any] = {}


def load_server_module() -> ModuleType:
    """Import ``scripts/neo4j_server.py`` by path; ``scripts/`` is no package."""
    loaded = sys.modules.get(MODULE_NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(MODULE_NAME, SCRIPT)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve the defining module through sys.modules.
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    return module


def _flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to ``1``."""
    return os.environ.get(name, "").strip() == "1"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip loudly, or fail when ``CTDA_REQUIRE_NEO4J=1`` forbids skipping."""
    message = SKIP_PREFIX + reason
    if _flag("CTDA_REQUIRE_NEO4J"):
        pytest.fail(f"{message} -- but CTDA_REQUIRE_NEO4J=1, so this is a failure", pytrace=False)
    # The warning shows in pytest's summary even when skip reasons are hidden.
    warnings.warn(message, UserWarning, stacklevel=2)
    pytest.skip(message)


def _check_prerequisites(server: ModuleType) -> None:
    """Skip (or fail) unless the opt-out is unset and Java 17+ is on PATH."""
    if _flag("CTDA_SKIP_NEO4J"):
        skip_or_fail("CTDA_SKIP_NEO4J=1 is set")
    major = server.java_major_version("java")
    if major is None:
        skip_or_fail(f"no runnable `java` on PATH; Neo4j 5.26 needs Java {server.MIN_JAVA}+")
    if major < server.MIN_JAVA:
        skip_or_fail(f"`java` on PATH is Java {major}; Neo4j 5.26 needs Java {server.MIN_JAVA}+")


def _start_shared(server: ModuleType, parent: Path) -> ServerInfo:
    """Start the session's server, or return the one already running."""
    if "info" not in _shared:
        try:
            server.fetch()
        except server.FetchError as error:
            skip_or_fail(f"cannot fetch Neo4j: {error}")
        try:
            _shared["info"] = server.start(data_dir=parent, plugins=True)
        except server.FetchError as error:
            skip_or_fail(f"cannot install the Neo4j plugins: {error}")
    info: ServerInfo = _shared["info"]
    return info


def _stop_shared(server: ModuleType) -> None:
    """Stop the session's server; later calls do nothing."""
    info = _shared.pop("info", None)
    if info is not None:
        server.stop(info)


@pytest.fixture(scope="session")
def neo4j_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """Yield a running, password-protected Neo4j server for the whole session."""
    server = load_server_module()
    _check_prerequisites(server)
    info = _start_shared(server, tmp_path_factory.mktemp("neo4j"))
    try:
        yield info
    finally:
        _stop_shared(server)
