"""The one Bronze replay: what a table holds once every change event is applied in log order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from helpers.bronze.events import MARKER_OPS, UNAVAILABLE_VALUE, position_of
from helpers.errors import BronzeError

__all__ = ["replay", "replay_arrow"]

_PLACEHOLDERS = (UNAVAILABLE_VALUE, UNAVAILABLE_VALUE.encode())


def replay(events: Iterable[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    """The rows ``events`` leave behind: the newest event per key by log position, a TOAST
    placeholder keeping the key's previous value, deleted keys (``__deleted=true``) dropped, and
    nothing from before a TRUNCATE (a marker event, ``__op = 't'``).

    Args:
        events: decoded change events (:func:`helpers.bronze.read.read_bronze`), in any order.
        key: primary-key columns.
    """
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in sorted(events, key=position_of):
        if event.get("__op") in MARKER_OPS:  # a TRUNCATE or a re-snapshot: every row so far is gone
            latest.clear()
            continue
        k = tuple(event[c] for c in key)
        before = latest.get(k)
        if before is not None:
            event = {c: before.get(c) if v in _PLACEHOLDERS else v for c, v in event.items()}
        latest[k] = event
    return [e for e in latest.values() if e.get("__deleted") != "true"]


_POSITION_COLUMNS = (
    (("__lsn", pa.int64(), 0),),
    (("__file", pa.string(), ""), ("__pos", pa.int64(), 0), ("__row", pa.int64(), 0)),
    (
        ("__commit_lsn", pa.string(), ""),
        ("__change_lsn", pa.string(), ""),
        ("__event_serial_no", pa.int64(), 0),
    ),
)
_ORDER = "__replay_order"


def _has_placeholder(table: pa.Table) -> bool:
    for column in table.itercolumns():
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            if pc.any(pc.fill_null(pc.equal(column, UNAVAILABLE_VALUE), False)).as_py():
                return True
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            if pc.any(pc.fill_null(pc.equal(column, UNAVAILABLE_VALUE.encode()), False)).as_py():
                return True
    return False


def replay_arrow(events: pa.Table, key: Sequence[str]) -> pa.Table:
    """:func:`replay` for an Arrow table of events (:func:`helpers.bronze.read.read_bronze_arrow`),
    vectorised: a sort by log position and the last event per key; events holding a TOAST
    placeholder take :func:`replay`'s row-by-row path (the key's previous value is kept).

    Raises:
        BronzeError: when the events have no position columns.
    """
    if not events.num_rows:
        return events
    if _has_placeholder(events):
        return pa.Table.from_pylist(replay(events.to_pylist(), key), schema=events.schema)
    fields = next((f for f in _POSITION_COLUMNS if f[0][0] in events.column_names), None)
    if fields is None:
        raise BronzeError(
            f"Failed to replay events: no __lsn / __file / __commit_lsn column in {events.column_names}"
        )
    order = {
        f"{_ORDER}{i}": pc.fill_null(
            pc.cast(events.column(name), kind)
            if name in events.column_names
            else pa.nulls(events.num_rows, kind),
            default,
        )
        for i, (name, kind, default) in enumerate(fields)
    }
    numbered = pa.table({**order, _ORDER: pa.array(range(events.num_rows), pa.int64())})
    ranked = pc.sort_indices(numbered, sort_keys=[(name, "ascending") for name in [*order, _ORDER]])
    if "__op" in events.column_names:  # a TRUNCATE: only the events after the last one count
        truncates = pc.indices_nonzero(
            pc.fill_null(pc.is_in(events.column("__op").take(ranked), pa.array(MARKER_OPS)), False)
        )
        if len(truncates):
            return replay_arrow(events.take(ranked.slice(truncates[-1].as_py() + 1)), key)
    rank = pa.table(
        {
            **{k: events.column(k).take(ranked) for k in key},
            _ORDER: pa.array(range(events.num_rows), pa.int64()),
        }
    )
    last = rank.group_by(list(key), use_threads=False).aggregate([(_ORDER, "max")]).column(f"{_ORDER}_max")
    newest = pc.take(last, pc.sort_indices(last))  # each key's last event, in log order
    rows = events.take(pc.take(ranked, newest))
    if "__deleted" in rows.column_names:
        deleted = pc.fill_null(pc.equal(pc.cast(rows.column("__deleted"), pa.string()), "true"), False)
        rows = rows.filter(pc.invert(deleted))
    return rows


def redelivered(events: pa.Table, key: Sequence[str]) -> int:
    """How many events repeat one already in ``events`` (same log position and key): the change
    events an at-least-once capture delivered again; Silver takes each once. (A snapshot's reads
    share one position, so the key is part of an event's identity.)"""
    if not events.num_rows:
        return 0
    names = [n for f in _POSITION_COLUMNS for n, _, _ in f if n in events.column_names]
    if not names:
        raise BronzeError(
            f"Failed to count redeliveries: no __lsn / __file / __commit_lsn column in {events.column_names}"
        )
    identity = [*names, *(k for k in key if k not in names)]
    distinct: int = events.select(identity).group_by(identity, use_threads=False).aggregate([]).num_rows
    return int(events.num_rows) - distinct
