"""A record across instants: its versions, its state at named points, the increments around a
change, and what changed between two instants (diffs).

Deletes: the official reader emits no deletes (a hard-deleted record simply disappears), so
:func:`record_history` reports a ``delete`` version at the commit where the key vanished (from
:func:`helpers.query.changefeed.versions`). Soft-delete tables (``delete_mode: soft``) keep the
row with ``__deleted = true``; such a version is a ``delete``.

Example:
    >>> diff(params, "sale", before, after)                              # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from helpers.errors import TimeTravelError
from helpers.hudi.config import SOFT_DELETE_FIELD
from helpers.instants import InstantInput, instant_to_datetime
from helpers.params import SilverTableParams, WorkbookParams
from helpers.query.changefeed import cdc_enabled, changes, versions
from helpers.query.timetravel import (
    COMMIT_TIME,
    Instants,
    as_of,
    incremental,
    is_soft_deleted,
    plain_value,
    resolve_instant,
)
from helpers.silver.tableref import RecordKey, key_values, silver_table, table_base_path

__all__ = ["as_of_points", "diff", "diff_steps", "increments_around", "record_history"]

_CDC_PREFIX = "__"
_POSITION = "_cdc_position"  # the precombine field Silver builds from the log position


def _is_cdc_column(name: str) -> bool:
    """Debezium's ``__*`` columns and Silver's ``_cdc_position``: they differ for every change."""
    return name.startswith(_CDC_PREFIX) or name == _POSITION


def record_history(
    params: WorkbookParams, table: str | SilverTableParams, key: RecordKey, *, spark: Any = None
) -> pd.DataFrame:
    """Every version of one record across the retained commits, oldest first.

    Built on Hudi's change feed for Copy-on-Write tables (its CDC log), on the timeline for
    Merge-on-Read ones (:func:`helpers.query.changefeed.versions`).

    Args:
        params: Workbook parameters.
        table: Silver table name.
        key: The record key (value, or ``{column: value}``).
        spark: the session for the change feed (default: built from ``params``).

    Returns:
        One row per version: ``commit_time`` (the instant that wrote it), ``committed_at`` (UTC),
        ``operation`` (``insert``, ``update`` or ``delete``; a delete's row holds the record as it
        was before it), then the table's columns.

    Raises:
        TimeTravelError: for an unknown table or a bad key.
    """
    spec = silver_table(params, table)
    key_values(spec, key)
    found = versions(params, spec, key, spark=spark)
    columns: list[str] = []
    for version in found:
        columns += [c for c in version.values if c not in columns]
    rows = [
        {
            "commit_time": v.instant,
            "committed_at": instant_to_datetime(v.instant),
            "operation": v.operation,
            **{c: v.values.get(c) for c in columns},
        }
        for v in found
    ]
    frame = pd.DataFrame(rows, columns=["commit_time", "committed_at", "operation", *columns], dtype=object)
    frame["committed_at"] = pd.to_datetime(frame["committed_at"], utc=True)
    return frame


def diff(
    params: WorkbookParams,
    table: str | SilverTableParams,
    before: InstantInput,
    after: InstantInput | None = None,
    *,
    cdc_columns: bool = False,
    spark: Any = None,
) -> pd.DataFrame:
    """What changed between two instants: inserted, deleted and updated records (long format).

    Copy-on-Write tables answer from Hudi's change feed of ``(before, after]``: for each record it
    touched, the before image of its first change against the after image of its last. Merge-on-
    Read tables (no readable feed) compare the two snapshots, narrowed to the keys the increment
    wrote plus the keys that disappeared.

    Args:
        params: Workbook parameters.
        table: Silver table name.
        before: Earlier instant or time.
        after: Later instant or time; None: the latest commit.
        cdc_columns: Also compare Debezium's ``__*`` columns (log positions, source times) and
            ``_cdc_position``, which differ for every change; the default compares the data columns only. A
            soft-deleted record (``__deleted = true``) counts as deleted either way.

    Returns:
        One row per changed column of each changed record: ``change`` (``insert``, ``delete`` or
        ``update``), the record key columns, ``column``, ``before``, ``after`` (an insert's
        ``before`` and a delete's ``after`` are null), sorted by key and column.

    Raises:
        TimeTravelError: for an unknown table, an unreadable instant, or ``after`` before ``before``.
    """
    spec = silver_table(params, table)
    start = resolve_instant(params, spec, before)
    stop = resolve_instant(params, spec, after) if after is not None else None
    if stop is not None and stop < start:
        raise TimeTravelError(f"Failed to diff {spec.name}: {stop} is before {start}")

    if cdc_enabled(table_base_path(params, spec)):
        return _diff_from_feed(params, spec, start, stop, cdc_columns, spark)
    old = as_of(params, spec, start)
    new = as_of(params, spec, stop)
    keys = list(spec.record_key)
    compared = [
        c
        for c in old.columns
        if c != COMMIT_TIME and c not in keys and (cdc_columns or not _is_cdc_column(c))
    ]
    if SOFT_DELETE_FIELD in old.columns:
        old = old[old[SOFT_DELETE_FIELD].astype(str).str.lower() != "true"]
        new = new[new[SOFT_DELETE_FIELD].astype(str).str.lower() != "true"]
        compared = [c for c in compared if c != SOFT_DELETE_FIELD]
    touched = new[new[COMMIT_TIME] > start]
    gone = old.merge(new[keys], on=keys, how="left", indicator=True)
    gone = gone[gone["_merge"] == "left_only"].drop(columns="_merge")
    candidates = touched.merge(old, on=keys, how="left", suffixes=("", "__before"), indicator=True)
    rows: list[dict[str, Any]] = []
    for record in candidates.to_dict("records"):
        ident = {k: record[k] for k in keys}
        if record["_merge"] == "left_only":
            rows += _record_changes(ident, None, record, compared)
        else:
            rows += _record_changes(ident, {c: record[f"{c}__before"] for c in compared}, record, compared)
    for record in gone.to_dict("records"):
        rows += _record_changes({k: record[k] for k in keys}, record, None, compared)
    return _diff_frame(rows, keys)


def _record_changes(
    ident: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    columns: Sequence[str],
) -> list[dict[str, Any]]:
    """The diff rows of one record: every column of an insert or a delete, the changed columns
    of an update."""
    if old is None:
        assert new is not None
        return [{"change": "insert", **ident, "column": c, "before": None, "after": new[c]} for c in columns]
    if new is None:
        return [{"change": "delete", **ident, "column": c, "before": old[c], "after": None} for c in columns]
    out = []
    for c in columns:
        was, now = plain_value(old.get(c)), plain_value(new.get(c))
        if was != now:
            out.append({"change": "update", **ident, "column": c, "before": was, "after": now})
    return out


def _diff_frame(rows: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["change", *keys, "column", "before", "after"])
    for column in ("before", "after"):
        frame[column] = frame[column].map(plain_value).astype(object)
    return frame.sort_values([*keys, "column"]).reset_index(drop=True)


def _diff_from_feed(
    params: WorkbookParams,
    spec: SilverTableParams,
    start: str,
    stop: str | None,
    cdc_columns: bool,
    spark: Any,
) -> pd.DataFrame:
    feed = changes(params, spec, start, stop, spark=spark)
    keys = list(spec.record_key)
    first: dict[tuple[Any, ...], Any] = {}
    last: dict[tuple[Any, ...], Any] = {}
    for row in feed.to_dict("records"):
        ident = tuple(row[k] for k in keys)
        first.setdefault(ident, row)
        last[ident] = row
    soft = spec.delete_mode == "soft"

    def live(image: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if image is None or (soft and is_soft_deleted(image)):
            return None
        return image

    out: list[dict[str, Any]] = []
    for ident, row in first.items():
        old = live(row["before"])
        new = live(last[ident]["after"])
        if old is None and new is None:
            continue
        columns = [
            c
            for c in (new or old or {})
            if c not in keys and c != SOFT_DELETE_FIELD and (cdc_columns or not _is_cdc_column(c))
        ]
        out += _record_changes(dict(zip(keys, ident, strict=True)), old, new, columns)
    return _diff_frame(out, keys)


def diff_steps(
    params: WorkbookParams,
    tables: Sequence[str],
    steps: Mapping[str, tuple[Mapping[str, InstantInput], Mapping[str, InstantInput]]],
) -> pd.DataFrame:
    """:func:`diff` of each table across named steps, one frame.

    Args:
        steps: step name -> (instants before it, instants after it), each by table name.

    Returns:
        The diff rows with ``table`` and ``step`` columns, step by step.
    """
    frames = [
        diff(params, t, before[t], after[t]).assign(table=t, step=step)
        for step, (before, after) in steps.items()
        for t in tables
    ]
    return pd.concat(frames, ignore_index=True)


def as_of_points(
    params: WorkbookParams,
    tables: Sequence[str],
    points: Mapping[str, Instants],
    key: RecordKey | None = None,
) -> pd.DataFrame:
    """Each table (or one record) as of named points in time, one frame.

    Args:
        points: point name -> the instant of each table there (``{"before change": {"sale": ...}}``).

    Returns:
        The :func:`as_of` rows with ``table``, ``point`` and ``instant`` columns, point by point.
    """
    frames = [
        as_of(params, t, instants[t], key).assign(table=t, point=point, instant=instants[t])
        for point, instants in points.items()
        for t in tables
    ]
    return pd.concat(frames, ignore_index=True)


def increments_around(
    params: WorkbookParams,
    tables: Sequence[str],
    before: Mapping[str, InstantInput],
    after: Mapping[str, InstantInput],
    key: RecordKey | None = None,
    columns: Sequence[str] = (),
) -> pd.DataFrame:
    """The increments before, around and after a change, per table.

    The ranges are ``before`` (from the start to the table's instant in ``before``), ``around``
    (from there to its instant in ``after``) and ``after`` (from there to the latest commit).

    Returns:
        One row per table and range: ``table``, ``range``, ``begin``, ``end`` (``latest``),
        ``rows``, then the first row's value of each of ``columns`` (None without rows).
    """
    out = []
    for t in tables:
        for name, begin, end in (
            ("before", "000", before[t]),
            ("around", before[t], after[t]),
            ("after", after[t], None),
        ):
            rows = incremental(params, t, begin, end, key=key)
            first = {c: rows[c].iloc[0] if len(rows) else None for c in columns}
            out.append(
                {
                    "table": t,
                    "range": name,
                    "begin": begin,
                    "end": end or "latest",
                    "rows": len(rows),
                    **first,
                }
            )
    return pd.DataFrame(out, columns=["table", "range", "begin", "end", "rows", *columns], dtype=object)
