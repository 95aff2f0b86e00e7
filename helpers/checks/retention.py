"""Retention monitor: can each connector still resume from where it stopped?

:func:`retention_status` grades, per connector, the WAL its PostgreSQL slot holds back and whether
the MariaDB binlog file it stopped in is still there (``PURGED``: it cannot resume without losing
changes). Details: ``docs/architecture.md`` (Checks).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from helpers.capture.offsets import offsets_file, stored_position
from helpers.errors import RetentionError, WorkbookError
from helpers.naming import connector_name, slot_name, source_of_connector
from helpers.params import WorkbookParams
from helpers.sources.connect import connect

__all__ = [
    "STATUSES",
    "retention_status",
]

STATUSES = ("OK", "WARN", "FAIL", "PURGED")
"""Retention states, from good to lost."""

MIB = 1 << 20


def _grade(lag: int | None, warn_bytes: int, fail_bytes: int) -> str:
    if lag is None:
        return "OK"
    if lag >= fail_bytes:
        return "FAIL"
    if lag >= warn_bytes:
        return "WARN"
    return "OK"


def _mib(n: int) -> str:
    return f"{n / MIB:,.1f} MiB"


def _postgres_row(
    params: WorkbookParams, source: str, database: str, warn_bytes: int, fail_bytes: int
) -> dict[str, Any]:

    slot = slot_name(params, source)
    with connect(params, source, autocommit=True) as conn:
        row = conn.execute(
            "SELECT active, wal_status, confirmed_flush_lsn::text, restart_lsn::text, safe_wal_size,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, database"
            " FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
    base: dict[str, Any] = {"slot_or_file": slot}
    if row is None:
        return {
            **base,
            "status": "WARN",
            "message": f"no replication slot {slot}: the connector has not started yet (nothing is retained)",
        }
    active, wal_status, confirmed, restart, safe, lag, held, slot_db = row
    lag = None if lag is None else int(lag)
    out = {
        **base,
        "stored_position": confirmed,
        "lag_bytes": lag,
        "retained_bytes": None if held is None else int(held),
        "active": bool(active),
        "wal_status": wal_status,
        "safe_wal_size": None if safe is None else int(safe),
    }
    if wal_status == "lost":
        return {
            **out,
            "status": "PURGED",
            "message": f"slot {slot} lost the WAL it needs (wal_status 'lost', restart_lsn {restart}): "
            "the connector cannot resume without losing changes; re-register it with a new snapshot",
        }
    status = _grade(lag, warn_bytes, fail_bytes)
    if wal_status == "unreserved" and status == "OK":
        status = "WARN"
    state = "active" if active else "inactive (capture worker not connected)"
    message = f"slot {slot} on {slot_db} {state}, wal_status {wal_status}, {_mib(lag or 0)} behind"
    if safe is not None:
        message += f", {_mib(int(safe))} until the slot is invalidated"
    return {**out, "status": status, "message": message}


def _mariadb_row(
    params: WorkbookParams, connector: str, database: str, warn_bytes: int, fail_bytes: int
) -> dict[str, Any]:

    with connect(params, source_of_connector(connector)) as conn, conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        logs = [(str(r[0]), int(r[1])) for r in cur.fetchall()]
    position = stored_position(params, connector)
    offsets = offsets_file(params, connector)
    first = logs[0][0] if logs else None
    if position is None:
        return {
            "slot_or_file": None,
            "binlog_file_present": None,
            "status": "WARN",
            "message": f"no stored binlog position in {offsets} yet (connector not started or not flushed); "
            f"oldest binlog on the server: {first}",
        }
    names = [name for name, _size in logs]
    base: dict[str, Any] = {
        "slot_or_file": position.file,
        "stored_position": str(position),
    }
    if position.file not in names:
        return {
            **base,
            "binlog_file_present": False,
            "status": "PURGED",
            "message": f"binlog file {position.file} of the stored position {position} is no longer on the "
            f"server (oldest now {first}): the connector cannot resume without losing changes; "
            "re-register it with a new snapshot",
        }
    at = names.index(position.file)
    lag = max(0, logs[at][1] - int(position.pos or 0)) + sum(size for _name, size in logs[at + 1 :])
    status = _grade(lag, warn_bytes, fail_bytes)
    return {
        **base,
        "binlog_file_present": True,
        "lag_bytes": lag,
        "status": status,
        "message": f"stored position {position}; {_mib(lag)} of binlog after it in {len(logs) - at} file(s); "
        f"oldest binlog {first}",
    }


def retention_status(
    params: WorkbookParams,
    *,
    warn_bytes: int = 256 * MIB,
    fail_bytes: int = 1024 * MIB,
    raise_on_purged: bool = False,
) -> pd.DataFrame:
    """Per connector of the local sources: how much log is retained for it, and whether its
    stored position is still available (see the module docstring).

    Args:
        params: workbook parameters (local stack, sources, state directory).
        warn_bytes: lag (WAL held by the slot / binlog after the stored position) shown as ``WARN``.
        fail_bytes: lag shown as ``FAIL``.
        raise_on_purged: raise instead of returning when a connector's position is gone.

    Returns:
        One row per connector: ``connector``, ``source``, ``engine``, ``slot_or_file``,
        ``stored_position``, ``lag_bytes``, ``retained_bytes`` / ``active`` / ``wal_status`` /
        ``safe_wal_size`` (PostgreSQL), ``binlog_file_present`` (MySQL/MariaDB), ``warn_bytes``,
        ``fail_bytes``, ``status`` (``OK``, ``WARN``, ``FAIL``, ``PURGED``) and ``message``.

    Raises:
        RetentionError: with ``raise_on_purged``, naming each connector whose position is gone;
            and when a source cannot be queried.
    """
    if warn_bytes <= 0 or fail_bytes < warn_bytes:
        raise RetentionError(
            "Failed to check retention: thresholds need 0 < warn_bytes <= fail_bytes "
            f"(got {warn_bytes}, {fail_bytes})"
        )
    columns = [
        "connector",
        "source",
        "engine",
        "slot_or_file",
        "stored_position",
        "lag_bytes",
        "retained_bytes",
        "active",
        "wal_status",
        "safe_wal_size",
        "binlog_file_present",
        "warn_bytes",
        "fail_bytes",
        "status",
        "message",
    ]
    rows = []
    for source, sp in params.sources.items():
        connector = connector_name(params, source)
        try:
            if sp.engine == "postgres":
                row = _postgres_row(params, source, sp.database, warn_bytes, fail_bytes)
            elif sp.engine in ("mariadb", "mysql"):
                row = _mariadb_row(params, connector, sp.database, warn_bytes, fail_bytes)
            else:
                row = {"status": "WARN", "message": f"engine {sp.engine} is not monitored locally"}
        except RetentionError:
            raise
        except WorkbookError as exc:
            raise RetentionError(f"Failed to check retention of {connector}: {exc}") from None
        rows.append(
            {
                "connector": connector,
                "source": source,
                "engine": sp.engine,
                "warn_bytes": warn_bytes,
                "fail_bytes": fail_bytes,
                **row,
            }
        )
    frame = pd.DataFrame(rows).reindex(columns=columns)
    if raise_on_purged:
        purged = frame[frame["status"] == "PURGED"]
        if len(purged):
            raise RetentionError(
                "Failed to resume capture: "
                + "; ".join(f"{r.connector}: {r.message}" for r in purged.itertuples())
            )
    return frame
