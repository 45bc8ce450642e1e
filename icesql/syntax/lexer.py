"""The one lexer of the icesql dialect: what a word, a string, a number and a comment are.

Everything that looks at icesql text lexically uses it: the parser's fast path (through the
compiled patterns below), the statement splitter, the diagnostics, the redaction of secrets in
errors and in the shell's history, the shell's colouring and completion. The Lark grammar
(``grammar/icesql.lark``) spells the same patterns for its own lexer; a test checks that the
two agree.

``tokens(text)`` never fails, whatever the text: an unterminated string, quoted identifier or
block comment becomes the last token, marked ``open``, and a character no token matches is a
``PUNCT`` token of its own. Inside ``CREATE VIEW ... AS`` the query is one ``QUERY`` token,
Spark SQL up to the statement's ``;`` (with Spark's backslash escapes in strings, as the
grammar reads it).

Unquoted words are ASCII (``[A-Za-z_][A-Za-z0-9_]*``): ``ſ``, ``ı``, ``K`` (Kelvin) and other
letters that case-fold to ASCII are never read as part of a keyword or a name; a name with
such letters is written in double quotes. Patterns avoid per-character alternations so that a
50 MB literal matches in constant regex memory.

Pure functions; no Lark.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass

from icesql.syntax.options import STORAGE

# ---------------------------------------------------------------------------- the patterns

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
STRING = r"'[^']*(?:''[^']*)*'"  # '' escapes a quote
QIDENT = r'"[^"]*(?:""[^"]*)*"'  # "" escapes a quote
NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
BLANK = r"[\s\ufeff]+"  # a byte order mark counts as blank space
LINE_COMMENT = r"--[^\n]*"
BLOCK_COMMENT = r"/\*[\s\S]*?\*/"

# Spark SQL (a view's query): strings take backslash escapes, backticks quote names.
_SPARK_SQ = r"'[^'\\]*(?:\\[\s\S][^'\\]*)*'"
_SPARK_DQ = r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"'
_BACKTICK = r"`[^`]*`"
# The query of CREATE VIEW: everything up to a `;` outside quotes and comments. It cannot
# start with blank space or a comment; a lone `-` or `/` is an operator; an unterminated quote
# or comment stops it (so the error points there).
_SPECIAL = "'" + '"' + r"`\-/"  # characters that may start a quote, a comment or an operator
QUERY = (
    rf"(?!--|/\*)(?:[^\s;{_SPECIAL}]|{_SPARK_SQ}|{_SPARK_DQ}|{_BACKTICK})"
    rf"(?:[^;{_SPECIAL}]+|{_SPARK_SQ}|{_SPARK_DQ}|{_BACKTICK}|--[^\n]*|/\*[\s\S]*?\*/|-(?!-)|/(?!\*))*"
)

# Blank space and complete comments, as the parser skips them.
SKIP_RE = re.compile(rf"(?:{BLANK}|{LINE_COMMENT}|{BLOCK_COMMENT})*")
# One token, named after the grammar's terminals (the parser's fast path reads the names).
TOKEN_RE = re.compile(
    rf"(?P<IDENT>{IDENT})|(?P<STRING>{STRING})|(?P<QIDENT>{QIDENT})|(?P<NUMBER>{NUMBER})"
    r"|(?P<LPAR>\()|(?P<RPAR>\))|(?P<COMMA>,)|(?P<EQ>=)|(?P<DOT>\.)|(?P<_SEMI>;)"
)
QUERY_RE = re.compile(QUERY)

# Everything, never failing: the dialect's tokens, then what is left open, then one character.
_ALL = re.compile(
    rf"(?P<SPACE>{BLANK})|(?P<COMMENT>{LINE_COMMENT}|{BLOCK_COMMENT})"
    rf"|(?P<STRING>{STRING})|(?P<QUOTED>{QIDENT})|(?P<WORD>{IDENT})|(?P<NUMBER>{NUMBER})"
    r"|(?P<OPEN>'[\s\S]*|\"[\s\S]*|/\*[\s\S]*)|(?P<PUNCT>[\s\S])"
)
_ALL_SPARK = re.compile(
    rf"(?P<SPACE>{BLANK})|(?P<COMMENT>{LINE_COMMENT}|{BLOCK_COMMENT})"
    rf"|(?P<STRING>{_SPARK_SQ})|(?P<QUOTED>{_SPARK_DQ}|{_BACKTICK})|(?P<WORD>{IDENT})|(?P<NUMBER>{NUMBER})"
    r"|(?P<OPEN>['\"`][\s\S]*|/\*[\s\S]*)|(?P<PUNCT>[\s\S])"
)


class TokenKind(enum.Enum):
    SPACE = "space"
    COMMENT = "comment"  # -- ... or /* ... */
    STRING = "string"  # '...'
    QUOTED = "quoted"  # "..." (an identifier, or a design-document style value)
    WORD = "word"  # a keyword or an unquoted identifier
    NUMBER = "number"
    PUNCT = "punct"  # ( ) , ; = . and any other single character
    QUERY = "query"  # the Spark SQL of CREATE VIEW ... AS
    BACKSLASH = "backslash"  # a \command line (the shell's, never produced by ``tokens``)


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str
    start: int
    end: int
    open: bool = False  # an unterminated string, quoted identifier or block comment

    @property
    def upper(self) -> str:
        return self.text.upper()

    @property
    def significant(self) -> bool:
        return self.kind not in (TokenKind.SPACE, TokenKind.COMMENT)

    def is_punct(self, char: str) -> bool:
        return self.kind is TokenKind.PUNCT and self.text == char

    def is_word(self, word: str) -> bool:
        return self.kind is TokenKind.WORD and self.text.upper() == word


_KINDS = {k.name: k for k in TokenKind}


def tokens(text: str, start: int = 0, end: int | None = None) -> Iterator[Token]:
    """Every token of ``text[start:end]`` (blank space and comments included), in order.

    Offsets are offsets into ``text``. Never raises.
    """
    end = len(text) if end is None else end
    pos = start
    pattern = _ALL
    # Significant words of the statement so far, while they may still lead to a view's query.
    head: list[str] | None = []
    while pos < end:
        m = pattern.match(text, pos, end)
        assert m is not None  # PUNCT takes any character
        group = m.lastgroup
        assert group is not None
        if group == "OPEN":
            tok = Token(
                TokenKind.COMMENT if text.startswith("/*", pos) else TokenKind.STRING
                if text[pos] == "'"
                else TokenKind.QUOTED,
                m.group(),
                pos,
                m.end(),
                open=True,
            )
        else:
            tok = Token(_KINDS[group], m.group(), pos, m.end())
        pos = tok.end
        yield tok
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            pattern = _ALL
            head = []
            continue
        if head is None or not tok.significant:
            continue
        head.append(tok.upper if tok.kind is TokenKind.WORD else "\0" + tok.kind.name)
        if head[:2] == ["CREATE", "VIEW"] or head in (["SELECT"], ["WITH"]):
            pattern = _ALL_SPARK  # Spark's string rules from here to the end of the statement
        if _before_query(head):
            skip = SKIP_RE.match(text, pos, end)
            assert skip is not None
            for piece in _ALL.finditer(text[skip.start() : skip.end()]):
                kind = _KINDS[piece.lastgroup or "SPACE"]
                yield Token(kind, piece.group(), skip.start() + piece.start(), skip.start() + piece.end())
            pos = skip.end()
            q = QUERY_RE.match(text, pos, end)
            if q is not None and q.end() > pos:
                stop = query_end(text, pos, q.end())
                yield Token(TokenKind.QUERY, text[pos:stop], pos, stop)
                pos = stop  # trailing blank space and comments are tokens of their own
            head = None
        elif len(head) > 7 or head[:2] not in (["CREATE"], ["CREATE", "VIEW"]):
            head = None


# Pieces of Spark SQL: blank space or a comment, a quoted run, or a run of anything else.
_QUERY_PIECE = re.compile(
    rf"(?P<blank>{BLANK}|{LINE_COMMENT}|{BLOCK_COMMENT})|{_SPARK_SQ}|{_SPARK_DQ}|{_BACKTICK}"
    r"|[^\s'\"`\-/]+|[\s\S]"
)


def query_end(text: str, start: int, end: int) -> int:
    """Where a view's query ``text[start:end]`` really ends: trailing blank space and
    comments are not part of it."""
    stop = start
    for m in _QUERY_PIECE.finditer(text, start, end):
        if m.lastgroup != "blank":
            stop = m.end()
    return stop


def _before_query(head: list[str]) -> bool:
    """``CREATE VIEW [IF NOT EXISTS] name AS``, or a statement's ``SELECT`` or ``WITH``: the
    query comes next (grammar: create_view, select)."""
    if head in (["SELECT"], ["WITH"]):
        return True
    rest = head[2:]
    if rest[:3] == ["IF", "NOT", "EXISTS"]:
        rest = rest[3:]
    return len(rest) == 2 and rest[1] == "AS" and (not rest[0].startswith("\0") or rest[0] == "\0QUOTED")


def tokenize(text: str) -> list[Token]:
    """``tokens(text)`` as a list."""
    return list(tokens(text))


def significant(toks: list[Token]) -> list[Token]:
    return [t for t in toks if t.significant]


def statements(text: str) -> Iterator[tuple[int, int, list[Token]]]:
    """Each statement's ``(start, end, significant tokens)``; see ``split_statements``."""
    sig: list[Token] = []
    for tok in tokens(text):
        if not tok.significant:
            continue
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            if sig:
                yield sig[0].start, sig[-1].end, sig
            sig = []
        else:
            sig.append(tok)
    if sig:
        yield sig[0].start, sig[-1].end, sig


def split_statements(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each statement in ``text``.

    Statements end at a ``;`` outside quotes and comments (the ``;`` itself is left out);
    leading and trailing blank space and comments are trimmed; empty statements (``;;``,
    comments only) are skipped. The last statement may lack its ``;``. An unterminated quote
    or comment runs to the end of the text, as it does for the parser.
    """
    return [(start, end) for start, end, _ in statements(text)]


def is_complete(text: str) -> bool:
    """Whether ``text`` ends a statement: a ``;`` outside quotes and comments, then only
    blank space or comments (what a shell needs to decide that Enter submits)."""
    complete = False
    for tok in tokens(text):
        if tok.open:
            return False
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            complete = True
        elif tok.significant:
            complete = False
    return complete


# Statements start with one of these words (what a missing ';' before them looks like).
STATEMENT_KEYWORDS = (
    "CREATE", "ALTER", "DROP", "SHOW", "DESCRIBE", "EXPLAIN", "VALIDATE", "FLUSH", "SELECT", "WITH",
)
STATEMENT_WORDS = frozenset((*STATEMENT_KEYWORDS, "DESC"))


def statement_head(words: list[str]) -> tuple[str, ...]:
    """The statement's verb and object kind, e.g. ``('CREATE', 'SINK')``; EXPLAIN is looked
    through, IF [NOT] EXISTS and OR REPLACE skipped, ``SHOW CREATE x`` keeps three words."""
    if words[:1] == ["EXPLAIN"]:
        words = words[1:]
    head = [w for w in words[:8] if w not in ("IF", "NOT", "EXISTS", "OR", "REPLACE")]
    if head[:2] == ["SHOW", "CREATE"]:
        return tuple(head[:3])
    return tuple(head[:2])


def option_list_kind(stmt_words: list[str], before: list[Token]) -> str | None:
    """Which option list (a key of ``icesql.syntax.options.LISTS``) a ``(`` opens, from the
    statement's words and the significant tokens before it; None for any other parenthesis
    (``KEY (...)``, ``PARTITION BY (...)``, ``RESET (...)``, nested lists)."""
    head = statement_head(stmt_words)
    prev = [t.upper for t in before[-3:]]
    last = prev[-1] if prev else ""
    if head == ("CREATE", "CONNECTION"):
        if last == "WITH":
            return "connection_with"
        if last in STORAGE:  # AWS, GCS, AZURE
            return STORAGE[last].list_kind
        if last == "KAFKA":
            return "kafka"
        if prev[-2:] == ["ICEBERG", "CATALOG"]:
            return "iceberg_catalog"
        if prev == ["CONFLUENT", "SCHEMA", "REGISTRY"]:
            return "schema_registry"
        return None
    if head == ("CREATE", "SOURCE"):
        if prev[:2] == ["KAFKA", "CONNECTION"] and before[-1].kind in (TokenKind.WORD, TokenKind.QUOTED):
            return "kafka_source"
        if last == "GENERATOR" or last == "FILES" or (before and before[-1].kind is TokenKind.STRING):
            return "source"
        return None
    if head == ("CREATE", "SINK"):
        if last == "WITH":
            return "sink"
        words = [t.upper for t in before]
        if "CATALOG" in words and before[-1].kind in (TokenKind.WORD, TokenKind.QUOTED):
            idx = len(words) - 1 - words[::-1].index("CATALOG")
            if len(before) - idx <= 3 and last not in ("KEY", "BY"):
                return "sink_target"
        return None
    if head == ("ALTER", "SINK") and last in ("SET", "RESET"):
        return "alter_sink"
    if head == ("ALTER", "SOURCE") and last == "SET":
        return "alter_source"
    return None


def edit_distance(a: str, b: str) -> int:
    """Edit distance with insertions, deletions, substitutions and adjacent swaps (``SECERT`` is
    one edit from ``SECRET``): what did-you-mean hints and the redactor's misspelling test use."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            d = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                d = min(d, prev2[j - 2] + 1)
            cur.append(d)
        prev2, prev = prev, cur
    return prev[-1]


__all__ = [
    "QUERY_RE",
    "SKIP_RE",
    "STATEMENT_KEYWORDS",
    "TOKEN_RE",
    "Token",
    "TokenKind",
    "edit_distance",
    "is_complete",
    "option_list_kind",
    "query_end",
    "significant",
    "split_statements",
    "statement_head",
    "statements",
    "tokenize",
    "tokens",
]
