"""One row of a local source table at a time: read, update, delete, insert, restore.

:func:`source_rows`, :func:`update_source_row`, :func:`delete_source_row`, :func:`insert_source_row`
and :func:`restore_sample_row` are what notebook 04 changes its sample sale with. The CDC edge
cases are scripted in :mod:`helpers.sources.edge_cases`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.compute as pc
import pymysql
from psycopg import sql
from psycopg.rows import dict_row

from helpers.engines import quote_mariadb
from helpers.errors import SourceError
from helpers.params import WorkbookParams
from helpers.sources.connect import connect
from helpers.sources.sample.tickit import generate_tickit

__all__ = [
    "delete_source_row",
    "insert_source_row",
    "restore_sample_row",
    "source_rows",
    "update_source_row",
]


def _run_on_table(
    params: WorkbookParams, source: str, table: str, statement: str, values: Sequence[Any], fetch: bool
) -> list[dict[str, Any]]:
    """Run one statement on a local source table (``{t}``: the quoted table, ``%s``: values)."""
    spec = params.source(source)
    if spec.engine not in ("postgres", "mariadb", "mysql"):
        raise SourceError(f"Failed to change {source}.{table}: {spec.engine} sources are not local")
    with connect(params, source) as conn:
        if spec.engine == "postgres":
            cur = conn.cursor(row_factory=dict_row)
            cur.execute(sql.SQL(statement).format(t=sql.Identifier(spec.namespace, table)), list(values))
        else:
            cur = conn.cursor(pymysql.cursors.DictCursor)
            cur.execute(statement.format(t=quote_mariadb(table)), list(values))
        rows = list(cur.fetchall()) if fetch else []
        cur.close()
        conn.commit()
        return rows


def _quoted(params: WorkbookParams, source: str, column: str) -> str:
    if params.source(source).engine == "postgres":
        return '"' + column.replace('"', '""') + '"'
    return quote_mariadb(column)


def _where(params: WorkbookParams, source: str, key: Mapping[str, Any]) -> tuple[str, list[Any]]:
    if not key:
        raise SourceError("Failed to select a source row: the key names no column")
    clause = " AND ".join(f"{_quoted(params, source, c)} = %s" for c in key)
    return clause, list(key.values())


def source_rows(
    params: WorkbookParams, source: str, table: str, key: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The rows of a local source table (one record, or all), as the database driver gives them.

    Args:
        params: workbook parameters (local environment).
        source: source name (``ecomm``).
        table: table name (``sale``).
        key: ``{column: value}`` of one record; None for every row.

    Returns:
        Rows as dicts (exact decimals, naive UTC datetimes on MariaDB).
    """
    if key is None:
        return _run_on_table(params, source, table, "SELECT * FROM {t}", [], True)
    clause, values = _where(params, source, key)
    return _run_on_table(params, source, table, "SELECT * FROM {t} WHERE " + clause, values, True)  # noqa: S608


def update_source_row(
    params: WorkbookParams, source: str, table: str, key: Mapping[str, Any], values: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Update one record of a local source table (one transaction) and return its new row.

    Args:
        values: ``{column: new value}``.

    Returns:
        The row after the update (empty list if there is no such record).
    """
    clause, key_values = _where(params, source, key)
    assignments = ", ".join(f"{_quoted(params, source, c)} = %s" for c in values)
    statement = "UPDATE {t} SET " + assignments + " WHERE " + clause  # noqa: S608 - quoted identifiers
    _run_on_table(params, source, table, statement, [*values.values(), *key_values], False)
    return source_rows(params, source, table, key)


def delete_source_row(params: WorkbookParams, source: str, table: str, key: Mapping[str, Any]) -> None:
    """Delete one record of a local source table (one transaction)."""
    clause, values = _where(params, source, key)
    _run_on_table(params, source, table, "DELETE FROM {t} WHERE " + clause, values, False)  # noqa: S608


def insert_source_row(params: WorkbookParams, source: str, table: str, row: Mapping[str, Any]) -> None:
    """Insert one row (``{column: value}``) into a local source table (one transaction)."""
    columns = ", ".join(_quoted(params, source, c) for c in row)
    marks = ", ".join("%s" for _ in row)
    statement = "INSERT INTO {t} (" + columns + ") VALUES (" + marks + ")"  # noqa: S608 - quoted identifiers
    _run_on_table(params, source, table, statement, list(row.values()), False)


def restore_sample_row(params: WorkbookParams, source: str, table: str, key: Mapping[str, Any]) -> bool:
    """Put a TICKIT record back at the source as the generator made it, if it is missing.

    Notebook 04 deletes its sample sale and puts it back before it ends; a run that stopped in
    between leaves it missing, and the next run first restores it (an insert, captured like any
    other change).

    Returns:
        True if the row was missing and has been inserted, False if it was there.

    Raises:
        SourceError: if the generator (``tickit.scale``, ``tickit.seed``) has no such record.
    """
    if source_rows(params, source, table, key):
        return False
    generated = generate_tickit(params.tickit.scale, seed=params.tickit.seed).get(table)
    rows = []
    if generated is not None and key:
        mask = None
        for column, value in key.items():
            equal = pc.equal(generated.column(column), value)
            mask = equal if mask is None else pc.and_(mask, equal)
        rows = generated.filter(mask).to_pylist()
    if not rows:
        raise SourceError(
            f"Failed to restore {source}.{table} record {dict(key)!r}: the TICKIT generator has none"
        )
    insert_source_row(params, source, table, rows[0])
    return True
