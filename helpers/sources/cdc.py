"""Change data capture on the local sources: enable it, check it, show row counts.

Dispatches to :mod:`helpers.sources.cdc_postgres` and :mod:`helpers.sources.cdc_mariadb`; the
report model is :mod:`helpers.sources.cdc_report`. (Amazon RDS and SQL Server enablement lives in
:mod:`helpers.sources.rds_cdc`.)

Example:
    >>> reports = enable_cdc_local(stack, params)          # doctest: +SKIP
    >>> source_row_counts(stack, params)                   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import psycopg
import pymysql
from psycopg import sql

from helpers.engines import quote_mariadb
from helpers.errors import CdcSetupError, SourceError
from helpers.local.stack import LocalStack
from helpers.params import SourceParams, WorkbookParams
from helpers.sources.cdc_mariadb import enable_mariadb, preflight_mariadb
from helpers.sources.cdc_postgres import FullRowImages, enable_postgres, preflight_postgres
from helpers.sources.cdc_report import Check, PreflightReport

__all__ = ["enable_cdc_local", "preflight", "source_row_counts"]


def _local_sources(params: WorkbookParams) -> list[tuple[str, SourceParams]]:
    return sorted(params.sources.items())


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
        by_name.update((r.source, r) for r in preflight_postgres(stack, params, pg, full_row_images))
    if maria:
        by_name.update((r.source, r) for r in preflight_mariadb(stack, params, maria))
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
            enable_postgres(stack, params, pg, full_row_images, restart)
    except psycopg.Error as exc:
        raise CdcSetupError(f"Failed to enable CDC on PostgreSQL: {str(exc).strip()}") from None
    if maria:
        enable_mariadb(stack, params, restart)
    return preflight(stack, params, full_row_images=full_row_images)


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
