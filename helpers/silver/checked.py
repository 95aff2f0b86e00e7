"""Reading a table's new Bronze files with checks: types against the stored table, op codes, keys and
positions; bad input goes to quarantine."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from helpers.bronze.read import (
    DEBEZIUM_FIELDS,
    RECORD_COLUMN,
    arrow_type,
    avro_table,
    jsonl_tables,
)
from helpers.errors import UnreadableBronzeError
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.timeline import commit_metadata_newest_first
from helpers.silver.checkpoint import (
    BronzeObject,
    BronzeStore,
)
from helpers.silver.quarantine import VALID_OPS, BadRecord

__all__ = []


def _compatible(incoming: pa.DataType, stored: pa.DataType) -> bool:
    """Whether values of ``incoming`` can go into a column of ``stored`` without loss of meaning:
    the same type, or the same kind (integers, floats, decimals of the same scale, timestamps,
    dates, times, text, bytes); a column that is all null fits anything."""
    if incoming == stored or pa.types.is_null(incoming) or pa.types.is_null(stored):
        return True
    if pa.types.is_decimal(incoming) and pa.types.is_decimal(stored):
        return bool(incoming.scale == stored.scale)
    kinds = (
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_timestamp,
        pa.types.is_date,
        pa.types.is_time,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
        pa.types.is_boolean,
    )
    return any(kind(incoming) and kind(stored) for kind in kinds)


def stored_types(base_path: str) -> dict[str, pa.DataType]:
    """The Silver table's column types, from the writer schema of its newest commit (empty for a
    table not written yet)."""
    for meta in commit_metadata_newest_first(base_path):
        schema = (meta.get("extraMetadata") or {}).get("schema")
        if not schema:
            continue
        out = {}
        for f in json.loads(schema).get("fields", []):
            try:
                out[f["name"]] = arrow_type(f["type"])
            except (KeyError, StopIteration, TypeError):
                continue  # a type the events never carry (fixed without a logical type, ...)
        return out
    return {}


def _check_events(
    table: pa.Table, config: HudiTableConfig, positions: tuple[str, ...], reference: dict[str, pa.DataType]
) -> tuple[pa.Table, list[Any]]:
    """Split one file's events (with ``_bronze_record``) into those to apply and bad ones."""

    required = (*DEBEZIUM_FIELDS, *config.record_key_fields, *positions)

    def all_bad(reason: str) -> tuple[pa.Table, list[Any]]:
        rows = table.to_pylist()
        return table.slice(0, 0), [BadRecord(r.pop(RECORD_COLUMN), reason, r) for r in rows]

    missing = [f for f in dict.fromkeys(required) if f not in table.column_names]
    if missing:
        return all_bad(
            f"event lacks field(s) {missing} (record key, log position and Debezium fields of table "
            f"{config.table_name})"
        )
    mismatched = [
        f"column {f.name!r} is {f.type} in this event but {reference[f.name]} in table {config.table_name}"
        for f in table.schema
        if f.name in reference
        and not f.name.startswith("_hoodie")
        and f.name not in DEBEZIUM_FIELDS
        and not _compatible(f.type, reference[f.name])
    ]
    if mismatched:
        return all_bad("schema no longer matches the table: " + "; ".join(mismatched))
    ops = table.column("__op")
    valid = pc.fill_null(pc.is_in(ops, value_set=pa.array(sorted(VALID_OPS))), False)
    for name in dict.fromkeys((*config.record_key_fields, *positions)):
        valid = pc.and_(valid, pc.is_valid(table.column(name)))
    if pc.all(valid).as_py():
        good = table
        bad: list[Any] = []
    else:
        good = table.filter(valid)
        bad = []
        for row in table.filter(pc.invert(valid)).to_pylist():
            number = row.pop(RECORD_COLUMN)
            op = row.get("__op")
            if op not in VALID_OPS:
                reason = (
                    f"unknown __op {op!r}: only c, u, d, r are applied (t = truncate: re-snapshot the "
                    "table; m = logical decoding message: not a row)"
                )
            else:
                nulls = [n for n in (*config.record_key_fields, *positions) if row.get(n) is None]
                reason = f"null record key / log position field(s) {nulls}"
            bad.append(BadRecord(number, reason, row))
    for f in good.schema:  # the first good type of a new column is the reference for the rest
        if f.name != RECORD_COLUMN and not pa.types.is_null(f.type):
            reference.setdefault(f.name, f.type)
    return good, bad


def read_checked(
    store: BronzeStore, objects: Sequence[BronzeObject], config: HudiTableConfig, positions: tuple[str, ...]
) -> tuple[pa.Table, dict[BronzeObject, tuple[list[Any], bool]], set[BronzeObject]]:
    """Bronze files read like :func:`read_bronze_arrow`, bad input separated instead of raising.

    Returns:
        The events to apply (``_bronze_record`` removed), the bad input per file as
        ``(records, whole file unreadable)``, and the files that have events to apply.

    Raises:
        OSError: when a file cannot be read at all (permissions, S3 errors: not bad input).
    """

    reference = stored_types(config.base_path)
    tables: list[pa.Table] = []
    bad: dict[BronzeObject, tuple[list[Any], bool]] = {}
    with_good: set[BronzeObject] = set()
    for obj in objects:
        data = store.read(obj)
        records: list[Any] = []
        if obj.name.endswith(".jsonl"):
            bad_lines: list[tuple[int, str]] = []
            parts = jsonl_tables(obj.name, data, bad_lines)
            records += [BadRecord(number, reason) for number, reason in bad_lines]
        else:
            try:
                parts = [avro_table(data, numbered=True)]
            except UnreadableBronzeError as exc:
                reason = (
                    f"unreadable Avro file ({exc}); Bronze files are written atomically, so this is "
                    "corruption after the write: the whole file is set aside, no block of it is applied"
                )
                bad[obj] = ([BadRecord(None, reason)], True)
                continue
        for part in parts:
            good, wrong = _check_events(part, config, positions, reference)
            records += wrong
            if good.num_rows:
                tables.append(good.drop_columns([RECORD_COLUMN]))
                with_good.add(obj)
        if records:
            bad[obj] = (sorted(records, key=lambda r: r.record or 0), False)
    if not tables:
        return pa.table({}), bad, with_good
    return pa.concat_tables(tables, promote_options="permissive"), bad, with_good
