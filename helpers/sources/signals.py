"""Debezium's signal table on a source: how the workbook asks a running connector for an
incremental snapshot of one table (``execute-snapshot``, the source signalling channel), and the
source's current log position, which bounds what that snapshot re-reads. Also PostgreSQL's
heartbeat table, which every connector heartbeat updates (:func:`heartbeat_query`): a change in
the publication that Debezium processes, and confirms its replication slot with, while the
captured tables are quiet.

The table (``debezium_signal``, in the captured schema or database) has the three columns
Debezium's signalling channel reads; the connectors name it in ``signal.data.collection``
(:mod:`helpers.capture.connectors`). Debezium also writes its snapshot watermarks into it, so the
capture login can insert into it. Each function takes an open DB-API connection to the source's
database (:func:`helpers.sources.connect.connect`, or the local stack's). What a re-snapshot does
end to end: ``docs/operations.md``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from psycopg import sql

from helpers.engines import engine_kind, quote_mariadb
from helpers.errors import SourceError

__all__ = [
    "HEARTBEAT_COLUMNS",
    "SIGNAL_TABLE",
    "create_heartbeat_table",
    "create_signal_table",
    "heartbeat_query",
    "current_position",
    "request_snapshot",
    "send_signal",
    "signal_collection",
]

SIGNAL_TABLE = "debezium_signal"
#: The heartbeat table's columns (:func:`create_heartbeat_table`), which preflight checks for.
HEARTBEAT_COLUMNS = ("id", "beat")
#: The columns Debezium's signalling channel reads, in its order.
_COLUMNS = "(id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))"


def _mariadb_name(namespace: str) -> str:
    return f"{quote_mariadb(namespace)}.{quote_mariadb(SIGNAL_TABLE)}"


def signal_collection(namespace: str) -> str:
    """The signal table as ``signal.data.collection`` names it: ``<schema or database>.debezium_signal``."""
    return f"{namespace}.{SIGNAL_TABLE}"


def create_signal_table(conn: Any, engine: str, namespace: str) -> None:
    """Create the signal table in ``namespace`` (the schema, or the MariaDB/MySQL database) when it
    is missing (idempotent; ``conn`` in autocommit mode).

    Raises:
        SourceError: when it cannot be created (the database's message).
    """
    try:
        if engine_kind(engine) == "postgres":
            name = sql.Identifier(namespace, SIGNAL_TABLE)
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} " + _COLUMNS).format(name))
        else:
            with conn.cursor() as cur:
                cur.execute(f"CREATE TABLE IF NOT EXISTS {_mariadb_name(namespace)} {_COLUMNS}")
    except Exception as exc:  # noqa: BLE001 - the driver's message names the cause
        raise SourceError(f"Failed to create the signal table {signal_collection(namespace)}: {exc}") from exc


def heartbeat_query(schema: str, table: str) -> str:
    """Debezium's ``heartbeat.action.query`` for PostgreSQL: one row of ``schema.table`` upserted
    with the time. The table is in the schema's publication (``FOR TABLES IN SCHEMA``) but not in
    the connector's ``table.include.list``: Debezium receives the change, writes nothing to Bronze,
    and its next heartbeat carries the change's position, which it confirms to the slot. Without
    it a slot whose tables are quiet holds the WAL the rest of the server writes
    (``docs/architecture.md``, "Retention monitor")."""
    return (
        sql.SQL(
            "INSERT INTO {} (id, beat) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET beat = EXCLUDED.beat"
        )
        .format(sql.Identifier(schema, table))
        .as_string(None)
    )


def create_heartbeat_table(conn: Any, schema: str, table: str, login: str) -> None:
    """Create the heartbeat table in ``schema`` when it is missing and let ``login`` (the
    connectors' login) write it (idempotent; ``conn`` in autocommit mode, as the table's owner or
    an administrator).

    Raises:
        SourceError: when it cannot be created (the database's message).
    """
    name = sql.Identifier(schema, table)
    try:
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (id int PRIMARY KEY, beat timestamptz NOT NULL)").format(
                name
            )
        )
        conn.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(name, sql.Identifier(login)))
    except Exception as exc:  # noqa: BLE001 - the driver's message names the cause
        raise SourceError(f"Failed to create the heartbeat table {schema}.{table}: {exc}") from exc


def current_position(conn: Any, engine: str) -> dict[str, Any]:
    """The source's log position now, as the position fields of its change events (PostgreSQL
    ``{"__lsn": int}``; MariaDB/MySQL ``{"__file", "__pos", "__row": 0}``): every change
    committed after this call, and every row an incremental snapshot requested after it reads,
    carries a later position.

    Raises:
        SourceError: when the position cannot be read.
    """
    try:
        if engine_kind(engine) == "postgres":
            row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            high, low = str(row[0]).split("/")
            return {"__lsn": (int(high, 16) << 32) + int(low, 16)}
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            status = cur.fetchone()
    except Exception as exc:  # noqa: BLE001 - the driver's message names the cause
        raise SourceError(f"Failed to read the source's log position: {exc}") from exc
    if not status:
        raise SourceError("Failed to read the source's log position: binary logging is off")
    return {"__file": str(status[0]), "__pos": int(status[1]), "__row": 0}


def request_snapshot(conn: Any, engine: str, namespace: str, table: str) -> str:
    """Insert an ``execute-snapshot`` signal for an incremental snapshot of ``namespace.table``
    (``conn`` in autocommit mode); the signal's id.

    Raises:
        SourceError: when the signal cannot be written.
    """
    data = {"data-collections": [f"{namespace}.{table}"], "type": "incremental"}
    return send_signal(
        conn, engine, namespace, "execute-snapshot", data, f"the snapshot of {namespace}.{table}"
    )


def send_signal(conn: Any, engine: str, namespace: str, kind: str, data: dict[str, Any], what: str) -> str:
    """Insert a signal of type ``kind`` (``execute-snapshot``, or ``log``: the connector only logs
    ``data["message"]``) into the signal table (``conn`` in autocommit mode); the signal's id. Any
    signal is also a change the connector reads in log order: once its offset passes it, it has
    read everything committed before.

    Raises:
        SourceError: when the signal cannot be written (``what`` says what it was for).
    """
    signal_id = f"wb-{kind}-{uuid.uuid4()}"
    try:
        if engine_kind(engine) == "postgres":
            conn.execute(
                sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, %s, %s)").format(
                    sql.Identifier(namespace, SIGNAL_TABLE)
                ),
                (signal_id, kind, json.dumps(data)),
            )
        else:
            with conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO {_mariadb_name(namespace)} (id, type, data)"  # noqa: S608 - quoted names
                    " VALUES (%s, %s, %s)",
                    (signal_id, kind, json.dumps(data)),
                )
    except Exception as exc:  # noqa: BLE001 - the driver's message names the cause
        raise SourceError(
            f"Failed to send the {kind} signal for {what} to {signal_collection(namespace)}: {exc}"
        ) from exc
    return signal_id
