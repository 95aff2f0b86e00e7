"""Change data capture on the local sources: enable it, check it, show row counts.

(Amazon RDS and SQL Server enablement lives in :mod:`helpers.sources.rds_cdc`.)

PostgreSQL sources (Debezium ``pgoutput``):

* server: ``wal_level = logical``, ``max_replication_slots`` and ``max_wal_senders`` at least
  the values in ``params.local.postgres`` (restart-only settings: written by
  :mod:`helpers.sources.local.stack` into ``workbook.conf``; a conflicting ``ALTER SYSTEM`` is reset);
* role ``workbook`` has ``LOGIN`` and ``REPLICATION``;
* one publication per source, ``<project>_<source>_pub`` (e.g. ``tickit_ems_pub``), created
  ``FOR TABLES IN SCHEMA <schema>`` (PostgreSQL 15 syntax), publishing insert, update, delete
  and truncate. The schema form is chosen over a table list so tables created later (reloads,
  new tables) are captured without altering the publication; every configured table must
  exist and be published. Debezium should use it with ``publication.autocreate.mode=disabled``
  (creating a schema publication needs a superuser, which ``workbook`` is not);
* ``REPLICA IDENTITY FULL`` on the tables that need full before-images (default: every
  configured table, since deletes must carry the full row for soft-delete mode; choose per
  source/table with ``full_row_images``); other tables need a primary key.

MariaDB sources (Debezium MySQL connector): ``log_bin`` on, ``binlog_format=ROW``,
``binlog_row_image=FULL``, ``server_id`` as in params, ``binlog_checksum=NONE``, the version
string ``5.5.5-<version>-log``, binlog retention (``expire_logs_days``) at least the configured
days, and user ``workbook``@``127.0.0.1`` holding SELECT, RELOAD, SHOW DATABASES, REPLICATION
SLAVE, REPLICATION CLIENT (shown as BINLOG MONITOR) and LOCK TABLES.

Example:
    >>> reports = enable_cdc_local(stack, params)          # doctest: +SKIP
    >>> preflight_frame(reports)                           # doctest: +SKIP
    >>> raise_for_failures(reports)                        # doctest: +SKIP
    >>> source_row_counts(stack, params)                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import psycopg
import pymysql
from psycopg import sql

from helpers.errors import CdcSetupError, SourceError
from helpers.naming import publication_name
from helpers.params import SourceParams, WorkbookParams
from helpers.sources.local.stack import APP_USER, LOOPBACK, LocalStack
from helpers.sources.sql import quote_mariadb

__all__ = [
    "Check",
    "PreflightReport",
    "enable_cdc_local",
    "preflight",
    "preflight_frame",
    "raise_for_failures",
    "source_row_counts",
]

log = logging.getLogger(__name__)

FullRowImages = Mapping[str, Collection[str]] | None
"""Per source, the tables needing ``REPLICA IDENTITY FULL``; a source left out: all its tables."""

_PUBLISH = "insert, update, delete, truncate"
_MARIADB_REQUIRED_PRIVILEGES = (
    "SELECT",
    "RELOAD",
    "SHOW DATABASES",
    "REPLICATION SLAVE",
    "BINLOG MONITOR",  # = REPLICATION CLIENT since MariaDB 10.5
    "LOCK TABLES",
)
_MARIADB_DB_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX")
_RESTART_PG = (
    "restart PostgreSQL: `workbook-stack stop && workbook-stack start` "
    "(or enable_cdc_local(..., restart=True))"
)
_RESTART_MARIADB = (
    "restart MariaDB: `workbook-stack stop && workbook-stack start` (or enable_cdc_local(..., restart=True))"
)
_FIXED_BY_ENABLE = "run enable_cdc_local(stack, params)"


@dataclasses.dataclass(frozen=True)
class Check:
    """One preflight check: what was found, what is needed and, when it failed, how to fix it."""

    name: str
    passed: bool
    actual: str
    expected: str
    fix: str = ""


@dataclasses.dataclass(frozen=True)
class PreflightReport:
    """All checks of one source system."""

    source: str
    engine: str
    database: str
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        """The checks that failed."""
        return tuple(c for c in self.checks if not c.passed)


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


def _local_sources(params: WorkbookParams) -> list[tuple[str, SourceParams]]:
    return sorted(params.sources.items())


# --------------------------------------------------------------------------------------------
# PostgreSQL


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
            fix="" if ok else f"ALTER ROLE {APP_USER} WITH LOGIN REPLICATION ({_FIXED_BY_ENABLE})",
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
            "" if has_schema else "run `workbook-stack start` (it creates the source schemas)",
        )
    )
    row = conn.execute(
        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, "
        "  EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_namespace n ON n.oid = pn.pnnspid "
        "          WHERE pn.pnpubid = p.oid AND n.nspname = %s) "
        "FROM pg_publication p WHERE pubname = %s",
        (schema, pub),
    ).fetchone()
    create = f"CREATE PUBLICATION {pub} FOR TABLES IN SCHEMA {schema} ({_FIXED_BY_ENABLE})"
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
                else f"ALTER PUBLICATION {pub} ADD TABLES IN SCHEMA {schema} ({_FIXED_BY_ENABLE})",
            )
        )
        checks.append(
            Check(
                f"publication {pub} publishes",
                ok_ops,
                ", ".join(ops) or "nothing",
                _PUBLISH,
                ""
                if ok_ops
                else f"ALTER PUBLICATION {pub} SET (publish = '{_PUBLISH}') ({_FIXED_BY_ENABLE})",
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
                "" if published else f"add it to publication {pub} ({_FIXED_BY_ENABLE})",
            )
        )
        if table in full:
            ok, expected = ident == "f", "full"
            fix = f"ALTER TABLE {qualified} REPLICA IDENTITY FULL ({_FIXED_BY_ENABLE})"
        else:
            ok, expected = (
                ident == "f" or (ident == "d" and has_pk) or ident == "i",
                "default with primary key",
            )
            fix = f"add a primary key to {qualified} or ALTER TABLE {qualified} REPLICA IDENTITY FULL"
        actual = identity_names.get(ident, ident) + ("" if has_pk else " (no primary key)")
        checks.append(Check(f"table {qualified} replica identity", ok, actual, expected, "" if ok else fix))
    return checks


def _preflight_postgres(
    stack: LocalStack,
    params: WorkbookParams,
    sources: Sequence[tuple[str, SourceParams]],
    full_row_images: FullRowImages,
) -> list[PreflightReport]:
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
                "" if has_db else "run `workbook-stack start` (it creates the source databases)",
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
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT bool_and(pending_restart) FROM pg_settings WHERE name = ANY(%s)", (list(names),)
        ).fetchone()
        if row and row[0]:
            return
        time.sleep(0.05)


def _enable_postgres(
    stack: LocalStack,
    params: WorkbookParams,
    sources: Sequence[tuple[str, SourceParams]],
    full_row_images: FullRowImages,
    restart: bool,
) -> None:
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


# --------------------------------------------------------------------------------------------
# MariaDB


# (variable, expected value as the server reports it, dynamic?)
def _mariadb_expected(stack: LocalStack, params: WorkbookParams) -> list[tuple[str, str, bool]]:
    maria = params.local.mariadb
    return [
        ("log_bin", "1", False),
        ("binlog_format", "ROW", True),
        ("binlog_row_image", "FULL", True),
        ("server_id", str(maria.server_id), True),
        ("binlog_checksum", "NONE", True),
        ("version", stack.mariadb_version_string(), False),
        ("expire_logs_days", str(maria.binlog_expire_days), True),
    ]


_MARIADB_CNF_KEYS = {"log_bin": "mariadb-bin"}


def _mariadb_globals(cur: Any, names: Iterable[str]) -> dict[str, str]:
    out = {}
    for name in names:
        cur.execute(f"SELECT @@GLOBAL.{name}")  # names come from the fixed list above
        value = cur.fetchone()[0]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        out[name] = str(value)
    return out


def _mariadb_ok(name: str, actual: str, expected: str) -> bool:
    if name == "expire_logs_days":
        return float(actual) >= float(expected)
    if name == "server_id":
        return actual == expected and actual != "0"
    return actual.upper() == expected.upper()


def _preflight_mariadb(
    stack: LocalStack, params: WorkbookParams, sources: Sequence[tuple[str, SourceParams]]
) -> list[PreflightReport]:
    expected = _mariadb_expected(stack, params)
    cnf = stack.paths.maria_cnf
    grantee = f"'{APP_USER}'@'{LOOPBACK}'"
    conn = stack.connect_mariadb_admin()
    reports = []
    try:
        with conn.cursor() as cur:
            actual = _mariadb_globals(cur, [e[0] for e in expected])
            server: list[Check] = []
            for name, want, dynamic in expected:
                ok = _mariadb_ok(name, actual[name], want)
                shown = {"log_bin": "ON" if actual[name] == "1" else "OFF"}.get(name, actual[name])
                want_shown = {"log_bin": "ON", "expire_logs_days": f">= {want}"}.get(name, want)
                cnf_value = _MARIADB_CNF_KEYS.get(name, want)
                if dynamic:
                    fix = (
                        f"SET GLOBAL {name} = {want!r} ({_FIXED_BY_ENABLE}) and keep `{name} = {cnf_value}` "
                        f"under [mariadbd] in {cnf} (helpers.sources.local.stack writes it on every start)"
                    )
                else:
                    fix = f"set `{name} = {cnf_value}` under [mariadbd] in {cnf}, then {_RESTART_MARIADB}"
                server.append(Check(name, ok, shown, want_shown, "" if ok else fix))
            cur.execute(
                "SELECT privilege_type FROM information_schema.USER_PRIVILEGES WHERE grantee = %s", (grantee,)
            )
            have = {r[0] for r in cur.fetchall()}
            missing = [p for p in _MARIADB_REQUIRED_PRIVILEGES if p not in have]
            server.append(
                Check(
                    f"user {APP_USER}@{LOOPBACK} replication privileges",
                    not missing,
                    ", ".join(sorted(have)) or "none (user missing?)",
                    ", ".join(_MARIADB_REQUIRED_PRIVILEGES),
                    ""
                    if not missing
                    else f"GRANT {', '.join(missing)} ON *.* TO {APP_USER}@{LOOPBACK} ({_FIXED_BY_ENABLE})",
                )
            )
            for name, source in sources:
                checks = list(server)
                cur.execute(
                    "SELECT privilege_type FROM information_schema.SCHEMA_PRIVILEGES "
                    "WHERE grantee = %s AND table_schema = %s",
                    (grantee, source.database),
                )
                db_have = {r[0] for r in cur.fetchall()}
                db_missing = [p for p in _MARIADB_DB_PRIVILEGES if p not in db_have]
                checks.append(
                    Check(
                        f"user {APP_USER}@{LOOPBACK} rights on {source.database}",
                        not db_missing,
                        "all" if not db_missing else f"missing {', '.join(db_missing)}",
                        "all",
                        ""
                        if not db_missing
                        else f"GRANT ALL PRIVILEGES ON {source.database}.* TO {APP_USER}@{LOOPBACK} "
                        f"({_FIXED_BY_ENABLE})",
                    )
                )
                cur.execute(
                    "SELECT table_name, engine FROM information_schema.TABLES WHERE table_schema = %s",
                    (source.database,),
                )
                tables = {r[0]: r[1] for r in cur.fetchall()}
                for table in source.tables:
                    engine = tables.get(table)
                    ok = engine == "InnoDB"
                    checks.append(
                        Check(
                            f"table {source.database}.{table} exists (InnoDB)",
                            ok,
                            "table missing" if engine is None else f"engine {engine}",
                            "engine InnoDB",
                            ""
                            if ok
                            else (
                                "load the source tables first, then run enable_cdc_local"
                                if engine is None
                                else f"ALTER TABLE {source.database}.{table} ENGINE = InnoDB"
                            ),
                        )
                    )
                reports.append(PreflightReport(name, source.engine, source.database, tuple(checks)))
    except pymysql.MySQLError as exc:
        raise CdcSetupError(f"Failed to check MariaDB CDC settings: {exc}") from None
    finally:
        conn.close()
    return reports


def _enable_mariadb(stack: LocalStack, params: WorkbookParams, restart: bool) -> None:
    expected = _mariadb_expected(stack, params)
    conn = stack.connect_mariadb_admin()
    try:
        with conn.cursor() as cur:
            actual = _mariadb_globals(cur, [e[0] for e in expected])
            needs_restart = False
            for name, want, dynamic in expected:
                if _mariadb_ok(name, actual[name], want):
                    continue
                if dynamic:
                    log.info("SET GLOBAL %s = %s", name, want)
                    value: int | str = int(want) if want.isdigit() else want
                    cur.execute(f"SET GLOBAL {name} = %s", (value,))  # name from the fixed list
                else:
                    needs_restart = True
    except pymysql.MySQLError as exc:
        raise CdcSetupError(f"Failed to set MariaDB CDC settings: {exc}") from None
    finally:
        conn.close()
    stack.apply_accounts()
    if needs_restart and restart:
        log.info("Restarting MariaDB to apply restart-only settings")
        stack.stop_mariadb()
        stack.start_mariadb()


# --------------------------------------------------------------------------------------------
# public


def _unsupported(name: str, source: SourceParams) -> PreflightReport:
    return PreflightReport(
        name,
        source.engine,
        source.database,
        (
            Check(
                "engine available locally",
                False,
                source.engine,
                "postgres or mariadb",
                f"{source.engine} does not run on the local stack: use env 'aws' or set "
                f"sources.{name}.engine to postgres/mariadb",
            ),
        ),
    )


def _split(params: WorkbookParams) -> tuple[list[tuple[str, SourceParams]], list[tuple[str, SourceParams]]]:
    pg = [(n, s) for n, s in _local_sources(params) if s.engine == "postgres"]
    maria = [(n, s) for n, s in _local_sources(params) if s.engine in ("mariadb", "mysql")]
    return pg, maria


def preflight(
    stack: LocalStack, params: WorkbookParams, *, full_row_images: FullRowImages = None
) -> list[PreflightReport]:
    """Check every local source's CDC prerequisites without changing anything.

    Args:
        stack: the running local stack.
        params: workbook parameters (``sources``, ``local``, ``project``).
        full_row_images: per source, the tables that need ``REPLICA IDENTITY FULL``; a source
            not named (or ``None``): all of its tables.

    Returns:
        One report per source (sorted by source name), each check with actual and expected
        value and, when it failed, the fix.

    Raises:
        StackError: if a server is not running.
        CdcSetupError: if a check cannot be run.
    """
    pg, maria = _split(params)
    by_name: dict[str, PreflightReport] = {}
    if pg:
        by_name.update((r.source, r) for r in _preflight_postgres(stack, params, pg, full_row_images))
    if maria:
        by_name.update((r.source, r) for r in _preflight_mariadb(stack, params, maria))
    for name, source in _local_sources(params):
        if name not in by_name:
            by_name[name] = _unsupported(name, source)
    return [by_name[n] for n in sorted(by_name)]


def enable_cdc_local(
    stack: LocalStack,
    params: WorkbookParams,
    *,
    full_row_images: FullRowImages = None,
    restart: bool = False,
) -> list[PreflightReport]:
    """Apply the CDC prerequisites that can be applied, then run :func:`preflight`.

    Idempotent. Applied at runtime: the ``workbook`` role's REPLICATION attribute, one
    publication per PostgreSQL source, ``REPLICA IDENTITY FULL`` on the chosen existing tables,
    MariaDB's dynamic binlog settings (``SET GLOBAL``) and the ``workbook`` user's grants.
    Restart-only settings (``wal_level``, ``max_*``, MariaDB ``log_bin`` and ``version``) are
    corrected in the configuration and applied only with ``restart=True``; otherwise the report
    says which restart is needed.

    Args:
        stack: the running local stack.
        params: workbook parameters.
        full_row_images: per source, the tables that need full before-images (see
            :func:`preflight`).
        restart: restart a server when a restart-only setting is wrong.

    Returns:
        The preflight reports after the changes.

    Raises:
        StackError: if a server is not running.
        CdcSetupError: if a change fails.
    """
    pg, maria = _split(params)
    try:
        if pg:
            _enable_postgres(stack, params, pg, full_row_images, restart)
    except psycopg.Error as exc:
        raise CdcSetupError(f"Failed to enable CDC on PostgreSQL: {str(exc).strip()}") from None
    if maria:
        _enable_mariadb(stack, params, restart)
    return preflight(stack, params, full_row_images=full_row_images)


def preflight_frame(reports: Sequence[PreflightReport]) -> pd.DataFrame:
    """Turn preflight reports into one table for the notebook.

    Args:
        reports: from :func:`preflight` or :func:`enable_cdc_local`.

    Returns:
        Columns ``source, engine, database, check, passed, actual, expected, fix``.
    """
    rows = [
        {
            "source": r.source,
            "engine": r.engine,
            "database": r.database,
            "check": c.name,
            "passed": c.passed,
            "actual": c.actual,
            "expected": c.expected,
            "fix": c.fix,
        }
        for r in reports
        for c in r.checks
    ]
    columns = ["source", "engine", "database", "check", "passed", "actual", "expected", "fix"]
    return pd.DataFrame(rows, columns=columns)


def raise_for_failures(reports: Sequence[PreflightReport]) -> None:
    """Raise when any preflight check failed, listing each failure with its fix.

    Args:
        reports: from :func:`preflight` or :func:`enable_cdc_local`.

    Raises:
        CdcSetupError: if a check failed.
    """
    lines = [
        f"{r.source}: {c.name} is {c.actual!r}, expected {c.expected!r}; fix: {c.fix}"
        for r in reports
        for c in r.failures
    ]
    if lines:
        raise CdcSetupError("Failed to verify the CDC prerequisites:\n  " + "\n  ".join(lines))


def source_row_counts(stack: LocalStack, params: WorkbookParams, *, missing_ok: bool = False) -> pd.DataFrame:
    """Exact row counts (``count(*)``) of every configured source table.

    Args:
        stack: the running local stack.
        params: workbook parameters (``sources``).
        missing_ok: report a missing table as ``<NA>`` instead of raising.

    Returns:
        Columns ``system, engine, database, table, rows`` (rows as nullable ``Int64``).

    Raises:
        SourceError: if a table is missing (unless ``missing_ok``) or cannot be counted.
    """
    records: list[dict[str, Any]] = []
    for name, source in _local_sources(params):
        counts: dict[str, int | None] = {}
        if source.engine == "postgres":
            schema = source.schema_name or "public"
            with stack.connect_postgres(source.database) as conn:
                for table in source.tables:
                    exists = conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()
                    if exists is None or exists[0] is None:
                        counts[table] = None
                        continue
                    row = conn.execute(
                        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
                    ).fetchone()
                    counts[table] = int(row[0]) if row else 0
        elif source.engine in ("mariadb", "mysql"):
            conn2 = stack.connect_mariadb(source.database)
            try:
                with conn2.cursor() as cur:
                    cur.execute(
                        "SELECT table_name FROM information_schema.TABLES WHERE table_schema = %s",
                        (source.database,),
                    )
                    present = {r[0] for r in cur.fetchall()}
                    for table in source.tables:
                        if table not in present:
                            counts[table] = None
                            continue
                        db, tb = quote_mariadb(source.database), quote_mariadb(table)
                        cur.execute(f"SELECT COUNT(*) FROM {db}.{tb}")  # noqa: S608 - quoted identifiers
                        counts[table] = int(cur.fetchone()[0])
            except pymysql.MySQLError as exc:
                raise SourceError(f"Failed to count rows in {source.database}: {exc}") from None
            finally:
                conn2.close()
        else:
            raise SourceError(
                f"Failed to count rows of source {name!r}: engine {source.engine} does not run locally"
            )
        for table, rows in counts.items():
            if rows is None and not missing_ok:
                raise SourceError(
                    f"Failed to count rows of {source.database}.{table} (source {name}): the table does not "
                    "exist; load the sources first"
                )
            records.append(
                {
                    "system": name,
                    "engine": source.engine,
                    "database": source.database,
                    "table": table,
                    "rows": rows,
                }
            )
    frame = pd.DataFrame(records, columns=["system", "engine", "database", "table", "rows"])
    frame["rows"] = frame["rows"].astype("Int64")
    return frame


PREFLIGHT_COLUMNS = ["source", "engine", "database", "check", "passed", "actual", "expected", "fix"]
"""Columns of the table :meth:`Sources.enable_cdc` returns."""
