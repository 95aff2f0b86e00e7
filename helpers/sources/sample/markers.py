"""Load markers: a row in ``workbook_loads`` per loaded table naming the generator settings.

The marker table sits outside the captured tables (PostgreSQL: schema ``public`` of the source
database; MariaDB: the source database, not in the captured table list) and is written in the
same transaction as the load, so a marker always describes the rows that were loaded.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from helpers.engines import quote_mariadb

__all__ = [
    "MARKER_TABLE",
    "generator_signature",
    "mariadb_marker",
    "mariadb_marker_ddl",
    "postgres_marker",
    "postgres_marker_ddl",
    "set_mariadb_marker",
    "set_postgres_marker",
]

MARKER_TABLE = "workbook_loads"
"""Name of the marker table."""


def generator_signature(kind: str, **settings: object) -> str:
    """What produced a table's rows, e.g. ``tickit scale=0.01 seed=20080101``."""
    return " ".join([kind, *(f"{k}={v}" for k, v in sorted(settings.items()))])


def postgres_marker_ddl() -> sql.Composed:
    """``CREATE TABLE IF NOT EXISTS public.workbook_loads`` (run in the source database)."""
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (table_name text PRIMARY KEY, generator text NOT NULL, "
        "rows bigint NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now())"
    ).format(sql.Identifier("public", MARKER_TABLE))


def postgres_marker(cur: Any, key: str) -> str | None:
    """The generator signature recorded for ``key`` (``schema.table``), or None."""
    row = cur.execute(
        sql.SQL("SELECT generator FROM {} WHERE table_name = %s").format(
            sql.Identifier("public", MARKER_TABLE)
        ),
        (key,),
    ).fetchone()
    return str(row[0]) if row else None


def set_postgres_marker(cur: Any, key: str, generator: str, rows: int) -> None:
    """Record (or replace) the marker of ``key``, in the cursor's transaction."""
    cur.execute(
        sql.SQL(
            "INSERT INTO {} (table_name, generator, rows, loaded_at) VALUES (%s, %s, %s, now()) "
            "ON CONFLICT (table_name) DO UPDATE SET generator = EXCLUDED.generator, "
            "rows = EXCLUDED.rows, loaded_at = EXCLUDED.loaded_at"
        ).format(sql.Identifier("public", MARKER_TABLE)),
        (key, generator, rows),
    )


def mariadb_marker_ddl(database: str) -> str:
    """``CREATE TABLE IF NOT EXISTS <database>.workbook_loads``."""
    return (
        f"CREATE TABLE IF NOT EXISTS {quote_mariadb(database)}.{quote_mariadb(MARKER_TABLE)} "
        "(table_name VARCHAR(128) PRIMARY KEY, generator VARCHAR(255) NOT NULL, "
        "`rows` BIGINT NOT NULL, loaded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))"
    )


def mariadb_marker(cur: Any, database: str, key: str) -> str | None:
    """The generator signature recorded for table ``key`` in ``database``, or None."""
    cur.execute(
        f"SELECT generator FROM {quote_mariadb(database)}.{quote_mariadb(MARKER_TABLE)} "  # noqa: S608
        "WHERE table_name = %s",
        (key,),
    )
    row = cur.fetchone()
    return str(row[0]) if row else None


def set_mariadb_marker(cur: Any, database: str, key: str, generator: str, rows: int) -> None:
    """Record (or replace) the marker of table ``key``, in the connection's transaction."""
    cur.execute(
        f"REPLACE INTO {quote_mariadb(database)}.{quote_mariadb(MARKER_TABLE)} "  # noqa: S608
        "(table_name, generator, `rows`, loaded_at) VALUES (%s, %s, %s, CURRENT_TIMESTAMP(6))",
        (key, generator, rows),
    )
