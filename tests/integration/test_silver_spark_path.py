"""The Spark ingestion path (what EMR runs) on this machine: Spark reads Bronze, the workbook
writer takes the same datasource options the official Hudi bundle gets on EMR; checked against
the real sources, with the checkpoint carried in the commits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline import Capture

from helpers.bronze_checkpoint import CHECKPOINT_KEY, FILES_KEY, BronzeCheckpoint
from helpers.capture.api import bronze_vs_source
from helpers.changes import apply_scenario
from helpers.errors import HudiError
from helpers.hudi.api import official_write_options, parse_write_options
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import completed_instants, read_commit_metadata
from helpers.params import WorkbookParams
from helpers.silver import silver_vs_source, table_config
from helpers.silver_spark import POSITION_COLUMN, ingest_all_spark, prepare_events, silver_write_options
from helpers.spark import build_spark_session

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _params_with_silver(params: WorkbookParams, silver: Path) -> WorkbookParams:
    return params.model_copy(update={"lake": params.lake.model_copy(update={"silver": str(silver)})})


def test_spark_path_silver_equals_the_sources_and_takes_each_file_once(
    capture: Capture, tmp_path: Path
) -> None:
    params = _params_with_silver(capture.stack.params, tmp_path / "silver")
    specs = list(capture.specs.values())
    assert bronze_vs_source(params, specs, wait_s=60)["equal"].all()
    spark = build_spark_session()
    first = ingest_all_spark(spark, params, engine="workbook")
    assert (first["files"] > 0).all(), first
    check = silver_vs_source(params)
    assert check["equal"].all(), check[~check["equal"]]
    assert (ingest_all_spark(spark, params, engine="workbook")["files"] == 0).all()

    apply_scenario(params, "delete_reinsert")
    apply_scenario(params, "rapid_updates")
    assert bronze_vs_source(params, specs, wait_s=30)["equal"].all()
    again = ingest_all_spark(spark, params, engine="workbook")
    assert again["files"].sum() > 0
    check = silver_vs_source(params)
    assert check["equal"].all(), check[~check["equal"]]

    sale = next(t for t in params.silver.tables if t.name == "sale")
    base = table_config(params, sale).base_path
    taken: list[str] = []
    for instant in completed_instants(base):
        extra = read_commit_metadata(base, instant).get("extraMetadata") or {}
        taken += json.loads(extra[FILES_KEY])
        BronzeCheckpoint.from_json(extra[CHECKPOINT_KEY])
    assert len(taken) == len(set(taken)) > 0
    assert POSITION_COLUMN in read_snapshot(base).column_names


def test_position_column_sorts_in_log_order_across_binlog_files() -> None:
    """String order of ``_cdc_position`` equals the (file number, position, row) order, also
    across a binlog rollover and positions of different widths."""
    spark = build_spark_session()
    rows = [
        ("mysql-bin.000009", 987654, 0),
        ("mysql-bin.000010", 4, 0),
        ("mysql-bin.000010", 4, 1),
        ("mysql-bin.000010", 4, 10),
        ("mysql-bin.000010", 120, 2),
        ("mysql-bin.000100", 7, 0),
    ]
    df = spark.createDataFrame(
        [(f, p, r, "false") for f, p, r in rows], "__file string, __pos long, __row int, __deleted string"
    )
    out = prepare_events(df, "mariadb", "hard").toPandas()
    positions = list(out[POSITION_COLUMN])
    assert sorted(positions) == positions and len(set(positions)) == len(rows)
    assert not out["_hoodie_is_deleted"].any() and "__deleted" not in out.columns
    pg = spark.createDataFrame(
        [(123456789, None), (9, "false"), (10, "true")], "__lsn long, __deleted string"
    )
    out = prepare_events(pg, "postgres", "soft").toPandas()
    assert list(out.sort_values(POSITION_COLUMN)["__lsn"]) == [9, 10, 123456789]
    assert list(out["__deleted"]) == [False, False, True]
    with pytest.raises(HudiError, match=r"lack \['__lsn'\]"):
        prepare_events(df, "postgres", "hard")


def test_official_options_carry_the_checkpoint_and_never_the_workbook_keys(capture: Capture) -> None:
    params = capture.stack.params
    sale = next(t for t in params.silver.tables if t.name == "sale_mor")
    options = silver_write_options(
        params, sale, ["b.avro", "a.avro"], BronzeCheckpoint().to_json(), sync=True
    )
    official: dict[str, Any] = official_write_options(parse_write_options(options))
    assert official["hoodie.datasource.write.precombine.field"] == POSITION_COLUMN
    assert official["hoodie.datasource.write.commitmeta.key.prefix"] == "workbook.bronze."
    assert json.loads(official[FILES_KEY]) == ["a.avro", "b.avro"]
    assert official[CHECKPOINT_KEY] == BronzeCheckpoint().to_json()
    assert official["hoodie.datasource.write.table.type"] == "MERGE_ON_READ"
    assert official["hoodie.datasource.hive_sync.database"] == f"{params.project}_silver"
    assert official["hoodie.datasource.write.payload.class"].endswith("DefaultHoodieRecordPayload")
    assert not [k for k in official if k.startswith("workbook.hudi.")]


def test_toast_placeholders_are_filled_from_the_batch_then_the_stored_table(tmp_path: Path) -> None:
    import pyarrow as pa
    from pyspark.sql import functions as F

    from helpers.capture.connectors import UNAVAILABLE_VALUE as P
    from helpers.hudi.config import HudiTableConfig
    from helpers.hudi.writer import write_arrow
    from helpers.params import SilverTableParams
    from helpers.silver_spark import _stored_reader, fill_unavailable_spark

    spark = build_spark_session()
    base = str(tmp_path / "event")
    config = HudiTableConfig(
        table_name="event", base_path=base, record_key_fields=("id",), ordering_fields=("__lsn",)
    )
    table = SilverTableParams(name="event", source="ems", table="event", record_key=("id",))
    events = spark.createDataFrame(
        [(1, 2, P, "u"), (1, 1, "full one", "c"), (2, 5, P, "u"), (3, 6, P, "u"), (4, 7, None, "u")],
        "id int, __lsn long, name string, __op string",
    ).withColumn("__deleted", F.lit("false"))
    prepared = prepare_events(events, "postgres", "hard")
    out, found = fill_unavailable_spark(prepared, table, _stored_reader(spark, base, "workbook"))
    assert found == 3
    rows = {(r["id"], r["__lsn"]): r["name"] for r in out.collect()}
    assert rows == {(1, 1): "full one", (1, 2): "full one", (2, 5): None, (3, 6): None, (4, 7): None}

    write_arrow(
        pa.table({"id": pa.array([2], pa.int32()), "__lsn": [0], "name": ["stored two"]}), config, "upsert"
    )
    out, found = fill_unavailable_spark(prepared, table, _stored_reader(spark, base, "workbook"))
    rows = {(r["id"], r["__lsn"]): r["name"] for r in out.collect()}
    assert found == 3 and rows == {
        (1, 1): "full one",
        (1, 2): "full one",
        (2, 5): "stored two",
        (3, 6): None,
        (4, 7): None,
    }
    assert (
        fill_unavailable_spark(
            prepare_events(events.filter("id = 4"), "postgres", "hard"), table, lambda: None
        )[1]
        == 0
    )
