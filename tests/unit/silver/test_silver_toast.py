"""TOAST placeholders (edge case 7) in Silver ingestion, on small batches (the stored-row lookup
against a real table written by the official writer is in tests/integration/test_silver_official.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from helpers.bronze.events import UNAVAILABLE_VALUE
from helpers.hudi.config import HudiTableConfig
from helpers.silver.prepare import fill_unavailable

P = UNAVAILABLE_VALUE


def _config(tmp_path: Path) -> HudiTableConfig:
    return HudiTableConfig(
        table_name="event",
        base_path=str(tmp_path / "event"),
        record_key_fields=("id",),
        ordering_fields=("__lsn",),
    )


def _batch(rows: list[tuple[int, int, str | None, bytes | None]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int32()),
            "__lsn": pa.array([r[1] for r in rows], pa.int64()),
            "name": pa.array([r[2] for r in rows], pa.string()),
            "blob": pa.array([r[3] for r in rows], pa.binary()),
        }
    )


def test_placeholders_take_the_latest_earlier_value_of_the_key_in_log_order(tmp_path: Path) -> None:
    # rows arrive out of log order; key 1's placeholder at lsn 30 follows the full value at lsn 20
    batch = _batch(
        [
            (1, 30, P, P.encode()),
            (2, 11, "two", b"b2"),
            (1, 20, "second", b"s"),
            (1, 10, "first", b"f"),
            (2, 12, P, b"b2-new"),
            (1, 40, None, P.encode()),  # a real null stays null; the bytes placeholder is filled
        ]
    )
    out, filled, unresolved = fill_unavailable(batch, _config(tmp_path))
    assert (filled, unresolved) == (4, 0)
    assert out.column("name").to_pylist() == ["second", "two", "second", "first", "two", None]
    assert out.column("blob").to_pylist() == [b"s", b"b2", b"s", b"f", b"b2-new", b"s"]


def test_placeholders_without_an_earlier_event_take_the_stored_row(tmp_path: Path) -> None:
    stored = {"1": {"name": "stored one", "blob": b"x1"}, "2": {"name": "stored two", "blob": b"x2"}}
    asked: list[tuple[list[str], list[str]]] = []

    def stored_rows(keys, columns):  # type: ignore[no-untyped-def]
        asked.append((list(keys), list(columns)))
        return {k: stored[k] for k in keys if k in stored}

    batch = _batch([(1, 5, P, b"new"), (3, 6, P, b"y")])  # key 3 is nowhere: left null, counted
    out, filled, unresolved = fill_unavailable(batch, _config(tmp_path), stored_rows)
    assert (filled, unresolved) == (1, 1)
    assert out.column("name").to_pylist() == ["stored one", None]
    assert out.column("blob").to_pylist() == [b"new", b"y"]
    assert asked == [(["1", "3"], ["name"])]  # only the keys the batch cannot resolve


def test_batches_without_placeholders_are_returned_unchanged(tmp_path: Path) -> None:
    batch = _batch([(1, 1, "a", b"a"), (1, 2, "b", None)])
    out, filled, unresolved = fill_unavailable(batch, _config(tmp_path))
    assert out is batch and (filled, unresolved) == (0, 0)


def test_latest_per_key_is_what_an_upsert_into_an_empty_table_leaves(tmp_path: Path) -> None:
    """The newest event of each key by the ordering field (row order breaks a tie: the later
    wins); hard mode drops keys whose newest event is a delete, soft mode keeps them."""
    from helpers.silver.prepare import latest_per_key

    events = pa.table(
        {
            "id": pa.array([1, 2, 1, 3, 2, 3], pa.int32()),
            "__lsn": pa.array([20, 5, 10, 7, 9, 7], pa.int64()),
            "v": ["1@20", "2@5", "1@10", "3@7 first", "2@9 delete", "3@7 second"],
            "_hoodie_is_deleted": [False, False, False, False, True, False],
        }
    )
    hard = latest_per_key(events, _config(tmp_path))
    assert sorted(hard.column("v").to_pylist()) == ["1@20", "3@7 second"]
    import dataclasses

    soft = latest_per_key(events, dataclasses.replace(_config(tmp_path), delete_mode="soft"))
    assert sorted(soft.column("v").to_pylist()) == ["1@20", "2@9 delete", "3@7 second"]
