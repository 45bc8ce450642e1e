"""Lark exceptions to :class:`ParseError`: message, span, expected tokens and a hint.

Messages read ``expected '=' or ',', found 'eu'`` / ``unexpected end of input, expected ')'``
/ ``unterminated string literal``. Expected tokens get human names (keywords upper case,
``identifier``, ``string``, punctuation quoted), and keywords that would only be read as an
identifier at that point are folded into ``identifier``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from icesql.errors import ParseError, Span, line_col
from icesql.syntax.lexer import STATEMENT_KEYWORDS, TokenKind, edit_distance, tokens
from icesql.syntax.options import storage_named

if TYPE_CHECKING:
    from lark.parsers.lalr_interactive_parser import InteractiveParser

# (start, end) -> whether that text touches a secret value (then it is never quoted)
SecretTest = Callable[[int, int], bool]


def _no_secret(start: int, end: int) -> bool:
    return False


_PUNCTUATION = {
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "EQ": "'='",
    "DOT": "'.'",
    "_SEMI": "';'",
    "SEMI": "';'",
}
_CLASSES = {
    "IDENT": "identifier",
    "QIDENT": "identifier",
    "STRING": "string",
    "NUMBER": "number",
    "QUERY": "query",
    "$END": "end of input",
}
_IGNORED = {"WS", "LINE_COMMENT", "BLOCK_COMMENT"}
# Order of the expected list: punctuation, keywords, then token classes.
_CLASS_ORDER = ["identifier", "string", "number", "query", "end of input"]
_MAX_LISTED = 8
_NUMBER_BEFORE = re.compile(r"(?<![A-Za-z0-9_.])[+-]?\d+(?:\.\d*)?\Z")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def human_name(terminal: str) -> str:
    if terminal in _PUNCTUATION:
        return _PUNCTUATION[terminal]
    if terminal in _CLASSES:
        return _CLASSES[terminal]
    if terminal.startswith("__ANON") or not terminal.isupper():
        return terminal.lower()
    return terminal  # a keyword terminal is named after its keyword


def _sort_key(name: str) -> tuple[int, int, str]:
    if name.startswith("'"):
        return (0, 0, name)
    if name in _CLASS_ORDER:
        return (2, _CLASS_ORDER.index(name), name)
    return (1, 0, name)


def _is_keyword(terminal: str) -> bool:
    return terminal.isupper() and terminal not in _PUNCTUATION and terminal not in _CLASSES and (
        not terminal.startswith("_")
    )


def _accepts(ip: Any) -> set[str]:
    """Terminals the parser can take next (like ``InteractiveParser.accepts`` without deep
    copies of everything parsed so far)."""
    from lark import Token
    from lark.exceptions import UnexpectedToken

    out: set[str] = set()
    for terminal in ip.choices():
        if not terminal.isupper() and terminal != "$END":
            continue
        probe = ip.copy(deepcopy_values=False)
        try:
            probe.parser_state.feed_token(Token(terminal, ""), terminal == "$END")
        except UnexpectedToken:
            continue
        except Exception:  # an odd probe must never break error reporting
            continue
        out.add(terminal)
    return out


# Rules through which a keyword is read as a name (see grammar/icesql.lark).
_NAME_RULES = frozenset({"ident", "ident_noconn", "_word", "_keyword"})


def _only_a_name(ip: Any, terminal: str) -> bool:
    """Whether ``terminal`` can only be read as an identifier (or option word) here: after
    shifting it, every action of the parser is a reduction by a name rule."""
    from lark import Token
    from lark.parsers.lalr_analysis import Shift

    probe = ip.copy(deepcopy_values=False)
    try:
        probe.feed_token(Token(terminal, terminal.lower()))
    except Exception:
        return False
    state = probe.parser_state.position
    actions = probe.parser_state.parse_conf.parse_table.states[state]
    for action, arg in actions.values():
        if action is Shift or arg.origin.name not in _NAME_RULES:
            return False
    return True


def _expected_terminals(ip: InteractiveParser | None, fallback: Iterable[str]) -> set[str]:
    terminals = set()
    if ip is not None:
        try:
            terminals = _accepts(ip)
        except Exception:
            terminals = set()
    if not terminals:
        terminals = set(fallback)
    terminals -= _IGNORED
    if ip is not None and "IDENT" in terminals:
        # A keyword that leads to the same parser state as a plain identifier is only an
        # identifier here: list it as "identifier", not as a keyword.
        for terminal in [t for t in terminals if _is_keyword(t)]:
            if _only_a_name(ip, terminal):
                terminals.discard(terminal)
    return terminals


def human_expected(ip: InteractiveParser | None, fallback: Iterable[str] | None) -> list[str]:
    """Sorted human names of what the parser accepts next."""
    names = {human_name(t) for t in _expected_terminals(ip, fallback or ())}
    return sorted(names, key=_sort_key)


def _join(names: list[str], limit: int = _MAX_LISTED) -> str:
    if len(names) > limit:
        names = names[: limit - 1] + ["..."]
        return ", ".join(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


def _describe_token(terminal: str, text: str, secret: bool = False) -> str:
    if terminal == "$END":
        return "end of input"
    if secret:
        # what the user wrote there may be a secret's value: say what it is, not what it says
        return {"STRING": "a string", "QIDENT": "a quoted identifier", "NUMBER": "a number"}.get(
            terminal, "a word"
        )
    shown = text if len(text) <= 30 else text[:27] + "..."
    shown = shown.replace("\n", " ")
    if terminal == "STRING":
        return shown
    return f"'{shown}'"


# --------------------------------------------------------------------------- the context


def _statement_start(text: str, pos: int) -> int:
    """Offset where the statement containing ``pos`` starts (after the previous ``;``)."""
    start = 0
    for tok in tokens(text, 0, pos):
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            start = tok.end
    return start


def _statement_words(text: str, start: int, pos: int) -> list[str]:
    return [t.upper for t in tokens(text, start, pos) if t.kind is TokenKind.WORD]


def _unclosed_paren(text: str, start: int, pos: int) -> int | None:
    stack: list[int] = []
    for tok in tokens(text, start, pos):
        if tok.kind is TokenKind.PUNCT:
            if tok.text == "(":
                stack.append(tok.start)
            elif tok.text == ")" and stack:
                stack.pop()
    return stack[-1] if stack else None


def _hint(
    text: str,
    pos: int,
    found_terminal: str,
    found_text: str,
    expected: list[str],
    ip: InteractiveParser | None,
    secret: bool = False,
) -> str | None:
    if secret:
        # hints quote what was found; a secret's value is never quoted
        found_text = ""
    stmt_start = _statement_start(text, pos)
    words = _statement_words(text, stmt_start, pos)
    found_word = found_text.upper() if found_terminal in ("IDENT",) or _is_keyword(found_terminal) else None

    if "'|'" == f"'{found_text}'":
        return "'|' separates alternatives in the documentation; write one of the values"
    if "CREATE" in expected and "SHOW" in expected and not words and found_terminal != "$END":
        if found_word in ("VALUES", "TABLE", "FROM"):
            return "a query starts with SELECT (or WITH): SELECT * FROM relation"
        if found_word in ("INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT"):
            return "icesql writes Iceberg tables through sinks: CREATE SINK name FROM relation TO ICEBERG CATALOG ..."
        close = _closest(found_word or "", STATEMENT_KEYWORDS)
        return f"did you mean {close}?" if close else None
    if words[:1] in (["CREATE"], ["SHOW"], ["DROP"]) and len(words) == 1 and found_word == "TABLE":
        return "Iceberg tables are created by CREATE SINK ... TO ICEBERG CATALOG cat NAMESPACE ns TABLE t"
    if found_terminal == "QIDENT" and "string" in expected:
        return "string literals use single quotes ('...'); double quotes make an identifier"
    if "number" in expected and "string" not in expected and found_terminal == "STRING":
        return "numbers are written without quotes"
    if "'='" in expected and found_terminal in ("STRING", "NUMBER", "QIDENT"):
        return "options are written NAME = value"
    if found_terminal == "STRING" and "identifier" in expected and "string" not in expected:
        return "names are written bare or in double quotes (\"Name\"); single quotes make a string"
    if words[:2] == ["CREATE", "SECRET"] and "AS" in expected:
        return "write CREATE SECRET name AS 'value'"
    if found_terminal == "IDENT" and not secret:
        number = _NUMBER_BEFORE.search(text, 0, pos)
        if number is not None:
            return f"quote sizes and durations: '{number.group()}{found_text}'"
    if found_terminal == "NUMBER" and found_text and not _NUMBER.fullmatch(found_text) and "identifier" in expected:
        return f'a name cannot start with a digit; quote it: "{found_text}"'
    keywords = [e for e in expected if _is_keyword(e)]
    storage = storage_named(found_word) if found_word else None
    if storage is not None and storage.keyword in keywords:
        # `TO S3`, `USING ADLS CONNECTION`: the storage called by another name
        return f"did you mean {storage.keyword}? (a connection TO {storage.keyword} holds {storage.store} credentials)"
    if found_word and keywords:
        close = _closest(found_word, keywords)
        if close and edit_distance(found_word, close) <= 2:
            return f"did you mean {close}?"
        # A keyword glued to the next word (`SINKorders`, not `sinks_all`): the space is missing.
        glued = (
            k for k in keywords if found_word.isalpha() and found_word.startswith(k) and found_word != k and not secret
        )
        prefix = max(glued, key=len, default="")
        if prefix:
            return f"did you mean {found_text[: len(prefix)]} {found_text[len(prefix) :]}?"
        if close:
            return f"did you mean {close}?"
    if found_terminal in ("$END", "_SEMI") and "')'" in expected:
        open_at = _unclosed_paren(text, stmt_start, pos)
        if open_at is not None:
            line, col = line_col(text, open_at)
            return f"the '(' at line {line}, column {col} is never closed"
    if found_word in _statement_keyword_terminals() and "';'" in expected and words:
        return "end each statement with ';'"
    return None


def _closest(word: str, candidates: Iterable[str]) -> str | None:
    """The keyword ``word`` was most likely meant to be, if one is close: among the similar
    ones, the fewest edits away, then one of the same length (``SINKZ`` is SINKS mistyped
    rather than SINK with a letter too many), then the most similar."""
    candidates = list(candidates)
    if not word or not candidates:
        return None
    close = difflib.get_close_matches(word, candidates, n=len(candidates), cutoff=0.6)
    if not close:
        return None
    return min(close, key=lambda c: (edit_distance(word, c), len(c) != len(word), close.index(c)))


def _statement_keyword_terminals() -> set[str]:
    return set(STATEMENT_KEYWORDS) | {"DESC"}


# --------------------------------------------------------------------------- entry point


def diagnose(
    exc: BaseException, text: str, filename: str | None = None, *, secret: SecretTest | None = None
) -> ParseError:
    """Turn any exception raised while parsing ``text`` into a :class:`ParseError`.

    ``secret(start, end)`` tells whether a piece of the text touches a secret's value; such a
    piece is described ("found a string"), never quoted, in the message and the hint.
    """
    try:
        return _diagnose(exc, text, filename, secret or _no_secret)
    except Exception:  # diagnostics must never be the thing that crashes
        return ParseError("syntax error", source=text, filename=filename)


def _diagnose(exc: BaseException, text: str, filename: str | None, secret: SecretTest) -> ParseError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    if isinstance(exc, ParseError):
        exc.with_source(text, filename)
        return exc
    ip: InteractiveParser | None = getattr(exc, "interactive_parser", None)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        terminal = token.type
        if terminal == "QUERY":
            # Only the root lexer's catch-all matched: report the character, as a lexer would.
            return _unexpected_character(text, token.start_pos or 0, ip, set(exc.expected), filename, secret)
        value = str(token)
        if terminal == "$END":
            pos = token.end_pos if token.end_pos is not None else len(text)
            pos = len(text) if not value and token.start_pos is None else pos
            span = Span.at(text, pos, pos)
        else:
            pos = token.start_pos or 0
            end = token.end_pos if token.end_pos is not None else pos + len(value)
            glued = _WORD.match(text, end) if terminal == "NUMBER" else None
            if glued is not None:
                # A number glued to a word (`1sink`): show the whole word, as the user sees it.
                end = glued.end()
                value = text[pos:end]
            span = Span.at(text, pos, end)
        expected = human_expected(ip, exc.expected)
        hidden = terminal != "$END" and secret(span.start, span.end)
        found = _describe_token(terminal, value, hidden)
        if "CREATE" in expected and "SHOW" in expected:
            # At the start of a statement: list the statements, not every token.
            expected = list(STATEMENT_KEYWORDS)
            message = f"expected a statement ({_join(expected, len(STATEMENT_KEYWORDS))}), found {found}"
            hint = _hint(text, pos, terminal, value, expected, ip, hidden)
            return ParseError(message, span, hint, text, filename, tuple(expected))
        if terminal == "$END":
            message = "unexpected end of input"
            if expected:
                message += f", expected {_join(expected)}"
        elif expected:
            message = f"expected {_join(expected)}, found {found}"
        else:
            message = f"unexpected {found}"
        hint = _hint(text, pos, terminal, value, expected, ip, hidden)
        return ParseError(message, span, hint, text, filename, tuple(expected))
    if isinstance(exc, UnexpectedCharacters):
        return _unexpected_character(
            text, exc.pos_in_stream or 0, ip, set(exc.allowed or ()), filename, secret
        )
    if isinstance(exc, UnexpectedEOF):
        expected = human_expected(ip, exc.expected)
        span = Span.at(text, len(text), len(text))
        message = "unexpected end of input" + (f", expected {_join(expected)}" if expected else "")
        return ParseError(message, span, None, text, filename, tuple(expected))
    return ParseError("syntax error", Span.at(text, 0, 0) if text else None, None, text, filename)


def _unexpected_character(
    text: str,
    pos: int,
    ip: InteractiveParser | None,
    allowed: set[str],
    filename: str | None,
    secret: SecretTest = _no_secret,
) -> ParseError:
    pos = max(0, min(pos, len(text)))
    char = text[pos : pos + 1]
    expected = human_expected(ip, allowed)
    line_end = text.find("\n", pos)
    line_end = len(text) if line_end < 0 else line_end
    if char == "'":
        return ParseError(
            "unterminated string literal",
            Span.at(text, pos, max(pos + 1, line_end)),
            "close the string with ' (write '' for a quote inside it)",
            text,
            filename,
            tuple(expected),
        )
    if char == '"':
        return ParseError(
            "unterminated quoted identifier",
            Span.at(text, pos, max(pos + 1, line_end)),
            'close the identifier with " (write "" for a quote inside it)',
            text,
            filename,
            tuple(expected),
        )
    if char == "`":
        return ParseError(
            "unexpected character '`'" + (f", expected {_join(expected)}" if expected else ""),
            Span.at(text, pos, pos + 1),
            'icesql quotes identifiers with double quotes: "Name" (backticks only inside a view\'s Spark SQL)',
            text,
            filename,
            tuple(expected),
        )
    if text.startswith("/*", pos):
        return ParseError(
            "unterminated comment",
            Span.at(text, pos, pos + 2),
            "close the comment with */",
            text,
            filename,
            tuple(expected),
        )
    shown = repr(char) if char.isprintable() and char != "\\" else f"U+{ord(char):04X}" if char else "''"
    if char.isprintable() and char not in "'\\":
        shown = f"'{char}'"
    hidden = bool(char) and secret(pos, pos + 1)
    message = "unexpected character" if hidden else f"unexpected character {shown}"
    if "CREATE" in expected and "SHOW" in expected:
        expected = list(STATEMENT_KEYWORDS)
        message += f", expected a statement ({_join(expected, len(STATEMENT_KEYWORDS))})"
    elif expected:
        message += f", expected {_join(expected)}"
    if char.isalpha() and not char.isascii() and not hidden:
        # ſ, ı, K (Kelvin) fold to ASCII letters, but unquoted words are ASCII only
        hint: str | None = f'names with letters outside A-Z are written in double quotes: "{_word_at(text, pos)}"'
    else:
        hint = _hint(text, pos, "CHAR", char, expected, ip, hidden)

    return ParseError(message, Span.at(text, pos, pos + 1), hint, text, filename, tuple(expected))


def _word_at(text: str, pos: int) -> str:
    end = pos
    while end < len(text) and (text[end].isalnum() or text[end] == "_") and end - pos < 40:
        end += 1
    start = pos
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_") and pos - start < 40:
        start -= 1
    return text[start:end].replace('"', '""')


__all__ = ["STATEMENT_KEYWORDS", "diagnose", "human_expected", "human_name"]
