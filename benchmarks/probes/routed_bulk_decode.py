"""The routed sink's decode alone (issue 53): ``connect.split_messages`` (per message, the reference)
against ``connect_bulk.split_messages`` on the many-tables benchmark's routed files, each table's
Arrow slice built; the two results compared.

    PYTHONPATH=. python benchmarks/probes/routed_bulk_decode.py /tmp/icesql-bench/data/tables-100x20000/routed --events 120000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def messages(routed: Path, events: int):  # noqa: ANN201
    import pyarrow as pa

    values: list[str] = []
    files: list[str] = []
    lines: list[int] = []
    for p in sorted(routed.glob("*.json")):
        for n, line in enumerate(p.read_text().splitlines()):
            values.append(line)
            files.append(p.name)
            lines.append(n)
            if len(values) >= events:
                break
        if len(values) >= events:
            break
    return pa.table({"key": pa.nulls(len(values), pa.string()), "value": values, "__file": files,
                     "__blk": pa.array([0] * len(values), pa.int64()), "__line": lines})


def main() -> None:
    from icesql.engine.sources import connect, connect_bulk
    from icesql.routing import parse_template

    ap = argparse.ArgumentParser()
    ap.add_argument("routed", type=Path)
    ap.add_argument("--events", type=int, default=120_000)
    ap.add_argument("--skip-reference", action="store_true")
    a = ap.parse_args()
    batch = messages(a.routed, a.events)
    template = parse_template("{table}")
    out = {}
    for name, split in (("bulk", connect_bulk.split_messages), ("reference", connect.split_messages)):
        if name == "reference" and a.skip_reference:
            continue
        t0 = time.perf_counter()
        s = split(batch, template, topics=False, fallback_key=("id",))
        tables = {n: p.arrow() for n, p in s.tables.items()}
        out[name] = (s, tables)
        print(f"{name}: {batch.num_rows:,} events, {len(tables)} tables, {len(s.bad)} bad: "
              f"{time.perf_counter() - t0:.2f} s", flush=True)
    if "reference" in out:
        (b, bt), (r, rt) = out["bulk"], out["reference"]
        assert b.bad == r.bad and bt.keys() == rt.keys()
        for n in bt:
            assert bt[n].equals(rt[n]), n
            assert b.tables[n].spark_schema_json() == r.tables[n].spark_schema_json() and b.tables[n].key == r.tables[n].key
        print("equal")


if __name__ == "__main__":
    main()
