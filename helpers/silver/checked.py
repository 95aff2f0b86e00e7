"""The checks of a Silver round: which Bronze input is bad, and why.

Two kinds, both decided without Bronze rows in the driver:

* per writer schema (:func:`schema_verdicts`, pure, on the layouts the executors found): a schema
  that lacks the record key, a log position or a Debezium field, or whose column types no longer
  match the table (text where the table holds a decimal, ...), makes all its events bad input;
* per event (:func:`check_events`, Spark expressions run by the executors): an unknown ``__op``
  or a null record key or log position field.

Bad input is set aside by :mod:`helpers.silver.quarantine`; what counts as bad:
``docs/architecture.md``, "Quarantine".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from helpers.bronze.events import MARKER_OPS
from helpers.bronze.layout import BAD_EVENT, BAD_REASON, FILE_COLUMN, ROW_COLUMN, FileLayout
from helpers.bronze.read import DEBEZIUM_FIELDS, arrow_type
from helpers.engines import quote_spark, spark_string
from helpers.hudi.config import HudiTableConfig
from helpers.silver.quarantine import VALID_OPS
from helpers.silver.truncate import MARKER_SQL, is_marker_schema

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame

__all__ = [
    "GOOD_SQL",
    "MISMATCH_REASON",
    "UNKNOWN_OP_HINT",
    "catalog_holds",
    "check_events",
    "data_columns",
    "schema_verdicts",
    "widened",
]

#: Whether an event is good input (no bad reason set), as a Spark SQL expression.
GOOD_SQL = f"{quote_spark(BAD_REASON)} IS NULL"

#: The reason of the events whose column types no longer match the table (a source column changed to
#: another kind of type); :mod:`helpers.silver.counts` finds the newest such event's position.
MISMATCH_REASON = "schema no longer matches the table"

#: What an unknown ``__op`` reason says about Debezium's other op codes.
UNKNOWN_OP_HINT = (
    "only c, u, d, r, t (truncate) and resnapshot (the workbook's marker) are applied"
    " (m = logical decoding message: not a row)"
)


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


def widened(incoming: pa.DataType, stored: pa.DataType) -> bool:
    """Whether ``incoming`` is a wider type of ``stored``'s kind: an integer or floating column of
    more bits (``ALTER TABLE ... TYPE bigint`` on an ``integer``), a decimal of more digits. Hudi
    writes the wider type; the catalog's column must follow it, or Trino and Athena fail on the
    table (measured: ``GENERIC_INTERNAL_ERROR: integer overflow`` on a value past 2**31)."""
    both = (pa.types.is_integer, pa.types.is_floating)
    if any(kind(incoming) and kind(stored) for kind in both):
        return bool(incoming.bit_width > stored.bit_width)
    if pa.types.is_decimal(incoming) and pa.types.is_decimal(stored):
        return bool(incoming.precision > stored.precision)
    return False


def catalog_holds(columns: Mapping[str, pa.DataType | None], stored: Mapping[str, pa.DataType]) -> bool:
    """Whether a catalog synced with the table's ``stored`` column types already holds a write of
    ``columns`` (name to Arrow type; None: a type not compared): every column stored, none
    :func:`widened`. Otherwise the commit syncs the catalog."""
    return all(
        name in stored and (kind is None or not widened(kind, stored[name])) for name, kind in columns.items()
    )


def _fields(schema: str) -> dict[str, pa.DataType | None]:
    out: dict[str, pa.DataType | None] = {}
    for f in json.loads(schema).get("fields", []):
        try:
            out[f["name"]] = arrow_type(f["type"])
        except (KeyError, StopIteration, TypeError):
            out[f["name"]] = None  # a type the checks do not compare
    return out


def schema_verdicts(
    layouts: Sequence[FileLayout],
    config: HudiTableConfig,
    positions: tuple[str, ...],
    stored: Mapping[str, pa.DataType],
) -> dict[str, str]:
    """The writer schemas whose events are bad input as a whole, with the reason.

    Schemas are judged in the order their first file sorts by name; the table's stored types are
    the reference, and the first accepted type of a new column is the reference for the schemas
    after it.

    Args:
        layouts: the round's files (:func:`helpers.bronze.frames.inspect_files`).
        config: the table.
        positions: its log position fields.
        stored: the stored column types (:class:`helpers.silver.state.TableState`).

    Returns:
        Schema text to reason, for the rejected schemas only.
    """
    required = list(dict.fromkeys((*DEBEZIUM_FIELDS, *config.record_key_fields, *positions)))
    reference = dict(stored)
    rejected: dict[str, str] = {}
    seen: set[str] = set()
    for lay in sorted(layouts, key=lambda item: item.file.name):
        for part in lay.parts:
            if part.schema in seen:
                continue
            seen.add(part.schema)
            fields = _fields(part.schema)
            if is_marker_schema(set(fields), config.record_key_fields):  # TRUNCATE markers
                missing = [f for f in ("__op", *positions) if f not in fields]
                if missing:
                    rejected[part.schema] = f"truncate marker lacks log position field(s) {missing}"
                continue
            missing = [f for f in required if f not in fields]
            if missing:
                rejected[part.schema] = (
                    f"event lacks field(s) {missing} (record key, log position and Debezium fields of table "
                    f"{config.table_name})"
                )
                continue
            mismatched = [
                f"column {name!r} is {kind} in this event but {reference[name]} in table {config.table_name}"
                for name, kind in fields.items()
                if kind is not None
                and name in reference
                and not name.startswith("_hoodie")
                and name not in DEBEZIUM_FIELDS
                and not _compatible(kind, reference[name])
            ]
            if mismatched:
                rejected[part.schema] = f"{MISMATCH_REASON}: " + "; ".join(mismatched)
                continue
            for name, kind in fields.items():
                if kind is not None and not pa.types.is_null(kind):
                    reference.setdefault(name, kind)
    return rejected


def data_columns(frame: DataFrame) -> list[str]:
    """The event's own columns (the Bronze read's helper columns left out)."""
    helpers = (FILE_COLUMN, ROW_COLUMN, BAD_REASON, BAD_EVENT)
    return [c for c in frame.columns if c not in helpers]


def check_events(events: DataFrame, config: HudiTableConfig, positions: tuple[str, ...]) -> DataFrame:
    """``events`` with ``_bad_reason`` and ``_bad_event`` set for events that fail the per-event
    checks (an event already set aside keeps its first reason). Lazy: the executors run it.

    The checks are two Spark SQL expressions, names quoted and texts bound as literals: built
    with the Column API they took some 280 calls into the JVM a round, a tenth of a second of the
    driver's time on this machine (``bench/README.md``, "One inspection per file, and the round's
    plan in fewer JVM calls")."""
    from pyspark.sql import functions as F

    columns = data_columns(events)
    if "__op" not in columns:  # every schema was rejected: nothing to check
        return events
    op = quote_spark("__op")
    fields = list(dict.fromkeys((*config.record_key_fields, *positions)))

    def named(field: str, test: str) -> str:
        # a truncate marker has no key: only its log position is required
        required = "true" if field in positions else f"NOT {MARKER_SQL}"
        return f"CASE WHEN {test}({required}) THEN {spark_string(repr(field))} END"

    names = [named(f, f"{quote_spark(f)} IS NULL AND ") for f in fields if f in columns]
    names += [named(f, "") for f in fields if f not in columns]
    null_names = f"concat_ws(', ', {', '.join(names)})"
    ops = ", ".join(spark_string(o) for o in sorted(VALID_OPS | set(MARKER_OPS)))
    reason = (
        f"CASE WHEN {op} IS NULL OR NOT {op} IN ({ops}) THEN concat('unknown __op ', "
        f"coalesce(concat('\\'', {op}, '\\''), 'None'), {spark_string(': ' + UNKNOWN_OP_HINT)}) "
        f"WHEN {null_names} != '' THEN concat('null record key / log position field(s) [', "
        f"{null_names}, ']') END"
    )
    current = quote_spark(BAD_REASON)
    event = f"to_json(struct({', '.join(quote_spark(c) for c in columns)}))"
    return events.withColumns(
        {
            BAD_REASON: F.expr(f"coalesce({current}, {reason})"),
            BAD_EVENT: F.expr(
                f"CASE WHEN {current} IS NULL AND ({reason}) IS NOT NULL THEN {event} "
                f"ELSE {quote_spark(BAD_EVENT)} END"
            ),
        }
    )
