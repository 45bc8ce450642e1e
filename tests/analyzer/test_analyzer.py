"""Analyzer rules checked on syntax trees built directly, plus MemoryCatalog and layering."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from icesql.analyzer import AnalysisWarning, CatalogView, MemoryCatalog, analyze
from icesql.errors import AnalysisError
from icesql.plan import (
    AwsConnectionPlan,
    CatalogConnectionPlan,
    CatalogType,
    Column,
    CreateObjectPlan,
    ExplainPlan,
    RestAuth,
    SecretName,
    SinkMode,
    SinkPlan,
    SourcePlan,
    Transform,
    plan_from_dict,
    to_dict,
)
from icesql.syntax import ast as a


def ident(name: str, quoted: bool = False) -> a.Ident:
    return a.Ident(name, quoted)


def opt(name: str, value: Any = None) -> a.Option:
    if isinstance(value, str):
        value = a.StringLit(value)
    elif isinstance(value, bool):
        value = a.BoolLit(value)
    elif isinstance(value, int):
        value = a.NumberLit(str(value))
    return a.Option(name, value)


def secret(name: str) -> a.SecretRef:
    return a.SecretRef(ident(name))


def sink(**kw: Any) -> a.CreateSink:
    base: dict[str, Any] = {
        "name": ident("s"),
        "relation": a.QualifiedName((ident("orders"),)),
        "catalog": ident("cat"),
        "catalog_options": (opt("NAMESPACE", "n"), opt("TABLE", "t")),
    }
    base.update(kw)
    return a.CreateSink(**base)


def pf(transform: str | None, *args: str | int) -> a.PartitionField:
    return a.PartitionField(
        ident(transform) if transform else None,
        tuple(
            a.PartitionArg(number=a.NumberLit(str(x)))
            if isinstance(x, int)
            else a.PartitionArg(column=ident(x))
            for x in args
        ),
    )


@pytest.fixture
def catalog() -> MemoryCatalog:
    c = MemoryCatalog()
    c.add_secret("sk")
    c.add(AwsConnectionPlan("s3", access_key_id="AK", secret_access_key=SecretName("sk"), region="eu-west-1"))
    c.add(CatalogConnectionPlan("cat", CatalogType.LOCAL, warehouse="/wh"))
    c.add(
        SourcePlan(
            "orders",
            a_source_kind(),
            columns=(Column("id", "bigint"), Column("ts", "timestamp"), Column("region", "string")),
        )
    )
    return c


def a_source_kind() -> Any:
    from icesql.plan import SourceKind

    return SourceKind.GENERATOR


def test_memory_catalog_is_a_catalog_view(catalog: MemoryCatalog) -> None:
    assert isinstance(catalog, CatalogView)
    assert catalog.relation_columns("orders") is not None
    assert catalog.relation_columns("nope") is None


def test_sink_plan_from_ast(catalog: MemoryCatalog) -> None:
    stmt = sink(key=(ident("id"), ident("ts")), partition_by=(pf("days", "ts"), pf("bucket", "id", 16)))
    result = analyze(stmt, catalog)
    plan = result.plan
    assert isinstance(plan, CreateObjectPlan) and isinstance(plan.definition, SinkPlan)
    d = plan.definition
    assert d.mode is SinkMode.UPSERT  # KEY without MODE
    assert [(p.transform, p.param, p.name) for p in d.partition_by] == [
        (Transform.DAY, None, "ts_day"),
        (Transform.BUCKET, 16, "id_bucket"),
    ]
    assert ("source", "orders") in plan.dependencies and ("connection", "cat") in plan.dependencies
    assert result.warnings == ()


def test_implicit_upsert_partition_rule_says_why(catalog: MemoryCatalog) -> None:
    with pytest.raises(AnalysisError, match=r"KEY without MODE means MODE UPSERT"):
        analyze(sink(key=(ident("id"),), partition_by=(pf("day", "ts"),)), catalog)


def test_not_enforced_needs_key(catalog: MemoryCatalog) -> None:
    with pytest.raises(AnalysisError, match="NOT ENFORCED needs a KEY"):
        analyze(sink(key_not_enforced=True), catalog)


def test_error_without_source_has_span_but_no_caret(catalog: MemoryCatalog) -> None:
    stmt = sink(catalog=a.Ident("nope", span=None))
    with pytest.raises(AnalysisError) as info:
        analyze(stmt, catalog, filename="x.sql")
    assert info.value.render().startswith("x.sql: error: unknown connection nope")


def test_explain_has_no_side_effects(catalog: MemoryCatalog) -> None:
    plan = analyze(a.Explain(sink()), catalog).plan
    assert isinstance(plan, ExplainPlan) and plan.sink.table == "t"
    assert catalog.get("sink", "s") is None


def test_rest_auth_derivation(catalog: MemoryCatalog) -> None:
    def auth(*options: a.Option) -> RestAuth:
        stmt = a.CreateConnection(
            ident("c"),
            a.ConnectionKind.ICEBERG_CATALOG,
            (opt("TYPE", "rest"), opt("URI", "https://x"), *options),
        )
        plan = analyze(stmt, catalog).plan
        assert isinstance(plan, CreateObjectPlan) and isinstance(plan.definition, CatalogConnectionPlan)
        return plan.definition.auth

    assert auth() is RestAuth.NONE
    assert auth(opt("USER", "u"), a.Option("PASSWORD", secret("sk"))) is RestAuth.OAUTH2
    assert auth(opt("USER", "u"), a.Option("PASSWORD", secret("sk")), opt("AUTH", "basic")) is RestAuth.BASIC
    assert auth(a.Option("CREDENTIAL", secret("sk"))) is RestAuth.OAUTH2
    assert auth(a.Option("TOKEN", secret("sk"))) is RestAuth.TOKEN
    assert auth(a.Option("AWS CONNECTION", ident("s3"))) is RestAuth.SIGV4


def test_relative_paths_resolve_against_base_dir(catalog: MemoryCatalog, tmp_path: Path) -> None:
    stmt = a.CreateSource(ident("e"), a.SourceKind.FILES, a.StringLit("in/"), (opt("FORMAT", "parquet"),))
    plan = analyze(stmt, catalog, base_dir=tmp_path).plan
    assert isinstance(plan, CreateObjectPlan) and isinstance(plan.definition, SourcePlan)
    assert plan.definition.path == str(tmp_path.resolve() / "in") + "/"
    conn = a.CreateConnection(ident("l"), a.ConnectionKind.ICEBERG_CATALOG, (opt("TYPE", "local"),))
    cplan = analyze(conn, catalog, base_dir=tmp_path).plan
    assert isinstance(cplan, CreateObjectPlan) and isinstance(cplan.definition, CatalogConnectionPlan)
    assert cplan.definition.warehouse == str(tmp_path.resolve() / "warehouse")


def test_alter_sink_updates_commit_policy(catalog: MemoryCatalog) -> None:
    catalog.apply(analyze(sink(), catalog).plan)
    plan = analyze(
        a.AlterSink(ident("s"), (opt("COMMIT INTERVAL", "2m"), opt("MINIMUM SIZE", "1MiB"))), catalog
    ).plan
    catalog.apply(plan)
    stored = catalog.get("sink", "s")
    assert isinstance(stored, SinkPlan)
    assert stored.commit.maximum_period == 120.0 and stored.commit.minimum_size == 1024**2
    plan = analyze(a.AlterSink(ident("s"), reset_options=("MAXIMUM PERIOD",)), catalog).plan
    catalog.apply(plan)
    stored = catalog.get("sink", "s")
    assert isinstance(stored, SinkPlan)
    assert stored.commit.maximum_period is None and stored.commit.minimum_size == 1024**2


def test_plans_round_trip_through_dict(catalog: MemoryCatalog) -> None:
    plan = analyze(sink(key=(ident("id"),), partition_by=(pf(None, "id"),)), catalog).plan
    assert isinstance(plan, CreateObjectPlan)
    data = json.loads(json.dumps(to_dict(plan.definition)))
    assert plan_from_dict(data) == plan.definition


def test_inline_secret_warning_renders_masked(catalog: MemoryCatalog) -> None:
    from icesql.syntax.parser import parse

    text = "CREATE CONNECTION a TO AWS (ACCESS KEY ID = 'AK', SECRET ACCESS KEY = 'topsecretvalue')"
    (stmt,) = parse(text)
    result = analyze(stmt, catalog, source=text)
    assert len(result.warnings) == 1
    w = result.warnings[0]
    assert isinstance(w, AnalysisWarning)
    rendered = w.render()
    assert "warning: option SECRET ACCESS KEY is given as a plain string" in rendered
    assert "topsecretvalue" not in rendered and "'**************'" in rendered
    plan = result.plan
    assert isinstance(plan, CreateObjectPlan)
    assert plan.inline_secrets[0][0] == "__inline__.a.secret_access_key"
    assert plan.inline_secrets[0][1].reveal() == "topsecretvalue"
    assert "'********'" in plan.sql and "topsecretvalue" not in plan.sql


def test_analyzer_imports_no_engine_or_lark() -> None:
    code = (
        "import sys, icesql.analyzer, icesql.analyzer.statements\n"
        "bad = [m for m in ('pyspark', 'pyiceberg', 'pyarrow', 'lark') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
