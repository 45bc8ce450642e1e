"""Tables made by Iceberg Java: SQL run by Spark 3.5 + Iceberg 1.10 in the readers harness.

What Iceberg Java writes is the reference for what icesql must write and read (v3 row lineage,
deletion vectors), so tests make tables with it rather than with fixtures copied from elsewhere:

* ``java_sql(warehouse, statements)`` runs the statements in one harness process (a Hadoop catalog
  ``j`` on ``warehouse``; namespace ``j.db`` exists) and returns each statement's rows;
* ``java_table(warehouse, name, statements)`` does that and returns ``j.db.<name>``'s current
  metadata file;
* ``java_deleted_positions(metadata_location)`` gives, per data file, the positions Java's own reader
  drops (all positions of the file minus the ``_pos`` of the rows it returns).

The tables' files are named by ``file:`` URIs (``file:/tmp/...``; the table location
``file:///tmp/...``), as a catalog on a local warehouse names them; ``local_path`` strips the scheme.

Spark starts in 10-20 s on two cores, so let one call run every statement a test needs. The harness
is the one ``tests/support/readers.py`` uses (``java_available``); tests that use this module are
marked ``java``, so ``tests/conftest.py`` skips them (fails them under CI) where it is not built.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.readers import HARNESS, java_available

# Run in the harness's Python: a local Spark with the Iceberg runtime, a Hadoop catalog `j` on the
# warehouse, the statements in order; each statement's rows (as JSON-able dicts) on the last line.
_SCRIPT = r"""
import datetime, decimal, json, os, sys
from pathlib import Path
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession

harness = Path(sys.argv[1])
job = json.loads(sys.stdin.read())
jars = [harness / "jars/iceberg-spark-runtime.jar", harness / "jars/jackson-iceberg-shaded.jar"]
b = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
b = b.config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
b = b.config("spark.sql.shuffle.partitions", "2")
b = b.config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
b = b.config("spark.sql.catalog.j", "org.apache.iceberg.spark.SparkCatalog")
b = b.config("spark.sql.catalog.j.type", "hadoop").config("spark.sql.catalog.j.warehouse", job["warehouse"])
spark = b.config("spark.jars", ",".join(map(str, jars))).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")


def plain(v):
    if isinstance(v, (datetime.date, datetime.datetime, decimal.Decimal)):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


spark.sql("CREATE NAMESPACE IF NOT EXISTS j.db")
results = []
for statement in job["statements"]:
    try:
        if isinstance(statement, dict) and "java" in statement:  # Python driving Iceberg's Java API
            exec(statement["java"], {"spark": spark, "jvm": spark._jvm})
            rows = []
        elif isinstance(statement, dict):  # a table read by its metadata location
            rows = spark.read.format("iceberg").load(statement["load"]).select(*statement["select"]).collect()
        else:
            rows = spark.sql(statement).collect()
    except Exception as e:
        sys.stdout.write(job["mark"] + json.dumps({"error": f"{statement}\n{e}"}) + "\n")
        sys.exit(1)
    results.append([plain(r.asDict(recursive=False)) for r in rows])
sys.stdout.write(job["mark"] + json.dumps({"results": results}) + "\n")
spark.stop()
"""
_MARK = "@@icesql-java-sql@@ "


class JavaSqlError(RuntimeError):
    """A statement Iceberg Java refused, or the harness process failed."""


Statement = str | Mapping[str, Any]


def load(metadata_location: str, *columns: str) -> dict[str, Any]:
    """A ``java_sql`` statement that reads a table by its metadata file (Spark's
    ``read.format("iceberg").load``), selecting ``columns`` (metadata columns such as ``_pos``
    included)."""
    location = "file://" + metadata_location if metadata_location.startswith("/") else metadata_location
    return {"load": location, "select": list(columns)}


def java_api(code: str) -> dict[str, Any]:
    """A ``java_sql`` statement that runs ``code`` (Python, with ``spark`` and its ``jvm`` in scope)
    for what Spark SQL cannot say, such as adding a column of a type Spark 3.5 has no name for
    through Iceberg's Java API (``jvm.org.apache.iceberg.types.Types.VariantType.get()``)."""
    return {"java": code}


def java_sql(
    warehouse: Path, statements: Sequence[Statement], timeout: float = 900
) -> list[list[dict[str, Any]]]:
    """Run ``statements`` with Spark 3.5 + Iceberg Java in one harness process, against the Hadoop
    catalog ``j`` whose warehouse is ``warehouse`` (``j.db`` is created first). A statement is SQL,
    a ``load(...)`` read or a ``java_api(...)`` call. Returns each statement's rows as dicts
    (dates, decimals as strings; bytes as hex)."""
    if not java_available():
        raise JavaSqlError(f"the Iceberg Java harness is not built at {HARNESS}")
    warehouse.mkdir(parents=True, exist_ok=True)
    # a file: URI, so the tables' locations carry their scheme as the spec asks ("file:/..."); with
    # a bare path Java writes bare paths, which iceberg-rust (read_datafusion) cannot open
    job = {"warehouse": warehouse.resolve().as_uri(), "statements": list(statements), "mark": _MARK}
    out = subprocess.run(
        [str(HARNESS / "venv/bin/python"), "-c", _SCRIPT, str(HARNESS)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    answers = [line[len(_MARK) :] for line in out.stdout.splitlines() if line.startswith(_MARK)]
    if not answers:
        raise JavaSqlError(f"the Iceberg Java harness failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    answer = json.loads(answers[-1])
    if "error" in answer:
        raise JavaSqlError(f"Iceberg Java refused a statement: {answer['error'][-4000:]}")
    return list(answer["results"])


def local_path(location: str) -> str:
    """The local path of a ``file:`` location (``file:/x``, ``file:///x``) or of a bare path."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return location[len(prefix) :]
    return location


def java_metadata_location(warehouse: Path, name: str, namespace: str = "db") -> str:
    """The current metadata file of the Hadoop-catalog table ``namespace.name`` (the catalog
    names it in ``metadata/version-hint.text``)."""
    metadata = warehouse / namespace / name / "metadata"
    version = (metadata / "version-hint.text").read_text().strip()
    location = metadata / f"v{version}.metadata.json"
    if not location.exists():
        raise FileNotFoundError(f"{location}: the version hint names a metadata file that is not there")
    return str(location)


def java_table(warehouse: Path, name: str, statements: Sequence[str], timeout: float = 900) -> str:
    """Run ``statements`` (which create and change ``j.db.<name>``) with Iceberg Java; the table's
    metadata location afterwards."""
    java_sql(warehouse, statements, timeout)
    return java_metadata_location(warehouse, name)


def live_positions_query(table: str) -> str:
    """The query whose rows ``java_deleted_positions`` takes as ``live``: every row Java's reader
    returns, as its data file and position."""
    return f"SELECT _file, _pos FROM {table}"


def java_deleted_positions(
    metadata_location: str, live: Sequence[dict[str, Any]] | None = None
) -> dict[str, list[int]]:
    """Per data file of the table's current snapshot (as the manifests name it), the positions
    Iceberg Java does not return: ``range(record_count)`` minus the ``_pos`` of the rows it reads.
    ``live`` are those rows (``live_positions_query``'s, from a ``java_sql`` run that had Spark
    anyway); without them the table is read by path in a harness process of its own. Files with
    no deleted row are left out."""
    import tempfile

    from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntryStatus
    from pyiceberg.table import StaticTable

    if live is None:
        with tempfile.TemporaryDirectory(prefix="icesql-java-") as scratch:
            live = java_sql(Path(scratch), [load(metadata_location, "_file", "_pos")])[0]
    kept: dict[str, set[int]] = {}
    for row in live:
        kept.setdefault(row["_file"], set()).add(int(row["_pos"]))
    table = StaticTable.from_metadata(metadata_location)
    snapshot = table.current_snapshot()
    deleted: dict[str, list[int]] = {}
    for manifest in snapshot.manifests(table.io) if snapshot else []:
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = entry.data_file
            assert entry.status != ManifestEntryStatus.DELETED and f.content == DataFileContent.DATA
            gone = sorted(set(range(f.record_count)) - kept.get(f.file_path, set()))
            if gone:
                deleted[f.file_path] = gone
    return deleted


# Tables Iceberg Java made as v3 with deletion vectors, shared by the tests that need them (one
# Spark start per test run): see ``java_v3_tables``.
V3_PROPERTIES = (
    "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read', "
    "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
)
V3_STATEMENTS: dict[str, list[str]] = {
    # two files of 10000 rows and two of 50; a DV per file, then merged with a second DELETE (runs
    # of positions beside scattered ones); an UPDATE adds a data file and merges a DV again
    "t": [
        f"CREATE TABLE j.db.t (id BIGINT, s STRING) USING iceberg {V3_PROPERTIES}",
        "INSERT INTO j.db.t SELECT id, CAST(id AS STRING) FROM range(0, 20000, 1, 2)",
        "INSERT INTO j.db.t SELECT id, 'x' FROM range(20000, 20100, 1, 2)",
        "DELETE FROM j.db.t WHERE id % 7 = 3",
        "DELETE FROM j.db.t WHERE id BETWEEN 1000 AND 9000",
        "UPDATE j.db.t SET s = 'u' WHERE id = 20050",
    ],
    # partitioned: DVs carry the partition; dropping a whole partition rewrites the data manifest
    # (DELETED and EXISTING entries)
    "p": [
        f"CREATE TABLE j.db.p (id BIGINT, g STRING) USING iceberg PARTITIONED BY (g) {V3_PROPERTIES}",
        "INSERT INTO j.db.p SELECT id, CASE id % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END FROM range(0, 3000, 1, 1)",
        "DELETE FROM j.db.p WHERE id % 10 IN (0, 5)",
        "DELETE FROM j.db.p WHERE g = 'c'",
        "INSERT INTO j.db.p VALUES (5000, 'a')",
    ],
    # one file of 100000 rows with ~30% scattered deletes: bitset containers
    "r": [
        f"CREATE TABLE j.db.r (id BIGINT) USING iceberg {V3_PROPERTIES}",
        "INSERT INTO j.db.r SELECT id FROM range(0, 100000, 1, 1)",
        "DELETE FROM j.db.r WHERE pmod(hash(id), 10) < 3",
    ],
}


@dataclass(frozen=True)
class JavaV3Table:
    """A table ``java_v3_tables`` made: its current metadata file and, per data file, the
    positions Java's reader drops."""

    name: str
    metadata_location: str
    deleted: dict[str, list[int]]


_v3_tables: dict[str, JavaV3Table] = {}


def java_v3_tables() -> dict[str, JavaV3Table]:
    """The tables of ``V3_STATEMENTS``, made once per test run by Iceberg Java (one harness
    process, 20-30 s) in a temporary warehouse removed when the run ends."""
    if not _v3_tables:
        import atexit
        import shutil
        import tempfile

        warehouse = Path(tempfile.mkdtemp(prefix="icesql-java-v3-"))
        atexit.register(shutil.rmtree, warehouse, ignore_errors=True)
        names = list(V3_STATEMENTS)
        statements = [s for name in names for s in V3_STATEMENTS[name]]
        results = java_sql(warehouse, statements + [live_positions_query(f"j.db.{name}") for name in names])
        for name, live in zip(names, results[len(statements) :], strict=True):
            location = java_metadata_location(warehouse, name)
            _v3_tables[name] = JavaV3Table(name, location, java_deleted_positions(location, live))
    return dict(_v3_tables)


__all__ = [
    "JavaSqlError",
    "JavaV3Table",
    "V3_STATEMENTS",
    "java_v3_tables",
    "java_deleted_positions",
    "java_metadata_location",
    "java_api",
    "java_sql",
    "java_table",
    "live_positions_query",
    "load",
    "local_path",
]
