"""Bronze files of ``ems.category`` changes for the offline Silver tests: Debezium's flattened
change events (Connect JSON, the shape the capture hands over) written by the workbook's own
Bronze writer, so no source or capture runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.bronze.events import event_from_json
from helpers.bronze.writer import BronzeWriter
from helpers.params import WorkbookParams

CATEGORY_TOPIC = "tickit.ems.category"
#: Debezium's fields of a flattened PostgreSQL change event, as the connectors add them.
DEBEZIUM_FIELDS = [
    {"type": "string", "optional": True, "field": "__deleted"},
    {"type": "string", "optional": True, "field": "__op"},
    {"type": "int64", "optional": True, "field": "__lsn"},
    {"type": "int64", "optional": True, "field": "__source_ts_ms"},
]
_FIELDS = [
    {"type": "int32", "optional": False, "field": "catid"},
    {"type": "string", "optional": True, "field": "catname"},
    *DEBEZIUM_FIELDS,
]


def write_changes(
    params: WorkbookParams, fields: list[dict[str, Any]], changes: list[tuple[int, str, dict[str, Any]]]
) -> Path:
    """One Avro Bronze file of ``ems.category`` changes ``(lsn, op, columns)`` whose Connect schema
    has the table's ``fields`` (then Debezium's); its path."""
    schema = {"type": "struct", "fields": [*fields, *DEBEZIUM_FIELDS], "optional": False}
    schema["name"] = f"{CATEGORY_TOPIC}.Value"
    events = []
    for lsn, op, columns in changes:
        payload = {
            **columns,
            "__deleted": str(op == "d").lower(),
            "__op": op,
            "__lsn": lsn,
            "__source_ts_ms": 1_700_000_000_000 + lsn,
        }
        event = event_from_json(CATEGORY_TOPIC, json.dumps({"schema": schema, "payload": payload}))
        assert event is not None, payload
        events.append(event)
    (written,) = BronzeWriter(params.path(params.lake.bronze), "avro").write_batch(events)
    return written.path


def write_category_changes(params: WorkbookParams, changes: list[tuple[int, int, str, str]]) -> Path:
    """One Avro Bronze file of ``(lsn, catid, catname, op)`` changes; its path."""
    rows = [(lsn, op, {"catid": catid, "catname": name}) for lsn, catid, name, op in changes]
    return write_changes(params, _FIELDS[:2], rows)
