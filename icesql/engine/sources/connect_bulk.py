"""A batch of Kafka Connect JSON change events decoded in bulk (issue 53's benchmark).

``split_messages`` returns what ``connect.split_messages`` returns (the per-message reference) for
the same batch, faster: each message's ``schema`` block is sliced out of its text and parsed once per
distinct text (``_schema``), the payloads of one schema are read together by Arrow's JSON reader with
an explicit schema of their raw JSON types, and their columns are converted vectorized
(``_convert_column``). What stays per message in Python is cheap and order-sensitive: routing (one
template resolve per distinct topic/db/schema/table), the key check and the schema merge (once per
table and schema). A message that is not in the JsonConverter's plain shape, a schema the bulk reader
does not take (nested values) and a group whose bulk read or conversion fails go through the
reference's per-message path (``connect.decode_one``), so a bad message is still reported one by one
with its reason.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from icesql.engine.base.changelog import BLK, FILE, LINE, OP, SEQ
from icesql.engine.sources.connect import (
    MESSAGE_ROW,
    ConnectField,
    MessageError,
    Split,
    TableSlice,
    decode_one,
    merge_field,
    struct_fields,
)
from icesql.engine.sources.connect import (
    record_key as key_fields,
)
from icesql.routing import RoutingError, TableNames, TableTemplate

_HEAD = re.compile(r'\{\s*"schema"\s*:\s*')
_SEP = re.compile(r'\s*,\s*"payload"\s*:\s*')
_CACHE_MAX = 4096
_INT = {"integer", "long"}
_FLOAT = {"float", "double"}
_DAY_MIN, _DAY_MAX = -719_162, 2_932_896  # Python's dates: 0001-01-01 .. 9999-12-31, in days since 1970
_US_MIN, _US_MAX = _DAY_MIN * 86_400_000_000, (_DAY_MAX + 1) * 86_400_000_000 - 1
_DAY_US = 86_400_000_000
_ZONED_TEXT = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"


@dataclass
class _Schema:
    """A value schema whose events the bulk path reads: the image's fields and Arrow's read schema."""

    fields: list[ConnectField]
    names: dict[str, str]
    read: Any  # pyarrow schema of the payload's raw JSON types


_schemas: dict[str, _Schema | None] = {}  # shared by the sinks' threads: get and set only
_UNSEEN = object()


def _raw_type(f: ConnectField) -> Any:
    import pyarrow as pa

    if f.kind == "plain":
        if f.spark in _INT:
            return pa.int64()
        if f.spark in _FLOAT:
            return pa.float64()
        return pa.bool_() if f.spark == "boolean" else pa.string()
    if f.kind in ("bytes", "decimal", "zoned"):
        return pa.string()
    if f.kind in ("date", "time", "timestamp"):
        return pa.int64()
    return None  # a nested value (its JSON text): per message


def _schema(text: str) -> _Schema | None:
    """The parsed schema block ``text`` (None: its events take the per-message path)."""
    parsed = _schemas.get(text, _UNSEEN)
    if parsed is not _UNSEEN:
        return parsed  # type: ignore[return-value]
    parsed = _parse_schema(text)
    if len(_schemas) >= _CACHE_MAX:
        _schemas.clear()
    _schemas[text] = parsed
    return parsed


def _parse_schema(text: str) -> _Schema | None:
    import pyarrow as pa

    try:
        schema = json.loads(text)
    except ValueError:
        return None
    if not isinstance(schema, Mapping) or not isinstance(schema.get("fields"), list):
        return None
    fields = {f.get("field"): f for f in schema["fields"] if isinstance(f, Mapping)}
    image = fields.get("after") or fields.get("before")
    if image is None:
        return None
    try:
        parsed = struct_fields(image, "'after'")
    except MessageError:
        return None
    types = [_raw_type(f) for f in parsed]
    if any(t is None for t in types) or len({f.name for f in parsed}) != len(parsed):
        return None
    row = pa.struct([pa.field(f.name, t) for f, t in zip(parsed, types, strict=True)])
    source = pa.struct([("db", pa.string()), ("schema", pa.string()), ("table", pa.string()),
                        ("lsn", pa.int64()), ("ts_ms", pa.int64())])
    read = pa.schema([("before", row), ("after", row), ("source", source), ("op", pa.string()), ("ts_ms", pa.int64())])
    return _Schema(parsed, {f.name.lower(): f.name for f in parsed}, read)


def _split_text(text: Any) -> tuple[str, str] | None:
    """(schema text, payload text) of a JsonConverter message ``{"schema":...,"payload":{...}}``;
    None when the text is shaped otherwise. The first ``"payload"`` key after the schema's start
    ends the schema: one inside the schema block would leave an unfinished JSON value, which
    ``_schema`` does not take (the message then takes the per-message path)."""
    if not isinstance(text, str):
        return None
    if text.startswith('{"schema":'):
        start = 10
    else:
        m = _HEAD.match(text)
        if m is None:
            return None
        start = m.end()
    end = text.find(',"payload":', start)
    if end >= 0:
        after = end + 11
    else:
        s = _SEP.search(text, start)
        if s is None:
            return None
        end, after = s.start(), s.end()
    if text.endswith("}}"):
        payload = text[after:-1]
    else:
        tail = text[after:].rstrip()
        if not tail.endswith("}"):
            return None
        payload = tail[:-1].rstrip()
    # one JSON object per line for Arrow's reader (which takes no other top-level value)
    if not (payload.startswith("{") and payload.endswith("}")) or "\n" in payload or "\r" in payload:
        return None
    return text[start:end], payload


# ---------------------------------------------------------------------------------- conversion


def _b64(column: Any) -> list[bytes | None]:
    return [None if v is None else base64.b64decode(v) for v in column.to_pylist()]


def _convert_column(f: ConnectField, raw: Any) -> Any:
    """A column of raw JSON values as ``f``'s values (what ``connect._convert`` makes of each)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if f.kind == "plain":
        return raw
    if f.kind == "bytes":
        return pa.array(_b64(raw), pa.binary())
    if f.kind == "decimal":
        from icesql.engine.sources.types import arrow_type

        return _decimals(raw, f.scale).cast(arrow_type(f.spark))
    if f.kind == "zoned":
        if raw.null_count < len(raw) and not pc.all(pc.match_substring_regex(raw, _ZONED_TEXT)).as_py():
            raise ValueError("a ZonedTimestamp in a shape the bulk path does not parse")
        return raw.cast(pa.timestamp("us", "UTC"))
    values = raw.to_numpy(zero_copy_only=False) if raw.null_count == 0 else raw.fill_null(0).to_numpy()
    valid = None if raw.null_count == 0 else raw.is_valid().to_numpy(zero_copy_only=False)
    if f.kind == "date":
        if len(values) and (values.min() < _DAY_MIN or values.max() > _DAY_MAX):
            raise OverflowError("a date out of range")
        return pa.array(values.astype(np.int32), pa.int32(), mask=None if valid is None else ~valid).cast(pa.date32())
    micros = _micros(values, f.unit)
    if f.kind == "time":
        if len(micros) and (micros.min() < 0 or micros.max() >= _DAY_US):
            raise OverflowError("a time of day out of the bulk path's range")
        return pa.array(micros, pa.int64(), mask=None if valid is None else ~valid).cast(pa.time64("us"))
    if len(micros) and (micros.min() < _US_MIN or micros.max() > _US_MAX):
        raise OverflowError("a timestamp out of range")
    return pa.array(micros, pa.int64(), mask=None if valid is None else ~valid).cast(pa.timestamp("us"))


_B64 = np.full(256, -1, np.int16)  # base64's alphabet -> its six bits; '=' -> 64, others -1
for _i, _c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _B64[_c] = _i
_B64[ord("=")] = 64


def _decimals(raw: Any, scale: int) -> Any:
    """Kafka Connect decimals (base64 of the unscaled big-endian two's complement integer) as
    decimal128(38, scale), decoded with numpy; raises on anything but canonical padded base64 of
    at most 16 bytes (the group then takes the per-message path)."""
    import pyarrow as pa

    raw = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
    n = len(raw)
    offsets = np.frombuffer(raw.buffers()[1], np.int32)[raw.offset : raw.offset + n + 1].astype(np.int64)
    data = raw.buffers()[2]
    chars = np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]] if data is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if (lengths % 4).any():
        raise ValueError("a decimal's base64 is not padded")
    sixes = _B64[chars]
    if not len(sixes):  # every value null or empty: 0 (what an empty byte string decodes to)
        zeros = pa.py_buffer(np.zeros(n * 16, np.uint8))
        return pa.Array.from_buffers(pa.decimal128(38, scale), n, [pa.array(raw.is_valid()).buffers()[1], zeros])
    if (sixes < 0).any():
        raise ValueError("a decimal's base64 holds other characters")
    ends = offsets[1:] - offsets[0]
    has = lengths > 0
    pad = np.zeros(n, np.int64)
    pad[has] = (sixes[ends[has] - 1] == 64).astype(np.int64) + (sixes[ends[has] - 2] == 64)
    inner = has & (sixes[np.maximum(ends - 2, 0)] == 64) & (sixes[np.maximum(ends - 1, 0)] != 64)
    if int((sixes == 64).sum()) != int(pad.sum()) or inner.any():
        raise ValueError("a decimal's base64 has padding inside")
    v = np.where(sixes == 64, 0, sixes).astype(np.uint8).reshape(-1, 4)
    decoded = np.empty((len(v), 3), np.uint8)
    decoded[:, 0] = (v[:, 0] << 2) | (v[:, 1] >> 4)
    decoded[:, 1] = ((v[:, 1] & 15) << 4) | (v[:, 2] >> 2)
    decoded[:, 2] = ((v[:, 2] & 3) << 6) | v[:, 3]
    flat = decoded.reshape(-1)
    sizes = lengths // 4 * 3 - pad
    if (sizes > 16).any():
        raise OverflowError("a decimal of more than 16 bytes")
    starts = (offsets[:-1] - offsets[0]) // 4 * 3
    out = np.zeros((n, 16), np.uint8)
    first = flat[np.minimum(starts, max(len(flat) - 1, 0))] if len(flat) else np.zeros(n, np.uint8)
    out[(sizes > 0) & (first >= 0x80)] = 0xFF  # sign extension
    total = int(sizes.sum())
    if total:
        owner = np.repeat(np.arange(n), sizes)
        within = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        out[owner, 16 - sizes[owner] + within] = flat[starts[owner] + within]
    little = np.ascontiguousarray(out[:, ::-1])
    validity = raw.buffers()[0] if raw.null_count else None
    if validity is not None and raw.offset:
        validity = pa.array(raw.is_valid()).buffers()[1]
    return pa.Array.from_buffers(pa.decimal128(38, scale), n, [validity, pa.py_buffer(little)])


def _micros(values: Any, unit: float) -> Any:
    """``int(int(v) * unit)`` of each value, as ``connect._convert`` computes it."""
    import numpy as np

    if unit == 1:
        return values.astype(np.int64)
    if isinstance(unit, int):
        limit = np.iinfo(np.int64).max // unit
        if len(values) and (values.max() > limit or values.min() < -limit):
            raise OverflowError("a time out of range")
        return values.astype(np.int64) * unit
    return np.trunc(values.astype(np.float64) * unit).astype(np.int64)


@dataclass
class _Group:
    """The messages of one schema: their rows in the batch, and once read, their payloads' routing
    columns and converted images."""

    schema: _Schema
    rows: Any  # numpy int64: rows of the batch
    routing: dict[str, Any] | None = None  # lists of op, db, schema, table, image; seq an Arrow array
    images: Any = None  # Arrow table: the event's image's fields (before for 'd', else after)
    clean: bool = False  # every message a change event (op c, u, d, r) with its image

    def read(self, texts: list[str]) -> None:
        """Read the group's payloads (``texts``) in one go."""
        import io

        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        data = "\n".join(texts).encode()
        options = pj.ParseOptions(explicit_schema=self.schema.read, unexpected_field_behavior="ignore")
        table = pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(block_size=min(max(1 << 20, len(data) + 1), 1 << 28)),
                             parse_options=options)
        if table.num_rows != len(self.rows):
            raise ValueError("a message holds more than one JSON value")
        table = table.combine_chunks()  # one chunk per column: a group has at least one message
        source, before, after, op, ts_ms = (table.column(n).chunk(0) for n in ("source", "before", "after", "op", "ts_ms"))

        def part(name: str) -> list[Any]:
            return pc.struct_field(source, name).to_pylist()

        lsn = pc.coalesce(pc.struct_field(source, "lsn"), pc.struct_field(source, "ts_ms"), ts_ms)
        deletes = pc.equal(op, "d")
        image = pc.if_else(deletes, pc.is_valid(before), pc.is_valid(after))
        good = pc.and_(pc.is_in(op, pa.array(["c", "u", "d", "r"])), image).fill_null(False)
        self.clean = bool(pc.all(good).as_py())
        self.routing = {
            "op": op.to_pylist(),
            "db": part("db"),
            "schema": part("schema"),
            "table": part("table"),
            "seq": lsn,
            "image": image.to_pylist(),
        }
        columns, names = [], []
        for f in self.schema.fields:
            b = _convert_column(f, pc.struct_field(before, f.name))
            a = _convert_column(f, pc.struct_field(after, f.name))
            columns.append(pc.if_else(deletes, b, a))
            names.append(f.name)
        self.images = pa.Table.from_arrays(columns, names=names) if columns else None


def _groups(values: list[Any]) -> dict[str, tuple[_Group, list[str]]]:
    """The batch's messages grouped by their schema block's text, each group with its payloads'
    texts; a message in no group takes the per-message path."""
    import numpy as np

    groups: dict[str, tuple[_Group, list[int], list[str]]] = {}
    for i, text in enumerate(values):
        split = _split_text(text)
        if split is None:
            continue
        found = groups.get(split[0])
        if found is None:
            parsed = _schema(split[0])
            if parsed is None:
                continue
            found = groups[split[0]] = (_Group(parsed, None), [], [])
        found[1].append(i)
        found[2].append(split[1])
    out = {}
    for t, (g, rows, texts) in groups.items():
        g.rows = np.array(rows, np.int64)
        out[t] = (g, texts)
    return out


def split_messages(
    batch: Any, template: TableTemplate, *, topics: bool, fallback_key: Sequence[str] = ()
) -> Split:
    """``connect.split_messages`` of ``batch``, decoded in bulk (the same tables, rows, keys, schema
    widening and bad messages with their reasons)."""
    import pyarrow as pa

    out = Split()
    cols: dict[str, Any] = {n: batch.column(n).to_pylist() for n in ("key", "value", FILE, BLK, LINE)}
    where: list[tuple[_Group, int] | None] = [None] * batch.num_rows
    read: list[_Group] = []
    for g, texts in _groups(cols["value"]).values():
        try:
            g.read(texts)
        except (ValueError, TypeError, OverflowError, IndexError, pa.ArrowException):
            continue  # its messages one by one: each bad one with its reason
        read.append(g)
        for j, i in enumerate(g.rows.tolist()):
            where[i] = (g, j)
    if all(at is not None for at in where):
        clean = _all_clean(read, cols, batch, template, topics=topics, fallback_key=fallback_key)
        if clean is not None:
            return clean
    fast: dict[str, dict[int, tuple[_Group, list[int]]]] = {}  # table -> group -> rows in the group
    merged: dict[str, set[int]] = {}
    names_of = TableNames(template)
    fallback_keys: dict[int, tuple[str, ...]] = {}
    for i in range(batch.num_rows):
        at = where[i]
        if at is None:
            decode_one(out, cols, i, template, topics=topics, fallback_key=fallback_key)
            continue
        g, j = at
        routing = g.routing
        assert routing is not None
        try:
            op = routing["op"][j]
            if op not in ("c", "u", "d", "r"):
                raise MessageError("the message is not a Debezium change event (no op c, u, d or r)")
            record_key = cols["key"][i]
            key = key_fields(record_key) if record_key is not None else None
            if not key:
                key = fallback_keys.get(id(g))
                if key is None:
                    names = g.schema.names
                    key = tuple(names[k.lower()] for k in fallback_key if k.lower() in names)
                    fallback_keys[id(g)] = key
                if len(key) != len(fallback_key) and not record_key:
                    key = ()
            name = names_of(cols[FILE][i] if topics else None, routing["db"][j], routing["schema"][j], routing["table"][j])
            if not routing["image"][j]:
                raise MessageError(f"a '{op}' event without its {'before' if op == 'd' else 'after'} image")
            piece = out.tables.get(name)
            if piece is None:
                piece = out.tables[name] = TableSlice(name, key)
            elif key and piece.key and key != piece.key:
                raise MessageError(f"its key ({', '.join(key)}) differs from ({', '.join(piece.key)})")
            done = merged.setdefault(name, set())
            if id(g) not in done:
                for f in g.schema.fields:
                    merge_field(piece, f)
                done.add(id(g))
            fast.setdefault(name, {}).setdefault(id(g), (g, []))[1].append(j)
        except (MessageError, RoutingError) as e:
            out.bad.append((i, str(e)))
    for name, by_group in fast.items():
        piece = out.tables[name]
        for g, picked in by_group.values():
            piece.parts.append(_part(g, picked, batch))
    return out


def _all_clean(
    groups: list[_Group], cols: Mapping[str, list[Any]], batch: Any, template: TableTemplate, *, topics: bool,
    fallback_key: Sequence[str],
) -> Split | None:
    """The common case without a loop per message: every message of the batch in a group that read,
    each a change event with its image, routed to a table, and no key or schema conflict between a
    table's messages. Then what the per-message loop does once per message - create a table's slice
    with its key, check the key, merge the fields - is done once per (table, schema, key), in the
    order each first appears, with the same result. None: the batch is not such a case."""
    if not all(g.clean for g in groups):
        return None
    try:
        keys = [None if k is None else key_fields(k) for k in cols["key"]]
    except MessageError:
        return None
    pairs: dict[tuple[Any, ...], list[int]] = {}
    for gid, g in enumerate(groups):
        assert g.routing is not None
        rows = g.rows.tolist()
        topic = [cols[FILE][i] for i in rows] if topics else [None] * len(rows)
        record_keys = [keys[i] for i in rows]
        r = g.routing
        for j, combo in enumerate(zip(topic, r["db"], r["schema"], r["table"], record_keys, strict=True)):
            bucket = pairs.get((gid,) + combo)
            if bucket is None:
                bucket = pairs[(gid,) + combo] = []
            bucket.append(j)
    out = Split()
    merged: set[tuple[str, int]] = set()
    names: dict[tuple[Any, ...], str] = {}
    parts: dict[tuple[str, int], list[int]] = {}
    for pair, picked in sorted(pairs.items(), key=lambda p: int(groups[p[0][0]].rows[p[1][0]])):
        gid, where_to, record_key = pair[0], pair[1:5], pair[5]
        g = groups[gid]
        name = names.get(where_to)
        if name is None:
            try:
                name = names[where_to] = template.resolve(dict(zip(("topic", "db", "schema", "table"), where_to, strict=True)))
            except RoutingError:
                return None
        key: tuple[str, ...] = record_key or tuple(
            g.schema.names[k.lower()] for k in fallback_key if k.lower() in g.schema.names
        )
        if len(key) != len(fallback_key) and record_key is None:
            key = ()
        piece = out.tables.get(name)
        if piece is None:
            piece = out.tables[name] = TableSlice(name, key)
        elif key and piece.key and key != piece.key:
            return None
        if (name, gid) not in merged:
            try:
                for f in g.schema.fields:
                    merge_field(piece, f)
            except MessageError:
                return None
            merged.add((name, gid))
        parts.setdefault((name, gid), []).extend(picked)
    for (name, gid), picked in parts.items():
        out.tables[name].parts.append(_part(groups[gid], sorted(picked), batch))
    return out


def _part(g: _Group, picked: list[int], batch: Any) -> Any:
    """The rows ``picked`` of group ``g`` as a table's part: the image's columns, the changelog's."""
    import pyarrow as pa

    assert g.routing is not None
    take = pa.array(picked, pa.int64())
    rows = pa.array(g.rows[picked])
    data = g.images.take(take) if g.images is not None else pa.table({})
    extra = {
        OP: pa.array([g.routing["op"][j] for j in picked], pa.string()),
        SEQ: g.routing["seq"].take(take),
        FILE: batch.column(FILE).take(rows),
        BLK: batch.column(BLK).take(rows),
        LINE: batch.column(LINE).take(rows),
        MESSAGE_ROW: rows,
    }
    for n, column in extra.items():
        data = data.append_column(n, column)
    return data


def splitter(relation: Any) -> Any:
    """The split of a routed sink reading ``relation`` (Debezium's JSON, each message with its schema)."""
    return split_messages


__all__ = ["split_messages", "splitter"]
