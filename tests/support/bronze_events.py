"""Bronze files of ``ems.category`` changes for the offline Silver tests: Debezium's flattened
change events (Connect JSON, the shape the capture hands over) written by the workbook's own
Bronze writer, so no source or capture runs."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.bronze.events import event_from_json
from helpers.bronze.writer import BronzeWriter
from helpers.params import WorkbookParams

CATEGORY_TOPIC = "tickit.ems.category"
_FIELDS = [
    {"type": "int32", "optional": False, "field": "catid"},
    {"type": "string", "optional": True, "field": "catname"},
    {"type": "string", "optional": True, "field": "__deleted"},
    {"type": "string", "optional": True, "field": "__op"},
    {"type": "int64", "optional": True, "field": "__lsn"},
    {"type": "int64", "optional": True, "field": "__source_ts_ms"},
]
_SCHEMA = {"type": "struct", "fields": _FIELDS, "optional": False, "name": f"{CATEGORY_TOPIC}.Value"}


def write_category_changes(params: WorkbookParams, changes: list[tuple[int, int, str, str]]) -> Path:
    """One Avro Bronze file of ``(lsn, catid, catname, op)`` changes; its path."""
    events = []
    for lsn, catid, name, op in changes:
        payload = {
            "catid": catid,
            "catname": name,
            "__deleted": str(op == "d").lower(),
            "__op": op,
            "__lsn": lsn,
            "__source_ts_ms": 1_700_000_000_000 + lsn,
        }
        event = event_from_json(CATEGORY_TOPIC, json.dumps({"schema": _SCHEMA, "payload": payload}))
        assert event is not None, payload
        events.append(event)
    (written,) = BronzeWriter(params.path(params.lake.bronze), "avro").write_batch(events)
    return written.path
