"""Silver ingestion through the official Hudi writer: against the real sources (the shared capture
pipeline), and the writer's behaviours the ingestion relies on, on small tables written here.

Expected final states are stated per test; instants come from the timelines.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.bronze_events import write_category_changes, write_changes
from support.pipeline import Capture
from support.silver_tables import write_silver

from helpers.capture.owner import claim_bronze, state_id
from helpers.checks.parity import bronze_vs_source, silver_vs_source
from helpers.errors import BronzeError
from helpers.hudi.api import read_hudi_df, write_hudi
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import completed_instants, read_commit_metadata
from helpers.params import SilverTableParams, WorkbookParams, load_params
from helpers.query.engines import open_engine
from helpers.silver.backend import register_catalog
from helpers.silver.checkpoint import CHECKPOINT_KEY, FILES_KEY, BronzeCheckpoint
from helpers.silver.ingest import ingest_all
from helpers.silver.prepare import position_column
from helpers.silver.state import BRONZE_OWNER_KEY
from helpers.silver.tables import POSITION_COLUMN, pending_bronze, silver_write_options, table_config
from helpers.sources.edge_cases.catalogue import apply_edge_case

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _with(params: WorkbookParams, **updates: Any) -> WorkbookParams:
    """``params`` with another ``lake.silver`` and catalog database / sync."""
    lake = params.lake.model_copy(update={k: v for k, v in updates.items() if k in ("silver",)})
    silver = params.silver.model_copy(update={k: v for k, v in updates.items() if k in ("database", "sync")})
    return params.model_copy(update={"lake": lake, "silver": silver})


def test_silver_equals_the_sources_and_takes_each_bronze_file_once(
    capture: Capture, tmp_path: Path, spark: Any
) -> None:
    """Every Silver table (12, ``sale`` also as MoR) equals its source row by row after one ingestion; a
    second finds nothing new; after a delete + re-insert and rapid updates at the sources, Silver equals
    them again, and as of the commit before them the earlier rows come back. Each commit names the files
    it took: no file twice. Every table is Hudi table version 6, registered by Hudi's Hive sync (MoR as
    ``_ro``/``_rt``), and Spark SQL over the catalog returns the source's row count."""
    params = _with(capture.stack.params, silver=str(tmp_path / "silver"), database="wb_official")
    specs = list(capture.specs.values())
    assert bronze_vs_source(params, specs, wait_s=60)["equal"].all()
    first = ingest_all(params, spark=spark)
    assert (first["files"] > 0).all(), first
    check = silver_vs_source(params)
    assert check["equal"].all(), check[~check["equal"]]
    assert (ingest_all(params, spark=spark)["files"] == 0).all()

    category = table_config(params, next(t for t in params.silver.tables if t.name == "category")).base_path
    first_instant = completed_instants(category)[-1].timestamp
    before = {r["catid"]: r["catname"] for r in read_snapshot(category).to_pylist()}
    changed = apply_edge_case(params, "delete_reinsert_postgres")
    apply_edge_case(params, "rapid_updates_mariadb")
    assert bronze_vs_source(params, specs, wait_s=60)["equal"].all()
    again = ingest_all(params, spark=spark)
    assert again["files"].sum() > 0
    check = silver_vs_source(params)
    assert check["equal"].all(), check[~check["equal"]]
    # as of the commit before the changes, the earlier rows come back
    as_of = {r["catid"]: r["catname"] for r in read_snapshot(category, as_of=first_instant).to_pylist()}
    assert as_of == before and changed.keys[0] not in as_of
    assert {r["catid"]: r["catname"] for r in read_snapshot(category).to_pylist()}[changed.keys[0]] == "third"

    for table in params.silver.tables:
        base = table_config(params, table).base_path
        props = Path(base, ".hoodie", "hoodie.properties").read_text()
        assert "hoodie.table.version=6" in props.splitlines()
        taken: list[str] = []
        for instant in completed_instants(base, ("commit", "deltacommit")):
            extra = read_commit_metadata(base, instant).get("extraMetadata") or {}
            if FILES_KEY in extra:
                taken += json.loads(extra[FILES_KEY])
                BronzeCheckpoint.from_json(extra[CHECKPOINT_KEY])
        assert len(taken) == len(set(taken)) > 0, table.name
    assert (
        POSITION_COLUMN in read_snapshot(table_config(params, params.silver.tables[0]).base_path).column_names
    )

    catalog = register_catalog(params, spark=spark)
    names = set(catalog["name"])
    assert {"sale", "sale_mor_ro", "sale_mor_rt", "category", "order_items"} <= names
    sale_rows = int(check.set_index("table").loc["sale", "source_rows"])
    for name in ("sale", "sale_mor_rt"):
        got = spark.sql(f"SELECT count(*) AS n FROM wb_official.{name}").collect()[0]["n"]  # noqa: S608
        assert got == sale_rows, name
    # the read-optimized table reads the base files only: what the datasource's read_optimized gives
    mor_base = table_config(params, next(t for t in params.silver.tables if t.name == "sale_mor")).base_path
    ro = read_hudi_df(spark, mor_base, {"hoodie.datasource.query.type": "read_optimized"})
    ro_keys = {r["salesid"] for r in ro.select("salesid").collect()}
    sql_keys = {r["salesid"] for r in spark.sql("SELECT salesid FROM wb_official.sale_mor_ro").collect()}
    assert sql_keys == ro_keys and len(ro_keys) > 0


def test_position_column_sorts_in_log_order_across_binlog_files(spark: Any) -> None:
    """String order of ``_cdc_position`` equals the (file number, position, row) order, also
    across a binlog rollover and positions of different widths; PostgreSQL LSNs likewise."""
    rows = [
        ("mysql-bin.000009", 987654, 0),
        ("mysql-bin.000010", 4, 0),
        ("mysql-bin.000010", 4, 1),
        ("mysql-bin.000010", 4, 10),
        ("mysql-bin.000010", 120, 2),
        ("mysql-bin.000100", 7, 0),
    ]
    events = spark.createDataFrame(rows, "__file string, __pos long, __row int")
    column = position_column("mariadb", ("__file", "__pos", "__row")).alias("p")
    positions = [r["p"] for r in events.select(column).collect()]
    assert sorted(positions) == positions and len(set(positions)) == len(rows)
    pg = spark.createDataFrame([(123456789,), (9,), (10,)], "__lsn long")
    lsns = [r["p"] for r in pg.select(position_column("postgres", ("__lsn",)).alias("p")).collect()]
    assert sorted(lsns) == [lsns[1], lsns[2], lsns[0]]


def test_write_options_carry_the_workbook_state_and_hudis_settings(capture: Capture) -> None:
    """The commit metadata prefix covers every workbook key; ordering by ``_cdc_position`` with the
    ordering payload; CoW keeps Hudi's CDC log, MoR compacts inline; Hive sync into the Silver
    database, MoR without a suffix-less table; Hudi's bloom index."""
    params = capture.stack.params
    mor = next(t for t in params.silver.tables if t.name == "sale_mor")
    cow = next(t for t in params.silver.tables if t.name == "sale")
    options = silver_write_options(params, mor)
    assert options["hoodie.datasource.write.precombine.field"] == POSITION_COLUMN
    assert options["hoodie.datasource.write.commitmeta.key.prefix"] == "workbook."
    assert FILES_KEY.startswith("workbook.") and CHECKPOINT_KEY.startswith("workbook.")
    assert options["hoodie.compact.inline"] == "true"
    assert "hoodie.table.cdc.enabled" not in options
    assert options["hoodie.datasource.hive_sync.database"] == "wb_capture"
    assert silver_write_options(params, cow)["hoodie.table.cdc.enabled"] == "true"
    # Hudi's bloom index on key-ranged file groups (global with partition moves when partitioned)
    for table in params.silver.tables:
        want = "GLOBAL_BLOOM" if table.partition else "BLOOM"
        assert silver_write_options(params, table)["hoodie.index.type"] == want, table.name


def _in_folders(spark_params: WorkbookParams, tmp_path: Path, **overrides: Any) -> WorkbookParams:
    """CI parameters with Bronze and Silver in folders of the test, the catalog in the test
    session's metastore; ``overrides`` by dotted key."""
    return load_params(
        "ci",
        overrides={
            "state_dir": spark_params.state_dir,
            "local.metastore.port": spark_params.local.metastore.port,
            "lake.silver": str(tmp_path / "silver"),
            "lake.bronze": str(tmp_path / "bronze"),
            **overrides,
        },
    )


@pytest.fixture
def small(tmp_path: Path, spark_params: WorkbookParams) -> WorkbookParams:
    """CI parameters with Silver in a folder of the test, catalog sync off."""
    return _in_folders(spark_params, tmp_path, **{"silver.sync": False, "silver.compaction_delta_commits": 2})


def _table(params: WorkbookParams, name: str, table_type: str = "COPY_ON_WRITE") -> SilverTableParams:
    return SilverTableParams(
        name=name, source="ems", table="event", record_key=("id",), table_type=table_type
    )  # type: ignore[arg-type]


SCHEMA = pa.schema(
    [("id", pa.int32()), ("name", pa.string()), ("pos", pa.string()), ("_hoodie_is_deleted", pa.bool_())]
)


def _events(rows: list[tuple[int, str, str, bool]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "name": n, "pos": p, "_hoodie_is_deleted": d} for i, n, p, d in rows], schema=SCHEMA
    )


def _state(params: WorkbookParams, table: SilverTableParams, spark: Any) -> dict[int, str]:
    base = table_config(params, table).base_path
    by_spark = {r["id"]: r["name"] for r in read_hudi_df(spark, base).collect()}
    assert by_spark == {r["id"]: r["name"] for r in read_snapshot(base).to_pylist()}
    return by_spark


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_older_change_never_overwrites_or_deletes_a_newer_row(
    small: WorkbookParams, spark: Any, table_type: str
) -> None:
    """Ordering by the precombine field on the stored row: after ``1@5 = b``, an older update
    (``1@3``) and an older delete (``1@4``) leave ``b``; a newer update (``1@6``) wins; in one batch
    the newest change of a key wins whatever the row order; MoR the same before and after its
    inline compaction (every 2 delta commits here)."""
    t = _table(small, "ordering", table_type)
    write_silver(spark, small, t, _events([(1, "a", "001", False), (2, "x", "001", False)]), precombine="pos")
    write_silver(spark, small, t, _events([(1, "b", "005", False)]), precombine="pos")
    write_silver(
        spark, small, t, _events([(1, "old", "003", False), (1, "gone", "004", True)]), precombine="pos"
    )
    assert _state(small, t, spark) == {1: "b", 2: "x"}
    write_silver(spark, small, t, _events([(2, "z", "009", False), (2, "y", "008", False)]), precombine="pos")
    write_silver(spark, small, t, _events([(1, "c", "006", False)]), precombine="pos")
    assert _state(small, t, spark) == {1: "c", 2: "z"}
    base = table_config(small, t).base_path
    if table_type == "MERGE_ON_READ":
        actions = [i.action for i in completed_instants(base, ("commit", "deltacommit"))]
        assert "commit" in actions, f"no compaction on the timeline: {actions}"
        write_silver(spark, small, t, _events([(2, "older", "007", False)]), precombine="pos")
        assert _state(small, t, spark) == {1: "c", 2: "z"}


def test_tombstones_keep_a_late_older_change_from_bringing_a_deleted_row_back(
    small: WorkbookParams, spark: Any, tmp_path: Path
) -> None:
    """The control first: the official writer alone re-creates a hard-deleted row when an older
    insert of it arrives later (it compares with the stored row only). Through ingestion, with
    the delete remembered as a tombstone, the same late change is dropped and counted."""
    control = _table(small, "control")
    write_silver(spark, small, control, _events([(1, "a", "001", False)]), precombine="pos")
    write_silver(spark, small, control, _events([(1, "a", "002", True)]), precombine="pos")
    assert _state(small, control, spark) == {}
    write_silver(spark, small, control, _events([(1, "a", "001", False)]), precombine="pos")
    assert _state(small, control, spark) == {1: "a"}  # the row came back

    params = load_params(
        "ci",
        overrides={
            "state_dir": small.state_dir,
            "local.metastore.port": small.local.metastore.port,
            "lake.silver": small.lake.silver,
            "lake.bronze": str(tmp_path / "bronze"),
            "silver.sync": False,
        },
    )
    category = next(t for t in params.silver.tables if t.name == "category")

    def bronze(lsn: int, op: str, name: str) -> None:
        write_category_changes(params, [(lsn, 1, name, op)])

    bronze(10, "c", "first")
    bronze(20, "d", "first")
    ingest_all(params, ["category"], spark=spark)  # inserted and deleted in one round: nothing stored
    base = table_config(params, category).base_path
    assert read_snapshot(base).num_rows == 0
    bronze(15, "u", "late and older")  # e.g. a redelivered file
    result = ingest_all(params, ["category"], spark=spark).iloc[0]
    assert (result["files"], result["late_dropped"]) == (1, 1)
    assert read_snapshot(base).num_rows == 0
    assert pending_bronze(params, category)[0] == []  # the round committed (an empty commit): taken
    bronze(30, "c", "re-inserted")
    ingest_all(params, ["category"], spark=spark)
    assert [r["catname"] for r in read_snapshot(base).to_pylist()] == ["re-inserted"]


def test_a_table_refuses_the_bronze_zone_of_another_capture_state(
    small: WorkbookParams, spark: Any, tmp_path: Path
) -> None:
    """Each commit records the owner of the Bronze zone it read. The zone deleted and made again by
    another state directory's capture (new source servers: log positions start again, so the new
    update at LSN 10 would lose to the stored row at 500) stops the round before it reads anything,
    naming the table, both states and the ways out; Silver is left as it was. A new Silver zone
    (one of the ways out) takes the new history."""
    params = small  # Bronze and Silver in folders of the test
    category = next(t for t in params.silver.tables if t.name == "category")
    bronze, old, new = tmp_path / "bronze", tmp_path / "old-state", tmp_path / "new-state"
    claim_bronze(bronze, old)
    write_category_changes(params, [(500, 1, "old server", "c")])
    ingest_all(params, ["category"], spark=spark)
    base = table_config(params, category).base_path
    instants = completed_instants(base)
    assert read_commit_metadata(base, instants[-1])["extraMetadata"][BRONZE_OWNER_KEY] == state_id(old)

    shutil.rmtree(bronze)
    claim_bronze(bronze, new)
    write_category_changes(params, [(10, 1, "new server", "u")])
    with pytest.raises(BronzeError) as refused:
        ingest_all(params, ["category"], spark=spark)
    message = str(refused.value)
    assert f"Failed to ingest Bronze zone {bronze} into Silver table category at {base}" in message
    assert f"(id {state_id(old)})" in message and f"state {state_id(new)} ({new.resolve()})" in message
    assert "delete lake.silver" in message
    assert completed_instants(base) == instants
    assert [r["catname"] for r in read_snapshot(base).to_pylist()] == ["old server"]

    fresh = _with(params, silver=str(tmp_path / "silver-again"))
    ingest_all(fresh, ["category"], spark=spark)
    assert [r["catname"] for r in read_snapshot(table_config(fresh, category).base_path).to_pylist()] == [
        "new server"
    ]


def _catalog(spark: Any, database: str, table: str) -> tuple[dict[str, str], str | None]:
    """The catalog's column types of a table, and the instant Hudi's Hive sync last synced."""
    columns = {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE {database}.{table}").collect()}
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {database}.{table}").collect()}
    return columns, props.get("last_commit_time_sync")


def test_a_widened_source_column_reaches_the_catalog_and_trino_reads_it(
    spark_params: WorkbookParams, spark: Any, tmp_path: Path
) -> None:
    """A source column widened (``ALTER TABLE ... TYPE bigint``) sends int64 values: the commit that
    first writes them syncs the catalog, whose column becomes ``bigint``, and Trino (Athena's
    engine) reads a value past 2**31 (with the column left ``int``: ``integer overflow``). A round
    of the schema the catalog holds does not sync (the synced instant stays). A column dropped at
    the source stays in Silver and in the catalog, null for the rows changed after the drop."""
    params = _in_folders(spark_params, tmp_path, **{"silver.sync": True, "silver.database": "widening"})
    category = next(t for t in params.silver.tables if t.name == "category")
    key = {"type": "int32", "optional": False, "field": "catid"}
    name = {"type": "string", "optional": True, "field": "catname"}
    narrow = [key, {"type": "int32", "optional": True, "field": "catgroup"}, name]
    wide = [key, {"type": "int64", "optional": True, "field": "catgroup"}, name]

    def round_(fields: list[dict[str, Any]], changes: list[tuple[int, str, dict[str, Any]]]) -> str:
        write_changes(params, fields, changes)
        return str(ingest_all(params, ["category"], spark=spark).iloc[0]["instant"])

    first = round_(narrow, [(10, "c", {"catid": 1, "catgroup": 5, "catname": "a"})])
    columns, synced = _catalog(spark, "widening", "category")
    assert (columns["catgroup"], synced) == ("int", first)
    round_(narrow, [(12, "c", {"catid": 2, "catgroup": 7, "catname": "b"})])
    assert _catalog(spark, "widening", "category")[1] == first  # the catalog held that schema: no sync
    widened = round_(wide, [(20, "u", {"catid": 1, "catgroup": 5_000_000_000, "catname": "a"})])
    columns, synced = _catalog(spark, "widening", "category")
    assert (columns["catgroup"], synced) == ("bigint", widened)
    served = {
        "query_engine": "trino",
        "trino": spark_params.local.trino,
        "metastore": spark_params.local.metastore,
    }
    on_trino = params.model_copy(update={"local": params.local.model_copy(update=served)})
    with open_engine(on_trino, progress=False) as engine:
        read = engine.query("SELECT catid, catgroup FROM widening.category ORDER BY catid")
    assert [tuple(r) for r in read.itertuples(index=False)] == [(1, 5_000_000_000), (2, 7)]

    round_(wide[:2], [(30, "u", {"catid": 2, "catgroup": 8})])
    base = table_config(params, category).base_path
    rows = {r["catid"]: (r["catgroup"], r["catname"]) for r in read_snapshot(base).to_pylist()}
    assert rows == {1: (5_000_000_000, "a"), 2: (8, None)}
    columns, synced = _catalog(spark, "widening", "category")
    assert (columns["catname"], synced) == ("string", widened)


def test_soft_deletes_keep_the_row_flagged(small: WorkbookParams, spark: Any) -> None:
    """Soft mode: a delete keeps the row with ``__deleted = true``; an older update does not
    un-delete it; a newer insert does."""
    t = SilverTableParams(name="soft", source="ems", table="event", record_key=("id",), delete_mode="soft")
    schema = pa.schema(
        [("id", pa.int32()), ("name", pa.string()), ("pos", pa.string()), ("__deleted", pa.bool_())]
    )

    def rows(items: list[tuple[int, str, str, bool]]) -> pa.Table:
        return pa.Table.from_pylist(
            [{"id": i, "name": n, "pos": p, "__deleted": d} for i, n, p, d in items], schema=schema
        )

    write_silver(spark, small, t, rows([(1, "a", "001", False)]), precombine="pos")
    write_silver(spark, small, t, rows([(1, "a", "003", True)]), precombine="pos")
    write_silver(spark, small, t, rows([(1, "older", "002", False)]), precombine="pos")
    base = table_config(small, t).base_path
    assert [(r["name"], r["__deleted"]) for r in read_snapshot(base).to_pylist()] == [("a", True)]
    write_silver(spark, small, t, rows([(1, "back", "004", False)]), precombine="pos")
    assert [(r["name"], r["__deleted"]) for r in read_snapshot(base).to_pylist()] == [("back", False)]


def test_parity_finds_a_changed_a_missing_and_an_extra_silver_row(
    capture: Capture, tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole-table check can fail: after Silver ``category`` equals its source, one changed
    name, then one deleted row, then one row the source never had each make it unequal (digests
    per key bucket, computed by Spark's executors on Silver and streamed from the source). A check
    of an unchanged Silver table takes its digests from the cache; every write is a miss."""
    import helpers.checks.parity as parity

    reduced: list[int] = []
    digests = parity.spark_bucket_digests

    def counted(*args: Any, **kwargs: Any) -> Any:
        reduced.append(1)
        return digests(*args, **kwargs)

    monkeypatch.setattr(parity, "spark_bucket_digests", counted)
    ems = [capture.specs["ems"]]
    shutil.rmtree(capture.stack.params.state_path / "parity", ignore_errors=True)  # earlier tests' digests
    assert bronze_vs_source(capture.stack.params, ems, wait_s=60)["equal"].all()
    replayed = len(reduced)
    assert replayed >= len(ems[0].topics)
    assert bronze_vs_source(capture.stack.params, ems)["equal"].all()
    assert len(reduced) == replayed  # no Bronze file new: every topic's replay from the cache
    reduced.clear()
    params = _with(capture.stack.params, silver=str(tmp_path / "silver"), database="wb_parity", sync=False)
    ingest_all(params, ["category"], spark=spark)
    assert silver_vs_source(params, ["category"], spark=spark)["equal"].all()
    assert silver_vs_source(params, ["category"], spark=spark)["equal"].all()
    assert len(reduced) == 1  # the second check: Silver's timeline unchanged, digests cached
    category = next(t for t in params.silver.tables if t.name == "category")
    base = table_config(params, category).base_path
    stored = (
        read_hudi_df(spark, base)
        .where("catid = 1")
        .drop(*[c for c in read_hudi_df(spark, base).columns if c.startswith("_hoodie")])
    )
    options = {**silver_write_options(params, category), "hoodie.datasource.hive_sync.enable": "false"}
    from pyspark.sql import functions as F

    write_hudi(
        stored.withColumn("catname", F.lit("not the source's")).withColumn(POSITION_COLUMN, F.lit("9" * 20)),
        options,
        base,
    )
    changed = silver_vs_source(params, ["category"], spark=spark).iloc[0]
    assert not changed["equal"] and changed["silver_rows"] == changed["source_rows"]
    delete = {**options, "hoodie.datasource.write.operation": "delete"}
    write_hudi(stored, delete, base)
    missing = silver_vs_source(params, ["category"], spark=spark).iloc[0]
    assert not missing["equal"] and missing["silver_rows"] == missing["source_rows"] - 1
    write_hudi(
        stored.withColumn("catid", F.lit(99_999)).withColumn(POSITION_COLUMN, F.lit("9" * 20)), options, base
    )
    write_hudi(stored.withColumn(POSITION_COLUMN, F.lit("9" * 20)), options, base)  # catid 1 back as it was
    extra = silver_vs_source(params, ["category"], spark=spark).iloc[0]
    assert not extra["equal"] and extra["silver_rows"] == extra["source_rows"] + 1
    assert len(reduced) == 4  # each check after a write read Silver again
