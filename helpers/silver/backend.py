"""What the notebooks call on Silver, the same in every environment: status of Bronze, the tables, the
continuous job, the catalog."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

from helpers.errors import HudiError
from helpers.hudi.keys import RECORD_KEY_COL
from helpers.hudi.timeline import completed_instants
from helpers.naming import silver_topic
from helpers.params import WorkbookParams
from helpers.silver.tables import (
    bronze_store,
    pending_bronze,
    silver_write_options,
    table_config,
)
from helpers.spark import build_spark_session

log = logging.getLogger(__name__)

__all__ = [
    "bronze_status",
    "register_catalog",
    "silver_tables_frame",
    "start_continuous",
    "sync_catalog",
    "wait_for_job_round",
]


def bronze_status(params: WorkbookParams, wait_s: float = 0.0) -> pd.DataFrame:
    """Whether Bronze holds what the sources hold, before ingesting.

    Locally the embedded connectors' Bronze is replayed and compared with each source table
    (:func:`helpers.capture.register.bronze_vs_source`, waiting up to ``wait_s`` for capture to catch
    up). On AWS the S3 sink lands Bronze all the time: the Bronze files of each Silver table's
    topic are listed with the number its checkpoint has not taken yet.

    Returns:
        Local: ``topic``, ``source_rows``, ``bronze_rows``, ``events``, ``equal``. AWS: ``table``,
        ``topic``, ``bronze_files``, ``pending_files``.
    """
    if params.environment != "aws" and params.capture.backend == "embedded":
        from helpers.capture.register import bronze_vs_source, connector_specs, local_endpoints

        specs = connector_specs(params, local_endpoints(params))
        frame = bronze_vs_source(params, specs, wait_s=wait_s)
        return frame[["topic", "source_rows", "bronze_rows", "events", "equal"]]
    store = bronze_store(params)
    rows = []
    for table in params.silver.tables:
        listing = store.list(silver_topic(params, table))
        pending, _ = pending_bronze(params, table, store)
        rows.append(
            {
                "table": table.name,
                "topic": silver_topic(params, table),
                "bronze_files": len(listing),
                "pending_files": len(pending),
            }
        )
    return pd.DataFrame(rows)


def silver_tables_frame(params: WorkbookParams) -> pd.DataFrame:
    """Per Silver table: type, commits, rows and the latest file slices (file groups, bytes), as
    the official Rust reader plans them (local paths and S3 alike)."""
    from helpers.hudi.inspect import table_file_groups

    rows = []
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        commits = completed_instants(base)
        if not commits:
            rows.append({"table": table.name, "type": table.table_type, "commits": 0, "rows": 0})
            continue
        groups = table_file_groups(base)
        rows.append(
            {
                "table": table.name,
                "type": table.table_type,
                "commits": len(commits),
                "rows": int(groups["records"].sum()) if table.table_type == "COPY_ON_WRITE" else None,
                "file_groups": len(groups),
                "data_bytes": int((groups["base_bytes"] + groups["log_bytes"]).sum()),
            }
        )
    frame = pd.DataFrame(rows)
    if (frame["type"] == "MERGE_ON_READ").any():  # log files hold changes: count the merged rows
        from helpers.hudi.read import read_snapshot

        for i, row in frame.iterrows():
            if row["type"] == "MERGE_ON_READ" and row["commits"]:
                spec = next(t for t in params.silver.tables if t.name == row["table"])
                frame.loc[i, "rows"] = read_snapshot(
                    table_config(params, spec).base_path, columns=[RECORD_KEY_COL]
                ).num_rows
    return frame


def wait_for_job_round(job: Any, timeout_s: float = 180.0) -> dict[str, Any]:
    """Wait until the continuous job (this start of it) has finished a round after now.

    Raises:
        HudiError: when the job dies or does not finish a round in time.
    """
    first = job.status()
    run, start = first.get("run_id"), first.get("loops", 0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status: dict[str, Any] = job.status()
        if status.get("state") == "DEAD":
            raise HudiError(
                f"Failed to run the continuous Silver job: it died; see {job.directory / 'job.log'}"
            )
        if status.get("run_id") != run:  # the job that was starting has written its first status
            run, start = status.get("run_id"), -1
        if status.get("state") == "RUNNING" and status.get("loops", 0) > start:
            return status
        time.sleep(0.2)
    raise HudiError(
        f"Failed to run the continuous Silver job: no round finished in {timeout_s:.0f} s; see "
        f"{job.directory / 'job.log'}"
    )


def sync_catalog(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None
) -> list[str]:
    """Run Hudi's Hive sync (``org.apache.hudi.hive.HiveSyncTool``) for Silver tables that have a
    commit, without writing: what every commit that creates a table or changes its columns does.

    Returns:
        The tables synced.

    Raises:
        HudiError: naming the table when the sync fails.
    """
    spark = spark or build_spark_session(params)
    jvm = spark.sparkContext._jvm
    done = []
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        if (names is not None and table.name not in names) or not completed_instants(base):
            continue
        props = jvm.java.util.Properties()
        for key, value in silver_write_options(params, table).items():
            if key.startswith(("hoodie.datasource.hive_sync.", "hoodie.datasource.meta.sync.")):
                props.setProperty(key, value)
        props.setProperty("hoodie.datasource.hive_sync.enable", "true")
        props.setProperty("hoodie.datasource.meta.sync.base.path", base)
        try:
            tool = jvm.org.apache.hudi.hive.HiveSyncTool(props, spark.sparkContext._jsc.hadoopConfiguration())
            try:
                tool.syncHoodieTable()
            finally:
                tool.close()
        except Exception as exc:  # noqa: BLE001 - Py4J errors
            raise HudiError(
                f"Failed to sync Silver table {table.name} to the catalog: {str(exc)[:1000]}"
            ) from exc
        done.append(table.name)
    return done


def start_continuous(params: WorkbookParams, timeout_s: float = 180.0) -> dict[str, Any]:
    """Start the continuous ingestion (DeltaStreamer's ``--continuous``) and wait for its first
    round: locally the background job :class:`helpers.silver.job.SilverJob` (stopped by
    ``./workbook stack stop``). On AWS the same ingestion runs as a scheduled EMR step or notebook
    execution of this notebook, so nothing is started here.

    Returns:
        The job's ``state``, ``loops``, ``error`` (AWS: ``state`` ``SCHEDULED_ON_EMR``).

    Raises:
        HudiError: when the job dies or finishes no round in time.
    """
    if params.environment == "aws":
        return {"state": "SCHEDULED_ON_EMR", "loops": None, "error": None}
    from helpers.silver.job import SilverJob

    job = SilverJob(params)
    job.start()
    status = wait_for_job_round(job, timeout_s)
    return {k: status.get(k) for k in ("state", "loops", "error")}


def register_catalog(params: WorkbookParams, *, spark: Any = None) -> pd.DataFrame:
    """The Silver tables in the catalog (the local metastore, or Glue on EMR), one row per catalog
    table, ``_ro`` / ``_rt`` for Merge-on-Read.

    The commits register their tables through Hudi's Hive sync already; a table that has commits
    but is missing from the catalog (a catalog reset, ``silver.sync`` switched on later) is synced
    here with Hudi's own sync tool.

    Returns:
        Columns ``database``, ``name``, ``hudi_table``, ``query_type``, ``table_type``, ``location``.

    Raises:
        HudiError: when a table is still missing after the sync.
    """
    from helpers.silver.catalog import catalog_frame, catalog_tables, missing_from_catalog

    spark = spark or build_spark_session(params)
    present = catalog_tables(params, spark)
    missing = missing_from_catalog(params, present)
    if not missing:
        return catalog_frame(params, spark, tables=present)
    sync_catalog(params, list(missing), spark=spark)
    return catalog_frame(params, spark)
