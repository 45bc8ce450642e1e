"""Start a throwaway Hive Metastore (Thrift, no auth) on loopback.

No package ships a metastore, but the pyspark wheel carries hive-metastore 2.3 with Derby,
DataNucleus and HikariCP: ``java/HiveMetastoreLauncher.java`` serves it on 127.0.0.1 only, with an
embedded Derby database and the transaction tables that Iceberg's commit locks need. The launcher
is compiled on first use (``javac -cp 'pyspark/jars/*'``, about 5 s) into
``~/.cache/icesql/hive-launcher/<hash of the source, javac, jars>/``; the metastore takes about
8 s to start (DataNucleus creates its schema) in a JVM of at most 512 MB. Derby, the warehouse
(a local ``file://`` directory) and the server log (``HiveMetastore.log_path``) live in a
temporary directory kept for debugging until ``stop()``.

    with HiveMetastore.start() as hms:
        hms.uri, hms.warehouse
        catalog = hms.catalog()          # pyiceberg HiveCatalog
        hms.iceberg_java_sql([...])      # Iceberg Java 1.10 through the Spark 3.5 reader harness
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.support.require import missing
from tests.support.servers import LOOPBACK, LoopbackServer, ServerUnavailable, serve

LAUNCHER_SOURCE = Path(__file__).resolve().parent / "java" / "HiveMetastoreLauncher.java"
MAIN_CLASS = "HiveMetastoreLauncher"
JVM_OPTIONS = ["-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]  # C1 only: starts 2x faster
_SERVING = re.compile(r"icesql-hive-metastore: serving on 127\.0\.0\.1:(\d+)")
_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
"""


class HiveUnavailable(ServerUnavailable):
    """Java, javac, pyspark's jars or the thrift module are missing, or the metastore did not start."""


def pyspark_jars() -> Path | None:
    """The ``jars`` directory of the installed pyspark wheel (hive-metastore 2.3, Derby, ...)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return jars if any(jars.glob("hive-metastore-*.jar")) else None


def _jdk_tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def missing_requirement() -> str | None:
    """Why a metastore cannot start here, or None."""
    if _jdk_tool("java") is None or _jdk_tool("javac") is None:
        return "java and javac (a JDK 17) are not installed"
    if pyspark_jars() is None:
        return "pyspark's jars (with hive-metastore) are not installed"
    if importlib.util.find_spec("thrift") is None:
        return "the thrift module is not installed (pip install thrift; pyiceberg[hive] needs it)"
    return None


def launcher_classes(jars: Path) -> Path:
    """The directory holding the compiled launcher, compiling it unless cached."""
    javac = _jdk_tool("javac")
    if javac is None:
        raise HiveUnavailable("javac is not installed")
    source = LAUNCHER_SOURCE.read_bytes()
    key = hashlib.sha256(
        source
        + os.path.realpath(javac).encode()
        + ",".join(sorted(p.name for p in jars.glob("hive-*.jar"))).encode()
    ).hexdigest()[:16]
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "icesql" / "hive-launcher"
    target = cache_root / key
    if (target / f"{MAIN_CLASS}.class").is_file():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root))
    try:
        out = subprocess.run(
            [javac, "-nowarn", "-cp", f"{jars}/*", "-d", str(staging), str(LAUNCHER_SOURCE)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if out.returncode != 0:
            raise HiveUnavailable(f"javac failed:\n{out.stdout}{out.stderr}")
        try:
            staging.rename(target)  # atomic; a concurrent compile may have won
        except OSError:
            if not (target / f"{MAIN_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@dataclass(kw_only=True)
class HiveMetastore(
    LoopbackServer, name="the metastore", slug="hive", log_name="metastore.log", unavailable=HiveUnavailable
):
    """A running Hive Metastore; build it with ``HiveMetastore.start()``."""

    picks_port: ClassVar[bool] = False  # the JVM binds port 0 and prints the port
    ready_errors: ClassVar[tuple[type[Exception], ...]] = (Exception,)  # thrift's, while it starts
    stop_seconds: ClassVar[float] = 10.0

    @property
    def uri(self) -> str:
        return f"thrift://{self.authority}"

    @property
    def warehouse_dir(self) -> Path:
        return self.workdir / "warehouse"

    @property
    def warehouse(self) -> str:
        """``file:///...``: the metastore's ``hive.metastore.warehouse.dir`` (databases land in
        ``<warehouse>/<name>.db``)."""
        return self.warehouse_dir.as_uri()

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, *, timeout: float = 180.0, log_level: str = "warn") -> HiveMetastore:
        """Compile the launcher if needed, start the metastore on a free loopback port (the JVM
        binds port 0 and prints the port) and wait until a Thrift call answers. ``log_level``:
        log4j2's level for the server log (``info`` shows each call)."""
        why = missing_requirement()
        if why is not None:
            raise HiveUnavailable(why)
        jars = pyspark_jars()
        assert jars is not None
        classes = launcher_classes(jars)
        return cls._launch(lambda server: server._command(jars, classes, log_level), timeout)

    def _command(self, jars: Path, classes: Path, log_level: str) -> list[str]:
        """Write the log4j2 configuration and make the warehouse; the JVM's command line."""
        self.warehouse_dir.mkdir()
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J2.replace("{level}", log_level))
        return [
            str(_jdk_tool("java")),
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log4j.as_uri()}",
            f"-Dderby.stream.error.file={self.workdir / 'derby.log'}",
            "-cp",
            f"{classes}{os.pathsep}{jars}/*",
            MAIN_CLASS,
            "0",
            str(self.workdir),
            self.warehouse,
        ]

    def _ready(self) -> str | None:
        """The launcher printed its port and ``get_all_databases`` answers."""
        if not self.port:
            found = _SERVING.search(self.log_text())
            if not found:
                return "no port printed yet"
            self.port = int(found.group(1))
        with self.thrift_client() as client:
            client.get_all_databases()
        return None

    # ------------------------------------------------------------------ clients
    @contextlib.contextmanager
    def thrift_client(self, timeout_ms: int = 10000) -> Iterator[Any]:
        """A raw ``hive_metastore.ThriftHiveMetastore.Client`` (pyiceberg's generated bindings)."""
        from hive_metastore.ThriftHiveMetastore import Client
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        sock = TSocket.TSocket(LOOPBACK, self.port)
        sock.setTimeout(timeout_ms)
        transport = TTransport.TBufferedTransport(sock)
        transport.open()
        try:
            yield Client(TBinaryProtocol.TBinaryProtocol(transport))
        finally:
            transport.close()

    def catalog_properties(self) -> dict[str, str]:
        """pyiceberg ``HiveCatalog`` properties for this metastore (Hive 2 type mapping)."""
        return {"uri": self.uri, "warehouse": self.warehouse, "hive.hive2-compatible": "true"}

    def catalog(self, name: str = "hive", **properties: str) -> Any:
        """A pyiceberg ``HiveCatalog`` on this metastore; ``properties`` override the defaults."""
        from pyiceberg.catalog.hive import HiveCatalog

        return HiveCatalog(name, **{**self.catalog_properties(), **properties})

    def iceberg_java_sql(
        self, statements: list[str], *, catalog: str = "h", timeout: float = 600
    ) -> list[list[dict[str, Any]]]:
        """Run Spark SQL ``statements`` in the Java reader harness (Spark 3.5, Iceberg 1.10.2;
        ``tests.support.readers.java_available()``) with ``catalog`` an Iceberg ``SparkCatalog`` of
        ``type=hive`` on this metastore; one Spark session for all. Returns each statement's rows
        as dicts (values JSON-friendly: ``str()`` of what JSON cannot hold). About 10 s to start."""
        from tests.support import readers

        out = readers._run_java(
            [
                "-c",
                _SPARK_SQL,
                str(readers.HARNESS),
                catalog,
                self.uri,
                self.warehouse,
                str(self.workdir / "spark-warehouse"),
                json.dumps(statements),
            ],
            timeout,
        )
        lines = [ln for ln in out.splitlines() if ln.startswith(_SPARK_MARK)]
        if not lines:
            raise RuntimeError(f"the Spark harness printed no result:\n{out[-3000:]}")
        return list(json.loads(lines[-1][len(_SPARK_MARK) :]))


_SPARK_MARK = "ICESQL-SPARK-SQL "
# Run by the harness's Python (pyspark 3.5): argv = harness, catalog, uri, warehouse, spark
# warehouse, statements (JSON list).
_SPARK_SQL = r"""
import json, os, sys
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession
harness, cat, uri, warehouse, spark_warehouse, statements = sys.argv[1:7]
jars = [os.path.join(harness, "jars", j) for j in ("iceberg-spark-runtime.jar", "jackson-iceberg-shaded.jar")]
b = SparkSession.builder.master("local[1]")
for k, v in {
    "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC", "spark.jars": ",".join(jars),
    "spark.sql.warehouse.dir": spark_warehouse,
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    f"spark.sql.catalog.{cat}": "org.apache.iceberg.spark.SparkCatalog",
    f"spark.sql.catalog.{cat}.type": "hive",
    f"spark.sql.catalog.{cat}.uri": uri,
    f"spark.sql.catalog.{cat}.warehouse": warehouse,
}.items():
    b = b.config(k, v)
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
out = [[r.asDict(recursive=True) for r in spark.sql(s).collect()] for s in json.loads(statements)]
spark.stop()
print("ICESQL-SPARK-SQL " + json.dumps(out, default=str))
"""


@pytest.fixture(scope="session")
def hive_metastore() -> Iterator[HiveMetastore]:
    """A running Hive Metastore on loopback (hive-metastore 2.3 from pyspark's jars, Derby).

    One metastore for the whole run, started on first use (about 8 s, plus about 5 s to compile
    the launcher the first time on a machine); tests share it, so each uses its own database
    names. Tests that use it are marked ``hive``. Use it with
    ``from tests.support.hive import hive_metastore  # noqa: F401``.
    """
    why = missing_requirement()
    if why is not None:
        missing(f"no Hive metastore: {why}")
    yield from serve(HiveMetastore.start, "the Hive metastore")
