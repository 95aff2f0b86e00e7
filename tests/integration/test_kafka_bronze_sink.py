"""The local-kafka profile end to end on its real parts: the local PostgreSQL and MariaDB with the CI
sample data, Debezium's connectors in a real Kafka Connect worker, a KRaft broker, and the Bronze
sink (Spark Structured Streaming with Spark's official Kafka source, ``helpers.capture.kafka_sink``)
that lands the topics in Bronze; then the official Hudi writer takes Bronze to Silver. As in the
profile (``params/local-kafka.yaml``), the connectors write Avro with Apicurio's converter and the
schemas live in the local Apicurio Registry (the JSON converter's path: the unit tests).

Checked row by row against the sources: Bronze after the snapshot; Bronze and Silver after a
``kill -9`` of the sink, of the Connect worker and of the broker while rows are being inserted,
each followed by a restart. The redelivered events are counted and printed (``-s``); a sink crash
must redeliver nothing (a replayed micro-batch rewrites its own files), a worker or broker crash
may (Debezium's at-least-once), and Silver absorbs them.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest
from support.kafka_profile import insert_dates, insert_venues, kafka_overrides
from support.silver_tables import STREAMER_TABLES
from support.threads import Pacing, RaisingThread

from helpers.bronze.read import read_bronze
from helpers.capture.backends import ConnectorBackend
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.kafka_sink import HOLD_ENV, BronzeSink
from helpers.capture.owner import OWNER_FILE, state_id
from helpers.capture.raw_topics import RAW_ENGINES, raw_specs, retire_raw_capture
from helpers.capture.register import (
    connector_specs,
    expected_rows,
    open_backend,
    register_connectors,
    wait_for_snapshots,
)
from helpers.capture.resnapshot import resnapshot
from helpers.checks.divergence import DIFFERS, EQUAL, check_divergence
from helpers.checks.parity import bronze_status, bronze_vs_source, silver_vs_source
from helpers.engines import engine_kind
from helpers.errors import CaptureError
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import list_instants
from helpers.local.kafka import LocalKafka
from helpers.local.stack import LocalStack
from helpers.naming import silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.pipeline import pipeline_status, start_servers
from helpers.poll import wait_until
from helpers.proc import pid_alive
from helpers.silver.ingest import ingest_all
from helpers.silver.streamer import run_streamer_once
from helpers.silver.tables import table_config
from helpers.sources.api import LocalSources
from helpers.sources.edge_cases.catalogue import apply_edge_case

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


@dataclass
class World:
    stack: LocalStack
    backend: ConnectorBackend
    specs: list[ConnectorSpec]
    figures: dict[str, float]

    @property
    def params(self) -> WorkbookParams:
        return self.stack.params


@pytest.fixture(scope="module")
def world(stack_factory: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    lake = tmp_path_factory.mktemp("kafka-lake")
    overrides = {
        **kafka_overrides(avro=True),  # as params/local-kafka.yaml: Avro, schemas in the registry
        "lake.bronze": str(lake / "bronze"),
        "lake.silver": str(lake / "silver"),
        "silver.database": "wb_kafka_sink",
    }
    with stack_factory("wb-ks-", overrides) as stack:
        params = stack.params
        sources = LocalSources(params)
        sources.load_sample_data()
        sources.enable_cdc()
        figures: dict[str, float] = {}
        started = time.monotonic()
        start_servers(params)  # the broker, the worker and the sink with the databases
        figures["stack_start_s"] = time.monotonic() - started
        backend = open_backend(params)
        specs = connector_specs(params, LocalSources(params).endpoints())
        started = time.monotonic()
        register_connectors(backend, specs, timeout_s=300)
        wait_for_snapshots(backend, specs, expected_rows(params, sources.row_counts()), timeout_s=600)
        figures["registration_to_snapshot_in_bronze_s"] = time.monotonic() - started
        try:
            yield World(stack, backend, specs, figures)
        finally:
            for name, value in figures.items():
                print(f"[kafka sink figures] {name} = {value:.1f}")


def _while_rows_flow(world: World, first_key: int, crash: Callable[[], None]) -> int:
    """Insert a venue and a date per 20 ms from ``first_key``; ``crash`` runs after 40 of them,
    and the inserts go on until 120 more have been made. Returns how many rows per table."""
    pacing = Pacing(pace_s=0.02)

    def insert(key: int) -> None:
        insert_venues(world.stack, range(key, key + 1), "ks")
        insert_dates(world.stack, range(key, key + 1), 2032)

    thread = RaisingThread(pacing.each, range(first_key, first_key + 1000), insert)

    def rows(n: int) -> bool:
        thread.raise_error()  # a failed insert fails the wait at once
        return len(pacing.done) >= n

    thread.start()
    try:
        wait_until(lambda: rows(40), timeout_s=60, what="rows before the crash")
        crash()
        count = len(pacing.done)
        wait_until(lambda: rows(count + 120), timeout_s=120, what="rows after the crash")
    finally:
        pacing.stop.set()
        thread.join()
    return len(pacing.done)


def _bronze_equal(world: World, what: str) -> dict[str, int]:
    check = bronze_vs_source(world.params, world.specs, wait_s=180)
    assert check["equal"].all(), f"{what}:\n{check}"
    return {str(r.topic): int(r.redelivered) for r in check.itertuples() if r.redelivered}


def test_the_snapshot_lands_in_bronze_equal_to_the_sources_by_day(world: World) -> None:
    """After registration, every captured table replays from Bronze to its source row by row; the
    files are Avro under ``<topic>/year=/month=/day=``; nothing was delivered twice; the sink,
    the worker and the broker show in ``stack status``."""
    params = world.params
    check = bronze_status(params, wait_s=120)  # notebook 02's check, on this profile
    assert check["equal"].all(), check
    assert (check["redelivered"] == 0).all(), check
    files = list(Path(params.path(params.lake.bronze)).rglob("*.avro"))
    assert files and all(
        f.parent.name.startswith("day=")
        and f.parent.parent.name.startswith("month=")
        and f.parent.parent.parent.name.startswith("year=")
        for f in files
    )
    status = pipeline_status(params)
    sink = status["bronze_sink"].iloc[0]
    assert sink["state"] == "RUNNING" and sink["events"] >= int(check["source_rows"].sum())
    servers = status["servers"].set_index("server")["state"]
    assert servers["kafka"] == servers["kafka-connect"] == "running"
    # the sink claimed the zone for this state directory (docs/operations.md, "A state directory
    # and its lake"): a sink of another state is refused before it starts
    owner = json.loads((params.path(params.lake.bronze) / OWNER_FILE).read_text())
    assert owner == {"state_id": state_id(params.state_path), "state_dir": str(params.state_path.resolve())}
    other = params.model_copy(update={"state_dir": str(params.state_path) + "-other"})
    with pytest.raises(CaptureError, match="the capture of another state directory"):
        BronzeSink(other).start()
    assert not BronzeSink(other).directory.exists()


def _streamer_from_topics(world: World, folder: Path) -> WorkbookParams:
    """The world's parameters with Silver of its own under ``folder``, written by HoodieStreamer
    from Debezium's topics (``silver.streamer.source: kafka``): ``STREAMER_TABLES``, of
    the PostgreSQL and MariaDB sources."""
    params = world.params
    tables = tuple(
        t
        for t in params.silver.tables
        if engine_kind(params.source(t.source).engine) in RAW_ENGINES and t.name in STREAMER_TABLES
    )
    assert {t.name for t in tables} == set(STREAMER_TABLES), tables
    return params.model_copy(
        update={
            "lake": params.lake.model_copy(update={"silver": str(folder / "silver")}),
            "silver": params.silver.model_copy(
                update={
                    "tables": tables,
                    "sync": False,
                    "engine": "streamer",
                    "streamer": params.silver.streamer.model_copy(update={"source": "kafka"}),
                }
            ),
        }
    )


def test_hudi_s_debezium_kafka_sources_write_each_kind_of_table_equal_to_its_source(
    world: World, tmp_path: Path
) -> None:
    """The streamer's third mode: Hudi 0.14.0's ``PostgresDebeziumSource`` and ``MysqlDebeziumSource``
    read the unflattened twins of the workbook's connectors through Apicurio's deserializer; the
    Silver tables equal their sources row by row, with the columns the other modes write; then an
    update, a delete and an insert at each source reach Silver (the delete deletes) and an idle run
    commits nothing."""
    params = _streamer_from_topics(world, tmp_path)
    first = run_streamer_once(params)
    assert first["instant"].notna().all(), first
    check = silver_vs_source(params)
    assert check["equal"].all(), check
    columns = set(read_snapshot(table_config(params, params.silver.tables[0]).base_path).column_names)
    assert {"_cdc_position", "__op", "__source_ts_ms"} <= columns, columns
    assert not columns & {"_change_operation_type", "_event_lsn", "_event_bin_file"}, columns
    raw = {name: world.backend.status(name).state for name in (c.name for _, c in raw_specs(params))}
    assert set(raw.values()) == {"RUNNING"} and {"tickit_raw-ecomm", "tickit_raw-ems"} <= set(raw), raw
    stack = world.stack
    insert_venues(stack, range(31_000, 31_003), name="dbz")
    conn = stack.connect_mariadb(params.source("ecomm").database, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT salesid FROM sale ORDER BY salesid LIMIT 2")
            first_key, second_key = (r[0] for r in cur.fetchall())
            cur.execute("UPDATE sale SET pricepaid = pricepaid + 0.01 WHERE salesid = %s", (first_key,))
            cur.execute("DELETE FROM sale WHERE salesid = %s", (second_key,))
    finally:
        conn.close()
    second = run_streamer_once(params)
    assert set(second.loc[second["instant"].notna(), "table"]) >= {"sale", "sale_mor", "venue"}, second
    check = silver_vs_source(params)
    assert check["equal"].all(), check
    idle = run_streamer_once(params)
    assert idle["instant"].isna().all(), idle  # no message after any checkpoint: nothing synced

    # switched to the PySpark engine, which goes on from Bronze; then back, with a new column at
    # the source: the Debezium sources read their whole topics again, but not event's, whose
    # subject now has two schema versions (0.14.0 fails on such a batch): event moves to its
    # Bronze files, and the column arrives
    pyspark = params.model_copy(update={"silver": params.silver.model_copy(update={"engine": "pyspark"})})
    insert_venues(stack, range(31_003, 31_005), name="py")
    _bronze_equal(world, "before the PySpark engine takes over")
    ingest_all(pyspark)
    check = silver_vs_source(pyspark)
    assert check["equal"].all(), check
    column = f"wb_dbz_{uuid.uuid4().hex[:8]}"
    with stack.connect_postgres(params.source("ems").database, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE ems.event ADD COLUMN {column} varchar(20)")
        first_event = "(SELECT min(eventid) FROM ems.event)"
        conn.execute(f"UPDATE ems.event SET {column} = 'topic' WHERE eventid = {first_event}")  # noqa: S608
    _bronze_equal(world, "after the new column")
    back = run_streamer_once(params)
    assert set(back.loc[back["instant"].notna(), "table"]) >= {"event", "venue", "sale"}, back
    check = silver_vs_source(params)
    assert check["equal"].all(), check
    event = read_snapshot(
        table_config(params, next(t for t in params.silver.tables if t.name == "event")).base_path
    )
    assert "topic" in event.column(column).to_pylist()
    moved = {p.name for p in (params.state_path / "streamer" / "conf").glob("*.from-bronze")}
    assert moved == {"event.from-bronze"}, moved
    # back to the PySpark engine: nothing reads the twins, which go with their slots (a slot
    # nobody reads holds WAL for ever); the module's later tests run without them
    assert sorted(retire_raw_capture(world.params)) == sorted(raw)
    assert not [n for n in world.backend.connector_names() if n.startswith("tickit_raw-")]  # type: ignore[attr-defined]
    with stack.connect_postgres_admin() as conn:
        slots = [r[0] for r in conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()]
    assert slots and not [s for s in slots if s.endswith("_raw")], slots
    assert retire_raw_capture(world.params) == []  # nothing left to retire


def test_kill_9_of_the_sink_while_rows_flow_loses_and_doubles_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sink's process group is killed after a micro-batch wrote its files and before Spark
    committed it (a fault-injection pause holds the batch there), while rows are inserted, and is
    started again: that batch runs again (``replayed_batches``), rewrites its own files, and
    Bronze equals the sources with no event in it twice."""
    sink = BronzeSink(world.params)
    sink.stop()
    monkeypatch.setenv(HOLD_ENV, "5")  # the sink started next holds each batch 5 s before its commit
    sink.start()
    sink.wait_running(timeout_s=180)
    monkeypatch.delenv(HOLD_ENV)
    before = sink.status()

    def crash() -> None:
        seen = sink.status().get("last_batch_id")
        wait_until(
            lambda: sink.status().get("last_batch_id") != seen,
            timeout_s=60,
            what="a micro-batch to write its files",
            interval_s=0.05,
        )
        pid = sink.kill()  # within its 5 s hold: written, not committed
        assert pid is not None and not pid_alive(pid)
        assert sink.status()["state"] == "DEAD"
        time.sleep(2)  # rows keep coming while the sink is down
        started = time.monotonic()
        sink.start()  # without the hold
        sink.wait_running(timeout_s=180)
        world.figures["sink_restart_s"] = time.monotonic() - started

    rows = _while_rows_flow(world, 21_000, crash)
    assert _bronze_equal(world, "after a kill -9 of the sink") == {}
    after = sink.status()
    assert after.get("replayed_batches", 0) >= int(before.get("replayed_batches") or 0) + 1
    assert after["events"] >= before["events"] + 2 * rows
    world.figures["sink_kill_rows_per_table"] = rows
    world.figures["sink_kill_replayed_batches"] = after.get("replayed_batches", 0)


def test_kill_9_of_the_worker_and_the_broker_then_bronze_and_silver_equal_the_sources(
    world: World, spark: Any
) -> None:
    """The Connect worker, then the broker, are killed while rows are inserted and started again:
    Bronze equals the sources (redelivered events counted and printed), and Silver written by the
    official Hudi writer from this Bronze equals the sources row by row on the tables these rows and
    the scenarios change (both engines), also after deletes, re-inserts and rapid updates."""
    kafka = LocalKafka(world.params)

    def crash(pid: int | None, start: Callable[[], object]) -> Callable[[], None]:
        def kill_and_restart() -> None:
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not pid_alive(pid), timeout_s=10, what=f"process {pid} to die")
            time.sleep(2)  # rows keep coming while it is down
            start()

        return kill_and_restart

    _while_rows_flow(world, 22_000, crash(kafka.connect_pid(), kafka.start_connect))
    redelivered = _bronze_equal(world, "after a kill -9 of the Connect worker")
    _while_rows_flow(world, 23_000, crash(kafka.broker_pid(), kafka.start_broker))
    redelivered = _bronze_equal(world, "after a kill -9 of the broker")
    print(f"[kafka sink figures] redelivered per topic after the worker and broker kills: {redelivered}")
    world.figures["worker_broker_kill_redelivered"] = sum(redelivered.values())

    # Silver of the tables these rows and scenarios change, one per engine each (every table of the
    # sink's Bronze reaches Silver in tests/notebooks/test_workbook_kafka.py)
    names = ["venue", "date", "category", "sale"]
    first = ingest_all(world.params, names, spark=spark)
    assert (first["files"] > 0).all(), first
    check = silver_vs_source(world.params, names)
    assert len(check) == len(names) and check["equal"].all(), check[~check["equal"]]
    apply_edge_case(world.params, "delete_reinsert_postgres")
    apply_edge_case(world.params, "rapid_updates_mariadb")
    _bronze_equal(world, "after deletes, re-inserts and rapid updates")
    ingest_all(world.params, names, spark=spark)
    check = silver_vs_source(world.params, names)
    assert check["equal"].all(), check[~check["equal"]]


def _marker_files(params: WorkbookParams, table: str) -> list[Path]:
    """The Bronze files of ``table``'s topic that hold TRUNCATE markers (a writer schema of
    Debezium's fields only)."""
    topic = silver_topic(params, next(t for t in params.silver.tables if t.name == table))
    out = []
    for path in Path(params.path(params.lake.bronze)).glob(f"{topic}/**/*.avro"):
        with open(path, "rb") as handle:
            fields = [f["name"] for f in fastavro.reader(handle).writer_schema["fields"]]
        if all(name.startswith("__") for name in fields):
            out.append(path)
    return out


def test_a_truncate_on_either_engine_travels_through_connect_and_silver_follows(
    world: World, spark: Any
) -> None:
    """``TRUNCATE`` of ``ems.venue`` (PostgreSQL) and of ``ecomm.date`` (MariaDB), then new rows:
    the markers pass Kafka Connect (the workbook's TruncateMarker before ExtractNewRecordState),
    Apicurio's Avro and the sink into Bronze; Bronze replays to the sources; Silver, which held the
    old rows, equals the sources row by row after one round."""
    params = world.params
    names = ["venue", "date"]
    ingest_all(params, names, spark=spark)  # Silver holds the rows before the truncate
    bases = {t.name: table_config(params, t).base_path for t in params.silver.tables if t.name in names}
    before = {n: [i for i in list_instants(b) if i.is_completed][-1].timestamp for n, b in bases.items()}
    rows_before = {n: read_snapshot(b).num_rows for n, b in bases.items()}
    with world.stack.connect_postgres(params.source("ems").database, autocommit=True) as conn:
        conn.execute("TRUNCATE ems.venue")
    maria = world.stack.connect_mariadb(params.source("ecomm").database, autocommit=True)
    try:
        with maria.cursor() as cur:
            cur.execute("TRUNCATE TABLE `date`")
    finally:
        maria.close()
    insert_venues(world.stack, range(24_000, 24_003), "tr")
    insert_dates(world.stack, range(24_000, 24_003), 2033)
    _bronze_equal(world, "after a TRUNCATE on both engines")
    assert _marker_files(params, "venue") and _marker_files(params, "date")
    result = ingest_all(params, names, spark=spark).set_index("table")
    assert result["truncated_at"].notna().all(), result
    check = silver_vs_source(params, names)
    assert check["equal"].all() and (check["source_rows"] == 3).all(), check
    for name, base in bases.items():  # time travel to before the truncate still shows the old rows
        assert read_snapshot(base, as_of=before[name]).num_rows == rows_before[name] > 3, name


def test_a_resnapshot_through_kafka_connect_brings_a_diverged_table_back_while_others_flow(
    world: World, spark: Any
) -> None:
    """Rows of ``ecomm.date`` deleted and changed with ``sql_log_bin = 0`` (capture never sees
    them): the status's check names ``date`` as differing; ``resnapshot`` sends the signal, reads
    Debezium's COMPLETED notification from Kafka (Avro, through the registry), waits for the sink
    and writes the marker; venues inserted meanwhile flow; Silver equals the sources again."""
    params = world.params
    insert_dates(world.stack, range(24_100, 24_104), 2034)
    _bronze_equal(world, "before the divergence")
    ingest_all(params, ["date", "venue"], spark=spark)
    assert check_divergence(params, ["date"], wait_s=60).iloc[0]["result"] == EQUAL
    admin = world.stack.connect_mariadb_admin(params.source("ecomm").database)
    try:
        with admin.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")  # never in the binlog, so never captured
            cur.execute("DELETE FROM `date` WHERE dateid IN (24100, 24101)")
            cur.execute("UPDATE `date` SET holiday = NOT holiday WHERE dateid = 24102")
    finally:
        admin.close()
    named = check_divergence(params, ["date"], wait_s=60).iloc[0]
    assert named["result"] == DIFFERS and named["fix"] == "./workbook resnapshot date", named
    insert_venues(world.stack, range(24_200, 24_210), "rs")  # another table's changes flow
    result = resnapshot(params, "date", timeout_s=300)
    assert Path(result.marker_file).exists()
    _bronze_equal(world, "after the re-snapshot")
    ingest_all(params, ["date", "venue"], spark=spark)
    check = silver_vs_source(params, ["date", "venue"])
    assert check["equal"].all(), check
    assert check_divergence(params, ["date"], wait_s=60).iloc[0]["result"] == EQUAL


def test_a_table_added_under_kafka_connect_is_snapshotted_alone_and_reaches_silver(
    world: World, spark: Any, tmp_path: Path
) -> None:
    """A table created while capture runs and added to the parameters: registration updates the
    Connect connector's include list (it restarts from its offsets) and signals an incremental
    snapshot of the new table only; Bronze and Silver equal the source."""
    params = world.params
    with world.stack.connect_postgres(params.source("ems").database, autocommit=True) as conn:
        conn.execute("CREATE TABLE ems.wb_kadded (id integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO ems.wb_kadded SELECT g, 'n' || g FROM generate_series(1, 120) g")
    ems = params.source("ems")
    table = SilverTableParams(name="wb_kadded", source="ems", table="wb_kadded", record_key=("id",))
    grown = params.model_copy(
        update={
            "sources": {
                **params.sources,
                "ems": ems.model_copy(update={"tables": (*ems.tables, "wb_kadded")}),
            },
            "silver": params.silver.model_copy(update={"tables": (table,), "sync": False}),
            "lake": params.lake.model_copy(update={"silver": str(tmp_path / "silver")}),
        }
    )
    specs = connector_specs(grown, LocalSources(grown).endpoints())
    venue = f"{params.project}.ems.venue"
    venue_reads = _snapshot_reads(params, venue)
    try:
        register_connectors(world.backend, specs, timeout_s=180)
        with world.stack.connect_postgres(params.source("ems").database, autocommit=True) as conn:
            conn.execute("UPDATE ems.wb_kadded SET name = 'changed' WHERE id % 5 = 0")
            conn.execute("DELETE FROM ems.wb_kadded WHERE id > 110")
        ems_spec = next(s for s in specs if s.source == "ems")
        check = bronze_vs_source(grown, [ems_spec], wait_s=180)
        assert check["equal"].all(), check
        assert _snapshot_reads(params, venue) == venue_reads  # no other table was snapshotted again
        ingest_all(grown, ["wb_kadded"], spark=spark)
        silver = silver_vs_source(grown, ["wb_kadded"])
        assert silver["equal"].all() and (silver["source_rows"] == 110).all(), silver
    finally:  # the module's pipeline captures what it did before
        register_connectors(world.backend, world.specs, timeout_s=180)


def _snapshot_reads(params: WorkbookParams, topic: str) -> int:
    return sum(1 for r in read_bronze(params.path(params.lake.bronze), topic) if r["__op"] == "r")


def test_a_message_that_is_no_change_event_fails_the_sink_naming_the_topic(world: World) -> None:
    """Last here, since it stops the sink: a value on a change topic that is not a change event of
    the converter (a schema id the registry does not have) turns the sink FAILED with the topic in
    its error, and nothing of that batch is
    in Bronze (the batch is not committed: a restart meets it again, nothing is skipped)."""
    from kafka import KafkaProducer

    topic = f"{world.params.project}.bad.values"
    producer = KafkaProducer(bootstrap_servers=LocalKafka(world.params).bootstrap)
    producer.send(topic, b"\x00\x00\x00\x7f\xffnot Avro").get(timeout=30)  # an unknown schema id
    producer.close()
    sink = BronzeSink(world.params)

    def failed() -> bool:
        return sink.status().get("state") == "FAILED"

    wait_until(failed, timeout_s=120, what="the sink to fail on the bad value")
    error = sink.status()["error"]
    assert topic in error and "Failed to parse change event" in error, error
    assert not list(Path(world.params.path(world.params.lake.bronze)).glob(f"{topic}/**/*.avro"))
    shown = pipeline_status(world.params)["bronze_sink"].iloc[0]
    assert shown["state"] == "FAILED" and topic in shown["error"]
