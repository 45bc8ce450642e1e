"""Schema Registry Avro decode: records/s of each way to turn Kafka record bodies (Confluent framing
stripped) into an Arrow batch of the source's columns.

    python benchmarks/registry_avro_decode.py [--records 1000000] [--batch 100000] [--repeat 3]

The records are the append dataset's rows (benchmarks/datagen.gen_rows: id, ts, category, payload,
amount (nullable), qty, event_date, active, price decimal(12,2), user_id) written by fastavro's
schemaless_writer, as a producer's AvroSerializer writes them. Candidates:

- ``fastavro_per_record``: fastavro's schemaless_reader per body, then ``RecordBatch.from_pylist``.
- ``fastavro_container``: the bodies wrapped as one object-container block, read by fastavro.reader,
  then ``from_pylist`` (the same Cython per-record decoding, one call for the block).
- ``duckdb_container``: the same block as a file read by DuckDB's avro extension (one thread), then
  cast to the columns; DuckDB leaves decimals as bytes, so ``price`` is converted by icesql's decimal
  reader (timed). Corrupt bodies are not detected (see README).
- ``polars_container``: ``polars.read_avro`` of the block, when polars is importable (it is not an
  icesql dependency: put it on PYTHONPATH to measure it).
- ``icesql_columnar``: ``AvroDecoder.decode`` (registry/avro_wire: a column at a time with numpy).

Every candidate's batch is compared with icesql_columnar's; "exact" says whether they are equal.
"""

from __future__ import annotations

import argparse
import atexit
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.datagen import AVRO_SCHEMA as SCHEMA  # noqa: E402
from benchmarks.datagen import arange, gen_rows  # noqa: E402
from icesql.engine.connections.registry import RegisteredSchema  # noqa: E402
from icesql.engine.sources.registry.avro import AvroDecoder  # noqa: E402
from icesql.engine.sources.registry.avro_wire import Wire, decimal_words  # noqa: E402

SYNC = bytes(range(16))


def bodies_of(n: int) -> list[bytes]:
    parsed = fastavro.parse_schema(SCHEMA)
    out = []
    for row in gen_rows(arange(n), total_rows=n).to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(buf.getvalue())
    return out


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def container(bodies: list[bytes]) -> bytes:
    """The bodies as an Avro object container: header with the writer schema, one block, sync."""
    text = json.dumps(SCHEMA).encode()
    key = b"avro.schema"
    header = b"Obj\x01" + _zigzag(1) + _zigzag(len(key)) + key + _zigzag(len(text)) + text + _zigzag(0) + SYNC
    data = b"".join(bodies)
    return header + _zigzag(len(bodies)) + _zigzag(len(data)) + data + SYNC


def fastavro_per_record(schema: pa.Schema) -> Callable[[list[bytes]], pa.RecordBatch]:
    parsed = fastavro.parse_schema(SCHEMA)

    def run(bodies: list[bytes]) -> pa.RecordBatch:
        rows = [fastavro.schemaless_reader(io.BytesIO(b), parsed, None) for b in bodies]
        return pa.RecordBatch.from_pylist(rows, schema=schema)

    return run


def fastavro_container(schema: pa.Schema) -> Callable[[list[bytes]], pa.RecordBatch]:
    def run(bodies: list[bytes]) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist(list(fastavro.reader(io.BytesIO(container(bodies)))), schema=schema)

    return run


def duckdb_container(schema: pa.Schema) -> Callable[[list[bytes]], pa.RecordBatch]:
    import duckdb
    import duckdb_extension_avro

    ext = sorted(Path(duckdb_extension_avro.__file__).parent.glob("extensions/*/*.duckdb_extension"))[-1]
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    con.execute(f"LOAD '{ext}'")
    con.execute("SET threads=1")
    path = Path(
        tempfile.mkdtemp(prefix="icesql-avro-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    )
    atexit.register(shutil.rmtree, path, True)
    price = schema.field("price").type

    def run(bodies: list[bytes]) -> pa.RecordBatch:
        f = path / "block.avro"
        f.write_bytes(container(bodies))
        t = con.execute(f"SELECT * FROM read_avro('{f}')").to_arrow_table()
        # DuckDB gives the decimal's bytes: turned into decimal128 as icesql does, vectorized
        raw = t.column("price").combine_chunks().cast(pa.binary())
        offsets = np.frombuffer(raw.buffers()[1], np.int32, len(raw) + 1, raw.offset * 4).astype(np.int64)
        wire = Wire([raw.buffers()[2].to_pybytes()])
        words, _ = decimal_words(wire, wire.starts[0] + offsets[:-1], np.diff(offsets), price.precision)
        cols = [t.column(n).combine_chunks() for n in schema.names]
        cols[schema.names.index("price")] = pa.Array.from_buffers(
            price, len(raw), [None, pa.py_buffer(words)]
        )
        return pa.RecordBatch.from_arrays(
            [c.cast(f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
        )

    return run


def polars_container(schema: pa.Schema) -> Callable[[list[bytes]], pa.RecordBatch] | None:
    try:
        import polars as pl
    except ImportError:
        return None

    def run(bodies: list[bytes]) -> pa.RecordBatch:
        t = pl.read_avro(io.BytesIO(container(bodies))).to_arrow()
        cols = [t.column(n).combine_chunks().cast(f.type) for n, f in zip(schema.names, schema, strict=True)]
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    return run


def icesql_columnar(schema: pa.Schema) -> Callable[[list[bytes]], pa.RecordBatch]:
    reg = RegisteredSchema("AVRO", json.dumps(SCHEMA))
    decoder = AvroDecoder(reg, reg)

    def run(bodies: list[bytes]) -> pa.RecordBatch:
        batch, bad = decoder.decode(bodies)
        assert not bad
        return batch

    return run


CANDIDATES: dict[str, Callable[[pa.Schema], Any]] = {
    "fastavro_per_record": fastavro_per_record,
    "fastavro_container": fastavro_container,
    "duckdb_container": duckdb_container,
    "polars_container": polars_container,
    "icesql_columnar": icesql_columnar,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000, help="bodies per decode call (a consumer's poll)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N")
    ap.add_argument("--only", default="", help="comma-separated candidate names")
    args = ap.parse_args()
    t0 = time.perf_counter()
    bodies = bodies_of(args.records)
    print(
        f"{args.records:,} bodies written in {time.perf_counter() - t0:.1f}s, {np.mean([len(b) for b in bodies]):.1f} bytes each"
    )
    reg = RegisteredSchema("AVRO", json.dumps(SCHEMA))
    schema = pa.schema(AvroDecoder(reg, reg).schema)
    batches = [bodies[i : i + args.batch] for i in range(0, len(bodies), args.batch)]
    reference: list[pa.RecordBatch] | None = None
    names = [n for n in CANDIDATES if not args.only or n in args.only.split(",")]
    results = {}
    for name in sorted(names, key=lambda n: n != "icesql_columnar"):
        run = CANDIDATES[name](schema)
        if run is None:
            print(f"{name:22s} not importable here")
            continue
        best, out = float("inf"), []
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = [run(b) for b in batches]
            best = min(best, time.perf_counter() - t)
        if reference is None:
            reference = out
        exact = all(a.equals(b) for a, b in zip(out, reference, strict=True))
        results[name] = args.records / best
        print(
            f"{name:22s} {args.records / best:>12,.0f} records/s  ({best:.2f}s, best of {args.repeat}) exact: {'yes' if exact else 'NO'}"
        )
    base = results.get("fastavro_per_record")
    if base:
        for name, rate in results.items():
            print(f"  {name:22s} x{rate / base:.1f} the per-record baseline")


if __name__ == "__main__":
    main()
