"""Tombstones of hard-deleted keys: a late older change never brings a deleted row back."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from helpers.hudi.config import HudiTableConfig
from helpers.silver.tombstones import (
    TOMBSTONES_KEY,
    drop_late_events,
    next_tombstones,
    prune_tombstone_files,
    read_tombstones,
    tombstone_file_of,
    write_tombstones,
)


def _config(tmp_path: Path) -> HudiTableConfig:
    return HudiTableConfig(
        table_name="t",
        base_path=str(tmp_path / "t"),
        record_key_fields=("id",),
        ordering_fields=("pos",),
    )


def _events(rows: list[tuple[int, str, int, bool]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int32()),
            "pos": [f"{r[1]}.{r[2]:05d}" for r in rows],
            "v": [f"v{r[2]}" for r in rows],
            "_hoodie_is_deleted": [r[3] for r in rows],
        }
    )


def test_changes_not_newer_than_the_delete_are_dropped(tmp_path: Path) -> None:
    config = _config(tmp_path)
    stones = next_tombstones(
        _events([(1, "f2", 5, True)]), config, read_tombstones("", "", config), 100.0, 60
    )
    assert stones.column("_hoodie_record_key").to_pylist() == ["1"]
    batch = _events([(1, "f1", 9, False), (1, "f2", 5, False), (1, "f2", 6, False), (2, "f1", 1, False)])
    kept, dropped = drop_late_events(batch, config, stones)
    assert dropped == 2
    assert list(zip(kept.column("id").to_pylist(), kept.column("pos").to_pylist(), strict=True)) == [
        (1, "f2.00006"),
        (2, "f1.00001"),
    ]


def test_state_follows_the_newest_change_and_expires(tmp_path: Path) -> None:
    config = _config(tmp_path)
    empty = read_tombstones("", "", config)
    first = next_tombstones(_events([(1, "f1", 1, True), (2, "f1", 2, True)]), config, empty, 100.0, 60)
    # key 1 re-inserted later; key 3 inserted then deleted in one batch; key 2 untouched
    second = next_tombstones(
        _events([(1, "f1", 3, False), (3, "f1", 4, False), (3, "f1", 5, True)]), config, first, 130.0, 60
    )
    got = {r["_hoodie_record_key"]: (r["pos"], r["_deleted_at"]) for r in second.to_pylist()}
    assert got == {"2": ("f1.00002", 100.0), "3": ("f1.00005", 130.0)}
    later = next_tombstones(_events([]), config, second, 170.0, 60)  # key 2's tombstone expired
    assert later.column("_hoodie_record_key").to_pylist() == ["3"]


def test_state_files_round_trip_and_only_the_named_one_stays(tmp_path: Path) -> None:
    config = _config(tmp_path)
    stones = next_tombstones(_events([(7, "f1", 1, True)]), config, read_tombstones("", "", config), 1.0, 60)
    old = write_tombstones(config.base_path, stones)
    new = write_tombstones(config.base_path, stones)
    assert read_tombstones(config.base_path, new, config).equals(stones)
    assert prune_tombstone_files(config.base_path, keep=new) == 1
    folder = Path(config.base_path).parent / ".workbook" / "tombstones" / "t"
    assert (folder / new).exists() and not (folder / old).exists()
    assert not Path(config.base_path).exists()  # the table's folder is the writer's alone
    metas = [
        {"extraMetadata": {}},
        {"extraMetadata": {TOMBSTONES_KEY: new}},
        {"extraMetadata": {TOMBSTONES_KEY: old}},
    ]
    assert tombstone_file_of(metas) == new and tombstone_file_of([]) == ""
