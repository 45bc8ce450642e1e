"""Issue 18, analyzer side: odd values are AnalysisErrors (never an OverflowError, a ValueError
or a RecursionError), and a secret never reaches a message."""

from __future__ import annotations

import gc
import time

import pytest

from icesql.analyzer import MemoryCatalog, analyze
from icesql.errors import AnalysisError
from icesql.plan import CatalogConnectionPlan, CatalogType
from icesql.syntax.parser import parse_one

SINK = "CREATE SINK s FROM t TO ICEBERG CATALOG lake (NAMESPACE = 'a', TABLE = 'b') "
GEN = "CREATE SOURCE g FROM GENERATOR (ROWS PER SECOND = {rps}, SCHEMA = '{schema}')"


@pytest.fixture
def catalog() -> MemoryCatalog:
    c = MemoryCatalog()
    c.add(CatalogConnectionPlan("lake", CatalogType.LOCAL, warehouse="/tmp/wh"))
    return c


def error(sql: str, catalog: MemoryCatalog) -> AnalysisError:
    with pytest.raises(AnalysisError) as info:
        analyze(parse_one(sql), catalog, source=sql)
    info.value.render()
    return info.value


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # sizes and durations that overflow a float, or that no engine can hold
        (SINK + "WITH (MAXIMUM FILE SIZE = '" + "9" * 400 + "MiB')", "too large"),
        (SINK + "WITH (MINIMUM SIZE = '1" + "0" * 320 + "')", "too large"),
        (SINK + "WITH (MINIMUM SIZE = 1e400)", "expects a size"),
        (SINK + "WITH (MINIMUM SIZE = " + "9" * 400 + ")", "expects a size"),
        (SINK + "WITH (MAXIMUM PERIOD = 1e400)", "too long"),
        (SINK + "WITH (MAXIMUM PERIOD = '" + "9" * 400 + "s')", "too long"),
        (SINK + "WITH (COMMIT INTERVAL = '400 days')", "too long"),
        # integers written oddly
        (GEN.format(rps="'--2'", schema="id INT"), "expects an integer"),
        (GEN.format(rps="'²'", schema="id INT"), "expects an integer"),
        (GEN.format(rps="'٣'", schema="id INT"), "expects an integer"),
        (GEN.format(rps="9" * 5000, schema="id INT"), "expects an integer"),
        (GEN.format(rps="99999999999999999999", schema="id INT"), "expects an integer"),
        (SINK + "WITH (FORMAT VERSION = " + "9" * 5000 + ")", "expects an integer"),
        (SINK + "PARTITION BY (bucket(" + "9" * 5000 + ", id))", "positive integer"),
        # schemas
        (GEN.format(rps=1, schema="d DECIMAL(" + "9" * 5000 + ")"), "out of range"),
        (GEN.format(rps=1, schema="d DECIMAL(10, " + "9" * 5000 + ")"), "larger than precision"),
        (GEN.format(rps=1, schema="d " + "ARRAY<" * 1000 + "INT" + ">" * 1000), "nest more than"),
        (GEN.format(rps=1, schema="s " + "STRUCT<a: " * 1000 + "INT" + ">" * 1000), "nest more than"),
        # paths no file system has
        ("CREATE SOURCE f FROM FILES '~nosuchuser_icesql/x' (FORMAT = 'parquet')", "no such user"),
        ("CREATE SOURCE f FROM FILES 'a\x00b' (FORMAT = 'parquet')", "NUL"),
        ("CREATE CONNECTION l TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '~nosuchuser_icesql/w')", "no such user"),
        ("CREATE CONNECTION l TO ICEBERG CATALOG (TYPE = 'sql', URI = 'sqlite:///a\x00b')", "NUL"),
    ],
)
def test_odd_values_are_analysis_errors(sql: str, message: str, catalog: MemoryCatalog) -> None:
    err = error(sql, catalog)
    assert message in err.message
    assert len(err.message) < 300  # never thousands of digits


def test_a_long_schema_string_is_read_in_linear_time(catalog: MemoryCatalog) -> None:
    """Eight times the columns take about eight times as long (the tokenizer was quadratic: it
    copied the rest of the text per token). Timed as the growth between two sizes, each the best
    of three runs in CPU seconds of this process (as tests/test_scaling.py), so that other work on
    the machine disturbs them little, against a bound twice the linear one: the quadratic
    tokenizer grew about 30-fold here."""

    def best_time(columns: int) -> float:
        sql = GEN.format(rps=1, schema=", ".join(f"c{i} INT" for i in range(columns)))
        times = []
        for _ in range(3):
            gc.collect()
            gc.disable()
            try:
                start = time.process_time()
                plan = analyze(parse_one(sql), catalog)
                times.append(time.process_time() - start)
            finally:
                gc.enable()
        assert len(plan.plan.definition.columns) == columns  # type: ignore[attr-defined, union-attr]
        return min(times)

    small, large = best_time(8_000), best_time(64_000)
    assert large / small < 2 * 8, f"8x the columns took {large / small:.1f}x as long ({small:.3f} s, {large:.3f} s)"


VALUE = "Zq7vK2mWx9Lp"


@pytest.mark.parametrize(
    "sql",
    [
        f"CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY {VALUE})",
        f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://x', USER = 'u', PASSWORD {VALUE})",
        f"CREATE CONNECTION c TO ICEBERG CATALOG (TYPE = 'rest', URI = 'http://x', TOKEN {VALUE} more)",
    ],
)
def test_a_forgotten_equals_sign_is_said_without_the_value(sql: str, catalog: MemoryCatalog) -> None:
    err = error(sql, catalog)
    assert "expected '=' after option" in err.message
    text = err.render() + repr(err)
    assert not any(VALUE[i : i + 5].upper() in text.upper() for i in range(len(VALUE) - 4))


def test_a_forgotten_equals_sign_on_a_plain_option_names_what_followed(catalog: MemoryCatalog) -> None:
    err = error("CREATE CONNECTION a TO AWS (REGION eu)", catalog)
    assert err.message == "expected '=' after option REGION, found EU"
