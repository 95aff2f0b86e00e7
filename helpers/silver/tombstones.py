"""Tombstones of hard-deleted keys, so a late older change cannot bring a deleted row back.

Hard-delete tables keep each deleted key with the ordering value of its delete for
``silver.tombstone_retention_s`` (:func:`next_tombstones`) and drop changes of that key that are
not newer (:func:`drop_late_events`). The state is a Parquet file named in the commit metadata;
why and how: ``docs/architecture.md``, "Silver ingestion".
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from helpers.errors import HudiError, WorkbookError
from helpers.hudi.config import DELETE_MARKER_FIELD, HudiTableConfig
from helpers.hudi.keys import RECORD_KEY_COL, record_keys
from helpers.lakefs import LakeStore, join, open_store

__all__ = [
    "TOMBSTONES_KEY",
    "drop_late_events",
    "next_tombstones",
    "prune_tombstone_files",
    "read_tombstones",
    "tombstone_file_of",
    "tombstone_folder",
    "write_tombstones",
]

TOMBSTONES_KEY = "workbook.tombstones.file"
DELETED_AT = "_deleted_at"


def tombstone_folder(base_path: str) -> str:
    """Where a table's tombstone files live: ``<parent>/.workbook/tombstones/<table folder>``."""
    parent, name = str(base_path).rstrip("/").rsplit("/", 1)
    return join(parent, ".workbook", "tombstones", name)


def tombstone_file_of(metadata_newest_first: Iterable[dict[str, Any]]) -> str:
    """The tombstone file named by the newest commit naming one ("" for none)."""
    for meta in metadata_newest_first:
        extra = meta.get("extraMetadata") or {}
        if TOMBSTONES_KEY in extra:
            return str(extra[TOMBSTONES_KEY])
    return ""


def _empty(config: HudiTableConfig, schema: pa.Schema | None = None) -> pa.Table:
    fields = [pa.field(RECORD_KEY_COL, pa.string())]
    for name in config.ordering_fields:
        fields.append(schema.field(name) if schema is not None else pa.field(name, pa.null()))
    fields.append(pa.field(DELETED_AT, pa.float64()))
    return pa.schema(fields).empty_table()


def read_tombstones(
    base_path: str, name: str, config: HudiTableConfig, store: LakeStore | None = None
) -> pa.Table:
    """The tombstones of a state file ("" for none: an empty table).

    Raises:
        HudiError: when a named file is missing or unreadable (the table's state is damaged).
    """
    if not name:
        return _empty(config)
    location = join(tombstone_folder(base_path), name)
    try:
        return pq.read_table(io.BytesIO((store or open_store(tombstone_folder(base_path))).read(location)))
    except (OSError, WorkbookError, pa.ArrowException) as exc:
        raise HudiError(
            f"Failed to read the tombstones {location} of table {config.table_name}: {exc}"
        ) from None


def _ordering_rows(table: pa.Table, fields: tuple[str, ...]) -> list[tuple[Any, ...]]:
    columns = [table.column(f).to_pylist() for f in fields]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(table.num_rows)]


def drop_late_events(events: pa.Table, config: HudiTableConfig, stones: pa.Table) -> tuple[pa.Table, int]:
    """Drop the changes of tombstoned keys whose ordering values are not greater than the delete's.

    Returns:
        The events kept and how many were dropped.
    """
    if not stones.num_rows or not events.num_rows:
        return events, 0
    keys = record_keys(events, config).combine_chunks()
    position = pc.index_in(keys, value_set=stones.column(RECORD_KEY_COL).combine_chunks())
    matched = pc.is_valid(position).to_numpy(zero_copy_only=False)
    if not matched.any():
        return events, 0
    fields = config.ordering_fields
    stone_order = _ordering_rows(stones.take(pc.drop_null(position)), fields)
    event_order = _ordering_rows(events.filter(pa.array(matched)), fields)
    late = [not (e > s) for e, s in zip(event_order, stone_order, strict=True)]
    keep = matched.copy()
    keep[matched] = [not x for x in late]
    keep |= ~matched
    return events.filter(pa.array(keep)), int(sum(late))


def next_tombstones(
    events: pa.Table, config: HudiTableConfig, stones: pa.Table, now: float, retention_s: float
) -> pa.Table:
    """The state after a batch: keys whose newest change in it is a delete get a tombstone with
    that delete's ordering values; keys with a newer non-delete lose theirs; tombstones older than
    ``retention_s`` are dropped.

    Args:
        events: the batch (after :func:`drop_late_events`), with ``_hoodie_is_deleted``.
        config: the table's configuration.
        stones: the state before.
        now: the wall-clock time of this round (epoch s).
        retention_s: how long a tombstone is kept.
    """
    fields = config.ordering_fields
    latest: dict[str, tuple[tuple[Any, ...], bool]] = {}
    if events.num_rows and DELETE_MARKER_FIELD in events.column_names:
        # only keys with a delete in this batch or a tombstone can change the state
        all_keys = record_keys(events, config).combine_chunks()
        deleting = pc.fill_null(events.column(DELETE_MARKER_FIELD), False).combine_chunks()
        wanted = pa.concat_arrays([all_keys.filter(deleting), stones.column(RECORD_KEY_COL).combine_chunks()])
        events = events.filter(pc.is_in(all_keys, value_set=wanted))
    if events.num_rows:
        keys = record_keys(events, config).to_pylist()
        deleted = (
            pc.fill_null(events.column(DELETE_MARKER_FIELD), False).to_pylist()
            if DELETE_MARKER_FIELD in events.column_names
            else [False] * events.num_rows
        )
        for key, order, is_delete in zip(keys, _ordering_rows(events, fields), deleted, strict=True):
            if key not in latest or order >= latest[key][0]:
                latest[key] = (order, bool(is_delete))
    rows: dict[str, tuple[tuple[Any, ...], float]] = {}
    for key, order, at in zip(
        stones.column(RECORD_KEY_COL).to_pylist(),
        _ordering_rows(stones, fields),
        stones.column(DELETED_AT).to_pylist(),
        strict=True,
    ):
        if now - at <= retention_s:
            rows[key] = (order, at)
    for key, (order, is_delete) in latest.items():
        if is_delete:
            rows[key] = (order, now)
        elif key in rows and order > rows[key][0]:
            del rows[key]
    schema = _empty(config, events.schema if events.num_rows else None).schema
    if not events.num_rows and stones.num_rows:
        schema = stones.schema
    data: dict[str, list[Any]] = {RECORD_KEY_COL: list(rows)}
    for i, name in enumerate(fields):
        data[name] = [order[i] for order, _ in rows.values()]
    data[DELETED_AT] = [at for _, at in rows.values()]
    return pa.Table.from_pydict(data, schema=schema)


def write_tombstones(base_path: str, stones: pa.Table, store: LakeStore | None = None) -> str:
    """Write a state file atomically; its name, to put in the commit metadata."""
    name = f"tombstones-{uuid.uuid4().hex}.parquet"
    buffer = io.BytesIO()
    pq.write_table(stones, buffer)
    folder = tombstone_folder(base_path)
    store = store or open_store(folder)
    relative = join(folder, name)[len(store.root) :].lstrip("/")
    store.write(relative, buffer.getvalue())
    return name


def prune_tombstone_files(base_path: str, keep: str, store: LakeStore | None = None) -> int:
    """Remove state files other than ``keep`` (call under the table lock, after the commit)."""
    folder = tombstone_folder(base_path)
    store = store or open_store(folder)
    relative = folder[len(store.root) :].lstrip("/")
    removed = 0
    for entry in store.list(relative):
        if (
            entry.name.startswith("tombstones-")
            and entry.name != keep
            or entry.name.startswith(".tombstones-")
        ):
            store.delete(entry.location)
            removed += 1
    return removed
