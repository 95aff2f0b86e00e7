"""A Bronze zone belongs to the state directory whose capture first wrote it
(:mod:`helpers.capture.owner`): on the local file system, as the embedded workers write it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.bronze.store import BronzeStore
from helpers.capture.owner import OWNER_FILE, claim_bronze, state_id
from helpers.errors import BronzeError, CaptureError


def test_a_state_claims_a_new_zone_and_keeps_it(tmp_path: Path) -> None:
    bronze, state = tmp_path / "bronze", tmp_path / "st"
    claim_bronze(bronze, state)
    owner = json.loads((bronze / OWNER_FILE).read_text())
    assert owner == {"state_id": state_id(state), "state_dir": str(state.resolve())}
    assert len(owner["state_id"]) == 32 and state_id(state) == owner["state_id"]  # made once
    claim_bronze(bronze, state)  # its own zone: goes on, unchanged
    assert json.loads((bronze / OWNER_FILE).read_text()) == owner


def test_a_zone_from_before_the_owner_file_is_claimed_by_the_first_state(tmp_path: Path) -> None:
    bronze = tmp_path / "bronze"
    event = bronze / "tickit.ems.venue" / "year=2026" / "month=12" / "day=04" / "a.avro"
    event.parent.mkdir(parents=True)
    event.write_bytes(b"events")
    claim_bronze(bronze, tmp_path / "st")
    assert json.loads((bronze / OWNER_FILE).read_text())["state_dir"] == str((tmp_path / "st").resolve())


def test_another_state_is_refused_naming_both_and_the_ways_out(tmp_path: Path) -> None:
    bronze, first, second = tmp_path / "bronze", tmp_path / "old", tmp_path / "new"
    claim_bronze(bronze, first)
    with pytest.raises(CaptureError) as refused:
        claim_bronze(bronze, second)
    message = str(refused.value)
    assert f"Failed to start capture into Bronze zone {bronze}" in message
    assert f"({first.resolve()}) wrote it, not this one ({second.resolve()})" in message
    assert "--set lake.bronze=... --set lake.silver=..." in message and "deleting" in message
    assert json.loads((bronze / OWNER_FILE).read_text())["state_dir"] == str(first.resolve())  # kept


def test_a_deleted_state_directory_is_another_state(tmp_path: Path) -> None:
    """The case the check is for: ``.state`` deleted, ``lake/`` kept; the new state directory at
    the same path has a new id."""
    bronze, state = tmp_path / "bronze", tmp_path / "st"
    claim_bronze(bronze, state)
    (state / "capture" / "state-id").unlink()
    with pytest.raises(CaptureError) as refused:
        claim_bronze(bronze, state)
    assert (
        f"an earlier state directory at this same path ({state.resolve()}), deleted or made again since"
        in str(refused.value)
    )


def test_an_unreadable_owner_file_names_its_location(tmp_path: Path) -> None:
    bronze = tmp_path / "bronze"
    bronze.mkdir()
    (bronze / OWNER_FILE).write_text("{not json")
    unreadable = f"Failed to read the owner of Bronze zone {bronze} from .*{OWNER_FILE}"
    with pytest.raises(CaptureError, match=unreadable):
        claim_bronze(bronze, tmp_path / "st")
    (bronze / OWNER_FILE).write_text('{"state_dir": "no id"}')
    with pytest.raises(BronzeError, match=unreadable):  # the one reader, Silver's check reads with it
        BronzeStore(bronze).owner()
