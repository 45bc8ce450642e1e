"""Blank out secret values in SQL text before it is written anywhere (history, echoes).

The rule is the dialect's one (``icesql.syntax.redaction``, fed by the option declarations of
``icesql.syntax.options``): the same values are hidden in the history as in error messages,
mistyped statements included. Each value becomes ``'<redacted>'``.
"""

from __future__ import annotations

from icesql.syntax.redaction import REDACTED, find_secrets, redact_secrets


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Offsets of every secret value in ``text``."""
    return [(s.start, s.end) for s in find_secrets(text)]


__all__ = ["REDACTED", "redact_secrets", "secret_spans"]
