"""The steps of a Silver round as Spark runs them, on small frames: TOAST placeholders (edge case 7),
the newest change per key, and the tombstones that keep a late older change from bringing a
deleted row back. The whole round against real sources is in test_silver_official.py.

Each frame holds the columns a prepared round has (the record key ``_key``, ``_deleted``, the
Bronze file and row); expected values are stated per test.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers.bronze.events import UNAVAILABLE_VALUE
from helpers.bronze.layout import BAD_REASON, FILE_COLUMN, ROW_COLUMN
from helpers.hudi.api import write_hudi
from helpers.hudi.config import HudiTableConfig
from helpers.silver.counts import FileCounts, count_files
from helpers.silver.prepare import DELETED, KEY, OUTSIDE, fill_unavailable, latest_per_key
from helpers.silver.tombstones import (
    LATE,
    STONE_HIT,
    flag_late,
    next_tombstones,
    prune_tombstone_files,
    read_tombstones,
    tombstone_folder,
    write_tombstones,
)
from helpers.silver.truncate import LOG_POSITION, TRUNCATE

pytestmark = pytest.mark.integration

P = UNAVAILABLE_VALUE


def _config(tmp_path: Path, **changes: Any) -> HudiTableConfig:
    config = HudiTableConfig(
        table_name="event",
        base_path=str(tmp_path / "event"),
        record_key_fields=("id",),
        ordering_fields=("pos",),
    )
    return dataclasses.replace(config, **changes)


def _frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    """Rows of ``(id, pos, name, blob, deleted)``; file and row numbered in the given order."""
    data = [
        (i, pos, name, blob, deleted, str(i), "f1.avro", n)
        for n, (i, pos, name, blob, deleted) in enumerate(rows, 1)
    ]
    schema = (
        f"id int, pos string, name string, blob binary, {DELETED} boolean, {KEY} string, "
        f"{FILE_COLUMN} string, {ROW_COLUMN} long"
    )
    return spark.createDataFrame(data, schema)


def _by_pos(frame: Any, *columns: str) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in columns) for r in frame.orderBy("pos").collect()]


def test_placeholders_take_the_latest_earlier_value_of_the_key_in_log_order(
    spark: Any, tmp_path: Path
) -> None:
    """Rows arrive out of log order; key 1's placeholder at 30 follows the full value at 20; a
    real null stays null while the bytes placeholder beside it is filled."""
    batch = _frame(
        spark,
        [
            (1, "30", P, P.encode(), False),
            (2, "11", "two", b"b2", False),
            (1, "20", "second", b"s", False),
            (1, "10", "first", b"f", False),
            (2, "12", P, b"b2-new", False),
            (1, "40", None, P.encode(), False),
        ],
    )
    out = fill_unavailable(spark, batch, _config(tmp_path), ["name", "blob"], stored=False)
    assert _by_pos(out, "pos", "name", "blob") == [
        ("10", "first", b"f"),
        ("11", "two", b"b2"),
        ("12", "two", b"b2-new"),
        ("20", "second", b"s"),
        ("30", "second", b"s"),
        ("40", None, b"s"),
    ]
    totals = out.agg({"_toast_filled": "sum", "_toast_unresolved": "sum"}).collect()[0]
    assert (totals["sum(_toast_filled)"], totals["sum(_toast_unresolved)"]) == (4, 0)


def test_placeholders_without_an_earlier_event_take_the_stored_row(spark: Any, tmp_path: Path) -> None:
    """Keys 1 and 2 are stored (written by the official writer); key 1's placeholder takes the
    stored value, key 3 is nowhere: left null and counted as unresolved."""
    config = _config(tmp_path)
    stored = spark.createDataFrame(
        [(1, "1", "stored one", b"x1"), (2, "1", "stored two", b"x2")],
        "id int, pos string, name string, blob binary",
    )
    write_hudi(
        stored,
        {
            "hoodie.table.name": "event",
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "pos",
        },
        config.base_path,
    )
    batch = _frame(spark, [(1, "5", P, b"new", False), (3, "6", P, b"y", False)])
    out = fill_unavailable(spark, batch, config, ["name"], stored=True)
    assert _by_pos(out, "id", "name", "blob", "_toast_filled", "_toast_unresolved") == [
        (1, "stored one", b"new", 1, 0),
        (3, None, b"y", 0, 1),
    ]


def test_latest_per_key_is_what_an_upsert_into_an_empty_table_leaves(spark: Any, tmp_path: Path) -> None:
    """The newest event of each key by the ordering field (the later row breaks a tie); hard
    mode drops keys whose newest event is a delete, soft mode keeps them."""
    events = _frame(
        spark,
        [
            (1, "20", "1@20", None, False),
            (2, "05", "2@5", None, False),
            (1, "10", "1@10", None, False),
            (3, "07", "3@7 first", None, False),
            (2, "09", "2@9 delete", None, True),
            (3, "07", "3@7 second", None, False),
        ],
    )
    hard = latest_per_key(events, _config(tmp_path))
    assert sorted(r["name"] for r in hard.collect()) == ["1@20", "3@7 second"]
    soft = latest_per_key(events, _config(tmp_path, delete_mode="soft"))
    assert sorted(r["name"] for r in soft.collect()) == ["1@20", "2@9 delete", "3@7 second"]


def test_changes_not_newer_than_the_delete_are_flagged_late(spark: Any, tmp_path: Path) -> None:
    config = _config(tmp_path)
    stones = next_tombstones(_frame(spark, [(1, "f2.00005", None, None, True)]), None, config, 100.0, 60)
    assert [r["_hoodie_record_key"] for r in stones.collect()] == ["1"]
    batch = _frame(
        spark,
        [
            (1, "f1.00009", "a", None, False),
            (1, "f2.00005", "b", None, False),
            (1, "f2.00006", "c", None, False),
            (2, "f1.00001", "d", None, False),
        ],
    )
    flagged = flag_late(batch, stones, config)
    assert _by_pos(flagged, "pos", LATE) == [
        ("f1.00001", False),
        ("f1.00009", True),
        ("f2.00005", True),
        ("f2.00006", False),
    ]


def test_state_follows_the_newest_change_and_expires(spark: Any, tmp_path: Path) -> None:
    config = _config(tmp_path)

    def keys(frame: Any) -> dict[str, tuple[str, float]]:
        return {r["_hoodie_record_key"]: (r["pos"], r["_deleted_at"]) for r in frame.collect()}

    first = next_tombstones(
        _frame(spark, [(1, "f1.00001", None, None, True), (2, "f1.00002", None, None, True)]),
        None,
        config,
        100.0,
        60,
    )
    # key 1 re-inserted later; key 3 inserted then deleted in one batch; key 2 untouched
    second = next_tombstones(
        _frame(
            spark,
            [
                (1, "f1.00003", None, None, False),
                (3, "f1.00004", None, None, False),
                (3, "f1.00005", None, None, True),
            ],
        ),
        first,
        config,
        130.0,
        60,
    )
    assert keys(second) == {"2": ("f1.00002", 100.0), "3": ("f1.00005", 130.0)}
    later = next_tombstones(_frame(spark, []), second, config, 170.0, 60)  # key 2's tombstone expired
    assert keys(later) == {"3": ("f1.00005", 130.0)}


def test_states_round_trip_and_only_the_named_one_stays(spark: Any, tmp_path: Path) -> None:
    """A state is a folder written by Spark beside (not inside) the table's folder; an empty state
    is written as none; pruning leaves only the state the newest commit names."""
    config = _config(tmp_path)
    stones = next_tombstones(_frame(spark, [(7, "f1.00001", None, None, True)]), None, config, 1.0, 60)
    old, oldest = write_tombstones(stones, config.base_path)
    new, _ = write_tombstones(stones, config.base_path)
    assert oldest == 1.0
    back = read_tombstones(spark, config.base_path, new, config)
    assert back is not None and [tuple(r) for r in back.collect()] == [("7", "f1.00001", 1.0)]
    assert prune_tombstone_files(config.base_path, keep=new) >= 1
    folder = Path(tombstone_folder(config.base_path))
    assert sorted(p.name for p in folder.iterdir()) == [new]
    assert not Path(config.base_path).exists()  # the table's folder is the writer's alone
    empty = next_tombstones(_frame(spark, [(7, "f1.00002", None, None, False)]), back, config, 2.0, 60)
    assert write_tombstones(empty, config.base_path) == ("", None)
    assert sorted(p.name for p in folder.iterdir()) == [new]


def _jobs_of(spark: Any, group: str, action: Any) -> tuple[Any, int]:
    """What ``action`` returns, and how many Spark jobs it ran (its own job group)."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        out = action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return out, len(context.statusTracker().getJobIdsForGroup(group))


def test_a_state_is_listed_once_per_session(spark: Any, tmp_path: Path) -> None:
    """States never change once written, so a session reads each one's folder and Parquet schema
    once (a Spark job) and reuses the frame in later rounds; a state it wrote itself needs no
    read at all. The rows stay the state's."""
    config = _config(tmp_path)
    stones = next_tombstones(_frame(spark, [(7, "f1.00001", None, None, True)]), None, config, 1.0, 60)
    name, _ = write_tombstones(stones, config.base_path)
    folder = Path(tombstone_folder(config.base_path))
    shutil.copytree(folder / name, folder / "tombstones-copied")  # as another process would find it
    first, jobs = _jobs_of(
        spark, "stones-first", lambda: read_tombstones(spark, config.base_path, "tombstones-copied", config)
    )
    assert jobs >= 1  # the listing and the schema
    again, jobs = _jobs_of(
        spark, "stones-again", lambda: read_tombstones(spark, config.base_path, "tombstones-copied", config)
    )
    assert again is first and jobs == 0
    written, jobs = _jobs_of(
        spark, "stones-written", lambda: read_tombstones(spark, config.base_path, name, config)
    )
    assert jobs == 0
    assert (
        [tuple(r) for r in written.collect()]
        == [tuple(r) for r in again.collect()]
        == [("7", "f1.00001", 1.0)]
    )


#: The columns of a prepared round that :func:`helpers.silver.counts.count_files` reads.
_COUNTED = (
    f"{FILE_COLUMN} string, {ROW_COLUMN} long, {KEY} string, {BAD_REASON} string, {LATE} boolean, "
    f"{OUTSIDE} boolean, {DELETED} boolean, {STONE_HIT} boolean, {TRUNCATE} boolean, {LOG_POSITION} string"
)


def test_the_per_file_counts_and_a_new_table_s_distinct_keys(spark: Any) -> None:
    """One aggregation per round (:func:`helpers.silver.counts.count_files`): per Bronze file its
    events, bad, late, deletes, events of tombstoned keys, rows' range, TOAST placeholders and
    log positions; for a new table also the distinct keys it applies (the files' sketches merged:
    a key in two files counts once; bad, late and outside events do not count)."""
    rows = [
        # file, row, key, bad reason, late, outside, deleted, stone hit, truncate, position, name
        ("a.avro", 1, "1", None, False, False, False, False, False, "0001", "x"),
        ("a.avro", 2, "2", None, False, False, True, True, False, "0002", P),
        ("a.avro", 3, None, "no key", False, False, False, False, False, None, None),
        ("a.avro", 4, "3", None, True, False, False, True, False, "0003", "y"),
        ("b.avro", 7, "1", None, False, False, False, False, False, "0005", "z"),
        ("b.avro", 8, None, None, False, False, False, False, True, "0006", None),
        ("b.avro", 9, "4", None, False, False, False, False, False, "0007", P),
        ("b.avro", 10, "9", None, False, True, False, False, False, "0008", "w"),
    ]
    events = spark.createDataFrame(rows, f"{_COUNTED}, name string")
    toast = {"name": f"name = '{P}'"}

    counts, keys = count_files(events, toast, new_table=True)

    assert counts == {
        "a.avro": FileCounts(4, 1, 1, 1, 2, 1, 4, {"name": 1}, None, "0003"),
        "b.avro": FileCounts(4, 0, 0, 0, 0, 7, 10, {"name": 1}, "0006", "0008"),
    }
    assert keys == 3  # 1 (in both files), 2 and 4; not 3 (late), 9 (outside) or the bad event
    assert count_files(events, toast, new_table=False) == (counts, 0)


def test_a_new_table_s_count_aggregates_each_event_once_without_sorting(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The distinct-key estimate comes from sketches merged over the grouped rows, not from a
    rollup: a rollup's ``Expand`` feeds every event to the aggregation twice, and with the
    positions' string maxima Spark sorts them (``bench/README.md``, "The per-file counts without a
    rollup"). Checked on the executed plan of the job ``count_files`` collects."""
    from pyspark.sql import DataFrame

    row = ("a.avro", 1, "1", None, False, False, False, False, False, "0001")
    events = spark.createDataFrame([row], _COUNTED)
    plans: list[str] = []
    collect = DataFrame.collect

    def spy(frame: Any) -> Any:
        plans.append(frame._jdf.queryExecution().executedPlan().toString())
        return collect(frame)

    monkeypatch.setattr(DataFrame, "collect", spy)
    _, keys = count_files(events, {}, new_table=True)
    assert keys == 1
    assert len(plans) == 1
    assert "ObjectHashAggregate" in plans[0]
    assert "Expand" not in plans[0] and "SortAggregate" not in plans[0], plans[0]
