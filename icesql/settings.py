"""Every environment variable icesql reads, in one table.

Code reads the environment only through these ``Setting`` objects, so that a variable has one
name, one default and one line of documentation; ``markdown_table()`` renders the README's
table from them (``tests/cli/test_docs.py`` checks that the README shows exactly this table).

Only the standard library is imported: the parser reads ``CACHE_DIR`` and must stay light.
``catalog_store`` imports nothing from icesql, so ``SECRET_KEY`` is read here and passed to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_FALSE = ("0", "false", "no", "off")
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default as text, and what it does."""

    name: str
    default: str | None
    doc: str
    test_only: bool = False  # a hook for icesql's own tests and benchmarks

    def raw(self) -> str | None:
        """The variable's value as set (``None`` when unset)."""
        return os.environ.get(self.name)

    def get(self) -> str | None:
        """The value, or the default when unset or blank."""
        value = self.raw()
        if value is None or not value.strip():
            return self.default
        return value.strip()

    def get_int(self) -> int | None:
        return self._number(int)

    def get_float(self) -> float | None:
        return self._number(float)

    def _number(self, cast: Callable[[str], N]) -> N | None:
        """The value as a number; the default when it does not read as one."""
        value = self.get()
        if value is None:
            return None
        try:
            return cast(value)
        except ValueError:
            return cast(self.default) if self.default is not None else None

    def enabled(self) -> bool:
        """For on/off switches: anything but ``0``, ``false``, ``no``, ``off`` is on."""
        value = self.get()
        return value is not None and value.lower() not in _FALSE


HOME = Setting(
    "ICESQL_HOME",
    "~/.icesql",
    "the icesql home (catalog store, checkpoints, staging, shell history) when `--home` is not given",
)
SECRET_KEY = Setting(
    "ICESQL_SECRET_KEY",
    None,
    "a passphrase that encrypts secret values at rest in the catalog store; once used, every "
    "later secret needs it",
)
SPARK_MASTER = Setting(
    "ICESQL_SPARK_MASTER",
    "local[*]",
    "the Spark master or Spark Connect URL when `--spark-master` is not given",
)
CHECKPOINT_ROOT = Setting(
    "ICESQL_CHECKPOINT_ROOT",
    None,
    "a directory URI for the sinks' Spark checkpoints (`<root>/<sink id>`), for a Spark Connect "
    "server that cannot reach the icesql home; default `<home>/sinks/<sink id>/checkpoint`",
)
COMPACT_HINT = Setting(
    "ICESQL_COMPACT_HINT",
    "10",
    "the number of delete files in an upsert sink's table at which it logs once that "
    "`icesql compact` is due (a sink compacting its own table: past twice its `MAXIMUM DELETE FILES` "
    "at least); `0` turns the hint off",
)
WARM_WORKERS = Setting(
    "ICESQL_WARM_WORKERS",
    "1",
    "`0` turns off the start of Spark's Python workers in the background when the first sink starts",
)
ARROW_PATH = Setting(
    "ICESQL_ARROW_PATH",
    "1",
    "`0` reads FILES sources with Spark's readers instead of the Arrow path (for comparisons; a "
    "sink's checkpoint belongs to the path that created it)",
)
PRECHECK = Setting(
    "ICESQL_PRECHECK",
    "1",
    "`0` starts Spark for every sink of a `run --once`, even when the check without Spark finds "
    "nothing new to read",
)
LOCAL_RUN = Setting(
    "ICESQL_LOCAL_RUN",
    "1",
    "`0` runs every sink on Spark; by default, on a local master with no Spark session given, a sink "
    "reading a FILES source on the Arrow path or a KAFKA topic of json, debezium-json, text or bytes "
    "values (appends, changelogs, upserts) runs in icesql's own process without starting Spark, `--once` or running (same "
    "checkpoint, same table, same key index; a batch that needs Spark's reader restarts the sink on "
    "Spark)",
)
PLANNED_BATCHES = Setting(
    "ICESQL_PLANNED_BATCHES",
    "1",
    "`0` has Spark's Structured Streaming run a sink's source on Spark (a Python data source, in "
    "Python processes of Spark's own); by default a sink on Spark (classic, not Connect) with a local "
    "checkpoint plans each batch in icesql's process and hands Spark the batch's pieces to read and "
    "write (the same checkpoint: either way takes up where the other stopped)",
)
TRIGGER_INTERVAL = Setting(
    "ICESQL_TRIGGER_INTERVAL",
    "1",
    "seconds between the starts of a running sink's micro-batches (Spark's processing-time trigger, "
    "on both executors; at least 0.1): a change that lands just after a batch began waits for the "
    "next one, a shorter interval means more, smaller batches and commits",
)
CATALOG_TIMEOUT = Setting(
    "ICESQL_CATALOG_TIMEOUT",
    "30",
    "seconds a REST catalog request may wait to connect, and for each read, before it fails (and a "
    "sink retries); `0` waits for ever",
)
COMMIT_RETRIES = Setting(
    "ICESQL_COMMIT_RETRIES",
    "3",
    "times a sink retries a commit that failed on a transient cause (the catalog or object store "
    "unreachable, a timeout, a server error, an answer cut short), `ICESQL_RETRY_BACKOFF` seconds "
    "later and twice as long each next time, before the sink fails (and `run`/`serve` restart "
    "it); `0` fails at once",
)
RETRY_BACKOFF = Setting(
    "ICESQL_RETRY_BACKOFF",
    "1",
    "seconds `run`/`serve` wait before restarting a sink that failed on a transient cause (a "
    "catalog or object store that cannot be reached); the wait doubles with each attempt",
)
RETRY_BACKOFF_MAX = Setting(
    "ICESQL_RETRY_BACKOFF_MAX", "60", "the longest wait between two restarts of a failing sink, in seconds"
)
RETRY_BUDGET = Setting(
    "ICESQL_RETRY_BUDGET",
    "600",
    "seconds a sink may keep failing on transient causes before it is given up as `failed`; "
    "`0` turns restarts off",
)
READY_GRACE = Setting(
    "ICESQL_READY_GRACE",
    "30",
    "seconds `/readyz` tolerates a sink retrying, or its staged data waiting past its commit "
    "policy, before it answers not ready",
)
CACHE_DIR = Setting(
    "ICESQL_CACHE_DIR",
    None,
    "where the analysed grammar is cached; default `$XDG_CACHE_HOME/icesql` or "
    "`~/.cache/icesql`; set it empty to turn the cache off",
)
XDG_CACHE_HOME = Setting(
    "XDG_CACHE_HOME",
    None,
    "the base of the default grammar cache directory, of the Spark workers' launcher and of the "
    "JVM class archive "
    "(`$XDG_CACHE_HOME/icesql`, else `~/.cache/icesql`)",
)
JVM_ARCHIVE = Setting(
    "ICESQL_JVM_ARCHIVE",
    "1",
    "`0` turns off the class-data-sharing archive of the local Spark driver's classes "
    "(`spark-cds-*.jsa` in icesql's cache directory, made in the background by the archive maker "
    "after the first run that starts Spark, and mapped by the later ones: a faster Spark start); "
    "`dump`: this process's driver JVM writes the archive as it exits (the maker's own run)",
)
JAVA_HOME = Setting(
    "JAVA_HOME",
    None,
    "the Java that runs Spark (else `java` on `PATH`); the class archive is made for each one",
)
SPARK_CONF_DIR = Setting(
    "SPARK_CONF_DIR",
    None,
    "a directory of Spark settings of your own (`spark-defaults.conf`): a `run --once` then runs every "
    "sink on Spark, which reads them",
)
SPARK_HOME = Setting(
    "SPARK_HOME",
    None,
    "a Spark installation; with a `conf/spark-defaults.conf` there, a `run --once` runs every sink on "
    "Spark, which reads it",
)
PYSPARK_PYTHON = Setting(
    "PYSPARK_PYTHON",
    None,
    "the Python Spark's workers run; unset (or icesql's own interpreter): icesql's interpreter, "
    "on a local master through a launcher that imports pyspark from its package, not `pyspark.zip`",
)
EDITOR = Setting("VISUAL", None, "the editor of the shell's `\\e` (then `$EDITOR`, then `vi`)")
EDITOR_FALLBACK = Setting("EDITOR", "vi", "the editor of the shell's `\\e` when `$VISUAL` is unset")
PAGER = Setting(
    "PAGER",
    "less -SRFX",
    "the shell's pager for results taller than the terminal; set it empty to turn paging off",
)

TEST_TIMELINE = Setting(
    "ICESQL_TEST_TIMELINE",
    None,
    "a file each step of a run is appended to, with its time (start-up probes)",
    test_only=True,
)
TEST_KILL_AT = Setting(
    "ICESQL_TEST_KILL_AT",
    None,
    "`point[:batch],...`: SIGKILL the sink's process group at `write`, `staged` or `committed` (a routed sink also at `table-staged` and `between-tables`)",
    test_only=True,
)
TEST_KILL_PGID = Setting(
    "ICESQL_TEST_KILL_PGID",
    None,
    "the process group `ICESQL_TEST_KILL_AT` kills (default: the sink process's own)",
    test_only=True,
)
TEST_BATCH_DELAY = Setting(
    "ICESQL_TEST_BATCH_DELAY", None, "seconds every micro-batch sleeps before it writes", test_only=True
)
TEST_FAIL_AT = Setting(
    "ICESQL_TEST_FAIL_AT",
    None,
    "`point[:batch],...`: a batch fails at `batch` (before it writes), `staged` or `committed` (an error saying `ICESQL_TEST_FAIL_WITH`)",
    test_only=True,
)
TEST_FAIL_WITH = Setting(
    "ICESQL_TEST_FAIL_WITH",
    "Python worker failed to connect back.",
    "the text of `ICESQL_TEST_FAIL_AT`'s error (the default is Spark's, a transient failure)",
    test_only=True,
)
TEST_FAIL_TIMES = Setting(
    "ICESQL_TEST_FAIL_TIMES",
    None,
    "how many times `ICESQL_TEST_FAIL_AT` fails in a process (unset: every time)",
    test_only=True,
)

ALL: tuple[Setting, ...] = (
    HOME,
    SECRET_KEY,
    SPARK_MASTER,
    CHECKPOINT_ROOT,
    COMPACT_HINT,
    WARM_WORKERS,
    ARROW_PATH,
    PRECHECK,
    LOCAL_RUN,
    PLANNED_BATCHES,
    TRIGGER_INTERVAL,
    CATALOG_TIMEOUT,
    COMMIT_RETRIES,
    RETRY_BACKOFF,
    RETRY_BACKOFF_MAX,
    RETRY_BUDGET,
    READY_GRACE,
    CACHE_DIR,
    XDG_CACHE_HOME,
    JVM_ARCHIVE,
    JAVA_HOME,
    SPARK_CONF_DIR,
    SPARK_HOME,
    PYSPARK_PYTHON,
    EDITOR,
    EDITOR_FALLBACK,
    PAGER,
    TEST_TIMELINE,
    TEST_KILL_AT,
    TEST_KILL_PGID,
    TEST_BATCH_DELAY,
    TEST_FAIL_AT,
    TEST_FAIL_WITH,
    TEST_FAIL_TIMES,
)


def user_cache_dir() -> str:
    """icesql's directory in the user's cache: ``$XDG_CACHE_HOME/icesql``, else
    ``~/.cache/icesql`` (the grammar cache's default and the Spark workers' launcher)."""
    return os.path.join(XDG_CACHE_HOME.get() or os.path.join(os.path.expanduser("~"), ".cache"), "icesql")


def markdown_table() -> str:
    """The README's table of environment variables."""
    lines = ["| variable | default | what it does |", "|---|---|---|"]
    for s in ALL:
        default = f"`{s.default}`" if s.default is not None else "unset"
        doc = s.doc + (" (tests only)" if s.test_only else "")
        lines.append(f"| `{s.name}` | {default} | {doc} |")
    return "\n".join(lines)


__all__ = ["ALL", "Setting", "markdown_table"]
