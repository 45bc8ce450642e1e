"""The grammar builds without LALR conflicts, and importing icesql stays light."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import lark

from icesql.syntax.parser import _LARK_OPTIONS, grammar_text


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def _conflicts(grammar: str) -> list[str]:
    handler = _Collect()
    old_level = lark.logger.level
    lark.logger.addHandler(handler)
    lark.logger.setLevel(logging.DEBUG)
    try:
        lark.Lark(grammar, **_LARK_OPTIONS)  # never from the cache: the analysis must run
    except lark.exceptions.GrammarError as exc:  # reduce/reduce collisions are raised
        return [str(exc)]
    finally:
        lark.logger.removeHandler(handler)
        lark.logger.setLevel(old_level)
    return [r for r in handler.records if "conflict" in r.lower() or "collision" in r.lower()]


def test_grammar_has_no_lalr_conflicts() -> None:
    assert _conflicts(grammar_text()) == []


def test_conflict_detection_works() -> None:
    # A deliberately ambiguous rule must be caught, or the test above proves nothing.
    bad = grammar_text() + "\nflush_sink2: FLUSH ident | FLUSH ident ident?\n"
    bad = bad.replace("| flush_sink\n", "| flush_sink\n          | flush_sink2\n", 1)
    assert _conflicts(bad)


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


def test_import_and_parse_load_no_engine_modules() -> None:
    out = _run(
        """
        import sys
        import icesql
        assert "lark" not in sys.modules, "import icesql must not load lark"
        stmts = icesql.parse("CREATE SINK s FROM t TO ICEBERG CATALOG c NAMESPACE n TABLE t")
        assert stmts[0].to_sql().startswith("CREATE SINK")
        icesql.ast.CreateSink
        heavy = [m for m in ("pyspark", "pyiceberg", "pyarrow", "pandas") if m in sys.modules]
        print(heavy)
        """
    )
    assert out == "[]"


def test_grammar_is_found_as_package_resource_or_source_file() -> None:
    text = grammar_text()
    assert "create_sink" in text
    from pathlib import Path

    import icesql.syntax.parser as parser

    # From a source tree the grammar beside the code wins (another checkout may be installed);
    # the wheel ships it as the icesql.grammar package.
    assert (Path(parser.__file__).resolve().parents[2] / "grammar" / "icesql.lark").read_text() == text
    pyproject = (Path(parser.__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"icesql.grammar" = "grammar"' in pyproject and '"icesql.grammar" = ["*.lark"]' in pyproject
