"""Scripted changes to the local sources: the CDC edge cases, applied on purpose.

Each scenario of ``docs/cdc-edge-cases.md`` that a source can produce is a function here, run by
:func:`apply_scenario` (``./workbook changes list|run NAME``) and returning a :class:`ScenarioResult`.
One row at a time: :func:`source_rows`, :func:`update_source_row`, :func:`delete_source_row`,
:func:`insert_source_row`, :func:`restore_sample_row`. The rules every scenario follows:
``docs/architecture.md``, "Sources".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc
import pymysql
from psycopg import sql
from psycopg.rows import dict_row

from helpers.engines import quote_mariadb
from helpers.errors import ParamsError, SourceError
from helpers.local.stack import LocalStack
from helpers.params import WorkbookParams
from helpers.sources.connect import connect
from helpers.sources.sample.tickit import generate_tickit

__all__ = [
    "SCENARIOS",
    "ScenarioResult",
    "apply_scenario",
    "delete_source_row",
    "insert_source_row",
    "restore_sample_row",
    "source_rows",
    "update_source_row",
]

log = logging.getLogger(__name__)


@dataclass
class ScenarioResult:
    """What a scenario did.

    Attributes:
        scenario: its name.
        topic: the topic its changes appear on.
        keys: primary-key values touched (as the key column's values).
        statements: the statements run, in commit order (values bound, shown as text).
        note: what Silver must do with it.
    """

    scenario: str
    topic: str
    keys: list[Any] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)
    note: str = ""


def _pg(
    stack: LocalStack,
    params: WorkbookParams,
    result: ScenarioResult,
    steps: Sequence[tuple[str, tuple[Any, ...]]],
) -> None:
    """Run each step in its own transaction (one commit each) on the ems database."""
    db = params.source("ems").database
    with stack.connect_postgres(db, autocommit=True) as conn:
        for statement, args in steps:
            conn.execute(statement, args)
            result.statements.append(f"{statement} -- {args}")


def _pg_tx(
    stack: LocalStack,
    params: WorkbookParams,
    result: ScenarioResult,
    steps: Sequence[tuple[str, tuple[Any, ...]]],
) -> None:
    """Run all steps in one transaction on the ems database."""
    db = params.source("ems").database
    with stack.connect_postgres(db) as conn:
        with conn.transaction():
            for statement, args in steps:
                conn.execute(statement, args)
                result.statements.append(f"{statement} -- {args} (one transaction)")


def _maria(
    stack: LocalStack,
    params: WorkbookParams,
    result: ScenarioResult,
    steps: Sequence[tuple[str, tuple[Any, ...]]],
) -> None:
    conn = stack.connect_mariadb(params.source("ecomm").database, autocommit=True)
    try:
        with conn.cursor() as cur:
            for statement, args in steps:
                cur.execute(statement, args)
                result.statements.append(f"{statement} -- {args}")
    finally:
        conn.close()


def _next_id(stack: LocalStack, params: WorkbookParams, table: str, column: str) -> int:
    with stack.connect_postgres(params.source("ems").database) as conn:
        row = conn.execute(f"SELECT coalesce(max({column}), 0) + 1 FROM ems.{table}").fetchone()  # noqa: S608 - fixed names
    return int(row[0]) if row else 1


def delete_rows(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 1: hard deletes (two categories): Silver drops them, or flags them in soft mode."""
    r = ScenarioResult(
        "delete_rows", f"{params.project}.ems.category", note="rows disappear (or __deleted=true)"
    )
    new = _next_id(stack, params, "category", "catid")
    ids = [new, new + 1]
    _pg(
        stack,
        params,
        r,
        [("INSERT INTO ems.category VALUES (%s, 'Scripted', %s, 'to delete')", (i, f"del{i}")) for i in ids],
    )
    _pg(stack, params, r, [("DELETE FROM ems.category WHERE catid = %s", (i,)) for i in ids])
    r.keys = ids
    return r


def delete_reinsert(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 2: delete then re-insert of one key, once in separate commits and once inside one
    transaction: the re-inserted row must be in Silver."""
    r = ScenarioResult(
        "delete_reinsert", f"{params.project}.ems.category", note="final row = re-inserted values"
    )
    k = _next_id(stack, params, "category", "catid")
    _pg(stack, params, r, [("INSERT INTO ems.category VALUES (%s, 'Scripted', 'first', 'v1')", (k,))])
    _pg(
        stack,
        params,
        r,
        [
            ("DELETE FROM ems.category WHERE catid = %s", (k,)),
            ("INSERT INTO ems.category VALUES (%s, 'Scripted', 'second', 'v2')", (k,)),
        ],
    )
    _pg_tx(
        stack,
        params,
        r,
        [
            ("DELETE FROM ems.category WHERE catid = %s", (k,)),
            ("INSERT INTO ems.category VALUES (%s, 'Scripted', 'third', 'v3')", (k,)),
        ],
    )
    r.keys = [k]
    return r


def rapid_updates(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 3: five updates of one MariaDB row within one second (``source.ts_ms`` has
    1-second resolution there): only the binlog position orders them; the last one wins."""
    r = ScenarioResult(
        "rapid_updates", f"{params.project}.ecomm.sale", note="final qtysold = 5 (binlog order, not time)"
    )
    conn = stack.connect_mariadb(params.source("ecomm").database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT min(salesid) FROM sale")
            row = cur.fetchone()
    finally:
        conn.close()
    if not row or row[0] is None:
        raise SourceError("Failed to run scenario rapid_updates: ecomm.sale is empty (run notebook 01)")
    key = int(row[0])
    _maria(
        stack,
        params,
        r,
        [("UPDATE sale SET qtysold = %s WHERE salesid = %s", (q, key)) for q in (1, 2, 3, 4, 5)],
    )
    r.keys = [key]
    return r


def partition_move(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 5: a sale moves to another date (``dateid``, a partition field of Silver's sale
    table): the old partition must no longer hold it."""
    r = ScenarioResult(
        "partition_move", f"{params.project}.ecomm.sale", note="one row, in the new partition only"
    )
    conn = stack.connect_mariadb(params.source("ecomm").database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT salesid, dateid FROM sale ORDER BY salesid DESC LIMIT 1")
            row = cur.fetchone()
            cur.execute("SELECT max(dateid) FROM `date`")
            top = cur.fetchone()
    finally:
        conn.close()
    if not row or not top:
        raise SourceError("Failed to run scenario partition_move: ecomm.sale or ecomm.date is empty")
    key, dateid = int(row[0]), int(row[1])
    target = int(top[0]) if int(top[0]) != dateid else dateid - 1
    _maria(stack, params, r, [("UPDATE sale SET dateid = %s WHERE salesid = %s", (target, key))])
    r.keys = [key]
    return r


def add_column(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 6: a column added while capture runs; older rows have null in it."""
    r = ScenarioResult("add_column", f"{params.project}.ems.venue", note="new column, null for older rows")
    k = _next_id(stack, params, "venue", "venueid")
    _pg(
        stack,
        params,
        r,
        [
            ("ALTER TABLE ems.venue ADD COLUMN IF NOT EXISTS venueurl varchar(200)", ()),
            (
                "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats, venueurl)"
                " VALUES (%s, 'Scripted Hall', 'Nowhere', 'NA', 100, 'https://example.com')",
                (k,),
            ),
        ],
    )
    r.keys = [k]
    return r


def toast_unchanged(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 7: PostgreSQL TOAST. A 20 kB text value, then an update of another column: the
    event may carry ``__debezium_unavailable_value`` for the untouched large column, which must
    not overwrite the stored value."""
    r = ScenarioResult(
        "toast_unchanged", f"{params.project}.ems.event", note="eventname keeps its large value"
    )
    k = _next_id(stack, params, "event", "eventid")
    big = "x" * 20_000
    _pg(
        stack,
        params,
        r,
        [
            ("ALTER TABLE ems.event ALTER COLUMN eventname TYPE text", ()),
            (
                "INSERT INTO ems.event (eventid, venueid, catid, dateid, eventname, starttime)"
                " SELECT %s, venueid, catid, dateid, %s, starttime FROM ems.event ORDER BY eventid LIMIT 1",
                (k, big),
            ),
            ("UPDATE ems.event SET starttime = starttime + interval '1 hour' WHERE eventid = %s", (k,)),
        ],
    )
    r.keys = [k]
    return r


def toast_default_identity(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 7 without full row images: under ``REPLICA IDENTITY DEFAULT`` two updates of
    another column carry ``__debezium_unavailable_value`` for the untouched 12.8 kB ``eventname``
    (stored out of line); Silver must keep the value. The identity is set back to FULL after."""
    r = ScenarioResult(
        "toast_default_identity",
        f"{params.project}.ems.event",
        note="placeholders replaced by the stored value",
    )
    k = _next_id(stack, params, "event", "eventid")
    _pg(
        stack,
        params,
        r,
        [
            ("ALTER TABLE ems.event ALTER COLUMN eventname TYPE text", ()),
            ("ALTER TABLE ems.event ALTER COLUMN eventname SET STORAGE EXTERNAL", ()),
            ("ALTER TABLE ems.event REPLICA IDENTITY DEFAULT", ()),
            (
                "INSERT INTO ems.event (eventid, venueid, catid, dateid, eventname, starttime)"
                " SELECT %s, venueid, catid, dateid,"
                " (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) AS g),"
                " starttime FROM ems.event ORDER BY eventid LIMIT 1",
                (k,),
            ),
            ("UPDATE ems.event SET starttime = starttime + interval '1 hour' WHERE eventid = %s", (k,)),
            ("UPDATE ems.event SET starttime = starttime + interval '1 hour' WHERE eventid = %s", (k,)),
            ("ALTER TABLE ems.event REPLICA IDENTITY FULL", ()),
        ],
    )
    r.keys = [k]
    return r


def exact_values(stack: LocalStack, params: WorkbookParams) -> ScenarioResult:
    """Edge case 8: decimal and timestamp fidelity (largest and smallest cents, microseconds)."""
    r = ScenarioResult(
        "exact_values", f"{params.project}.ecomm.sale", note="values equal to the cent and microsecond"
    )
    conn = stack.connect_mariadb(params.source("ecomm").database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT max(salesid) FROM sale")
            row = cur.fetchone()
    finally:
        conn.close()
    key = int(row[0]) if row and row[0] is not None else 1
    _maria(
        stack,
        params,
        r,
        [
            (
                "UPDATE sale SET pricepaid = %s, commission = %s, saletime = %s WHERE salesid = %s",
                ("999999.99", "0.01", "2008-12-31 23:59:59", key),
            )
        ],
    )
    r.keys = [key]
    return r


def burst(stack: LocalStack, params: WorkbookParams, n: int = 200) -> ScenarioResult:
    """Edge case 4 / 11 helper: ``n`` single-row commits (inserts then updates) as fast as possible,
    e.g. while a worker is killed or a snapshot runs."""
    r = ScenarioResult(
        "burst", f"{params.project}.ems.category", note="every commit arrives (redeliveries allowed)"
    )
    start = _next_id(stack, params, "category", "catid")
    ids = list(range(start, start + n // 2))
    _pg(
        stack,
        params,
        r,
        [("INSERT INTO ems.category VALUES (%s, 'Burst', %s, 'b')", (i, f"b{i}")) for i in ids],
    )
    _pg(stack, params, r, [("UPDATE ems.category SET catdesc = 'b2' WHERE catid = %s", (i,)) for i in ids])
    r.keys = ids
    return r


SCENARIOS: dict[str, Callable[[LocalStack, WorkbookParams], ScenarioResult]] = {
    "delete_rows": delete_rows,
    "delete_reinsert": delete_reinsert,
    "rapid_updates": rapid_updates,
    "partition_move": partition_move,
    "add_column": add_column,
    "toast_unchanged": toast_unchanged,
    "toast_default_identity": toast_default_identity,
    "exact_values": exact_values,
    "burst": burst,
}


def apply_scenario(params: WorkbookParams, name: str) -> ScenarioResult:
    """Apply one scenario to the local sources.

    Raises:
        ParamsError: for an unknown scenario (the known ones are listed).
        SourceError: when the sources are not ready for it.
    """
    if name not in SCENARIOS:
        raise ParamsError(f"Failed to find scenario {name!r}: known scenarios are {sorted(SCENARIOS)}")
    if params.environment != "local":
        raise ParamsError(f"Failed to run scenario {name}: scripted changes run on the local sources only")
    started = time.monotonic()
    result = SCENARIOS[name](LocalStack(params), params)
    log.info("scenario %s: %d statements in %.2f s", name, len(result.statements), time.monotonic() - started)
    return result


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

    Notebook 04 deletes its sample sale at the end; a re-run first restores it (an insert,
    captured like any other change).

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
