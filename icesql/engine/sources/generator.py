"""GENERATOR sources: synthetic rows shaped to the declared SCHEMA, the same sequence number always
giving the same row.
"""

from __future__ import annotations

from typing import Any

from icesql.engine.sources.relation import declared_row_schema
from icesql.plan import Column, SourcePlan


def generator_expr(col: Column, seq: str = "value") -> str:
    t = col.type.strip().lower()
    q = "`" + col.name.replace("`", "``") + "`"
    n = f"CAST({seq} AS BIGINT)"
    lit_name = col.name.replace("'", "''")
    if t in ("bigint", "long"):
        e = n
    elif t in ("int", "integer"):
        e = f"CAST({n} % 2147483647 AS INT)"
    elif t in ("smallint", "short"):
        e = f"CAST({n} % 32767 AS SMALLINT)"
    elif t in ("tinyint", "byte"):
        e = f"CAST({n} % 127 AS TINYINT)"
    elif t == "boolean":
        e = f"({n} % 2 = 0)"
    elif t in ("double", "float", "real"):
        e = f"CAST({n} * 0.5 AS {t.upper()})"
    elif t.startswith("decimal"):
        e = f"CAST({n} % 1000 AS {t.upper()})"
    elif t == "string" or t.startswith("varchar") or t.startswith("char"):
        e = f"concat('{lit_name}-', CAST({n} AS STRING))"
    elif t == "binary":
        e = f"CAST(concat('{lit_name}-', CAST({n} AS STRING)) AS BINARY)"
    elif t == "date":
        e = f"date_add(DATE'2024-01-01', CAST({n} % 3650 AS INT))"
    elif t == "timestamp":
        e = f"timestamp_seconds(1704067200 + {n})"
    elif t == "timestamp_ntz":
        e = f"CAST(timestamp_seconds(1704067200 + {n}) AS TIMESTAMP_NTZ)"
    else:
        e = f"CAST(NULL AS {col.type})"
    return f"{e} AS {q}"


def generator_dataframe(spark: Any, plan: SourcePlan) -> Any:
    columns = plan.columns
    if not columns and plan.schema:
        st = declared_row_schema(spark, plan)
        columns = tuple(Column(f.name, f.dataType.simpleString(), f.nullable) for f in st.fields)
    if not columns:
        columns = (Column("value", "bigint"),)
    exprs = [generator_expr(c, "id" if plan.total_rows is not None else "value") for c in columns]
    if plan.total_rows is not None:
        base = spark.range(int(plan.total_rows))
    else:
        base = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", str(plan.rows_per_second or 1))
            .options(**dict(plan.options))
            .load()
        )
    return base.selectExpr(*exprs)
