"""MariaDB side of local change data capture: check and apply what the Debezium MySQL connector needs.

The public entry points are :func:`helpers.sources.cdc.preflight` and
:func:`helpers.sources.cdc.enable_cdc_local`; :func:`preflight_mariadb` lists the prerequisites.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import pymysql

from helpers.errors import CdcSetupError
from helpers.local.stack import APP_USER, LOOPBACK, LocalStack
from helpers.params import SourceParams, WorkbookParams
from helpers.sources.cdc_report import FIXED_BY_ENABLE, Check, PreflightReport

__all__ = ["enable_mariadb", "preflight_mariadb"]

log = logging.getLogger(__name__)

_MARIADB_REQUIRED_PRIVILEGES = (
    "SELECT",
    "RELOAD",
    "SHOW DATABASES",
    "REPLICATION SLAVE",
    "BINLOG MONITOR",  # = REPLICATION CLIENT since MariaDB 10.5
    "LOCK TABLES",
)
_MARIADB_DB_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX")
_RESTART_MARIADB = (
    "restart MariaDB: `./workbook stack stop && ./workbook stack start` "
    "(or enable_cdc_local(..., restart=True))"
)


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


def preflight_mariadb(
    stack: LocalStack, params: WorkbookParams, sources: Sequence[tuple[str, SourceParams]]
) -> list[PreflightReport]:
    """Check the CDC prerequisites of the MariaDB sources without changing anything.

    Needed: ``log_bin`` on, ``binlog_format=ROW``, ``binlog_row_image=FULL``, ``server_id`` as in
    params, ``binlog_checksum=NONE``, the version string ``5.5.5-<version>-log``, binlog retention
    (``expire_logs_days``) at least the configured days, user ``workbook``@``127.0.0.1`` holding
    SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT (shown as BINLOG
    MONITOR) and LOCK TABLES plus all rights on each source database, and every configured
    table present as InnoDB.

    Args:
        stack: the running local stack.
        params: workbook parameters.
        sources: the MariaDB sources, ``(name, params)``.

    Returns:
        One report per source, in the order of ``sources``.

    Raises:
        CdcSetupError: if a check cannot be run.
    """
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
                        f"SET GLOBAL {name} = {want!r} ({FIXED_BY_ENABLE}) and keep `{name} = {cnf_value}` "
                        f"under [mariadbd] in {cnf} (helpers.local.stack writes it on every start)"
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
                    else f"GRANT {', '.join(missing)} ON *.* TO {APP_USER}@{LOOPBACK} ({FIXED_BY_ENABLE})",
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
                        f"({FIXED_BY_ENABLE})",
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


def enable_mariadb(stack: LocalStack, params: WorkbookParams, restart: bool) -> None:
    """Apply the dynamic settings :func:`preflight_mariadb` checks (``SET GLOBAL``) and the grants.

    Restart-only settings (``log_bin``, ``version``) come from the configuration file the stack
    writes; with ``restart`` MariaDB is restarted when one of them is wrong.

    Raises:
        CdcSetupError: if a setting cannot be changed.
    """
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
