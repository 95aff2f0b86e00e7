"""TOAST placeholders (edge case 7) in Silver ingestion, on small batches and a real local table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from helpers.capture.connectors import UNAVAILABLE_VALUE
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.read import read_snapshot
from helpers.hudi.writer import write_arrow
from helpers.silver import fill_unavailable

P = UNAVAILABLE_VALUE


def _config(tmp_path: Path) -> HudiTableConfig:
    return HudiTableConfig(
        table_name="event",
        base_path=str(tmp_path / "event"),
        record_key_fields=("id",),
        ordering_fields=("__lsn",),
        bloom_filter=False,
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
    config = _config(tmp_path)
    write_arrow(_batch([(1, 1, "stored one", b"x1"), (2, 2, "stored two", b"x2")]), config, "upsert")
    batch = _batch([(1, 5, P, b"new"), (3, 6, P, b"y")])  # key 3 is nowhere: left null, counted
    out, filled, unresolved = fill_unavailable(batch, config)
    assert (filled, unresolved) == (1, 1)
    assert out.column("name").to_pylist() == ["stored one", None]
    write_arrow(out, config, "upsert")
    rows = {r["id"]: (r["name"], r["blob"]) for r in read_snapshot(config.base_path).to_pylist()}
    assert rows == {1: ("stored one", b"new"), 2: ("stored two", b"x2"), 3: (None, b"y")}


def test_batches_without_placeholders_are_returned_unchanged(tmp_path: Path) -> None:
    batch = _batch([(1, 1, "a", b"a"), (1, 2, "b", None)])
    out, filled, unresolved = fill_unavailable(batch, _config(tmp_path))
    assert out is batch and (filled, unresolved) == (0, 0)
