"""The Bronze checkpoint kept in Silver commits: exactly once under any arrival order; the
table's state read from its newest commits, on the local file system and on S3 (moto); Bronze
listed by its own store."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest
from moto import mock_aws

from helpers.bronze.store import BronzeObject, BronzeStore
from helpers.errors import HudiError, WorkbookError
from helpers.lake_store import LocalStore, S3Store
from helpers.silver.checkpoint import CHECKPOINT_KEY, FILES_KEY, BronzeCheckpoint, plan_round
from helpers.silver.state import (
    BRONZE_OWNER_KEY,
    POSITION_KEY,
    TOMBSTONES_KEY,
    TableState,
    read_table_state,
    state_from_metadata,
)


def _obj(name: str, modified: float) -> BronzeObject:
    return BronzeObject(name, f"/b/{name}", modified)


def test_each_file_is_taken_exactly_once_whatever_order_and_timestamps() -> None:
    """Files appear in random order, many sharing a modification second, some visible only
    shortly after their modification time (within the margin); rounds run at random moments.
    Every file is taken exactly once, and the remembered names stay within the margin."""
    rng = random.Random(7)
    margin = 30.0
    files = []
    for i in range(400):
        modified = 1000.0 + rng.randrange(0, 300)  # whole seconds: many share one
        visible = modified + rng.uniform(0, margin * 0.9)
        files.append((f"t+{i:04d}+x.avro", modified, visible))
    state = BronzeCheckpoint()
    taken: list[str] = []
    now = 990.0
    while now < 1400:
        now += rng.uniform(0.1, 7)
        listing = [_obj(n, m) for n, m, v in files if v <= now]
        rng.shuffle(listing)
        new, state = plan_round(listing, state, now, margin)
        taken += [o.name for o in new]
        assert all(m >= state.watermark for n, m, _ in files if n in state.files)
    assert sorted(taken) == sorted(n for n, _, _ in files)
    assert len(taken) == len(set(taken))
    assert len(state.files) == 0  # all older than the watermark now


def test_a_round_remembers_only_files_inside_the_margin() -> None:
    listing = [_obj("a", 100.0), _obj("b", 195.0), _obj("c", 199.0)]
    new, state = plan_round(listing, BronzeCheckpoint(), listed_at=200.0, margin_s=10.0)
    assert [o.name for o in new] == ["a", "b", "c"]
    assert state == BronzeCheckpoint(190.0, frozenset({"b", "c"}))
    again, same = plan_round(listing, state, listed_at=201.0, margin_s=10.0)
    assert again == [] and same.files == {"b", "c"} and same.watermark == 191.0


def test_the_state_is_read_from_the_newest_commits_only_as_far_as_needed() -> None:
    """The checkpoint of the newest commit carrying one (older file lists united into it), the
    newest writer schema and tombstone state; the commits after all three are found are never
    read (the last one here would fail to parse)."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [{"name": "id", "type": "int"}]})

    def newest_first() -> Any:
        yield {"extraMetadata": {FILES_KEY: json.dumps(["z"]), TOMBSTONES_KEY: ""}}  # an older version
        yield {"extraMetadata": {}}  # a compaction
        yield {
            "extraMetadata": {
                CHECKPOINT_KEY: BronzeCheckpoint(5.0, frozenset({"y"})).to_json(),
                POSITION_KEY: "00000000000035724432",
                BRONZE_OWNER_KEY: "5f0c",
            }
        }
        yield {"extraMetadata": {"schema": schema}}
        raise AssertionError("read one commit too many")

    state = state_from_metadata((), newest_first())
    assert state.checkpoint == BronzeCheckpoint(5.0, frozenset({"y", "z"}))
    assert state.stored_types == {"id": pa.int32()} and state.tombstones == ""
    assert state.position == "00000000000035724432"  # recorded with the checkpoint
    assert state.bronze_owner == "5f0c"  # so is the Bronze zone's owner
    assert state_from_metadata((), []) == TableState()
    with pytest.raises(HudiError, match="Bronze checkpoint"):
        state_from_metadata((), [{"extraMetadata": {CHECKPOINT_KEY: "{not json"}}])


def test_local_listing_skips_hidden_temporary_files(tmp_path: Path) -> None:
    day = tmp_path / "t" / "year=2026" / "month=11" / "day=23"
    day.mkdir(parents=True)
    (day / "t+1+2+d.avro").write_bytes(b"Obj\x01")
    (day / ".t+3+4+d.avro.tmp").write_bytes(b"partial")
    (day / "notes.txt").write_bytes(b"not Bronze")
    listed = BronzeStore(tmp_path).list("t")
    assert [(o.name, o.size) for o in listed] == [("t+1+2+d.avro", 4)]
    copy = BronzeStore(tmp_path).copy(listed[0], BronzeStore(tmp_path / "q").lake, "files/x.avro")
    assert Path(copy).read_bytes() == b"Obj\x01"


@mock_aws
def test_s3_listing_and_timeline_reading() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="lake")
    for key in (
        "bronze/t/year=2026/month=11/day=23/t+1+5+a.avro",
        "bronze/t/year=2026/month=11/day=23/t+6+9+b.jsonl",
        "bronze/t/year=2026/month=11/day=23/.t+7+8+c.avro",
        "bronze/t2/year=2026/month=11/day=23/t2+1+1+a.avro",
    ):
        s3.put_object(Bucket="lake", Key=key, Body=b"Obj\x01header")
    store = BronzeStore("s3://lake/bronze", s3)
    listed = store.list("t")
    assert [o.name for o in listed] == ["t+1+5+a.avro", "t+6+9+b.jsonl"]
    assert listed[0].uri == "s3://lake/bronze/t/year=2026/month=11/day=23/t+1+5+a.avro"
    assert abs(listed[0].modified - dt.datetime.now(dt.UTC).timestamp()) < 120
    copied = store.copy(listed[0], S3Store("s3://lake/silver/_errors/t", s3), "files/t+1+5+a.avro")
    assert s3.get_object(Bucket="lake", Key=copied.split("/", 3)[3])["Body"].read() == b"Obj\x01header"

    state = BronzeCheckpoint(1.0, frozenset({"t+6+9+b.jsonl"}))
    timeline = "silver/sale/.hoodie/"
    s3.put_object(Bucket="lake", Key=timeline + "hoodie.properties", Body=b"")
    s3.put_object(
        Bucket="lake",
        Key=timeline + "20261123100000000.commit",
        Body=json.dumps({"extraMetadata": {CHECKPOINT_KEY: BronzeCheckpoint().to_json()}}).encode(),
    )
    s3.put_object(
        Bucket="lake",
        Key=timeline + "20261123100500000.commit",
        Body=json.dumps({"extraMetadata": {CHECKPOINT_KEY: state.to_json()}}).encode(),
    )
    s3.put_object(Bucket="lake", Key=timeline + "20261123101000000.commit.requested", Body=b"")
    s3.put_object(Bucket="lake", Key=timeline + "20261123101000000.inflight", Body=b"")
    s3.put_object(Bucket="lake", Key=timeline + "archived/20261101000000000.commit", Body=b"{}")
    for uri, expected, commits in (
        ("s3://lake/silver/sale", state, 2),
        ("s3://lake/silver/none", BronzeCheckpoint(), 0),
    ):
        table = read_table_state(uri, S3Store(uri, s3))
        assert (table.checkpoint, len(table.instants)) == (expected, commits)
    with pytest.raises(WorkbookError, match="not an s3:// URI"):
        S3Store("/local/path", s3)


def test_local_listing_walks_every_folder_below_and_a_missing_folder_lists_nothing(tmp_path: Path) -> None:
    for day in ("day=23", "day=24"):
        folder = tmp_path / "t" / "year=2026" / "month=11" / day
        folder.mkdir(parents=True)
        (folder / f"t+{day[-2:]}+1+a.avro").write_bytes(b"Obj\x01")
    (tmp_path / "t" / "year=2026" / "month=11" / "day=25").mkdir()  # an empty day
    assert [o.name for o in BronzeStore(tmp_path).list("t")] == ["t+23+1+a.avro", "t+24+1+a.avro"]
    assert BronzeStore(tmp_path).list("missing") == []
    assert LocalStore(str(tmp_path / "t" / "year=2026")).list("month=11") == []  # not recursive: folders only
    day = LocalStore(str(tmp_path)).list("t/year=2026/month=11/day=24")
    assert [e.name for e in day] == ["t+24+1+a.avro"]


def test_the_state_is_read_again_exactly_when_the_timeline_changes(tmp_path: Path) -> None:
    timeline = tmp_path / "sale" / ".hoodie"
    timeline.mkdir(parents=True)

    def commit(instant: str, watermark: float) -> Path:
        path = timeline / f"{instant}.commit"
        meta = {"extraMetadata": {CHECKPOINT_KEY: BronzeCheckpoint(watermark, frozenset()).to_json()}}
        path.write_text(json.dumps(meta))
        return path

    commit("20261128100000000", 1.0)
    first = read_table_state(str(tmp_path / "sale"))
    assert read_table_state(str(tmp_path / "sale")) is first  # same listing: the same state, not re-read
    newest = commit("20261128100500000", 2.0)
    assert read_table_state(str(tmp_path / "sale")).checkpoint.watermark == 2.0
    newest.unlink()  # as a rollback of that commit leaves the timeline
    assert read_table_state(str(tmp_path / "sale")).checkpoint.watermark == 1.0
