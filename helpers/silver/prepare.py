"""Bronze events into the rows Hudi writes: the ordering position, deletes, TOAST placeholders filled,
the newest change per key."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from helpers.bronze.events import UNAVAILABLE_VALUE
from helpers.errors import HudiError
from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD, HudiTableConfig
from helpers.hudi.keys import RECORD_KEY_COL, record_keys
from helpers.hudi.timeline import completed_instants
from helpers.silver.tables import (
    POSITION_COLUMN,
    POSITION_FIELDS,
)

log = logging.getLogger(__name__)

__all__ = ["fill_unavailable", "latest_per_key", "position_column"]


def _padded(column: pa.ChunkedArray, width: int) -> pa.ChunkedArray:
    return pc.utf8_lpad(column.cast(pa.string()), width=width, padding="0")


def position_column(events: pa.Table, engine: str, fields: tuple[str, ...]) -> pa.ChunkedArray:
    """``_cdc_position`` of each event: the source's log position as one sortable string (module
    docstring, step 3); a configured single ``ordering`` field is used as it is.

    Raises:
        HudiError: for an unknown engine.
    """
    if fields != POSITION_FIELDS.get(engine):
        return events.column(fields[0])
    if engine == "postgres":
        return _padded(events.column("__lsn"), 20)
    if engine in ("mysql", "mariadb"):
        files = events.column("__file").cast(pa.string())
        number = pc.utf8_lpad(
            pc.replace_substring_regex(files, pattern=r"^.*\.", replacement=""), width=10, padding="0"
        )
        return pc.binary_join_element_wise(
            number, _padded(events.column("__pos"), 20), _padded(events.column("__row"), 10), "."
        )
    if engine == "sqlserver":
        return pc.binary_join_element_wise(
            events.column("__commit_lsn").cast(pa.string()),
            events.column("__change_lsn").cast(pa.string()),
            _padded(events.column("__event_serial_no"), 10),
            ".",
        )
    raise HudiError(f"Failed to order change events: unknown source engine {engine!r}")


def prepare_events(
    events: pa.Table, config: HudiTableConfig, engine: str, positions: tuple[str, ...]
) -> pa.Table:
    """Add ``_cdc_position`` and the delete marker (hard: ``_hoodie_is_deleted``; soft: boolean
    ``__deleted``)."""
    if config.precombine_field == POSITION_COLUMN:
        events = events.append_column(POSITION_COLUMN, position_column(events, engine, positions))
    deleted = pc.fill_null(pc.equal(events.column("__deleted").cast(pa.string()), "true"), False)
    events = events.drop_columns(["__deleted"])
    if config.delete_mode == "soft":
        return events.append_column(SOFT_DELETE_FIELD, deleted)
    return events.append_column(DELETE_MARKER_FIELD, deleted)


def fill_unavailable(
    events: pa.Table,
    config: HudiTableConfig,
    stored_rows: StoredRows | None = None,
    placeholder: str = UNAVAILABLE_VALUE,
) -> tuple[pa.Table, int, int]:
    """Replace PostgreSQL's TOAST placeholders with the value the column last had.

    Under ``REPLICA IDENTITY DEFAULT`` an update that leaves a large (TOASTed) value untouched
    carries ``placeholder`` instead of it (bytes columns: its UTF-8). Like Hudi's
    ``PostgresDebeziumAvroPayload``, the column keeps its previous value: the latest earlier event
    of the same key in this batch (by the ordering field), else the row stored in the table.

    Args:
        events: one batch of prepared change events (record key and ordering field present).
        config: the Silver table's configuration.
        stored_rows: ``(record keys, columns) -> {record key: row}`` of the stored table; called
            only when the batch alone cannot resolve a placeholder (None: nothing stored).
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
        mask = pc.fill_null(pc.equal(events.column(field.name), pa.scalar(value, field.type)), False)
        if pc.any(mask).as_py():
            masks[field.name] = mask.to_numpy(zero_copy_only=False)
    if not masks:
        return events, 0, 0
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
    stored = stored_rows(sorted(lookup), list(masks)) if lookup and stored_rows is not None else {}
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


def latest_per_key(events: pa.Table, config: HudiTableConfig) -> pa.Table:
    """The newest event of each record key (by the ordering field; the later row on a tie), and
    in hard-delete mode without the keys whose newest event is a delete: what an upsert of
    ``events`` into an empty table leaves."""
    if events.num_rows == 0:
        return events
    keys = record_keys(events, config).combine_chunks()
    order_field = config.precombine_field
    sort_keys = [("__key", "ascending")]
    work = pa.table({"__key": keys, "__row": pa.array(range(events.num_rows), pa.int64())})
    if order_field is not None:
        work = work.append_column("__order", events.column(order_field))
        sort_keys.append(("__order", "ascending"))
    sort_keys.append(("__row", "ascending"))
    ordered = work.take(pc.sort_indices(work, sort_keys=sort_keys))
    sorted_keys = ordered.column("__key").combine_chunks()
    last = pc.not_equal(sorted_keys.slice(0, len(sorted_keys) - 1), sorted_keys.slice(1))
    last = pa.concat_arrays([last, pa.array([True])])
    rows = ordered.column("__row").combine_chunks().filter(last)
    latest = events.take(pc.take(rows, pc.sort_indices(rows)))
    if config.delete_mode == "hard" and DELETE_MARKER_FIELD in latest.column_names:
        latest = latest.filter(pc.invert(pc.fill_null(latest.column(DELETE_MARKER_FIELD), False)))
    return latest


def stored_rows_reader(spark: Any, config: HudiTableConfig) -> StoredRows:
    """Stored rows of some keys, read through the official datasource."""

    def read(keys: Sequence[str], columns: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not completed_instants(config.base_path):
            return {}
        from pyspark.sql import functions as F

        frame = (
            read_hudi_df(spark, config.base_path)
            .where(F.col(RECORD_KEY_COL).isin(list(keys)))
            .select(RECORD_KEY_COL, *columns)
        )
        return {row[RECORD_KEY_COL]: row.asDict() for row in frame.collect()}

    return read


StoredRows = Callable[[Sequence[str], Sequence[str]], dict[str, dict[str, Any]]]
