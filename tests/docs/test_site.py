"""The documentation site (docs/manual/, built by mkdocs.yml) says what the code does.

- Every ```sql block of every page is executed, in order, by one ``icesql.Session`` per page in a
  fresh home (the embedded default: a local SQLite catalog, no server, no Spark). An HTML comment
  just before a block changes how (the comment does not render):

  * no comment: executed (``Session.execute``), connections validated as a user's would be;
  * ``<!-- sql: offline (why) -->``: the example names a server the suite does not have there (a
    REST catalog, AWS, a Kafka broker): applied to the catalog store with ``validate=False``, so
    it is parsed, analyzed and stored, but nothing is contacted. The getting-started Kafka
    pipeline also runs for real against a noida-db broker (marker ``kafka``, below);
  * ``<!-- sql: check (why) -->``: parsed and analyzed only (``Session.check``), against what the
    page's earlier blocks created: a ``SELECT`` (which needs Spark, or a table a sink wrote);
  * ``<!-- sql: error -->``: must fail with an ``IcesqlError``, and the ```text block that follows
    must show the error's rendering (the troubleshooting page's messages are real);
  * ``<!-- sql-setup ... -->``: hidden statements applied first (``validate=False``), so that an
    example can name a secret or a connection without repeating it;
  * ``<!-- sql-home -->``: the next blocks are a script of their own, in a new home.
- Every ```lark block is an excerpt of grammar/icesql.lark (each of its lines is a line there).
- Every option of every option list (icesql.syntax.options.LISTS) is in a table with a default
  column on its statement's page.
- Every metric the metrics module registers is on the metrics page; the columns of SHOW SINK
  STATUS are on the SHOW page.
- The README stays short, starts with the two commands, and .ci/run calls its test command.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import icesql
from icesql.errors import IcesqlError

# icesql answers unknown names itself unless the program has a Spark of its own
pytestmark = pytest.mark.usefixtures("no_spark_of_the_program")

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "manual"
PAGES = sorted(SITE.rglob("*.md"))

TOKEN = re.compile(
    r"<!-- sql-setup\n(?P<setup>.*?)\n-->"
    r"|(?P<home><!-- sql-home -->)"
    r"|<!-- sql: (?P<mode>[a-z]+)(?: \((?P<why>[^)]*)\))? -->"
    r"|^```sql\n(?P<sql>.*?)\n```"
    r"|^```text\n(?P<text>.*?)\n```",
    re.S | re.M,
)
MODES = ("run", "offline", "check", "error")


@dataclass
class Step:
    mode: str  # setup, home, run, offline, check, error
    sql: str
    line: int
    shown: str | None = None  # error: the ```text block that follows
    why: str = ""  # offline, check: what the example needs


def steps(page: Path) -> list[Step]:
    text = page.read_text(encoding="utf-8")
    out: list[Step] = []
    mode: str | None = None
    why = ""
    for m in TOKEN.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group("home") is not None:
            out.append(Step("home", "", line))
        elif m.group("setup") is not None:
            out.append(Step("setup", m.group("setup"), line))
        elif m.group("mode") is not None:
            mode = m.group("mode")
            why = m.group("why") or ""
            assert mode in MODES, f"{page.name}:{line}: unknown mode {mode!r}"
            if mode in ("offline", "check"):
                assert m.group("why"), f"{page.name}:{line}: say why the example is {mode} only"
        elif m.group("sql") is not None:
            out.append(Step(mode or "run", m.group("sql"), line, why=why))
            mode, why = None, ""
        elif out and out[-1].mode == "error" and out[-1].shown is None:
            out[-1].shown = m.group("text")
    return out


def sql_pages() -> list[Path]:
    return [p for p in PAGES if "```sql" in p.read_text(encoding="utf-8")]


def test_the_site_has_the_pages_the_nav_names() -> None:
    nav = re.findall(r":\s+([\w/.-]+\.md)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), flags=re.M)
    assert sorted(nav) == sorted(p.relative_to(SITE).as_posix() for p in PAGES)


@pytest.mark.parametrize("page", sql_pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_every_sql_example_of_the_page_executes(page: Path, tmp_path: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = steps(page)
    # every ```sql block was seen (one indented inside a list item would be missed)
    assert sum(s.mode not in ("setup", "home") for s in found) == text.count("```sql")
    base = tmp_path / "scripts"
    shutil.copytree(ROOT / "examples" / "data", base / "data")
    homes = 0
    session = icesql.Session(home=tmp_path / "home")
    try:
        for step in found:
            where = f"{page.relative_to(SITE)}:{step.line}"
            if step.mode == "home":
                session.close()
                homes += 1
                session = icesql.Session(home=tmp_path / f"home-{homes}")
                continue
            session.validate = step.mode not in ("setup", "offline")
            if step.mode == "check":
                errors = session.check(step.sql, filename=where, base_dir=base)
                assert errors == [], f"{where}: " + "\n".join(e.render() for e in errors)
            elif step.mode == "error":
                with pytest.raises(IcesqlError) as caught:
                    session.execute(step.sql, filename="pipeline.sql", base_dir=base)
                assert step.shown is not None, f"{where}: an error example needs a ```text block after it"
                rendered = caught.value.render()
                assert rendered.strip() in step.shown, f"{where}: the page shows\n{step.shown}\nicesql says\n{rendered}"
            else:
                try:
                    session.execute(step.sql, filename=where, base_dir=base)
                except IcesqlError as err:
                    pytest.fail(f"{where} ({step.mode}):\n{err.render()}")
    finally:
        session.close()


def test_every_lark_block_is_an_excerpt_of_the_grammar() -> None:
    grammar = {line.strip() for line in (ROOT / "grammar" / "icesql.lark").read_text(encoding="utf-8").splitlines()}
    seen = 0
    for page in PAGES:
        for block in re.findall(r"^```lark\n(.*?)\n```", page.read_text(encoding="utf-8"), flags=re.S | re.M):
            seen += 1
            for line in block.splitlines():
                assert not line.strip() or line.strip() in grammar, f"{page.name}: not in the grammar: {line}"
    assert seen >= 15


def test_every_statement_page_shows_its_grammar() -> None:
    for page in sorted((SITE / "sql").glob("*.md")):
        assert "```lark" in page.read_text(encoding="utf-8"), page.name


OPTION_PAGES = {
    "aws": "sql/create-connection.md",
    "gcs": "sql/create-connection.md",
    "azure": "sql/create-connection.md",
    "iceberg_catalog": "sql/create-connection.md",
    "kafka": "sql/create-connection.md",
    "schema_registry": "sql/create-connection.md",
    "connection_with": "sql/create-connection.md",
    "source": "sql/create-source.md",
    "kafka_source": "sql/create-source.md",
    "sink_target": "sql/create-sink.md",
    "sink": "sql/create-sink.md",
    "alter_sink": "sql/alter-sink.md",
    "alter_source": "sql/alter-source.md",
}


def documented_options(text: str) -> set[str]:
    """The option names in the first column of the page's tables that have a default column."""
    names: set[str] = set()
    for table in re.findall(r"(?:^\|.*\|\n)+", text, flags=re.M):
        rows = table.splitlines()
        if "default" not in [c.strip() for c in rows[0].strip("|").split("|")]:
            continue
        for row in rows[2:]:
            names.update(re.findall(r"`([A-Z][A-Z0-9 ]*)`", row.strip("|").split("|")[0]))
    return names


def test_every_option_is_in_a_table_with_its_default() -> None:
    from icesql.syntax.options import LISTS

    assert set(OPTION_PAGES) == set(LISTS)
    missing = []
    for kind, specs in LISTS.items():
        documented = documented_options((SITE / OPTION_PAGES[kind]).read_text(encoding="utf-8"))
        missing += [f"{OPTION_PAGES[kind]}: {kind} {spec.name}" for spec in specs if spec.name not in documented]
    assert missing == []


def test_every_metric_is_on_the_metrics_page() -> None:
    pytest.importorskip("prometheus_client")
    from icesql.observe.metrics import SinkMetrics

    metrics = SinkMetrics(lambda: [])
    metrics.track(["s"])
    page = (SITE / "operations" / "metrics.md").read_text(encoding="utf-8")
    names = {f.name + ("_total" if f.type == "counter" else "") for f in metrics.registry.collect()}
    names = {n for n in names if n.startswith("icesql_")}
    assert names, "no metric collected"
    assert sorted(n for n in names if f"`{n}`" not in page) == []


def test_the_delete_counters_say_that_position_deletes_count_too() -> None:
    """Issue 51: icesql_sink_deletes_committed and ..._delete_files_committed count the position
    deletes of the default DELETE MODE as well as equality deletes; help and page say so."""
    pytest.importorskip("prometheus_client")
    from icesql.observe.metrics import SinkMetrics

    metrics = SinkMetrics(lambda: [])
    helps = {f.name: f.documentation for f in metrics.registry.collect()}
    page = (SITE / "operations" / "metrics.md").read_text(encoding="utf-8")
    for name in ("icesql_sink_deletes_committed", "icesql_sink_delete_files_committed"):
        assert "position" in helps[name] and "equality" in helps[name], helps[name]
        row = next(line for line in page.splitlines() if line.startswith(f"| `{name}_total`"))
        assert "position" in row and "equality" in row, row


def test_the_show_page_lists_every_column_of_show_sink_status(tmp_path: Path) -> None:
    with icesql.Session(home=tmp_path / "home") as session:
        (result,) = session.execute("SHOW SINK STATUS")
    page = (SITE / "sql" / "show.md").read_text(encoding="utf-8")
    assert result.columns and [c for c in result.columns if f"`{c}`" not in page] == []


@pytest.mark.kafka
def test_the_getting_started_kafka_pipeline_runs_against_a_broker(tmp_path: Path) -> None:
    """The page's Kafka script, pointed at the noida-db the suite starts, with the records its
    producer snippet sends: validated (the connection reaches the broker), run once, and the
    table holds every record."""
    from tests.support.kafka import Broker, Record, create_topic, missing_reason, produce

    reason = missing_reason("noida")
    if reason:
        pytest.skip(reason)
    (script,) = [s for s in steps(SITE / "getting-started.md") if "Kafka broker" in s.why]
    assert "'127.0.0.1:19092'" in script.sql
    with Broker("noida", tmp_path / "broker") as broker:
        create_topic(broker.bootstrap, "orders", 1)
        produce(
            broker.bootstrap,
            "orders",
            [Record(str(i % 100).encode(), f'{{"id": {i}, "sku": "s{i % 7}", "amount": {i / 4}}}'.encode()) for i in range(1000)],
        )
        with icesql.Session(home=tmp_path / "home") as session:
            session.execute(script.sql.replace("127.0.0.1:19092", broker.bootstrap), base_dir=tmp_path)
            session.run(once=True)
            (result,) = session.execute("SELECT count(*), sum(amount) FROM lake.sales.orders", base_dir=tmp_path)
    assert [tuple(r) for r in result.rows] == [(1000, sum(i / 4 for i in range(1000)))]


def test_the_many_tables_example_runs(tmp_path: Path) -> None:
    """The create-sink page's routed sink (one sink, many tables), over files of Debezium events
    of two tables with their schemas: run once, each table holds its rows' final state."""
    from tests.support.connect_events import event

    (script,) = [s for s in steps(SITE / "sql" / "create-sink.md") if "inventory_sink" in s.sql]
    data = tmp_path / "data" / "inventory"
    data.mkdir(parents=True)
    customers = [("id", "int"), ("name", "string")]
    orders = [("id", "long"), ("amount", "decimal")]
    lines = [
        event("inventory", "customers", customers, ["id"], "c", None, {"id": 1, "name": "ann"}, 1)[1],
        event("inventory", "orders", orders, ["id"], "c", None, {"id": 7, "amount": 2.5}, 2)[1],
        event("inventory", "customers", customers, ["id"], "u", {"id": 1, "name": "ann"}, {"id": 1, "name": "bo"}, 3)[1],
    ]
    (data / "0.json").write_text("\n".join(lines) + "\n")
    with icesql.Session(home=tmp_path / "home") as session:
        session.execute("CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = './warehouse');", base_dir=tmp_path)
        session.execute(script.sql, base_dir=tmp_path)
        session.run(once=True)
        (c,) = session.execute("SELECT id, name FROM lake.inventory.app_customers", base_dir=tmp_path)
        (o,) = session.execute("SELECT id, amount FROM lake.inventory.app_orders", base_dir=tmp_path)
    assert [tuple(r) for r in c.rows] == [(1, "bo")]
    assert [(r[0], str(r[1])) for r in o.rows] == [(7, "2.50")]


@pytest.mark.kafka
def test_the_many_topics_example_runs_against_a_broker(tmp_path: Path) -> None:
    """CREATE SOURCE's many-topics example, on the page's connection pointed at a noida-db: the
    sink writes every record of both topics once, each row with its topic, and a topic created
    later is read at the next run."""
    from tests.support.kafka import Broker, create_topic, missing_reason, produce

    reason = missing_reason("noida")
    if reason:
        pytest.skip(reason)
    (script,) = [s for s in steps(SITE / "sql" / "create-source.md") if "TOPIC PATTERN" in s.sql]

    def send(bootstrap: str, topic: str, ids: range) -> None:
        produce(bootstrap, topic, [f'{{"id": {i}, "amount": {i / 2}}}'.encode() for i in ids])

    with Broker("noida", tmp_path / "broker") as broker:
        for topic in ("orders.eu", "orders.us", "returns"):
            create_topic(broker.bootstrap, topic, 2)
        send(broker.bootstrap, "orders.eu", range(0, 40))
        send(broker.bootstrap, "orders.us", range(100, 130))
        send(broker.bootstrap, "returns", range(900, 910))
        with icesql.Session(home=tmp_path / "home") as session:
            session.execute(
                f"CREATE CONNECTION k TO KAFKA (BROKER = '{broker.bootstrap}');"
                f"CREATE CONNECTION lake TO ICEBERG CATALOG (TYPE = 'local', WAREHOUSE = '{tmp_path / 'wh'}');"
                + script.sql,
                base_dir=tmp_path,
            )
            session.run(once=True, sinks=["orders_all"])
            create_topic(broker.bootstrap, "orders.ap", 1)
            send(broker.bootstrap, "orders.ap", range(200, 205))
            session.run(once=True, sinks=["orders_all"])
            (result,) = session.execute(
                "SELECT topic, count(*), min(id), max(id) FROM lake.sales.orders GROUP BY topic ORDER BY topic",
                base_dir=tmp_path,
            )
    assert [tuple(r) for r in result.rows] == [
        ("orders.ap", 5, 200, 204),
        ("orders.eu", 40, 0, 39),
        ("orders.us", 30, 100, 129),
    ]


# ------------------------------------------------------------------------------------- README

README = ROOT / "README.md"


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    first, second = readme_commands()[:2]
    assert "pip install -e '.[engine]'" in first and "run examples/quickstart.sql" in first
    assert "pip install -e '.[test,docs]'" in second and "-m pytest" in second
    # both come before any other section
    assert text.index(second) < text.index("\n## ")


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    test_command = readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_command in ci.splitlines()


def test_the_readmes_links_to_the_site_name_existing_pages() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/manual/[^)#]+)", text)
    assert links
    assert [link for link in links if not (ROOT / link).is_file()] == []
