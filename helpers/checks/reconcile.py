"""Reconciliation: each Silver table against its source table at a known source position.

:func:`reconcile` reads every source table of a source system in one consistent snapshot and
records the log position it corresponds to (:mod:`helpers.checks.at_position`), waits (bounded)
until Silver has everything up to that position, optionally running
:func:`helpers.silver.ingest.ingest_table` itself, and compares the two sides by row count and an
order-independent checksum (:mod:`helpers.checks.digests`). When they differ it lists the keys
that differ (missing in Silver, extra in Silver, different content), capped, with counts, and
describes those rows with :func:`helpers.checks.compare.compare_rows`.

Example:
    >>> from helpers.checks.reconcile import reconcile
    >>> reconcile(params, ["sale", "sale_mor"], ingest=True)  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from helpers.checks.at_position import SourceSnapshot, caught_up, silver_rows, source_snapshot
from helpers.checks.compare import compare_rows
from helpers.checks.digests import TableSide, canonical_records, compare_sides, side_from_arrow
from helpers.checks.divergence import (
    BEHIND,
    DIFFERS,
    EQUAL,
    mark_once,
    record_checks,
    repair_command,
    selected_tables,
)
from helpers.environments import implementations
from helpers.errors import ReconcileError, WaitTimeoutError
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.silver.ingest import ingest_table
from helpers.silver.job import SilverJob

__all__ = ["describe_differences", "nothing_ingests", "reconcile"]


def reconcile(
    params: WorkbookParams,
    names: Sequence[str] | None = None,
    *,
    silver_params: WorkbookParams | None = None,
    ingest: bool = False,
    record: bool | None = None,
    wait_s: float = 60.0,
    poll_s: float = 0.5,
    max_keys: int = 20,
) -> pd.DataFrame:
    """Compare each Silver table with its source table at a known source position.

    Per source system the source tables are read in one snapshot at a log position
    (:func:`helpers.checks.at_position.source_snapshot`). For each table the Silver side is read
    through the official Hudi reader (soft-deleted rows, ``__deleted = true``, are not source
    rows) and compared; when it differs, the function waits up to ``wait_s`` until Silver has
    everything up to the position (the highest position among Silver's rows reaches it, or
    capture's stored offset / slot reaches it and Silver has taken every Bronze file), ingesting
    on the way when ``ingest``, then compares again. Before it first waits on a source system it
    writes the position mark the count check writes
    (:func:`helpers.checks.divergence.mark_once`): without a captured change after the
    snapshot, capture's stored offset would stay behind a position that other tables' changes
    moved, and a table that really differs would read "not caught up" instead of naming its
    repair. It does not wait when nothing would ingest
    (:func:`nothing_ingests`: the continuous job is down), and its note says so.

    Args:
        params: workbook parameters of the sources (local stack).
        names: Silver table names (default: every table of ``silver_params``).
        silver_params: parameters whose ``silver`` section and ``lake.silver`` locate the Silver
            tables (default ``params``): e.g. a variant with extra tables under another root.
        ingest: run :func:`helpers.silver.ingest.ingest_table` while waiting (not when the continuous
            job already ingests: two writers wait for each other's lock).
        record: store each table's result as its newest check, which ``./workbook status`` shows
            (:mod:`helpers.checks.divergence`); default: when ``silver_params`` is not given.
        wait_s: longest wait for Silver to reach the source position.
        poll_s: interval between checks while waiting.
        max_keys: at most this many differing keys listed per table.

    Returns:
        One row per Silver table: ``table``, ``source``, ``source_table``, ``source_position``
        (text: ``LSN`` or ``file:pos``), ``source_rows``, ``silver_rows``, ``source_checksum``,
        ``silver_checksum``, ``equal``, ``differing_keys`` (list of dicts, capped), ``diff_count``,
        ``missing_in_silver``, ``extra_in_silver``, ``different``, ``duplicate_in_silver``,
        ``detail`` (:func:`describe_differences`; empty when equal), ``caught_up`` (Silver shown
        to have reached the position), ``note``, ``fix`` (for a table that differs once caught up:
        the command that repairs it) and ``seconds``.

    Raises:
        ReconcileError: when a name is not a Silver table or a source cannot be read.
    """
    if record is None:
        record = silver_params is None
    silver_params = silver_params or params
    idle = nothing_ingests(params, silver_params, ingest=ingest)
    tables = selected_tables(silver_params, names, "reconcile")
    by_source: dict[str, list[SilverTableParams]] = {}
    for table in tables:
        if table.source not in params.sources:
            raise ReconcileError(f"Failed to reconcile {table.name}: unknown source {table.source!r}")
        by_source.setdefault(table.source, []).append(table)
    results = []
    for source, group in by_source.items():
        started = time.monotonic()
        snap = source_snapshot(params, source, sorted({t.table for t in group}))
        read_s = time.monotonic() - started
        deadline = time.monotonic() + wait_s
        mark = mark_once(params, source)
        for table in group:
            results.append(
                _reconcile_table(
                    params, silver_params, table, snap, deadline, ingest, poll_s, max_keys, read_s, idle, mark
                )
            )
    frame = pd.DataFrame(results)
    if record and len(frame):
        record_checks(params, _as_checks(frame))
    return frame


def nothing_ingests(params: WorkbookParams, silver_params: WorkbookParams, *, ingest: bool) -> str | None:
    """Why waiting for Silver cannot help, or None: the workbook's own local Silver, not ingested
    by the call, while the continuous Silver job (the one writer that would take the new Bronze
    files) is not running, as after ``./workbook stack stop``. Then :func:`reconcile` does not
    wait and says so, where it used to wait ``wait_s`` per source system for nothing."""
    if ingest or not implementations(params).local_servers:
        return None
    if silver_params.lake.silver != params.lake.silver or SilverJob(params).pid() is not None:
        return None
    return (
        "the continuous Silver job is not running, so nothing ingests them: start it as notebook 03 "
        "does (silver.start_continuous()), or reconcile with ingest=True"
    )


def _as_checks(frame: pd.DataFrame) -> pd.DataFrame:
    """The reconciliation's rows as :mod:`helpers.checks.divergence` records them."""

    def result(row: pd.Series) -> str:
        return EQUAL if row["equal"] else DIFFERS if row["caught_up"] else BEHIND

    return pd.DataFrame(
        {
            "table": frame["table"],
            "result": frame.apply(result, axis=1),
            "source_rows": frame["source_rows"],
            "silver_rows": frame["silver_rows"],
            "source_position": frame["source_position"],
            "instant": None,
            "checked_at": time.time(),
            "checked_by": "digests",
            "fix": frame["fix"],
            "note": [d or n for d, n in zip(frame["detail"], frame["note"], strict=True)],
        }
    )


def describe_differences(
    source: pa.Table,
    source_side: TableSide,
    silver: pa.Table,
    silver_side: TableSide,
    differing_keys: Sequence[dict[str, Any]],
    columns: Sequence[str],
    key: Sequence[str],
    json_columns: frozenset[str] = frozenset(),
) -> list[str]:
    """What differs in the rows of the listed keys: :func:`helpers.checks.compare.compare_rows`
    over their canonical texts (so it judges exactly as the digests do).

    Args:
        source: the source rows, aligned with ``source_side``.
        source_side: the source's :class:`~helpers.checks.digests.TableSide`.
        silver: Silver's rows, aligned with ``silver_side``.
        silver_side: Silver's side.
        differing_keys: ``differing_keys`` of :func:`~helpers.checks.digests.compare_sides`.
        columns: the compared columns (the source's).
        key: the record key columns.
        json_columns: columns holding JSON.

    Returns:
        One sentence per kind of difference (keys shown as canonical text).
    """
    if not differing_keys:
        return []

    def as_tuple(value: Any) -> tuple[Any, ...]:
        return tuple(value) if len(key) > 1 else (value,)

    texts: dict[tuple[Any, ...], str] = {}
    for side in (source_side, silver_side):
        for value, text in zip(side.key_values, side.keys, strict=True):
            texts.setdefault(as_tuple(value), text)
    wanted = {texts.get(tuple(d[k] for k in key)) for d in differing_keys}

    def rows_of(table: pa.Table, side: TableSide) -> list[dict[str, str | None]]:
        picked = [i for i, text in enumerate(side.keys) if text in wanted]
        return canonical_records(table.take(pa.array(picked, pa.int64())), columns, json_columns)

    return compare_rows(rows_of(source, source_side), rows_of(silver, silver_side), key)


def _reconcile_table(
    params: WorkbookParams,
    silver_params: WorkbookParams,
    table: SilverTableParams,
    snap: SourceSnapshot,
    deadline: float,
    ingest: bool,
    poll_s: float,
    max_keys: int,
    read_s: float,
    idle: str | None,
    mark: Callable[[], str],
) -> dict[str, Any]:
    started = time.monotonic()
    rows = snap.tables[table.table]
    columns = list(rows.column_names)
    missing_key = [k for k in table.record_key if k not in columns]
    if missing_key:
        raise ReconcileError(
            f"Failed to reconcile {table.name}: record key {missing_key} not among the source "
            f"columns {columns}"
        )
    json_cols = snap.json_columns.get(table.table, frozenset())
    source_side = side_from_arrow(rows, columns, table.record_key, json_cols)

    def compare() -> tuple[dict[str, Any], list[str]]:
        silver = silver_rows(silver_params, table)
        if silver is None:
            silver = pa.table({c: pa.array([], rows.schema.field(c).type) for c in columns})
        silver_side = side_from_arrow(silver, columns, table.record_key, json_cols)
        result = compare_sides(source_side, silver_side, table.record_key, max_keys=max_keys)
        if result["equal"]:
            return result, []
        detail = describe_differences(
            rows,
            source_side,
            silver,
            silver_side,
            result["differing_keys"],
            columns,
            table.record_key,
            json_cols,
        )
        return result, detail

    if ingest:
        ingest_table(silver_params, table)
    result, detail = compare()
    reached, note = (
        (True, "equal") if result["equal"] else caught_up(params, silver_params, table, snap.position)
    )
    if not result["equal"] and reached:
        # Silver reached the position by the time caught_up looked, which may be after the
        # compare above read it (a commit landing in between): only a compare made after
        # that look may call the table different
        result, detail = compare()
        if result["equal"]:
            note = "equal"
    elif not result["equal"] and idle is not None:
        note = f"not caught up: {note}; {idle}"
    elif not result["equal"] and not reached:
        left = deadline - time.monotonic()
        unmarked = ""
        if left > 0:
            unmarked = mark()  # capture's stored offset then passes the position, changes or not
            last = [note]

            def silver_reached() -> bool:
                if ingest:
                    ingest_table(silver_params, table)
                done, last[0] = caught_up(params, silver_params, table, snap.position)
                return done

            try:
                reached = wait_until(
                    silver_reached,
                    timeout_s=left,
                    what=f"Silver table {table.name} to reach source position {snap.position}",
                    interval_s=poll_s,
                    max_interval_s=poll_s,
                )
            except WaitTimeoutError:
                pass
            note = last[0]
        result, detail = compare()
        if result["equal"]:
            reached, note = True, "equal"
        elif not reached:
            note = f"not caught up within the wait: {note}" + (f"; {unmarked}" if unmarked else "")
    return {
        "table": table.name,
        "source": table.source,
        "source_table": table.table,
        "source_position": str(snap.position),
        **result,
        "detail": "; ".join(detail),
        "caught_up": reached,
        "note": note,
        "fix": "" if result["equal"] or not reached else repair_command(table.name),
        "seconds": round(time.monotonic() - started + read_s, 3),
    }
