"""Independent Iceberg readers for verifying what icesql wrote.

pyiceberg cannot apply equality deletes, so upserted tables are read with:

* ``read_duckdb`` — DuckDB's iceberg extension, loaded from the ``duckdb_extension_iceberg`` PyPI
  package (plus its ``avro`` dependency from ``duckdb_extension_avro``; there is no network, so
  DuckDB cannot auto-install it). When the package is not in this venv, the copy in the readers
  harness venv (``$ICESQL_HARNESS``) is used.
* ``read_datafusion`` — iceberg-rust through ``pyiceberg_core.datafusion.IcebergDataFusionTable``
  (what pyiceberg's ``Table.__datafusion_table_provider__`` builds) registered in DataFusion.
* ``read_java`` — the Iceberg Java library (the strictest), through the harness script
  ``/work/shared/tools/read_iceberg.py``; only when the harness exists (``java_available()``).

Rows come back as sorted lists of tuples in the table's column order, with values normalised
(timestamps as naive UTC, decimals as ``Decimal``, bytes as ``bytes``, maps as sorted item lists)
so readers compare equal to each other and to the expected state.
"""

from __future__ import annotations

import atexit
import datetime as dt
import glob
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

HARNESS = Path(os.environ.get("ICESQL_HARNESS", "/tmp/icesql-harness"))
READ_ICEBERG = Path(os.environ.get("ICESQL_READ_ICEBERG", "/work/shared/tools/read_iceberg.py"))


def _path(location: str) -> str:
    return location[len("file://") :] if location.startswith("file://") else location


def _uri(location: str) -> str:
    """iceberg-rust wants a URL: a bare local path becomes file://."""
    return f"file://{location}" if location.startswith("/") else location


def norm(v: Any) -> Any:
    """One spelling per value whatever the reader."""
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, Decimal):
        return v
    if isinstance(v, dict):
        return tuple(sorted((k, norm(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(norm(x) for x in v)
    return v


def _sort_key(row: tuple[Any, ...]) -> str:
    return repr(row)


def _rows_from_arrow(table: Any) -> list[tuple[Any, ...]]:
    import pyarrow as pa

    def convert(arr: Any) -> list[Any]:
        t = arr.type
        if pa.types.is_map(t):
            out = []
            for item in arr.to_pylist():
                out.append(None if item is None else tuple(sorted((norm(k), norm(x)) for k, x in item)))
            return out
        if pa.types.is_struct(t):
            children = [convert(arr.field(i)) for i in range(t.num_fields)]
            valid = arr.is_valid().to_pylist()
            return [tuple(c[i] for c in children) if valid[i] else None for i in range(len(arr))]
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            values = convert(arr.flatten()) if len(arr) else []
            offsets = arr.offsets.to_pylist()
            valid = arr.is_valid().to_pylist()
            base = offsets[0] if offsets else 0
            return [
                tuple(values[offsets[i] - base : offsets[i + 1] - base]) if valid[i] else None
                for i in range(len(arr))
            ]
        return [norm(x) for x in arr.to_pylist()]

    table = table.combine_chunks()
    cols = [convert(table.column(i).combine_chunks()) for i in range(table.num_columns)]
    rows = [tuple(c[i] for c in cols) for i in range(table.num_rows)]
    return sorted(rows, key=_sort_key)


def _duckdb_extension(module: str) -> str:
    try:
        mod = __import__(module)
        found = sorted(Path(mod.__file__).parent.glob("extensions/*/*.duckdb_extension"))
        if found:
            return str(found[-1])
    except ImportError:
        pass
    import duckdb

    version = duckdb.__version__
    pattern = str(
        HARNESS / f"venv/lib/python3*/site-packages/{module}/extensions/v{version}/*.duckdb_extension"
    )
    found = sorted(glob.glob(pattern))
    if not found:
        raise RuntimeError(
            f"no DuckDB extension package {module} for duckdb {version} (pip install {module.replace('_', '-')})"
        )
    return found[-1]


def _duckdb_s3_secret(s3: dict[str, str]) -> str:
    """A DuckDB ``CREATE SECRET`` for FileIO-style S3 properties (``s3.endpoint``, keys, region)."""
    from urllib.parse import urlsplit

    def q(v: str) -> str:
        return "'" + v.replace("'", "''") + "'"

    parts = ["TYPE s3"]
    if "s3.access-key-id" in s3:
        parts += [f"KEY_ID {q(s3['s3.access-key-id'])}", f"SECRET {q(s3['s3.secret-access-key'])}"]
    if "s3.session-token" in s3:
        parts.append(f"SESSION_TOKEN {q(s3['s3.session-token'])}")
    parts.append(f"REGION {q(s3.get('s3.region', 'us-east-1'))}")
    if "s3.endpoint" in s3:
        url = urlsplit(s3["s3.endpoint"])
        parts += [
            f"ENDPOINT {q(url.netloc)}",
            f"USE_SSL {'true' if url.scheme == 'https' else 'false'}",
            "URL_STYLE 'path'",
        ]
    return "CREATE SECRET icesql_s3 (" + ", ".join(parts) + ")"


def duckdb_connection(
    *, s3: dict[str, str] | None = None, secret: str | None = None, extension: str = "duckdb_extension_httpfs"
) -> Any:
    """A DuckDB connection with the Iceberg extension loaded from the installed packages (UTC;
    ``s3``, or ``secret`` and ``extension``, as for ``read_duckdb``). The caller closes it."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    con.execute("SET autoinstall_known_extensions=false")
    modules = ["duckdb_extension_avro", "duckdb_extension_iceberg"]
    if s3 is not None or secret is not None:
        modules.insert(0, extension)
    for module in modules:
        con.execute(f"LOAD '{_duckdb_extension(module)}'")
    if s3 is not None:
        con.execute(_duckdb_s3_secret(s3))
    if secret is not None:
        con.execute(secret)
    return con


def read_duckdb(
    metadata_location: str,
    columns: str = "*",
    *,
    s3: dict[str, str] | None = None,
    secret: str | None = None,
    extension: str = "duckdb_extension_httpfs",
) -> list[tuple[Any, ...]]:
    """``s3``: FileIO-style properties (``s3.endpoint``, ``s3.access-key-id``,
    ``s3.secret-access-key``, ``s3.region``) for a table on an S3-compatible store (path-style);
    needs DuckDB's httpfs extension (``duckdb-extension-httpfs``). Other stores: ``secret``, a
    DuckDB ``CREATE SECRET`` statement, and the extension that serves it (httpfs for ``gs://``,
    ``duckdb_extension_azure`` for ``abfss://``/``az://``)."""
    con = duckdb_connection(s3=s3, secret=secret, extension=extension)
    try:
        table = con.execute(
            f"SELECT {columns} FROM iceberg_scan('{_path(metadata_location)}')"
        ).to_arrow_table()
        return _rows_from_arrow(table)
    finally:
        con.close()


def read_datafusion(
    metadata_location: str, columns: str = "*", *, s3: dict[str, str] | None = None
) -> list[tuple[Any, ...]]:
    """``s3``: FileIO properties for iceberg-rust (``s3.endpoint``, keys, ``s3.region``)."""
    from datafusion import SessionContext
    from pyiceberg_core.datafusion import IcebergDataFusionTable

    io_props = dict(s3 or {})
    if "s3.endpoint" in io_props:
        io_props.setdefault("s3.path-style-access", "true")
    provider = IcebergDataFusionTable(
        identifier=["icesql", "t"], metadata_location=_uri(metadata_location), file_io_properties=io_props
    ).__datafusion_table_provider__
    ctx = SessionContext()
    holder = type("Provider", (), {"__datafusion_table_provider__": provider})()
    ctx.register_table("t", holder)
    table = ctx.sql(f"SELECT {columns} FROM t").to_arrow_table()
    return _rows_from_arrow(table)


def java_available() -> bool:
    return (
        (HARNESS / "venv/bin/python").exists()
        and (HARNESS / "jars/iceberg-spark-runtime.jar").exists()
        and READ_ICEBERG.exists()
    )


def read_java(metadata_location: str, timeout: float = 600) -> dict[str, Any]:
    """Read a table with the Iceberg Java library (Spark 3.5 in the harness); returns what
    ``read_iceberg.py --all`` prints: ``rows``, ``digest`` and ``all`` (every canonical row).

    The reads of a test run share one harness process (``_JavaReader``), so Spark starts once
    per run rather than once per read (15-25 s each on two cores)."""
    return _JavaReader.shared().read(_path(metadata_location), timeout)


def _harness(args: list[str]) -> dict[str, Any]:
    """``subprocess`` arguments running the harness's Python (Spark 3.5 + Iceberg Java) with
    ``args``."""
    if not java_available():
        raise RuntimeError(f"the Java reader harness is not built at {HARNESS}")
    return {"args": [str(HARNESS / "venv/bin/python"), *args], "env": {**os.environ, "ICESQL_HARNESS": str(HARNESS)}}


def _run_java(args: list[str], timeout: float) -> str:
    """The harness's Python run with ``args``; its stdout."""
    out = subprocess.run(**_harness(args), capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"the Java reader failed:\n{out.stderr[-4000:]}")
    return out.stdout


# The harness process behind ``read_java``: reads a metadata location per line on stdin and
# answers each with one line on stdout, marked (Spark may print to stdout too).
_JAVA_READER_SCRIPT = """
import argparse, json, sys, traceback
sys.path.insert(0, sys.argv[1])
import read_iceberg as r
ns = argparse.Namespace(s3_endpoint='', key='', secret='')
for line in sys.stdin:
    try:
        rows = r.read_java(r.normalize(line.strip()), ns)
        digest, lines = r.canon(rows)
        out = {'reader': 'java', 'rows': len(rows), 'digest': digest, 'all': lines}
    except Exception as e:
        out = {'error': ''.join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]}
    sys.stdout.write(sys.argv[2] + json.dumps(out) + '\\n')
    sys.stdout.flush()
"""
_JAVA_MARK = "@@icesql-java-reader@@ "


class _JavaReader:
    """One long-lived harness process that reads tables with Iceberg Java, started on first use
    and stopped when the test run's interpreter exits. A read that times out or kills the
    process stops it; the next read starts a new one."""

    _shared: _JavaReader | None = None

    def __init__(self) -> None:
        command = _harness(["-c", _JAVA_READER_SCRIPT, str(READ_ICEBERG.parent), _JAVA_MARK])
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            **command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        # the answers, read off stdout by a thread so a read can wait with a timeout
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(_JAVA_MARK):
                self._answers.put(line[len(_JAVA_MARK) :])
        self._answers.put(None)

    @classmethod
    def shared(cls) -> _JavaReader:
        if cls._shared is None or cls._shared.proc.poll() is not None:
            cls._shared = cls()
            atexit.register(cls._shared.stop)
        return cls._shared

    def read(self, location: str, timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(location + "\n")
        self.proc.stdin.flush()
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"the Java reader gave no answer for {location} in {timeout:.0f} s") from None
        if answer is None:
            raise RuntimeError(f"the Java reader exited:\n{self._stderr_tail()}")
        out = dict(json.loads(answer))
        if "error" in out:
            raise RuntimeError(f"the Java reader failed on {location}:\n{out['error']}")
        return out

    def _stderr_tail(self) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 4000))
        return self._stderr.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def canonical_digest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The digest read_iceberg.py prints, for expected rows given as dicts (column → value)."""
    sys.path.insert(0, str(READ_ICEBERG.parent))
    try:
        import read_iceberg  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    digest, lines = read_iceberg.canon(rows)
    return {"rows": len(rows), "digest": digest, "all": lines}


__all__ = [
    "canonical_digest",
    "java_available",
    "norm",
    "read_datafusion",
    "read_duckdb",
    "read_java",
]
