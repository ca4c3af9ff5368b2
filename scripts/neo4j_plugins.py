"""Neo4j plugins for ctda's test server: Graph Data Science, APOC core, ctda's procedures.

``plugin_dir(cache_dir)`` returns a directory of jars to drop into an instance's
``plugins/`` folder, building it on first use:

- GDS and APOC core are resolved from Maven Central with ``mvn -C`` (checksums checked):
  GDS's open edition is published there as ``org.neo4j.gds`` artifacts (``proc`` plus
  ``opengds-extension``, which registers its procedures), APOC core as
  ``org.neo4j.procedure:apoc-core`` and ``apoc-common``;
- ctda's own procedures (``neo4j/procedures`` in this repository) are compiled with
  ``mvn package`` against the server's public procedure API.

The directory is cached per plugin versions and per hash of ctda's procedure sources, so
editing the Java code rebuilds it. Only the standard library is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

GDS_VERSION = "2.13.9"  # the GDS line for Neo4j 5.26 LTS
APOC_VERSION = "5.26.19"
MVN_TIMEOUT = 900.0
PROCEDURES = Path(__file__).resolve().parents[1] / "neo4j" / "procedures"
#: what ctda calls of the plugins: its own procedure and APOC's pure conversions. Nothing
#: else is loaded (no apoc.load/cypher/periodic/log, no GDS writes), whatever a query says
ALLOWED_PROCEDURES = "ctda.*,apoc.convert.*,apoc.map.*"
#: neo4j.conf settings: the plugins' procedures ctda needs, and a server hardened against
#: its queries (docs/security.md): no file URLs in LOAD CSV, no outbound connections from
#: Cypher at all (every address blocked), bounded transaction memory and time
SETTINGS = {
    "dbms.security.procedures.unrestricted": ALLOWED_PROCEDURES,
    "dbms.security.procedures.allowlist": ALLOWED_PROCEDURES,
    "dbms.security.allow_csv_import_from_file_urls": "false",
    "internal.dbms.cypher_ip_blocklist": "0.0.0.0/0,::/0",
    "db.memory.transaction.max": "1500m",  # 512m stopped the in-database what-if of a 300-rank trace
    "db.transaction.timeout": "300s",
    # GDS's catalog and the procedures' results live on the heap
    "server.memory.heap.max_size": "2g",
}
#: conf/apoc.conf (APOC reads its settings only there or from the environment)
APOC_CONF = {
    "apoc.import.file.enabled": "false",
    "apoc.export.file.enabled": "false",
    "apoc.trigger.enabled": "false",
}
#: the keys of SETTINGS that harden the server (the rest size it)
HARDENING = (
    "dbms.security.procedures.unrestricted",
    "dbms.security.procedures.allowlist",
    "dbms.security.allow_csv_import_from_file_urls",
    "internal.dbms.cypher_ip_blocklist",
)
#: a server without the hardening (``neo4j_server.start(hardened=False)``): Neo4j's defaults
#: (every procedure loaded, file URLs and every address allowed) and APOC's file import on,
#: what a user's APOC may be set up to do. tests/test_neo4j_unhardened.py shows that what the
#: hardened server refuses works there, so each refusal is the hardening's doing
OPEN_SETTINGS = {k: v for k, v in SETTINGS.items() if k not in HARDENING} | {
    "dbms.security.procedures.unrestricted": "apoc.*",
}
OPEN_APOC_CONF = {"apoc.import.file.enabled": "true"}
#: APOC core and its runtime dependencies (apoc-core's pom) among the plugin jars, by name
#: prefix: a server that needs APOC alone starts faster without GDS
APOC_JARS = (
    "apoc-", "json-path-", "json-smart-", "accessors-smart-", "asm-", "opencsv-",
    "RoaringBitmap-", "HdrHistogram-",
)  # fmt: skip

PLUGINS_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>ctda.local</groupId>
  <artifactId>neo4j-plugins</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.neo4j.gds</groupId><artifactId>proc</artifactId><version>{gds}</version></dependency>
    <dependency><groupId>org.neo4j.gds</groupId><artifactId>opengds-extension</artifactId><version>{gds}</version></dependency>
    <dependency><groupId>org.neo4j.procedure</groupId><artifactId>apoc-core</artifactId><version>{apoc}</version></dependency>
    <dependency><groupId>org.neo4j.procedure</groupId><artifactId>apoc-common</artifactId><version>{apoc}</version></dependency>
  </dependencies>
</project>
"""


class PluginError(RuntimeError):
    """The plugins could not be resolved or built."""


def _log(message: str) -> None:
    print(f"neo4j_plugins: {message}", file=__import__("sys").stderr, flush=True)


def sources_digest() -> str:
    """Hash of ctda's procedure sources (pom and Java files)."""
    h = hashlib.sha256()
    for path in sorted(p for p in PROCEDURES.rglob("*") if p.is_file() and "target" not in p.parts):
        h.update(str(path.relative_to(PROCEDURES)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(cache_dir: Path) -> Iterator[None]:
    """One builder at a time per cache (parallel test sessions share it)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".plugins.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def plugin_dir(cache_dir: Path) -> Path:
    """The cached directory of plugin jars, built on first use."""
    target = cache_dir / f"plugins-gds{GDS_VERSION}-apoc{APOC_VERSION}-ctda{sources_digest()}"
    if (target / ".complete").is_file():
        return target
    with _locked(cache_dir):
        if (target / ".complete").is_file():
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise PluginError(
                "`mvn` is needed to fetch GDS/APOC and build ctda's procedures (apt-get install maven)"
            )
        staging = Path(tempfile.mkdtemp(prefix="plugins-", dir=cache_dir))
        try:
            jars = staging / "jars"
            repo = cache_dir / "m2"  # kept: later builds reuse the downloaded jars
            _log(f"resolving GDS {GDS_VERSION} and APOC {APOC_VERSION} from Maven Central")
            pom = staging / "pom.xml"
            pom.write_text(PLUGINS_POM.format(gds=GDS_VERSION, apoc=APOC_VERSION), encoding="utf-8")
            _mvn([mvn, "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={jars}",
                  "-DincludeScope=runtime", "-DexcludeTypes=pom"], repo)  # fmt: skip
            _log("building ctda's procedures")
            build = staging / "procedures"
            shutil.copytree(PROCEDURES, build, ignore=shutil.ignore_patterns("target"))
            _mvn([mvn, "-f", str(build / "pom.xml"), "package", "-DskipTests"], repo)
            built = list((build / "target").glob("ctda-procedures-*.jar"))
            if not built:
                raise PluginError("mvn package produced no ctda-procedures jar")
            shutil.copy2(built[0], jars / built[0].name)
            (jars / ".complete").write_text("ok\n", encoding="utf-8")
            if target.exists():
                shutil.rmtree(target)
            jars.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _mvn(command: list[str], repo: Path) -> None:
    full = [command[0], "-B", "-q", "-C", "-Dstyle.color=never", f"-Dmaven.repo.local={repo}", *command[1:]]
    try:
        result = subprocess.run(full, capture_output=True, text=True, timeout=MVN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as error:
        raise PluginError(f"mvn did not finish within {MVN_TIMEOUT:.0f} s") from error
    if result.returncode != 0:
        lines = [
            re.sub(r"\x1b\[[0-9;]*m", "", x).strip() for x in (result.stdout + result.stderr).splitlines()
        ]
        errors = [x for x in lines if x.startswith("[ERROR]") and x != "[ERROR]"]
        raise PluginError(f"mvn failed: {(errors or lines or ['no output'])[0]}")
