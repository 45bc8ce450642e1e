"""The site's command-line page (docs/manual/operations/cli.md) documents every command and every
backslash command of the registry, and its examples are valid command lines; the environment
variables page is the settings module's table."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from icesql.cli import COMMAND_HELP, build_parser
from icesql.repl.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "manual"
CLI_PAGE = SITE / "operations" / "cli.md"
ENVIRONMENT_PAGE = SITE / "operations" / "environment.md"


def cli_section() -> str:
    text = CLI_PAGE.read_text(encoding="utf-8")
    return text.split("<!-- cli:begin -->", 1)[1].split("<!-- cli:end -->", 1)[0]


def documented_backslash_commands(text: str) -> set[str]:
    return set(re.findall(r"^\| `(\\[^ `]+)", text, flags=re.M))


def test_every_backslash_command_is_documented_and_nothing_else() -> None:
    text = cli_section()
    assert documented_backslash_commands(text) == set(COMMANDS.names())
    for command in COMMANDS:
        assert f"`{command.usage.replace('|', chr(92) + '|')}`" in text, command.usage


def test_every_cli_command_has_a_section_with_an_example() -> None:
    text = cli_section()
    for name in COMMAND_HELP:
        if name == "shell":
            assert "## `icesql` / `icesql shell`" in text
            continue
        section = text.split(f"## `icesql {name}`", 1)
        assert len(section) == 2, f"no section for icesql {name}"
        body = section[1].split("\n## ", 1)[0]
        example = re.search(r"```bash\n(.+?)\n```", body, flags=re.S)
        assert example and f"icesql {name}" in example.group(1) or f"icesql {name}" in body


def test_examples_in_the_docs_parse_as_command_lines() -> None:
    text = cli_section()
    parser = build_parser()
    for block in re.findall(r"```bash\n(.+?)\n```", text, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line)
            while words and "=" in words[0]:
                words.pop(0)  # environment assignments
            assert words[0] == "icesql", line
            parser.parse_args(words[1:])  # exits (fails the test) on a usage error


def test_the_environment_page_lists_every_environment_variable_from_the_settings_module() -> None:
    from icesql import settings

    text = ENVIRONMENT_PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- settings:begin -->\n", 1)[1].split("\n<!-- settings:end -->", 1)[0]
    assert table == settings.markdown_table()


def test_the_environment_is_read_only_through_the_settings_module() -> None:
    """One home for each variable: no other module of icesql reads ``os.environ``/``getenv``
    (setting variables for child processes, e.g. PYSPARK_PYTHON, is fine)."""
    offenders = []
    for path in sorted((ROOT / "icesql").rglob("*.py")):
        if path.name == "settings.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[[^]]+\]\s*(?!=)", line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []
