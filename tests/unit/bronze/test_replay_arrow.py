"""replay_arrow (vectorised) leaves exactly the rows replay (row by row) leaves."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from helpers.bronze.events import UNAVAILABLE_VALUE
from helpers.bronze.replay import replay, replay_arrow
from helpers.errors import BronzeError


def _mysql_events(n: int = 400) -> list[dict[str, Any]]:
    """Inserts, updates, deletes and re-inserts of 60 keys over two binlog files, shuffled."""
    r = random.Random(3)
    events = []
    for i in range(n):
        k = r.randrange(60)
        op = r.choice(["c", "u", "u", "d"])
        events.append(
            {
                "id": k,
                "v": f"v{i}",
                "__op": op,
                "__deleted": "true" if op == "d" else "false",
                "__file": "bin.000001" if i < n // 2 else "bin.000002",
                "__pos": 1000 + (i % (n // 2)) * 10,
                "__row": r.randrange(2),
            }
        )
    r.shuffle(events)
    return events


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda e: e["id"])


def test_replay_arrow_equals_replay_mysql_positions() -> None:
    events = _mysql_events()
    got = replay_arrow(pa.Table.from_pylist(events), ["id"]).to_pylist()
    assert _sorted(got) == _sorted(replay(events, ["id"]))
    assert got and all(e["__deleted"] != "true" for e in got)


def test_replay_arrow_equals_replay_postgres_lsn_and_composite_key() -> None:
    r = random.Random(5)
    events = [
        {
            "o": r.randrange(5),
            "n": r.randrange(4),
            "v": i,
            "__lsn": r.randrange(10**9),
            "__deleted": r.choice(["true", "false", None]),
        }
        for i in range(300)
    ]
    got = replay_arrow(pa.Table.from_pylist(events), ["o", "n"]).to_pylist()
    want = replay(events, ["o", "n"])
    assert sorted(got, key=lambda e: (e["o"], e["n"])) == sorted(want, key=lambda e: (e["o"], e["n"]))


def test_replay_arrow_keeps_the_previous_value_for_a_toast_placeholder() -> None:
    events = [
        {"id": 1, "big": "x" * 10, "small": 1, "__lsn": 1, "__deleted": "false"},
        {"id": 1, "big": UNAVAILABLE_VALUE, "small": 2, "__lsn": 2, "__deleted": "false"},
    ]
    got = replay_arrow(pa.Table.from_pylist(events), ["id"]).to_pylist()
    assert got == replay(events, ["id"]) == [{**events[1], "big": "x" * 10}]


def test_replay_arrow_names_missing_positions() -> None:
    with pytest.raises(BronzeError, match="no __lsn"):
        replay_arrow(pa.table({"id": [1], "v": [2]}), ["id"])


def test_a_truncate_marker_removes_every_earlier_row_and_keeps_the_later_changes() -> None:
    """TRUNCATE at lsn 50: the rows before it are gone, the changes after it (shuffled in) stay."""
    before = [{"id": i, "v": f"old{i}", "__op": "c", "__lsn": 10 + i, "__deleted": "false"} for i in range(5)]
    marker = {"id": None, "v": None, "__op": "t", "__lsn": 50, "__deleted": None}
    after = [
        {"id": 1, "v": "new1", "__op": "c", "__lsn": 60, "__deleted": "false"},
        {"id": 7, "v": "new7", "__op": "c", "__lsn": 61, "__deleted": "false"},
        {"id": 7, "v": "new7", "__op": "d", "__lsn": 62, "__deleted": "true"},
        {"id": 8, "v": "new8", "__op": "c", "__lsn": 63, "__deleted": "false"},
    ]
    events = [after[2], *before[3:], marker, after[0], *before[:3], after[1], after[3]]
    want = [after[0], after[3]]
    assert _sorted(replay(events, ["id"])) == want
    assert _sorted(replay_arrow(pa.Table.from_pylist(events), ["id"]).to_pylist()) == want


def test_the_last_of_two_truncates_counts_and_a_truncate_at_the_end_leaves_nothing() -> None:
    events = [
        {"id": 1, "__op": "c", "__lsn": 1, "__deleted": "false"},
        {"id": None, "__op": "t", "__lsn": 2, "__deleted": None},
        {"id": 2, "__op": "c", "__lsn": 3, "__deleted": "false"},
        {"id": None, "__op": "t", "__lsn": 4, "__deleted": None},
    ]
    assert replay(events, ["id"]) == []
    assert replay_arrow(pa.Table.from_pylist(events), ["id"]).num_rows == 0
    kept = [*events, {"id": 3, "__op": "c", "__lsn": 5, "__deleted": "false"}]
    assert replay_arrow(pa.Table.from_pylist(kept), ["id"]).to_pylist() == [kept[-1]] == replay(kept, ["id"])


def test_a_resnapshot_marker_written_by_the_bronze_writer_voids_what_came_before(tmp_path: Path) -> None:
    """The workbook's re-snapshot marker goes through the Bronze writer like capture's events and
    replays as a TRUNCATE at its position: a row only an event before it knew is gone."""
    from helpers.bronze.events import RESNAPSHOT_OP, event_from_json, marker_event
    from helpers.bronze.read import bronze_files, read_bronze_arrow
    from helpers.bronze.writer import BronzeWriter

    def change(key: int, lsn: int, op: str = "c") -> str:
        schema = {
            "type": "struct",
            "fields": [
                {"field": "id", "type": "int32", "optional": False},
                {"field": "__op", "type": "string", "optional": True},
                {"field": "__lsn", "type": "int64", "optional": True},
                {"field": "__source_ts_ms", "type": "int64", "optional": True},
                {"field": "__deleted", "type": "string", "optional": True},
            ],
        }
        payload = {"id": key, "__op": op, "__lsn": lsn, "__source_ts_ms": 1_700_000_000_000}
        payload["__deleted"] = "false"
        return json.dumps({"schema": schema, "payload": payload})

    topic = "p.s.t"
    writer = BronzeWriter(tmp_path, "avro")
    stale, reread = event_from_json(topic, change(1, 10)), event_from_json(topic, change(2, 30, "r"))
    assert stale is not None and reread is not None
    writer.write_batch([stale])
    writer.write_batch([marker_event(topic, RESNAPSHOT_OP, "t", {"__lsn": 20}, 1_700_000_000_001)])
    writer.write_batch([reread])
    events = read_bronze_arrow(bronze_files(tmp_path, topic))
    assert events.num_rows == 3
    assert [r["id"] for r in replay_arrow(events, ["id"]).to_pylist()] == [2]
