"""The maintenance options of CREATE SINK and ALTER SINK: values, defaults, validation, storage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icesql.analyzer import MemoryCatalog, analyze
from icesql.errors import AnalysisError
from icesql.plan import CreateObjectPlan, MaintenancePolicy, SinkPlan, plan_from_dict, to_dict
from icesql.syntax.parser import parse

SETUP = """
CREATE CONNECTION cat TO ICEBERG CATALOG (TYPE = 'local');
CREATE SOURCE orders FROM FILES 'orders' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
"""
SINK = "CREATE SINK s FROM orders INTO ICEBERG CATALOG cat (NAMESPACE = 'n', TABLE = 't') KEY (id)"


def catalog() -> MemoryCatalog:
    cat = MemoryCatalog()
    for stmt in parse(SETUP):
        cat.apply(analyze(stmt, cat, source=SETUP, base_dir=Path("/base")).plan)
    return cat


def run(sql: str, cat: MemoryCatalog | None = None) -> Any:
    cat = cat if cat is not None else catalog()
    (stmt,) = parse(sql)
    return analyze(stmt, cat, source=sql, base_dir=Path("/base"))


def sink_plan(sql: str, cat: MemoryCatalog | None = None) -> SinkPlan:
    plan = run(sql, cat).plan
    definition = plan.definition
    assert isinstance(definition, SinkPlan)
    return definition


def test_defaults_are_on_and_left_out_of_the_stored_form() -> None:
    plan = sink_plan(SINK)
    assert plan.maintenance == MaintenancePolicy()
    assert plan.maintenance.automatic and plan.maintenance.compaction
    stored = to_dict(plan)
    assert "maintenance" not in stored  # stored definitions and golden plans read as before
    assert plan_from_dict(stored) == plan


def test_every_option() -> None:
    plan = sink_plan(
        SINK
        + """ WITH (MAINTENANCE = 'auto', COMPACTION = 'off', COMPACTION MINIMUM FILES = 8,
        MAXIMUM DELETE FILES = 0, MAXIMUM MANIFESTS = 50, SNAPSHOT RETENTION = '6 hours',
        KEEP SNAPSHOTS = 100, ORPHAN FILE AGE = '3d')"""
    )
    assert plan.maintenance == MaintenancePolicy(
        compaction=False,
        compaction_minimum_files=8,
        maximum_delete_files=0,
        maximum_manifests=50,
        snapshot_retention=6 * 3600.0,
        keep_snapshots=100,
        orphan_file_age=3 * 86400.0,
    )
    assert plan_from_dict(to_dict(plan)) == plan
    off = sink_plan(SINK + " WITH (MAINTENANCE = 'off')")
    assert not off.maintenance.automatic and off.maintenance.describe() == "off"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("COMPACTION = 'sometimes'", "invalid COMPACTION 'sometimes': expected 'auto' or 'off'"),
        ("COMPACTION MINIMUM FILES = 1", "COMPACTION MINIMUM FILES must be at least 2, found 1"),
        ("KEEP SNAPSHOTS = 0", "KEEP SNAPSHOTS must be at least 1, found 0"),
        ("MAXIMUM MANIFESTS = 0", "MAXIMUM MANIFESTS must be at least 1, found 0"),
        ("MAXIMUM DELETE FILES = -1", "MAXIMUM DELETE FILES must be at least 0, found -1"),
        ("ORPHAN FILE AGE = '10s'", "ORPHAN FILE AGE must be at least 1 minute"),
        ("SNAPSHOT RETENTION = 'soon'", "option SNAPSHOT RETENTION:"),
        ("KEEP SNAPSHOT = 3", "unknown sink WITH option KEEP SNAPSHOT"),
    ],
)
def test_invalid_values_are_refused_with_the_option_named(option: str, message: str) -> None:
    with pytest.raises(AnalysisError) as err:
        run(f"{SINK} WITH ({option})")
    assert message in err.value.message, err.value.render()
    if option.startswith("KEEP SNAPSHOT "):
        assert err.value.hint == "did you mean KEEP SNAPSHOTS?"


def test_a_short_orphan_file_age_warns() -> None:
    result = run(f"{SINK} WITH (ORPHAN FILE AGE = '10m')")
    assert any("ORPHAN FILE AGE under 1 hour" in w.message for w in result.warnings)
    assert not run(f"{SINK} WITH (ORPHAN FILE AGE = '2h')").warnings


def test_alter_sink_sets_and_resets_maintenance_options() -> None:
    cat = catalog()
    created = run(SINK + " WITH (KEEP SNAPSHOTS = 5, MAXIMUM PERIOD = '10s')", cat)
    assert isinstance(created.plan, CreateObjectPlan)
    cat.apply(created.plan)
    altered = run("ALTER SINK s SET (SNAPSHOT RETENTION = '1d', COMPACTION = 'off')", cat).plan.definition
    assert altered.maintenance.snapshot_retention == 86400.0 and not altered.maintenance.compaction
    assert altered.maintenance.keep_snapshots == 5 and altered.commit.maximum_period == 10.0
    cat.apply(run("ALTER SINK s SET (SNAPSHOT RETENTION = '1d', COMPACTION = 'off')", cat).plan)
    reset = run("ALTER SINK s RESET (KEEP SNAPSHOTS, COMPACTION)", cat).plan.definition
    assert reset.maintenance.keep_snapshots == 10 and reset.maintenance.compaction
    assert reset.maintenance.snapshot_retention == 86400.0


def test_explain_shows_the_maintenance_policy(tmp_path: Path) -> None:
    import icesql

    with icesql.Session(home=tmp_path / "home") as s:
        s.execute(SETUP)
        (result,) = s.execute(f"EXPLAIN {SINK} WITH (SNAPSHOT RETENTION = '30m', KEEP SNAPSHOTS = 3)")
    rows = dict(result.rows)
    assert rows["maintenance"] == (
        "compaction (5 small files at a time, above 4 delete files), manifests merged above 32, "
        "snapshots kept 30m (at least 3), orphan files deleted after 1d"
    )
