"""What the notebooks call on Silver: :func:`open_silver` returns the environment's backend.

``LocalSilver`` runs the continuous job as a local background process; ``EmrSilver`` leaves it to
the scheduled EMR step. Ingestion, the table overview, the catalog and SQL are the same code in
both (the official Hudi writer and reader, the local metastore or Glue).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from helpers.capture.raw_topics import retire_raw_capture
from helpers.capture.resnapshot import ResnapshotResult, find_table, resnapshot
from helpers.environments import implementations
from helpers.errors import CaptureError, HudiError, WaitTimeoutError
from helpers.hudi.inspect import table_file_groups
from helpers.hudi.keys import RECORD_KEY_COL
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import completed_instants
from helpers.params import WorkbookParams
from helpers.poll import wait_until
from helpers.silver.catalog import catalog_frame, catalog_tables, missing_from_catalog
from helpers.silver.ingest import ingest_all
from helpers.silver.job import SilverJob
from helpers.silver.streamer import run_streamer_once, streamer_overview
from helpers.silver.streamer_kafka import moved_to_bronze, reads_kafka
from helpers.silver.tables import (
    silver_write_options,
    table_config,
)
from helpers.spark import build_spark_session

log = logging.getLogger(__name__)

__all__ = [
    "EmrSilver",
    "EmrStreamerSilver",
    "LocalSilver",
    "Silver",
    "StreamerFiles",
    "StreamerSilver",
    "open_silver",
    "register_catalog",
    "silver_tables_frame",
    "sync_catalog",
    "wait_for_job_round",
]


def silver_tables_frame(params: WorkbookParams) -> pd.DataFrame:
    """Per Silver table: type, commits, rows and the latest file slices (file groups, bytes), as
    the official Rust reader plans them (local paths and S3 alike)."""

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
        for i, row in frame.iterrows():
            if row["type"] == "MERGE_ON_READ" and row["commits"]:
                spec = next(t for t in params.silver.tables if t.name == row["table"])
                frame.loc[i, "rows"] = read_snapshot(
                    table_config(params, spec).base_path, columns=[RECORD_KEY_COL]
                ).num_rows
    return frame


def wait_for_job_round(job: Any, timeout_s: float = 180.0) -> dict[str, Any]:
    """Wait until the continuous job (this start of it) has finished a round after now (a round
    already running counts). The job is asked for a round
    (:meth:`helpers.silver.job.SilverJob.request_round`), so an idle job does not wait out its
    pause first.

    Raises:
        HudiError: when the job dies or does not finish a round in time.
    """
    first = job.status()
    seen = {"run": first.get("run_id"), "start": first.get("loops", 0)}
    job.request_round()

    def round_done() -> dict[str, Any] | None:
        status: dict[str, Any] = job.status()
        if status.get("state") in ("DEAD", "FAILED"):
            raise HudiError(
                f"Failed to run the continuous Silver job: {status.get('error') or 'it died'}; "
                f"see {job.directory / 'job.log'}"
            )
        if status.get("run_id") != seen["run"]:  # the job that was starting wrote its first status
            seen.update(run=status.get("run_id"), start=-1)
        return status if status.get("state") == "RUNNING" and status.get("loops", 0) > seen["start"] else None

    try:
        return wait_until(round_done, timeout_s=timeout_s, what="a round of the continuous Silver job")
    except WaitTimeoutError:
        held = job.status().get("held_by")
        why = f"it is held by {'; '.join(held)} (helpers.silver.hold), until that run ends" if held else ""
        raise HudiError(
            f"Failed to run the continuous Silver job: no round finished in {timeout_s:.0f} s"
            f"{'; ' + why if why else ''}; see {job.directory / 'job.log'}"
        ) from None


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

    spark = spark or build_spark_session(params)
    present = catalog_tables(params, spark)
    missing = missing_from_catalog(params, present)
    if not missing:
        return catalog_frame(params, spark, tables=present)
    sync_catalog(params, list(missing), spark=spark)
    return catalog_frame(params, spark)


class Silver(Protocol):
    """The Silver stage as notebook 03 drives it, in any environment."""

    params: WorkbookParams

    def ingest(self) -> pd.DataFrame:
        """One ingestion round over every table (:func:`helpers.silver.ingest.ingest_all`)."""
        ...

    def tables(self) -> pd.DataFrame:
        """Per table: type, commits, rows, file groups, bytes."""
        ...

    def register_catalog(self) -> pd.DataFrame:
        """The tables in the catalog, synced where missing."""
        ...

    def sql(self, query: str) -> pd.DataFrame:
        """A Spark SQL query over the catalog, as pandas."""
        ...

    def start_continuous(self, timeout_s: float = 180.0) -> dict[str, Any]:
        """Keep ingesting from now on; ``state``, ``loops``, ``error``."""
        ...

    def configuration(self) -> Any:
        """How Silver is written: the engine's settings, as the notebook shows them."""
        ...

    def resnapshot(self, name: str, timeout_s: float = 900.0) -> ResnapshotResult:
        """``./workbook resnapshot NAME``: a new snapshot of one table, whose marker Silver
        applies (``docs/operations.md``, "Re-snapshot one table")."""
        ...


@dataclass
class LocalSilver:
    """Silver on this machine: Spark in local mode, the local metastore, a background job."""

    params: WorkbookParams

    def ingest(self) -> pd.DataFrame:
        retire_raw_capture(self.params)  # the streamer's Kafka mode left twin connectors: unread now
        return ingest_all(self.params)

    def tables(self) -> pd.DataFrame:
        return silver_tables_frame(self.params)

    def register_catalog(self) -> pd.DataFrame:
        return register_catalog(self.params)

    def sql(self, query: str) -> pd.DataFrame:
        return build_spark_session(self.params).sql(query).toPandas()

    def configuration(self) -> pd.DataFrame:
        """Per table: type, record key, ordering field, delete mode and where it lives (the
        PySpark engine's write options: :func:`helpers.silver.tables.silver_write_options`)."""
        rows = []
        for t in self.params.silver.tables:
            config = table_config(self.params, t)
            rows.append(
                {
                    "table": t.name,
                    "engine": "pyspark (Hudi 1.0.2, Spark 3.5)",
                    "type": config.table_type,
                    "record_key": ",".join(config.record_key_fields),
                    "ordering": ",".join(config.ordering_fields),
                    "deletes": config.delete_mode,
                    "base_path": config.base_path,
                }
            )
        return pd.DataFrame(rows)

    def resnapshot(self, name: str, timeout_s: float = 900.0) -> ResnapshotResult:
        """:func:`helpers.capture.resnapshot.resnapshot`: the continuous job (or the next
        ``./workbook run``) applies the marker in its next round."""
        return resnapshot(self.params, name, timeout_s=timeout_s)

    def start_continuous(self, timeout_s: float = 180.0) -> dict[str, Any]:
        """Start :class:`helpers.silver.job.SilverJob` (stopped by ``./workbook stack stop``) and
        wait for its first round.

        Raises:
            HudiError: when the job dies or finishes no round in time.
        """
        job = SilverJob(self.params)
        job.start()
        status = wait_for_job_round(job, timeout_s)
        return {k: status.get(k) for k in ("state", "loops", "error")}


@dataclass(frozen=True)
class StreamerFiles:
    """Text blocks by name (properties files, a command), shown as code blocks in a notebook."""

    blocks: dict[str, str]

    def _repr_markdown_(self) -> str:
        return "\n\n".join(f"**{name}**\n\n```\n{text.rstrip()}\n```" for name, text in self.blocks.items())

    def __str__(self) -> str:
        return "\n\n".join(f"== {name}\n{text.rstrip()}" for name, text in self.blocks.items())


@dataclass
class StreamerSilver(LocalSilver):
    """``silver.engine: streamer`` on this machine: Hudi's HoodieStreamer 0.14.0 on the project's
    pyspark 3.4.1 runtime (:mod:`helpers.silver.streamer`); the continuous job runs it in rounds of
    run-once syncs (:mod:`helpers.silver.streamer_driver`). The overview, the catalog and SQL are
    the same as for the PySpark engine."""

    def ingest(self) -> pd.DataFrame:
        """One run-once HoodieStreamer of every table, then Hudi's Hive sync of the tables it
        committed to (the streamer's own sync is not used: one sync path for both engines). A
        continuous streamer job holds the tables' locks: it is stopped first, after its round
        (``start_continuous`` starts it again)."""
        SilverJob(self.params).stop()
        retire_raw_capture(self.params)  # a no-op while silver.streamer.source is kafka
        result = run_streamer_once(self.params)
        committed = [str(name) for name in result.loc[result["instant"].notna(), "table"]]
        if committed and self.params.silver.sync:
            sync_catalog(self.params, committed)
        return result

    def configuration(self) -> StreamerFiles:
        """The generated properties files and the one-table ``spark-submit`` command."""
        return StreamerFiles(streamer_overview(self.params))

    def resnapshot(self, name: str, timeout_s: float = 900.0) -> ResnapshotResult:
        """As :meth:`LocalSilver.resnapshot`: the continuous streamer job applies the marker in its
        next round (:mod:`helpers.silver.streamer_driver`). Refused for a table read from its
        Debezium topic (``silver.streamer.source: kafka``): Hudi's Debezium sources never see the
        Bronze marker.

        Raises:
            CaptureError: for a table read from its Debezium topic, naming the repair.
        """
        table = find_table(self.params, name)
        conf = self.params.state_path / "streamer" / "conf"
        if reads_kafka(self.params, table) and not moved_to_bronze(self.params, table, conf):
            raise CaptureError(
                f"Failed to re-snapshot {table.name}: it is read from its Debezium topic "
                "(silver.streamer.source: kafka), and Hudi's Debezium sources never see the Bronze marker "
                "that voids the rows the snapshot does not re-read. Switch the streamer to Bronze first "
                "(--set silver.streamer.source=bronze, for this command and the Silver job: it goes on from "
                "the table's Bronze checkpoint), then re-snapshot (docs/streamer.md, Limits)"
            )
        return super().resnapshot(table.name, timeout_s)


@dataclass
class EmrSilver(LocalSilver):
    """Silver on EMR: the same calls on the cluster's Spark and Glue; the continuous ingestion is
    the scheduled EMR step (or notebook execution) of notebook 03, so nothing starts here."""

    def start_continuous(self, timeout_s: float = 180.0) -> dict[str, Any]:
        return {"state": "SCHEDULED_ON_EMR", "loops": None, "error": None}


@dataclass
class EmrStreamerSilver(EmrSilver):
    """``silver.engine: streamer`` on AWS: HoodieStreamer runs as EMR steps on an EMR 6.15 cluster
    (``./workbook cluster streamer-steps --apply``, ``docs/streamer.md``), not in this notebook's
    EMR 7 session. Notebook 03 shows the generated files and reports the tables' newest commits;
    the overview, the catalog, SQL and the reconciliation read what the steps wrote."""

    def ingest(self) -> pd.DataFrame:
        """Per table: its newest completed commit (``instant``), written by the streamer steps;
        nothing is written here."""
        rows = []
        for table in self.params.silver.tables:
            instants = completed_instants(table_config(self.params, table).base_path)
            rows.append({"table": table.name, "instant": instants[-1].timestamp if instants else None})
        return pd.DataFrame(rows, columns=["table", "instant"])

    def configuration(self) -> StreamerFiles:
        return StreamerFiles(streamer_overview(self.params))

    def start_continuous(self, timeout_s: float = 180.0) -> dict[str, Any]:
        return {"state": "EMR_STEPS", "loops": None, "error": None}

    def resnapshot(self, name: str, timeout_s: float = 900.0) -> ResnapshotResult:
        """Refused: EMR's DeltaStreamer steps drop the marker; the workbook's own streamer driver,
        which applies it, runs only locally (``docs/streamer.md``, "Limits").

        Raises:
            CaptureError: always, naming the repair that works.
        """
        raise CaptureError(
            f"Failed to re-snapshot {name}: EMR's DeltaStreamer steps drop the re-snapshot marker, so "
            "Silver would keep the rows the marker voids, and this command does not pause EMR steps. By "
            "hand: pause the streamer steps, re-snapshot and ingest this table once with "
            "--set silver.engine=pyspark (notebook 03), then resume the steps (docs/streamer.md, Limits)"
        )


#: (where Silver runs, ``silver.engine``) -> the backend
_BACKENDS: dict[tuple[str, str], Callable[[WorkbookParams], Silver]] = {
    ("local", "pyspark"): LocalSilver,
    ("local", "streamer"): StreamerSilver,
    ("emr", "pyspark"): EmrSilver,
    ("emr", "streamer"): EmrStreamerSilver,
}


def open_silver(params: WorkbookParams) -> Silver:
    """The Silver backend of the environment (:mod:`helpers.environments`) and ``silver.engine``."""
    return _BACKENDS[(implementations(params).silver, params.silver.engine)](params)
