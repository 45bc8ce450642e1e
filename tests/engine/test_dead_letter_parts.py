"""The driver-side parts of dead letters that need no Spark: one letter per position whatever
the accumulators repeat, and a clear refusal where Spark has no accumulators (Spark Connect)."""

from __future__ import annotations

from typing import Any

import pytest

from icesql.engine.backends.spark.frames import SparkBackend
from icesql.engine.sources.guard import LettersParam, letter_accumulator, take_letters
from icesql.errors import ExecutionError


class Acc:
    """Stands for a Spark accumulator on the driver: a value that can be read and reset."""

    def __init__(self, value: list[dict[str, Any]]) -> None:
        self.value = value


def letter(file: str, record: int, offset: int = 0) -> dict[str, Any]:
    return {"source": "s", "file": file, "byte_offset": offset, "record": record, "raw": f"{file}:{record}"}


def test_a_letter_read_twice_is_kept_once_and_the_accumulators_are_emptied() -> None:
    # a retried task or a batch the Arrow path runs again reports the same records again
    a = Acc([letter("b.json", 2), letter("a.json", 3), letter("b.json", 2)])
    b = Acc([letter("a.json", 3), letter("a.json", 1, offset=1024)])
    got = take_letters([a, b])
    assert [(x["file"], x["byte_offset"], x["record"]) for x in got] == [
        ("a.json", 0, 3),
        ("a.json", 1024, 1),
        ("b.json", 0, 2),
    ]
    assert a.value == [] and b.value == [] and take_letters([a, b]) == []


def test_the_accumulator_parameter_concatenates() -> None:
    p = LettersParam()
    assert p.zero([letter("x", 1)]) == []
    assert p.addInPlace([letter("x", 1)], [letter("y", 2)]) == [letter("x", 1), letter("y", 2)]


def test_no_accumulators_no_dead_letters() -> None:
    class ConnectSession:  # Spark Connect: no SparkContext
        @property
        def sparkContext(self) -> Any:  # noqa: N802 - PySpark's name
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported")

    ConnectSession.__module__ = "pyspark.sql.connect.session"  # what is_connect looks at
    backend = SparkBackend(ConnectSession())
    assert backend.name == "connect" and backend.accumulator(0) is None
    with pytest.raises(ExecutionError) as ei:
        letter_accumulator(backend)
    assert "Spark Connect" in ei.value.message and "'skip'" in (ei.value.hint or "")
