"""Create the source tables and bulk-load TICKIT and the orders data, idempotently.

Where the tables go (``params.sources``): ``ecomm`` (MariaDB: ``date``, ``listing``, ``sale``),
``ems`` (PostgreSQL schema ``ems``: ``category``, ``event``, ``venue``), ``crm`` (PostgreSQL schema
``crm``: ``users``) and ``orders`` (PostgreSQL schema ``orders``, see :mod:`helpers.sources.sample.orders`).

Bulk paths (measured with ``bench/bench_load.py``): PostgreSQL ``COPY ... FROM STDIN`` in text
format, MariaDB ``LOAD DATA LOCAL INFILE`` from a temporary file in the same tab-separated text
format (``\\N`` for NULL, backslash escapes), both encoded column-wise by Arrow. On the
2-core reference machine the full scale (424,319 rows) loads into empty tables in about 2 s
(~230,000 rows/s); for ``listing`` (192,497 rows) ``LOAD DATA`` took 0.8 s and batched multi-row
``INSERT`` (:func:`bulk_load_mariadb` with ``method="insert"``) 5.6 s, so ``LOAD DATA`` is used.

Idempotence: a table that already holds exactly the expected rows (same count, and its first and
last rows by primary key equal the generated ones) is left alone unless ``reload`` is true. Any
other table (empty, partly loaded, loaded from another seed or scale) is reloaded **in one
transaction**: ``DELETE`` of the old rows and the bulk load commit together, so readers and
change data capture never see a half table. ``DELETE`` rather than ``TRUNCATE`` (PostgreSQL) or a
staging table plus ``RENAME`` (MariaDB) because a row-level delete is what CDC turns into delete
events: a downstream Silver copy stays equal to the source after a reload (Debezium skips
PostgreSQL truncates by default, and a MariaDB rename swaps the data without any row event).

Load markers: each (re)load also records, in the same transaction, a row in ``workbook_loads``
(PostgreSQL: schema ``public`` of the source database, outside the captured schema; MariaDB: the
source database, outside the captured table list) naming the table and the generator settings
(scale and seed). A table with a marker for the current settings that still holds rows is kept
as it is even when its rows have changed since: scripted changes made for change data capture
are data, not damage, and re-running the workbook must not undo them. Without a marker (or with
another scale or seed) the count and first/last-row checks above decide. ``reload=True`` always
reloads.

Types follow TICKIT: ``smallint``/``integer`` keys, ``decimal(8,2)`` money, ``varchar``/``char``
strings, ``date``, ``boolean`` (``BOOLEAN`` = ``TINYINT(1)`` on MariaDB) and ``timestamp``
(``DATETIME(6)`` on MariaDB, microseconds like PostgreSQL). Every table has a primary key;
there are no foreign keys (the systems are independent; scripted CDC edge cases may delete
and re-insert rows in any order).

Example:
    >>> from helpers.params import load_params
    >>> from helpers.sources.local.stack import LocalStack
    >>> from helpers.sources.sample.load import load_tickit
    >>> params = load_params("ci")                 # doctest: +SKIP
    >>> report = load_tickit(LocalStack(params), params)   # doctest: +SKIP
    >>> report.to_frame()                          # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from psycopg import Connection as PgConnection
from psycopg import Error as PgError
from psycopg import sql

from helpers.errors import SourceError
from helpers.params import SourceParams, WorkbookParams
from helpers.sources.sample import orders as outbox
from helpers.sources.sample.tickit import (
    TABLES,
    TableSpec,
    arrow_schema,
    expected_row_counts,
    generate_tickit,
)
from helpers.sources.sql import quote_mariadb

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SourceConnections",
    "TableLoad",
    "LoadReport",
    "encode_text_rows",
    "postgres_table_ddl",
    "mariadb_table_ddl",
    "bulk_load_postgres",
    "bulk_load_mariadb",
    "read_postgres_table",
    "read_mariadb_table",
    "read_source_table",
    "tickit_sources",
    "load_tickit",
    "load_orders",
]

_BATCH_ROWS = 50_000
_ORDER_KEYS = {"customers": ["customer_id"], "orders": ["order_id"], "order_items": ["order_id", "line_no"]}
_MARIADB_TYPES = {"integer": "INT", "timestamp": "DATETIME(6)", "boolean": "BOOLEAN"}


class SourceConnections(Protocol):
    """What the loaders need from a stack: :class:`helpers.sources.local.stack.LocalStack` provides it."""

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> PgConnection[Any]:
        """Open a PostgreSQL connection to ``database``."""
        ...

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> pymysql.Connection[Any]:
        """Open a MariaDB connection (``local_infile`` enabled) to ``database``."""
        ...


@dataclass(frozen=True)
class TableLoad:
    """What happened to one table.

    Attributes:
        source: source system (``ecomm``, ``ems``, ``crm``, ``orders``).
        table: table name.
        rows: rows the table holds afterwards (the expected count).
        loaded: True if the table was (re)loaded, False if it was already complete.
        reason: why (``"empty"``, ``"partial: 12 of 500 rows"``, ``"reload requested"``, ...).
        seconds: time spent on the table, including the check.
    """

    source: str
    table: str
    rows: int
    loaded: bool
    reason: str
    seconds: float


@dataclass
class LoadReport:
    """Outcome of :func:`load_tickit` or :func:`load_orders`."""

    tables: list[TableLoad] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> dict[str, int]:
        """Rows per table after the load."""
        return {t.table: t.rows for t in self.tables}

    @property
    def rows_loaded(self) -> int:
        """Rows written by this call (0 when everything was already there)."""
        return sum(t.rows for t in self.tables if t.loaded)

    @property
    def loaded_tables(self) -> list[str]:
        """Names of the tables this call (re)loaded."""
        return [t.table for t in self.tables if t.loaded]

    def to_frame(self) -> pd.DataFrame:
        """Return one row per table: source, table, rows, loaded, reason, seconds."""

        return pd.DataFrame([t.__dict__ for t in self.tables])


# --------------------------------------------------------------------------------------------
# DDL


def _mariadb_type(sql_type: str) -> str:
    return _MARIADB_TYPES.get(sql_type, sql_type.upper())


def postgres_table_ddl(schema: str, spec: TableSpec) -> sql.Composed:
    """Return ``CREATE TABLE IF NOT EXISTS`` for a TICKIT table in a PostgreSQL schema.

    Args:
        schema: target schema (quoted as an identifier).
        spec: the table (:data:`helpers.sources.sample.tickit.TABLES`).

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
        spec: the table (:data:`helpers.sources.sample.tickit.TABLES`).
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


# --------------------------------------------------------------------------------------------
# encoding


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


# --------------------------------------------------------------------------------------------
# reading back


def _to_arrow(rows: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.Table:
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
            return _to_arrow(cur.fetchall(), arrow)
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
            return _to_arrow(list(cur.fetchall()), arrow)
    except pymysql.MySQLError as exc:
        raise SourceError(f"Failed to read {database}.{table}: {exc}") from exc


def tickit_sources(params: WorkbookParams) -> dict[str, SourceParams]:
    """Return the source systems that hold TICKIT tables (``ecomm``, ``ems``, ``crm``).

    Args:
        params: workbook parameters.

    Returns:
        Source name -> its parameters, for every source whose tables are all TICKIT tables.
    """
    return {
        name: source
        for name, source in params.sources.items()
        if source.tables and all(table in TABLES for table in source.tables)
    }


def read_source_table(stack: SourceConnections, params: WorkbookParams, table: str) -> pa.Table:
    """Read a loaded TICKIT table back from its source database, with the generator's schema.

    Args:
        stack: the servers (:class:`helpers.sources.local.stack.LocalStack`).
        params: workbook parameters (which source holds the table).
        table: a TICKIT table name.

    Returns:
        All rows ordered by primary key; comparable with ``generate_tickit(...)[table]``.

    Raises:
        SourceError: if no source holds the table or the read fails.
    """
    for source in tickit_sources(params).values():
        if table in source.tables:
            if _is_postgres(source):
                with stack.connect_postgres(source.database) as conn:
                    return read_postgres_table(conn, _pg_schema(source), table, arrow_schema(table))
            with stack.connect_mariadb(source.database) as mconn:
                return read_mariadb_table(mconn, source.database, table, arrow_schema(table))
    raise SourceError(f"Failed to read table {table!r}: no TICKIT source lists it")


# --------------------------------------------------------------------------------------------
# loaders


def _is_postgres(source: SourceParams) -> bool:
    if source.engine == "postgres":
        return True
    if source.engine in ("mariadb", "mysql"):
        return False
    raise SourceError(
        f"Failed to load source database {source.database!r}: engine {source.engine!r} is not loaded "
        "locally (SQL Server exists on AWS only)"
    )


def _pg_schema(source: SourceParams) -> str:
    return source.schema_name or "public"


_MARKER_TABLE = "workbook_loads"


def _generator_signature(kind: str, **settings: object) -> str:
    """What produced a table's rows, e.g. ``tickit scale=0.01 seed=20080101``."""
    return " ".join([kind, *(f"{k}={v}" for k, v in sorted(settings.items()))])


def _pg_marker_ddl() -> sql.Composed:
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (table_name text PRIMARY KEY, generator text NOT NULL, "
        "rows bigint NOT NULL, loaded_at timestamptz NOT NULL DEFAULT now())"
    ).format(sql.Identifier("public", _MARKER_TABLE))


def _pg_marker(cur: Any, key: str) -> str | None:
    row = cur.execute(
        sql.SQL("SELECT generator FROM {} WHERE table_name = %s").format(
            sql.Identifier("public", _MARKER_TABLE)
        ),
        (key,),
    ).fetchone()
    return str(row[0]) if row else None


def _pg_set_marker(cur: Any, key: str, generator: str, rows: int) -> None:
    cur.execute(
        sql.SQL(
            "INSERT INTO {} (table_name, generator, rows, loaded_at) VALUES (%s, %s, %s, now()) "
            "ON CONFLICT (table_name) DO UPDATE SET generator = EXCLUDED.generator, "
            "rows = EXCLUDED.rows, loaded_at = EXCLUDED.loaded_at"
        ).format(sql.Identifier("public", _MARKER_TABLE)),
        (key, generator, rows),
    )


def _mariadb_marker_ddl(database: str) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {quote_mariadb(database)}.{quote_mariadb(_MARKER_TABLE)} "
        "(table_name VARCHAR(128) PRIMARY KEY, generator VARCHAR(255) NOT NULL, "
        "`rows` BIGINT NOT NULL, loaded_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))"
    )


def _mariadb_marker(cur: Any, database: str, key: str) -> str | None:
    cur.execute(
        f"SELECT generator FROM {quote_mariadb(database)}.{quote_mariadb(_MARKER_TABLE)} "  # noqa: S608
        "WHERE table_name = %s",
        (key,),
    )
    row = cur.fetchone()
    return str(row[0]) if row else None


def _mariadb_set_marker(cur: Any, database: str, key: str, generator: str, rows: int) -> None:
    cur.execute(
        f"REPLACE INTO {quote_mariadb(database)}.{quote_mariadb(_MARKER_TABLE)} "  # noqa: S608
        "(table_name, generator, `rows`, loaded_at) VALUES (%s, %s, %s, CURRENT_TIMESTAMP(6))",
        (key, generator, rows),
    )


def _verdict(
    count: int, expected: int, edges_match: bool, reload: bool, marker_matches: bool = False
) -> str | None:
    """Why the table must be (re)loaded, or None when it is complete (or loaded and since changed)."""
    if reload:
        return "reload requested"
    if count == 0:
        return "empty"
    if marker_matches:
        return None
    if count != expected:
        return f"partial or stale: {count} of {expected} rows"
    if not edges_match:
        return "stale: rows differ from the generator (other seed or changed rows)"
    return None


def _kept_reason(count: int, expected: int) -> str:
    if count == expected:
        return "complete"
    return f"kept: loaded earlier, {count} rows now ({expected} generated; changed since)"


def _edges(data: pa.Table) -> pa.Table:
    if data.num_rows == 0:
        return data
    return pa.concat_tables([data.slice(0, 1), data.slice(data.num_rows - 1, 1)])


def _load_postgres_tables(
    stack: SourceConnections,
    source_name: str,
    source: SourceParams,
    data: Mapping[str, pa.Table],
    reload: bool,
    generator: str,
) -> list[TableLoad]:
    schema = _pg_schema(source)
    results: list[TableLoad] = []
    with stack.connect_postgres(source.database) as conn:
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
                for table in source.tables:
                    cur.execute(postgres_table_ddl(schema, TABLES[table]))
                cur.execute(_pg_marker_ddl())
        except PgError as exc:
            raise SourceError(f"Failed to create the tables of {source.database}.{schema}: {exc}") from exc
        for table in source.tables:
            started = time.perf_counter()
            target = sql.Identifier(schema, table)
            try:
                with conn.transaction(), conn.cursor() as cur:
                    # concurrent loaders wait here instead of both loading
                    cur.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(target))
                    count_row = cur.execute(sql.SQL("SELECT count(*) FROM {}").format(target)).fetchone()
                    count = int(count_row[0]) if count_row else 0
                    expected = data[table]
                    marker_key = f"{schema}.{table}"
                    marker_matches = _pg_marker(cur, marker_key) == generator
                    edges_match = count == expected.num_rows and read_postgres_table(
                        conn, schema, table, expected.schema, where_edge=True
                    ).equals(_edges(expected))
                    reason = _verdict(count, expected.num_rows, edges_match, reload, marker_matches)
                    if reason is not None:
                        if count:
                            cur.execute(sql.SQL("DELETE FROM {}").format(target))
                        bulk_load_postgres(conn, schema, table, expected)
                        count = expected.num_rows
                    if reason is not None or not marker_matches:
                        _pg_set_marker(cur, marker_key, generator, expected.num_rows)
            except PgError as exc:
                raise SourceError(f"Failed to load {source.database}.{schema}.{table}: {exc}") from exc
            results.append(
                TableLoad(
                    source_name,
                    table,
                    count,
                    reason is not None,
                    reason or _kept_reason(count, data[table].num_rows),
                    time.perf_counter() - started,
                )
            )
    return results


def _load_mariadb_tables(
    stack: SourceConnections,
    source_name: str,
    source: SourceParams,
    data: Mapping[str, pa.Table],
    reload: bool,
    generator: str,
) -> list[TableLoad]:
    results: list[TableLoad] = []
    database = source.database
    with stack.connect_mariadb(database) as conn:
        try:
            with conn.cursor() as cur:
                for table in source.tables:
                    cur.execute(mariadb_table_ddl(database, TABLES[table]))
                cur.execute(_mariadb_marker_ddl(database))
            conn.commit()
        except pymysql.MySQLError as exc:
            raise SourceError(f"Failed to create the tables of {database}: {exc}") from exc
        for table in source.tables:
            started = time.perf_counter()
            target = f"{quote_mariadb(database)}.{quote_mariadb(table)}"
            expected = data[table]
            try:
                conn.begin()
                with conn.cursor() as cur:
                    # FOR UPDATE on the whole table: a concurrent loader waits for our commit
                    cur.execute(f"SELECT count(*) FROM (SELECT 1 FROM {target} FOR UPDATE) AS t")  # noqa: S608
                    count_row = cur.fetchone()
                    count = int(count_row[0]) if count_row else 0
                    marker_matches = _mariadb_marker(cur, database, table) == generator
                    edges_match = count == expected.num_rows and read_mariadb_table(
                        conn, database, table, expected.schema, where_edge=True
                    ).equals(_edges(expected))
                    reason = _verdict(count, expected.num_rows, edges_match, reload, marker_matches)
                    if reason is not None:
                        if count:
                            cur.execute(f"DELETE FROM {target}")  # noqa: S608
                        bulk_load_mariadb(conn, database, table, expected)
                        count = expected.num_rows
                    if reason is not None or not marker_matches:
                        _mariadb_set_marker(cur, database, table, generator, expected.num_rows)
                conn.commit()
            except BaseException as exc:
                conn.rollback()
                if isinstance(exc, pymysql.MySQLError):
                    raise SourceError(f"Failed to load {database}.{table}: {exc}") from exc
                raise
            results.append(
                TableLoad(
                    source_name,
                    table,
                    count,
                    reason is not None,
                    reason or _kept_reason(count, expected.num_rows),
                    time.perf_counter() - started,
                )
            )
    return results


def load_tickit(
    stack: SourceConnections,
    params: WorkbookParams,
    *,
    reload: bool | None = None,
    tables: Mapping[str, pa.Table] | None = None,
) -> LoadReport:
    """Create the TICKIT tables in their source databases and load the generated rows.

    Idempotent: tables that already hold exactly the generated rows are not touched unless
    ``reload`` is true; other tables are emptied and loaded in one transaction each.

    Args:
        stack: the servers (:class:`helpers.sources.local.stack.LocalStack`, already started).
        params: workbook parameters (``tickit.scale``, ``tickit.seed``, ``tickit.reload``,
            ``sources``).
        reload: reload every table even when complete; ``None`` takes ``params.tickit.reload``.
        tables: pre-generated tables (default: ``generate_tickit(scale, seed)``).

    Returns:
        A :class:`LoadReport`: rows, loaded or not and why, seconds per table.

    Raises:
        SourceError: if a source's engine cannot be loaded locally, or DDL or a load fails (the
            failing table is rolled back; tables loaded before it stay loaded).
        StackError: if a server is not reachable.
    """
    started = time.perf_counter()
    force = params.tickit.reload if reload is None else reload
    data = dict(tables) if tables is not None else generate_tickit(params.tickit.scale, params.tickit.seed)
    expected = expected_row_counts(params.tickit.scale)
    for name, table in data.items():
        if table.num_rows != expected[name] and tables is None:
            raise SourceError(
                f"Failed to generate TICKIT table {name}: {table.num_rows} rows, {expected[name]} expected"
            )
    report = LoadReport()
    generator = _generator_signature("tickit", scale=params.tickit.scale, seed=params.tickit.seed)
    if tables is not None:
        generator += " (caller-supplied tables)"
    for name, source in tickit_sources(params).items():
        if _is_postgres(source):
            report.tables += _load_postgres_tables(stack, name, source, data, force, generator)
        else:
            report.tables += _load_mariadb_tables(stack, name, source, data, force, generator)
    report.seconds = time.perf_counter() - started
    return report


def load_orders(
    stack: SourceConnections, params: WorkbookParams, *, reload: bool | None = None
) -> LoadReport:
    """Create the orders schema with its outbox triggers and load the generated orders.

    Idempotent like :func:`load_tickit` (``reload=None`` takes ``params.tickit.reload``), but the
    three tables form one unit: if any of them differs from the generated rows (or the outbox
    does not hold one row per order), all are emptied and reloaded in one transaction; the
    triggers rebuild the outbox.

    Args:
        stack: the servers (:class:`helpers.sources.local.stack.LocalStack`, already started).
        params: workbook parameters (``orders.customers/orders/seed``, ``sources.orders``).
        reload: reload even when complete.

    Returns:
        A :class:`LoadReport` with ``customers``, ``orders``, ``order_items`` and ``outbox``.

    Raises:
        SourceError: if the DDL or the load fails (rolled back as a whole).
        StackError: if the server is not reachable.
    """
    started = time.perf_counter()
    force = params.tickit.reload if reload is None else reload
    source = params.source("orders")
    if not _is_postgres(source):
        raise SourceError(f"Failed to load the orders: engine {source.engine!r} is not PostgreSQL")
    schema = _pg_schema(source)
    data = outbox.generate_orders(params.orders.customers, params.orders.orders, params.orders.seed)
    report = LoadReport()
    generator = _generator_signature(
        "orders", customers=params.orders.customers, orders=params.orders.orders, seed=params.orders.seed
    )
    marker_key = f"{schema}.*"
    with stack.connect_postgres(source.database) as conn:
        outbox.create_orders_schema(conn, schema)
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(_pg_marker_ddl())
                marker_matches = _pg_marker(cur, marker_key) == generator
                names = [*outbox.ORDERS_TABLES, "outbox"]
                cur.execute(
                    sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(
                        sql.SQL(", ").join(sql.Identifier(schema, n) for n in names)
                    )
                )
                counts: dict[str, int] = {}
                for name in names:
                    row = cur.execute(
                        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
                    ).fetchone()
                    counts[name] = int(row[0]) if row else 0
                reason: str | None = None
                for name in outbox.ORDERS_TABLES:
                    expected = data[name]
                    edges_match = counts[name] == expected.num_rows and read_postgres_table(
                        conn, schema, name, expected.schema, where_edge=True, order_by=_ORDER_KEYS[name]
                    ).equals(_edges(expected))
                    reason = _verdict(counts[name], expected.num_rows, edges_match, force, marker_matches)
                    if reason is not None:
                        reason = f"{name}: {reason}" if not force else reason
                        break
                if reason is None and counts["outbox"] != counts["orders"]:
                    reason = f"outbox: {counts['outbox']} rows for {counts['orders']} orders"
                if reason is not None:
                    for name in reversed(outbox.ORDERS_TABLES):  # children first; triggers empty the outbox
                        cur.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, name)))
                    for name in outbox.ORDERS_TABLES:
                        bulk_load_postgres(conn, schema, name, data[name])
                    for name, key in (("customers", "customer_id"), ("orders", "order_id")):
                        qualified = sql.Identifier(schema, name).as_string(conn)
                        cur.execute(
                            sql.SQL(
                                "SELECT setval(pg_get_serial_sequence(%s, %s), "
                                "coalesce(max({k}), 0) + 1, false) FROM {t}"
                            ).format(k=sql.Identifier(key), t=sql.Identifier(schema, name)),
                            (qualified, key),
                        )
                    counts = {n: data[n].num_rows for n in outbox.ORDERS_TABLES}
                    counts["outbox"] = data["orders"].num_rows
                if reason is not None or not marker_matches:
                    _pg_set_marker(cur, marker_key, generator, data["orders"].num_rows)
        except PgError as exc:
            raise SourceError(f"Failed to load the orders into {source.database}.{schema}: {exc}") from exc
    seconds = time.perf_counter() - started
    generated = {n: data[n].num_rows for n in outbox.ORDERS_TABLES}
    generated["outbox"] = data["orders"].num_rows
    for name in [*outbox.ORDERS_TABLES, "outbox"]:
        report.tables.append(
            TableLoad(
                "orders",
                name,
                counts[name],
                reason is not None,
                reason or _kept_reason(counts[name], generated[name]),
                seconds if name != "outbox" else 0.0,
            )
        )
    report.seconds = seconds
    return report
