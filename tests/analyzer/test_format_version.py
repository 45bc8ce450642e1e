"""FORMAT VERSION on CREATE and ALTER SINK (issue 55): 3 is accepted, a version only goes up."""

from __future__ import annotations

from pathlib import Path

import pytest

import icesql
from icesql.errors import AnalysisError

SETUP = """
CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{wh}');
CREATE SOURCE src FROM FILES '{data}' (FORMAT = 'json', SCHEMA = 'id BIGINT, v STRING');
"""


def _session(tmp_path: Path) -> icesql.Session:
    s = icesql.Session(home=tmp_path / "home")
    (tmp_path / "in").mkdir()
    s.execute(SETUP.format(wh=tmp_path / "wh", data=tmp_path / "in"))
    return s


def test_a_v3_sink_is_planned_as_v3_and_an_upgrade_is_stored(tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        s.execute("CREATE SINK a FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'a') WITH (FORMAT VERSION = 3);")
        s.execute("CREATE SINK b FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'b');")
        assert s.store.get_object("sink", "a").definition["format_version"] == 3
        assert s.store.get_object("sink", "b").definition["format_version"] == 2
        s.execute("ALTER SINK b SET (FORMAT VERSION = 3);")
        assert s.store.get_object("sink", "b").definition["format_version"] == 3
        s.execute("ALTER SINK b SET (FORMAT VERSION = 3);")  # the same version again: nothing to do
        assert s.store.get_object("sink", "b").definition["format_version"] == 3


def test_a_format_version_never_goes_down(tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        s.execute("CREATE SINK a FROM src INTO ICEBERG CATALOG lake (NAMESPACE = 'n', TABLE = 'a') WITH (FORMAT VERSION = 3);")
        with pytest.raises(AnalysisError) as e:
            s.execute("ALTER SINK a SET (FORMAT VERSION = 2);")
        text = e.value.render()
        assert "would downgrade sink a's table from version 3" in text and "never downgraded" in text
        assert s.store.get_object("sink", "a").definition["format_version"] == 3
