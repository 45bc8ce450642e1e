"""Text to ast: the Lark LALR parser, loaded once, plus the statement splitter.

Two parsers are built from ``grammar/icesql.lark`` on first use (never at import time):

* the fast one runs :class:`~icesql.syntax.transformer.AstBuilder` inside the LALR parser, so
  valid text goes straight to ast nodes without a parse tree;
* a plain one, used only after a failure and by :func:`expected_tokens`, whose interactive
  parser can be probed without running ast callbacks.

The analysed grammar is pickled into the user's cache directory (``ICESQL_CACHE_DIR``, else
``$XDG_CACHE_HOME/icesql``, else ``~/.cache/icesql``), keyed by the grammar text and the Lark
version, so later processes load it in milliseconds.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from icesql.errors import ParseError, Span
from icesql.syntax import ast
from icesql.syntax.grammar_file import GRAMMAR_FILE, grammar_text, keywords
from icesql.syntax.lexer import QUERY_RE, SKIP_RE, TOKEN_RE, TokenKind, is_complete, split_statements, tokens

if TYPE_CHECKING:
    from lark import Lark
    from lark.parsers.lalr_interactive_parser import InteractiveParser


class _WholeWords:
    """Lark postlexer that makes the contextual lexer try IDENT in every parser state.

    Keywords are case-insensitive string terminals. In a state where IDENT is not acceptable,
    Lark's contextual lexer would match a keyword as the prefix of a longer word (``SINKK`` as
    SINK then K). With IDENT always tried, Lark's keyword/IDENT collision handling applies
    everywhere: a word is matched whole by IDENT and becomes a keyword only if all of it equals
    a keyword the state accepts; otherwise it stays an IDENT, which the parser rejects with a
    normal "expected ..., found 'SINKK'" error. The token stream itself is left untouched.
    """

    always_accept = ("IDENT",)

    def process(self, stream: Iterator[Any]) -> Iterator[Any]:
        return stream

    def __repr__(self) -> str:  # stable: part of the grammar cache key
        return f"{type(self).__name__}{self.always_accept}"


_LARK_OPTIONS: dict[str, Any] = {
    "parser": "lalr",
    "lexer": "contextual",
    "maybe_placeholders": False,
    "propagate_positions": False,
    "postlex": _WholeWords(),
}

_lock = threading.Lock()
_parsers: dict[str, Lark] = {}


def _cache_dir() -> Path | None:
    from icesql import settings

    explicit = settings.CACHE_DIR.raw()
    if explicit == "":
        return None  # ICESQL_CACHE_DIR= turns the cache off
    if explicit:
        base = Path(explicit)
    else:
        base = Path(settings.user_cache_dir())
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return base if os.access(base, os.W_OK) else None


def _build(with_transformer: bool) -> Lark:
    import lark

    from icesql.syntax.transformer import AstBuilder

    text = grammar_text()
    digest = hashlib.sha256(f"{lark.__version__}\0{sorted(_LARK_OPTIONS.items())}\0{text}".encode()).hexdigest()
    cache_dir = _cache_dir()
    cache_file = cache_dir / f"grammar-{digest[:24]}.pickle" if cache_dir else None
    extra: dict[str, Any] = {"transformer": AstBuilder()} if with_transformer else {}
    if cache_file is not None and cache_file.exists():
        try:
            with cache_file.open("rb") as f:
                # Lark.load() takes no options; _load() is what Lark's own cache uses.
                inst = lark.Lark.__new__(lark.Lark)
                return inst._load(f, postlex=_LARK_OPTIONS["postlex"], **extra)
        except Exception:  # a stale or truncated cache: rebuild it below
            pass
    plain = lark.Lark(text, **_LARK_OPTIONS)
    if cache_file is not None:
        tmp = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("wb") as f:
                plain.save(f, exclude_options=("postlex",))  # passed again by _load()
            os.replace(tmp, cache_file)  # atomic: a concurrent reader never sees half a file
        except OSError:
            tmp.unlink(missing_ok=True)
    if not with_transformer:
        return plain
    return lark.Lark(text, **_LARK_OPTIONS, **extra)


def get_parser(with_transformer: bool = True) -> Lark:
    """The shared Lark instance (built or loaded from the cache on first call)."""
    key = "ast" if with_transformer else "plain"
    parser = _parsers.get(key)
    if parser is None:
        with _lock:
            parser = _parsers.get(key)
            if parser is None:
                parser = _build(with_transformer)
                _parsers[key] = parser
    return parser


# --------------------------------------------------------------------------- parsing


def parse(text: str, filename: str | None = None) -> list[ast.Statement]:
    """Parse a script into statements; spans point into ``text``.

    Raises :class:`ParseError` (and nothing else) for any invalid input; its source is the
    text with secret values masked, and its message and hint never quote one, so a rendered
    error never shows a secret's value.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() needs a str, not {type(text).__name__}")
    return parse_range(text, 0, len(text), filename=filename)


def parse_range(
    text: str,
    start: int,
    end: int,
    *,
    line: int = 1,
    line_start: int = 0,
    filename: str | None = None,
) -> list[ast.Statement]:
    """Parse ``text[start:end]`` alone, with spans (and errors) located in the whole ``text``.

    ``line`` is the line number at ``start`` and ``line_start`` the offset where that line
    begins, so that a caller walking a script statement by statement never counts lines from
    the top again (``Session.check`` stays linear in the size of the script).
    """
    try:
        _check_unicode(text, start, end)
        return _parse_statements(text, start, end, line, line_start)
    except ParseError as exc:
        raise finish_error(exc, text, filename) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_unicode(text: str, start: int, end: int) -> None:
    """A lone surrogate is not text (bytes that were not UTF-8, smuggled through argv)."""
    m = _SURROGATE.search(text, start, end)
    if m is not None:
        raise ParseError(
            f"invalid character U+{ord(m.group()):04X}: the text is not valid Unicode",
            span=Span.at(text, m.start(), m.end()),
            hint="write the script in UTF-8",
        )


def _lark_parse(text: str, start: int, end: int, line: int, line_start: int) -> list[ast.Statement]:
    """The Lark path, on ``text[start:end]`` padded so that Lark counts lines and columns as
    in the whole text; offsets are shifted back afterwards."""
    if start == 0 and end == len(text):
        piece, delta = text, 0
    else:
        prefix = "\n" * (line - 1) + " " * (start - line_start)
        piece, delta = prefix + text[start:end], start - len(prefix)
    whole: list[Callable[[int, int], bool]] = []

    def secret(a: int, b: int) -> bool:
        # whether a piece of the statement touches a secret of the whole text (a statement
        # alone cannot know it follows a CREATE SECRET whose value it holds)
        if not whole:
            whole.append(_secret_test(text))
        return whole[0](a + delta, b + delta)

    try:
        stmts = _lark_parse_text(piece, secret)
    except ParseError as exc:
        if delta and exc.span is not None:
            exc.span = _shift_span(exc.span, delta)
        exc.source = None
        raise
    return [cast("ast.Statement", _shift(s, delta)) for s in stmts] if delta else stmts


def _lark_parse_text(text: str, secret: Callable[[int, int], bool]) -> list[ast.Statement]:
    from lark.exceptions import LarkError, VisitError

    try:
        return cast("list[ast.Statement]", get_parser().parse(text))
    except ParseError as exc:
        # Raised by an ast callback; a syntax error elsewhere in the script comes first.
        _raise_syntax_error(text, secret)
        raise exc from None
    except VisitError as exc:
        orig = exc.orig_exc
        if isinstance(orig, ParseError):
            raise orig from None
        raise _internal_error(orig) from None
    except (LarkError, RecursionError):
        _raise_syntax_error(text, secret)
        raise _internal_error(None) from None


def _shift_span(span: Span, delta: int) -> Span:
    return dataclasses.replace(span, start=span.start + delta, end=span.end + delta)


def _shift(node: Any, delta: int) -> Any:
    """``node`` with every span's offsets moved by ``delta`` (lines and columns are right)."""
    if isinstance(node, tuple):
        return tuple(_shift(x, delta) for x in node)
    if not isinstance(node, ast.Node):
        return node
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Span):
            changes[f.name] = _shift_span(value, delta)
        elif isinstance(value, ast.Node | tuple):
            changes[f.name] = _shift(value, delta)
    return dataclasses.replace(node, **changes)


def finish_error(exc: ParseError, text: str, filename: str | None) -> ParseError:
    """Give a parse error its source (secret values masked) and file name, and make sure its
    message and hint quote no secret value."""
    from icesql.syntax.redaction import secrets_of_text

    secrets, masked = secrets_of_text(text)
    exc.source = masked
    if filename is not None and exc.filename is None:
        exc.filename = filename
    near = secrets
    if exc.span is not None:
        lo, hi = exc.span.start - 4096, exc.span.end + 4096
        near = [s for s in secrets[bisect.bisect_left([s.end for s in secrets], lo) :] if s.start <= hi][:64]
    for secret in near:
        raw = text[secret.start : secret.end]
        for piece in {raw, raw[:27]}:
            if len(piece) >= 4:
                exc.message = exc.message.replace(piece, "****")
                if exc.hint:
                    exc.hint = exc.hint.replace(piece, "****")
    return exc


# --------------------------------------------------------------------------- fast path
#
# Lark's LALR driver and contextual lexer cost about 30 us per token in pure Python. Valid
# statements take this lean path instead: one master regex for tokens, keywords resolved the
# way Lark's contextual lexer resolves them (a word is always read whole, as `_WholeWords`
# makes Lark do, and is a keyword only where the parse table accepts that keyword; any other
# word is an IDENT, and falls back to Lark where no name may stand), and a shift/reduce loop
# over Lark's own parse table calling Lark's own rule callbacks (so the ast is built by
# exactly the same code). Anything unusual (a token the table rejects, a character no token
# matches) abandons the fast path and the text is parsed again by Lark itself, which then
# produces the result or the diagnosed error.


class _NotFast(Exception):
    pass


class _FastTables:
    def __init__(self, parser: Lark) -> None:
        from lark import Token
        from lark.parsers.lalr_analysis import Shift

        lalr = parser.parser.parser.parser  # ParsingFrontend -> LALR_Parser -> _Parser
        callbacks: dict[Any, Any] = lalr.callbacks
        # The parse table with each action pre-digested: (True, next state) for a shift (or a
        # goto), (False, (rule size, rule callback, rule name)) for a reduce, so the hot loop
        # does no attribute look-ups or Rule hashing per reduction.
        self.states: dict[int, dict[str, tuple[bool, Any]]] = {
            state: {
                symbol: (True, arg)
                if action is Shift
                else (False, (len(arg.expansion), callbacks[arg], arg.origin.name))
                for symbol, (action, arg) in actions.items()
            }
            for state, actions in lalr.parse_table.states.items()
        }
        self.start = lalr.parse_table.start_states["start"]
        self.end = lalr.parse_table.end_states["start"]
        self.token = Token
        terminals = {t.name: t for t in parser.terminals}
        self.keywords = {
            t.pattern.value.upper(): name
            for name, t in terminals.items()
            if t.pattern.type == "str" and t.pattern.value.isalpha()
        }


_fast: _FastTables | None = None


def _fast_parse(
    text: str, start: int = 0, n: int | None = None, line: int = 1, line_start: int = 0
) -> list[ast.Statement]:
    """Parse ``text[start:n]`` with the lexer's patterns over Lark's own parse table; raises
    ``_NotFast`` for anything it does not handle."""
    out: list[ast.Statement] = []
    pos: int | None = start
    end = len(text) if n is None else n
    while pos is not None:
        stmts, pos, line, line_start = _fast_statement(text, pos, end, line, line_start)
        out.extend(stmts)
    return out


def _fast_statement(
    text: str, pos: int, n: int, line: int, line_start: int
) -> tuple[list[ast.Statement], int | None, int, int]:
    """Parse one statement from ``pos``, up to its ``;`` (consumed) or the end of the text.

    Returns the statements read (none for an empty one), where the next begins (None at the
    end) and the line there. Each statement is parsed on its own, from the start state, as if
    the text ended at its ``;``: Lark's rule for the statement list rebuilds the whole list at
    every statement, which made long scripts quadratic.
    """
    global _fast
    tables = _fast
    if tables is None:
        tables = _fast = _FastTables(get_parser())
    states = tables.states
    keywords = tables.keywords
    make_token = tables.token
    end_state = tables.end
    skip = SKIP_RE.match
    next_token = TOKEN_RE.match
    query = QUERY_RE.match
    state_stack = [tables.start]
    value_stack: list[Any] = []
    after: int | None = None  # where the next statement starts, once this one's ';' is read

    while True:
        m = skip(text, pos, n)
        end = m.end()  # type: ignore[union-attr]
        if end != pos:
            newlines = text.count("\n", pos, end)
            if newlines:
                line += newlines
                line_start = text.rfind("\n", pos, end) + 1
            pos = end
        actions = states[state_stack[-1]]
        if pos >= n:
            kind = "$END"
            tok = make_token("$END", "", pos, line, pos - line_start + 1, line, pos - line_start + 1, pos)
        else:
            m = None
            if "QUERY" in actions:
                m = query(text, pos, n)
                kind = "QUERY"
                if m is not None and m.end() == pos:
                    m = None
            if m is None:
                m = next_token(text, pos, n)
                if m is None:
                    raise _NotFast
                kind = m.lastgroup  # type: ignore[assignment]
            end = m.end()
            if kind == "_SEMI":
                # the statement ends here: finish it as if the text ended
                kind = "$END"
                tok = make_token("$END", "", pos, line, pos - line_start + 1, line, pos - line_start + 1, pos)
                after = end
            else:
                if kind == "IDENT":
                    keyword = keywords.get(m.group().upper())
                    if keyword is not None and keyword in actions:
                        kind = keyword
                newlines = text.count("\n", pos, end) if kind in ("STRING", "QIDENT", "QUERY") else 0
                if newlines:
                    end_line = line + newlines
                    end_line_start = text.rfind("\n", pos, end) + 1
                else:
                    end_line = line
                    end_line_start = line_start
                # the matched text goes straight into the token (a 50 MB literal is copied once)
                tok = make_token(
                    kind, m.group(), pos, line, pos - line_start + 1, end_line, end - end_line_start + 1, end
                )
                line = end_line
                line_start = end_line_start
                pos = end
            del m

        # One LALR step: reduce as long as the table says so, then shift the token.
        while True:
            try:
                is_shift, arg = states[state_stack[-1]][kind]
            except KeyError:
                raise _NotFast from None
            if is_shift:
                state_stack.append(arg)
                value_stack.append(tok)
                break
            size, callback, origin = arg
            if size:
                children = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
            else:
                children = []
            value_stack.append(callback(children))
            state_stack.append(states[state_stack[-1]][origin][1])
            if kind == "$END" and state_stack[-1] == end_state:
                stmts = cast("list[ast.Statement]", value_stack[-1])
                return stmts, after, line, line_start


def _statement_end(text: str, pos: int, n: int) -> tuple[int, int | None]:
    """Where the statement starting at ``pos`` ends (its ``;`` left out), and where the next
    one starts (None at the end of the text)."""
    for tok in tokens(text, pos, n):
        if tok.kind is TokenKind.PUNCT and tok.text == ";":
            return tok.start, tok.end
    return n, None


def _parse_statements(text: str, start: int, n: int, line: int, line_start: int) -> list[ast.Statement]:
    """Statement by statement: the fast path, and Lark for a statement it does not handle."""
    out: list[ast.Statement] = []
    pos: int | None = start
    while pos is not None:
        try:
            stmts, after, next_line, next_line_start = _fast_statement(text, pos, n, line, line_start)
        except _NotFast:
            _, after = _statement_end(text, pos, n)
            # with its ';', so that an error there reads "found ';'"
            stmts = _lark_parse(text, pos, after if after is not None else n, line, line_start)
            next_line, next_line_start = line, line_start
            if after is not None:
                newlines = text.count("\n", pos, after)
                if newlines:
                    next_line += newlines
                    next_line_start = text.rfind("\n", pos, after) + 1
        out.extend(stmts)
        pos, line, line_start = after, next_line, next_line_start
    return out


def _raise_syntax_error(text: str, secret: Callable[[int, int], bool]) -> None:
    """Re-parse with the plain parser and raise the diagnosed syntax error, if there is one."""
    from lark.exceptions import LarkError

    from icesql.syntax.diagnostics import diagnose

    try:
        get_parser(with_transformer=False).parse(text)
    except LarkError as exc:
        raise diagnose(exc, text, secret=secret) from None
    except RecursionError:
        raise ParseError("statement too complex to parse") from None


def _secret_test(text: str) -> Callable[[int, int], bool]:
    from icesql.syntax.redaction import overlap_test, secrets_of_text

    return overlap_test(secrets_of_text(text)[0])


def _internal_error(exc: BaseException | None) -> ParseError:
    detail = f" ({type(exc).__name__})" if exc is not None else ""
    return ParseError(f"could not parse the input{detail}")


def parse_one(text: str, filename: str | None = None) -> ast.Statement:
    """Parse text that must hold exactly one statement."""
    stmts = parse(text, filename)
    if len(stmts) == 1:
        return stmts[0]
    if not stmts:
        end = len(text.rstrip())
        error = ParseError(
            "expected a statement, found end of input",
            span=Span.at(text, end, end),
            expected=("statement",),
        )
    else:
        error = ParseError(
            f"expected exactly one statement, found {len(stmts)}",
            span=stmts[1].span,
            hint="run the statements one by one, or parse them with parse()",
        )
    raise finish_error(error, text, filename)


# --------------------------------------------------------------------------- completion

_PARTIAL_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def expected_tokens(text_before_cursor: str) -> set[str]:
    """What may come next after ``text_before_cursor``, in human names.

    Keywords come upper case (``CREATE``, ``SINK``), other tokens as ``identifier``,
    ``string``, ``number``, ``query``, ``'('``, ``';'``, ``end of input``. A word being typed
    at the very end is ignored, so a completer gets the candidates for that word. Keywords
    that would only be read as an identifier at this point are left out. Invalid text before
    the cursor gives an empty set.
    """
    from lark.exceptions import LarkError

    from icesql.syntax.diagnostics import human_expected

    text = text_before_cursor
    spans = split_statements(text)
    if spans:
        # Only the statement under the cursor matters (earlier ones may even be invalid).
        last_start, last_end = spans[-1]
        tail = text[last_end:]
        if any(t.kind is TokenKind.PUNCT and t.text == ";" for t in tokens(tail)):
            text = ""
        else:
            text = text[last_start:]
    text = _PARTIAL_WORD.sub("", text)
    try:
        ip: InteractiveParser = get_parser(with_transformer=False).parse_interactive(text)
        ip.exhaust_lexer()
    except (LarkError, RecursionError):
        return set()
    return set(human_expected(ip, None))


__all__ = [
    "GRAMMAR_FILE",
    "expected_tokens",
    "keywords",
    "parse_range",
    "get_parser",
    "grammar_text",
    "is_complete",
    "parse",
    "parse_one",
    "split_statements",
]
