"""Create the source tables and load TICKIT and the orders data, idempotently (:func:`load_tickit`).

Statements come from :mod:`~helpers.sources.sample.ddl`, rows move through
:mod:`~helpers.sources.sample.bulk`, and :mod:`~helpers.sources.sample.markers` records each load.
Where each table goes and when a table is reloaded: ``docs/architecture.md``, "Sources".

Example:
    >>> report = load_tickit(LocalStack(params), params)   # doctest: +SKIP
    >>> report.to_frame()                                  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd
import pyarrow as pa
import pymysql
from psycopg import Connection as PgConnection
from psycopg import Error as PgError
from psycopg import sql

from helpers.engines import quote_mariadb
from helpers.errors import SourceError
from helpers.params import SourceParams, WorkbookParams
from helpers.sources.sample import orders as outbox
from helpers.sources.sample.bulk import (
    bulk_load_mariadb,
    bulk_load_postgres,
    read_mariadb_table,
    read_postgres_table,
)
from helpers.sources.sample.ddl import mariadb_table_ddl, postgres_table_ddl
from helpers.sources.sample.markers import (
    generator_signature,
    mariadb_marker,
    mariadb_marker_ddl,
    postgres_marker,
    postgres_marker_ddl,
    set_mariadb_marker,
    set_postgres_marker,
)
from helpers.sources.sample.tickit import generate_tickit
from helpers.sources.sample.tickit_tables import TABLES, expected_row_counts

__all__ = [
    "LoadReport",
    "SourceConnections",
    "TableLoad",
    "load_orders",
    "load_tickit",
    "tickit_sources",
]

_ORDER_KEYS = {"customers": ["customer_id"], "orders": ["order_id"], "order_items": ["order_id", "line_no"]}


class SourceConnections(Protocol):
    """What the loaders need from a stack: :class:`helpers.local.stack.LocalStack` provides it."""

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
                cur.execute(postgres_marker_ddl())
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
                    marker_matches = postgres_marker(cur, marker_key) == generator
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
                        set_postgres_marker(cur, marker_key, generator, expected.num_rows)
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
                cur.execute(mariadb_marker_ddl(database))
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
                    marker_matches = mariadb_marker(cur, database, table) == generator
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
                        set_mariadb_marker(cur, database, table, generator, expected.num_rows)
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

    Idempotent. A table that already holds exactly the expected rows (same count, and its first
    and last rows by primary key equal the generated ones) is left alone unless ``reload`` is
    true. So is a table whose load marker (:mod:`helpers.sources.sample.markers`) names the
    current generator settings and that still holds rows, even when they changed since: scripted
    changes made for change data capture are data, not damage. Any other table (empty, partly
    loaded, from another seed or scale) is reloaded **in one transaction**: ``DELETE`` of the old
    rows, the bulk load and the marker commit together, so readers and CDC never see a half
    table. ``DELETE`` rather than ``TRUNCATE`` (PostgreSQL) or a staging table plus ``RENAME``
    (MariaDB) because row-level deletes are what CDC turns into delete events, so a downstream
    Silver copy stays equal to the source after a reload (Debezium skips PostgreSQL truncates by
    default, and a MariaDB rename swaps the data without any row event).

    Args:
        stack: the servers (:class:`helpers.local.stack.LocalStack`, already started).
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
    generator = generator_signature("tickit", scale=params.tickit.scale, seed=params.tickit.seed)
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
        stack: the servers (:class:`helpers.local.stack.LocalStack`, already started).
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
    generator = generator_signature(
        "orders",
        customers=params.orders.customers,
        orders=params.orders.orders,
        seed=params.orders.seed,
        version=outbox.GENERATOR_VERSION,
    )
    marker_key = f"{schema}.*"
    with stack.connect_postgres(source.database) as conn:
        outbox.create_orders_schema(conn, schema)
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(postgres_marker_ddl())
                marker_matches = postgres_marker(cur, marker_key) == generator
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
                    set_postgres_marker(cur, marker_key, generator, data["orders"].num_rows)
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
