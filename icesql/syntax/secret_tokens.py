"""What the secret finder asks of one token, and what it gathers for one statement.

``Secret`` is one finding: the tokens that spell a value. ``StatementScan`` holds a statement's
tokens and the secrets found in them so far, and hands text that turns out to be a statement of
its own (a ';' forgotten before it) back to the statement reader it was made with. The tests
here say what a token is to the finder: a word that says secret (``SECRET`` misspelled too), a
keyword of the dialect, syntax that stays visible where everything else is hidden.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from icesql.syntax.grammar_file import keywords
from icesql.syntax.lexer import Token, TokenKind, edit_distance
from icesql.syntax.options import mentions_secret

# the kinds of token that can be a value on their own
LITERALS = (TokenKind.STRING, TokenKind.QUOTED, TokenKind.NUMBER)
_STRUCTURE = frozenset("(),;=")  # punctuation that is syntax, never part of a value
_LETTERS = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Secret:
    """One secret value: the tokens that spell it (several when it is written badly)."""

    start: int
    end: int
    parts: tuple[tuple[int, int], ...]  # (start, end) of each token to mask


def secret_like(word: str) -> bool:
    """``SECRET`` or a misspelling of it (``SECERT``, ``SECRETS``, ``SCRET``)."""
    w = word.upper()
    return 4 <= len(w) <= 9 and (w == "SECRET" or edit_distance(w, "SECRET") <= 2)


def mentions_secret_word(tok: Token) -> bool:
    """A word that is ``SECRET`` (or a misspelling of it), or a literal or comment holding one."""
    if tok.kind is TokenKind.WORD:
        return secret_like(tok.text)
    return any(secret_like(w) for w in _LETTERS.findall(tok.text[:200]))


def token_mentions_secret(tok: Token) -> bool:
    """A token that says secret: the word itself, or a name that says it holds one (``PASSWORD``)."""
    return mentions_secret_word(tok) or mentions_secret(tok.text[:200])


def dialect_word(tok: Token) -> bool:
    """A keyword of the dialect (never a value's whole text)."""
    return tok.kind is TokenKind.WORD and tok.upper in keywords()


def is_structure(tok: Token) -> bool:
    """What stays visible where everything else is hidden: keywords and syntax punctuation."""
    return tok.text in _STRUCTURE or dialect_word(tok)


# reads a run of tokens as a statement of its own, adding what it finds to the scan
StatementReader = Callable[["StatementScan", list[Token]], object]


class StatementScan:
    """The tokens of one statement and the secrets found in them; ``read_statement`` reads
    tokens inside it as a statement of their own."""

    def __init__(self, toks: list[Token], read_statement: StatementReader) -> None:
        self.all = toks
        self._read_statement = read_statement
        self.starts = [t.start for t in toks]
        self.end = toks[-1].end if toks else 0
        self.out: list[Secret] = []

    def add_range(
        self,
        start: int,
        end: int,
        *,
        keep: Callable[[Token], bool] | None = None,
        holes: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Mask every token in ``[start, end)`` but blank space, ``keep``'s and those inside
        ``holes`` (nested lists, masked on their own): one secret per run between kept ones."""
        lo = bisect.bisect_left(self.starts, start)
        parts: list[tuple[int, int]] = []
        for tok in self.all[lo:]:
            if tok.start >= end:
                break
            if tok.kind is TokenKind.SPACE:
                continue
            if (keep is not None and keep(tok)) or any(a <= tok.start < b for a, b in holes):
                self._flush(parts)
                parts = []
                continue
            parts.append((tok.start, tok.end))
        self._flush(parts)

    def _flush(self, parts: list[tuple[int, int]]) -> None:
        if parts:
            self.out.append(Secret(parts[0][0], parts[-1][1], tuple(parts)))

    def add(self, tok: Token) -> None:
        self.out.append(Secret(tok.start, tok.end, ((tok.start, tok.end),)))

    def read_statement(self, sig: list[Token]) -> None:
        """Find the secrets of ``sig`` (a tail of this statement's significant tokens) as a
        statement of its own: ``... = false CREATE SECRET s AS 'v'`` lost its ')' and ';'."""
        self._read_statement(self, sig)
