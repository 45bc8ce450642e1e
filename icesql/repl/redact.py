"""Blank out secret values in SQL text before it is written anywhere (history, echoes).

Works on raw, possibly invalid text (history keeps what the user typed, errors included), so
it is lexical: the value of ``CREATE SECRET`` / ``ALTER SECRET ... AS``, and a string written
for any option whose name mentions a secret, a password, a token or a credential
(``SECRET ACCESS KEY = 'plain'`` is accepted with a warning, so it must not reach the disk
either). When in doubt, redact.
"""

from __future__ import annotations

from icesql.repl.scan import Token, TokenKind, significant, statement_ranges, tokenize

REDACTED = "'<redacted>'"
_SECRET_WORDS = ("SECRET", "PASSWORD", "TOKEN", "CREDENTIAL")
_VALUE_KINDS = (TokenKind.STRING, TokenKind.QUOTED, TokenKind.NUMBER)


def _is_secret_option(name_tokens: list[Token]) -> bool:
    if not name_tokens:
        return False
    if len(name_tokens) == 1 and name_tokens[0].kind in (TokenKind.STRING, TokenKind.QUOTED):
        key = name_tokens[0].text.upper()
        return any(w in key for w in _SECRET_WORDS) or "KEY" in key and "ACCESS" in key
    return any(t.upper in _SECRET_WORDS or t.upper.endswith("PASSWORD") for t in name_tokens)


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Offsets of every secret value in ``text``."""
    spans: list[tuple[int, int]] = []
    for start, end in statement_ranges(text):
        toks = [
            Token(t.kind, t.text, t.start + start, t.end + start, t.open)
            for t in significant(tokenize(text[start:end]))
        ]
        words = [t.upper for t in toks[:2]]
        if words in (["CREATE", "SECRET"], ["ALTER", "SECRET"]):
            for i, t in enumerate(toks):
                if t.kind is TokenKind.WORD and t.upper == "AS":
                    rest = toks[i + 1 :]
                    if rest and rest[0].kind in _VALUE_KINDS:
                        spans.append((rest[0].start, rest[0].end))
                    elif rest:  # something odd after AS: redact the rest of the statement
                        spans.append((rest[0].start, end))
                    break
        for i, t in enumerate(toks):
            if not (t.kind is TokenKind.PUNCT and t.text == "="):
                continue
            j = i - 1
            name: list[Token] = []
            while j >= 0 and toks[j].kind in (TokenKind.WORD, TokenKind.STRING, TokenKind.QUOTED):
                name.insert(0, toks[j])
                if toks[j].kind is not TokenKind.WORD:
                    break
                j -= 1
            if i + 1 < len(toks) and toks[i + 1].kind in _VALUE_KINDS and _is_secret_option(name):
                spans.append((toks[i + 1].start, toks[i + 1].end))
    return sorted(set(spans))


def redact_secrets(text: str) -> str:
    """``text`` with every secret value replaced by ``'<redacted>'``."""
    out: list[str] = []
    pos = 0
    for start, end in secret_spans(text):
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)
