"""Option lists parsed generically, then checked against a table per object kind.

As in Materialize's planner: the syntax tree keeps every option as a generic ``NAME = value``
pair; here each object kind has an ``OptionTable`` naming what it allows, under which aliases,
with which kind of value and, where it depends on a discriminator (a catalog type, a source
format), for which values of it. ``collect`` turns a list into typed values, reporting the first
unknown option (with a did-you-mean), duplicate (aliases included) or value of the wrong kind.

The declarations themselves (``OptionSpec``, ``Kind``, one tuple per list) live in
``icesql.syntax.options``: the syntax layer needs them to mask secret values in parse errors
and may not import the analyzer. Whether a value is secret is that module's ``secrecy`` rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from icesql.analyzer.diagnostics import Context, did_you_mean, one_of
from icesql.analyzer.units import (
    DURATION_UNITS_HINT,
    SIZE_UNITS_HINT,
    UnitError,
    check_duration,
    check_size,
    parse_duration,
    parse_size,
)
from icesql.errors import AnalysisError
from icesql.plan import Redacted, SecretName
from icesql.syntax.ast import (
    BoolLit,
    Ident,
    NumberLit,
    Option,
    OptionList,
    SecretRef,
    StringList,
    StringLit,
    Value,
)
from icesql.syntax.options import (
    LISTS,
    SECRET_WORDS,
    Kind,
    OptionSpec,
    Secrecy,
    known_prefix,
    lookup,
    secrecy,
    storage_named,
)

# An integer as written: ASCII digits only ('²' and '٣' are digits to str.isdigit, not to int()),
# no more than a Java long holds.
_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
MAX_INT = 2**63 - 1


@dataclass
class Given:
    spec: OptionSpec
    option: Option
    value: Any  # typed: str, int, bool, SecretName, tuple[(str, str)], float (seconds)


@dataclass
class Collected:
    """The options of one list, by canonical name."""

    given: dict[str, Given] = field(default_factory=dict)

    def __contains__(self, name: str) -> bool:
        return name in self.given

    def node(self, name: str) -> Option:
        return self.given[name].option

    def get(self, name: str) -> Any:
        g = self.given.get(name)
        return None if g is None else g.value

    def get_str(self, name: str) -> str | None:
        v = self.get(name)
        assert v is None or isinstance(v, str)
        return v

    def get_int(self, name: str) -> int | None:
        v = self.get(name)
        assert v is None or isinstance(v, int)
        return v

    def get_bool(self, name: str, default: bool) -> bool:
        v = self.get(name)
        return default if v is None else bool(v)

    def get_float(self, name: str) -> float | None:
        v = self.get(name)
        return None if v is None else float(v)

    def secret(self, name: str) -> SecretName | None:
        v = self.get(name)
        assert v is None or isinstance(v, SecretName)
        return v

    def str_or_secret(self, name: str) -> str | SecretName | None:
        v = self.get(name)
        assert v is None or isinstance(v, str | SecretName)
        return v

    def pairs(self, name: str) -> tuple[tuple[str, str], ...]:
        v = self.get(name)
        return () if v is None else tuple(v)

    def names(self) -> list[str]:
        return list(self.given)


class OptionTable:
    """The options of one list (``list_kind``, a key of ``icesql.syntax.options.LISTS``)."""

    def __init__(self, what: str, list_kind: str) -> None:
        self.what = what  # "AWS CONNECTION", "ICEBERG CATALOG", "sink WITH", ...
        self.list_kind = list_kind
        self.specs: tuple[OptionSpec, ...] = LISTS[list_kind]
        self._by_name: dict[str, OptionSpec] = {n: spec for spec in self.specs for n in spec.all_names}

    def lookup(self, name: str) -> tuple[OptionSpec | None, bool]:
        """(spec, secret_form): ``PASSWORD SECRET = x`` is ``PASSWORD = SECRET x``."""
        return lookup(self.list_kind, name)

    def is_secret_option(self, name: str) -> bool:
        """True when a value under this name must be masked (``secrecy``: unknown names of a
        connection are, to be safe; ``PASSWORD SECRET = name`` only for a literal given there
        by mistake, see ``names_a_secret``)."""
        return secrecy(self.list_kind, name) is not Secrecy.NONE

    def names_a_secret(self, name: str) -> bool:
        return secrecy(self.list_kind, name) is Secrecy.NAME

    @property
    def names(self) -> list[str]:
        return list(self._by_name)


@dataclass
class InlineSecrets:
    """Plain strings given where a secret belongs, to be stored as hidden secrets."""

    prefix: str  # "__inline__.<object>"
    items: list[tuple[str, Redacted]] = field(default_factory=list)

    def add(self, option_name: str, value: str) -> SecretName:
        name = f"{self.prefix}.{option_name.lower().replace(' ', '_')}"
        self.items.append((name, Redacted(value)))
        return SecretName(name)


def describe(value: Value | None, secret: bool) -> str:
    """What the user wrote, for an ``expected X, found Y`` message; never a secret's value."""
    if value is None:
        return "no value"
    if isinstance(value, StringLit):
        return "a string" if secret else f"string '{value.value}'"
    if isinstance(value, NumberLit):
        text = value.text if len(value.text) <= 24 else value.text[:21] + "..."
        return "a number" if secret else f"number {text}"
    if isinstance(value, BoolLit):
        return "true" if value.value else "false"
    if isinstance(value, Ident):
        if secret:
            return "an identifier"
        return f'identifier "{value.name}"' if value.quoted else f"identifier {value.name}"
    if isinstance(value, SecretRef):
        # a name in double quotes may be a value in the wrong quotes
        return "SECRET and a quoted name" if value.name.quoted else f"SECRET {value.name.name}"
    if isinstance(value, StringList):
        return "a list of strings"
    return "an option list"


def collect(
    ctx: Context,
    options: Iterable[Option],
    table: OptionTable,
    *,
    inline: InlineSecrets | None = None,
    secret_exists: Any = None,
) -> Collected:
    """Check every option against ``table`` and convert its value; first problem raises."""
    out = Collected()
    for opt in options:
        spec, secret_form = table.lookup(opt.name)
        if spec is None and not opt.key_is_string:
            _check_missing_equals(ctx, opt, table)
        if spec is None:
            hint = _storage_hint(opt.name, table) or did_you_mean(opt.name, table.names)
            # a name that mentions a secret may be a secret option with its value run into it
            shown = (
                "(a name mentioning a secret, not repeated)" if _SECRET_MENTION.search(opt.name) else opt.name
            )
            raise ctx.error(
                f"unknown {table.what} option {shown}",
                opt,
                hint or f"valid options: {', '.join(s.name for s in table.specs)}",
            )
        prior = out.given.get(spec.name)
        if prior is not None:
            same = prior.option.name == opt.name
            raise ctx.error(
                f"option {opt.name} given more than once"
                if same
                else f"option {opt.name} repeats {prior.option.name} (they are the same option)",
                opt,
                "give each option once",
            )
        value = _convert(ctx, opt, spec, secret_form, inline, secret_exists)
        out.given[spec.name] = Given(spec, opt, value)
    return out


_SECRET_MENTION = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)


def _storage_hint(name: str, table: OptionTable) -> str | None:
    """``S3 CONNECTION``, ``ADLS CONNECTION``: a storage connection called by another name."""
    first, _, rest = name.partition(" ")
    storage = storage_named(first)
    if storage is None or rest != "CONNECTION" or storage.option not in table.names:
        return None
    return f"did you mean {storage.option}? (a connection TO {storage.keyword} holds {storage.store} credentials)"


def _check_missing_equals(ctx: Context, opt: Option, table: OptionTable) -> None:
    """``SECRET ACCESS KEY hunter2``: a known option, then words that are its value with the
    ``=`` forgotten. Said so, without repeating the words when the option holds a secret."""
    words = opt.name.split()
    n = known_prefix(table.list_kind, words)
    if 0 < n < len(words):
        name = " ".join(words[:n])
        found = "a value" if table.is_secret_option(name) else " ".join(words[n:])
        raise ctx.error(f"expected '=' after option {name}, found {found}", opt, f"write {name} = value")


def _convert(
    ctx: Context,
    opt: Option,
    spec: OptionSpec,
    secret_form: bool,
    inline: InlineSecrets | None,
    secret_exists: Any,
) -> Any:
    v = opt.value
    at = v if v is not None else opt

    def wrong(expected: str | None = None, hint: str | None = None) -> AnalysisError:
        return ctx.error(
            f"option {opt.name} expects {expected or spec.kind.value}, found {describe(v, spec.secret)}",
            at,
            hint,
        )

    if secret_form:
        # PASSWORD SECRET = name: the value names a secret
        if isinstance(v, Ident):
            return _secret_ref(ctx, v, secret_exists)
        if isinstance(v, SecretRef):
            return _secret_ref(ctx, v.name, secret_exists)
        raise wrong("the name of a secret", f"write {opt.name} = secret_name")

    kind = spec.kind
    if kind is Kind.BOOL:
        if v is None:
            return True  # a bare flag, as Materialize's VALIDATE
        if isinstance(v, BoolLit):
            return v.value
        if isinstance(v, StringLit | Ident) and _text(v).lower() in ("true", "false"):
            return _text(v).lower() == "true"
        raise wrong()
    if v is None:
        raise ctx.error(f"option {opt.name} needs a value", opt, f"write {opt.name} = <{kind.value}>")
    if kind is Kind.STRING:
        if isinstance(v, StringLit | Ident):
            text = _text(v)
            if spec.choices is not None:
                canon = spec.choices.get(text.lower())
                if canon is None:
                    choices = sorted(set(spec.choices.values()))
                    # spelled as the canonical value where only case tells them apart ('SASL_SSL')
                    hint = did_you_mean(text, [*spec.choices, *spec.choices.values()], quote="'")
                    raise ctx.error(f"invalid {opt.name} '{text}': expected {one_of(choices)}", v, hint)
                return canon
            return text
        raise wrong()
    if kind is Kind.INT:
        digits = v.text if isinstance(v, NumberLit) else v.value.strip() if isinstance(v, StringLit) else ""
        if _INTEGER.fullmatch(digits):
            n = int(digits)
            if abs(n) > MAX_INT:
                raise ctx.error(f"option {opt.name} is too large (at most {MAX_INT})", v)
            return n
        raise wrong()
    if kind in (Kind.SECRET, Kind.STRING_OR_SECRET):
        if isinstance(v, SecretRef):
            return _secret_ref(ctx, v.name, secret_exists)
        if isinstance(v, StringLit) or (isinstance(v, Ident) and v.quoted):
            if kind is Kind.STRING_OR_SECRET:
                return _text(v)
            if not spec.inline:
                raise ctx.error(
                    f"option {opt.name} expects SECRET name, found {describe(v, spec.secret)}",
                    v,
                    f"keep it in a secret: CREATE SECRET s AS '...'; then {opt.name} = SECRET s",
                )
            assert inline is not None, "a table with SECRET options needs an InlineSecrets"
            ctx.warn(
                f"option {opt.name} is given as a plain string; it is stored as a hidden secret",
                v,
                f"create a secret and refer to it: CREATE SECRET s AS '...'; {opt.name} = SECRET s",
            )
            return inline.add(spec.name, _text(v))
        raise wrong(hint=f"write {opt.name} = SECRET secret_name")
    if kind is Kind.CONNECTION:
        if isinstance(v, Ident | StringLit):
            return _text(v)
        raise wrong()
    if kind is Kind.LIST:
        if isinstance(v, OptionList):
            return _pairs(ctx, opt, v, spec.secret)
        raise wrong(hint=f"write {opt.name} = ('key' = 'value', ...)")
    if kind is Kind.SIZE:
        if isinstance(v, NumberLit) and _INTEGER.fullmatch(v.text):
            if v.text.startswith("-") or int(v.text) == 0:
                raise ctx.error(f"option {opt.name} must be positive", v, SIZE_UNITS_HINT)
            try:
                return check_size(float(v.text), v.text)
            except UnitError as e:
                raise ctx.error(f"option {opt.name}: {e.message}", v, SIZE_UNITS_HINT) from None
        if isinstance(v, StringLit | Ident):
            try:
                return parse_size(_text(v))
            except UnitError as e:
                raise _unit_error(ctx, v, e, opt.name, SIZE_UNITS_HINT) from None
        raise wrong(hint=SIZE_UNITS_HINT)
    if kind is Kind.DURATION:
        if isinstance(v, NumberLit):
            seconds = float(v.text)
            if seconds <= 0:
                raise ctx.error(f"option {opt.name} must be positive", v, DURATION_UNITS_HINT)
            try:
                return check_duration(seconds, v.text)
            except UnitError as e:
                raise ctx.error(f"option {opt.name}: {e.message}", v, DURATION_UNITS_HINT) from None
        if isinstance(v, StringLit | Ident):
            try:
                return parse_duration(_text(v))
            except UnitError as e:
                raise _unit_error(ctx, v, e, opt.name, DURATION_UNITS_HINT) from None
        raise wrong(hint=DURATION_UNITS_HINT)
    if kind is Kind.STRINGS:
        if isinstance(v, StringList):
            return tuple(item.value for item in v.items)
        if isinstance(v, StringLit) or (isinstance(v, Ident) and v.quoted):
            return (_text(v),)
        raise wrong(hint=f"write {opt.name} = 'host:port' or {opt.name} = ('host1:port', 'host2:port')")
    if kind is Kind.TIMESTAMP:
        if isinstance(v, NumberLit) and _INTEGER.fullmatch(v.text):
            ms = int(v.text)
            if ms < 0 or ms > MAX_INT:
                raise ctx.error(f"option {opt.name} must be a time since 1970, found {v.text}", v)
            return ms
        if isinstance(v, StringLit | Ident):
            parsed = epoch_ms(_text(v))
            if parsed is None:
                raise ctx.error(
                    f"invalid {opt.name} '{_text(v)}': expected an ISO 8601 timestamp",
                    v,
                    "write '2026-01-01T00:00:00Z' (no zone: UTC), or milliseconds since 1970",
                )
            return parsed
        raise wrong()
    raise AssertionError(kind)  # pragma: no cover


def epoch_ms(text: str) -> int | None:
    """An ISO 8601 timestamp as milliseconds since the epoch; one without a zone is UTC."""
    import datetime

    text = text.strip()
    if text[-1:] in ("Z", "z"):  # Python 3.10's fromisoformat does not read Z
        text = text[:-1] + "+00:00"
    try:
        ts = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=datetime.timezone.utc)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    try:
        ms = (ts - epoch) // datetime.timedelta(milliseconds=1)
    except OverflowError:
        return None
    return ms if ms >= 0 else None


def _unit_error(ctx: Context, v: StringLit | Ident, e: UnitError, name: str, hint: str) -> AnalysisError:
    span = ctx.sub_span(v, e.start, e.end if e.end is not None else len(_text(v)))
    return ctx.error(f"option {name}: {e.message}", span, hint)


def _text(v: StringLit | Ident) -> str:
    return v.value if isinstance(v, StringLit) else v.name


def _secret_ref(ctx: Context, name: Ident, secret_exists: Any) -> SecretName:
    if secret_exists is not None and not secret_exists(name.name):
        if name.quoted:
            # "..." where a secret's name goes may well be its value written in quotes
            raise ctx.error(
                "unknown secret: no secret has the name given in double quotes",
                name,
                "a secret is created with CREATE SECRET name AS '...' and named bare: SECRET name",
            )
        raise ctx.error(
            f"unknown secret {name.name}", name, f"create it first: CREATE SECRET {name.name} AS '...'"
        )
    return SecretName(name.name)


def _pairs(ctx: Context, opt: Option, lst: OptionList, secret: bool) -> tuple[tuple[str, str], ...]:
    seen: dict[str, Option] = {}
    out: list[tuple[str, str]] = []
    for item in lst.options:
        key = item.name if item.key_is_string else item.name.lower()
        if key in seen:
            raise ctx.error(f"{opt.name} key '{key}' given more than once", item, "give each key once")
        seen[key] = item
        v = item.value
        if isinstance(v, StringLit):
            text = v.value
        elif isinstance(v, Ident) and v.quoted:
            text = v.name
        elif isinstance(v, NumberLit):
            text = v.text
        elif isinstance(v, BoolLit):
            text = "true" if v.value else "false"
        else:
            raise ctx.error(
                f"{opt.name} value of '{key}' must be a string, found {describe(v, secret)}",
                v if v is not None else item,
                f"write '{key}' = 'value'",
            )
        out.append((key, text))
    return tuple(out)


def secret_deps(opts: Collected, inline: InlineSecrets) -> list[tuple[str, str]]:
    """The secrets a connection's options name (its dependencies; inline secrets are its own)."""
    hidden = {n for n, _ in inline.items}
    deps: list[tuple[str, str]] = []
    for g in opts.given.values():
        name = getattr(g.value, "name", None)
        if (
            g.spec.kind in (Kind.SECRET, Kind.STRING_OR_SECRET)
            and isinstance(name, str)
            and name not in hidden
        ):
            if ("secret", name) not in deps:
                deps.append(("secret", name))
    return deps


def check_applies(ctx: Context, opts: Collected, what: str, discriminator: str, label: str) -> None:
    """Refuse options that exist for the object kind but not for this type/format."""
    for g in opts.given.values():
        if g.spec.applies is not None and discriminator not in g.spec.applies:
            valid = sorted(g.spec.applies)
            where = f"only to {what} {one_of(valid)}" if len(valid) == 1 else f"to {label} {one_of(valid)}"
            raise ctx.error(
                f"option {g.option.name} does not apply to {what} '{discriminator}'",
                g.option,
                f"{g.spec.name} applies {where}",
            )


__all__ = [
    "Collected",
    "Given",
    "InlineSecrets",
    "Kind",
    "OptionSpec",
    "OptionTable",
    "check_applies",
    "collect",
    "describe",
    "secret_deps",
]
