"""Reconciliation at a source position and the retention monitor, on the real servers.

* ``reconcile`` on Silver tables ingested from the running pipeline (CoW, MoR, soft deletes;
  MariaDB and PostgreSQL, JSON and a composite key) reports them equal to the sources;
* a Silver row changed behind the pipeline's back (in a copy of the table) is listed as exactly
  that key, ``different``; a key deleted at the source and captured but not ingested yet is
  listed as ``extra_in_silver`` until ingestion;
* PostgreSQL slot lag grows while the capture worker is stopped and changes are made, and drops
  back after it restarts and catches up, without losing a change; a running connector whose
  tables are quiet still confirms past WAL written elsewhere (its heartbeat table);
* MariaDB (private stack, destroyed afterwards): with the worker stopped, changes made and the
  binlogs purged past its stored position, the monitor reports ``PURGED`` naming the file, and
  restarting the worker ends ``FAILED`` with Debezium's "no longer available" message, with no
  new snapshot (``op=r``) events in Bronze.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.pipeline import Capture

from helpers.capture.backends import wait_until_running
from helpers.capture.offsets import offsets_file, stored_position
from helpers.checks.divergence import repair_command
from helpers.checks.parity import bronze_vs_source
from helpers.checks.reconcile import reconcile
from helpers.checks.retention import retention_status
from helpers.errors import CaptureError, RetentionError
from helpers.naming import connector_name
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TABLES = ("sale", "sale_mor", "sale_soft", "category", "order_items", "outbox")


def _variant(params: WorkbookParams, silver_root: Path) -> WorkbookParams:
    """The session's params with Silver under ``silver_root`` and a soft-delete copy of sale."""
    soft = SilverTableParams(
        name="sale_soft", source="ecomm", table="sale", record_key=("salesid",), delete_mode="soft"
    )
    silver = params.silver.model_copy(update={"tables": (*params.silver.tables, soft)})
    lake = params.lake.model_copy(update={"silver": str(silver_root)})
    return params.model_copy(update={"silver": silver, "lake": lake})


@pytest.fixture(scope="module")
def silver(capture: Capture, tmp_path_factory: pytest.TempPathFactory) -> WorkbookParams:
    """Params whose Silver (a private root) holds the tested tables, ingested once the sources
    are in Bronze."""
    params = capture.stack.params
    specs = [capture.specs["ecomm"], capture.specs["ems"], capture.specs["orders"]]
    frame = bronze_vs_source(params, specs, wait_s=120)
    assert frame["equal"].all(), frame
    return _variant(params, tmp_path_factory.mktemp("silver-reconcile"))


def test_reconcile_equal_after_ingestion(capture: Capture, silver: WorkbookParams) -> None:
    """Expected: every tested table equal to its source (counts and checksums), no keys listed."""
    started = time.monotonic()
    frame = reconcile(capture.stack.params, TABLES, silver_params=silver, ingest=True, wait_s=60)
    elapsed = time.monotonic() - started
    print(f"reconcile of {len(TABLES)} tables with ingestion: {elapsed:.1f} s")
    assert list(frame["table"]) == list(TABLES)
    bad = frame[~frame["equal"]]
    assert bad.empty, bad[["table", "source_rows", "silver_rows", "differing_keys", "note"]].to_dict(
        "records"
    )
    assert (frame["source_checksum"] == frame["silver_checksum"]).all()
    assert (frame["source_rows"] == frame["silver_rows"]).all()
    assert (frame["source_rows"] > 0).all()
    assert (frame["diff_count"] == 0).all()
    assert (frame["detail"] == "").all()
    positions = dict(zip(frame["table"], frame["source_position"], strict=True))
    assert positions["sale"].startswith("mariadb-bin.") and ":" in positions["sale"]
    assert "/" in positions["category"]  # an LSN


def test_changed_silver_row_is_listed(
    capture: Capture, silver: WorkbookParams, tmp_path: Path, spark: Any
) -> None:
    """A copy of Silver ``sale`` with one row's ``pricepaid`` changed by a direct Hudi upsert.

    Expected: reconcile lists exactly that key as ``different``, and calls the copy caught up with
    the repair named, though the database has moved on only through a table capture does not
    take: the position mark reconcile writes moves capture's stored offset past the source
    position (without it the wait ran out, "not caught up within the wait"). The original still
    equals.
    """
    from support.silver_tables import write_silver

    from helpers.hudi.read import read_snapshot
    from helpers.silver.tables import table_config

    params = capture.stack.params
    reconcile(params, ["sale"], silver_params=silver, ingest=True, wait_s=60)
    copy = silver.model_copy(update={"lake": silver.lake.model_copy(update={"silver": str(tmp_path)})})
    sale = next(t for t in copy.silver.tables if t.name == "sale")
    shutil.copytree(table_config(silver, sale).base_path, table_config(copy, sale).base_path)
    rows = read_snapshot(table_config(copy, sale).base_path)
    rows = rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")])
    key = sorted(rows.column("salesid").to_pylist())[len(rows) // 2]
    row = rows.filter(pc.equal(rows.column("salesid"), key))
    price = row.column("pricepaid")
    changed = pc.add(price, pa.scalar(1, price.type)).cast(price.type)
    row = row.set_column(row.schema.get_field_index("pricepaid"), row.schema.field("pricepaid"), changed)
    position = row.schema.get_field_index("_cdc_position")  # a later log position: the change wins
    row = row.set_column(
        position, row.schema.field(position), pc.binary_join_element_wise(row.column(position), "9", "")
    )
    row = row.drop_columns(["_hoodie_is_deleted"]) if "_hoodie_is_deleted" in row.column_names else row
    copy = copy.model_copy(update={"silver": copy.silver.model_copy(update={"sync": False})})
    write_silver(spark, copy, sale, row, precombine="_cdc_position")

    # the database moves on through a table capture does not take, as on a shared server: the
    # binlog's end passes capture's stored offset, and no captured change will move that offset
    conn = capture.stack.connect_mariadb("ecomm", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS not_captured (id INT PRIMARY KEY, n INT)")
            cur.execute("INSERT INTO not_captured VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1")
    finally:
        conn.close()
    frame = reconcile(params, ["sale"], silver_params=copy, wait_s=30)
    result = frame.iloc[0]
    assert not result["equal"]
    assert result["caught_up"], result["note"]
    assert result["fix"] == repair_command("sale")
    assert result["differing_keys"] == [{"salesid": key, "difference": "different"}]
    assert result["diff_count"] == 1 and result["source_rows"] == result["silver_rows"]
    assert "differ from the source" in result["detail"] and "pricepaid" in result["detail"], result["detail"]
    original = reconcile(params, ["sale"], silver_params=silver, ingest=True, wait_s=60).iloc[0]
    assert original["equal"], original.to_dict()


def test_deleted_key_is_extra_until_ingested(capture: Capture, silver: WorkbookParams) -> None:
    """A sale row of the test's own (inserted and ingested first) deleted at the source and
    captured, Silver not ingested yet.

    Expected: ``extra_in_silver`` lists exactly that key (hard and soft tables: the soft one keeps
    it with ``__deleted=false`` until ingestion); after ingestion both equal the source.
    """
    params = capture.stack.params
    names = ["sale", "sale_soft"]
    conn = capture.stack.connect_mariadb("ecomm", autocommit=True)
    try:
        with conn.cursor() as cur:  # the first sale copied under a new key: no shared row is deleted
            cur.execute("SELECT * FROM sale ORDER BY salesid LIMIT 1")
            columns = [d[0] for d in cur.description]
            row = list(cur.fetchone())
            cur.execute("SELECT MAX(salesid) + 1 FROM sale")
            (key,) = cur.fetchone()
            row[columns.index("salesid")] = key
            cur.execute(
                f"INSERT INTO sale ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",  # noqa: S608
                row,
            )
        assert bronze_vs_source(params, [capture.specs["ecomm"]], wait_s=60)["equal"].all()
        before = reconcile(params, names, silver_params=silver, ingest=True, wait_s=60)
        assert before["equal"].all(), before.to_dict("records")
        with conn.cursor() as cur:
            cur.execute("DELETE FROM sale WHERE salesid = %s", (key,))
    finally:
        conn.close()
    frame = bronze_vs_source(params, [capture.specs["ecomm"]], wait_s=60)
    assert frame["equal"].all(), frame

    pending = reconcile(params, names, silver_params=silver, ingest=False, wait_s=0)
    for result in pending.to_dict("records"):
        assert not result["equal"], result
        assert result["differing_keys"] == [{"salesid": key, "difference": "extra_in_silver"}], result
        assert result["silver_rows"] == result["source_rows"] + 1
        assert "not in the source" in result["detail"], result
        assert not result["caught_up"] and "not ingested" in result["note"], result
    after = reconcile(params, names, silver_params=silver, ingest=True, wait_s=60)
    assert after["equal"].all(), after.to_dict("records")
    assert after["caught_up"].all()


def _slot_row(params: WorkbookParams, connector: str) -> dict[str, Any]:
    frame = retention_status(params)
    rows = frame[frame["connector"] == connector].to_dict("records")
    assert len(rows) == 1, frame
    return dict(rows[0])


def _confirmed_past(capture: Capture, connector: str, lsn: str, last: list[dict[str, Any]]) -> bool:
    """Whether the connector's slot is active and has confirmed ``lsn`` or beyond (``last``: the
    status row read, for the wait's message)."""
    last[:] = [_slot_row(capture.stack.params, connector)]
    with capture.stack.connect_postgres("ems", autocommit=True) as conn:
        ahead = conn.execute(
            "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (last[0]["stored_position"], lsn)
        ).fetchone()[0]  # type: ignore[index]
    return bool(last[0]["active"]) and ahead >= 0


def test_postgres_slot_lag_grows_while_stopped_and_recovers(capture: Capture) -> None:
    """Stop the ems worker; update every venue row 50 times (WAL for the slot to hold).

    Expected: the slot is inactive and its lag is at least the WAL written; after a restart the
    worker runs and Bronze replays to the source (no change lost); once the connector processes
    its next change the slot's confirmed position passes where that change began, status OK.
    """
    params = capture.stack.params
    connector = connector_name(params, "ems")
    spec = capture.specs["ems"]
    wait_until(lambda: _slot_row(params, connector)["active"], timeout_s=60, what="an active ems slot")
    capture.backend.stop(connector)
    # a stop on request reads STOPPED (a worker that dies on its own reads FAILED)
    assert capture.backend.status(connector).state == "STOPPED"
    try:
        with capture.stack.connect_postgres("ems", autocommit=True) as conn:
            start_lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
            for _ in range(50):
                conn.execute("UPDATE ems.venue SET venueseats = venueseats")
            written = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint", (start_lsn,)
            ).fetchone()[0]  # type: ignore[index]
        assert written > 0
        stopped = _slot_row(params, connector)
        assert not stopped["active"], stopped
        assert stopped["lag_bytes"] >= written, (stopped, written)
        assert stopped["status"] == "OK" and "inactive" in stopped["message"], stopped
        tight = retention_status(params, warn_bytes=written // 2, fail_bytes=written * 100)
        assert tight.set_index("connector").loc[connector, "status"] == "WARN"
        failing = retention_status(params, warn_bytes=written // 4, fail_bytes=written // 2)
        assert failing.set_index("connector").loc[connector, "status"] == "FAIL"
    finally:
        capture.backend.resume(connector)
    wait_until_running(capture.backend, connector, timeout_s=180)
    assert bronze_vs_source(params, [spec], wait_s=120)["equal"].all()
    # Debezium confirms the slot position with its next processed change after a restart. Judged
    # by the slot's confirmed position, not by its lag: WAL others write after that change (vacuum,
    # other databases) stays behind a quiet slot (docs/architecture.md, "Retention monitor")
    with capture.stack.connect_postgres("ems", autocommit=True) as conn:
        before = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
        conn.execute(
            "UPDATE ems.venue SET venueseats = venueseats"
            " WHERE venueid = (SELECT MIN(venueid) FROM ems.venue)"
        )
    assert bronze_vs_source(params, [spec], wait_s=120)["equal"].all()
    last: list[dict[str, Any]] = []
    wait_until(
        lambda: _confirmed_past(capture, connector, before, last),
        timeout_s=120,
        what="the ems slot to confirm the change made after the restart",
        detail=lambda: f"last status {last}, change made after {before}",
    )
    assert last[0]["status"] == "OK", last[0]


def test_a_quiet_postgres_slot_follows_the_wal_others_write(capture: Capture) -> None:
    """About a megabyte of WAL written in another database (outside every publication) while the
    ems connector's tables stay quiet.

    Expected: within a few heartbeats the ems slot's confirmed position passes the end of that WAL.
    Each heartbeat updates ``ems.debezium_heartbeat`` (``capture.heartbeat_table``), a change the
    connector processes and confirms; without it the slot held such WAL for as long as the
    captured tables stayed quiet (measured: 1,140,472 bytes still held after 120 s).
    """
    params = capture.stack.params
    connector = connector_name(params, "ems")
    assert params.capture.heartbeat_table, "the heartbeat table is on by default"
    wait_until(lambda: _slot_row(params, connector)["active"], timeout_s=60, what="an active ems slot")
    with capture.stack.connect_postgres_admin() as conn:  # the maintenance database: no publication
        conn.execute("CREATE TABLE IF NOT EXISTS wb_wal_filler (line text)")
        conn.execute("INSERT INTO wb_wal_filler SELECT repeat('x', 200) FROM generate_series(1, 4000)")
        conn.execute("DROP TABLE wb_wal_filler")
        after = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
    last: list[dict[str, Any]] = []
    wait_until(
        lambda: _confirmed_past(capture, connector, after, last),
        timeout_s=max(60.0, 6 * params.capture.heartbeat_ms / 1000),
        what="the quiet ems slot to confirm past the WAL written elsewhere",
        detail=lambda: f"last status {last}, WAL written up to {after}",
    )
    assert last[0]["status"] == "OK", last[0]


def _bronze_events(bronze: Path) -> list[dict[str, Any]]:
    from helpers.bronze.read import read_bronze

    return read_bronze(bronze, ["tickit.ecomm.sale", "tickit.ecomm.listing", "tickit.ecomm.date"])


def _offsets_flushed_after(params: WorkbookParams, backend: Any, connector: str, events: int) -> bool:
    """Whether the worker wrote events beyond its first ``events`` and then rewrote its offsets file
    (offsets are flushed after Bronze has the batch, at most every second)."""
    details = backend.status(connector).details
    if (details.get("events") or 0) <= events or not details.get("last_file"):
        return False
    offsets = offsets_file(params, connector)
    return offsets.exists() and offsets.stat().st_mtime_ns >= Path(details["last_file"]).stat().st_mtime_ns


def test_mariadb_purged_binlog_fails_loudly(stack_factory: Callable[..., Any], tmp_path: Path) -> None:
    """Private stack; only the ecomm connector. Stop it, change sale, purge the binlogs it needs.

    Expected: the monitor says PURGED and names the stored file (and raises when asked); the
    restarted worker ends FAILED with Debezium's "no longer available" message, and Bronze gets
    no new snapshot (``op=r``) events nor any other new event.
    """
    from helpers.capture import connector_specs, open_backend
    from helpers.capture.backends import EmbeddedBackend
    from helpers.sources.api import LocalSources

    bronze = tmp_path / "bronze"
    overrides = {
        "lake.bronze": str(bronze),
        "lake.silver": str(tmp_path / "silver"),
        "capture.flush_interval_ms": 100,
    }
    with stack_factory("wb-ret-", overrides) as stack:
        params = stack.params
        sources = LocalSources(params)
        sources.load_sample_data()
        sources.enable_cdc()
        spec = next(
            s for s in connector_specs(params, LocalSources(params).endpoints()) if s.name.endswith("-ecomm")
        )
        backend = open_backend(params)
        assert isinstance(backend, EmbeddedBackend)
        backend.create_or_update(spec)
        try:
            wait_until_running(backend, spec.name, timeout_s=180)
            assert bronze_vs_source(params, [spec], wait_s=180)["equal"].all()
            conn = stack.connect_mariadb("ecomm", autocommit=True)
            try:
                events = backend.status(spec.name).details["events"]
                with conn.cursor() as cur:  # a streamed change, so the stored offset is a binlog one
                    cur.execute("UPDATE sale SET commission = commission + 1 WHERE salesid = 1")
                assert bronze_vs_source(params, [spec], wait_s=60)["equal"].all()
                wait_until(
                    lambda: _offsets_flushed_after(params, backend, spec.name, events),
                    timeout_s=30,
                    what="the offset flush after the streamed change",
                )
                backend.stop(spec.name)
                stored = stored_position(params, spec.name)
                assert stored is not None and stored.file
                ok = retention_status(params).set_index("connector").loc[spec.name]
                assert ok["status"] == "OK" and bool(ok["binlog_file_present"]), ok.to_dict()

                with conn.cursor() as cur:
                    cur.execute("UPDATE sale SET commission = commission + 1 WHERE salesid <= 20")
            finally:
                conn.close()
            admin = stack.connect_mariadb_admin()
            try:
                with admin.cursor() as cur:
                    cur.execute("FLUSH BINARY LOGS")
                    cur.execute("SHOW MASTER STATUS")
                    current = cur.fetchone()[0]

                    def purged_all() -> bool:  # a binlog dump thread may linger a moment
                        cur.execute("PURGE BINARY LOGS TO %s", (current,))
                        cur.execute("SHOW WARNINGS")
                        warnings.append(cur.fetchall())
                        cur.execute("SHOW BINARY LOGS")
                        return [r[0] for r in cur.fetchall()] == [current]

                    warnings: list[Any] = []
                    wait_until(purged_all, timeout_s=60, what=f"binlogs purged to {current}")
            finally:
                admin.close()

            purged = retention_status(params).set_index("connector").loc[spec.name]
            assert purged["status"] == "PURGED", purged.to_dict()
            assert stored.file in purged["message"] and not purged["binlog_file_present"]
            with pytest.raises(RetentionError, match=stored.file):
                retention_status(params, raise_on_purged=True)

            events_before = _bronze_events(bronze)
            backend.resume(spec.name)
            failed = wait_until(
                lambda: (st := backend.status(spec.name)).state == "FAILED" and st,
                timeout_s=180,
                what="the worker to fail",
            )
            assert "no longer available" in (failed.error or ""), failed.error
            with pytest.raises(CaptureError, match="no longer available"):
                wait_until_running(backend, spec.name, timeout_s=5)
            events_after = _bronze_events(bronze)
            assert len(events_after) == len(events_before)
            new_snapshot = [e for e in events_after if e.get("__op") == "r"]
            assert len(new_snapshot) == len([e for e in events_before if e.get("__op") == "r"])
        finally:
            backend.stop(spec.name)
