"""Both sides of a reconciliation at a source position: the source tables read in one snapshot with
the log position it corresponds to, and how far Silver (or capture) has got.

* PostgreSQL: one ``REPEATABLE READ`` transaction whose first statement reads
  ``pg_current_wal_insert_lsn()`` (every transaction visible in the snapshot committed below it);
* MariaDB / MySQL: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and
  ``SHOW STATUS LIKE 'binlog_snapshot_%'`` (the binlog file and position of exactly that snapshot).

The connection comes from :func:`helpers.sources.connect.connect`; the tables are read on it
rather than by :func:`helpers.sources.edits.source_rows` (one connection each) so that they all
share the one snapshot.

:func:`source_table` reads one table without a position, for the checks that compare a table with
Bronze or Silver and wait for them. PyMySQL is pure Python: it took 1.8 s for the 173,081 rows of
``sale``, where ``connectorx`` (Rust, straight into Arrow) took 0.08 s with the same content. It is
used for local MariaDB tables whose decimals fit its Arrow type; anything else takes the exact path.
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import connectorx
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from psycopg import sql

from helpers.capture.backends import KafkaConnectRestBackend
from helpers.capture.kafka_sink import BronzeSink
from helpers.capture.offsets import offset_position, stored_position
from helpers.capture.register import open_backend
from helpers.checks.digests import rows_to_arrow
from helpers.engines import engine_kind, quote_mariadb
from helpers.environments import implementations
from helpers.errors import ReconcileError, WorkbookError
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import table_exists
from helpers.local.kafka import local_worker
from helpers.local.stack import LocalStack
from helpers.naming import connector_name, silver_topic, slot_name
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.tables import pending_bronze, table_config
from helpers.sources.connect import connect
from helpers.sources.positions import SourcePosition, binlog_index, parse_lsn

__all__ = [
    "SourceSnapshot",
    "SourceStream",
    "captured_position",
    "caught_up",
    "silver_position",
    "silver_rows",
    "sink_has_written",
    "source_counts",
    "source_snapshot",
    "source_table",
    "stream_source_table",
]

log = logging.getLogger(__name__)

#: connectorx reads MySQL decimals as Arrow decimal128(38, 10): exact only within these bounds.
_CX_DECIMAL_PRECISION, _CX_DECIMAL_SCALE = 38, 10
#: Column types connectorx reads to the values PyMySQL gives (checked on the TICKIT tables); a
#: table with any other (FLOAT widens from 32 bits, TIME, BIT, JSON...) takes the PyMySQL path.
_CX_TYPES = frozenset(
    ["tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "numeric", "double", "char", "varchar"]
    + ["tinytext", "text", "mediumtext", "longtext", "date", "datetime", "timestamp"]
)

_POSTGRES_JSON_OIDS = {114, 3802}  # json, jsonb

#: ``query(what, table)`` in one snapshot: column names, rows, JSON columns (PostgreSQL's, by type).
_Query = Callable[[str, str], tuple[list[str], list[Any], set[str]]]


#: Above this many rows (the server's estimate) a local MariaDB table is streamed rather than read
#: whole through connectorx.
_CX_MAX_ROWS = 2_000_000


@dataclass(frozen=True)
class SourceStream:
    """One source table read in batches: its column names (source order), its JSON columns, and
    the batches (Arrow tables of at most the asked number of rows)."""

    columns: list[str]
    json_columns: frozenset[str]
    batches: Iterator[pa.Table]


@dataclass(frozen=True)
class SourceSnapshot:
    """Rows of some tables of one source system, read in one snapshot at ``position``."""

    position: SourcePosition
    tables: dict[str, pa.Table]  # source table name -> its rows (source column order)
    json_columns: dict[str, frozenset[str]]


def _engine_kind(engine: str) -> str:
    try:
        kind = engine_kind(engine)
    except ValueError:
        kind = ""
    if kind not in ("postgres", "mysql"):
        raise ReconcileError(f"Failed to reconcile: engine {engine!r} has no reader here (postgres, mariadb)")
    return kind


@contextlib.contextmanager
def _consistent_read(params: WorkbookParams, source: str) -> Iterator[tuple[SourcePosition, _Query]]:
    """One read-only transaction on a consistent snapshot of ``source`` and the log position it
    corresponds to; yields the position and a function that runs ``SELECT <what> FROM <table>``
    in it (the table name quoted) and returns the column names, the rows and the JSON columns."""
    sp = params.source(source)
    kind = _engine_kind(sp.engine)
    try:
        if kind == "postgres":
            with connect(params, source) as conn:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                with conn.transaction():
                    # the snapshot is taken by this first statement: everything it sees committed
                    # below the WAL insert position read in it
                    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
                    assert row is not None

                    def pg_query(what: str, table: str) -> tuple[list[str], list[Any], set[str]]:
                        cur = conn.execute(
                            sql.SQL("SELECT {} FROM {}").format(
                                sql.SQL(what), sql.Identifier(sp.namespace, table)
                            )
                        )
                        desc = cur.description or []
                        found = {d.name for d in desc if d.type_code in _POSTGRES_JSON_OIDS}
                        return [d.name for d in desc], cur.fetchall(), found

                    yield SourcePosition("postgres", lsn=parse_lsn(str(row[0]))), pg_query
        else:
            with connect(params, source) as mconn, mconn.cursor() as mcur:
                mcur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                mcur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                status = {str(k).lower(): str(v) for k, v in mcur.fetchall()}
                if not status.get("binlog_snapshot_file"):
                    raise ReconcileError(
                        f"Failed to read source {source}: the server reports no binlog snapshot "
                        "position (is the binary log enabled?)"
                    )

                def my_query(what: str, table: str) -> tuple[list[str], list[Any], set[str]]:
                    mcur.execute(f"SELECT {what} FROM {quote_mariadb(table)}")  # noqa: S608
                    return [d[0] for d in mcur.description or []], list(mcur.fetchall()), set()

                yield (
                    SourcePosition(
                        "mysql",
                        file=status["binlog_snapshot_file"],
                        pos=int(status["binlog_snapshot_position"]),
                    ),
                    my_query,
                )
                mcur.execute("COMMIT")
    except ReconcileError:
        raise
    except WorkbookError as exc:
        raise ReconcileError(f"Failed to read source {source}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the database's message, with the place
        raise ReconcileError(f"Failed to read source {source} ({sp.database}): {exc}") from None


def source_snapshot(params: WorkbookParams, source: str, tables: Sequence[str]) -> SourceSnapshot:
    """Read ``tables`` of one source system in one consistent snapshot and its position.

    Args:
        params: workbook parameters (the source's connection).
        source: source system name (a key of ``params.sources``).
        tables: source table names to read.

    Returns:
        The rows (as Arrow, source column order) and the log position of the snapshot.

    Raises:
        ReconcileError: when the source cannot be read (the database's message).
    """
    out: dict[str, pa.Table] = {}
    json_cols: dict[str, frozenset[str]] = {}
    with _consistent_read(params, source) as (position, query):
        for table in tables:
            names, rows, found = query("*", table)  # MariaDB's JSON columns: found in the values
            out[table] = rows_to_arrow(names, rows, found)
            json_cols[table] = frozenset(found)
    return SourceSnapshot(position, out, json_cols)


def source_counts(
    params: WorkbookParams, source: str, tables: Sequence[str]
) -> tuple[SourcePosition, dict[str, int]]:
    """The row count of each of ``tables`` of one source system, all in one consistent snapshot,
    and the log position of that snapshot (the database counts; no row leaves it).

    Raises:
        ReconcileError: when the source cannot be read (the database's message).
    """
    with _consistent_read(params, source) as (position, query):
        counts = {table: int(query("count(*)", table)[1][0][0]) for table in tables}
    return position, counts


def source_table(
    params: WorkbookParams, source: str, table: str, *, key_from: tuple[str, int] | None = None
) -> tuple[pa.Table, frozenset[str]]:
    """Every row of one source table now (one statement, so one consistent read) and its JSON
    columns; the same values and Arrow types as :func:`source_snapshot` (a decimal column may carry
    its declared precision where that infers it from the values), without a position.

    Args:
        key_from: ``(column, lowest)``: only the rows whose integer ``column`` is at least
            ``lowest``. The local MariaDB filters them in its statement (a conformance slice of
            ``ecomm.sale`` is a few rows of 172,456: 0.27 s a read of the whole table at full
            scale); the other paths read the table and filter it here.

    Raises:
        ReconcileError: when the source cannot be read (the database's message).
    """
    sp = params.source(source)
    if _engine_kind(sp.engine) == "mysql" and implementations(params).sources == "local":
        fast = _mariadb_arrow(params, source, table, key_from=key_from)
        if fast is not None:
            return fast, frozenset()
    snap = source_snapshot(params, source, [table])
    rows = snap.tables[table]
    if key_from is not None:
        rows = rows.filter(pc.greater_equal(rows.column(key_from[0]), key_from[1]))
    return rows, snap.json_columns[table]


@contextlib.contextmanager
def stream_source_table(
    params: WorkbookParams, source: str, table: str, batch_rows: int = 100_000
) -> Iterator[SourceStream]:
    """Every row of one source table now, in batches (one statement, so one consistent read),
    holding at most ``batch_rows`` rows in memory: for whole-table checks of tables too big for
    one machine. PostgreSQL through a server-side cursor; MariaDB through connectorx when the
    server estimates at most 2,000,000 rows (the batches are slices of one Arrow read), else
    PyMySQL's unbuffered cursor. The values and types are :func:`source_table`'s.

    Raises:
        ReconcileError: when the source cannot be read (the database's message).
    """
    sp = params.source(source)
    kind = _engine_kind(sp.engine)
    try:
        if (
            kind == "mysql"
            and implementations(params).sources == "local"
            and _estimated_rows(params, source, table) <= _CX_MAX_ROWS
        ):
            whole = _mariadb_arrow(params, source, table)
            if whole is not None:
                slices = (whole.slice(i, batch_rows) for i in range(0, max(whole.num_rows, 1), batch_rows))
                yield SourceStream(whole.column_names, frozenset(), (t for t in slices if t.num_rows))
                return
        with connect(params, source) as conn:
            if kind == "postgres":
                conn.read_only = True
                with conn.cursor(name="workbook_check") as cur:
                    cur.itersize = batch_rows
                    cur.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(sp.namespace, table)))
                    desc = cur.description or []
                    names = [d.name for d in desc]
                    found = frozenset(d.name for d in desc if d.type_code in _POSTGRES_JSON_OIDS)
                    yield SourceStream(names, found, _batches(cur, names, found, batch_rows))
                conn.rollback()
                return
            with conn.cursor(pymysql.cursors.SSCursor) as cur:
                cur.execute(f"SELECT * FROM {quote_mariadb(table)}")  # noqa: S608 - quoted identifier
                names = [d[0] for d in cur.description or []]
                yield SourceStream(names, frozenset(), _batches(cur, names, frozenset(), batch_rows))
    except ReconcileError:
        raise
    except WorkbookError as exc:
        raise ReconcileError(f"Failed to read source {source}: {exc}") from None
    except (psycopg.Error, pymysql.Error) as exc:
        raise ReconcileError(f"Failed to read source table {source}.{table} ({sp.database}): {exc}") from None


def _batches(
    cursor: Any, names: list[str], json_columns: frozenset[str], batch_rows: int
) -> Iterator[pa.Table]:
    while rows := cursor.fetchmany(batch_rows):
        yield rows_to_arrow(names, rows, set(json_columns))


def _estimated_rows(params: WorkbookParams, source: str, table: str) -> int:
    """The server's estimate of a MariaDB table's rows (``information_schema.TABLES``)."""
    with connect(params, source, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (params.source(source).database, table),
        )
        row = cur.fetchone()
    return int(row[0] or 0) if row else 0


def _mariadb_arrow(
    params: WorkbookParams, source: str, table: str, *, key_from: tuple[str, int] | None = None
) -> pa.Table | None:
    """``table`` of the local MariaDB through connectorx, typed as the PyMySQL path types it
    (integers as int64, decimals at their declared precision and scale), only the rows of
    ``key_from`` (:func:`source_table`) when given; None when a column does not fit (the caller
    then takes the exact path). connectorx binds no parameters: the column is quoted and the
    bound is written as an ``int``, so no text reaches the statement as SQL."""
    database = params.source(source).database
    info = LocalStack(params).mariadb_conninfo(database)
    try:
        with connect(params, source, autocommit=True) as conn:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT COLUMN_NAME, DATA_TYPE, NUMERIC_PRECISION, NUMERIC_SCALE FROM "
                    "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                    "ORDER BY ORDINAL_POSITION",
                    (database, table),
                )
                declared = {str(r[0]): (str(r[1]).lower(), r[2], r[3]) for r in cur.fetchall()}
    except WorkbookError:
        return None
    for column, (kind, precision, scale) in declared.items():
        if kind not in _CX_TYPES or (
            kind in ("decimal", "numeric")
            and (int(precision or 0) > _CX_DECIMAL_PRECISION or int(scale or 0) > _CX_DECIMAL_SCALE)
        ):
            log.debug("%s.%s takes the PyMySQL path: column %s is %s", database, table, column, kind)
            return None
    password = str(info["password"])
    uri = (
        f"mysql://{urllib.parse.quote(str(info['user']), safe='')}:{urllib.parse.quote(password, safe='')}"
        f"@{info['host']}:{info['port']}/{urllib.parse.quote(database, safe='')}"
    )
    try:
        query = f"SELECT * FROM {quote_mariadb(table)}"  # noqa: S608 - quoted identifiers
        if key_from is not None:
            query += f" WHERE {quote_mariadb(key_from[0])} >= {int(key_from[1])}"
        rows: Any = connectorx.read_sql(uri, query, return_type="arrow")
        return _as_declared(rows, declared)
    except Exception as exc:  # noqa: BLE001 - any surprise: the exact (PyMySQL) path decides
        log.debug(
            "connectorx read of %s.%s fell back: %s", database, table, str(exc).replace(password, "***")
        )
        return None


def _as_declared(rows: pa.Table, declared: dict[str, tuple[str, Any, Any]]) -> pa.Table:
    if rows.column_names != list(declared):
        raise ValueError(f"columns {rows.column_names} are not the declared {list(declared)}")
    columns = []
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        kind, precision, scale = declared[name]
        if pa.types.is_integer(column.type) and not pa.types.is_int64(column.type):
            column = column.cast(pa.int64())
        elif kind in ("decimal", "numeric"):
            column = column.cast(pa.decimal128(max(int(precision), 1), int(scale)))
        columns.append(column)
    return pa.table(columns, names=rows.column_names)


def silver_rows(params: WorkbookParams, table: SilverTableParams) -> pa.Table | None:
    """Silver's live rows through the official Hudi reader (soft-deleted ones left out); None when
    the table does not exist yet."""
    base = table_config(params, table).base_path
    if not table_exists(base):
        return None
    rows = read_snapshot(base)
    if table.delete_mode == "soft" and "__deleted" in rows.column_names:
        flag = rows.column("__deleted")
        deleted = pc.equal(pc.cast(flag, pa.string()), "true")
        rows = rows.filter(pc.invert(pc.fill_null(deleted, False)))
    return rows


def silver_position(params: WorkbookParams, table: SilverTableParams, engine: str) -> SourcePosition | None:
    """The highest source position among Silver's rows (soft-deleted ones included)."""
    base = table_config(params, table).base_path
    if not table_exists(base):
        return None
    cols = ["__lsn"] if engine == "postgres" else ["__file", "__pos"]
    try:
        rows = read_snapshot(base, columns=cols)
    except WorkbookError:
        return None
    if not rows.num_rows:
        return None
    if engine == "postgres":
        top = pc.max(rows.column("__lsn")).as_py()
        return None if top is None else SourcePosition("postgres", lsn=int(top))
    best: tuple[int, int, str] | None = None
    for file, pos in zip(rows.column("__file").to_pylist(), rows.column("__pos").to_pylist(), strict=True):
        if file is None or pos is None:
            continue
        candidate = (binlog_index(str(file)), int(pos), str(file))
        if best is None or candidate > best:
            best = candidate
    return None if best is None else SourcePosition("mysql", file=best[2], pos=best[1])


def captured_position(params: WorkbookParams, source: str, engine: str) -> SourcePosition | None:
    """How far capture has durably got: the connector's stored offset (the embedded engine's
    file, or the Kafka Connect worker's committed offset) and, for PostgreSQL, its slot's
    confirmed position, whichever is further. On Kafka Connect an event is in Bronze only once the
    sink has also written its topic (:meth:`BronzeSink.written_to_end`)."""
    name = connector_name(params, source)
    if params.capture.backend == "kafka_connect":
        backend = open_backend(params)
        offset = backend.source_offset(name) if isinstance(backend, KafkaConnectRestBackend) else None
        best = offset_position(offset)
    else:
        best = stored_position(params, name)
    if engine == "postgres":
        try:
            with connect(params, source, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                    (slot_name(params, source),),
                ).fetchone()
        except WorkbookError:
            row = None
        if row and row[0]:
            slot = SourcePosition("postgres", lsn=parse_lsn(str(row[0])))
            if best is None or slot.reaches(best):
                best = slot
    return best


def sink_has_written(params: WorkbookParams, table: SilverTableParams) -> bool:
    """True, or on the local-kafka profile whether its Bronze sink has written every record the
    table's Kafka topic holds now."""
    return not local_worker(params) or BronzeSink(params).written_to_end(silver_topic(params, table))


def caught_up(
    params: WorkbookParams,
    silver_params: WorkbookParams,
    table: SilverTableParams,
    position: SourcePosition,
) -> tuple[bool, str]:
    """Whether Silver holds every change of the table up to ``position``, and why."""
    top = silver_position(silver_params, table, position.engine)
    if top is not None and top.reaches(position):
        return True, f"Silver holds changes up to {top}"
    captured = captured_position(params, table.source, position.engine)
    if not sink_has_written(params, table):  # before the listing: what it wrote is listed
        return False, "the Bronze sink has not written the table's Kafka topic to its end"
    pending, _state = pending_bronze(silver_params, table)
    if captured is not None and captured.reaches(position) and not pending:
        return True, f"capture stored {captured} and Silver has taken every Bronze file"
    if pending:
        return False, f"{len(pending)} Bronze file(s) not ingested yet"
    return False, f"capture has stored {captured or 'no position'} (source position {position})"
