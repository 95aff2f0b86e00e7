"""replay_arrow (vectorised) leaves exactly the rows replay (row by row) leaves."""

from __future__ import annotations

import random
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
