"""PostgreSQL side of local change data capture: check and apply what Debezium ``pgoutput`` needs.

The public entry points are :func:`helpers.sources.cdc.preflight` and
:func:`helpers.sources.cdc.enable_cdc_local`; :func:`preflight_postgres` lists the prerequisites.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from helpers.errors import CdcSetupError, WaitTimeoutError
from helpers.local.stack import APP_USER, LocalStack
from helpers.naming import publication_name
from helpers.params import SourceParams, WorkbookParams
from helpers.poll import wait_until
from helpers.sources.cdc_report import FIXED_BY_ENABLE, Check, PreflightReport
from helpers.sources.signals import HEARTBEAT_COLUMNS, create_heartbeat_table

__all__ = ["FullRowImages", "enable_postgres", "preflight_postgres"]

log = logging.getLogger(__name__)

FullRowImages = Mapping[str, Collection[str]] | None
"""Per source, the tables needing ``REPLICA IDENTITY FULL``; a source left out: all its tables."""

_PUBLISH = "insert, update, delete, truncate"
_RESTART_PG = (
    "restart PostgreSQL: `./workbook stack stop && ./workbook stack start` "
    "(or enable_cdc_local(..., restart=True))"
)


def _full_tables(source_name: str, source: SourceParams, full_row_images: FullRowImages) -> set[str]:
    if full_row_images is None or source_name not in full_row_images:
        return set(source.tables)
    chosen = set(full_row_images[source_name])
    unknown = chosen - set(source.tables)
    if unknown:
        raise CdcSetupError(
            f"Failed to choose full row images for source {source_name!r}: {sorted(unknown)} are not "
            f"among its tables {list(source.tables)}"
        )
    return chosen


def _pg_settings(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, str | None, bool]]:
    rows = conn.execute(
        "SELECT name, setting, sourcefile, pending_restart FROM pg_settings "
        "WHERE name IN ('wal_level', 'max_replication_slots', 'max_wal_senders')"
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _pg_setting_fix(
    stack: LocalStack, name: str, expected: str, sourcefile: str | None, pending: bool
) -> str:
    if pending:
        return f"a corrected {name} is pending: {_RESTART_PG}"
    if sourcefile and sourcefile.endswith("postgresql.auto.conf"):
        return (
            f"ALTER SYSTEM overrides it: run `ALTER SYSTEM RESET {name}` as superuser "
            f"(enable_cdc_local does this), then {_RESTART_PG}"
        )
    return f"set `{name} = {expected}` in {stack.paths.pg_data / 'workbook.conf'}, then {_RESTART_PG}"


def _pg_server_checks(
    stack: LocalStack, params: WorkbookParams, conn: psycopg.Connection[Any]
) -> list[Check]:
    pg = params.local.postgres
    settings = _pg_settings(conn)
    checks = []
    wanted: list[tuple[str, str, bool]] = [
        ("wal_level", "logical", settings["wal_level"][0] == "logical"),
        (
            "max_replication_slots",
            str(pg.max_replication_slots),
            int(settings["max_replication_slots"][0]) >= pg.max_replication_slots,
        ),
        (
            "max_wal_senders",
            str(pg.max_wal_senders),
            int(settings["max_wal_senders"][0]) >= pg.max_wal_senders,
        ),
    ]
    for name, expected, ok in wanted:
        actual, sourcefile, pending = settings[name]
        checks.append(
            Check(
                name=name,
                passed=ok,
                actual=actual,
                expected=expected if name == "wal_level" else f">= {expected}",
                fix="" if ok else _pg_setting_fix(stack, name, expected, sourcefile, pending),
            )
        )
    role = conn.execute(
        "SELECT rolcanlogin, rolreplication FROM pg_roles WHERE rolname = %s", (APP_USER,)
    ).fetchone()
    actual = "missing" if role is None else f"login={role[0]}, replication={role[1]}"
    ok = role is not None and bool(role[0]) and bool(role[1])
    checks.append(
        Check(
            name=f"role {APP_USER} can log in and replicate",
            passed=ok,
            actual=actual,
            expected="login=True, replication=True",
            fix="" if ok else f"ALTER ROLE {APP_USER} WITH LOGIN REPLICATION ({FIXED_BY_ENABLE})",
        )
    )
    return checks


def _pg_source_checks(
    params: WorkbookParams, name: str, source: SourceParams, conn: psycopg.Connection[Any], full: set[str]
) -> list[Check]:
    schema = source.schema_name or "public"
    pub = publication_name(params, name)
    checks: list[Check] = []
    has_schema = (
        conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None
    )
    checks.append(
        Check(
            f"schema {schema} exists",
            has_schema,
            "exists" if has_schema else "missing",
            "exists",
            "" if has_schema else "run `./workbook stack start` (it creates the source schemas)",
        )
    )
    row = conn.execute(
        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, "
        "  EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_namespace n ON n.oid = pn.pnnspid "
        "          WHERE pn.pnpubid = p.oid AND n.nspname = %s) "
        "FROM pg_publication p WHERE pubname = %s",
        (schema, pub),
    ).fetchone()
    create = f"CREATE PUBLICATION {pub} FOR TABLES IN SCHEMA {schema} ({FIXED_BY_ENABLE})"
    if row is None:
        checks.append(Check(f"publication {pub}", False, "missing", f"FOR TABLES IN SCHEMA {schema}", create))
    else:
        ops = [op for op, on in zip(("insert", "update", "delete", "truncate"), row[:4], strict=True) if on]
        ok_ops = len(ops) == 4
        checks.append(
            Check(
                f"publication {pub}",
                bool(row[4]),
                f"FOR TABLES IN SCHEMA {schema}" if row[4] else "does not cover the schema",
                f"FOR TABLES IN SCHEMA {schema}",
                ""
                if row[4]
                else f"ALTER PUBLICATION {pub} ADD TABLES IN SCHEMA {schema} ({FIXED_BY_ENABLE})",
            )
        )
        checks.append(
            Check(
                f"publication {pub} publishes",
                ok_ops,
                ", ".join(ops) or "nothing",
                _PUBLISH,
                "" if ok_ops else f"ALTER PUBLICATION {pub} SET (publish = '{_PUBLISH}') ({FIXED_BY_ENABLE})",
            )
        )
    tables = {
        r[0]: (r[1], r[2], r[3])
        for r in conn.execute(
            "SELECT c.relname, c.relreplident, "
            "  EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), "
            "  EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = %s "
            "          AND t.schemaname = n.nspname AND t.tablename = c.relname) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (pub, schema),
        ).fetchall()
    }
    identity_names = {"d": "default", "f": "full", "n": "nothing", "i": "index"}
    for table in source.tables:
        qualified = f"{schema}.{table}"
        if table not in tables:
            checks.append(
                Check(
                    f"table {qualified} published",
                    False,
                    "table missing",
                    "published",
                    "load the source tables first, then run enable_cdc_local",
                )
            )
            continue
        ident, has_pk, published = tables[table]
        checks.append(
            Check(
                f"table {qualified} published",
                published,
                "published" if published else "not in publication",
                "published",
                "" if published else f"add it to publication {pub} ({FIXED_BY_ENABLE})",
            )
        )
        if table in full:
            ok, expected = ident == "f", "full"
            fix = f"ALTER TABLE {qualified} REPLICA IDENTITY FULL ({FIXED_BY_ENABLE})"
        else:
            ok, expected = (
                ident == "f" or (ident == "d" and has_pk) or ident == "i",
                "default with primary key",
            )
            fix = f"add a primary key to {qualified} or ALTER TABLE {qualified} REPLICA IDENTITY FULL"
        actual = identity_names.get(ident, ident) + ("" if has_pk else " (no primary key)")
        checks.append(Check(f"table {qualified} replica identity", ok, actual, expected, "" if ok else fix))
    if params.capture.heartbeat_table:
        checks.append(_heartbeat_check(conn, schema, params.capture.heartbeat_table))
    return checks


def _heartbeat_check(conn: psycopg.Connection[Any], schema: str, table: str) -> Check:
    """The heartbeat table the connectors' ``heartbeat.action.query`` writes: present with its two
    columns and writable by the capture login (a connector whose query fails stops)."""
    columns = {
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
            (schema, table),
        ).fetchall()
    }
    writable = bool(columns) and bool(
        conn.execute(
            "SELECT has_table_privilege(%s, format('%%I.%%I', %s::text, %s::text), 'INSERT, UPDATE')",
            (APP_USER, schema, table),
        ).fetchone()[0]  # type: ignore[index]
    )
    shaped = set(HEARTBEAT_COLUMNS) <= columns
    if not columns:
        actual, fix = "missing", f"create it ({FIXED_BY_ENABLE})"
    elif not shaped:
        actual = "columns " + ", ".join(sorted(columns))
        fix = (
            f"drop {schema}.{table}: enable_cdc_local creates it again with ({', '.join(HEARTBEAT_COLUMNS)})"
        )
    else:
        actual = f"writable by {APP_USER}" if writable else f"not writable by {APP_USER}"
        fix = (
            ""
            if writable
            else f"GRANT SELECT, INSERT, UPDATE ON {schema}.{table} TO {APP_USER} ({FIXED_BY_ENABLE})"
        )
    return Check(
        f"heartbeat table {schema}.{table}",
        shaped and writable,
        actual,
        f"({', '.join(HEARTBEAT_COLUMNS)}), writable by {APP_USER}",
        fix,
    )


def preflight_postgres(
    stack: LocalStack,
    params: WorkbookParams,
    sources: Sequence[tuple[str, SourceParams]],
    full_row_images: FullRowImages,
) -> list[PreflightReport]:
    """Check the CDC prerequisites of the PostgreSQL sources without changing anything.

    Needed: ``wal_level = logical``, ``max_replication_slots`` and ``max_wal_senders`` at least
    ``params.local.postgres`` (restart-only: :mod:`helpers.local.stack` writes them into
    ``workbook.conf``; a conflicting ``ALTER SYSTEM`` is reset); role ``workbook`` with ``LOGIN``
    and ``REPLICATION``; one publication per source (:func:`helpers.naming.publication_name`)
    ``FOR TABLES IN SCHEMA <schema>`` publishing insert, update, delete and truncate, so tables
    created later are captured too (Debezium uses it with ``publication.autocreate.mode=disabled``,
    since a schema publication needs a superuser); every configured table present and published;
    ``REPLICA IDENTITY FULL`` on the tables in ``full_row_images`` (default: all, so deletes
    carry the whole row), a primary key on the others.

    Args:
        stack: the running local stack.
        params: workbook parameters.
        sources: the PostgreSQL sources, ``(name, params)``.
        full_row_images: per source, the tables needing full before-images.

    Returns:
        One report per source, in the order of ``sources``.
    """
    reports = []
    with stack.connect_postgres_admin() as conn:
        server = _pg_server_checks(stack, params, conn)
        existing = {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}
    for name, source in sources:
        checks = list(server)
        has_db = source.database in existing
        checks.append(
            Check(
                f"database {source.database} exists",
                has_db,
                "exists" if has_db else "missing",
                "exists",
                "" if has_db else "run `./workbook stack start` (it creates the source databases)",
            )
        )
        if has_db:
            with stack.connect_postgres_admin(source.database) as conn:
                checks += _pg_source_checks(
                    params, name, source, conn, _full_tables(name, source, full_row_images)
                )
        reports.append(PreflightReport(name, source.engine, source.database, tuple(checks)))
    return reports


def _reload_postgres_config(conn: psycopg.Connection[Any], names: Sequence[str]) -> None:
    """Reload the configuration so ``pg_settings.pending_restart`` shows the corrected values."""
    conn.execute("SELECT pg_reload_conf()")

    def pending() -> bool:
        row = conn.execute(
            "SELECT bool_and(pending_restart) FROM pg_settings WHERE name = ANY(%s)", (list(names),)
        ).fetchone()
        return bool(row and row[0])

    try:
        wait_until(
            pending,
            timeout_s=5,
            what=f"PostgreSQL to mark {', '.join(names)} as pending a restart",
            interval_s=0.05,
            max_interval_s=0.5,
        )
    except WaitTimeoutError as exc:  # the preflight that follows reports the setting either way
        log.info("%s", exc)


def enable_postgres(
    stack: LocalStack,
    params: WorkbookParams,
    sources: Sequence[tuple[str, SourceParams]],
    full_row_images: FullRowImages,
    restart: bool,
) -> None:
    """Apply the prerequisites :func:`preflight_postgres` checks, as far as they apply at runtime.

    Resets ``ALTER SYSTEM`` overrides of restart-only settings (applied with ``restart``), grants
    ``LOGIN REPLICATION``, creates or corrects the publications, sets ``REPLICA IDENTITY FULL`` and
    creates the heartbeat table (``capture.heartbeat_table``) in each captured schema.

    Raises:
        SourceError: if the heartbeat table cannot be created.
        psycopg.Error: if a statement fails (:func:`helpers.sources.cdc.enable_cdc_local` wraps it).
    """
    pg = params.local.postgres
    with stack.connect_postgres_admin() as conn:
        settings = _pg_settings(conn)
        wrong = [
            n
            for n, ok in (
                ("wal_level", settings["wal_level"][0] == "logical"),
                (
                    "max_replication_slots",
                    int(settings["max_replication_slots"][0]) >= pg.max_replication_slots,
                ),
                ("max_wal_senders", int(settings["max_wal_senders"][0]) >= pg.max_wal_senders),
            )
            if not ok
        ]
        for name in wrong:
            # workbook.conf (written on every start) holds the right value; ALTER SYSTEM wins over
            # it, so resetting the ALTER SYSTEM entry restores it at the next restart
            log.info("Resetting %s (ALTER SYSTEM RESET); it takes effect after a restart", name)
            conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
        if wrong:
            _reload_postgres_config(conn, wrong)
        conn.execute(sql.SQL("ALTER ROLE {} WITH LOGIN REPLICATION").format(sql.Identifier(APP_USER)))
    if wrong and restart:
        log.info("Restarting PostgreSQL to apply %s", ", ".join(wrong))
        stack.restart_postgres()
    for name, source in sources:
        schema = source.schema_name or "public"
        pub = publication_name(params, name)
        full = _full_tables(name, source, full_row_images)
        with stack.connect_postgres_admin(source.database) as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_namespace n "
                "ON n.oid = pn.pnnspid WHERE pn.pnpubid = p.oid AND n.nspname = %s) "
                "FROM pg_publication p WHERE pubname = %s",
                (schema, pub),
            ).fetchone()
            ident_pub, ident_schema = sql.Identifier(pub), sql.Identifier(schema)
            if row is None:
                log.info("Creating publication %s FOR TABLES IN SCHEMA %s", pub, schema)
                conn.execute(
                    sql.SQL("CREATE PUBLICATION {} FOR TABLES IN SCHEMA {} WITH (publish = {})").format(
                        ident_pub, ident_schema, sql.Literal(_PUBLISH)
                    )
                )
            else:
                if not row[0]:
                    conn.execute(
                        sql.SQL("ALTER PUBLICATION {} ADD TABLES IN SCHEMA {}").format(
                            ident_pub, ident_schema
                        )
                    )
                conn.execute(
                    sql.SQL("ALTER PUBLICATION {} SET (publish = {})").format(
                        ident_pub, sql.Literal(_PUBLISH)
                    )
                )
            present = {
                r[0]: r[1]
                for r in conn.execute(
                    "SELECT c.relname, c.relreplident FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
                    (schema,),
                ).fetchall()
            }
            for table in sorted(full):
                if table in present and present[table] != "f":
                    log.info("Setting REPLICA IDENTITY FULL on %s.%s", schema, table)
                    conn.execute(
                        sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(sql.Identifier(schema, table))
                    )
            if params.capture.heartbeat_table:  # in the schema's publication, so each heartbeat is a change
                create_heartbeat_table(conn, schema, params.capture.heartbeat_table, APP_USER)
