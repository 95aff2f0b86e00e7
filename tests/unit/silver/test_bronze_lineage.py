"""A Silver round checks that its Bronze zone is the history the table was built from
(:func:`helpers.silver.tables.bronze_lineage`), on zones claimed by the capture's own code on the
local file system."""

from __future__ import annotations

import shutil
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from helpers.bronze.store import BronzeOwner, BronzeStore
from helpers.capture.owner import claim_bronze, state_id
from helpers.errors import BronzeError, CaptureError
from helpers.silver.state import TableState
from helpers.silver.tables import bronze_lineage


def test_a_zone_without_an_owner_record_is_neither_checked_nor_recorded(tmp_path: Path) -> None:
    """A zone made before owner records, or by another writer (a Kafka Connect S3 sink on AWS)."""
    (tmp_path / "bronze").mkdir()
    state = TableState(bronze_owner="recorded-earlier")
    assert bronze_lineage(BronzeStore(tmp_path / "bronze"), state, "category", "/silver/category") is None


def test_the_zone_s_owner_is_recorded_and_the_same_owner_goes_on(tmp_path: Path) -> None:
    bronze = tmp_path / "bronze"
    claim_bronze(bronze, tmp_path / "st")
    store, me = BronzeStore(bronze), state_id(tmp_path / "st")
    assert bronze_lineage(store, TableState(), "category", "/silver/category") == me  # a new table
    assert bronze_lineage(store, TableState(bronze_owner=me), "category", "/silver/category") == me


def test_a_zone_made_again_by_another_state_is_refused_naming_both(tmp_path: Path) -> None:
    bronze, old, new = tmp_path / "bronze", tmp_path / "old", tmp_path / "new"
    claim_bronze(bronze, old)
    built_from = TableState(bronze_owner=state_id(old))
    shutil.rmtree(bronze)
    claim_bronze(bronze, new)
    with pytest.raises(BronzeError) as refused:
        bronze_lineage(BronzeStore(bronze), built_from, "category", "/silver/category")
    message = str(refused.value)
    assert f"Failed to ingest Bronze zone {bronze} into Silver table category at /silver/category" in message
    assert f"(id {state_id(old)})" in message and f"state {state_id(new)} ({new.resolve()})" in message
    assert "delete lake.silver" in message and "go back to the Bronze zone" in message


@mock_aws
@pytest.mark.parametrize("root", ["s3://lake/bronze", "s3://lake"])
def test_an_s3_zone_is_claimed_and_checked_under_a_prefix_and_at_a_bucket_s_root(
    root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner object sits at the zone's root, also when that is the bucket's own root (whose
    listing has no folder prefix)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="lake")
    store = BronzeStore(root, s3)
    assert store.owner() is None
    claim_bronze(root, tmp_path / "old")
    assert store.owner() == BronzeOwner(state_id(tmp_path / "old"), str((tmp_path / "old").resolve()))
    with pytest.raises(CaptureError, match="another state directory"):
        claim_bronze(root, tmp_path / "new")
    with pytest.raises(
        BronzeError, match=f"built from the Bronze of another capture state .*{state_id(tmp_path / 'old')}"
    ):
        bronze_lineage(
            store, TableState(bronze_owner="a-table-of-another-zone"), "sale", "s3://lake/silver/sale"
        )
