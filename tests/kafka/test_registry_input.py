"""Bad input to a Kafka source read through a schema registry (issue 52): records that name no
schema or an unknown one, bodies that do not decode, a registry that answers 500 and one that is
down. Records come from the real ``JSONSerializer`` against the stand-in registry
(tests/support/registry.py), into noida-db; the sinks run in this process (the decoding is the
same code on Spark's executors: tests/conformance/test_registry.py runs it on both)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

import icesql
from icesql.errors import IcesqlError
from tests.support import kafka as K
from tests.support.pipeline_helpers import load_table
from tests.support.registry import RegistryServer, schema_registry, secure_registry

pytestmark = pytest.mark.kafka

__all__ = ["schema_registry", "secure_registry"]

SCHEMA = {
    "type": "object",
    "title": "Item",
    "properties": {"id": {"type": "integer"}, "v": {"type": ["string", "null"]}},
    "required": ["id"],
}


def _setup(home: Path, wh: Path, noida: Any, registry: RegistryServer, topic: str, on_error: str) -> int:
    """The source and the sink; returns the value schema's id."""
    found = registry.register(f"{topic}-value", json.dumps(SCHEMA), schema_type="JSON")
    K.create_topic(noida.bootstrap, topic, 1)
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE CONNECTION k TO KAFKA (BROKER = '{noida.bootstrap}');"
            f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{registry.url}');"
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE reg FROM KAFKA CONNECTION k (TOPIC = '{topic}', ON ERROR = '{on_error}') "
            "FORMAT JSON USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;"
            "CREATE SINK s FROM reg INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"
        )
    return int(found["id"])


def _framed(schema_id: int, row: Any) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + json.dumps(row).encode()


def _ids(home: Path, wh: Path) -> list[int]:
    table = load_table(home, "n.t", warehouse=wh, catalog_name="lake")
    return sorted(r["id"] for r in table.scan().to_arrow().to_pylist())


BAD = {
    "unknown id": b"\x00" + struct.pack(">I", 9999) + b'{"id": 100}',
    "magic byte 7": b"\x07" + b'{"id": 101}',
    "not JSON": None,  # filled with the schema's id below
    "too short": b"\x00\x00\x01",
    "empty": b"",
}


def _bad(schema_id: int) -> dict[str, bytes]:
    return {**BAD, "not JSON": b"\x00" + struct.pack(">I", schema_id) + b'{"id": '}  # type: ignore[dict-item]


def test_bad_records_are_skipped_counted_and_named(
    noida: Any, schema_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, wh = tmp_path / "home", tmp_path / "wh"
    sid = _setup(home, wh, noida, schema_registry, "reg-skip", "skip")
    bad = _bad(sid)
    records = [_framed(sid, {"id": 0, "v": "a"}), *bad.values(), _framed(sid, {"id": 1, "v": None})]
    K.produce(noida.bootstrap, "reg-skip", [(b"k", v) for v in records])
    caplog.set_level("WARNING", logger="icesql")
    with icesql.Session(home=home) as s:
        s.run(once=True, sinks=["s"])
        assert s.engine._spark is None, "a registry source runs in this process"
        assert s.engine.runner("s").status_row()["skipped_records"] == len(bad)
    assert _ids(home, wh) == [0, 1]
    skipped = [r.getMessage() for r in caplog.records if "skipping bad record" in r.getMessage()]
    assert len(skipped) == len(bad)
    for offset, reason in zip(
        range(1, 1 + len(bad)), ["9999", "magic byte 7", "does not read", "too short", "empty"], strict=True
    ):
        assert any(f"offset {offset}:" in m and reason in m for m in skipped), (offset, reason, skipped)


def test_a_bad_record_fails_the_sink_with_one_line_naming_it(
    noida: Any, schema_registry: RegistryServer, tmp_path: Path
) -> None:
    home, wh = tmp_path / "home", tmp_path / "wh"
    sid = _setup(home, wh, noida, schema_registry, "reg-fail", "fail")
    K.produce(noida.bootstrap, "reg-fail", [(b"k", _framed(sid, {"id": 0})), (b"k", b"\x07junk")])
    with icesql.Session(home=home) as s, pytest.raises(IcesqlError) as ei:
        s.run(once=True, sinks=["s"])
    text = str(ei.value)
    assert "\n" not in ei.value.message
    assert "source 'reg' topic reg-fail partition 0 offset 1" in text and "magic byte 7" in text
    assert "ON ERROR = 'skip'" in text
    assert "Traceback" not in text


def test_a_registry_that_answers_500_then_200_and_one_that_goes_down_after_the_ids_are_known(
    noida: Any, schema_registry: RegistryServer, tmp_path: Path
) -> None:
    home, wh = tmp_path / "home", tmp_path / "wh"
    _setup(home, wh, noida, schema_registry, "reg-flaky", "fail")
    # a schema id CREATE SOURCE did not fetch: the sink has to ask the registry for it
    later = int(
        schema_registry.register(
            "reg-flaky-value", json.dumps({**SCHEMA, "title": "Item2"}), schema_type="JSON"
        )["id"]
    )
    K.produce(noida.bootstrap, "reg-flaky", [(b"k", _framed(later, {"id": i})) for i in range(3)])
    before = len(schema_registry.requests)
    schema_registry.fail_next(1, 500)
    with icesql.Session(home=home) as s:
        s.run(once=True, sinks=["s"])
        assert _ids(home, wh) == [0, 1, 2]
        asked = schema_registry.requests[before:]
        # the sink's first request got the 500 and was asked again; then it had what it needed
        assert not schema_registry.state.fail and len(asked) >= 2 and asked[0] == asked[1], asked
        schema_registry.stop()  # the ids are known: the sink goes on without the registry
        K.produce(noida.bootstrap, "reg-flaky", [(b"k", _framed(later, {"id": i})) for i in range(3, 5)])
        s.run(once=True, sinks=["s"])
    assert _ids(home, wh) == [0, 1, 2, 3, 4]


def test_a_registry_that_is_down_for_an_unknown_id_is_a_transient_failure_the_sink_retries(
    noida: Any,
    schema_registry: RegistryServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import threading

    home, wh = tmp_path / "home", tmp_path / "wh"
    _setup(home, wh, noida, schema_registry, "reg-down", "fail")
    later = schema_registry.register(
        "reg-down-value", json.dumps({**SCHEMA, "title": "Item2"}), schema_type="JSON"
    )
    K.produce(noida.bootstrap, "reg-down", [(b"k", _framed(int(later["id"]), {"id": 7}))])
    schema_registry.stop()
    monkeypatch.setenv("ICESQL_RETRY_BUDGET", "120")
    back = threading.Timer(4.0, schema_registry.start)
    back.start()
    caplog.set_level("INFO", logger="icesql")
    try:
        with icesql.Session(home=home) as s:
            s.run(once=True, sinks=["s"])
    finally:
        back.join()
    assert _ids(home, wh) == [7]
    failed = [r.getMessage() for r in caplog.records if "schema registry csr" in r.getMessage()]
    assert failed and all("\n" not in m for m in failed), failed
    restarts = [m for m in failed if "restarting in" in m]
    assert restarts and "unreachable" in restarts[0], failed  # transient: the supervisor restarted it


def test_with_no_retries_a_registry_that_is_down_fails_the_run_with_one_line(
    noida: Any, schema_registry: RegistryServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, wh = tmp_path / "home", tmp_path / "wh"
    _setup(home, wh, noida, schema_registry, "reg-gone", "fail")
    later = schema_registry.register(
        "reg-gone-value", json.dumps({**SCHEMA, "title": "Item2"}), schema_type="JSON"
    )
    K.produce(noida.bootstrap, "reg-gone", [(b"k", _framed(int(later["id"]), {"id": 1}))])
    schema_registry.stop()
    monkeypatch.setenv("ICESQL_RETRY_BUDGET", "0")
    with icesql.Session(home=home) as s, pytest.raises(IcesqlError) as ei:
        s.run(once=True, sinks=["s"])
    assert "schema registry csr" in str(ei.value) and "\n" not in ei.value.message
    assert "Traceback" not in str(ei.value)


def test_a_sink_through_a_registry_behind_basic_auth_and_tls_leaks_no_secret(
    noida: Any, secure_registry: RegistryServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The registry's password and CA travel to the decoder (basic auth over TLS, checked by the
    stand-in), and the password is in no file the sink leaves but the store that keeps it
    (checkpoint, history, table metadata and data), no log, no SHOW output and no error."""
    assert secure_registry.password is not None
    home, wh, topic = tmp_path / "home", tmp_path / "wh", "reg-secure"
    found = secure_registry.register(f"{topic}-value", json.dumps(SCHEMA), schema_type="JSON")
    K.create_topic(noida.bootstrap, topic, 1)
    caplog.set_level("DEBUG", logger="icesql")
    with icesql.Session(home=home) as s:
        s.execute(
            f"CREATE SECRET pw AS '{secure_registry.password}'; CREATE SECRET ca AS '{secure_registry.ca_pem}';"
            f"CREATE CONNECTION k TO KAFKA (BROKER = '{noida.bootstrap}');"
            f"CREATE CONNECTION csr TO CONFLUENT SCHEMA REGISTRY (URL = '{secure_registry.url}', "
            f"USERNAME = '{secure_registry.username}', PASSWORD = SECRET pw, SSL CERTIFICATE AUTHORITY = SECRET ca);"
            f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');"
            f"CREATE SOURCE reg FROM KAFKA CONNECTION k (TOPIC = '{topic}') "
            "FORMAT JSON USING CONFLUENT SCHEMA REGISTRY CONNECTION csr;"
            "CREATE SINK s FROM reg INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 't')"
        )
        later = secure_registry.register(
            f"{topic}-value", json.dumps({**SCHEMA, "title": "Later"}), schema_type="JSON"
        )
        K.produce(
            noida.bootstrap,
            topic,
            [(b"k", _framed(int(found["id"]), {"id": 1})), (b"k", _framed(int(later["id"]), {"id": 2}))],
        )
        s.run(once=True, sinks=["s"])
        shown = [
            s.execute(q) for q in ("SHOW CONNECTIONS", "SHOW SOURCES", "SHOW SINK STATUS", "DESCRIBE reg")
        ]
    assert _ids(home, wh) == [1, 2]
    # the sink asked the registry itself (its start looks for newer versions), authenticated over TLS
    assert secure_registry.requests.count(("GET", f"/subjects/{topic}-value/versions/latest")) >= 2
    secret = secure_registry.password
    assert secret not in repr(shown) and secret not in caplog.text
    # checkpoints, history, logs, the table's data and metadata; not the store, which keeps the
    # secret (encrypted when ICESQL_SECRET_KEY is set)
    store = {home / "catalog.db", home / "catalog.db-wal", home / "catalog.db-shm"}
    for root in (home, wh):
        for path in root.rglob("*"):
            if path.is_file() and path not in store:
                assert secret.encode() not in path.read_bytes(), path
