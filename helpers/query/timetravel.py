"""Time travel on the Silver tables: timelines, "as of" reads, increments, record history, diffs.

Everything here reads through the official Hudi reader (:mod:`helpers.hudi.read`) and returns
pandas DataFrames; instants come from each table's timeline (:func:`timeline_frame`), and any
time input is turned into an instant by :func:`helpers.instants.to_instant` (naive = UTC).

==========================  ====================================================================
function                    what it answers
==========================  ====================================================================
:func:`timeline_frame`      the table's completed commits: instant, time, operation, counts
:func:`as_of`               the table (or one record) as it was at an instant or time
:func:`incremental`         records written by the commits in ``(begin, end]``
:func:`record_history`      every version of one record: commit, operation, values (deletes too)
:func:`diff`                inserted, deleted and updated records between two instants, with the
                            before and after value of each changed column (long format)
:func:`consistent_as_of`    for several tables, the instant each shows at one wall-clock time,
                            and the skew between them
==========================  ====================================================================

Deletes: the official reader emits no deletes (a hard-deleted record simply disappears), so
:func:`record_history` reports a ``delete`` version at the commit where the key vanished, found
from the commits whose metadata (``partitionToWriteStats``) count deletes. Soft-delete tables
(``delete_mode: soft``) keep the row with ``__deleted = true``; such a version is a ``delete``.

Retention: the cleaner keeps the file slices of the last ``cleaner_commits_retained`` commits;
an instant older than the earliest retained commit cannot be read (:class:`TimeTravelError`).

The source-side helpers (:func:`source_rows`, :func:`update_source_row`, :func:`delete_source_row`,
:func:`insert_source_row`, :func:`wait_for_silver`) script a change and wait until Silver shows
it, for notebook 04 and the tests. Values are always bound parameters.

Example:
    >>> when = timeline_frame(params, "sale")["instant"].iloc[-2]       # doctest: +SKIP
    >>> as_of(params, "sale", when, key=200)                            # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from helpers.errors import TimeTravelError
from helpers.hudi.config import DELETE_MARKER_FIELD
from helpers.hudi.keys import META_COLUMNS
from helpers.hudi.read import HudiReadSpec, ReadFilter, open_table, table_arrow_schema
from helpers.hudi.timeline import completed_instants, write_stats
from helpers.instants import InstantInput, instant_to_datetime, to_instant
from helpers.params import SilverTableParams, WorkbookParams
from helpers.query.changefeed import cdc_enabled, changes, versions
from helpers.silver.tableref import (
    RecordKey,
    commit_metadata,
    earliest_retained,
    key_filters,
    key_values,
    silver_table,
    table_base_path,
)
from helpers.spark import build_spark_session

if TYPE_CHECKING:  # pragma: no cover - typing only
    from hudi import HudiTable

__all__ = [
    "COMMIT_TIME",
    "RecordKey",
    "TimeTravelError",
    "as_of",
    "consistent_as_of",
    "delete_source_row",
    "diff",
    "incremental",
    "insert_source_row",
    "readers_agree",
    "record_history",
    "restore_sample_row",
    "silver_table",
    "source_rows",
    "timeline_frame",
    "update_source_row",
    "wait_for_silver",
]

#: Hudi meta column holding the instant that wrote a record version.
COMMIT_TIME = "_hoodie_commit_time"
_META_ALL = (*META_COLUMNS, DELETE_MARKER_FIELD)
_SOFT_DELETE = "__deleted"
_CDC_PREFIX = "__"
_POSITION = "_cdc_position"  # the precombine field Silver builds from the log position


def _is_cdc_column(name: str) -> bool:
    """Debezium's ``__*`` columns and Silver's ``_cdc_position``: they differ for every change."""
    return name.startswith(_CDC_PREFIX) or name == _POSITION


# ------------------------------------------------------------------------------ tables, keys


def _to_arrow(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    tables = [pa.Table.from_batches([b]).select(schema.names) for b in batches if b.num_rows]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables, promote_options="permissive")


def _tidy(rows: pa.Table, table: SilverTableParams, meta_columns: bool) -> pd.DataFrame:
    """Drop meta columns and sort by record key in Arrow, then convert once to pandas."""
    if not meta_columns:
        rows = rows.drop_columns([c for c in _META_ALL if c in rows.column_names and c != COMMIT_TIME])
    keys = [k for k in table.record_key if k in rows.column_names]
    if keys and rows.num_rows > 1:
        rows = rows.sort_by([(k, "ascending") for k in keys])
    return rows.to_pandas()


# ------------------------------------------------------------------------------ timeline


def _progress(items: Sequence[Any], what: str, minimum: int = 50) -> Any:
    from tqdm.auto import tqdm

    return tqdm(items, desc=what, disable=len(items) < minimum, leave=False)


def timeline_frame(params: WorkbookParams, table: str | SilverTableParams) -> pd.DataFrame:
    """The table's completed data commits, oldest first.

    Args:
        params: Workbook parameters.
        table: Silver table name.

    Returns:
        One row per completed commit / deltacommit / replacecommit: ``instant``, ``action``,
        ``committed_at`` (UTC), ``operation`` (``UPSERT``, ``BULK_INSERT``, ``COMPACT``...),
        ``file_groups`` (written), ``inserts``, ``updates``, ``deletes``, ``readable`` (False for
        instants older than what the cleaner retained).

    Raises:
        TimeTravelError: if the table does not exist.
    """
    spec = silver_table(params, table)
    base = table_base_path(params, spec)
    earliest = earliest_retained(base)
    rows = []
    instants = completed_instants(base)
    for instant in _progress(instants, f"{spec.name}: commit metadata"):
        meta = commit_metadata(base, instant)
        stats = write_stats(meta)
        rows.append(
            {
                "instant": instant.timestamp,
                "action": instant.action,
                "committed_at": instant_to_datetime(instant.timestamp),
                "operation": str(meta.get("operationType") or ""),
                "file_groups": len({s.get("fileId") for s in stats}),
                "inserts": sum(int(s.get("numInserts") or 0) for s in stats),
                "updates": sum(int(s.get("numUpdateWrites") or 0) for s in stats),
                "deletes": sum(int(s.get("numDeletes") or 0) for s in stats),
                "readable": earliest is None or instant.timestamp >= earliest,
            }
        )
    columns = ["instant", "action", "committed_at", "operation", "file_groups", "inserts", "updates"]
    return pd.DataFrame(rows, columns=[*columns, "deletes", "readable"])


def _resolve(base: str, name: str, when: InstantInput) -> str:
    instant = to_instant(when)
    earliest = earliest_retained(base)
    if earliest is not None and instant < earliest:
        raise TimeTravelError(
            f"Failed to read Silver table {name} as of {instant}: the cleaner kept commits from "
            f"{earliest} on only (raise cleaner_commits_retained to keep more history)"
        )
    return instant


# ------------------------------------------------------------------------------ reads


def _read_arrow(
    hudi: HudiTable, spec: HudiReadSpec, schema: pa.Schema, filters: Sequence[ReadFilter], base: str
) -> pa.Table:
    try:
        batches = hudi.read(spec.to_read_options(filters=list(filters) or None))
    except Exception as exc:  # noqa: BLE001 - HudiCoreError is not importable by name
        raise TimeTravelError(f"Failed to read Hudi table {base}: {exc}") from exc
    return _to_arrow(batches, schema)


def _read(
    hudi: HudiTable, spec: HudiReadSpec, schema: pa.Schema, filters: Sequence[ReadFilter], base: str
) -> pd.DataFrame:
    return _read_arrow(hudi, spec, schema, filters, base).to_pandas()


def as_of(
    params: WorkbookParams,
    table: str | SilverTableParams,
    when: InstantInput | None = None,
    key: RecordKey | None = None,
    *,
    meta_columns: bool = False,
    engine: str = "rust",
    spark: Any = None,
) -> pd.DataFrame:
    """The table, or one record, as it was at an instant or time (time travel).

    Args:
        params: Workbook parameters.
        table: Silver table name.
        when: Instant or time (any :func:`helpers.instants.to_instant` input); the result is the
            state after the latest commit at or before it. None: the latest commit.
        key: One record key (value, or ``{column: value}``); None for every record.
        meta_columns: Keep every ``_hoodie_*`` column (default: only ``_hoodie_commit_time``).
        engine: ``rust`` (the official Rust reader: faster into pandas, see bench/README.md) or
            ``spark`` (the official Spark datasource, ``as.of.instant``, what EMR runs).
        spark: the session for ``engine="spark"`` (default: built from ``params``).

    Returns:
        The records, sorted by record key; soft-delete tables include flagged rows.

    Raises:
        TimeTravelError: for an unknown table, a bad key, or an instant the cleaner dropped.
    """
    spec = silver_table(params, table)
    base = table_base_path(params, spec)
    read_spec = HudiReadSpec(as_of=_resolve(base, spec.name, when) if when is not None else None)
    if engine == "spark":
        return _tidy(_read_spark(params, spec, base, read_spec, key, spark), spec, meta_columns)
    hudi = open_table(base)
    rows = _read_arrow(hudi, read_spec, table_arrow_schema(hudi), key_filters(spec, key), base)
    return _tidy(rows, spec, meta_columns)


def _read_spark(
    params: WorkbookParams,
    spec: SilverTableParams,
    base: str,
    read_spec: HudiReadSpec,
    key: RecordKey | None,
    spark: Any,
) -> pa.Table:
    """A read through the official Spark datasource, as Arrow (exact decimals, UTC timestamps)."""
    from pyspark.sql import functions as F

    from helpers.hudi.api import read_hudi_df

    spark = spark or build_spark_session(params)
    frame = read_hudi_df(spark, base, read_spec.to_datasource_options())
    if key is not None:
        for column, value in key_values(spec, key).items():
            frame = frame.where(F.col(column) == F.lit(value))
    schema = table_arrow_schema(open_table(base))
    rows = [r.asDict() for r in frame.collect()]
    data = {name: [r.get(name) for r in rows] for name in schema.names}
    return pa.Table.from_pydict(
        {n: pa.array(v, schema.field(n).type) for n, v in data.items()}, schema=schema
    )


def readers_agree(
    params: WorkbookParams,
    table: str | SilverTableParams,
    when: InstantInput | None = None,
    key: RecordKey | None = None,
    *,
    spark: Any = None,
) -> dict[str, Any]:
    """Whether the official Spark datasource and the official Rust reader return the same rows as
    of ``when`` (every column, decimals exact): ``table``, ``instant``, ``rows``, ``equal``."""
    spec = silver_table(params, table)
    by_rust = as_of(params, spec, when, key, meta_columns=True)
    by_spark = as_of(params, spec, when, key, meta_columns=True, engine="spark", spark=spark)
    keys = list(spec.record_key)
    left = by_rust.sort_values(keys).reset_index(drop=True)
    right = by_spark[list(by_rust.columns)].sort_values(keys).reset_index(drop=True)
    return {
        "table": spec.name,
        "instant": to_instant(when) if when is not None else "latest",
        "rows": len(left),
        "equal": bool(left.equals(right)),
    }


def incremental(
    params: WorkbookParams,
    table: str | SilverTableParams,
    begin: InstantInput,
    end: InstantInput | None = None,
    key: RecordKey | None = None,
    *,
    meta_columns: bool = False,
    engine: str = "rust",
    spark: Any = None,
) -> pd.DataFrame:
    """Records written by the commits in ``(begin, end]`` (a point-in-time query), latest version.

    Args:
        params: Workbook parameters.
        table: Silver table name.
        begin: Exclusive start instant or time (``"000"``: from the beginning).
        end: Inclusive end instant or time; None: the latest commit.
        key: One record key; None for every record.
        meta_columns: Keep every ``_hoodie_*`` column.
        engine: ``rust`` (the official Rust reader) or ``spark`` (the official Spark datasource).
        spark: the session for ``engine="spark"``.

    Returns:
        Inserted and updated records of the range (hard deletes are not emitted; see
        :func:`diff` for them), sorted by record key.

    Raises:
        TimeTravelError: for an unknown table, a bad key, or ``end`` before ``begin``.
    """
    spec = silver_table(params, table)
    base = table_base_path(params, spec)
    start = (
        "19700101000000000" if isinstance(begin, str) and set(begin.strip()) == {"0"} else to_instant(begin)
    )
    stop = to_instant(end) if end is not None else None
    if stop is not None and stop < start:
        raise TimeTravelError(f"Failed to read {spec.name} incrementally: end {stop} is before begin {start}")
    read_spec = HudiReadSpec(query_type="incremental", begin=start, end=stop)
    if engine == "spark":
        return _tidy(_read_spark(params, spec, base, read_spec, key, spark), spec, meta_columns)
    hudi = open_table(base)
    rows = _read_arrow(hudi, read_spec, table_arrow_schema(hudi), key_filters(spec, key), base)
    return _tidy(rows, spec, meta_columns)


def _is_soft_deleted(row: Mapping[str, Any]) -> bool:
    return str(row.get(_SOFT_DELETE, "")).lower() == "true"


def _data_columns(schema: pa.Schema) -> list[str]:
    return [n for n in schema.names if n not in _META_ALL]


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


def _comparable(value: Any) -> Any:
    if value is None or (isinstance(value, float) and value != value):  # noqa: PLR0124 - NaN
        return None
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


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
    base = table_base_path(params, spec)
    start = _resolve(base, spec.name, before)
    stop = _resolve(base, spec.name, after) if after is not None else None
    if stop is not None and stop < start:
        raise TimeTravelError(f"Failed to diff {spec.name}: {stop} is before {start}")

    if cdc_enabled(base):
        return _diff_from_feed(params, spec, start, stop, cdc_columns, spark)
    hudi = open_table(base)
    schema = table_arrow_schema(hudi)
    old = _read(hudi, HudiReadSpec(as_of=start), schema, [], base)
    new = _read(hudi, HudiReadSpec(as_of=stop), schema, [], base)
    keys = list(spec.record_key)
    compared = [
        c
        for c in _data_columns(schema)
        if c not in keys and (cdc_columns or not _is_cdc_column(c) or c == _SOFT_DELETE)
    ]
    if _SOFT_DELETE in old.columns:
        old = old[old[_SOFT_DELETE].astype(str).str.lower() != "true"]
        new = new[new[_SOFT_DELETE].astype(str).str.lower() != "true"]
        compared = [c for c in compared if c != _SOFT_DELETE]
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
        was, now = _comparable(old.get(c)), _comparable(new.get(c))
        if was != now:
            out.append({"change": "update", **ident, "column": c, "before": was, "after": now})
    return out


def _diff_frame(rows: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["change", *keys, "column", "before", "after"])
    for column in ("before", "after"):
        frame[column] = frame[column].map(_comparable).astype(object)
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
        if image is None or (soft and _is_soft_deleted(image)):
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
            if c not in keys and c != _SOFT_DELETE and (cdc_columns or not _is_cdc_column(c))
        ]
        out += _record_changes(dict(zip(keys, ident, strict=True)), old, new, columns)
    return _diff_frame(out, keys)


def consistent_as_of(
    params: WorkbookParams, tables: Sequence[str | SilverTableParams], moment: InstantInput
) -> pd.DataFrame:
    """For several tables, the instant each one shows at one wall-clock time, and their skew.

    Reading each table ``as_of`` its row's ``instant`` gives a view of all of them at ``moment``;
    ``skew_s`` says how far apart the tables' last commits are (their data is consistent only up
    to that: each table holds what its own last commit before ``moment`` ingested).

    Args:
        params: Workbook parameters.
        tables: Silver table names.
        moment: Wall-clock time or instant (any :func:`helpers.instants.to_instant` input).

    Returns:
        One row per table: ``table``, ``instant`` (latest completed commit at or before the
        moment; None if the table had none yet), ``committed_at``, ``lag_s`` (moment minus that
        commit's time), ``skew_s`` (the newest of the tables' instants minus this one).

    Raises:
        TimeTravelError: for an unknown table.
    """
    target = to_instant(moment)
    target_time = instant_to_datetime(target)
    rows = []
    for table in tables:
        spec = silver_table(params, table)
        base = table_base_path(params, spec)
        candidates = [i.timestamp for i in completed_instants(base) if i.timestamp <= target]
        instant = candidates[-1] if candidates else None
        committed = instant_to_datetime(instant) if instant else None
        lag = (target_time - committed).total_seconds() if committed else None
        rows.append({"table": spec.name, "instant": instant, "committed_at": committed, "lag_s": lag})
    frame = pd.DataFrame(rows, columns=["table", "instant", "committed_at", "lag_s"])
    newest = frame["committed_at"].dropna().max() if frame["committed_at"].notna().any() else None
    frame["skew_s"] = [
        (newest - c).total_seconds() if newest is not None and c is not None and not pd.isna(c) else None
        for c in frame["committed_at"]
    ]
    return frame


# ------------------------------------------------------------------------------ the source side


def _source_of(params: WorkbookParams, table: SilverTableParams) -> tuple[str, str, str, str]:
    source = params.source(table.source)
    engine = "postgres" if source.engine == "postgres" else "mysql"
    return engine, source.database, source.namespace, table.table


def _run_source(
    params: WorkbookParams, table: SilverTableParams, statement: str, values: Sequence[Any], fetch: bool
) -> list[dict[str, Any]]:
    """Run one statement on the table's local source (``{t}`` = the quoted table, ``%s`` values)."""
    from helpers.sources.local.stack import LocalStack
    from helpers.sources.sql import quote_mariadb

    engine, database, namespace, name = _source_of(params, table)
    stack = LocalStack(params)
    if engine == "postgres":
        from psycopg import sql
        from psycopg.rows import dict_row

        with stack.connect_postgres(database) as conn:
            query = sql.SQL(statement).format(t=sql.Identifier(namespace, name))
            cur = conn.cursor(row_factory=dict_row)
            cur.execute(query, list(values))
            rows = list(cur.fetchall()) if fetch else []
            conn.commit()
            return rows
    import pymysql

    maria = stack.connect_mariadb(database)
    try:
        with maria.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(statement.format(t=quote_mariadb(name)), list(values))
            result = list(cursor.fetchall()) if fetch else []
        maria.commit()
        return result
    finally:
        maria.close()


def _quoted(params: WorkbookParams, table: SilverTableParams, column: str) -> str:
    from helpers.sources.sql import quote_mariadb

    if _source_of(params, table)[0] == "postgres":
        return '"' + column.replace('"', '""') + '"'
    return quote_mariadb(column)


def _where(params: WorkbookParams, table: SilverTableParams, key: RecordKey) -> tuple[str, list[Any]]:
    values = key_values(table, key)
    clause = " AND ".join(f"{_quoted(params, table, c)} = %s" for c in values)
    return clause, list(values.values())


def source_rows(
    params: WorkbookParams, table: str | SilverTableParams, key: RecordKey | None = None
) -> list[dict[str, Any]]:
    """The local source rows of a Silver table (one record, or all), as the database driver gives them.

    Args:
        params: Workbook parameters (local environment).
        table: Silver table name.
        key: One record key; None for every row.

    Returns:
        Rows as dicts (exact decimals, naive UTC datetimes on MariaDB).
    """
    spec = silver_table(params, table)
    if key is None:
        return _run_source(params, spec, "SELECT * FROM {t}", [], True)  # noqa: S608 - quoted identifier
    clause, values = _where(params, spec, key)
    return _run_source(params, spec, "SELECT * FROM {t} WHERE " + clause, values, True)  # noqa: S608


def update_source_row(
    params: WorkbookParams, table: str | SilverTableParams, key: RecordKey, values: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Update one record at the local source (one transaction) and return its new row.

    Args:
        params: Workbook parameters.
        table: Silver table name (its source table is changed).
        key: The record key.
        values: ``{column: new value}``.

    Returns:
        The source row after the update (empty list if there is no such record).
    """
    spec = silver_table(params, table)
    clause, key_values = _where(params, spec, key)
    assignments = ", ".join(f"{_quoted(params, spec, c)} = %s" for c in values)
    statement = "UPDATE {t} SET " + assignments + " WHERE " + clause  # noqa: S608 - quoted identifiers
    _run_source(params, spec, statement, [*values.values(), *key_values], False)
    return source_rows(params, spec, key)


def delete_source_row(params: WorkbookParams, table: str | SilverTableParams, key: RecordKey) -> None:
    """Delete one record at the local source (one transaction).

    Args:
        params: Workbook parameters.
        table: Silver table name.
        key: The record key.
    """
    spec = silver_table(params, table)
    clause, values = _where(params, spec, key)
    _run_source(params, spec, "DELETE FROM {t} WHERE " + clause, values, False)  # noqa: S608


def insert_source_row(params: WorkbookParams, table: str | SilverTableParams, row: Mapping[str, Any]) -> None:
    """Insert one row at the local source (one transaction).

    Args:
        params: Workbook parameters.
        table: Silver table name.
        row: ``{column: value}`` of the new row.
    """
    spec = silver_table(params, table)
    columns = ", ".join(_quoted(params, spec, c) for c in row)
    marks = ", ".join("%s" for _ in row)
    statement = "INSERT INTO {t} (" + columns + ") VALUES (" + marks + ")"  # noqa: S608 - quoted identifiers
    _run_source(params, spec, statement, list(row.values()), False)


def restore_sample_row(params: WorkbookParams, table: str | SilverTableParams, key: RecordKey) -> bool:
    """Put a TICKIT record back at the source as the generator made it, if it is missing.

    Notebook 04 deletes its sample sale at the end; a re-run first restores it (an insert,
    captured like any other change), so the story can be told again.

    Args:
        params: Workbook parameters (``tickit.scale`` and ``tickit.seed`` as loaded).
        table: Silver table name of a TICKIT table.
        key: The record key.

    Returns:
        True if the row was missing and has been inserted, False if it was there.

    Raises:
        TimeTravelError: if the generator has no such record.
    """
    import pyarrow.compute as pc

    from helpers.sources.sample.tickit import generate_tickit

    spec = silver_table(params, table)
    if source_rows(params, spec, key):
        return False
    generated = generate_tickit(params.tickit.scale, seed=params.tickit.seed)[spec.table]
    mask = None
    for column, value in key_values(spec, key).items():
        equal = pc.equal(generated.column(column), value)
        mask = equal if mask is None else pc.and_(mask, equal)
    rows = generated.filter(mask).to_pylist()
    if not rows:
        raise TimeTravelError(f"Failed to restore {spec.table} record {key!r}: the TICKIT generator has none")
    insert_source_row(params, spec, rows[0])
    return True


def _naive_utc(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _matches(source: Sequence[Mapping[str, Any]], silver: pd.DataFrame) -> bool:
    rows = silver.to_dict("records")
    live = [r for r in rows if not _is_soft_deleted(r)]
    if not source:
        return not live
    if len(live) != 1:
        return False
    have = live[0]
    return all(_naive_utc(_comparable(have.get(c))) == _naive_utc(v) for c, v in source[0].items())


def wait_for_silver(
    params: WorkbookParams,
    tables: Sequence[str | SilverTableParams],
    key: RecordKey,
    *,
    timeout_s: float = 60.0,
    ingest: bool = True,
) -> pd.DataFrame:
    """Wait until each Silver table shows the record as its source holds it now (or its absence).

    Capture brings the change to Bronze within about a second; Silver takes it in through the
    continuous job or, with ``ingest``, through :func:`helpers.silver.ingest.ingest_all` of these tables
    (safe beside the job: both take the table lock and each Bronze file once).

    Args:
        params: Workbook parameters (local environment).
        tables: Silver table names (same source table, e.g. ``["sale", "sale_mor"]``).
        key: The record key.
        timeout_s: How long to wait.
        ingest: Run one-shot ingestion of these tables while waiting.

    Returns:
        One row per table: ``table`` and ``instant``, the latest completed commit once the table
        showed the change (reading as of it gives the changed record).

    Raises:
        TimeTravelError: if a table does not show the change in time.
    """
    from helpers.silver.ingest import ingest_all

    specs = [silver_table(params, t) for t in tables]
    want = source_rows(params, specs[0], key)
    pending = {s.name: s for s in specs}
    found: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while pending:
        if ingest:
            ingest_all(params, list(pending))
        for name, spec in list(pending.items()):
            base = table_base_path(params, spec)
            latest = completed_instants(base)
            if latest and _matches(want, as_of(params, spec, latest[-1].timestamp, key)):
                found[name] = latest[-1].timestamp
                del pending[name]
        if pending and time.monotonic() > deadline:
            raise TimeTravelError(
                f"Failed to see the change of key {key!r} in Silver table(s) {sorted(pending)} within "
                f"{timeout_s:.0f} s: check capture (notebook 02) and the Silver job (notebook 03)"
            )
        if pending:
            time.sleep(0.3)
    return pd.DataFrame([{"table": s.name, "instant": found[s.name]} for s in specs])
