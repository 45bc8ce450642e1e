"""A statement's error as the user sees it: located in its script, secrets masked, named after the file."""

from __future__ import annotations

import os
from pathlib import Path

from icesql.errors import IcesqlError
from icesql.syntax import ast as A


def base_dir_of(base_dir: str | os.PathLike[str] | None) -> Path:
    """Where a script's relative paths resolve: its directory when given, else the working one."""
    return Path(base_dir) if base_dir is not None else Path.cwd()


def located(err: IcesqlError, stmt: A.Statement | None, source: str | None, filename: str | None) -> IcesqlError:
    """The error pointing at its statement when it has no span of its own, quoting the source
    with every secret value masked, named after the file."""
    if err.span is None and stmt is not None and stmt.span is not None:
        err.span = stmt.span
    err.source = masked(source)  # the quoted line must never show a secret's value
    return err.with_source(None, filename)


def masked(source: str | None) -> str | None:
    from icesql.syntax.redaction import masked_text

    return masked_text(source) if source is not None else None


__all__ = ["base_dir_of", "located", "masked"]
