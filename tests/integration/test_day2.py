"""Day-2 operations on the shared pipeline's running capture: a table added to the parameters.

The table is created at the source while capture runs and added to ``sources.ems.tables`` and to
``silver.tables`` (CoW and MoR); registering the connectors again restarts the ``ems`` worker from
its offsets with the longer include list and asks Debezium for an incremental snapshot of the new
table only. Checked against the source row by row, with changes to it and to another table made
while the snapshot runs, and with no other table snapshotted again; then the status's check of
Silver against the source and the catalog registration of the new tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.pipeline import Capture

from helpers.bronze.read import read_bronze
from helpers.capture.register import connector_specs, register_connectors
from helpers.checks.divergence import EQUAL, check_divergence
from helpers.checks.parity import bronze_vs_source, silver_vs_source
from helpers.params import SilverTableParams
from helpers.pipeline import pipeline_status
from helpers.poll import wait_until
from helpers.silver.backend import register_catalog
from helpers.silver.ingest import ingest_tables
from helpers.sources.api import LocalSources
from helpers.sources.connect import connect

pytestmark = pytest.mark.integration


def _reads(capture: Capture, table: str) -> int:
    topic = capture.specs["ems"].topics[f"ems.{table}"]
    return sum(1 for r in read_bronze(capture.bronze, topic) if r["__op"] == "r")


def test_a_table_added_to_a_running_pipeline_is_snapshotted_alone_and_reaches_silver(
    capture: Capture, tmp_path: Path, spark: Any
) -> None:
    params = capture.stack.params
    ems = params.source("ems")
    with connect(params, "ems", autocommit=True) as c:
        c.execute("CREATE TABLE ems.wb_added (id integer PRIMARY KEY, name text NOT NULL, qty integer)")
        with c.cursor() as cur:
            rows = [(i, f"n{i}", i) for i in range(300)]
            cur.executemany("INSERT INTO ems.wb_added VALUES (%s, %s, %s)", rows)
    # the shared pipeline's first snapshot is over and streaming (a restart during it takes it again)
    assert bronze_vs_source(params, [capture.specs["ems"]], wait_s=180)["equal"].all()
    wait_until(
        lambda: capture.backend.status(capture.specs["ems"].name).details.get("streaming"),
        timeout_s=120,
        what="the ems connector to stream",
    )
    category_reads = _reads(capture, "category")
    table = SilverTableParams(name="wb_added", source="ems", table="wb_added", record_key=("id",))
    added = (table, table.model_copy(update={"name": "wb_added_mor", "table_type": "MERGE_ON_READ"}))
    sources = {**params.sources, "ems": ems.model_copy(update={"tables": (*ems.tables, table.table)})}
    grown = params.model_copy(
        update={
            "sources": sources,
            "silver": params.silver.model_copy(update={"tables": added, "sync": True, "database": "wb_day2"}),
            "lake": params.lake.model_copy(update={"silver": str(tmp_path / "silver")}),
        }
    )
    specs = connector_specs(grown, LocalSources(grown).endpoints())
    try:
        register_connectors(capture.backend, specs, timeout_s=180)
        with connect(params, "ems", autocommit=True) as c:  # while the snapshot runs
            c.execute("UPDATE ems.wb_added SET qty = -qty WHERE id % 7 = 0")
            c.execute("DELETE FROM ems.wb_added WHERE id BETWEEN 100 AND 109")
            c.execute("INSERT INTO ems.wb_added SELECT g, 'late' || g, g FROM generate_series(300, 349) g")
            c.execute(
                "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats)"
                " VALUES (29001, 'day2', 'c', 'ST', 1)"
            )
        ems_spec = next(s for s in specs if s.source == "ems")
        check = bronze_vs_source(grown, [ems_spec], wait_s=180)
        assert check["equal"].all(), check
        assert _reads(capture, "category") == category_reads  # no other table was snapshotted again
        results = ingest_tables(grown, list(added), spark=spark)
        assert all(r.events > 0 for r in results), results
        silver = silver_vs_source(grown, [t.name for t in added], spark=spark)
        assert silver["equal"].all() and (silver["source_rows"] == 340).all(), silver
        # the status's check agrees, at a known position of the source, and shows it
        checked = check_divergence(grown, wait_s=60)
        assert (checked["result"] == EQUAL).all() and (checked["silver_rows"] == 340).all(), checked
        shown = pipeline_status(grown, check=False)["divergence"].set_index("table")
        assert list(shown["result"]) == [EQUAL, EQUAL] and (shown["checked_s_ago"] < 120).all(), shown
        # registered in the catalog by its first commit's Hive sync, as every table is (MoR: _ro, _rt)
        catalog = set(register_catalog(grown, spark=spark)["name"])
        assert {"wb_added", "wb_added_mor_ro", "wb_added_mor_rt"} <= catalog, catalog
        for name in ("wb_added", "wb_added_mor_rt"):
            assert spark.sql(f"SELECT count(*) AS n FROM wb_day2.{name}").collect()[0]["n"] == 340  # noqa: S608
    finally:  # the shared pipeline captures what it did before
        register_connectors(capture.backend, list(capture.specs.values()), timeout_s=180)
