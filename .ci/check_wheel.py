"""CI: build the sdist and the wheel, check the wheel against the source tree, and run the quick
start, a Kafka pipeline and an upsert pipeline from the wheel installed in a fresh virtual
environment.

    .venv/bin/python .ci/check_wheel.py [--keep DIR]

The wheel is built from the sdist (``python -m build``), so both are checked at once. The comparison
reads the tree, not a list: every directory under icesql/ and catalog_store/ holding an
``__init__.py`` (and grammar/, shipped as icesql.grammar) must be a package of the wheel with every
one of its ``.py`` files, plus the data files the code opens (the grammar, Spark's logging profile,
the status page). The installed icesql then runs from a temporary directory with nothing of the
source tree on ``sys.path`` (not an editable install): ``import icesql`` must come from the fresh
environment's site-packages. The Kafka broker is noida-db, started by tests/support/kafka.py in
this (the project's) interpreter; only the icesql commands run in the fresh environment.

Cheap on purpose: pyspark and the rest install from pip's cache, and every sink runs without Spark
(``run --once`` of a FILES or Kafka sink runs in icesql's own process), a few minutes in all.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_ROOTS = ("icesql", "catalog_store")
# the data files the code reads from its own package
DATA_FILES = ("icesql/grammar/icesql.lark", "icesql/engine/log4j2.properties", "icesql/observe/status.html")


class CheckFailed(RuntimeError):
    pass


def step(message: str) -> None:
    print(f"check_wheel: {message}", flush=True)


def tree_files(root: Path = ROOT) -> set[str]:
    """What the wheel must hold, as paths inside the wheel: the .py files of every package
    directory of the tree (a directory with an ``__init__.py``) and the data files."""
    expected: set[str] = set()
    for top in PACKAGE_ROOTS:
        for init in (root / top).rglob("__init__.py"):
            package = init.parent
            if "__pycache__" in package.parts:
                continue
            for py in package.glob("*.py"):
                expected.add(py.relative_to(root).as_posix())
    for py in (root / "grammar").glob("*.py"):
        expected.add(f"icesql/grammar/{py.name}")
    expected.update(DATA_FILES)
    return expected


def compare(wheel: Path, root: Path = ROOT) -> list[str]:
    """The files of the tree missing from the wheel (empty when it is complete)."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    return sorted(tree_files(root) - names)


def run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    started = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - started
    if p.returncode != 0:
        raise CheckFailed(
            f"{' '.join(cmd)} exited {p.returncode} after {took:.1f}s\n--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-4000:]}"
        )
    step(f"ok ({took:.1f}s): {' '.join(Path(c).name if '/' in c else c for c in cmd[:4])} ...")
    return p.stdout


def build(out: Path) -> tuple[Path, Path]:
    step("building the sdist and the wheel (python -m build)")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=ROOT, timeout=900)
    (sdist,) = out.glob("icesql-*.tar.gz")
    (wheel,) = out.glob("icesql-*.whl")
    return sdist, wheel


def fresh_env(venv: Path, wheel: Path, work: Path) -> dict[str, str]:
    step(f"installing {wheel.name}[engine,kafka] into a fresh virtual environment")
    # nothing of the source tree on the path, for pip too: an icesql.egg-info there (left by a
    # build in the tree) would make pip take icesql for installed and skip the wheel
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ICESQL_HOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    run([sys.executable, "-m", "venv", str(venv)], cwd=work, env=env)
    run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", f"{wheel}[engine,kafka]"],
        cwd=work,
        env=env,
        timeout=1800,
    )
    where = run([str(venv / "bin" / "python"), "-c", "import icesql; print(icesql.__file__)"], cwd=work, env=env)
    if not where.strip().startswith(str(venv)) or str(ROOT) in where:
        raise CheckFailed(f"icesql imported from {where.strip()}, not from the fresh environment {venv}")
    return env


def icesql(env: dict[str, str], work: Path, *args: str) -> str:
    return run(["icesql", "--home", str(work / "home"), *args], cwd=work, env=env)


def count_rows(env: dict[str, str], work: Path, table: str, columns: str = "count(*) AS n") -> dict[str, object]:
    out = icesql(env, work, "exec", "--format", "json", f"SELECT {columns} FROM {table}")
    return json.loads(out.strip().splitlines()[-1])


def quick_start(env: dict[str, str], work: Path) -> None:
    step("quick start: examples/quickstart.sql --once")
    shutil.copy(ROOT / "examples" / "quickstart.sql", work)
    shutil.copytree(ROOT / "examples" / "data" / "events", work / "data" / "events")
    expected = sum(1 for f in (work / "data" / "events").glob("*.json") for line in f.open() if line.strip())
    icesql(env, work, "run", "quickstart.sql", "--once")
    got = count_rows(env, work, "lake.analytics.events")
    if got["n"] != expected:
        raise CheckFailed(f"quick start: {got['n']} rows in lake.analytics.events, {expected} in the input")
    step(f"quick start: {got['n']} rows, as many as the input")


def upsert(env: dict[str, str], work: Path) -> None:
    step("upsert: examples/upsert.sql --once, one change file per run")
    shutil.copy(ROOT / "examples" / "upsert.sql", work)
    (work / "data" / "orders").mkdir(parents=True)
    files = sorted((ROOT / "examples" / "data" / "orders").glob("*.json"))
    # the expected state: the last change of each key wins, a delete removes the key
    state: dict[int, str] = {}
    for f in files:
        shutil.copy(f, work / "data" / "orders")
        icesql(env, work, "run", "upsert.sql", "--once")
        for line in f.read_text().splitlines():
            change = json.loads(line)
            row = change["after"] or change["before"]
            if change["op"] == "d":
                state.pop(row["order_id"], None)
            else:
                state[row["order_id"]] = row["amount"]
    out = icesql(env, work, "exec", "--format", "json", "SELECT order_id, amount FROM lake.sales.orders ORDER BY order_id")
    got = {r["order_id"]: r["amount"] for r in map(json.loads, out.strip().splitlines())}
    want = {k: v for k, v in sorted(state.items())}
    if {k: float(v) for k, v in got.items()} != {k: float(v) for k, v in want.items()}:
        raise CheckFailed(f"upsert: the table holds {got}, the changes give {want}")
    step(f"upsert: {len(got)} rows, the latest of each key ({sorted(got)})")


def kafka(env: dict[str, str], work: Path) -> None:
    # the project's own fixture code: noida-db started and stopped by tests/support/kafka.py
    sys.path.insert(0, str(ROOT))
    from tests.support.kafka import Broker, Record, create_topic, produce

    step("kafka: a noida-db broker, 1,000 JSON records, a sink run --once")
    with Broker("noida", work / "broker") as broker:
        create_topic(broker.bootstrap, "orders", 3)
        records = [
            Record(str(i % 100).encode(), json.dumps({"id": i, "sku": f"s{i % 7}", "amount": i / 4}).encode())
            for i in range(1000)
        ]
        produce(broker.bootstrap, "orders", records)
        (work / "orders.sql").write_text(
            f"""
CREATE CONNECTION IF NOT EXISTS k TO KAFKA (BROKER = '{broker.bootstrap}');
CREATE SOURCE IF NOT EXISTS kafka_orders FROM KAFKA CONNECTION k (
    TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT, sku STRING, amount DOUBLE'
) INCLUDE PARTITION, OFFSET;
CREATE CONNECTION IF NOT EXISTS lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
CREATE SINK IF NOT EXISTS kafka_orders_sink FROM kafka_orders
INTO ICEBERG CATALOG lake (NAMESPACE = 'sales', TABLE = 'kafka_orders');
"""
        )
        icesql(env, work, "run", "orders.sql", "--once")
    got = count_rows(env, work, "lake.sales.kafka_orders", "count(*) AS n, sum(amount) AS total")
    want = {"n": 1000, "total": sum(i / 4 for i in range(1000))}
    if got != want:
        raise CheckFailed(f"kafka: the table holds {got}, the topic {want}")
    step(f"kafka: {got['n']} rows, sum(amount) {got['total']}, as produced")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    ap.add_argument("--skip-run", action="store_true", help="only build and compare the wheel with the tree")
    args = ap.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="icesql-wheel-") as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        try:
            sdist, wheel = build(base / "dist")
            missing = compare(wheel)
            if missing:
                raise CheckFailed(f"{wheel.name} lacks {len(missing)} file(s) of the tree: {', '.join(missing)}")
            step(f"{wheel.name} holds every package and data file of the tree ({len(tree_files())} files); sdist {sdist.name}")
            if not args.skip_run:
                work = base / "work"
                work.mkdir(exist_ok=True)
                env = fresh_env(base / "venv", wheel, work)
                quick_start(env, work)
                upsert(env, work)
                kafka(env, work)
        except CheckFailed as err:
            print(f"check_wheel: FAILED: {err}", file=sys.stderr)
            return 1
    step(f"passed in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
