"""Bad Bronze input kept aside, with the reason: never applied, never silently dropped.

:func:`write_quarantine` records a Bronze file's bad input as
``<silver>/_errors/<table>/<bronze file>.quarantine.json``; :func:`settled_files` lists the files
settled by their record alone and :func:`quarantine_frame` shows the records. What is bad input,
the record format and the checkpoint rules: ``docs/architecture.md``, "Silver ingestion".
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from helpers.lakefs import join, lake_uri, open_store
from helpers.params import WorkbookParams
from helpers.silver.checkpoint import BronzeObject

__all__ = [
    "ERRORS_DIR",
    "RECORD_SUFFIX",
    "VALID_OPS",
    "BadRecord",
    "quarantine_dir",
    "quarantine_frame",
    "settled_files",
    "write_quarantine",
]

ERRORS_DIR = "_errors"
RECORD_SUFFIX = ".quarantine.json"
VALID_OPS = frozenset({"c", "u", "d", "r"})


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
    bronze_file: BronzeObject,
    records: Sequence[BadRecord],
    whole_file: bool,
    settled: bool,
    data: bytes | None = None,
) -> str:
    """Record the bad input of one Bronze file (``docs/architecture.md``); durable on return.

    Args:
        directory: the table's quarantine directory (:func:`quarantine_dir`).
        table: Silver table name.
        topic: Bronze topic.
        bronze_file: the Bronze file (never modified; copied when ``whole_file``).
        records: what is bad in it.
        whole_file: the file could not be read at all.
        settled: nothing of the file is applied, so the record alone marks it taken.
        data: the file's bytes (copied when ``whole_file``).

    Returns:
        The record's location.
    """
    store = open_store(directory)
    name = f"{bronze_file.name}{RECORD_SUFFIX}"
    quarantined_at = time.time()
    existing = [e for e in store.list("") if e.name == name]
    if existing:  # written by a run that did not commit: same content, first time kept
        try:
            quarantined_at = float(json.loads(store.read(existing[0].location))["quarantined_at"])
        except (ValueError, KeyError, TypeError):
            pass
    if whole_file and data is not None:
        store.write(f"files/{bronze_file.name}", data)
    doc = {
        "table": table,
        "topic": topic,
        "bronze_file": bronze_file.uri,
        "whole_file": whole_file,
        "settled": settled,
        "quarantined_at": quarantined_at,
        "records": [{"record": r.record, "reason": r.reason, "event": _json_safe(r.event)} for r in records],
    }
    return store.write(name, json.dumps(doc, indent=1).encode("utf-8"))


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
