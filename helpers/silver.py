"""Bronze change events into Silver Hudi tables (the DeltaStreamer step), one-shot.

For each configured table (``params.silver.tables``) :func:`ingest_table`

1. lists the table's Bronze files and takes those its checkpoint has not: every commit records,
   atomically with the data, the files it took and the whole checkpoint after it (a watermark
   plus the names of recent files; :mod:`helpers.bronze_checkpoint`), so a crash before the
   commit completes leaves them to the next run and a completed commit never takes them twice,
   whatever order or timestamps files arrive with;
2. reads the new files (Avro with its schema, or JSON lines of Connect envelopes whose Debezium
   encodings are converted with the schema each line carries) into one typed Arrow table: exact
   decimals, UTC timestamps, dates; PostgreSQL's TOAST placeholders replaced by the value the
   column last had (:func:`fill_unavailable`);
3. turns Debezium's ``__deleted`` into Hudi's ``_hoodie_is_deleted`` (hard mode) or keeps the row
   flagged (soft mode), orders changes by the source's log position (PostgreSQL ``__lsn``; MySQL
   ``__file, __pos, __row``; SQL Server ``__commit_lsn, __change_lsn, __event_serial_no``), so that
   several changes of a key in one batch keep the last and a redelivered older change never
   overwrites a newer one;
4. upserts into the Hudi table with :func:`helpers.hudi.writer.write_arrow`.

Continuous mode is :mod:`helpers.silver_job`; catalog registration :func:`register_catalog`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pandas as pd
import pyarrow as pa

from helpers.bronze_checkpoint import (
    CHECKPOINT_KEY,
    FILES_KEY,
    BronzeCheckpoint,
    BronzeObject,
    LocalBronze,
    latest_checkpoint,
    local_commit_metadata,
    plan_round,
)
from helpers.capture.connectors import UNAVAILABLE_VALUE
from helpers.errors import HudiError
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.timeline import completed_instants
from helpers.hudi.writer import table_lock, write_arrow
from helpers.params import SilverTableParams, WorkbookParams
from helpers.tombstones import (
    TOMBSTONES_KEY,
    drop_late_events,
    next_tombstones,
    prune_tombstone_files,
    read_tombstones,
    tombstone_file_of,
    write_tombstones,
)

__all__ = [
    "CHECKPOINT_KEY",
    "FILES_KEY",
    "QUARANTINE_KEY",
    "checkpoint_of",
    "pending_bronze",
    "IngestResult",
    "fill_unavailable",
    "ingest_all",
    "ingest_table",
    "register_catalog",
    "silver_tables_frame",
    "wait_for_job_round",
    "silver_vs_source",
    "table_config",
]

log = logging.getLogger(__name__)

QUARANTINE_KEY = "workbook.quarantine"  # commit metadata: bad inputs set aside per Bronze file

_ORDERING = {
    "postgres": ("__lsn",),
    "mariadb": ("__file", "__pos", "__row"),
    "mysql": ("__file", "__pos", "__row"),
    "sqlserver": ("__commit_lsn", "__change_lsn", "__event_serial_no"),
}


@dataclass(frozen=True)
class IngestResult:
    """One ingestion run of one table."""

    table: str
    files: int
    events: int
    instant: str | None
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    unavailable_filled: int = 0
    unavailable_unresolved: int = 0
    quarantined: int = 0  # bad input set aside (:mod:`helpers.quarantine`): events, or whole files
    late_dropped: int = 0  # changes not newer than their key's delete (:mod:`helpers.tombstones`)


def topic_of(params: WorkbookParams, table: SilverTableParams) -> str:
    """The Bronze topic a Silver table reads."""
    return f"{params.project}.{params.source(table.source).namespace}.{table.table}"


def table_config(params: WorkbookParams, table: SilverTableParams) -> HudiTableConfig:
    """Hudi configuration of a Silver table (ordering = the source's log position by default)."""
    engine = params.source(table.source).engine
    return HudiTableConfig(
        table_name=table.name,
        base_path=str(params.path(params.lake.silver) / table.name),
        table_type=table.table_type,
        record_key_fields=table.record_key,
        partition_fields=table.partition,
        hive_style_partitioning=True,
        ordering_fields=table.ordering or _ORDERING[engine],
        delete_mode=table.delete_mode,
    )


def checkpoint_of(base_path: str) -> BronzeCheckpoint:
    """The table's Bronze checkpoint (:mod:`helpers.bronze_checkpoint`): from its newest commit
    that carries one; empty for a table not written yet."""
    if not Path(base_path, ".hoodie").exists():
        return BronzeCheckpoint()
    return latest_checkpoint(local_commit_metadata(base_path))


def pending_bronze(
    params: WorkbookParams, table: SilverTableParams
) -> tuple[list[BronzeObject], BronzeCheckpoint]:
    """The table's Bronze files not taken yet, and the checkpoint to commit after taking them."""
    from helpers.quarantine import settled_files

    state = checkpoint_of(table_config(params, table).base_path)
    settled = settled_files(params, table.name)  # quarantined with nothing to apply: taken
    listed_at = time.time()
    listing = [
        o
        for o in LocalBronze(params.path(params.lake.bronze)).list(topic_of(params, table))
        if o.name not in settled
    ]
    return plan_round(listing, state, listed_at, params.silver.checkpoint_margin_s)


def _arrow_type(avro: Any) -> pa.DataType:
    if isinstance(avro, list):
        return _arrow_type(next(t for t in avro if t != "null"))
    if isinstance(avro, dict):
        logical = avro.get("logicalType")
        if logical == "decimal":
            return pa.decimal128(int(avro["precision"]), int(avro.get("scale", 0)))
        if logical in ("timestamp-millis", "timestamp-micros"):
            return pa.timestamp("us", tz="UTC")
        if logical == "date":
            return pa.date32()
        if logical == "time-micros":
            return pa.time64("us")
        if logical == "time-millis":
            return pa.time32("ms")
        return _arrow_type(avro["type"])
    return {
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
        "string": pa.string(),
        "bytes": pa.binary(),
    }[avro]


def _jsonl_tables(path: Path, bad_lines: list[tuple[int, str]] | None = None) -> list[pa.Table]:
    """A JSON-lines Bronze file (Connect JSON envelopes) as typed tables, one per schema: Debezium's
    encodings (epoch days, milliseconds, microseconds, ISO offsets, decimal numbers) converted.

    Args:
        path: the file.
        bad_lines: when given, a line that does not parse is appended here as ``(line number,
            reason)`` instead of raising, and every table gets a ``_bronze_record`` column (the
            line number of each event).

    Raises:
        HudiError: naming the file and line, for a line that does not parse (``bad_lines`` None).
    """
    from helpers.capture.bronze import (
        _avro_record,
        _converted_fields,
        avro_schema_from_connect,
        event_from_json,
    )

    groups: dict[int, tuple[Any, list[dict[str, Any]], list[int]]] = {}
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                event = event_from_json(path.name, line.rstrip(b"\n"))
                if event is not None and event.schema is not None and id(event.schema) not in groups:
                    avro_schema_from_connect(event.schema, path.name.split("+", 1)[0])
            except Exception as exc:  # noqa: BLE001 - re-raised with the place, or quarantined
                if bad_lines is None:
                    raise HudiError(f"Failed to read Bronze file {path} line {number}: {exc}") from None
                bad_lines.append((number, f"line does not parse as a change event: {exc}"))
                continue
            if event is None or event.schema is None:
                continue
            group = groups.setdefault(id(event.schema), (event.schema, [], []))
            group[1].append(dict(event.value))
            group[2].append(number)
    tables = []
    for connect_schema, values, numbers in groups.values():
        avro = avro_schema_from_connect(connect_schema, path.name.split("+", 1)[0])
        converted = _converted_fields(avro)
        millis = [
            f["name"]
            for f in avro["fields"]
            if isinstance(t := (f["type"][1] if isinstance(f["type"], list) else f["type"]), dict)
            and t.get("logicalType") == "timestamp-millis"
        ]
        schema = pa.schema([pa.field(f["name"], _arrow_type(f["type"])) for f in avro["fields"]])
        rows = []
        kept = []
        for value, number in zip(values, numbers, strict=True):
            try:
                row = _avro_record(value, converted)
                for name in millis:
                    if row.get(name) is not None:
                        row[name] = int(row[name]) * 1000
            except Exception as exc:  # noqa: BLE001 - re-raised with the place, or quarantined
                if bad_lines is None:
                    raise HudiError(f"Failed to read Bronze file {path} line {number}: {exc}") from None
                bad_lines.append((number, f"values do not match the schema the line carries: {exc}"))
                continue
            rows.append(row)
            kept.append(number)
        try:
            table = pa.Table.from_pylist(rows, schema=schema)
        except Exception as exc:  # noqa: BLE001 - find the lines (rare): one by one
            if bad_lines is None:
                raise HudiError(f"Failed to read Bronze file {path}: {exc}") from None
            good_rows, good_numbers = [], []
            for row, number in zip(rows, kept, strict=True):
                try:
                    pa.Table.from_pylist([row], schema=schema)
                except Exception as row_exc:  # noqa: BLE001
                    bad_lines.append((number, f"values do not match the schema the line carries: {row_exc}"))
                    continue
                good_rows.append(row)
                good_numbers.append(number)
            table, kept = pa.Table.from_pylist(good_rows, schema=schema), good_numbers
        if bad_lines is not None:
            table = table.append_column(_RECORD_COL, pa.array(kept, pa.int64()))
        tables.append(table)
    return tables


def read_bronze_arrow(paths: Sequence[Path]) -> pa.Table:
    """Bronze files (Avro or JSON lines) as one Arrow table (columns unified across schema
    versions; a column added at the source later is null in older events)."""
    tables = []
    for path in paths:
        if path.suffix == ".jsonl":
            tables.extend(_jsonl_tables(path))
            continue
        with open(path, "rb") as handle:
            reader = fastavro.reader(handle)
            writer_schema: Any = reader.writer_schema
            schema = pa.schema([pa.field(f["name"], _arrow_type(f["type"])) for f in writer_schema["fields"]])
            rows: list[Any] = list(reader)
        tables.append(pa.Table.from_pylist(rows, schema=schema))
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


_RECORD_COL = "_bronze_record"  # record / line number of each event in its Bronze file (checked reads)
_DEBEZIUM_FIELDS = ("__op", "__deleted")


class _UnreadableBronze(Exception):
    """A Bronze file that cannot be decoded (corrupt or truncated)."""


def _avro_table(path: Path, numbered: bool) -> pa.Table:
    """An Avro Bronze file as one typed table. OSError (a file that cannot be opened) propagates:
    it is not bad input and must not be quarantined; a decoding failure is
    :class:`_UnreadableBronze`."""
    with open(path, "rb") as handle:
        try:
            reader = fastavro.reader(handle)
            writer_schema: Any = reader.writer_schema
            schema = pa.schema([pa.field(f["name"], _arrow_type(f["type"])) for f in writer_schema["fields"]])
            rows: list[Any] = list(reader)
            table = pa.Table.from_pylist(rows, schema=schema)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds for damaged input
            raise _UnreadableBronze(f"{type(exc).__name__}: {exc}") from None
    if numbered:
        table = table.append_column(_RECORD_COL, pa.array(range(1, table.num_rows + 1), pa.int64()))
    return table


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


def _stored_types(config: HudiTableConfig) -> dict[str, pa.DataType]:
    """The Silver table's column types (empty for a table without base files yet)."""
    from helpers.hudi.writer import table_data_schema

    if not Path(config.base_path, ".hoodie", "hoodie.properties").exists():
        return {}
    schema = table_data_schema(config.base_path)
    return {} if schema is None else {f.name: f.type for f in schema}


def _check_events(
    table: pa.Table, config: HudiTableConfig, reference: dict[str, pa.DataType]
) -> tuple[pa.Table, list[Any]]:
    """Split one file's events (with ``_bronze_record``) into those to apply and bad ones."""
    from helpers.quarantine import VALID_OPS, BadRecord

    required = (*_DEBEZIUM_FIELDS, *config.record_key_fields, *config.ordering_fields)

    def all_bad(reason: str) -> tuple[pa.Table, list[Any]]:
        rows = table.to_pylist()
        return table.slice(0, 0), [BadRecord(r.pop(_RECORD_COL), reason, r) for r in rows]

    missing = [f for f in dict.fromkeys(required) if f not in table.column_names]
    if missing:
        return all_bad(
            f"event lacks field(s) {missing} (record key, ordering and Debezium fields of table "
            f"{config.table_name})"
        )
    mismatched = [
        f"column {f.name!r} is {f.type} in this event but {reference[f.name]} in table {config.table_name}"
        for f in table.schema
        if f.name in reference
        and not f.name.startswith("_hoodie")
        and f.name not in _DEBEZIUM_FIELDS
        and not _compatible(f.type, reference[f.name])
    ]
    if mismatched:
        return all_bad("schema no longer matches the table: " + "; ".join(mismatched))
    ops = table.column("__op")
    valid = pa.compute.fill_null(pa.compute.is_in(ops, value_set=pa.array(sorted(VALID_OPS))), False)
    for name in dict.fromkeys((*config.record_key_fields, *config.ordering_fields)):
        valid = pa.compute.and_(valid, pa.compute.is_valid(table.column(name)))
    if pa.compute.all(valid).as_py():
        good = table
        bad: list[Any] = []
    else:
        good = table.filter(valid)
        bad = []
        for row in table.filter(pa.compute.invert(valid)).to_pylist():
            number = row.pop(_RECORD_COL)
            op = row.get("__op")
            if op not in VALID_OPS:
                reason = (
                    f"unknown __op {op!r}: only c, u, d, r are applied (t = truncate: re-snapshot the "
                    "table; m = logical decoding message: not a row)"
                )
            else:
                nulls = [
                    n for n in (*config.record_key_fields, *config.ordering_fields) if row.get(n) is None
                ]
                reason = f"null record key / ordering field(s) {nulls}"
            bad.append(BadRecord(number, reason, row))
    for f in good.schema:  # the first good type of a new column is the reference for the rest
        if f.name != _RECORD_COL and not pa.types.is_null(f.type):
            reference.setdefault(f.name, f.type)
    return good, bad


def _read_checked(
    paths: Sequence[Path], config: HudiTableConfig
) -> tuple[pa.Table, dict[Path, tuple[list[Any], bool]], set[Path]]:
    """Bronze files read like :func:`read_bronze_arrow`, bad input separated instead of raising.

    Returns:
        The events to apply (``_bronze_record`` removed), the bad input per file as
        ``(records, whole file unreadable)``, and the files that have events to apply.
    """
    from helpers.quarantine import BadRecord

    reference = _stored_types(config)
    tables: list[pa.Table] = []
    bad: dict[Path, tuple[list[Any], bool]] = {}
    with_good: set[Path] = set()
    for path in paths:
        records: list[Any] = []
        if path.suffix == ".jsonl":
            bad_lines: list[tuple[int, str]] = []
            parts = _jsonl_tables(path, bad_lines)
            records += [BadRecord(number, reason) for number, reason in bad_lines]
        else:
            try:
                parts = [_avro_table(path, numbered=True)]
            except _UnreadableBronze as exc:
                reason = (
                    f"unreadable Avro file ({exc}); Bronze files are written atomically, so this is "
                    "corruption after the write: the whole file is set aside, no block of it is applied"
                )
                bad[path] = ([BadRecord(None, reason)], True)
                continue
        for part in parts:
            good, wrong = _check_events(part, config, reference)
            records += wrong
            if good.num_rows:
                tables.append(good.drop_columns([_RECORD_COL]))
                with_good.add(path)
        if records:
            bad[path] = (sorted(records, key=lambda r: r.record or 0), False)
    if not tables:
        return pa.table({}), bad, with_good
    return pa.concat_tables(tables, promote_options="permissive"), bad, with_good


def read_bronze_spark(spark: Any, paths: Sequence[Path]) -> pa.Table:
    """Bronze files read by Spark: Avro through :func:`helpers.silver_spark.bronze_dataframe` (one
    read per writer schema, united by name so columns added later are null in older events), JSON
    lines through :func:`read_bronze_arrow` (their envelopes need the per-line schema). Returned
    as Arrow (the driver-side writer takes it; inputs here are one round of changes)."""
    from helpers.silver_spark import bronze_dataframe

    avro = [BronzeObject(p.name, str(p), 0.0) for p in paths if p.suffix == ".avro"]
    tables = []
    if avro:
        # (LocalBronze.head reads each object's own path; the root only serves listing)
        tables.append(bronze_dataframe(spark, LocalBronze(Path("/")), avro).toArrow())
    others = [p for p in paths if p.suffix != ".avro"]
    if others:
        tables.append(read_bronze_arrow(others))
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def fill_unavailable(
    events: pa.Table, config: HudiTableConfig, placeholder: str = UNAVAILABLE_VALUE
) -> tuple[pa.Table, int, int]:
    """Replace PostgreSQL's TOAST placeholders with the value the column last had.

    Under ``REPLICA IDENTITY DEFAULT`` an update that leaves a large (TOASTed) value untouched
    carries ``placeholder`` instead of it (bytes columns: its UTF-8). Like Hudi's
    ``PostgresDebeziumAvroPayload``, the column keeps its previous value: the latest earlier event
    of the same key in this batch (by log position), else the row stored in the table.

    Args:
        events: one batch of flattened change events (record key and ordering fields present).
        config: the Silver table's configuration.
        placeholder: Debezium's ``unavailable.value.placeholder``.

    Returns:
        The batch, the number of values filled and the number left null because neither the
        batch nor the table held the key (logged as a warning; the source still has them).
    """
    masks: dict[str, Any] = {}
    for field in events.schema:
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            value: Any = placeholder
        elif pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
            value = placeholder.encode()
        else:
            continue
        equal = pa.compute.equal(events.column(field.name), pa.scalar(value, field.type))
        mask = pa.compute.fill_null(equal, False)
        if pa.compute.any(mask).as_py():
            masks[field.name] = mask.to_numpy(zero_copy_only=False)
    if not masks:
        return events, 0, 0
    from helpers.hudi.format import RECORD_KEY_COL, record_keys

    keys = record_keys(events, config).to_pylist()
    order_cols = [events.column(f).to_pylist() for f in config.ordering_fields if f in events.column_names]
    order = sorted(range(events.num_rows), key=lambda i: (keys[i], *(c[i] for c in order_cols), i))
    earlier: dict[str, set[str]] = {name: set() for name in masks}
    lookup: set[str] = set()
    for i in order:  # keys whose first placeholder has no full value before it in this batch
        for name, mask in masks.items():
            if mask[i] and keys[i] not in earlier[name]:
                lookup.add(keys[i])
            elif not mask[i]:
                earlier[name].add(keys[i])
    stored: dict[str, dict[str, Any]] = {}
    if lookup and completed_instants(config.base_path):
        from helpers.hudi.read import read_snapshot

        snap = read_snapshot(config.base_path, columns=[RECORD_KEY_COL, *masks])
        snap = snap.filter(pa.compute.is_in(snap.column(RECORD_KEY_COL), value_set=pa.array(sorted(lookup))))
        stored = {r[RECORD_KEY_COL]: r for r in snap.to_pylist()}
    filled = unresolved = 0
    for name, mask in masks.items():
        values = events.column(name).to_pylist()
        last: dict[str, Any] = {k: r[name] for k, r in stored.items()}
        for i in order:
            if not mask[i]:
                last[keys[i]] = values[i]
            elif keys[i] in last:
                values[i] = last[keys[i]]
                filled += 1
            else:
                values[i] = None
                unresolved += 1
        index = events.schema.get_field_index(name)
        field = events.schema.field(index)
        events = events.set_column(index, field, pa.array(values, field.type))
    if unresolved:
        log.warning(
            "%s: %d TOAST placeholder value(s) for keys not in the table or this batch were left null;"
            " set REPLICA IDENTITY FULL on the source table to carry full values",
            config.table_name,
            unresolved,
        )
    return events, filled, unresolved


def _prepare(events: pa.Table) -> pa.Table:
    deleted = pa.compute.equal(events.column("__deleted"), "true")
    events = events.drop_columns(["__deleted"])
    return events.append_column("_hoodie_is_deleted", pa.compute.fill_null(deleted, False))


def ingest_table(params: WorkbookParams, table: SilverTableParams) -> IngestResult:
    """Ingest the table's new Bronze files (see the module docstring); a no-op when none are new.

    Bad input (an unreadable file, an event whose schema no longer matches the table, an unknown
    ``__op``, a missing or null key / ordering field) is set aside under
    ``<lake.silver>/_errors/<table>/`` with the reason (:mod:`helpers.quarantine`), counted in
    ``quarantined`` and logged as a warning; the rest is ingested. The record of a file is written
    before the commit that takes the file, and named by it, so a crash in between rewrites the
    same record on the next run. With ``silver.reader: spark`` bad input raises instead.

    Raises:
        HudiError: when Bronze cannot be opened (e.g. permissions: not bad input, nothing is set
            aside) or the write fails (nothing is committed then).
    """
    from helpers.quarantine import quarantine_dir, write_quarantine

    topic = topic_of(params, table)
    config = table_config(params, table)
    os.makedirs(Path(config.base_path, ".hoodie"), exist_ok=True)
    with table_lock(config):  # checkpoint read and commit under one lock: two runs never overlap
        objects, state = pending_bronze(params, table)
        new = [Path(o.uri) for o in objects]
        if not new:
            return IngestResult(table.name, 0, 0, None)
        bad: dict[Path, tuple[list[Any], bool]] = {}
        if params.silver.reader == "spark":
            from helpers.spark import build_spark_session

            raw = read_bronze_spark(build_spark_session(), new)
        else:
            try:
                raw, bad, with_good = _read_checked(new, config)
            except OSError as exc:
                raise HudiError(f"Failed to read Bronze of {topic} for {table.name}: {exc}") from exc
        quarantined = 0
        if bad:
            directory = quarantine_dir(params, table.name)
            for path, (records, whole) in bad.items():
                write_quarantine(
                    directory,
                    table=table.name,
                    topic=topic,
                    bronze_file=path,
                    records=records,
                    whole_file=whole,
                    settled=path not in with_good,
                )
                quarantined += len(records)
            log.warning(
                "%s: set aside %d bad input(s) from %d of %d Bronze file(s) of %s in %s (reasons there;"
                " helpers.quarantine.quarantine_frame lists them); the rest is ingested",
                table.name,
                quarantined,
                len(bad),
                len(new),
                topic,
                directory,
            )
        if raw.num_rows == 0:  # only bad input: the records mark those files taken
            return IngestResult(table.name, len(new), 0, None, quarantined=quarantined)
        events = _prepare(raw)
        missing = [
            f for f in (*config.ordering_fields, *config.record_key_fields) if f not in events.column_names
        ]
        if missing:
            raise HudiError(f"Failed to ingest {topic} into {table.name}: events lack {missing}")
        events, filled, unresolved = fill_unavailable(events, config)
        checkpoint = {FILES_KEY: json.dumps(sorted(p.name for p in new)), CHECKPOINT_KEY: state.to_json()}
        if bad:
            checkpoint[QUARANTINE_KEY] = json.dumps({p.name: len(r) for p, (r, _) in sorted(bad.items())})
        late, read_events = 0, events.num_rows
        if config.delete_mode == "hard":  # deleted keys remembered: a late older change is dropped
            stones_file = tombstone_file_of(local_commit_metadata(config.base_path))
            stones = read_tombstones(config.base_path, stones_file, config)
            events, late = drop_late_events(events, config, stones)
            after = next_tombstones(events, config, stones, time.time(), params.silver.tombstone_retention_s)
            if not after.equals(stones):
                stones_file = write_tombstones(config.base_path, after) if after.num_rows else ""
            checkpoint[TOMBSTONES_KEY] = stones_file
            if late:
                log.info("%s: dropped %d change(s) older than their key's delete", table.name, late)
        commit = write_arrow(events, config, "upsert", extra_metadata=checkpoint, locked=True)
        if config.delete_mode == "hard":
            prune_tombstone_files(config.base_path, keep=checkpoint[TOMBSTONES_KEY])
    return IngestResult(
        table.name,
        len(new),
        read_events,
        commit.instant,
        commit.num_inserts,
        commit.num_updates,
        commit.num_deletes,
        filled,
        unresolved,
        quarantined,
        late,
    )


def ingest_all(params: WorkbookParams, names: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`ingest_table` for every configured table (or those named); one row per table."""
    rows = []
    for table in params.silver.tables:
        if names is None or table.name in names:
            rows.append(ingest_table(params, table).__dict__)
    return pd.DataFrame(rows)


def silver_vs_source(params: WorkbookParams, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Each Silver table (through the official reader) against its local source table, row by row.

    Returns:
        One row per table: ``source_rows``, ``silver_rows``, ``equal`` (same keys, every source
        column equal; JSON compared parsed).
    """
    from helpers.capture.api import _source_table, rows_equal_source
    from helpers.hudi.read import read_snapshot
    from helpers.stack import LocalStack

    stack = LocalStack(params)
    out = []
    for table in params.silver.tables:
        if names is not None and table.name not in names:
            continue
        sp = params.source(table.source)
        engine = "postgres" if sp.engine == "postgres" else "mysql"
        source = _source_table(stack, engine, sp.database, sp.namespace, table.table)
        base = table_config(params, table).base_path
        silver = (
            read_snapshot(base).to_pylist() if Path(base, ".hoodie", "hoodie.properties").exists() else []
        )
        out.append(
            {
                "table": table.name,
                "source_rows": len(source),
                "silver_rows": len(silver),
                "equal": rows_equal_source(source, silver, table.record_key),
            }
        )
    return pd.DataFrame(out)


def silver_tables_frame(params: WorkbookParams) -> pd.DataFrame:
    """Per Silver table: type, commits, rows (official reader), file groups and bytes."""
    from helpers.hudi.inspect import table_size, table_timeline
    from helpers.hudi.read import read_snapshot

    rows = []
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        if not Path(base, ".hoodie", "hoodie.properties").exists():
            rows.append({"table": table.name, "type": table.table_type, "commits": 0, "rows": 0})
            continue
        timeline = table_timeline(base)
        size = table_size(base).iloc[0]
        rows.append(
            {
                "table": table.name,
                "type": table.table_type,
                "commits": int((timeline["state"] == "COMPLETED").sum()),
                "rows": read_snapshot(base, columns=["_hoodie_record_key"]).num_rows,
                "file_groups": int(size["file_groups"]),
                "data_bytes": int(size["data_bytes"]),
            }
        )
    return pd.DataFrame(rows)


def wait_for_job_round(job: Any, timeout_s: float = 120.0) -> dict[str, Any]:
    """Wait until the continuous job has finished a round after now; its status.

    Raises:
        HudiError: when the job dies or does not finish a round in time.
    """
    import time

    start = job.status().get("loops", 0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status: dict[str, Any] = job.status()
        if status.get("state") == "DEAD":
            raise HudiError(
                f"Failed to run the continuous Silver job: it died; see {job.directory / 'job.log'}"
            )
        if status.get("loops", 0) > start:
            return status
        time.sleep(0.2)
    raise HudiError(f"Failed to run the continuous Silver job: no round finished in {timeout_s:.0f} s")


def register_catalog(params: WorkbookParams, *, glue: Any = None) -> pd.DataFrame:
    """Register every Silver table: in the local catalog file, and in Glue when ``glue`` is given
    (AWS: ``boto3.client("glue")``; database ``<project>_silver``).

    Returns:
        One row per catalog entry: ``name``, ``hudi_table``, ``query_type``, ``glue`` outcome.
    """
    from helpers.catalog import catalog_tables, register_glue, register_local
    from helpers.hudi.read import read_snapshot

    database = f"{params.project}_silver"
    entries = []
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        if not Path(base, ".hoodie", "hoodie.properties").exists():
            continue
        schema = read_snapshot(base).schema
        entries += catalog_tables(table.name, base, schema, table.table_type, table.partition)
    register_local(params.path(params.lake.silver) / "_catalog.json", database, entries)
    outcome = register_glue(glue, database, entries) if glue is not None else ["" for _ in entries]
    return pd.DataFrame(
        [
            {"name": e.name, "hudi_table": e.hudi_table, "query_type": e.query_type, "glue": o}
            for e, o in zip(entries, outcome, strict=True)
        ]
    )
