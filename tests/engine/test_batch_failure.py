"""What Spark receives when a sink's batch fails on a Java error.

py4j hands Spark the failed ``foreachBatch`` call's Python traceback as text. When the query is
stopping, Spark matches that text against ``StreamExecution.PROXY_ERROR``, a regular expression
whose ``((.|\\r\\n|\\r|\\n)*)`` after "Py4JJavaError: An error occurred while calling" recurses
once per character: the soak saw a chained Spark job failure (its whole Java stack trace in the
text) overflow the stream thread's stack, and the JVM print a ``java.lang.StackOverflowError``.
The sink records its own error and hands Spark that error alone.
"""

from __future__ import annotations

import traceback
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from icesql.engine.sink.runner import SinkRunner
from icesql.errors import ExecutionError

pytestmark = pytest.mark.spark


def test_a_batch_failing_on_a_java_error_hands_spark_only_the_sinks_error(spark: Any) -> None:
    try:  # a real Java exception through py4j, as a Spark job failure arrives
        spark._jvm.java.lang.Class.forName("no.such.Klass")
    except Py4JJavaError as e:
        java_error = e
    else:  # pragma: no cover
        raise AssertionError("Class.forName did not fail")
    recorded: list[BaseException] = []

    runner = object.__new__(SinkRunner)  # only what _foreach_batch touches
    runner.name = "s"
    runner.stopping = False
    runner.error = None

    def process(batch_df: Any, batch_id: int) -> None:
        raise java_error

    def fail(exc: BaseException) -> ExecutionError:
        recorded.append(exc)
        return ExecutionError("sink s failed: ClassNotFoundException")

    runner._process = process  # type: ignore[method-assign]
    runner.fail = fail  # type: ignore[method-assign]
    with pytest.raises(ExecutionError) as ei:
        runner._foreach_batch(None, 7)
    assert recorded == [java_error]  # the sink's error was made from the Java one
    text = "".join(traceback.format_exception(ei.value))  # what py4j sends to Spark
    assert "sink s failed: ClassNotFoundException" in text
    assert "Py4JJavaError" not in text and "An error occurred while calling" not in text, text
    # Spark's own check, run in the JVM on that text, finds nothing to match
    streaming = spark._jvm.org.apache.spark.sql.execution.streaming
    proxy_error = streaming.runtime.StreamExecution.PROXY_ERROR()  # Spark 4 (3.5: streaming.StreamExecution)
    assert proxy_error.findFirstIn(text).isEmpty()
