"""The streamer engine's generated configuration (helpers.silver.streamer): properties split into
a base file and one file per table, the SQL transform, the checkpoint hand-over between engines.
Running HoodieStreamer itself: tests/integration/test_streamer.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers.bronze.store import BronzeObject
from helpers.errors import HudiError
from helpers.params import load_params
from helpers.silver.backend import EmrSilver, EmrStreamerSilver, LocalSilver, StreamerSilver, open_silver
from helpers.silver.checkpoint import BronzeCheckpoint, plan_round
from helpers.silver.state import STREAMER_CHECKPOINT_KEY, state_from_metadata
from helpers.silver.streamer_config import StreamerTable, streamer_config
from helpers.silver.streamer_sql import MARKER_ERROR, TransformShape, transform_sql, truncate_sql, void_view

SALE = {
    "type": "record",
    "name": "tickit.ecomm.sale.Value",
    "fields": [
        {"name": "salesid", "type": "int"},
        {
            "name": "pricepaid",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}],
        },
        {"name": "__deleted", "type": ["null", "string"]},
        {"name": "__op", "type": ["null", "string"]},
        {"name": "__file", "type": ["null", "string"]},
        {"name": "__pos", "type": ["null", "long"]},
        {"name": "__row", "type": ["null", "int"]},
    ],
}


@pytest.fixture
def params(tmp_path: Path) -> Any:
    return load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.bronze": str(tmp_path / "b")})


def test_the_transform_orders_by_log_position_marks_deletes_and_drops_markers() -> None:
    sql = transform_sql(TransformShape(SALE, "mariadb", ("__file", "__pos", "__row"), "hard"))
    assert sql.startswith("SELECT `salesid`, `pricepaid`, `__op`, `__file`, `__pos`, `__row`, ")
    assert "`__deleted`," not in sql.split(" FROM ")[0].split("coalesce")[0]  # the flag itself is not kept
    assert "substring_index(CAST(`__file` AS STRING), '.', -1)" in sql
    assert "AS `_cdc_position`" in sql
    assert "coalesce(`__deleted` = 'true', false) AS `_hoodie_is_deleted`" in sql
    assert sql.endswith("FROM <SRC> WHERE `__op` IN ('c', 'u', 'd', 'r')")  # not 't', not 'resnapshot'


def test_where_the_driver_applies_markers_a_round_holding_one_fails_with_the_marker_error() -> None:
    sql = transform_sql(TransformShape(SALE, "mariadb", ("__file", "__pos", "__row"), "hard"), markers="fail")
    assert sql.endswith(
        "WHERE CASE WHEN coalesce(`__op` IN ('t', 'resnapshot'), false) THEN raise_error("
        f"'{MARKER_ERROR} a TRUNCATE or re-snapshot marker in this round') "
        "ELSE `__op` IN ('c', 'u', 'd', 'r') END"
    )
    with pytest.raises(HudiError, match="unknown marker handling"):
        transform_sql(TransformShape(SALE, "mariadb", ("__file",), "hard"), markers="keep")


def test_the_truncate_transform_keeps_changes_after_the_newest_marker_and_deletes_older_rows() -> None:
    """As the PySpark engine (helpers.silver.truncate): T is the newest marker's position; the
    round's changes after T; every stored row from before T as a delete at T (soft: flagged)."""
    sql = truncate_sql(
        TransformShape(SALE, "mariadb", ("__file", "__pos", "__row"), "soft", min_key=("salesid", 5)),
        view="v_sale",
    )
    assert "WHERE (`__op` IN ('c', 'u', 'd', 'r') AND `salesid` >= 5) OR coalesce(`__op` IN" in sql
    assert "SELECT max(coalesce(`_cdc_position`, raise_error(" in sql  # a marker without a position fails
    assert "events.`_cdc_position` > cut.`workbook_cut`" in sql
    assert (
        "UNION ALL SELECT stored.`salesid`, stored.`pricepaid`, 'd' AS `__op`, stored.`__file`, "
        "stored.`__pos`, stored.`__row`, cut.`workbook_cut` AS `_cdc_position`, true AS `__deleted` "
        "FROM global_temp.`v_sale` AS stored CROSS JOIN cut "
        "WHERE cut.`workbook_cut` IS NOT NULL AND stored.`_cdc_position` < cut.`workbook_cut`"
    ) in sql
    assert "_hoodie_is_deleted" in truncate_sql(
        TransformShape(SALE, "mariadb", ("__file",), "hard"), view="v"
    )
    assert void_view("sale_mor") == "workbook_void_sale_mor"
    with pytest.raises(HudiError, match="no Avro name"):
        void_view("a`b")


def test_a_table_whose_driver_applies_markers_tells_it_the_truncate_file() -> None:
    table = StreamerTable(
        "sale", "/c/sale.properties", "/c/s.avsc", "/c/t.avsc", "q", "/s/sale", "COPY_ON_WRITE",
        "x.AvroDFSSource", truncate_properties="file:///c/sale.truncate.properties", soft_field="__deleted",
    )  # fmt: skip
    assert table.plan_entry()["markers"] == {
        "error": MARKER_ERROR,
        "properties": "file:///c/sale.truncate.properties",
        "view": "workbook_void_sale",
        "base_path": "file:///s/sale",
        "soft_field": "__deleted",
    }


def test_a_sliced_table_keeps_the_keys_from_its_lowest_on() -> None:
    """``min_key``: the same slice as the Spark engine's (helpers.silver.prepare.slice_column)."""
    sql = transform_sql(
        TransformShape(SALE, "mariadb", ("__file", "__pos", "__row"), "hard", min_key=("salesid", 1_000))
    )
    assert sql.endswith("WHERE `__op` IN ('c', 'u', 'd', 'r') AND `salesid` >= 1000")
    with pytest.raises(HudiError, match="no Avro field name"):
        transform_sql(TransformShape(SALE, "mariadb", ("__file",), "hard", min_key=("salesid` OR 1=1 --", 1)))


def test_soft_deletes_keep_the_row_with_a_boolean_flag() -> None:
    sql = transform_sql(TransformShape(SALE, "mariadb", ("__file", "__pos", "__row"), "soft"))
    assert "AS `__deleted`" in sql and "_hoodie_is_deleted" not in sql


def test_json_lines_bronze_reads_the_payload_and_casts_decimals_from_text() -> None:
    sql = transform_sql(
        TransformShape(SALE, "mariadb", ("__file", "__pos", "__row"), "hard", flavour="jsonl")
    )
    assert "CAST(`pricepaid` AS DECIMAL(8, 2)) AS `pricepaid`" in sql
    assert "FROM (SELECT payload.* FROM <SRC>) AS bronze" in sql


def test_a_debezium_source_s_rows_are_renamed_to_bronze_s_columns_then_converted() -> None:
    """Hudi's Debezium sources give ``_change_operation_type``, ``_event_bin_file``...: renamed to
    Bronze's ``__op``, ``__file``..., ``__deleted`` from the operation, then the same transform."""
    sql = transform_sql(
        TransformShape(
            SALE, "mariadb", ("__file", "__pos", "__row"), "hard", flavour="debezium", table="sale"
        )
    )
    inner = sql.split("FROM (", 1)[1]
    for bronze, hudi in (
        ("__op", "_change_operation_type"),
        ("__file", "_event_bin_file"),
        ("__pos", "_event_pos"),
    ):
        assert f"`{hudi}` AS `{bronze}`" in inner
    assert "CASE WHEN `_change_operation_type` = 'd' THEN 'true' ELSE 'false' END AS `__deleted`" in inner
    assert "CAST(`pricepaid` AS DECIMAL(8, 2)) AS `pricepaid`" in sql
    assert sql.endswith("FROM <SRC>) AS bronze WHERE `__op` IN ('c', 'u', 'd', 'r')")
    unknown = {"fields": [*SALE["fields"], {"name": "__txid", "type": "long"}]}
    with pytest.raises(HudiError, match="no column for Bronze's '__txid'"):
        transform_sql(
            TransformShape(
                unknown, "mariadb", ("__file", "__pos", "__row"), "hard", flavour="debezium", table="sale"
            )
        )


def test_a_table_read_from_its_topic_has_no_schema_provider_and_tells_the_driver_its_topic() -> None:
    table = StreamerTable(
        "sale", "/c/sale.properties", "/c/s.avsc", "/c/t.avsc", "SELECT 1", "/s/sale", "COPY_ON_WRITE",
        "org.apache.hudi.utilities.sources.debezium.MysqlDebeziumSource",
        kafka={"bootstrap": "127.0.0.1:9", "topic": "tickit_raw.ecomm.sale"},
    )  # fmt: skip
    assert "--schemaprovider-class" not in table.args()
    entry = table.plan_entry()
    assert entry["target_schema"] == "" and entry["kafka"]["topic"] == "tickit_raw.ecomm.sale"
    assert entry["base_path"] == "file:///s/sale"
    bronze = StreamerTable("t", "p", "s", "t", "q", "b", "COPY_ON_WRITE", "x.AvroDFSSource")
    assert "--schemaprovider-class" in bronze.args() and "kafka" not in bronze.plan_entry()


def test_a_field_name_that_is_not_an_avro_name_is_refused() -> None:
    bad = {"fields": [{"name": "a`b", "type": "int"}]}
    with pytest.raises(HudiError, match="no Avro field name"):
        transform_sql(TransformShape(bad, "postgres", ("__lsn",), "hard"))


def test_properties_share_a_base_file_and_keep_each_table_s_own_keys(params: Any) -> None:
    base, tables = streamer_config(params)
    assert (
        base["hoodie.datasource.write.payload.class"]
        == "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    )
    assert base["hoodie.payload.ordering.field"] == "_cdc_position"
    assert base["hoodie.streamer.schemaprovider.spark_avro_post_processor.enable"] == "false"
    assert not any(k.startswith(("hoodie.write.table.version", "hoodie.datasource.hive_sync.")) for k in base)
    assert tables["sale"]["hoodie.table.name"] == "sale"
    assert tables["sale"]["hoodie.streamer.source.dfs.root"].endswith("/b/tickit.ecomm.sale")
    assert tables["order_items"]["hoodie.datasource.write.recordkey.field"] == "order_id,line_no"
    assert base["hoodie.datasource.write.keygenerator.class"].endswith("NonpartitionedKeyGenerator")
    assert tables["sale_mor"]["hoodie.datasource.write.table.type"] == "MERGE_ON_READ"
    for own in tables.values():
        assert not set(own) & set(base) or all(base.get(k) != v for k, v in own.items())


def test_the_streamer_arguments_resume_from_a_given_checkpoint() -> None:
    table = StreamerTable(
        "sale",
        "/c/sale.properties",
        "/c/s.avsc",
        "/c/t.avsc",
        "SELECT 1",
        "/s/sale",
        "COPY_ON_WRITE",
        "org.apache.hudi.utilities.sources.AvroDFSSource",
        checkpoint="1700",
    )
    args = table.args()
    assert args[args.index("--props") + 1] == "file:///c/sale.properties"
    assert args[args.index("--checkpoint") + 1] == "1700"
    assert "--checkpoint" not in StreamerTable("t", "p", "s", "t", "q", "b", "COPY_ON_WRITE", "x").args()


def _obj(name: str, modified: float) -> BronzeObject:
    return BronzeObject(name, f"/b/{name}", modified)


def test_a_streamer_checkpoint_newer_than_the_workbook_s_is_a_watermark_at_its_millisecond() -> None:
    streamer = {"extraMetadata": {STREAMER_CHECKPOINT_KEY: "1700000000123"}}
    workbook = {
        "extraMetadata": {"workbook.bronze.checkpoint": BronzeCheckpoint(5.0, frozenset({"x"})).to_json()}
    }
    state = state_from_metadata((), iter([streamer, workbook]))
    assert state.streamer_checkpoint == "1700000000123"
    listing = [_obj("taken", 1700000000.1239), _obj("new", 1700000000.124)]
    new, _ = plan_round(listing, state.checkpoint, 1700000100.0, 900.0)
    assert [o.name for o in new] == ["new"]  # the PySpark engine goes on where the streamer stopped
    older = state_from_metadata((), iter([workbook, streamer]))
    assert older.streamer_checkpoint is None and older.checkpoint.files == frozenset({"x"})


def test_each_environment_and_engine_has_its_silver_backend(tmp_path: Path) -> None:
    aws = {
        "aws.s3_bucket": "b",
        "aws.rds.postgres.instance_id": "p",
        "aws.rds.mysql.instance_id": "m",
        "aws.rds.sqlserver.instance_id": "s",
        "lake.bronze": "s3://b/bronze",
        "lake.silver": "s3://b/silver",
    }
    assert type(open_silver(load_params("ci", {}))) is LocalSilver
    assert type(open_silver(load_params("ci", {"silver.engine": "streamer"}))) is StreamerSilver
    assert type(open_silver(load_params("aws", aws))) is EmrSilver
    on_emr = open_silver(load_params("aws", {**aws, "silver.engine": "streamer"}))
    assert type(on_emr) is EmrStreamerSilver  # the steps write; notebook 03 does not ingest there
    assert on_emr.start_continuous()["state"] == "EMR_STEPS"


def test_a_local_streamer_driver_keeps_its_scratch_files_under_the_state_directory(params: Any) -> None:
    """Spark's local dir and the JVM's temporary dir are the starting process's scratch folder; a
    command that is only shown names the folder's pattern. Its shuffles are sized for this machine,
    as the workbook's own local sessions are."""
    from helpers.local.scratch import SCRATCH_DIR
    from helpers.silver.streamer import spark_submit_base

    streamer = params.silver.streamer.model_copy(update={"master": "local[2]"})
    local = params.model_copy(update={"silver": params.silver.model_copy(update={"streamer": streamer})})
    for scratch, folder in (
        (params.state_path / "x", params.state_path / "x"),
        (None, params.state_path / SCRATCH_DIR / "PID-START"),
    ):
        argv = spark_submit_base(local, ["a.jar"], scratch=scratch)
        conf = dict(a.removeprefix("--conf=").split("=", 1) for a in argv if a.startswith("--conf="))
        assert conf["spark.local.dir"] == str(folder)
        assert conf["spark.driver.extraJavaOptions"].endswith(f" -Djava.io.tmpdir={folder}")
        assert "-Duser.timezone=UTC" in conf["spark.driver.extraJavaOptions"].split()
        assert conf["spark.sql.shuffle.partitions"] == conf["spark.default.parallelism"] == "4"


def test_hudi_shuffles_are_sized_for_this_machine_locally_and_left_to_hudi_on_a_cluster(params: Any) -> None:
    """Locally (both engines) Hudi shuffles in two partitions; on EMR (``spark.master`` empty) no
    parallelism is set, so Hudi deduces it from the round's partitions, which grow with the data,
    for the PySpark engine's writes and the DeltaStreamer steps' properties alike."""
    from support.aws import aws_overrides

    from helpers.silver.tables import silver_write_options

    keys = [f"hoodie.{op}.shuffle.parallelism" for op in ("upsert", "insert", "delete", "bulkinsert")]
    sale = next(t for t in params.silver.tables if t.name == "sale")
    local = silver_write_options(params, sale)
    assert [local[k] for k in keys] == ["2"] * 4
    base, _ = streamer_config(params)
    assert [base[k] for k in keys] == ["2"] * 4
    aws = load_params("aws", aws_overrides())
    on_emr = silver_write_options(aws, next(t for t in aws.silver.tables if t.name == "sale"))
    assert not set(keys) & set(on_emr)
    aws_base, _ = streamer_config(aws)
    assert not set(keys) & set(aws_base)
