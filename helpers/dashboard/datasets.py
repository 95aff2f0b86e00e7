"""The dashboard's data: SQL datasets through the query engine, and pipeline health from Hudi timelines.

Column contracts (the columns of the SQL files in ``sql/``):

* ``customers``: ``customer_id``, ``customer_name`` (optional), ``order_count``,
  ``avg_quantity``, ``avg_revenue``, ``total_revenue``;
* ``sales_by_category``: ``catname``, ``catgroup`` (optional), ``tickets``, ``revenue``;
* ``sales_by_day``: ``sale_date``, ``tickets``, ``revenue``;
* pipeline health: :data:`HEALTH_COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd

from helpers.errors import DashboardError
from helpers.hudi.read import EARLIEST_INSTANT, open_table, read_incremental, table_arrow_schema
from helpers.hudi.timeline import Instant, completed_instants, read_commit_metadata, write_stats
from helpers.instants import instant_to_datetime
from helpers.params import WorkbookParams
from helpers.query.engines import open_engine
from helpers.silver.tables import table_config

__all__ = [
    "DATASET_QUERIES",
    "HEALTH_COLUMNS",
    "QueryEngineLike",
    "dashboard_datasets",
    "pipeline_health",
]

#: The dashboard's datasets and the SQL file (``sql/``, Trino dialect) each comes from.
DATASET_QUERIES: dict[str, str] = {
    "customers": "order_revenue_by_customer.sql",
    "sales_by_category": "sales_by_category.sql",
    "sales_by_day": "sales_by_day.sql",
}

#: Columns of :func:`pipeline_health`.
HEALTH_COLUMNS: tuple[str, ...] = (
    "table",
    "instant",
    "commit_time",
    "operation",
    "inserts",
    "updates",
    "deletes",
    "rows_changed",
    "records_written",
    "records_read",
    "source_time_min",
    "source_time_max",
    "lag_s",
    "newest_lag_s",
    "oldest_lag_s",
)


class QueryEngineLike(Protocol):
    """What :func:`dashboard_datasets` needs from an engine of :func:`helpers.query.engines.open_engine`."""

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> pd.DataFrame:
        """Run a SQL text or a file of ``sql/`` and return the rows."""
        ...  # pragma: no cover - protocol


def dashboard_datasets(
    params: WorkbookParams, engine: QueryEngineLike | None = None
) -> dict[str, pd.DataFrame]:
    """Run the dashboard's SQL files (:data:`DATASET_QUERIES`) through the workbook's query engine.

    Args:
        params: Workbook parameters (Athena, or the local engine: Trino, or DuckDB).
        engine: An engine already open (left open); default: one from
            :func:`helpers.query.engines.open_engine`, closed again.

    Returns:
        One DataFrame per dataset name of :data:`DATASET_QUERIES`.

    Raises:
        DashboardError: naming the dataset and its SQL file, when a query fails.
    """
    if engine is None:
        with open_engine(params) as opened:
            return dashboard_datasets(params, opened)
    out: dict[str, pd.DataFrame] = {}
    for name, sql_file in DATASET_QUERIES.items():
        try:
            out[name] = engine.query(sql_file)
        except Exception as exc:  # noqa: BLE001 - re-raised with the dataset named
            raise DashboardError(f"Failed to query dataset {name!r} ({sql_file}): {exc}") from exc
    return out


def _commit_health(
    table: str, base_path: str, previous: str, instant: Instant, has_source_time: bool
) -> dict[str, Any]:
    meta = read_commit_metadata(base_path, instant)
    counts = {"numInserts": 0, "numUpdateWrites": 0, "numDeletes": 0, "numWrites": 0}
    for stat in write_stats(meta):
        for key in counts:
            counts[key] += int(stat.get(key) or 0)
    commit_time = pd.Timestamp(instant_to_datetime(instant.timestamp))
    row: dict[str, Any] = {
        "table": table,
        "instant": instant.timestamp,
        "commit_time": commit_time,
        "operation": meta.get("operationType"),
        "inserts": counts["numInserts"],
        "updates": counts["numUpdateWrites"],
        "deletes": counts["numDeletes"],
        "rows_changed": counts["numInserts"] + counts["numUpdateWrites"] + counts["numDeletes"],
        "records_written": counts["numWrites"],
        "records_read": 0,
        "source_time_min": pd.NaT,
        "source_time_max": pd.NaT,
        "lag_s": np.nan,
        "newest_lag_s": np.nan,
        "oldest_lag_s": np.nan,
    }
    if not has_source_time:
        return row
    written = read_incremental(
        base_path, previous or EARLIEST_INSTANT, instant.timestamp, columns=["__source_ts_ms"]
    )
    source_ms = written.column("__source_ts_ms").drop_null().to_numpy()
    row["records_read"] = written.num_rows
    if len(source_ms):
        commit_ms = commit_time.value // 1_000_000
        row["source_time_min"] = pd.Timestamp(int(source_ms.min()), unit="ms", tz="UTC")
        row["source_time_max"] = pd.Timestamp(int(source_ms.max()), unit="ms", tz="UTC")
        row["lag_s"] = (commit_ms - float(np.median(source_ms))) / 1000.0
        row["newest_lag_s"] = (commit_ms - int(source_ms.max())) / 1000.0
        row["oldest_lag_s"] = (commit_ms - int(source_ms.min())) / 1000.0
    return row


def pipeline_health(
    params: WorkbookParams, last_commits: int = 20, tables: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per Silver table and commit: rows per commit and the lag from source commit to Silver.

    Rows come from the commit metadata: ``inserts``, ``updates`` (``numUpdateWrites``),
    ``deletes``, their sum ``rows_changed``, and ``records_written`` (``numWrites``, which for
    Copy-on-Write includes unchanged records copied into the new file version).

    The lag is the commit's instant time minus the source times (``__source_ts_ms``) of the
    records the commit wrote, read incrementally ``(previous commit, commit]``: ``lag_s`` for the
    median record, ``newest_lag_s`` (freshness at commit) and ``oldest_lag_s``; ``records_read``
    counts those records. Commits with no readable record (deletes only, compaction, files already
    cleaned) have NaN lags. One incremental read per commit (about 1 s for 20 commits), hence
    ``last_commits``.

    Args:
        params: Workbook parameters (``silver.tables``, ``lake.silver``).
        last_commits: Only the latest this many completed commits per table.
        tables: Silver table names to include (default: all configured).

    Returns:
        One row per table and commit with the columns of :data:`HEALTH_COLUMNS`, oldest commit
        first per table; tables without a completed commit have no row.

    Raises:
        DashboardError: when ``last_commits`` is not positive or a table name is unknown.
        HudiError: naming the table path, when its timeline or data cannot be read.
    """
    if last_commits < 1:
        raise DashboardError(f"Failed to compute pipeline health: last_commits={last_commits} must be >= 1")
    known = [t.name for t in params.silver.tables]
    unknown = sorted(set(tables or ()) - set(known))
    if unknown:
        raise DashboardError(f"Failed to compute pipeline health: unknown table(s) {unknown}; known: {known}")
    rows: list[dict[str, Any]] = []
    for table in params.silver.tables:
        if tables is not None and table.name not in tables:
            continue
        base_path = table_config(params, table).base_path
        instants = completed_instants(base_path)
        if not instants:
            continue
        has_source_time = "__source_ts_ms" in table_arrow_schema(open_table(base_path)).names
        start = max(0, len(instants) - last_commits)
        for index in range(start, len(instants)):
            previous = instants[index - 1].timestamp if index > 0 else ""
            rows.append(_commit_health(table.name, base_path, previous, instants[index], has_source_time))
    frame = pd.DataFrame(rows, columns=list(HEALTH_COLUMNS))
    for column in ("source_time_min", "source_time_max"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame
