"""Is Silver still the source? A cheap per-table check at a known source position, and the record of
the last check of each table, which ``./workbook status`` shows.

:func:`check_divergence` compares row counts, without reading a row of either side into Python:

1. per source system, one consistent snapshot gives every table's ``count(*)`` and the log
   position ``P`` of that snapshot (:func:`helpers.checks.at_position.source_counts`);
2. it waits (bounded) until Silver holds every change of the table up to ``P``: the newest
   position Silver has taken reaches ``P``, or capture's stored offset does and every Bronze file
   is taken;
3. it reads Silver's newest instant and the source position recorded with it (each ingestion
   commit records the newest log position it took, ``workbook.source.position``). If that
   position is before ``P``, Silver at that instant is the table at ``P`` exactly, and its live
   rows are counted there, one file slice at a time (the official reader; soft-deleted rows are
   not source rows). If Silver has already taken a change after ``P`` the table is moving and is
   checked again from step 1.

A table whose counts differ is checked once more from step 1 and called ``DIFFERS`` only if it
differs again; the record names the command that repairs it (``./workbook resnapshot TABLE``,
``docs/operations.md``). A count cannot see a row whose content differs: notebook 07's
reconciliation (:mod:`helpers.checks.reconcile`) compares every row by digest and records its
result here too, so the status shows the newest check of either kind with its time.

The record lives in ``<state_dir>/checks/divergence.json``, one entry per Silver table, replaced
atomically.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from helpers.checks.at_position import captured_position, sink_has_written, source_counts
from helpers.errors import ReconcileError, WaitTimeoutError, WorkbookError
from helpers.hudi.read import (
    AS_OF_INSTANT,
    QUERY_TYPE,
    parse_read_options,
    plan_file_slices,
    read_file_slices,
)
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.silver.prepare import sortable_position
from helpers.silver.state import TableState, read_table_state
from helpers.silver.tables import pending_bronze, table_config
from helpers.sources.connect import connect
from helpers.sources.positions import SourcePosition
from helpers.sources.signals import send_signal

__all__ = [
    "BEHIND",
    "COLUMNS",
    "DIFFERS",
    "EQUAL",
    "MOVING",
    "NOT_WRITTEN",
    "check_divergence",
    "last_checks",
    "mark_once",
    "record_checks",
    "repair_command",
    "require_whole",
    "selected_tables",
    "took_after",
]

EQUAL = "equal"
DIFFERS = "DIFFERS"
BEHIND = "behind"  # Silver has not reached the source position yet: not judged
MOVING = "moving"  # Silver took changes after the source position while it was checked: not judged
NOT_WRITTEN = "not written"  # no Silver table yet

#: The columns of :func:`check_divergence`, :func:`last_checks` and of the status's table.
COLUMNS = [
    "table", "result", "source_rows", "silver_rows", "source_position", "instant", "checked_at",
    "checked_by", "fix", "note",
]  # fmt: skip


def repair_command(table: str) -> str:
    """The command that brings ``table`` back to equal with its source (``docs/operations.md``;
    run with the ``--env`` and ``--set`` flags of the status that named it)."""
    return f"./workbook resnapshot {table}"


def check_divergence(
    params: WorkbookParams,
    names: Sequence[str] | None = None,
    *,
    wait_s: float = 15.0,
    poll_s: float = 0.5,
    record: bool = True,
) -> pd.DataFrame:
    """Check each Silver table's live row count against its source table at a known position
    (the module's docstring says how), and record the results.

    Args:
        params: workbook parameters (local stack).
        names: Silver table names (default: every table).
        wait_s: longest wait, per source, for Silver to reach the source position (0: judge
            what is there; a table not there yet is ``behind``).
        poll_s: interval between looks while waiting.
        record: store the results for ``./workbook status`` (:func:`last_checks`).

    Returns:
        One row per table with :data:`COLUMNS`: ``result`` is ``equal``, ``DIFFERS`` (with
        ``fix``, the command that repairs it), ``behind``, ``moving`` or ``not written``.

    Raises:
        ReconcileError: for a name that is not a Silver table, or a source that cannot be read.
    """
    tables = selected_tables(params, names)
    results = {r["table"]: r for r in _check_once(params, tables, wait_s, poll_s)}
    again = [t for t in tables if results[t.name]["result"] in (DIFFERS, MOVING)]
    if again:  # a difference must hold at a second position, and a moving table gets a second look
        for second in _check_once(params, again, wait_s, poll_s):
            first = results[second["table"]]
            if first["result"] == DIFFERS and second["result"] == DIFFERS:
                second["note"] = (
                    f"{second['note']}; also at {first['source_position']}: "
                    f"{first['source_rows']} source rows, {first['silver_rows']} in Silver"
                )
            elif second["result"] == DIFFERS:  # differs once, moving the other time: not judged
                second.update(result=MOVING, fix="", note=f"{second['note']} (not seen twice)")
            results[second["table"]] = second
    frame = pd.DataFrame([results[t.name] for t in tables], columns=COLUMNS)
    if record:
        record_checks(params, frame)
    return frame


def selected_tables(
    params: WorkbookParams, names: Sequence[str] | None, what: str = "check Silver"
) -> list[SilverTableParams]:
    """The Silver tables named (default: all), in the order of ``silver.tables``.

    Raises:
        ReconcileError: ``Failed to <what>``, naming the unknown and the configured tables, or a
            sliced table (:func:`require_whole`).
    """
    tables = list(params.silver.tables)
    if names is not None:
        unknown = sorted(set(names) - {t.name for t in tables})
        if unknown:
            raise ReconcileError(
                f"Failed to {what}: no Silver table named {unknown} "
                f"(configured: {', '.join(t.name for t in tables)})"
            )
        tables = [t for t in tables if t.name in names]
    for table in tables:
        require_whole(table, what)
    return tables


def require_whole(table: SilverTableParams, what: str) -> None:
    """The whole-table checks (this module's, :mod:`helpers.checks.reconcile` and
    :func:`helpers.checks.parity.silver_vs_source`) compare a Silver table with its whole source table.

    Raises:
        ReconcileError: for a sliced table (``min_key``), which holds only part of its source: the
            conformance harness checks slices against the same slice of the source.
    """
    if table.min_key is not None:
        raise ReconcileError(
            f"Failed to {what}: Silver table {table.name} is a slice of {table.source}.{table.table} "
            f"(keys from {table.min_key}, min_key) and these checks compare whole tables; "
            "remove min_key from the table to check it here"
        )


def _check_once(
    params: WorkbookParams, tables: Sequence[SilverTableParams], wait_s: float, poll_s: float
) -> list[dict[str, Any]]:
    by_source: dict[str, list[SilverTableParams]] = {}
    for table in tables:
        by_source.setdefault(table.source, []).append(table)
    out = []
    for source, group in by_source.items():
        position, counts = source_counts(params, source, sorted({t.table for t in group}))
        deadline = time.monotonic() + wait_s
        mark = mark_once(params, source)
        for table in group:
            out.append(_check_table(params, table, position, counts[table.table], deadline, poll_s, mark))
    return out


def mark_once(params: WorkbookParams, source: str) -> Callable[[], str]:
    """:func:`_mark` for ``source``, written at the first call only (once per source system and
    check, after its snapshot); every call returns that call's text."""
    return functools.cache(functools.partial(_mark, params, source))


def _mark(params: WorkbookParams, source: str) -> str:
    """Write a Debezium ``log`` signal into the source's signal table, after the counted snapshot:
    a change the connector reads like any other, so its stored offset passes the snapshot's
    position even when the counted tables have no new change, without waiting for the next
    heartbeat (an idle PostgreSQL connector's offset otherwise passes the server's WAL position,
    moved by other databases, only at its next heartbeat's write to ``capture.heartbeat_table``, or
    never when that is off; an idle MariaDB connector's stored binlog offset stays behind a position
    read after its last change). Both
    the count check and :func:`helpers.checks.reconcile.reconcile` write it before they wait
    (:func:`mark_once`). The empty text, or why no mark was written."""
    sp = params.source(source)
    try:
        with connect(params, source, autocommit=True) as conn:
            send_signal(conn, sp.engine, sp.namespace, "log", {"message": "workbook check"}, "a check")
    except WorkbookError as exc:
        return f"no position mark: {exc}"
    return ""


def _check_table(
    params: WorkbookParams,
    table: SilverTableParams,
    position: SourcePosition,
    source_rows: int,
    deadline: float,
    poll_s: float,
    mark: Callable[[], str],
) -> dict[str, Any]:
    base = table_config(params, table).base_path
    row: dict[str, Any] = {
        "table": table.name,
        "source_rows": source_rows,
        "silver_rows": None,
        "source_position": str(position),
        "instant": None,
        "checked_at": time.time(),
        "checked_by": "count",
        "fix": "",
    }
    last: list[Any] = [None, ""]

    def reached() -> bool:
        state = last[0] = read_table_state(base)
        done, last[1] = _reached(params, table, state, position)
        return done

    done = reached()
    if not done and time.monotonic() < deadline:
        if unmarked := mark():
            last[1] = unmarked
        try:
            done = wait_until(
                reached,
                timeout_s=deadline - time.monotonic(),
                what=f"Silver table {table.name} to reach {position}",
                interval_s=poll_s,
                max_interval_s=poll_s,
            )
        except WaitTimeoutError:
            done = False
    state: TableState = last[0]
    if state.is_new:
        return {**row, "result": NOT_WRITTEN, "note": "no Silver commit yet"}
    if not done:
        return {**row, "result": BEHIND, "note": last[1]}
    instant = state.instants[-1].timestamp
    row["instant"] = instant
    if took_after(state.position, position):
        return {**row, "result": MOVING, "note": f"Silver took changes after {position} while checked"}
    row["silver_rows"] = silver_count(base, instant, soft=table.delete_mode == "soft")
    if row["silver_rows"] == source_rows:
        return {**row, "result": EQUAL, "note": last[1]}
    how = "more" if row["silver_rows"] > source_rows else "fewer"
    return {
        **row,
        "result": DIFFERS,
        "fix": repair_command(table.name),
        "note": f"Silver has {abs(row['silver_rows'] - source_rows)} {how} rows than the source"
        f" at {position}",
    }


def took_after(taken: str | None, position: SourcePosition) -> bool:
    """Whether Silver's newest position taken is a change after ``position`` (MySQL/MariaDB: a
    snapshot read carries the snapshot's own binlog position, so events at exactly ``pos`` count
    as before it)."""
    if taken is None:
        return False
    if position.engine == "postgres":
        return taken >= sortable_position(position)
    return taken > sortable_position(position) + ".9999999999"


def _reached(
    params: WorkbookParams, table: SilverTableParams, state: TableState, position: SourcePosition
) -> tuple[bool, str]:
    """Whether Silver (as ``state`` leaves it) holds every change of the table up to ``position``."""
    if state.position is not None and state.position >= sortable_position(position):
        return True, "Silver has taken a change at or after the position"
    captured = captured_position(params, table.source, position.engine)
    if not sink_has_written(params, table):  # before the listing: what it wrote is listed
        return False, "the Bronze sink has not written the table's Kafka topic to its end"
    pending, _ = pending_bronze(params, table, state=state)
    if pending:
        return False, f"{len(pending)} Bronze file(s) not ingested yet"
    if captured is not None and captured.reaches(position):
        return True, f"capture stored {captured} and Silver has taken every Bronze file"
    return False, f"capture has stored {captured or 'no position'} (source position {position})"


def silver_count(base_path: str, instant: str, *, soft: bool) -> int:
    """The live rows of a Silver table as of ``instant``, counted one file slice at a time
    (soft-deleted rows, ``__deleted = true``, left out)."""
    spec = parse_read_options({QUERY_TYPE: "snapshot", AS_OF_INSTANT: instant})
    schema, slices, options = plan_file_slices(base_path, spec)
    rows = 0
    for batch in read_file_slices(base_path, spec, slices, options, schema):
        if soft and "__deleted" in batch.schema.names:
            flag = pc.equal(pc.cast(batch.column("__deleted"), pa.string()), "true")
            rows += batch.num_rows - int(pc.sum(pc.fill_null(flag, False).cast(pa.int64())).as_py() or 0)
        else:
            rows += batch.num_rows
    return rows


def _record_file(params: WorkbookParams) -> Path:
    return params.state_path / "checks" / "divergence.json"


def record_checks(params: WorkbookParams, frame: pd.DataFrame) -> None:
    """Store each row of ``frame`` (:data:`COLUMNS`) as its table's newest check, atomically."""
    path = _record_file(params)
    entries = _read_records(path)
    for rec in frame.to_dict("records"):
        entries[str(rec["table"])] = {c: _plain(rec.get(c)) for c in COLUMNS}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".divergence-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(entries, out, indent=1, sort_keys=True)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def last_checks(params: WorkbookParams, names: Iterable[str] | None = None) -> pd.DataFrame:
    """The newest recorded check of each Silver table (``checked_s_ago`` added; a table never
    checked has no row)."""
    entries = _read_records(_record_file(params))
    wanted = list(names) if names is not None else [t.name for t in params.silver.tables]
    rows = [entries[n] for n in wanted if n in entries]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["checked_s_ago"] = [round(time.time() - float(at), 1) for at in frame["checked_at"]]
    return frame


def _read_records(path: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ReconcileError(f"Failed to read the record of Silver checks {path}: {exc}") from None
    return raw if isinstance(raw, dict) else {}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        return None if value != value else value  # NaN (a missing number in pandas) -> null
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return str(value)
