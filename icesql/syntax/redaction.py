"""Mask secret literals in raw SQL text before any error quotes a line of it.

This works on text that may not parse (a syntax error two words after a secret's value must not
print the value), so it is lexical: it tracks statements, words, comments and string literals.
String literals are masked when they sit

* anywhere in a ``CREATE [IF NOT EXISTS] SECRET`` / ``ALTER SECRET`` statement, or
* after ``=`` in an option whose name mentions PASSWORD, SECRET, TOKEN or CREDENTIAL.

Masking keeps the length and the quotes, so spans, lines, columns and carets stay right.
When in doubt it masks: a literal that is not a secret but sits in a secret-ish position is
hidden too, which costs nothing but a less informative caret line.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"""
    (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^']|'')*(?:'|\Z))
  | (?P<quoted>"(?:[^"]|"")*(?:"|\Z))
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<semi>;)
  | (?P<eq>=)
  | (?P<comma>[,()])
  | (?P<other>\S)
    """,
    re.VERBOSE | re.DOTALL,
)

_SECRET_WORDS = {"PASSWORD", "SECRET", "TOKEN", "CREDENTIAL"}


def _mask(text: str, start: int, end: int, out: list[str]) -> None:
    closed = end - start >= 2 and text[end - 1] == text[start]
    for i in range(start + 1, end - 1 if closed else end):
        if text[i] != "\n":
            out[i] = "*"


def mask_secret_literals(text: str) -> str:
    """``text`` with every string literal that may hold a secret replaced by ``*``s."""
    if "'" not in text and '"' not in text:
        return text
    out = list(text)
    words: list[str] = []  # words of the current statement
    option_words: list[str] = []  # words since the last ',' or '(' (an option name)
    after_eq_secretish = False
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "comment":
            continue
        if kind == "semi":
            words, option_words, after_eq_secretish = [], [], False
            continue
        if kind == "word":
            w = m.group().upper()
            words.append(w)
            option_words.append(w)
            continue
        if kind == "eq":
            after_eq_secretish = bool(_SECRET_WORDS.intersection(option_words))
            continue
        if kind == "comma":
            option_words, after_eq_secretish = [], False
            continue
        if kind in ("string", "quoted"):
            in_secret_stmt = len(words) >= 2 and words[0] in ("CREATE", "ALTER") and words[1] == "SECRET"
            is_value_of_secret_stmt = in_secret_stmt and kind == "string"
            if is_value_of_secret_stmt or after_eq_secretish:
                _mask(text, m.start(), m.end(), out)
            continue
    return "".join(out)


__all__ = ["mask_secret_literals"]
