"""KAFKA sources as a user runs them: a script through ``icesql run --once`` (a fresh process, the
README's example), then ``SELECT`` over the table; VALIDATE's one-line errors; and a SASL password
that appears in no output, log or table metadata.

No test broker here speaks SASL or TLS (noida-db and tansu answer PLAINTEXT only), so the secret
test checks what reaches librdkafka's configuration and that the password is in no output of a
run whose authentication cannot succeed: a server-side check of the credentials is not possible
on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import kafka as K

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def icesql(
    *args: str, home: Path, cwd: Path, timeout: float = 600, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    env.pop("ICESQL_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "icesql", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        input="",
        timeout=timeout,
    )


def test_run_once_then_select(tmp_path: Path, noida: Any) -> None:
    K.create_topic(noida.bootstrap, "orders", 3)
    K.produce(
        noida.bootstrap,
        "orders",
        [(str(i % 100).encode(), json.dumps({"id": i, "sku": f"s{i % 7}", "amount": i / 4}).encode()) for i in range(1000)],
    )
    (tmp_path / "orders.sql").write_text(
        f"""
CREATE CONNECTION k TO KAFKA (BROKER = '{noida.bootstrap}');
CREATE SOURCE orders FROM KAFKA CONNECTION k (
    TOPIC = 'orders', FORMAT = 'json', SCHEMA = 'id BIGINT, sku STRING, amount DOUBLE'
) INCLUDE PARTITION, OFFSET;
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
CREATE SINK orders_sink FROM orders INTO ICEBERG CATALOG lake (NAMESPACE = 'sales', TABLE = 'orders');
"""
    )
    home = tmp_path / ".icesql"
    p = icesql("run", "orders.sql", "--once", home=home, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    q = icesql("exec", "SELECT count(*) AS n, sum(amount) AS total, count(DISTINCT partition) AS parts FROM lake.sales.orders", home=home, cwd=tmp_path)
    assert q.returncode == 0, q.stderr[-3000:]
    row = [ln for ln in q.stdout.splitlines() if ln.strip() and ln.strip()[0].isdigit()][0]
    n, total, parts = (x.strip() for x in row.split("|"))
    assert (int(n), float(total), int(parts)) == (1000, sum(i / 4 for i in range(1000)), 3), q.stdout
    st = icesql("status", home=home, cwd=tmp_path)
    assert "orders_sink" in st.stdout
    # SELECT over the source itself previews its records (bounded: at most LIMIT per partition)
    pv = icesql("exec", "SELECT id, sku, partition FROM orders ORDER BY id LIMIT 5", home=home, cwd=tmp_path)
    assert pv.returncode == 0, pv.stderr[-3000:]
    lines = [ln for ln in pv.stdout.splitlines() if ln.strip() and ln.strip()[0].isdigit()]
    assert [int(ln.split()[0]) for ln in lines] == [0, 1, 2, 3, 4], pv.stdout


def test_validate_says_what_is_wrong_in_one_line(tmp_path: Path, noida: Any) -> None:
    home = tmp_path / ".icesql"
    p = icesql("exec", "CREATE CONNECTION k TO KAFKA (BROKER = '127.0.0.1:1')", home=home, cwd=tmp_path, timeout=120)
    assert p.returncode != 0
    assert "Kafka connection 'k'" in p.stderr and "hint:" in p.stderr and "Traceback" not in p.stderr, p.stderr
    ok = icesql("exec", f"CREATE CONNECTION k TO KAFKA (BROKER = '{noida.bootstrap}')", home=home, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    missing = icesql(
        "exec",
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'no_such_topic_here', FORMAT = 'text')",
        home=home,
        cwd=tmp_path,
        timeout=120,
    )
    assert missing.returncode != 0 and "no_such_topic_here" in missing.stderr, missing.stderr


def test_sasl_password_never_leaks(tmp_path: Path, noida: Any) -> None:
    secret = "kafka-pw-x9-very-secret"
    K.create_topic(noida.bootstrap, "sasl", 1)
    (tmp_path / "p.sql").write_text(
        f"""
CREATE SECRET kpw AS '{secret}';
CREATE CONNECTION k TO KAFKA (BROKER = '{noida.bootstrap}', SECURITY PROTOCOL = 'SASL_PLAINTEXT',
    SASL MECHANISMS = 'SCRAM-SHA-512', SASL USERNAME = 'icesql', SASL PASSWORD = SECRET kpw)
    WITH (VALIDATE = false);
CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC = 'sasl', FORMAT = 'text');
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');
CREATE SINK sk FROM s INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't');
"""
    )
    home = tmp_path / ".icesql"
    # the broker answers PLAINTEXT only: the run fails at the handshake, and says so (a broker
    # that cannot be reached is retried; no restarts here: each attempt waits out librdkafka's
    # metadata timeout, about 16 s, and would print the first attempt's error again)
    run = icesql("-v", "run", "p.sql", "--once", home=home, cwd=tmp_path, env_extra={"ICESQL_RETRY_BUDGET": "0"})
    assert run.returncode == 3 and "Kafka" in run.stderr, run.stderr[-2000:]
    shown = icesql("exec", "SHOW CREATE CONNECTION k", home=home, cwd=tmp_path)
    validate = icesql("exec", "VALIDATE CONNECTION k", home=home, cwd=tmp_path, timeout=120)
    for p in (run, shown, validate):
        assert secret not in p.stdout and secret not in p.stderr
    assert validate.returncode != 0 and "Kafka connection 'k'" in validate.stderr
    # checkpoints, history, logs, the table's data and metadata; not the store, which keeps the
    # secret (encrypted when ICESQL_SECRET_KEY is set), nor the script that wrote it
    store = {home / "catalog.db", home / "catalog.db-wal", home / "catalog.db-shm"}
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix != ".sql" and f not in store and f.stat().st_size < 50_000_000:
            assert secret.encode() not in f.read_bytes(), f

    # what librdkafka is given: the password, under the name Spark's redaction hides
    from icesql.engine.connections.kafka import SECRET_KEYS, client_config
    from icesql.engine.sources.kafka.topic import kafka_options
    from icesql.plan import KafkaConnectionPlan, SecretName

    plan = KafkaConnectionPlan(
        "k",
        (noida.bootstrap,),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="icesql",
        sasl_password=SecretName("kpw"),
    )
    conf = client_config(plan, lambda n: secret)
    assert conf["sasl.password"] == secret and conf["sasl.mechanisms"] == "SCRAM-SHA-512"
    opts = kafka_options(conf, SECRET_KEYS)
    assert opts["secret.kafka.sasl.password"] == secret
    assert not [k for k, v in opts.items() if v == secret and "secret" not in k]
