"""Byte-level building blocks of the Hudi table-version-6 layout.

Covers ``hoodie.properties`` (Java ``Properties.store`` text with Java escaping and the
CRC-32 table checksum), ``.hoodie_partition_metadata``, instant times, base/log file names,
Avro schemas derived from Arrow schemas (the shapes Spark's Hudi writer records), and the
vectorised record-key / partition-path computation of the Simple, Complex and Non-partitioned
key generators. Facts come from ``shared/reference/hudi-v6-format.md`` (sections A, C, D, E.1).

These are written here because no installable library writes Hudi tables from Python:
PyPI ``hudi`` 0.5.0 is read-only.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from helpers.errors import HudiError
from helpers.hudi.config import SOFT_DELETE_FIELD, HudiTableConfig

__all__ = [
    "META_COLUMNS",
    "COMMIT_TIME_COL",
    "SEQNO_COL",
    "RECORD_KEY_COL",
    "PARTITION_PATH_COL",
    "FILE_NAME_COL",
    "HIVE_DEFAULT_PARTITION",
    "BaseFileName",
    "LogFileName",
    "java_escape",
    "java_unescape",
    "format_properties",
    "parse_properties",
    "table_checksum",
    "table_properties",
    "partition_metadata_text",
    "new_instant_time",
    "new_file_id",
    "base_file_name",
    "log_file_name",
    "parse_base_file_name",
    "parse_log_file_name",
    "avro_schema_for",
    "data_schema_of",
    "normalize_data_table",
    "record_keys",
    "partition_paths",
    "file_id_of",
    "fsync_write",
]

COMMIT_TIME_COL = "_hoodie_commit_time"
SEQNO_COL = "_hoodie_commit_seqno"
RECORD_KEY_COL = "_hoodie_record_key"
PARTITION_PATH_COL = "_hoodie_partition_path"
FILE_NAME_COL = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME_COL, SEQNO_COL, RECORD_KEY_COL, PARTITION_PATH_COL, FILE_NAME_COL)
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"

# ----------------------------------------------------------------------------------------------
# Java Properties text
# ----------------------------------------------------------------------------------------------


def java_escape(text: str, *, is_key: bool = False) -> str:
    """Escape a string the way ``java.util.Properties.store`` does.

    Args:
        text: the key or value.
        is_key: keys also escape every space; values only a leading one.

    Returns:
        The escaped text (``:`` ``=`` ``#`` ``!`` backslash-escaped, non-ASCII as ``\\uXXXX``).
    """
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in ":=#!":
            out.append("\\" + ch)
        elif ch == " ":
            out.append("\\ " if (is_key or i == 0) else " ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            code = ch.encode("utf-16-be")
            for j in range(0, len(code), 2):
                out.append(f"\\u{int.from_bytes(code[j : j + 2], 'big'):04X}")
        else:
            out.append(ch)
    return "".join(out)


_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def java_unescape(text: str) -> str:
    """Undo :func:`java_escape` (``\\uXXXX`` sequences including surrogate pairs).

    Args:
        text: escaped key or value.

    Returns:
        The plain string.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_UNESCAPE.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    joined = "".join(out)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16")


def _java_date(now: dt.datetime) -> str:
    return now.strftime("%a %b %d %H:%M:%S UTC %Y")


def format_properties(props: dict[str, str], now: dt.datetime | None = None) -> str:
    """Render properties as Java ``Properties.store`` text, as Hudi's ``hoodie.properties``.

    Args:
        props: keys and values (unescaped).
        now: timestamp for the two comment lines (UTC now by default).

    Returns:
        The file text (ISO-8859-1 safe: everything non-ASCII is ``\\u`` escaped).
    """
    now = now or dt.datetime.now(dt.UTC)
    lines = [
        "#Properties saved on " + now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "#" + _java_date(now),
    ]
    lines += [f"{java_escape(k, is_key=True)}={java_escape(v)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text (comments, ``key=value``, escapes; no line continuations needed).

    Args:
        text: file content.

    Returns:
        Unescaped key/value pairs.
    """
    result: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"((?:\\.|[^=:\\])*?)\s*[=:]\s*(.*)$", line)
        if match is None:
            result[java_unescape(line.strip())] = ""
            continue
        result[java_unescape(match.group(1).strip())] = java_unescape(match.group(2))
    return result


def table_checksum(database_name: str, table_name: str) -> int:
    """``hoodie.table.checksum``: unsigned CRC-32 of ``"<database>.<table>"`` (format notes A.3).

    Args:
        database_name: ``hoodie.database.name`` ("" when absent).
        table_name: ``hoodie.table.name``.

    Returns:
        The checksum.
    """
    return zlib.crc32(f"{database_name}.{table_name}".encode()) & 0xFFFFFFFF


def table_properties(config: HudiTableConfig, create_schema_json: str) -> dict[str, str]:
    """The ``hoodie.properties`` entries a Spark writer records for a v6 table.

    Args:
        config: the table configuration.
        create_schema_json: Avro schema (JSON) of the data columns.

    Returns:
        Ordered key/value pairs.
    """
    props: dict[str, str] = {
        "hoodie.table.name": config.table_name,
        "hoodie.table.type": config.table_type,
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.recordkey.fields": ",".join(config.record_key_fields),
        "hoodie.table.keygenerator.class": config.keygen_class,
        "hoodie.datasource.write.hive_style_partitioning": str(config.hive_style_partitioning).lower(),
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.database.name": config.database_name,
        "hoodie.archivelog.folder": "archived",
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.table.log.file.format": "HOODIE_LOG",
        "hoodie.populate.meta.fields": "true",
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.table.create.schema": create_schema_json,
    }
    if config.partition_fields:
        props["hoodie.table.partition.fields"] = ",".join(config.partition_fields)
    if config.precombine_field:
        props["hoodie.table.precombine.field"] = config.precombine_field
    if config.is_mor:
        props["hoodie.compaction.payload.class"] = (
            "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
        )
        props["hoodie.compaction.record.merger.strategy"] = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
    props.update(dict(config.extra_properties))
    props["hoodie.table.checksum"] = str(table_checksum(config.database_name, config.table_name))
    return props


def partition_metadata_text(commit_time: str, depth: int, now: dt.datetime | None = None) -> str:
    """Content of ``.hoodie_partition_metadata`` (format notes D).

    Args:
        commit_time: instant of the first commit writing the partition.
        depth: number of path segments of the partition path.
        now: timestamp for the comment line.

    Returns:
        The file text.
    """
    now = now or dt.datetime.now(dt.UTC)
    return f"#partition metadata\n#{_java_date(now)}\ncommitTime={commit_time}\npartitionDepth={depth}\n"


def fsync_write(path: str, data: bytes) -> None:
    """Write a file atomically: temp file in the same directory, fsync, ``os.replace``, fsync dir.

    Args:
        path: destination.
        data: content.
    """
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# ----------------------------------------------------------------------------------------------
# Instants and file names
# ----------------------------------------------------------------------------------------------


def new_instant_time(after: str | None = None) -> str:
    """A new instant ``yyyyMMddHHmmssSSS`` in UTC, strictly greater than ``after``.

    Args:
        after: the greatest instant already on the timeline, if any.

    Returns:
        17-digit instant string.
    """
    now = dt.datetime.now(dt.UTC)
    instant = now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"
    if after is not None:
        floor = after.ljust(17, "0")[:17]
        if instant <= floor:
            instant = str(int(floor) + 1)
    return instant


def new_file_id() -> str:
    """A new file group id: random UUID plus ``-0`` (as Spark writes).

    Returns:
        The file id.
    """
    return f"{uuid.uuid4()}-0"


@dataclass(frozen=True)
class BaseFileName:
    """Parsed ``<fileId>_<writeToken>_<instant>.parquet``."""

    file_id: str
    write_token: str
    instant: str


@dataclass(frozen=True)
class LogFileName:
    """Parsed ``.<fileId>_<baseInstant>.log.<version>_<writeToken>``."""

    file_id: str
    base_instant: str
    version: int
    write_token: str


_BASE_RE = re.compile(r"^([^_]+)_([^_]+)_(\d{14,17})\.parquet$")
_LOG_RE = re.compile(r"^\.([^_]+)_(\d{14,17})\.log\.(\d+)_([^_.]+)$")


def base_file_name(file_id: str, write_token: str, instant: str) -> str:
    """Build a base file name (format notes C.1).

    Args:
        file_id: file group id.
        write_token: ``<task>-<stage>-<attempt>``; no underscore.
        instant: commit instant.

    Returns:
        The file name.
    """
    return f"{file_id}_{write_token}_{instant}.parquet"


def log_file_name(file_id: str, base_instant: str, version: int, write_token: str) -> str:
    """Build a log file name (format notes E.1).

    Args:
        file_id: file group id.
        base_instant: instant of the slice's base file (not the delta commit).
        version: log version, from 1.
        write_token: ``_``-free token.

    Returns:
        The file name.
    """
    return f".{file_id}_{base_instant}.log.{version}_{write_token}"


def parse_base_file_name(name: str) -> BaseFileName | None:
    """Parse a base file name.

    Args:
        name: file name without directory.

    Returns:
        The parts, or None if the name is not a base file name.
    """
    match = _BASE_RE.match(name)
    return BaseFileName(match.group(1), match.group(2), match.group(3)) if match else None


def parse_log_file_name(name: str) -> LogFileName | None:
    """Parse a log file name (CDC logs are not recognised).

    Args:
        name: file name without directory.

    Returns:
        The parts, or None.
    """
    match = _LOG_RE.match(name)
    if not match:
        return None
    return LogFileName(match.group(1), match.group(2), int(match.group(3)), match.group(4))


def file_id_of(file_name_column: pa.ChunkedArray | pa.Array) -> pa.Array | pa.ChunkedArray:
    """File group ids from ``_hoodie_file_name`` values (base file name or bare file id).

    Args:
        file_name_column: string column.

    Returns:
        String column of file ids.
    """
    return pc.replace_substring_regex(file_name_column, pattern=r"_.*$", replacement="")


# ----------------------------------------------------------------------------------------------
# Schemas
# ----------------------------------------------------------------------------------------------


def normalize_data_table(table: pa.Table) -> pa.Table:
    """Cast Arrow types to the ones Hudi/Avro can represent and readers merge consistently.

    int8/int16/uint8/uint16 -> int32, uint32 -> int64, large_string -> string, large_binary
    -> binary, timestamps -> microseconds (UTC if zoned), float16 -> float32.

    Args:
        table: input data.

    Returns:
        Table with normalized types (zero-copy when nothing changes).
    """
    fields = []
    changed = False
    for fld in table.schema:
        new_type = _normalize_type(fld.type)
        changed |= new_type != fld.type
        fields.append(pa.field(fld.name, new_type, nullable=True))
    schema = pa.schema(fields)
    if not changed and all(f.nullable for f in table.schema):
        return table
    return table.cast(schema)


def _normalize_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t):
        return pa.int64()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz is not None else None)
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _normalize_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", _normalize_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(pa.string(), _normalize_type(t.item_type))
    if pa.types.is_dictionary(t):
        return _normalize_type(t.value_type)
    return t


def _avro_type(t: pa.DataType, name: str, namespace: str, null_first: bool) -> Any:
    base: Any
    if pa.types.is_boolean(t):
        base = "boolean"
    elif pa.types.is_int32(t) or pa.types.is_int8(t) or pa.types.is_int16(t):
        base = "int"
    elif pa.types.is_int64(t):
        base = "long"
    elif pa.types.is_float32(t):
        base = "float"
    elif pa.types.is_float64(t):
        base = "double"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        base = "string"
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        base = "bytes"
    elif pa.types.is_date32(t):
        base = {"type": "int", "logicalType": "date"}
    elif pa.types.is_timestamp(t):
        logical = "timestamp-millis" if t.unit == "ms" else "timestamp-micros"
        if t.tz is None:
            logical = "local-" + logical
        base = {"type": "long", "logicalType": logical}
    elif pa.types.is_decimal(t):
        size = _decimal_fixed_size(t.precision)
        base = {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{name}",
            "size": size,
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    elif pa.types.is_struct(t):
        base = {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [_avro_field(f, f"{namespace}.{name}", null_first, with_default=null_first) for f in t],
        }
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        base = {"type": "array", "items": _avro_type(t.value_type, name, namespace, null_first)}
    elif pa.types.is_map(t):
        base = {"type": "map", "values": _avro_type(t.item_type, name, namespace, null_first)}
    else:
        raise HudiError(f"Failed to map Arrow type {t} of column {name!r} to Avro: unsupported type")
    return ["null", base] if null_first else [base, "null"]


def _decimal_fixed_size(precision: int) -> int:
    size = 1
    while 10**precision > 2 ** (8 * size - 1):
        size += 1
    return size


def _avro_field(f: pa.Field, namespace: str, null_first: bool, with_default: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": f.name, "type": _avro_type(f.type, f.name, namespace, null_first)}
    if with_default:
        entry["default"] = None
    return entry


def avro_schema_for(
    data_schema: pa.Schema, table_name: str, *, with_meta: bool = False, null_first: bool = True
) -> dict[str, Any]:
    """Avro record schema of a Hudi table as Spark's writer records it.

    Args:
        data_schema: Arrow schema of the data columns (no meta columns).
        table_name: table name (record name ``<table>_record``, namespace ``hoodie.<table>``).
        with_meta: prepend the five ``_hoodie_*`` fields (``["null","string"]``, ``doc ""``).
        null_first: ``["null", T]`` with ``default null`` (commit metadata, log blocks, parquet
            footer) versus ``[T, "null"]`` without default (``hoodie.table.create.schema``).

    Returns:
        The schema as a JSON-ready dict.

    Raises:
        HudiError: for a column type Avro cannot represent here.
    """
    namespace = f"hoodie.{table_name}"
    name = f"{table_name}_record"
    fields: list[dict[str, Any]] = []
    if with_meta:
        fields += [{"name": m, "type": ["null", "string"], "doc": "", "default": None} for m in META_COLUMNS]
    fields += [
        _avro_field(f, f"{namespace}.{name}", null_first, with_default=null_first) for f in data_schema
    ]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def data_schema_of(table: pa.Table | pa.Schema) -> pa.Schema:
    """The data columns of a table (meta columns removed).

    Args:
        table: table or schema possibly holding ``_hoodie_*`` meta columns.

    Returns:
        Schema without the meta columns.
    """
    schema = table if isinstance(table, pa.Schema) else table.schema
    return pa.schema([f for f in schema if f.name not in META_COLUMNS])


# ----------------------------------------------------------------------------------------------
# Keys and partition paths (vectorised)
# ----------------------------------------------------------------------------------------------


def _as_key_strings(column: pa.ChunkedArray | pa.Array, name: str) -> pa.ChunkedArray | pa.Array:
    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return column.cast(pa.string())
    if pa.types.is_integer(t) or pa.types.is_date32(t) or pa.types.is_decimal(t):
        return column.cast(pa.string())
    if pa.types.is_boolean(t):
        return column.cast(pa.string())
    if pa.types.is_floating(t):
        return column.cast(pa.string())
    raise HudiError(
        f"Failed to build record keys from column {name!r}: type {t} is not supported as a key "
        "(use string, integer, decimal, boolean or date columns)"
    )


def record_keys(table: pa.Table, config: HudiTableConfig) -> pa.ChunkedArray:
    """``_hoodie_record_key`` values in the format of the table's Java key generator.

    Simple key (one field): the value as string. Composite key: ``f1:v1,f2:v2`` with
    ``__null__`` / ``__empty__`` for null / empty parts (ComplexKeyGenerator).

    Args:
        table: input data holding the record key fields.
        config: table configuration.

    Returns:
        String column, one key per row.

    Raises:
        HudiError: when a key field is missing, or a simple key is null/empty.
    """
    missing = [f for f in config.record_key_fields if f not in table.column_names]
    if missing:
        raise HudiError(f"Failed to build record keys: input lacks record key field(s) {missing}")
    if len(config.record_key_fields) == 1:
        name = config.record_key_fields[0]
        keys = _as_key_strings(table.column(name), name)
        if keys.null_count or pc.any(pc.equal(keys, "")).as_py():
            raise HudiError(
                f"Failed to build record keys: record key field {name!r} is null or empty in some rows"
            )
        return pa.chunked_array([keys]) if isinstance(keys, pa.Array) else keys
    parts: list[Any] = []
    for name in config.record_key_fields:
        values = _as_key_strings(table.column(name), name)
        values = pc.if_else(pc.equal(values, ""), EMPTY_KEY_PART, values)
        values = pc.fill_null(values, NULL_KEY_PART)
        parts.append(pc.binary_join_element_wise(f"{name}:", values, ""))
    joined = pc.binary_join_element_wise(*parts, ",")
    return pa.chunked_array([joined]) if isinstance(joined, pa.Array) else joined


def partition_paths(table: pa.Table, config: HudiTableConfig) -> pa.ChunkedArray:
    """``_hoodie_partition_path`` values (hive style ``f=v`` or plain ``v``; joined by ``/``).

    Null or empty values map to ``__HIVE_DEFAULT_PARTITION__`` as Java's key generators do.

    Args:
        table: input data.
        config: table configuration.

    Returns:
        String column; ``""`` everywhere for non-partitioned tables.

    Raises:
        HudiError: when a partition field is missing or has an unsupported type.
    """
    if not config.partition_fields:
        return pa.chunked_array([pa.array([""] * table.num_rows, pa.string())])
    missing = [f for f in config.partition_fields if f not in table.column_names]
    if missing:
        raise HudiError(f"Failed to build partition paths: input lacks partition field(s) {missing}")
    parts: list[Any] = []
    for name in config.partition_fields:
        values = _as_key_strings(table.column(name), name)
        values = pc.if_else(pc.equal(values, ""), HIVE_DEFAULT_PARTITION, values)
        values = pc.fill_null(values, HIVE_DEFAULT_PARTITION)
        if config.hive_style_partitioning:
            values = pc.binary_join_element_wise(f"{name}=", values, "")
        parts.append(values)
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")
    return pa.chunked_array([joined]) if isinstance(joined, pa.Array) else joined


def soft_delete_schema_field() -> pa.Field:
    """The ``__deleted`` column of soft-delete tables.

    Returns:
        A nullable boolean field.
    """
    return pa.field(SOFT_DELETE_FIELD, pa.bool_())
