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

import hashlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from icesql.errors import ParseError, Span
from icesql.syntax import ast

if TYPE_CHECKING:
    from lark import Lark
    from lark.parsers.lalr_interactive_parser import InteractiveParser

GRAMMAR_FILE = "icesql.lark"


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


def grammar_text() -> str:
    """The grammar source, from the installed ``icesql.grammar`` package or the source tree."""
    try:
        from importlib.resources import files

        return files("icesql.grammar").joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        path = Path(__file__).resolve().parents[2] / "grammar" / GRAMMAR_FILE
        return path.read_text(encoding="utf-8")


def _cache_dir() -> Path | None:
    from icesql import settings

    explicit = settings.CACHE_DIR.raw()
    if explicit == "":
        return None  # ICESQL_CACHE_DIR= turns the cache off
    if explicit:
        base = Path(explicit)
    else:
        xdg = settings.XDG_CACHE_HOME.get()
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "icesql"
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
    text with secret literals masked, so the quoted line never shows a secret's value.
    """
    try:
        return _parse(text, filename)
    except ParseError as exc:
        from icesql.syntax.redaction import mask_secret_literals

        exc.source = mask_secret_literals(text)
        raise


def _parse(text: str, filename: str | None = None) -> list[ast.Statement]:
    """Parse a script into statements; spans point into ``text``.

    Raises :class:`ParseError` (and nothing else) for any invalid input.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() needs a str, not {type(text).__name__}")
    from lark.exceptions import LarkError, VisitError

    try:
        try:
            return _fast_parse(text)
        except _NotFast:
            pass
        return cast("list[ast.Statement]", get_parser().parse(text))
    except ParseError as exc:
        # Raised by an ast callback; a syntax error elsewhere in the script comes first.
        _raise_syntax_error(text, filename)
        exc.with_source(text, filename)
        raise exc from None
    except VisitError as exc:
        orig = exc.orig_exc
        if isinstance(orig, ParseError):
            orig.with_source(text, filename)
            raise orig from None
        raise _internal_error(text, filename, orig) from None
    except (LarkError, RecursionError):
        _raise_syntax_error(text, filename)
        raise _internal_error(text, filename, None) from None


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


_SKIP = re.compile(r"(?:\s+|--[^\n]*|/\*[\s\S]*?\*/)*")
_TOKEN = re.compile(
    r"""(?P<IDENT>[A-Za-z_][A-Za-z0-9_]*)|(?P<STRING>'(?:[^']|'')*')|(?P<QIDENT>"(?:[^"]|"")*")"""
    r"""|(?P<NUMBER>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"""
    r"""|(?P<LPAR>\()|(?P<RPAR>\))|(?P<COMMA>,)|(?P<EQ>=)|(?P<DOT>\.)|(?P<_SEMI>;)"""
)


class _FastTables:
    def __init__(self, parser: Lark) -> None:
        import re as re_module

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
        self.query = re_module.compile(terminals["QUERY"].pattern.to_regexp())


_fast: _FastTables | None = None


def _fast_parse(text: str) -> list[ast.Statement]:
    global _fast
    tables = _fast
    if tables is None:
        tables = _fast = _FastTables(get_parser())
    states = tables.states
    keywords = tables.keywords
    make_token = tables.token
    end_state = tables.end
    skip = _SKIP.match
    next_token = _TOKEN.match
    query = tables.query.match
    state_stack = [tables.start]
    value_stack: list[Any] = []
    pos = 0
    n = len(text)
    line = 1
    line_start = 0  # offset of the first character of the current line

    while True:
        m = skip(text, pos)
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
                m = query(text, pos)
                kind = "QUERY"
            if m is None:
                m = next_token(text, pos)
                if m is None:
                    raise _NotFast
                kind = m.lastgroup  # type: ignore[assignment]
            end = m.end()
            value = m.group()
            if kind == "IDENT":
                keyword = keywords.get(value.upper())
                if keyword is not None and keyword in actions:
                    kind = keyword
            newlines = text.count("\n", pos, end) if kind in ("STRING", "QIDENT", "QUERY") else 0
            if newlines:
                end_line = line + newlines
                end_line_start = text.rfind("\n", pos, end) + 1
            else:
                end_line = line
                end_line_start = line_start
            tok = make_token(kind, value, pos, line, pos - line_start + 1, end_line, end - end_line_start + 1, end)
            line = end_line
            line_start = end_line_start
            pos = end

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
                return cast("list[ast.Statement]", value_stack[-1])


def _raise_syntax_error(text: str, filename: str | None) -> None:
    """Re-parse with the plain parser and raise the diagnosed syntax error, if there is one."""
    from lark.exceptions import LarkError

    from icesql.syntax.diagnostics import diagnose

    try:
        get_parser(with_transformer=False).parse(text)
    except LarkError as exc:
        raise diagnose(exc, text, filename) from None
    except RecursionError:
        raise ParseError("statement too complex to parse", source=text, filename=filename) from None


def _internal_error(text: str, filename: str | None, exc: BaseException | None) -> ParseError:
    detail = f" ({type(exc).__name__})" if exc is not None else ""
    return ParseError(f"could not parse the input{detail}", source=text, filename=filename)


def parse_one(text: str, filename: str | None = None) -> ast.Statement:
    """Parse text that must hold exactly one statement."""
    stmts = parse(text, filename)
    if len(stmts) == 1:
        return stmts[0]
    if not stmts:
        end = len(text.rstrip())
        raise ParseError(
            "expected a statement, found end of input",
            span=Span.at(text, end, end),
            source=text,
            filename=filename,
            expected=("statement",),
        )
    extra = stmts[1]
    raise ParseError(
        f"expected exactly one statement, found {len(stmts)}",
        span=extra.span,
        hint="run the statements one by one, or parse them with parse()",
        source=text,
        filename=filename,
    )


# --------------------------------------------------------------------------- splitting

# One lexical piece: blank space, a comment, a quoted string or identifier, a word, a `;`, or
# one other character; ``open`` is an unterminated quote or block comment (it runs to the end).
# Strings take backslash escapes only inside CREATE VIEW (where the text is Spark SQL).
_PIECES_ICESQL = re.compile(
    r"""(?P<blank>\s+)|(?P<comment>--[^\n]*|/\*[\s\S]*?\*/)"""
    r"""|(?P<quoted>'(?:[^']|'')*'|"(?:[^"]|"")*")"""
    r"""|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<semi>;)|(?P<open>['"][\s\S]*|/\*[\s\S]*)|(?P<other>[\s\S])"""
)
_PIECES_SPARK = re.compile(
    r"""(?P<blank>\s+)|(?P<comment>--[^\n]*|/\*[\s\S]*?\*/)"""
    r"""|(?P<quoted>'(?:[^'\\]|\\[\s\S])*'|"(?:[^"\\]|\\[\s\S])*"|`[^`]*`)"""
    r"""|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<semi>;)|(?P<open>['"`][\s\S]*|/\*[\s\S]*)|(?P<other>[\s\S])"""
)


def _pieces(text: str) -> Iterator[re.Match[str]]:
    """Lexical pieces of a script, switching to Spark string rules inside CREATE VIEW."""
    pos = 0
    n = len(text)
    pattern = _PIECES_ICESQL
    words: list[str] = []
    while pos < n:
        m = pattern.match(text, pos)
        assert m is not None
        pos = m.end()
        kind = m.lastgroup
        if kind == "semi":
            pattern = _PIECES_ICESQL
            words = []
        elif kind == "word" and len(words) < 2:
            words.append(m.group().lower())
            if words == ["create", "view"]:
                pattern = _PIECES_SPARK
        yield m


def split_statements(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each statement in ``text``.

    Statements end at a ``;`` outside quotes and comments (the ``;`` itself is left out);
    leading and trailing blank space and comments are trimmed; empty statements (``;;``,
    comments only) are skipped. The last statement may lack its ``;``. An unterminated quote
    or comment runs to the end of the text, as it does for the parser.
    """
    out: list[tuple[int, int]] = []
    start = -1
    end = -1
    for m in _pieces(text):
        kind = m.lastgroup
        if kind == "semi":
            if start >= 0:
                out.append((start, end))
            start = -1
        elif kind not in ("blank", "comment"):
            if start < 0:
                start = m.start()
            end = m.end()
    if start >= 0:
        out.append((start, end))
    return out


def is_complete(text: str) -> bool:
    """Whether ``text`` ends a statement: a ``;`` outside quotes and comments, then only
    blank space or comments (what a shell needs to decide that Enter submits)."""
    complete = False
    for m in _pieces(text):
        kind = m.lastgroup
        if kind == "semi":
            complete = True
        elif kind == "open":
            return False
        elif kind not in ("blank", "comment"):
            complete = False
    return complete


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
        if any(m.lastgroup == "semi" for m in _pieces(text[last_end:])):
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
    "expected_tokens",
    "get_parser",
    "grammar_text",
    "is_complete",
    "parse",
    "parse_one",
    "split_statements",
]
