"""The one way to reach a source table: a connection to a configured source, its rows, its key.

Local sources connect to the servers of :mod:`helpers.local`; on AWS the same calls go
to RDS through :func:`helpers.sources.api.open_sources`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import sql

from helpers.engines import engine_kind, quote_mariadb
from helpers.errors import SourceError
from helpers.params import WorkbookParams
from helpers.sources.api import Sources, open_sources

__all__ = ["connect", "max_value", "primary_key"]


@contextmanager
def connect(
    params: WorkbookParams, source: str, *, autocommit: bool = False, sources: Sources | None = None
) -> Iterator[Any]:
    """A DB-API connection to ``source``'s database, closed on exit.

    Args:
        params: workbook parameters (``sources.<source>``).
        source: a configured source name (``ems``, ``ecomm``...).
        autocommit: open the connection in autocommit mode.
        sources: the sources to use (default :func:`open_sources` of ``params``).

    Raises:
        SourceError: the source is not configured, or its engine has no connection here.
    """
    if source not in params.sources:
        raise SourceError(
            f"Failed to connect to source {source!r}: not in params (have {sorted(params.sources)})"
        )
    sp = params.sources[source]
    opened = sources or open_sources(params)
    kind = engine_kind(sp.engine)
    if kind == "postgres":
        conn = opened.connect_postgres(sp.database, autocommit=autocommit)
    elif kind == "mysql":
        conn = opened.connect_mariadb(sp.database, autocommit=autocommit)
    else:
        raise SourceError(f"Failed to connect to source {source!r}: {sp.engine} tables are read on AWS only")
    try:
        yield conn
    finally:
        conn.close()


def max_value(
    params: WorkbookParams, source: str, table: str, column: str, *, sources: Sources | None = None
) -> Any:
    """The largest value of ``source.table.column`` (None for an empty table), read by the database."""
    sp = params.sources[source]
    with connect(params, source, sources=sources) as conn:
        if engine_kind(sp.engine) == "postgres":
            query = sql.SQL("SELECT max({}) FROM {}").format(
                sql.Identifier(column), sql.Identifier(sp.namespace, table)
            )
            row = conn.execute(query).fetchone()
        else:
            with conn.cursor() as mcur:
                mcur.execute(f"SELECT max({quote_mariadb(column)}) FROM {quote_mariadb(table)}")  # noqa: S608 - quoted identifiers
                row = mcur.fetchone()
    return None if row is None else row[0]


def primary_key(
    params: WorkbookParams, source: str, table: str, *, sources: Sources | None = None
) -> list[str]:
    """The primary-key columns of ``source.table``, in key order."""
    sp = params.sources[source]
    with connect(params, source, sources=sources) as conn:
        if engine_kind(sp.engine) == "postgres":
            rows = conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary "
                "ORDER BY array_position(i.indkey, a.attnum)",
                (sql.Identifier(sp.namespace, table).as_string(conn),),
            ).fetchall()
            return [r[0] for r in rows]
        with conn.cursor() as cur:
            cur.execute(
                "SELECT column_name FROM information_schema.key_column_usage WHERE table_schema = %s "
                "AND table_name = %s AND constraint_name = 'PRIMARY' ORDER BY ordinal_position",
                (sp.database, table),
            )
            return [r[0] for r in cur.fetchall()]
