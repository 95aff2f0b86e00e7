"""Time travel on the Silver tables: timelines, "as of" reads and increments (read-only).

:func:`timeline_frame`, :func:`as_of`, :func:`incremental` and :func:`consistent_as_of` read
through :mod:`helpers.hudi.read` and return pandas DataFrames; time
input becomes an instant by :func:`helpers.instants.to_instant`. What each answers:
``docs/architecture.md``, "Reading Silver".

Example:
    >>> when = timeline_frame(params, "sale")["instant"].iloc[-2]       # doctest: +SKIP
    >>> as_of(params, "sale", when, key=200)                            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from helpers.errors import TimeTravelError
from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD
from helpers.hudi.keys import META_COLUMNS
from helpers.hudi.read import HudiReadSpec, ReadFilter, open_table, table_arrow_schema
from helpers.hudi.timeline import completed_instants, write_stats
from helpers.instants import InstantInput, instant_to_datetime, to_instant
from helpers.params import SilverTableParams, WorkbookParams
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
    "Instants",
    "as_of",
    "consistent_as_of",
    "incremental",
    "is_soft_deleted",
    "latest_instants",
    "per_table",
    "plain_value",
    "readers_agree",
    "readers_agree_points",
    "resolve_instant",
    "timeline_frame",
]

#: Hudi meta column holding the instant that wrote a record version.
COMMIT_TIME = "_hoodie_commit_time"
_META_ALL = (*META_COLUMNS, DELETE_MARKER_FIELD)

#: Instants of several tables: table name -> instant (None: the latest commit).
Instants = Mapping[str, InstantInput | None]


# ------------------------------------------------------------------------------ values, frames


def plain_value(value: Any) -> Any:
    """A value as comparable Python: None for null/NaN/NaT, ``datetime`` for pandas timestamps."""
    if value is None or (isinstance(value, float) and value != value):  # noqa: PLR0124 - NaN
        return None
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def is_soft_deleted(row: Mapping[str, Any]) -> bool:
    """Whether a row of a soft-delete table is flagged deleted (``__deleted = true``)."""
    return str(row.get(SOFT_DELETE_FIELD, "")).lower() == "true"


# ------------------------------------------------------------------------------ reads


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


def _read_arrow(
    hudi: HudiTable, spec: HudiReadSpec, schema: pa.Schema, filters: Sequence[ReadFilter], base: str
) -> pa.Table:
    try:
        batches = hudi.read(spec.to_read_options(filters=list(filters) or None))
    except Exception as exc:  # noqa: BLE001 - HudiCoreError is not importable by name
        raise TimeTravelError(f"Failed to read Hudi table {base}: {exc}") from exc
    return _to_arrow(batches, schema)


# ------------------------------------------------------------------------------ timeline


def _progress(items: Sequence[Any], what: str, minimum: int = 50) -> Any:
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


def resolve_instant(params: WorkbookParams, table: str | SilverTableParams, when: InstantInput) -> str:
    """The instant of ``when`` (any :func:`helpers.instants.to_instant` input) for ``table``.

    Raises:
        TimeTravelError: for an unknown table, or an instant older than what the cleaner retained.
    """
    spec = silver_table(params, table)
    return _resolve(table_base_path(params, spec), spec.name, when)


def latest_instants(
    params: WorkbookParams, tables: Sequence[str | SilverTableParams]
) -> dict[str, str | None]:
    """Each table's latest completed commit (None: none yet), by table name."""
    out: dict[str, str | None] = {}
    for table in tables:
        spec = silver_table(params, table)
        instants = completed_instants(table_base_path(params, spec))
        out[spec.name] = instants[-1].timestamp if instants else None
    return out


# ------------------------------------------------------------------------------ as of, increments


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
    from pyspark.sql import functions as F  # pyspark only for engine="spark"

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
        :func:`helpers.query.history.diff` for them), sorted by record key.

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


# ------------------------------------------------------------------------------ waiting for Silver


def per_table(
    read: Callable[..., pd.DataFrame],
    params: WorkbookParams,
    tables: Sequence[str],
    *args: Any,
    **kwargs: Any,
) -> pd.DataFrame:
    """``read(params, table, *args, **kwargs)`` for each table, concatenated with a ``table`` column.

    Example:
        >>> per_table(record_history, params, ["sale", "sale_mor"], 200)   # doctest: +SKIP
    """
    frames = [read(params, t, *args, **kwargs).assign(table=t) for t in tables]
    return pd.concat(frames, ignore_index=True)


def readers_agree_points(
    params: WorkbookParams,
    tables: Sequence[str],
    points: Mapping[str, Instants],
    key: RecordKey | None = None,
    *,
    spark: Any = None,
) -> pd.DataFrame:
    """:func:`readers_agree` for each table at each point: ``table``, ``point``, ``instant``,
    ``rows``, ``equal`` (for :func:`helpers.artefacts.require_equal`)."""
    rows = [
        {"point": point, **readers_agree(params, t, instants[t], key, spark=spark)}
        for t in tables
        for point, instants in points.items()
    ]
    return pd.DataFrame(rows, columns=["table", "point", "instant", "rows", "equal"])
