"""``CREATE TABLE`` statements for the TICKIT tables, in PostgreSQL and MariaDB spelling.

Types follow TICKIT: ``smallint``/``integer`` keys, ``decimal(8,2)`` money, ``varchar``/``char``
strings, ``date``, ``boolean`` (``TINYINT(1)`` on MariaDB) and ``timestamp`` (``DATETIME(6)`` on
MariaDB, microseconds like PostgreSQL). Every table has a primary key and no foreign key (the
systems are independent; scripted CDC edge cases delete and re-insert rows in any order).
"""

from __future__ import annotations

from psycopg import sql

from helpers.engines import quote_mariadb
from helpers.sources.sample.tickit_tables import TableSpec

__all__ = ["mariadb_table_ddl", "postgres_table_ddl"]

_MARIADB_TYPES = {"integer": "INT", "timestamp": "DATETIME(6)", "boolean": "BOOLEAN"}


def _mariadb_type(sql_type: str) -> str:
    return _MARIADB_TYPES.get(sql_type, sql_type.upper())


def postgres_table_ddl(schema: str, spec: TableSpec) -> sql.Composed:
    """Return ``CREATE TABLE IF NOT EXISTS`` for a TICKIT table in a PostgreSQL schema.

    Args:
        schema: target schema (quoted as an identifier).
        spec: the table (:data:`helpers.sources.sample.tickit_tables.TABLES`).

    Returns:
        The statement, identifiers quoted with :class:`psycopg.sql.Identifier`.
    """
    columns = [
        sql.SQL("{} {}{}").format(
            sql.Identifier(c.name), sql.SQL(c.sql_type), sql.SQL("" if c.nullable else " NOT NULL")
        )
        for c in spec.columns
    ]
    columns.append(
        sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, spec.primary_key)))
    )
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
        sql.Identifier(schema, spec.name), sql.SQL(", ").join(columns)
    )


def mariadb_table_ddl(database: str, spec: TableSpec, table: str | None = None) -> str:
    """Return ``CREATE TABLE IF NOT EXISTS`` for a TICKIT table in a MariaDB database.

    Args:
        database: target database.
        spec: the table (:data:`helpers.sources.sample.tickit_tables.TABLES`).
        table: table name if not ``spec.name``.

    Returns:
        The statement (InnoDB, utf8mb4), identifiers quoted with backticks.
    """
    columns = [
        f"{quote_mariadb(c.name)} {_mariadb_type(c.sql_type)}{'' if c.nullable else ' NOT NULL'}"
        for c in spec.columns
    ]
    columns.append(f"PRIMARY KEY ({', '.join(map(quote_mariadb, spec.primary_key))})")
    return (
        f"CREATE TABLE IF NOT EXISTS {quote_mariadb(database)}.{quote_mariadb(table or spec.name)} "
        f"({', '.join(columns)}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"
    )
