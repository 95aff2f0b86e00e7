"""Bad Bronze input kept aside, with the reason: never applied, never silently dropped.

:func:`write_quarantine` records a Bronze file's bad input as
``<silver>/_errors/<table>/<bronze file>.quarantine.json``. :func:`quarantine_events` has the
executors write the records of the bad events a Silver round found (the events never reach the
driver); the driver writes those of whole unreadable files. :func:`settled_files` lists the files
settled by their record alone and :func:`quarantine_frame` shows the records. What is bad input,
the record format and the checkpoint rules: ``docs/architecture.md``, "Silver ingestion".
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from helpers.bronze.layout import BAD_EVENT, BAD_REASON, FILE_COLUMN, ROW_COLUMN
from helpers.lake_store import join, lake_uri, open_store, read_if_present, use_lake_s3
from helpers.params import WorkbookParams

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame

__all__ = [
    "ERRORS_DIR",
    "MISMATCH_FILE",
    "RECORD_SUFFIX",
    "VALID_OPS",
    "BadRecord",
    "quarantine_dir",
    "quarantine_events",
    "quarantine_frame",
    "newest_type_mismatch",
    "note_type_mismatch",
    "settled_files",
    "write_quarantine",
]

ERRORS_DIR = "_errors"
RECORD_SUFFIX = ".quarantine.json"
VALID_OPS = frozenset({"c", "u", "d", "r"})
#: Beside a table's records: the newest log position among its events set aside because their
#: column types no longer match the table (a TRUNCATE or re-snapshot marker before it would delete
#: rows the source still has; :mod:`helpers.silver.ingest` refuses to apply one).
MISMATCH_FILE = "_type_mismatch.json"


@dataclass(frozen=True)
class BadRecord:
    """One piece of bad input.

    Attributes:
        record: 1-based record number (Avro) or line number (JSON lines) in the Bronze file;
            ``None`` when the whole file is unreadable.
        reason: what is wrong, in words.
        event: the event's values when they could be read (JSON-safe form is made on write).
    """

    record: int | None
    reason: str
    event: dict[str, Any] | None = None


def quarantine_dir(params: WorkbookParams, table: str) -> str:
    """``<lake.silver>/_errors/<table>``: where a Silver table's bad input goes (path or URI)."""
    return join(lake_uri(params, params.lake.silver), ERRORS_DIR, table)


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, decimal.Decimal | dt.date | dt.datetime | dt.time):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def write_quarantine(
    directory: str,
    *,
    table: str,
    topic: str,
    bronze_file: str,
    records: Sequence[BadRecord],
    whole_file: bool,
    settled: bool,
) -> str:
    """Record the bad input of one Bronze file (``docs/architecture.md``); durable on return.

    Args:
        directory: the table's quarantine directory (:func:`quarantine_dir`).
        table: Silver table name.
        topic: Bronze topic.
        bronze_file: the Bronze file's location (never modified; a whole unreadable file is
            copied to ``files/<name>`` by the caller).
        records: what is bad in it.
        whole_file: the file could not be read at all.
        settled: nothing of the file is applied, so the record alone marks it taken.

    Returns:
        The record's location.
    """
    store = open_store(directory)
    name = f"{bronze_file.rsplit('/', 1)[-1]}{RECORD_SUFFIX}"
    quarantined_at = time.time()
    existing = read_if_present(store, name)
    if existing is not None:  # written by a run that did not commit: same content, first time kept
        try:
            quarantined_at = float(json.loads(existing)["quarantined_at"])
        except (ValueError, KeyError, TypeError):
            pass
    doc = {
        "table": table,
        "topic": topic,
        "bronze_file": bronze_file,
        "whole_file": whole_file,
        "settled": settled,
        "quarantined_at": quarantined_at,
        "records": [{"record": r.record, "reason": r.reason, "event": _json_safe(r.event)} for r in records],
    }
    return store.write(name, json.dumps(doc, indent=1).encode("utf-8"))


def quarantine_events(
    bad: DataFrame,
    params: WorkbookParams,
    *,
    table: str,
    topic: str,
    files: Mapping[str, tuple[str, int | None, bool]],
) -> dict[str, int]:
    """Have the executors write the records of a round's bad events, one per Bronze file (a Spark
    job: the events are grouped by file, sorted by record and written where they are).

    Args:
        bad: the bad events: ``_bronze_file``, ``_bronze_row``, ``_bad_reason``, ``_bad_event``.
        params: workbook parameters (where the lake is; the executors reach S3 as the driver).
        table: Silver table name.
        topic: Bronze topic.
        files: per Bronze file name: its location, what to subtract from ``_bronze_row`` for its
            1-based record number (None: no numbers, see
            :func:`helpers.bronze.frames.record_numbers`), and whether it is settled.

    Returns:
        Bad events recorded, per Bronze file name.
    """
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    directory = quarantine_dir(params, table)
    plan = dict(files)
    schema = StructType([StructField("file", StringType()), StructField("records", LongType())])

    def write(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        use_lake_s3(params)
        pending: dict[str, list[BadRecord]] = {}
        for batch in batches:
            for name, row, reason, event in zip(
                batch.column(FILE_COLUMN).to_pylist(),
                batch.column(ROW_COLUMN).to_pylist(),
                batch.column(BAD_REASON).to_pylist(),
                batch.column(BAD_EVENT).to_pylist(),
                strict=True,
            ):
                offset = plan[name][1]
                number = None if offset is None or row is None else int(row) - offset
                pending.setdefault(name, []).append(
                    BadRecord(number, reason, json.loads(event) if event else None)
                )
        written = []
        for name, records in pending.items():
            uri, _, settled = plan[name]
            write_quarantine(
                directory,
                table=table,
                topic=topic,
                bronze_file=uri,
                records=records,
                whole_file=False,
                settled=settled,
            )
            written.append((name, len(records)))
        yield pa.RecordBatch.from_pydict(
            {"file": [w[0] for w in written], "records": [w[1] for w in written]},
            schema=pa.schema([("file", pa.string()), ("records", pa.int64())]),
        )

    rows = (
        bad.select(FILE_COLUMN, ROW_COLUMN, BAD_REASON, BAD_EVENT)
        .repartition(FILE_COLUMN)
        .sortWithinPartitions(FILE_COLUMN, ROW_COLUMN)
        .mapInArrow(write, schema)
        .collect()
    )
    return {r["file"]: int(r["records"]) for r in rows}


def newest_type_mismatch(directory: str) -> str | None:
    """The newest log position (``_cdc_position``'s text) among the events of the table whose
    quarantine directory is ``directory`` set aside for column types that no longer match the table;
    None when there were none."""
    data = read_if_present(open_store(directory), MISMATCH_FILE)
    return None if data is None else str(json.loads(data)["newest_position"])


def note_type_mismatch(directory: str, table: str, position: str) -> str:
    """Remember ``position`` (a set-aside event's, see :func:`newest_type_mismatch`), keeping the
    newest; durable on return, before the round's records settle the event's file. The newest."""
    newest = max(position, newest_type_mismatch(directory) or "")
    doc = {"table": table, "newest_position": newest, "noted_at": time.time()}
    open_store(directory).write(MISMATCH_FILE, json.dumps(doc, indent=1).encode("utf-8"))
    return newest


def _records(directory: str) -> list[tuple[str, dict[str, Any]]]:
    store = open_store(directory)
    out = []
    for entry in store.list(""):
        if entry.name.startswith(".") or not entry.name.endswith(RECORD_SUFFIX):
            continue
        out.append((entry.location, dict(json.loads(store.read(entry.location)))))
    return out


def settled_files(params: WorkbookParams, table: str) -> frozenset[str]:
    """Names of the Bronze files a table's quarantine records mark as taken (nothing to apply)."""
    return frozenset(
        doc["bronze_file"].rsplit("/", 1)[-1]
        for _, doc in _records(quarantine_dir(params, table))
        if doc.get("settled")
    )


def quarantine_frame(params: WorkbookParams, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Every quarantined item of the Silver tables (or those named), one row each.

    Args:
        params: workbook parameters (``lake.silver``, ``silver.tables``).
        names: Silver table names; all configured tables when ``None``.

    Returns:
        Columns ``table``, ``bronze_file``, ``record`` (1-based record / line number, ``None`` for
        a whole unreadable file), ``reason``, ``quarantined_at`` (UTC), ``whole_file``,
        ``record_file`` (where the record and the event are). Empty when nothing was set aside.

    Example:
        >>> quarantine_frame(params).groupby("table").size()  # doctest: +SKIP
    """
    rows = []
    for table in params.silver.tables:
        if names is not None and table.name not in names:
            continue
        for location, doc in _records(quarantine_dir(params, table.name)):
            for item in doc.get("records", []):
                rows.append(
                    {
                        "table": doc["table"],
                        "bronze_file": doc["bronze_file"],
                        "record": item.get("record"),
                        "reason": item.get("reason"),
                        "quarantined_at": pd.Timestamp(float(doc["quarantined_at"]), unit="s", tz="UTC"),
                        "whole_file": bool(doc.get("whole_file")),
                        "record_file": location,
                    }
                )
    columns = ["table", "bronze_file", "record", "reason", "quarantined_at", "whole_file", "record_file"]
    return pd.DataFrame(rows, columns=columns)
