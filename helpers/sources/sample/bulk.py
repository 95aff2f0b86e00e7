"""Arrow tables in and out of the source tables: COPY / LOAD DATA and typed reads.

PostgreSQL loads with ``COPY ... FROM STDIN``, MariaDB with ``LOAD DATA LOCAL INFILE``, both in
the tab-separated text format :func:`encode_text_rows` builds column-wise with Arrow. Measured
with ``bench/bench_load.py`` on the 2-core reference machine: the full TICKIT scale (424,319 rows)
loads in about 2 s; ``listing`` (192,497 rows) took 0.8 s with ``LOAD DATA`` and 5.6 s with
batched ``INSERT``.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from psycopg import Connection as PgConnection
from psycopg import Error as PgError
from psycopg import sql

from helpers.engines import quote_mariadb
from helpers.errors import SourceError

__all__ = [
    "bulk_load_mariadb",
    "bulk_load_postgres",
    "encode_text_rows",
    "read_mariadb_table",
    "read_postgres_table",
    "rows_to_arrow",
]

_BATCH_ROWS = 50_000


def _text_column(column: pa.ChunkedArray | pa.Array) -> pa.Array | pa.ChunkedArray:
    kind = column.type
    if pa.types.is_boolean(kind):
        text = pc.if_else(column, "1", "0")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = column
        for raw, escaped in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
            text = pc.replace_substring(text, raw, escaped)
    elif pa.types.is_timestamp(kind) and kind.tz is not None:
        # "2024-01-01 10:00:00.000000Z": PostgreSQL timestamptz reads the Z as UTC
        text = pc.cast(column, pa.string())
    else:
        text = pc.cast(column, pa.string())
    return pc.fill_null(text, "\\N")


def encode_text_rows(table: pa.Table) -> bytes:
    """Encode rows in the tab-separated text format of PostgreSQL ``COPY`` and MariaDB ``LOAD DATA``.

    Fields are separated by a tab and rows end with a newline; NULL is ``\\N``; a backslash, tab,
    newline or carriage return inside a string is escaped with a backslash; booleans are ``1``/``0``;
    decimals, dates and timestamps use their canonical text (``12.50``, ``2008-01-01``,
    ``2008-01-01 19:30:00.000000``). The work is done column-wise by Arrow compute kernels.

    Args:
        table: the rows to encode (all columns in table order).

    Returns:
        UTF-8 bytes, one line per row.

    Example:
        >>> encode_text_rows(pa.table({"a": [1, None], "b": ["x\\ty", None]}))
        b'1\\tx\\\\ty\\n\\\\N\\t\\\\N\\n'
    """
    if table.num_rows == 0:
        return b""
    columns = [_text_column(c) for c in table.columns]
    lines = pc.binary_join_element_wise(*columns, "\t") if len(columns) > 1 else columns[0]
    lines = pc.binary_join_element_wise(lines, "", "\n")  # append the row terminator
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    offsets_buffer, data = lines.buffers()[1], lines.buffers()[2]
    assert offsets_buffer is not None and data is not None
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[lines.offset : lines.offset + len(lines) + 1]
    encoded: bytes = data.to_pybytes()[int(offsets[0]) : int(offsets[-1])]
    return encoded


def _batches(table: pa.Table) -> Iterator[pa.Table]:
    for start in range(0, table.num_rows, _BATCH_ROWS):
        yield table.slice(start, _BATCH_ROWS)


# --------------------------------------------------------------------------------------------
# bulk paths


def bulk_load_postgres(conn: PgConnection[Any], schema: str, table: str, data: pa.Table) -> int:
    """Append ``data`` to a PostgreSQL table with ``COPY ... FROM STDIN`` (text format).

    Runs in the caller's transaction (nothing is committed here).

    Args:
        conn: an open connection.
        schema: the table's schema.
        table: the table name.
        data: rows whose column names match the table's columns.

    Returns:
        The number of rows copied.

    Raises:
        SourceError: if the copy fails.
    """
    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(schema, table), sql.SQL(", ").join(map(sql.Identifier, data.column_names))
    )
    try:
        with conn.cursor() as cur, cur.copy(statement) as copy:
            for batch in _batches(data):
                copy.write(encode_text_rows(batch))
    except PgError as exc:
        raise SourceError(f"Failed to copy rows into {schema}.{table}: {exc}") from exc
    return int(data.num_rows)


def bulk_load_mariadb(
    conn: pymysql.Connection[Any],
    database: str,
    table: str,
    data: pa.Table,
    *,
    method: Literal["load_data", "insert"] = "load_data",
) -> int:
    """Append ``data`` to a MariaDB table, in the caller's transaction (nothing is committed).

    ``load_data`` writes the rows in :func:`encode_text_rows` format to a temporary file (mode
    0600, removed afterwards) and runs ``LOAD DATA LOCAL INFILE``; any warning (a truncated or
    converted value) fails the load. ``insert`` sends batched multi-row ``INSERT`` statements
    (PyMySQL ``executemany``); it is kept for comparison and for servers without
    ``local_infile``.

    Args:
        conn: an open connection with ``local_infile`` enabled.
        database: the table's database.
        table: the table name.
        data: rows whose column names match the table's columns.
        method: ``"load_data"`` (fast) or ``"insert"``.

    Returns:
        The number of rows loaded.

    Raises:
        SourceError: if the load fails, loads another number of rows, or raises warnings.
    """
    target = f"{quote_mariadb(database)}.{quote_mariadb(table)}"
    columns = ", ".join(map(quote_mariadb, data.column_names))
    loaded = 0
    try:
        with conn.cursor() as cur:
            if method == "insert":
                placeholders = ", ".join(["%s"] * data.num_columns)
                statement = f"INSERT INTO {target} ({columns}) VALUES ({placeholders})"  # noqa: S608
                for batch in _batches(data):
                    rows = list(zip(*(c.to_pylist() for c in batch.columns), strict=True))
                    cur.executemany(statement, rows)
                    loaded += len(rows)
                return int(loaded)
            fd, path = tempfile.mkstemp(prefix=f"load-{table}-", suffix=".tsv")
            try:
                with os.fdopen(fd, "wb") as handle:
                    for batch in _batches(data):
                        handle.write(encode_text_rows(batch))
                loaded = cur.execute(
                    f"LOAD DATA LOCAL INFILE %s INTO TABLE {target} CHARACTER SET utf8mb4 "
                    "FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' "
                    f"LINES TERMINATED BY '\\n' ({columns})",
                    (path,),
                )
                cur.execute("SELECT @@warning_count")
                warnings = cur.fetchone()
                if warnings and int(warnings[0]):
                    cur.execute("SHOW WARNINGS LIMIT 3")
                    detail = "; ".join(str(w[2]) for w in cur.fetchall())
                    raise SourceError(
                        f"Failed to load rows into {database}.{table}: {warnings[0]} warnings ({detail})"
                    )
            finally:
                os.unlink(path)
    except pymysql.MySQLError as exc:
        raise SourceError(f"Failed to load rows into {database}.{table}: {exc}") from exc
    if loaded != data.num_rows:
        raise SourceError(
            f"Failed to load rows into {database}.{table}: {loaded} of {data.num_rows} rows loaded"
        )
    return int(loaded)


def rows_to_arrow(rows: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """Build an Arrow table from DB-API rows (columns in ``schema`` order).

    MariaDB's ``TINYINT(1)`` becomes boolean again and zoned timestamps are put in UTC.
    """
    columns: list[list[Any]] = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in schema]
    arrays = []
    for values, fld in zip(columns, schema, strict=True):
        if pa.types.is_boolean(fld.type):
            values = [None if v is None else bool(v) for v in values]
        elif pa.types.is_timestamp(fld.type) and fld.type.tz is not None:
            values = [None if v is None else v.astimezone(dt.UTC) for v in values]
        arrays.append(pa.array(values, fld.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_postgres_table(
    conn: PgConnection[Any],
    schema: str,
    table: str,
    arrow: pa.Schema,
    *,
    where_edge: bool = False,
    order_by: Sequence[str] | None = None,
) -> pa.Table:
    """Read a PostgreSQL table into Arrow with the given schema, ordered by its first column.

    Args:
        conn: an open connection.
        schema: the table's schema.
        table: the table name.
        arrow: the Arrow schema to build (column names select the columns).
        where_edge: read only the first and the last row in key order.
        order_by: the key columns (default: the first column).

    Returns:
        The rows as a ``pyarrow.Table`` (booleans, decimals, timestamps as in ``arrow``).

    Raises:
        SourceError: if the query fails.
    """
    keys = list(order_by or arrow.names[:1])
    key = sql.SQL(", ").join(map(sql.Identifier, keys))
    key_desc = sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(k)) for k in keys)
    columns = sql.SQL(", ").join(map(sql.Identifier, arrow.names))
    target = sql.Identifier(schema, table)
    if where_edge:
        query = sql.SQL(
            "(SELECT {c} FROM {t} ORDER BY {k} LIMIT 1) UNION ALL (SELECT {c} FROM {t} ORDER BY {kd} LIMIT 1)"
        ).format(c=columns, t=target, k=key, kd=key_desc)
    else:
        query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(columns, target, key)
    try:
        with conn.cursor() as cur:
            cur.execute(query)
            return rows_to_arrow(cur.fetchall(), arrow)
    except PgError as exc:
        raise SourceError(f"Failed to read {schema}.{table}: {exc}") from exc


def read_mariadb_table(
    conn: pymysql.Connection[Any],
    database: str,
    table: str,
    arrow: pa.Schema,
    *,
    where_edge: bool = False,
    order_by: Sequence[str] | None = None,
) -> pa.Table:
    """Read a MariaDB table into Arrow with the given schema, ordered by its first column.

    Args:
        conn: an open connection.
        database: the table's database.
        table: the table name.
        arrow: the Arrow schema to build (``TINYINT(1)`` becomes boolean again).
        where_edge: read only the first and the last row in key order.
        order_by: the key columns (default: the first column).

    Returns:
        The rows as a ``pyarrow.Table``.

    Raises:
        SourceError: if the query fails.
    """
    keys = list(order_by or arrow.names[:1])
    key = ", ".join(map(quote_mariadb, keys))
    key_desc = ", ".join(f"{quote_mariadb(k)} DESC" for k in keys)
    columns = ", ".join(map(quote_mariadb, arrow.names))
    target = f"{quote_mariadb(database)}.{quote_mariadb(table)}"
    if where_edge:
        query = (
            f"(SELECT {columns} FROM {target} ORDER BY {key} LIMIT 1) UNION ALL "  # noqa: S608
            f"(SELECT {columns} FROM {target} ORDER BY {key_desc} LIMIT 1)"
        )
    else:
        query = f"SELECT {columns} FROM {target} ORDER BY {key}"  # noqa: S608
    try:
        with conn.cursor() as cur:
            cur.execute(query)
            return rows_to_arrow(list(cur.fetchall()), arrow)
    except pymysql.MySQLError as exc:
        raise SourceError(f"Failed to read {database}.{table}: {exc}") from exc
