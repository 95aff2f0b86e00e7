"""Integration tests of local CDC enablement and preflight against real servers.

A module-scoped stack in a temporary state dir with small tables in every source
(ems, crm, orders on PostgreSQL; ecomm on MariaDB). The first test reads that stack before
anything enables CDC on it, so it runs first (pytest keeps a file's order); every later test
that needs CDC enabled enables it itself (``enable_cdc_local`` is idempotent), so each of them
also passes alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from psycopg import sql

from helpers.engines import quote_mariadb
from helpers.errors import CdcSetupError, SourceError
from helpers.local.stack import LocalStack
from helpers.naming import publication_name
from helpers.sources.cdc import enable_cdc_local, preflight, source_row_counts
from helpers.sources.cdc_report import preflight_frame, raise_for_failures

pytestmark = pytest.mark.integration

# rows per table: source -> table -> count (exact counts are asserted)
ROWS = {
    "ems": {"category": 3, "event": 5, "venue": 2},
    "crm": {"users": 7},
    "orders": {"customers": 2, "orders": 4, "order_items": 6, "outbox": 4},
    "ecomm": {"date": 3, "listing": 4, "sale": 5},
}


@pytest.fixture(scope="module")
def stack(stack_factory: Callable[..., Any]) -> Iterator[LocalStack]:
    with stack_factory("wb-cdc-") as stack:
        params = stack.params
        for name, tables in ROWS.items():
            source = params.source(name)
            if source.engine == "postgres":
                with stack.connect_postgres(source.database) as conn:
                    for table, n in tables.items():
                        target = sql.Identifier(source.schema_name or "public", table)
                        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, v text)").format(target))
                        conn.execute(
                            sql.SQL("INSERT INTO {} SELECT g, g::text FROM generate_series(1, %s) g").format(
                                target
                            ),
                            (n,),
                        )
            else:
                conn2 = stack.connect_mariadb(source.database)
                with conn2.cursor() as cur:
                    for table, n in tables.items():
                        target_m = quote_mariadb(table)
                        cur.execute(
                            f"CREATE TABLE {target_m} (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB"
                        )
                        cur.executemany(
                            f"INSERT INTO {target_m} VALUES (%s, %s)",  # noqa: S608 - quoted identifier
                            [(i, str(i)) for i in range(1, n + 1)],
                        )
                conn2.commit()
                conn2.close()
        yield stack


def _check(reports: list[Any], source: str, name: str) -> Any:
    report = next(r for r in reports if r.source == source)
    return next(c for c in report.checks if c.name == name)


def test_preflight_before_enable_names_the_fixes(stack: LocalStack) -> None:
    """Fresh tables: no publications, default replica identity -> failures with fixes."""
    reports = preflight(stack, stack.params)
    assert [r.source for r in reports] == ["crm", "ecomm", "ems", "orders"]
    pub = _check(reports, "ems", "publication tickit_ems_pub")
    assert not pub.passed and pub.actual == "missing"
    assert "CREATE PUBLICATION tickit_ems_pub FOR TABLES IN SCHEMA ems" in pub.fix
    ident = _check(reports, "ems", "table ems.category replica identity")
    assert not ident.passed and ident.actual == "default"
    assert "ALTER TABLE ems.category REPLICA IDENTITY FULL" in ident.fix
    beat = _check(reports, "ems", "heartbeat table ems.debezium_heartbeat")
    assert (beat.passed, beat.actual) == (False, "missing") and "enable" in beat.fix
    # MariaDB comes up right from the generated my.cnf
    assert next(r for r in reports if r.source == "ecomm").passed


def test_enable_then_preflight_passes(stack: LocalStack) -> None:
    """After enable_cdc_local every check of every source passes; the publication covers the
    schema, the heartbeat table included, and every captured table has REPLICA IDENTITY FULL."""
    reports = enable_cdc_local(stack, stack.params)
    frame = preflight_frame(reports)
    assert frame["passed"].all(), frame[~frame["passed"]].to_string()
    raise_for_failures(reports)
    assert set(frame["source"]) == {"crm", "ecomm", "ems", "orders"}
    expected_checks = {
        "wal_level", "max_replication_slots", "max_wal_senders", "log_bin", "binlog_format",
        "binlog_row_image", "server_id", "binlog_checksum", "version", "expire_logs_days",
    }  # fmt: skip
    assert expected_checks <= set(frame["check"])
    with stack.connect_postgres_admin("orders") as conn:
        published = conn.execute(
            "SELECT tablename FROM pg_publication_tables WHERE pubname = %s ORDER BY 1",
            (publication_name(stack.params, "orders"),),
        ).fetchall()
        identities = conn.execute(
            "SELECT DISTINCT c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'orders' AND c.relkind = 'r' AND c.relname <> %s",
            (stack.params.capture.heartbeat_table,),
        ).fetchall()
    # the heartbeat table too: in the publication, so each connector heartbeat is a change to confirm
    assert [r[0] for r in published] == sorted([*ROWS["orders"], stack.params.capture.heartbeat_table])
    assert identities == [("f",)]
    # idempotent
    assert preflight_frame(enable_cdc_local(stack, stack.params))["passed"].all()


def test_a_heartbeat_table_of_another_shape_fails_preflight_and_names_the_fix(stack: LocalStack) -> None:
    """A ``debezium_heartbeat`` the workbook did not make (its query would stop the connector):
    preflight fails naming its columns and the fix; dropped, enable makes it again and passes."""
    with stack.connect_postgres_admin("ems") as conn:
        conn.execute("DROP TABLE IF EXISTS ems.debezium_heartbeat")
        conn.execute("CREATE TABLE ems.debezium_heartbeat (id int PRIMARY KEY, note text)")
    try:
        beat = _check(preflight(stack, stack.params), "ems", "heartbeat table ems.debezium_heartbeat")
        assert (beat.passed, beat.actual) == (False, "columns id, note"), beat
        assert "drop ems.debezium_heartbeat" in beat.fix
        assert not _check(enable_cdc_local(stack, stack.params), "ems", beat.name).passed
    finally:
        with stack.connect_postgres_admin("ems") as conn:
            conn.execute("DROP TABLE ems.debezium_heartbeat")
    assert _check(enable_cdc_local(stack, stack.params), "ems", beat.name).passed


def test_full_row_images_per_table(stack: LocalStack) -> None:
    """Only the chosen tables must be FULL; the others pass with a primary key."""
    enable_cdc_local(stack, stack.params)
    with stack.connect_postgres_admin("ems") as conn:
        conn.execute("ALTER TABLE ems.venue REPLICA IDENTITY DEFAULT")
    choice = {"ems": ["category", "event"]}
    assert next(r for r in preflight(stack, stack.params, full_row_images=choice) if r.source == "ems").passed
    default = _check(preflight(stack, stack.params), "ems", "table ems.venue replica identity")
    assert not default.passed and default.expected == "full"
    with pytest.raises(CdcSetupError, match="not among its tables"):
        preflight(stack, stack.params, full_row_images={"ems": ["nope"]})
    enable_cdc_local(stack, stack.params)
    assert _check(preflight(stack, stack.params), "ems", "table ems.venue replica identity").passed


def test_wrong_wal_level_fails_with_fix_and_is_repaired(stack: LocalStack) -> None:
    """ALTER SYSTEM SET wal_level = replica + restart: preflight fails naming the reset and the
    restart; enable_cdc_local(restart=True) repairs it."""
    with stack.connect_postgres_admin() as conn:
        conn.execute("ALTER SYSTEM SET wal_level = replica")
    stack.restart_postgres()
    reports = preflight(stack, stack.params)
    wal = _check(reports, "ems", "wal_level")
    assert (wal.passed, wal.actual, wal.expected) == (False, "replica", "logical")
    assert "ALTER SYSTEM RESET wal_level" in wal.fix and "restart" in wal.fix
    with pytest.raises(CdcSetupError, match="wal_level is 'replica', expected 'logical'; fix: ALTER SYSTEM"):
        raise_for_failures(reports)
    # without restart the reset is pending and the report says so
    pending = _check(enable_cdc_local(stack, stack.params), "crm", "wal_level")
    assert not pending.passed and "pending" in pending.fix
    reports = enable_cdc_local(stack, stack.params, restart=True)
    assert _check(reports, "ems", "wal_level").actual == "logical"
    assert all(r.passed for r in reports)


def test_wrong_mariadb_settings_fail_with_fix_and_are_repaired(stack: LocalStack) -> None:
    enable_cdc_local(stack, stack.params)  # so that the other sources pass, below
    conn = stack.connect_mariadb_admin()
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
        cur.execute("SET GLOBAL binlog_format = 'STATEMENT'")
        cur.execute("REVOKE REPLICATION SLAVE ON *.* FROM `workbook`@`127.0.0.1`")
    conn.close()
    reports = preflight(stack, stack.params)
    image = _check(reports, "ecomm", "binlog_row_image")
    assert (image.passed, image.actual) == (False, "MINIMAL")
    assert "SET GLOBAL binlog_row_image = 'FULL'" in image.fix and "my.cnf" in image.fix
    assert not _check(reports, "ecomm", "binlog_format").passed
    grants = _check(reports, "ecomm", "user workbook@127.0.0.1 replication privileges")
    assert not grants.passed and "GRANT REPLICATION SLAVE" in grants.fix
    assert next(r for r in reports if r.source == "ems").passed  # other sources unaffected
    repaired = enable_cdc_local(stack, stack.params)
    assert all(r.passed for r in repaired)


def test_source_row_counts_are_exact(stack: LocalStack) -> None:
    frame = source_row_counts(stack, stack.params)
    assert list(frame.columns) == ["system", "engine", "database", "table", "rows"]
    got = {(r.system, r.table): r.rows for r in frame.itertuples()}
    assert got == {(s, t): n for s, tables in ROWS.items() for t, n in tables.items()}
    assert dict(zip(frame["system"], frame["engine"], strict=False))["ecomm"] == "mariadb"


def test_source_row_counts_missing_table(stack: LocalStack) -> None:
    with stack.connect_postgres("crm") as conn:
        conn.execute("ALTER TABLE crm.users RENAME TO users_old")
    try:
        with pytest.raises(SourceError, match="crm.users .* does not exist"):
            source_row_counts(stack, stack.params)
        frame = source_row_counts(stack, stack.params, missing_ok=True)
        assert frame.loc[frame["table"] == "users", "rows"].isna().all()
        missing = _check(preflight(stack, stack.params), "crm", "table crm.users published")
        assert not missing.passed and missing.actual == "table missing"
    finally:
        with stack.connect_postgres("crm") as conn:
            conn.execute("ALTER TABLE crm.users_old RENAME TO users")
