"""Parquet files whose columns evolve, one file per run (issue 14's end-to-end tests).

``(id int, a)``, then ``b bigint`` added, then a struct ``c<d int>``, then (``nested_field``) a
field ``e`` added inside ``c``, then ``id`` widened to bigint (a value only a bigint holds).
``run_each`` writes them one at a time and runs the sink once after each, in a fresh session,
as a user running ``icesql run --once`` after each drop would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import icesql


def steps(*, nested_field: bool) -> list[dict[str, Any]]:
    c_type = pa.struct([("d", pa.int32()), ("e", pa.string())]) if nested_field else pa.struct([("d", pa.int32())])
    out: list[dict[str, Any]] = [
        {"id": pa.array([1], pa.int32()), "a": ["x"]},
        {"id": pa.array([2], pa.int32()), "a": ["y"], "b": pa.array([5], pa.int64())},
        {
            "id": pa.array([3], pa.int32()),
            "a": ["z"],
            "b": pa.array([6], pa.int64()),
            "c": pa.array([{"d": 7}], pa.struct([("d", pa.int32())])),
        },
    ]
    if nested_field:
        out.append(
            {
                "id": pa.array([4], pa.int32()),
                "a": ["w"],
                "b": pa.array([7], pa.int64()),
                "c": pa.array([{"d": 8, "e": "new"}], c_type),
            }
        )
    out.append(
        {
            "id": pa.array([5_000_000_000], pa.int64()),
            "a": ["v"],
            "b": pa.array([8], pa.int64()),
            "c": pa.array([{"d": 9, "e": "wide"} if nested_field else {"d": 9}], c_type),
        }
    )
    return out


def run_each(home: Path, spark: Any, data: Path, setup_sql: str, files: list[dict[str, Any]]) -> None:
    """``setup_sql`` once, then each file dropped into ``data`` and the sinks run once."""
    with icesql.Session(home=home, spark=spark) as s:
        s.execute(setup_sql)
    for i, columns in enumerate(files):
        pq.write_table(pa.table(columns), data / f"{i}.parquet")
        with icesql.Session(home=home, spark=spark) as s:
            s.run(once=True)
