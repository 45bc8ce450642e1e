"""Lazy SparkSession factory.

Nothing imports pyspark until ``get_spark`` is called. The session is:

* ``local[*]`` by default, any master URL, or a Spark Connect URL (``sc://host:port``) which
  goes through ``SparkSession.builder.remote`` (the ``connect`` extra installs its client);
* configured so that Python workers run this interpreter (``spark.pyspark.python`` and
  ``PYSPARK_PYTHON``; otherwise executors do not find pyarrow), on a local master through
  ``worker_python``'s launcher, which imports pyspark from its installed package instead of the
  ``pyspark.zip`` Spark puts first on the workers' path (compiled on every process start);
* UI off and logs quiet unless the caller's ``conf`` says otherwise;
* reused when a session is already active (an embedding program hands in its own) — the
  caller may also pass one explicitly with ``spark=``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from icesql.settings import PYSPARK_PYTHON, SPARK_MASTER, user_cache_dir

_LOCK = threading.Lock()

DEFAULT_MASTER = "local[*]"

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Iceberg's micro-batches are small; the default 200 shuffle partitions only cost time.
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def _python_env() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


_LAUNCHER = """#!/bin/sh
# written by icesql (icesql.engine.backends.spark.session.worker_python): Spark's Python workers run
# {python}
# with pyspark's bundled zips taken off PYTHONPATH, so that pyspark comes from its installed
# package, compiled once, instead of from the zips (compiled again in every worker process)
set -f
kept=""
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    {zips}) ;;
    *) kept="${{kept:+$kept:}}$entry" ;;
  esac
done
unset IFS
PYTHONPATH="$kept"
export PYTHONPATH
exec {python_q} "$@"
"""


def worker_python(python: str | None = None) -> str:
    """The executable Spark should start its local Python workers with: ``python`` (default
    ``sys.executable``) behind a small launcher that takes pyspark's own ``pyspark.zip`` and
    py4j zip off ``PYTHONPATH``.

    Spark puts those zips first on every Python worker's path, and Python cannot cache the
    bytecode of modules it imports from a zip: each worker process compiled pyspark again
    (importing the worker modules took 1.1-1.2 s instead of 0.3-0.4 s), and every task's
    ``importlib.invalidate_caches()`` re-read the zips' directories (5 ms). The zips hold the same
    files as the installed package they lie in, so the launcher only changes where they load
    from. It is written once per interpreter under the user's cache directory; when that cannot
    be done, or the zips are not where the installed pyspark keeps them (a ``SPARK_HOME`` of its
    own), ``python`` itself is returned."""
    import hashlib
    import importlib.util
    import shlex

    python = python or sys.executable
    if os.name != "posix":
        return python
    try:
        spec = importlib.util.find_spec("pyspark")
        origin = spec.origin if spec is not None else None
    except (ImportError, ValueError):
        origin = None
    if not origin:
        return python
    lib = os.path.join(os.path.dirname(origin), "python", "lib")
    if not os.path.isfile(os.path.join(lib, "pyspark.zip")):
        return python
    zips = f"{shlex.quote(os.path.join(lib, 'pyspark.zip'))}|{shlex.quote(os.path.join(lib, 'py4j-'))}*{shlex.quote('-src.zip')}"
    text = _LAUNCHER.format(python=python, python_q=shlex.quote(python), zips=zips)
    path = os.path.join(user_cache_dir(), f"worker-python-{hashlib.sha256(text.encode()).hexdigest()[:16]}")
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text and os.access(path, os.X_OK):
                return path
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except OSError:
        logging.getLogger("icesql.spark").debug("cannot write the worker launcher %s", path, exc_info=True)
        return python
    return path


def _local_worker_python() -> str:
    """What a local master's Python workers run: ``worker_python()``'s launcher while
    ``PYSPARK_PYTHON`` is icesql's own (this interpreter, or the launcher an earlier session
    set), else this interpreter, as on any other master."""
    launcher = worker_python()
    return launcher if PYSPARK_PYTHON.get() in (sys.executable, launcher) else sys.executable


_LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")

# The driver JVM's garbage collector. On the Arrow path the driver only coordinates (no row
# passes through it), yet with the JVM's default collector (G1) its heap grew with the garbage
# of a long write: 1.2-2.0 GB of RSS after a 10M-row append, against 0.77 GB with the serial
# collector, the write as fast (benchmarks/README.md, "tenth look"); Spark's own row path
# (views, ICESQL_ARROW_PATH=0) wrote as fast with it too.
DRIVER_GC = "-XX:+UseSerialGC"


def driver_java_options(log_level: str = "ERROR") -> str:
    """icesql's ``spark.driver.extraJavaOptions`` for a driver JVM it starts (a user's own
    setting replaces it whole): the serial collector, and unless ``log_level`` is DEBUG the
    quiet logging profile (read when the JVM starts, before ``setLogLevel`` could act)."""
    opts = [DRIVER_GC]
    if log_level.upper() != "DEBUG":
        opts.append(f"-Dlog4j2.configurationFile=file:{_LOG4J2}")
    return " ".join(opts)


def _accumulator_errors_to_the_log() -> None:
    """pyspark's accumulator server is a ``socketserver``, whose ``handle_error`` prints a
    traceback to stderr when the JVM's connection to it breaks (a killed or stopping Spark): one
    DEBUG log line instead (with the traceback under ``--verbose``)."""
    from pyspark import accumulators

    def handle_error(self: Any, request: Any, client_address: Any) -> None:
        logging.getLogger("icesql.spark").debug("accumulator update connection failed", exc_info=True)

    for name in ("AccumulatorTCPServer", "AccumulatorUnixServer"):
        server = getattr(accumulators, name, None)
        if server is not None:
            server.handle_error = handle_error


class _SaidAlready(logging.Filter):
    """py4j logs every exception a Python callback raises (``There was an exception while
    executing the Python Proxy on the Python Side``, with its traceback). A sink's
    ``foreachBatch`` raises its own failure, which the sink has already said in one line (a
    retry's, or the failure's): that copy is dropped; py4j's other errors stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        from icesql.errors import IcesqlError

        return not (record.exc_info and isinstance(record.exc_info[1], IcesqlError))


_SAID_ALREADY = _SaidAlready()


def get_spark(
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
    *,
    spark: Any = None,
    app_name: str = "icesql",
    log_level: str = "ERROR",
) -> Any:
    """Return a SparkSession: ``spark`` if given, the active one if any, else a new one."""
    if spark is not None:
        return spark
    _python_env()
    _accumulator_errors_to_the_log()
    logging.getLogger("py4j.clientserver").addFilter(_SAID_ALREADY)  # once: the same filter object
    from pyspark.sql import SparkSession

    with _LOCK:
        if master is None:
            active = SparkSession.getActiveSession()
            if active is not None:
                return active
        settings: dict[str, str] = dict(DEFAULT_CONF)
        settings["spark.pyspark.python"] = sys.executable
        settings["spark.pyspark.driver.python"] = sys.executable
        url = master or SPARK_MASTER.get() or DEFAULT_MASTER
        if url.startswith("local"):
            # Without it Spark warns that the host name resolves to loopback on every start.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # the workers run on this machine: on this interpreter, pyspark from its package
            python = _local_worker_python()
            if python != sys.executable:
                settings["spark.pyspark.python"] = python
                os.environ.update(PYSPARK_PYTHON=python)  # what PySpark's UDFs start
        for k, v in (conf or {}).items():
            settings[str(k)] = _conf_value(v)
        builder = SparkSession.builder.appName(app_name)
        dump = None  # the class archive this driver JVM writes as it exits (``jvm_archive``)
        if "spark.driver.extraJavaOptions" not in settings:
            settings["spark.driver.extraJavaOptions"] = driver_java_options(log_level)
            if url.startswith("local"):  # the driver JVM this process starts: its class archive
                from icesql.engine.backends.spark.jvm_archive import archive_options

                options = settings["spark.driver.extraJavaOptions"]
                extra, dump = archive_options(options, may_make=options == driver_java_options())
                if extra:
                    settings["spark.driver.extraJavaOptions"] += f" {extra}"
        if url.startswith("sc://"):
            _require_connect_client(url)
            builder = builder.remote(url)
            # Spark Connect refuses static JVM settings from the client; keep only SQL ones.
            settings = {k: v for k, v in settings.items() if k.startswith("spark.sql.")}
        else:
            builder = builder.master(url)
        for k, v in settings.items():
            builder = builder.config(k, v)
        local_jvm = not url.startswith("sc://")
        with _jvm_output(local=local_jvm, filter_banners=local_jvm and log_level.upper() != "DEBUG"):
            session = builder.getOrCreate()
        if not url.startswith("sc://"):
            try:
                session.sparkContext.setLogLevel(log_level)
            except Exception:  # pragma: no cover - connect sessions have no context
                pass
        if dump is not None:
            from icesql.engine.backends.spark.jvm_archive import remember_class_path

            jvm: Any = session._jvm
            try:
                pid = int(jvm.ProcessHandle.current().pid())
                remember_class_path(dump, str(jvm.System.getProperty("java.class.path")), pid)
            except Exception:  # noqa: BLE001 - only the archive is lost (the dump is dropped later)
                logging.getLogger("icesql.spark").debug("no class archive ticket", exc_info=True)
        return session


# Lines the JVM prints on every start that tell a user nothing, and that no setting turns off:
# the JVM's warning about the incubator module Spark 4 adds to its command line, and Spark's
# note on the log level of an interactive driver (which is what PySpark's driver counts as).
_JVM_BANNERS = (
    b"WARNING: Using incubator modules:",
    b'Setting default log level to "',
    b"To adjust logging level use sc.setLogLevel(",
)


@contextlib.contextmanager
def _jvm_output(*, local: bool, filter_banners: bool) -> Iterator[None]:
    """Start the JVM with its standard output and error behind pipes that a thread of this
    process passes on to its own (the JVM keeps them for its whole life; this process's own
    are restored at once). ``filter_banners``: standard error's ``_JVM_BANNERS`` are dropped.

    Standard output goes through a pipe too, though Spark hardly writes there, because the JVM
    may outlive this process: the archive maker's driver JVM writes the class archive as it exits
    (``jvm_archive``, 10-15 s on two cores, after its icesql has exited). A JVM holding the
    caller's own standard output kept a caller reading it (``subprocess.run(capture_output=
    True)``, a CI step, cron mailing the output) waiting for that archive; behind a pipe, the
    caller's output closes as icesql exits (benchmarks/README.md, "The first Spark run")."""
    if not local:
        yield
        return
    relays: list[tuple[int, tuple[bytes, ...] | None]] = [(1, None)]
    if filter_banners:
        relays.append((2, _JVM_BANNERS))
    saved: list[tuple[int, int]] = []
    try:
        for fd, drop in relays:
            (sys.stdout if fd == 1 else sys.stderr).flush()
            read_fd, write_fd = os.pipe()
            original = os.dup(fd)
            os.dup2(write_fd, fd)
            os.close(write_fd)
            saved.append((fd, original))
            threading.Thread(
                target=_forward, args=(read_fd, original, drop), name=f"icesql-jvm-fd{fd}", daemon=True
            ).start()
    except (OSError, ValueError):  # no such fd (embedded interpreters): the JVM inherits it as is
        pass
    try:
        yield
    finally:
        for fd, original in saved:
            os.dup2(original, fd)


def _forward(read_fd: int, to: int, drop: tuple[bytes, ...] | None) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        for line in iter(pipe.readline, b""):
            if drop is None or not line.startswith(drop):
                try:
                    os.write(to, line)
                except OSError:
                    return


def parallelism(spark: Any) -> int:
    """The cores a micro-batch should keep busy (Spark's default parallelism)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        try:
            return max(1, int(spark.conf.get("spark.default.parallelism", "2")))
        except Exception:
            return 2


def session_time_zone(spark: Any) -> str:
    """The session time zone Spark reads zoneless timestamps in."""
    try:
        return str(spark.conf.get("spark.sql.session.timeZone")) or "UTC"
    except Exception:
        return "UTC"


def _conf_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no SparkContext, no JVM in this process)."""
    try:
        from pyspark.sql.utils import is_remote

        if is_remote():
            return True
    except Exception:
        pass
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _require_connect_client(url: str) -> None:
    """Spark Connect's client needs grpcio & co., which the ``engine`` extra leaves out."""
    import importlib.util

    for module in ("grpc", "grpc_status", "google.rpc", "zstandard"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or hidden in sys.modules
            found = False
        if not found:
            from icesql.errors import ExecutionError

            raise ExecutionError(
                f"cannot connect to Spark Connect at {url}: the Spark Connect client is not installed "
                f"(no module {module!r})",
                hint="pip install 'icesql[connect]' (grpcio, grpcio-status, googleapis-common-protos, zstandard)",
            )


_registered: set[tuple[int, str]] = set()
_register_lock = threading.Lock()


def register_data_source(spark: Any, source: Any) -> None:
    """Register the Python data source class ``source`` with ``spark``, once per session (a second
    caller waits for the first, as the engine's warm-up registers the files source in the
    background)."""
    key = (id(spark), source.name())
    with _register_lock:
        if key in _registered:
            return
        spark.dataSource.register(source)
        _registered.add(key)
