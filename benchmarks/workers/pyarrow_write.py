"""One Python process, pyarrow only: read the input Parquet files and write them again.

The strongest simple single-process writer: a thread pool (one thread per core; pyarrow
releases the GIL while decoding, encoding and compressing) converts the input files in
parallel, one output file per input file, streaming record batches (bounded memory).
Partitioned variant: each thread runs ``pyarrow.dataset.write_dataset`` on its input file with
Hive-style ``ts_day = cast(ts as date32)`` partitions and its own file-name template.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.workers.common import file_stats, throughput


def append(files: list[str], rows: int, arrow_bytes: int, workdir: str, partitioned: bool = False,
           codec: str = "zstd", threads: int | None = None) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    out_dir = Path(workdir) / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or pa.cpu_count()
    part = ds.partitioning(pa.schema([("ts_day", pa.date32())]), flavor="hive")
    opts = ds.ParquetFileFormat().make_write_options(compression=codec)

    def plain(i: int, f: str) -> None:
        src = pq.ParquetFile(f)
        with pq.ParquetWriter(out_dir / f"part-{i:05d}.parquet", src.schema_arrow, compression=codec) as w:
            for b in src.iter_batches(batch_size=1 << 20):
                w.write_batch(b, row_group_size=1 << 20)

    def partitioned_one(i: int, f: str) -> None:
        d = ds.dataset(f, format="parquet")
        cols = {n: pc.field(n) for n in d.schema.names}
        cols["ts_day"] = pc.field("ts").cast(pa.date32())
        ds.write_dataset(d.scanner(columns=cols), out_dir, format="parquet", file_options=opts,
                         partitioning=part, basename_template=f"part-{i:05d}-{{i}}.parquet",
                         existing_data_behavior="overwrite_or_ignore", max_rows_per_group=1 << 20)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for fut in [pool.submit(partitioned_one if partitioned else plain, i, f) for i, f in enumerate(files)]:
            fut.result()
    secs = time.perf_counter() - t0
    out = throughput(rows, arrow_bytes, secs)
    out.update(file_stats(root=out_dir))
    out.update({"engine": f"pyarrow {pa.__version__} ({threads} threads, 1 process)", "codec": codec,
                "partitioned": partitioned, "threads": threads})
    return out
