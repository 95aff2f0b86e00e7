"""Reconciliation: each Silver table against its source table at a known source position.

:func:`reconcile` reads every source table of a source system in one consistent snapshot and
records the log position that snapshot corresponds to:

* PostgreSQL: one ``REPEATABLE READ`` transaction whose first statement reads
  ``pg_current_wal_insert_lsn()`` (every transaction visible in the snapshot committed below it);
* MariaDB / MySQL: ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and
  ``SHOW STATUS LIKE 'binlog_snapshot_%'`` (the binlog file and position of exactly that
  snapshot).

It then waits (bounded) until Silver has everything up to that position, optionally running
:func:`helpers.silver.ingest.ingest_table` itself, and compares the two sides by row count and an
order-independent content checksum over the source's columns. When they differ it lists the
keys that differ (missing in Silver, extra in Silver, different content), capped, with counts.

Canonical text of a value (the same on both sides, computed on Arrow arrays):

* decimals exactly, as fixed-point text without trailing zeros (``12.50`` and ``12.5`` agree);
* timestamps as the UTC instant in ISO form with microseconds (naive ones are taken as UTC, as
  Debezium does for ``DATETIME`` / ``timestamp without time zone``); dates ISO; times
  ``HH:MM:SS.ffffff``;
* JSON parsed and re-serialised with sorted keys; floats by their shortest round-trip text;
  booleans ``true``/``false``; bytes as hex; ``NULL`` distinct from every text.

A row's canonical text is its columns' texts, each length-prefixed, in the source's column
order; its digest is SHA-256. A table's checksum is the sum modulo 2**64 of the digests' first
and second 8 bytes (order-independent, duplicates counted), shown as 32 hex digits.

Example:
    >>> from helpers.checks.reconcile import reconcile
    >>> reconcile(params, ["sale", "sale_mor"], ingest=True)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql

from helpers.capture.offsets import stored_position
from helpers.errors import ReconcileError, WorkbookError
from helpers.hudi.read import read_snapshot
from helpers.naming import connector_name, slot_name
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.ingest import ingest_table
from helpers.silver.tables import pending_bronze, table_config
from helpers.sources.local.stack import LocalStack
from helpers.sources.positions import SourcePosition, binlog_index, parse_lsn
from helpers.sources.sql import quote_mariadb

__all__ = [
    "SourceSnapshot",
    "TableSide",
    "canonical_column",
    "compare_sides",
    "reconcile",
    "row_digests",
    "side_from_arrow",
    "side_from_rows",
    "source_snapshot",
    "table_checksum",
]

_NULL = "\\N"
_ROW_SEPARATOR = "|"
_POSTGRES_JSON_OIDS = {114, 3802}  # json, jsonb


# --------------------------------------------------------------------------- positions


@dataclass(frozen=True)
class SourceSnapshot:
    """Rows of some tables of one source system, read in one snapshot at ``position``."""

    position: SourcePosition
    tables: dict[str, pa.Table]  # source table name -> its rows (source column order)
    json_columns: dict[str, frozenset[str]]


def _engine_kind(engine: str) -> str:
    if engine == "postgres":
        return "postgres"
    if engine in ("mariadb", "mysql"):
        return "mysql"
    raise ReconcileError(f"Failed to reconcile: engine {engine!r} has no local reader (postgres, mariadb)")


def _columns_to_arrow(
    names: Sequence[str], rows: Sequence[Sequence[Any]], json_columns: set[str]
) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = []
    for name, values in zip(names, columns, strict=True):
        if name in json_columns or any(isinstance(v, dict | list) for v in values):
            json_columns.add(name)
            values = tuple(None if v is None else _json_text(v, parsed=True) for v in values)
        try:
            arrays.append(pa.array(values) if values else pa.array([], pa.null()))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
    return pa.table(arrays, names=list(names))


def source_snapshot(params: WorkbookParams, source: str, tables: Sequence[str]) -> SourceSnapshot:
    """Read ``tables`` of one local source system in one consistent snapshot and its position.

    Args:
        params: workbook parameters (the local stack's ports and credentials).
        source: source system name (a key of ``params.sources``).
        tables: source table names to read.

    Returns:
        The rows (as Arrow, source column order) and the log position of the snapshot.

    Raises:
        ReconcileError: when the source cannot be read (the database's message).
    """

    sp = params.source(source)
    kind = _engine_kind(sp.engine)
    stack = LocalStack(params)
    out: dict[str, pa.Table] = {}
    json_cols: dict[str, frozenset[str]] = {}
    try:
        if kind == "postgres":
            with stack.connect_postgres(sp.database) as conn:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                with conn.transaction():
                    # the snapshot is taken by this first statement: everything it sees committed
                    # below the WAL insert position read in it
                    row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
                    assert row is not None
                    position = SourcePosition("postgres", lsn=parse_lsn(str(row[0])))
                    for table in tables:
                        cur = conn.execute(
                            sql.SQL("SELECT * FROM {}").format(sql.Identifier(sp.namespace, table))
                        )
                        desc = cur.description or []
                        names = [d.name for d in desc]
                        found = {d.name for d in desc if d.type_code in _POSTGRES_JSON_OIDS}
                        out[table] = _columns_to_arrow(names, cur.fetchall(), found)
                        json_cols[table] = frozenset(found)
        else:
            mconn = stack.connect_mariadb(sp.database)
            try:
                with mconn.cursor() as mcur:
                    mcur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                    mcur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                    status = {str(k).lower(): str(v) for k, v in mcur.fetchall()}
                    if not status.get("binlog_snapshot_file"):
                        raise ReconcileError(
                            f"Failed to read source {source}: the server reports no binlog snapshot "
                            "position (is the binary log enabled?)"
                        )
                    position = SourcePosition(
                        "mysql",
                        file=status["binlog_snapshot_file"],
                        pos=int(status["binlog_snapshot_position"]),
                    )
                    for table in tables:
                        mcur.execute(f"SELECT * FROM {quote_mariadb(table)}")  # noqa: S608
                        names = [d[0] for d in mcur.description or []]
                        detected: set[str] = set()
                        out[table] = _columns_to_arrow(names, list(mcur.fetchall()), detected)
                        json_cols[table] = frozenset(detected)
                    mcur.execute("COMMIT")
            finally:
                mconn.close()
    except ReconcileError:
        raise
    except WorkbookError as exc:
        raise ReconcileError(f"Failed to read source {source}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the database's message, with the place
        raise ReconcileError(f"Failed to read source {source} ({sp.database}): {exc}") from None
    return SourceSnapshot(position, out, json_cols)


# --------------------------------------------------------------------------- canonical text


def _json_text(value: Any, *, parsed: bool) -> str:
    data = value if parsed else json.loads(value)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_column(values: pa.Array | pa.ChunkedArray, *, json_text: bool = False) -> pa.Array:
    """Canonical text of every value of a column (see the module docstring); nulls stay null.

    Args:
        values: the column.
        json_text: the column holds JSON (text is parsed and re-serialised with sorted keys).

    Returns:
        A string array of the same length.

    Raises:
        ReconcileError: when a JSON value does not parse.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    kind = values.type
    if pa.types.is_null(kind):
        return pa.array([None] * len(values), pa.string())
    if pa.types.is_dictionary(kind):
        values = values.cast(kind.value_type)
        kind = values.type
    if json_text and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        try:
            texts = [None if v is None else _json_text(v, parsed=False) for v in values.to_pylist()]
            return pa.array(texts, pa.string())
        except ValueError as exc:
            raise ReconcileError(f"Failed to canonicalise a JSON column: {exc}") from None
    if pa.types.is_decimal(kind):
        text = values.cast(pa.string())
        text = pc.replace_substring_regex(text, r"^(-?[0-9]*\.[0-9]*?)0+$", r"\1")
        text = pc.replace_substring_regex(text, r"\.$", "")
        return pc.replace_substring_regex(text, r"^-0$", "0")
    if pa.types.is_timestamp(kind):
        utc = values.cast(pa.timestamp("us", tz="UTC"), safe=False)
        return pc.strftime(utc, format="%Y-%m-%dT%H:%M:%S", locale="C")
    if pa.types.is_date(kind):
        return values.cast(pa.date32()).cast(pa.string())
    if pa.types.is_time(kind):
        return values.cast(pa.time64("us")).cast(pa.string())
    if pa.types.is_floating(kind):
        return values.cast(pa.float64()).cast(pa.string())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return pa.array([None if v is None else v.hex() for v in values.to_pylist()], pa.string())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return values.cast(pa.string())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return values.cast(pa.string())
    return pa.array(
        [None if v is None else _json_text(v, parsed=True) for v in values.to_pylist()], pa.string()
    )


def _canonical_rows(table: pa.Table, columns: Sequence[str], json_columns: frozenset[str]) -> pa.Array:
    parts = []
    for name in columns:
        text = canonical_column(table.column(name), json_text=name in json_columns)
        field = pc.binary_join_element_wise(pc.cast(pc.utf8_length(text), pa.string()), text, ":")
        parts.append(pc.fill_null(field, _NULL))
    if not parts:
        return pa.array([""] * table.num_rows, pa.string())
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, _ROW_SEPARATOR)


def row_digests(
    table: pa.Table, columns: Sequence[str], json_columns: frozenset[str] = frozenset()
) -> np.ndarray:
    """SHA-256 of each row's canonical text, as an ``(n, 32)`` uint8 array."""
    text = _canonical_rows(table, columns, json_columns)
    blob = b"".join(hashlib.sha256(s.encode("utf-8")).digest() for s in text.to_pylist())
    return np.frombuffer(blob, dtype=np.uint8).reshape(-1, 32)


def table_checksum(digests: np.ndarray) -> str:
    """Order-independent checksum of row digests (sums modulo 2**64 of two 8-byte words)."""
    if not len(digests):
        return "0" * 32
    words = np.ascontiguousarray(digests[:, :16]).view(">u8").astype(np.uint64)
    with np.errstate(over="ignore"):
        first = int(words[:, 0].sum(dtype=np.uint64))
        second = int(words[:, 1].sum(dtype=np.uint64))
    return f"{first:016x}{second:016x}"


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class TableSide:
    """One side of a comparison: key texts, key values and row digests, aligned."""

    keys: list[str]
    key_values: list[Any]
    digests: np.ndarray

    @property
    def rows(self) -> int:
        """Number of rows."""
        return len(self.keys)

    @property
    def checksum(self) -> str:
        """:func:`table_checksum` of the digests."""
        return table_checksum(self.digests)


def side_from_arrow(
    table: pa.Table, columns: Sequence[str], key: Sequence[str], json_columns: frozenset[str] = frozenset()
) -> TableSide:
    """A :class:`TableSide` from an Arrow table (missing columns count as null).

    Raises:
        ReconcileError: when a key column is missing.
    """
    missing_keys = [k for k in key if k not in table.column_names]
    if missing_keys:
        raise ReconcileError(f"Failed to compare: key column(s) {missing_keys} missing")
    for name in columns:
        if name not in table.column_names:
            table = table.append_column(name, pa.array([None] * table.num_rows, pa.string()))
    key_text = _canonical_rows(table, key, frozenset()).to_pylist()
    if len(key) == 1:
        values: list[Any] = table.column(key[0]).to_pylist()
    else:
        values = [tuple(r) for r in zip(*(table.column(k).to_pylist() for k in key), strict=True)]
    return TableSide(key_text, values, row_digests(table, columns, json_columns))


def side_from_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], key: Sequence[str]) -> TableSide:
    """A :class:`TableSide` from row dicts (as database drivers return them)."""
    found: set[str] = set()
    table = _columns_to_arrow(list(columns), [tuple(r.get(c) for c in columns) for r in rows], found)
    return side_from_arrow(table, columns, key, frozenset(found))


def compare_sides(
    source: TableSide, silver: TableSide, key: Sequence[str], *, max_keys: int = 20
) -> dict[str, Any]:
    """Compare two sides: counts, checksums and (when they differ) the differing keys.

    Returns:
        ``source_rows``, ``silver_rows``, ``source_checksum``, ``silver_checksum``, ``equal``,
        ``missing_in_silver``, ``extra_in_silver``, ``different``, ``duplicate_in_silver``,
        ``diff_count`` and ``differing_keys``: up to ``max_keys`` dicts ``{<key column>: value,
        ..., "difference": "missing_in_silver" | "extra_in_silver" | "different" |
        "duplicate_in_silver"}``, in key order.
    """
    out: dict[str, Any] = {
        "source_rows": source.rows,
        "silver_rows": silver.rows,
        "source_checksum": source.checksum,
        "silver_checksum": silver.checksum,
    }
    equal = source.rows == silver.rows and out["source_checksum"] == out["silver_checksum"]
    found: list[tuple[str, Any, str]] = []
    counts = {"missing_in_silver": 0, "extra_in_silver": 0, "different": 0, "duplicate_in_silver": 0}
    if not equal:
        want = {k: (i, bytes(source.digests[i])) for i, k in enumerate(source.keys)}
        have: dict[str, tuple[int, bytes]] = {}
        for i, k in enumerate(silver.keys):
            if k in have:
                counts["duplicate_in_silver"] += 1
                found.append((k, silver.key_values[i], "duplicate_in_silver"))
            have[k] = (i, bytes(silver.digests[i]))
        for k, (i, digest) in want.items():
            other = have.get(k)
            if other is None:
                counts["missing_in_silver"] += 1
                found.append((k, source.key_values[i], "missing_in_silver"))
            elif other[1] != digest:
                counts["different"] += 1
                found.append((k, source.key_values[i], "different"))
        for k, (i, _digest) in have.items():
            if k not in want:
                counts["extra_in_silver"] += 1
                found.append((k, silver.key_values[i], "extra_in_silver"))
    found.sort(key=lambda f: f[0])
    listed = []
    for _text, value, difference in found[:max_keys]:
        values = value if len(key) > 1 else (value,)
        listed.append({**dict(zip(key, values, strict=True)), "difference": difference})
    out.update(counts)
    out["equal"] = equal
    out["diff_count"] = sum(counts.values())
    out["differing_keys"] = listed
    return out


# --------------------------------------------------------------------------- Silver side


def _is_table(base: str) -> bool:
    return Path(base, ".hoodie", "hoodie.properties").exists()


def _silver_rows(params: WorkbookParams, table: SilverTableParams) -> pa.Table | None:

    base = table_config(params, table).base_path
    if not _is_table(base):
        return None
    rows = read_snapshot(base)
    if table.delete_mode == "soft" and "__deleted" in rows.column_names:
        flag = rows.column("__deleted")
        deleted = pc.equal(pc.cast(flag, pa.string()), "true")
        rows = rows.filter(pc.invert(pc.fill_null(deleted, False)))
    return rows


def _silver_position(params: WorkbookParams, table: SilverTableParams, engine: str) -> SourcePosition | None:
    """The highest source position among Silver's rows (soft-deleted ones included)."""

    base = table_config(params, table).base_path
    if not _is_table(base):
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


def _captured_position(params: WorkbookParams, source: str, engine: str) -> SourcePosition | None:
    """How far capture has durably got: the connector's stored offset (and, for PostgreSQL,
    its slot's confirmed position), whichever is further."""

    best = stored_position(params, connector_name(params, source))
    if engine == "postgres":
        try:
            with LocalStack(params).connect_postgres(params.source(source).database, autocommit=True) as conn:
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


def _caught_up(
    params: WorkbookParams,
    silver_params: WorkbookParams,
    table: SilverTableParams,
    position: SourcePosition,
) -> tuple[bool, str]:
    """Whether Silver holds every change of the table up to ``position``, and why."""

    top = _silver_position(silver_params, table, position.engine)
    if top is not None and top.reaches(position):
        return True, f"Silver holds changes up to {top}"
    captured = _captured_position(params, table.source, position.engine)
    pending, _state = pending_bronze(silver_params, table)
    if captured is not None and captured.reaches(position) and not pending:
        return True, f"capture stored {captured} and Silver has taken every Bronze file"
    if pending:
        return False, f"{len(pending)} Bronze file(s) not ingested yet"
    return False, f"capture has stored {captured or 'no position'} (source position {position})"


# --------------------------------------------------------------------------- reconcile


def reconcile(
    params: WorkbookParams,
    names: Sequence[str] | None = None,
    *,
    silver_params: WorkbookParams | None = None,
    ingest: bool = False,
    wait_s: float = 60.0,
    poll_s: float = 0.5,
    max_keys: int = 20,
) -> pd.DataFrame:
    """Compare each Silver table with its source table at a known source position.

    Per source system the source tables are read in one snapshot at a log position (module
    docstring). For each table the Silver side is read through the official Hudi reader
    (soft-deleted rows, ``__deleted = true``, are not source rows) and compared; when it
    differs, the function waits up to ``wait_s`` until Silver has everything up to the position
    (the highest position among Silver's rows reaches it, or capture's stored offset / slot
    reaches it and Silver has taken every Bronze file), ingesting on the way when ``ingest``,
    then compares again.

    Args:
        params: workbook parameters of the sources (local stack).
        names: Silver table names (default: every table of ``silver_params``).
        silver_params: parameters whose ``silver`` section and ``lake.silver`` locate the Silver
            tables (default ``params``): e.g. a variant with extra tables under another root.
        ingest: run :func:`helpers.silver.ingest.ingest_table` while waiting (not when the continuous
            job already ingests: two writers wait for each other's lock).
        wait_s: longest wait for Silver to reach the source position.
        poll_s: interval between checks while waiting.
        max_keys: at most this many differing keys listed per table.

    Returns:
        One row per Silver table: ``table``, ``source``, ``source_table``, ``source_position``
        (text: ``LSN`` or ``file:pos``), ``source_rows``, ``silver_rows``, ``source_checksum``,
        ``silver_checksum``, ``equal``, ``differing_keys`` (list of dicts, capped), ``diff_count``,
        ``missing_in_silver``, ``extra_in_silver``, ``different``, ``duplicate_in_silver``,
        ``caught_up`` (Silver shown to have reached the position), ``note`` and ``seconds``.

    Raises:
        ReconcileError: when a name is not a Silver table or a source cannot be read.
    """
    silver_params = silver_params or params
    tables = list(silver_params.silver.tables)
    if names is not None:
        unknown = sorted(set(names) - {t.name for t in tables})
        if unknown:
            raise ReconcileError(
                f"Failed to reconcile: no Silver table named {unknown} "
                f"(configured: {', '.join(t.name for t in tables)})"
            )
        tables = [t for t in tables if t.name in names]
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
        for table in group:
            results.append(
                _reconcile_table(
                    params, silver_params, table, snap, deadline, ingest, poll_s, max_keys, read_s
                )
            )
    return pd.DataFrame(results)


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

    def compare() -> dict[str, Any]:
        silver = _silver_rows(silver_params, table)
        if silver is None:
            silver = pa.table({c: pa.array([], rows.schema.field(c).type) for c in columns})
        return compare_sides(
            source_side,
            side_from_arrow(silver, columns, table.record_key, json_cols),
            table.record_key,
            max_keys=max_keys,
        )

    if ingest:
        ingest_table(silver_params, table)
    result = compare()
    caught_up, note = (
        (True, "equal") if result["equal"] else _caught_up(params, silver_params, table, snap.position)
    )
    if not result["equal"] and not caught_up:
        while time.monotonic() < deadline:
            time.sleep(poll_s)
            if ingest:
                ingest_table(silver_params, table)
            caught_up, note = _caught_up(params, silver_params, table, snap.position)
            if caught_up:
                break
        result = compare()
        if result["equal"]:
            caught_up, note = True, "equal"
        elif not caught_up:
            note = f"not caught up within the wait: {note}"
    return {
        "table": table.name,
        "source": table.source,
        "source_table": table.table,
        "source_position": str(snap.position),
        **result,
        "caught_up": caught_up,
        "note": note,
        "seconds": round(time.monotonic() - started + read_s, 3),
    }
