"""The catalog-kind registry and the failure rules are tables: every entry is there, in order."""

from __future__ import annotations

from pathlib import Path

from icesql.engine.connections.catalog_kinds import KINDS, REST_AUTH
from icesql.engine.connections.failures import RULES, CatalogUnavailableError, describe_failure, is_transient
from icesql.plan import CatalogType, RestAuth


def test_every_catalog_type_has_an_entry_and_every_rest_auth_a_builder() -> None:
    assert set(KINDS) == set(CatalogType)
    assert set(REST_AUTH) == set(RestAuth)
    assert KINDS[CatalogType.S3TABLES].catalog_class == "pyiceberg.catalog.rest:RestCatalog"


def test_failure_rules_name_the_cause_and_say_what_is_transient() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    err = describe_failure(refused, label="catalog connection 'c'", endpoint="http://127.0.0.1:9")
    assert isinstance(err, CatalogUnavailableError) and is_transient(err)
    assert err.message == "catalog connection 'c': cannot connect at http://127.0.0.1:9: unreachable (connection refused)"
    odd = describe_failure(KeyError("x"), label="catalog connection 'c'", endpoint=None)
    assert not is_transient(odd)
    assert odd.message.startswith("catalog connection 'c': cannot connect: unexpected error KeyError")
    assert len(RULES) >= 15


def test_a_connection_broken_mid_response_is_transient_and_a_mistake_is_not() -> None:
    from http.client import RemoteDisconnected

    from icesql.engine.connections.failures import transient_failure

    broken = ConnectionError("Connection aborted.")
    broken.__cause__ = RemoteDisconnected("Remote end closed connection without response")
    err = transient_failure(broken, label="sink s", action="commit")
    assert err is not None and err.transient
    assert err.message == "sink s: cannot commit: connection closed before the answer was complete"
    reset = ConnectionError("Connection aborted.")
    reset.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    err = transient_failure(reset, label="sink s", action="commit")
    assert err is not None and err.message == "sink s: cannot commit: connection reset"
    assert transient_failure(ValueError("bad value"), label="sink s", action="commit") is None


def test_an_answer_cut_inside_its_headers_is_transient_and_other_bad_json_is_not() -> None:
    """Cut inside its headers, an answer reaches pyiceberg as status 200 with an empty body, and
    its parse fails as pydantic's 'EOF while parsing' (tests/soak/test_cut_responses.py makes
    the cut for real); an answer that is not JSON at all is a wrong URI."""
    from pydantic import BaseModel, ValidationError

    from icesql.engine.connections.failures import service_of

    class Answer(BaseModel):
        x: int

    def parse_error(text: str) -> ValidationError:
        try:
            Answer.model_validate_json(text)
        except ValidationError as e:
            return e
        raise AssertionError("parsed")

    for cut in ("", '{"x": 1'):
        err = describe_failure(parse_error(cut), label="catalog connection 'c'", endpoint="http://h:1")
        assert is_transient(err)
        assert err.message == (
            "catalog connection 'c': cannot connect at http://h:1: connection closed before the answer was complete"
        )
        assert service_of(parse_error(cut)) == "catalog"
    html = describe_failure(parse_error("<html>"), label="catalog connection 'c'", endpoint=None)
    assert not is_transient(html) and "not an Iceberg REST endpoint" in html.message


def test_a_python_worker_late_on_an_overloaded_machine_is_transient() -> None:
    from icesql.engine.connections.failures import service_of, transient_failure

    late = RuntimeError(
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Python worker failed to "
        "connect back. SQLSTATE: XXKST"
    )
    err = transient_failure(late, label="sink s", action="write or commit")
    assert err is not None and err.transient
    assert err.message == "sink s: cannot write or commit: Spark's Python worker did not connect back in time"
    assert service_of(late) is None


def test_a_spark_task_that_could_not_be_deserialised_is_transient() -> None:
    """Both soaks' sinks once failed their first task after a restart with a bare
    OptionalDataException; the next run went on, so the supervisor retries it."""
    from icesql.engine.connections.failures import transient_failure

    unreadable = RuntimeError(
        "An error occurred while calling o120.collectToPython.\n: org.apache.spark.SparkException: Job "
        "aborted due to stage failure: Task 1 in stage 1.0 failed 1 times, most recent failure: Lost task "
        "1.0 in stage 1.0 (TID 3) (localhost executor driver): java.io.OptionalDataException\n\tat "
        "java.base/java.io.ObjectInputStream.readObject0(ObjectInputStream.java:1767)"
    )
    err = transient_failure(unreadable, label="sink s", action="write or commit")
    assert err is not None and err.transient
    assert err.message == (
        "sink s: cannot write or commit: a Spark task could not be read back on the executor "
        "(java.io.OptionalDataException)"
    )
    other = RuntimeError("Job aborted due to stage failure: Task 1 failed: java.lang.ArithmeticException")
    assert transient_failure(other, label="sink s", action="write") is None


def test_a_full_disk_is_transient_and_says_so() -> None:
    """The soak's full icesql home failed a sink with a bare '[Errno 28] No space left on
    device'; it is retried (the space comes back when the disk is cleaned) and says what it is,
    with the file when Python knows it; Spark's JVM says it in its own words."""
    from icesql.engine.connections.failures import transient_failure

    full = OSError(28, "No space left on device", "/home/.icesql/sinks/s/staging/.00000000000000000007.json.1.tmp")
    err = transient_failure(full, label="sink s", action="write or commit")
    assert err is not None and err.transient
    assert err.message.startswith("sink s: cannot write or commit: no space left on the device (")
    assert "00000000000000000007.json" in err.message and err.hint and "icesql home" in err.hint
    jvm = RuntimeError("An error occurred while calling o123.start.\n: java.io.IOException: No space left on device")
    assert transient_failure(jvm, label="sink s", action="write or commit") is not None


def test_pyarrow_s3_network_and_server_errors_are_transient() -> None:
    """The executors write through pyarrow's S3 filesystem, whose failures are OSError text;
    Spark hands them to the driver wrapped in its own exception."""
    from icesql.engine.connections.failures import transient_failure

    refused = OSError(
        "When initiating multiple part upload for key 'ns/t/data/x.parquet' in bucket 'b': AWS Error "
        "NETWORK_CONNECTION during CreateMultipartUpload operation: curlCode: 7, Could not connect to "
        "server; Details: Failed to connect to 127.0.0.1:20481 after 0 ms: Could not connect to server"
    )
    wrapped = RuntimeError("An exception was thrown from the Python worker")
    wrapped.__cause__ = refused
    err = transient_failure(wrapped, label="sink s", action="write or commit")
    assert err is not None and err.transient
    assert err.message == "sink s: cannot write or commit: object store unreachable (connection failed)"
    busy = OSError("When writing key 'k': AWS Error UNKNOWN (HTTP status 503) during PutObject operation: Slow down")
    err = transient_failure(busy, label="sink s", action="write")
    assert err is not None and err.message.endswith("object store error (AWS Error UNKNOWN (HTTP status 503))")
    denied = OSError("When writing key 'k': AWS Error ACCESS_DENIED during PutObject operation: Access Denied")
    assert transient_failure(denied, label="sink s", action="write") is None
    # the soak saw this after a network fault in the middle of a multipart upload (a key-index shard)
    broken = OSError(
        "When completing multiple part upload for key 'ns/t/data/icesql-index/s/d-1.parquet' in bucket "
        "'b': AWS Error UNKNOWN (HTTP status 400) during CompleteMultipartUpload operation: Unable to "
        "parse ExceptionName: InvalidPart Message: One or more of the specified parts could not be found."
    )
    err = transient_failure(broken, label="sink s", action="write")
    assert err is not None and err.transient
    assert err.message == "sink s: cannot write: an upload to the object store broke off (InvalidPart: a part went missing)"
    bad_request = OSError("When writing key 'k': AWS Error UNKNOWN (HTTP status 400) during PutObject operation: InvalidArgument")
    assert transient_failure(bad_request, label="sink s", action="write") is None


def test_expired_role_credentials_are_transient_only_where_a_role_renews_them() -> None:
    """An assumed role's credentials that expired in use: AWS answers ExpiredToken, SeaweedFS and
    MinIO InvalidAccessKeyId (as pyarrow's S3 client words them). A sink whose connection assumes
    a role retries (``expired_role_credentials``); the general rules keep them permanent (static
    keys, or a fixed SESSION TOKEN, do not get better by retrying)."""
    from icesql.engine.connections.failures import expired_role_credentials, transient_failure

    unknown = OSError(
        "When writing key 'k': AWS Error UNKNOWN (HTTP status 403) during PutObject operation: Unable to "
        "parse ExceptionName: InvalidAccessKeyId Message: The access key ID you provided does not exist"
    )
    wrapped = RuntimeError("An exception was thrown from the Python worker")
    wrapped.__cause__ = unknown
    err = expired_role_credentials(wrapped, label="sink s", action="write or commit")
    assert err is not None and err.transient
    assert err.message == (
        "sink s: cannot write or commit: the assumed role's temporary credentials were refused "
        "(InvalidAccessKeyId: they expired)"
    )
    expired = OSError("AWS Error UNKNOWN (HTTP status 400) during PutObject operation: ExpiredToken")
    err = expired_role_credentials(expired, label="sink s", action="write")
    assert err is not None and "(ExpiredToken: they expired)" in err.message
    assert transient_failure(unknown, label="sink s", action="write") is None
    assert transient_failure(expired, label="sink s", action="write") is None
    denied = OSError("AWS Error ACCESS_DENIED during PutObject operation: Access Denied")
    assert expired_role_credentials(denied, label="sink s", action="write") is None


def test_role_credentials_are_renewed_before_they_expire() -> None:
    """Five minutes ahead for a long session; a quarter of the lifetime for a short one."""
    from icesql.engine.connections.aws import _renew_at

    assert _renew_at(1000.0, 1000.0 + 3600) == 1000.0 + 3300
    assert _renew_at(1000.0, 1000.0 + 900) == 1000.0 + 675
    assert _renew_at(1000.0, 1000.0 + 20) == 1000.0 + 15
    assert _renew_at(1000.0, 990.0) == 990.0  # already expired: renewed at once


def test_a_sink_assuming_a_role_retries_a_refused_key_with_the_role_assumed_anew() -> None:
    """The runner's side of ``expired_role_credentials``: only where a role is assumed, and the
    cached credentials are dropped so that the retry assumes the role again."""
    from types import SimpleNamespace

    from icesql.engine.connections import aws
    from icesql.engine.sink.errors import library_failure

    refused = OSError(
        "When writing key 'k': AWS Error UNKNOWN (HTTP status 403) during PutObject operation: Unable to "
        "parse ExceptionName: InvalidAccessKeyId Message: The access key ID you provided does not exist"
    )
    cached = ("c", "arn:aws:iam::1:role/r", "icesql", "AK", None)
    try:
        aws._ROLE_CACHE[cached] = (float("inf"), {"access_key_id": "ASIA1"})
        target = SimpleNamespace(assumes_role=True, where=lambda service: ("AWS connection 's3'", None))
        err = library_failure(refused, "s", target)
        assert err is not None and err.transient and "InvalidAccessKeyId: they expired" in err.message
        assert cached not in aws._ROLE_CACHE
        # the same answer to static keys is no expiry: a mistake a retry cannot mend
        target = SimpleNamespace(assumes_role=False, where=lambda service: ("AWS connection 's3'", None))
        err = library_failure(refused, "s", target)
        assert err is None or not getattr(err, "transient", False)
    finally:
        aws._ROLE_CACHE.pop(cached, None)


def test_table_metadata_with_a_type_pyiceberg_does_not_know_is_not_a_wrong_uri() -> None:
    """pyiceberg 0.12 refuses a v3 table with a ``variant`` column in pydantic's words (a
    ValidationError, like a REST answer that is not JSON); the line names the type instead."""
    from pydantic import BaseModel, ValidationError, field_validator

    class Field(BaseModel):
        type: str

        @field_validator("type")
        @classmethod
        def known(cls, v: str) -> str:
            raise ValueError(f"Unsupported field type: '{v}'")

    try:
        Field.model_validate({"type": "variant"})
    except ValidationError as e:
        err = describe_failure(e, label="catalog connection 'c'", endpoint=None, action="load table c.n.t")
    else:
        raise AssertionError("validated")
    assert not is_transient(err)
    assert "\n" not in err.message and "not an Iceberg REST endpoint" not in err.message
    assert err.message.endswith(
        "the table has a column of type 'variant', which icesql cannot read or write "
        "(its Iceberg library, pyiceberg, does not know the type)"
    )
    assert err.hint and "deleteColumn" in err.hint


def test_a_new_sql_catalog_opened_by_many_at_once_opens_for_each(tmp_path: Path) -> None:
    """A SQL catalog creates its tables as it is first opened: sinks (or processes) opening the
    same new SQLite database at once raced between the look and the CREATE ("table
    iceberg_tables already exists"; pyiceberg alone fails every one of these rounds)."""
    import threading

    from icesql.engine.connections.catalog_kinds import KINDS
    from icesql.plan import CatalogType

    kind = KINDS[CatalogType.SQL]
    for round_no in range(5):
        root = tmp_path / str(round_no)
        root.mkdir()
        props = {"uri": f"sqlite:///{root}/catalog.db", "warehouse": f"file://{root}/wh"}
        errors: list[BaseException] = []
        start = threading.Barrier(6)

        def open_it(start: threading.Barrier, props: dict[str, str], errors: list[BaseException]) -> None:
            start.wait()
            try:
                kind.construct("c", dict(props))
            except BaseException as e:  # noqa: BLE001 - the test reports it
                errors.append(e)

        threads = [threading.Thread(target=open_it, args=(start, props, errors)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, f"round {round_no}: {errors[0]}"
