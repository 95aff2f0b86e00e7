"""What the executors learn of a Bronze file from its bytes, before any event is decoded: the
writer schema and record count of an Avro file from its block headers (a damaged file named
with the reason), the distinct schemas of a JSON-lines file, and its lines decoded into Arrow
batches of a given schema with bad lines kept aside."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from support.imports import modules_imported_by

from helpers.bronze.events import event_from_json
from helpers.bronze.layout import (
    BAD_EVENT,
    BAD_REASON,
    FILE_COLUMN,
    ROW_COLUMN,
    avro_layout,
    jsonl_batches,
    jsonl_layout,
    record_numbers,
)
from helpers.bronze.writer import BronzeWriter
from helpers.errors import UnreadableBronzeError

TOPIC = "tickit.ems.t"
FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "__op"},
    {"type": "int64", "optional": True, "field": "__lsn"},
    {"type": "int64", "optional": True, "field": "__source_ts_ms"},
]


def _raw(lsn: int, fields: list[dict[str, Any]] = FIELDS, **extra: Any) -> str:
    payload = {"id": lsn, "__op": "c", "__lsn": lsn, "__source_ts_ms": 1_700_000_000_000, **extra}
    return json.dumps({"schema": {"type": "struct", "fields": fields, "optional": False}, "payload": payload})


def _file(tmp_path: Path, raws: list[str], fmt: str) -> Path:
    events = [e for e in (event_from_json(TOPIC, r) for r in raws) if e is not None]
    (written,) = BronzeWriter(tmp_path, fmt).write_batch(events)  # type: ignore[arg-type]
    return Path(written.path)


def test_avro_layout_counts_records_from_block_headers(tmp_path: Path) -> None:
    """Many blocks (a small sync interval): the count is every record, the schema the writer's."""
    schema = fastavro.parse_schema({"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]})
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, ({"x": i} for i in range(5000)), codec="deflate", sync_interval=256)
    text, records = avro_layout(buffer.getvalue())
    assert records == 5000
    assert json.loads(text)["fields"] == [{"name": "x", "type": "long"}]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[: len(b) - 9], "without the file's sync marker|truncated"),
        (lambda b: b[: len(b) * 2 // 3], "truncated|sync marker"),
        (lambda b: b + b"\x00", "ends inside a block header|truncated"),
        (lambda b: b"Obj\x02" + b[4:], "no Obj"),
        (lambda b: b[:40], "damaged header"),
    ],
)
def test_a_damaged_avro_file_is_named_unreadable(tmp_path: Path, damage: Any, reason: str) -> None:
    """Spark's Avro source reads a file cut after a block boundary without an error; the walk of
    the block headers does not let such a file through."""
    path = _file(tmp_path, [_raw(i) for i in range(1, 2000)], "avro")
    assert avro_layout(path.read_bytes())[1] == 1999
    with pytest.raises(UnreadableBronzeError, match=reason):
        avro_layout(damage(path.read_bytes()))


def test_jsonl_layout_and_batches_keep_bad_lines_with_their_numbers(tmp_path: Path) -> None:
    """Two schemas (a column added at the source), a broken line, a line whose value does not fit
    its schema: two schema parts; the batches hold the good lines typed to the target schema and
    the bad ones with reason and line number; a rejected schema's lines are bad as a whole."""
    wider = [*FIELDS, {"type": "string", "optional": True, "field": "note"}]
    lines = [_raw(1), _raw(2, wider, note="n2"), "{broken", _raw(4, wider, note=5), _raw(5)]
    path = tmp_path / f"{TOPIC}+1+5+x.jsonl"
    path.write_text("\n".join(lines) + "\n")
    parts = jsonl_layout(path.name, path.read_bytes())
    assert sorted(p.records for p in parts) == [2, 2]
    target = pa.schema(
        [
            ("id", pa.int32()),
            ("__op", pa.string()),
            ("__lsn", pa.int64()),
            ("__source_ts_ms", pa.int64()),
            ("note", pa.string()),
            (FILE_COLUMN, pa.string()),
            (ROW_COLUMN, pa.int64()),
            (BAD_REASON, pa.string()),
            (BAD_EVENT, pa.string()),
        ]
    )
    rows = pa.Table.from_batches(list(jsonl_batches(path.name, path.read_bytes(), target, {}))).to_pylist()
    good = [(r["id"], r["note"], r[ROW_COLUMN]) for r in rows if r[BAD_REASON] is None]
    assert good == [(1, None, 1), (2, "n2", 2), (5, None, 5)]
    bad = {r[ROW_COLUMN]: r[BAD_REASON] for r in rows if r[BAD_REASON] is not None}
    assert set(bad) == {3, 4} and "does not parse" in bad[3] and "do not match" in bad[4]
    narrow = next(p.schema for p in parts if "note" not in p.schema)
    rejected = jsonl_batches(path.name, path.read_bytes(), target, {narrow: "old schema"})
    reasons = {r[ROW_COLUMN]: r[BAD_REASON] for r in pa.Table.from_batches(list(rejected)).to_pylist()}
    assert reasons[1] == reasons[5] == "old schema"


def test_record_numbers_only_for_a_file_read_in_one_task() -> None:
    assert record_numbers(41, 50, 10, jsonl=False) == 40
    assert record_numbers(41, 2**33 + 3, 10, jsonl=False) is None  # split over two tasks
    assert record_numbers(3, 9, 4, jsonl=True) == 0


def test_an_executor_s_python_worker_imports_the_layout_code_without_the_parameters() -> None:
    """Each of an executor's Python workers imports this module for the first job of a round (the
    file inspection); the parameters' pydantic models and the lake's S3 client are not among
    its imports (they cost the worker about 0.1 s, measured with ``python -X importtime``)."""
    heavy = sorted(
        m
        for m in modules_imported_by("helpers.bronze.layout")
        if m.split(".")[0] in {"pydantic", "boto3", "botocore"}
        or m in {"helpers.params", "helpers.bronze.store", "helpers.lake_store"}
    )
    assert not heavy, heavy
