"""The default (embedded) capture profile with its lake on the local S3 server and Silver on the
local Spark cluster, end to end, in a process of its own (its Spark session is the cluster's
driver, with s3a from the start).

Run by tests/integration/test_cluster_s3.py as ``python tests/support/embedded_s3_cluster_flow.py
OUT.json``: a throw-away stack on free ports (PostgreSQL, MariaDB, the S3 server, a Spark master
and worker), the CI sample data, the embedded connectors writing Bronze to ``s3://``, then Bronze
compared with the sources, one Silver round on the cluster (its executors reading Bronze through
s3a) of the tables that hold every column kind (``support.silver_tables.STREAMER_TABLES``),
Spark's executor metrics, and Silver compared with the sources; then notebook 07's
reconciliation of those tables on the ``s3://`` Silver, and again of ``date`` after a change made
behind capture's back (``sql_log_bin = 0``), which it must find and name. Writes what it saw to
``OUT.json``.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]

from conftest import temporary_stack  # noqa: E402

from helpers.capture.register import (  # noqa: E402
    connector_specs,
    expected_rows,
    open_backend,
    wait_for_snapshots,
)
from helpers.checks.parity import bronze_vs_source, silver_vs_source  # noqa: E402
from helpers.checks.reconcile import reconcile  # noqa: E402
from helpers.lake_store import open_store, use_lake_s3  # noqa: E402
from helpers.naming import silver_topic  # noqa: E402
from helpers.pipeline import ensure_pipeline  # noqa: E402
from helpers.proc import free_port  # noqa: E402
from helpers.silver.ingest import ingest_all  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402
from helpers.spark import build_spark_session  # noqa: E402
from support.silver_tables import STREAMER_TABLES  # noqa: E402

BUCKET = "wb-embedded-lake"
#: The reconciliation's columns the test reads.
RECONCILED = [
    "table",
    "equal",
    "caught_up",
    "differing_keys",
    "different",
    "missing_in_silver",
    "extra_in_silver",
    "source_rows",
    "silver_rows",
    "fix",
    "note",
]


def diverge_date(stack: Any) -> int:
    """Flip ``holiday`` of ``date``'s first key with ``sql_log_bin = 0`` (root's connection commits
    each statement): the binlog, so capture and Silver, never see it. Returns the key."""
    admin = stack.connect_mariadb_admin(stack.params.source("ecomm").database)
    try:
        with admin.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("SELECT MIN(dateid) FROM `date`")
            key = int(cur.fetchone()[0])
            cur.execute("UPDATE `date` SET holiday = NOT holiday WHERE dateid = %s", (key,))
    finally:
        admin.close()
    return key


def main(out: Path) -> int:
    master, ui = free_port(), free_port()
    overrides = {
        "local.s3.enabled": True,
        "local.s3.port": free_port(),
        "local.s3.bucket": BUCKET,
        "local.spark.port": master,
        "local.spark.web_port": free_port(),
        "local.spark.worker_web_port": free_port(),
        "spark.master": f"spark://127.0.0.1:{master}",
        "lake.bronze": f"s3://{BUCKET}/bronze",
        "lake.silver": f"s3://{BUCKET}/silver",
        "spark.catalog": "none",
        "silver.sync": False,
    }
    with temporary_stack("wb-embs3-", overrides) as stack:
        params = stack.params
        # Silver: the tables that hold every column kind the executors decode (CoW and MoR, a
        # composite key); Bronze: every captured table
        kinds = tuple(t for t in params.silver.tables if t.name in STREAMER_TABLES)
        silver = params.silver.model_copy(update={"tables": kinds})
        silver_params = params.model_copy(update={"silver": silver})
        ensure_pipeline(params, timeout_s=300)  # servers (S3, the cluster), data, CDC, connectors
        spark = build_spark_session(  # the session every later step gets, its monitoring API on
            params,
            app_name="workbook-embedded-s3",
            conf={"spark.ui.enabled": "true", "spark.ui.port": str(ui)},
        )
        backend = open_backend(params)
        specs = connector_specs(params, LocalSources(params).endpoints())
        counts = LocalSources(params).row_counts()
        wait_for_snapshots(backend, specs, expected_rows(params, counts), timeout_s=600)
        bronze = bronze_vs_source(params, specs, wait_s=120, spark=spark)
        use_lake_s3(params)
        objects = [e.location for e in open_store(params.lake.bronze).list("", recursive=True)]
        local_leftovers = [str(p) for p in Path.cwd().glob("s3:*")]
        ingested = ingest_all(silver_params, spark=spark)
        app = spark.sparkContext.applicationId
        url = f"http://127.0.0.1:{ui}/api/v1/applications/{app}/allexecutors"
        executors = json.loads(urllib.request.urlopen(url).read())  # noqa: S310 - loopback
        silver_check = silver_vs_source(silver_params, spark=spark)
        reconciled = reconcile(params, silver_params=silver_params, wait_s=120)
        diverged_key = diverge_date(stack)
        diverged = reconcile(params, ["date"], silver_params=silver_params, ingest=True, wait_s=120)
        out.write_text(
            json.dumps(
                {
                    "bronze": bronze.to_dict("records"),
                    "bronze_objects": objects,
                    "local_leftovers": local_leftovers,
                    "ingested": ingested.to_dict("records"),
                    "topics": {t.name: silver_topic(params, t) for t in kinds},
                    "master": spark.sparkContext.master,
                    "executors": [
                        {k: e[k] for k in ("id", "hostPort", "totalTasks", "totalInputBytes")}
                        for e in executors
                    ],
                    "silver": silver_check.to_dict("records"),
                    "reconciled": reconciled[RECONCILED].to_dict("records"),
                    "diverged_key": diverged_key,
                    "diverged": diverged[RECONCILED].to_dict("records"),
                },
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
