"""The one table of implementations per environment, and the openers that read it."""

from __future__ import annotations

import typing
from pathlib import Path

import boto3
import pytest
from support.aws import aws_overrides

from helpers.environments import IMPLEMENTATIONS, implementations
from helpers.errors import CaptureError
from helpers.params import WorkbookParams, load_params
from helpers.silver.backend import EmrSilver, EmrStreamerSilver, LocalSilver, StreamerSilver, open_silver
from helpers.sources.api import LocalSources, RdsSources, open_sources


def _local(tmp_path: Path) -> WorkbookParams:
    return load_params("ci", overrides={"state_dir": str(tmp_path / "st")})


def test_every_environment_has_one_row() -> None:
    declared = typing.get_args(WorkbookParams.model_fields["environment"].annotation)
    assert sorted(IMPLEMENTATIONS) == sorted(declared)


@pytest.mark.parametrize(
    ("engine", "local", "aws"),
    [("pyspark", LocalSilver, EmrSilver), ("streamer", StreamerSilver, EmrStreamerSilver)],
)
def test_the_silver_backend_follows_the_table(engine: str, local: type, aws: type, tmp_path: Path) -> None:
    for params, expected in ((_local(tmp_path), local), (load_params("aws", aws_overrides()), aws)):
        chosen = params.model_copy(update={"silver": params.silver.model_copy(update={"engine": engine})})
        assert type(open_silver(chosen)) is expected


def test_a_resnapshot_under_the_emr_streamer_steps_is_refused_with_the_repair() -> None:
    """The EMR streamer steps would drop the marker: the command says so before it signals."""
    aws = load_params("aws", aws_overrides())
    streamer = aws.model_copy(update={"silver": aws.silver.model_copy(update={"engine": "streamer"})})
    with pytest.raises(CaptureError, match=r"drop the re-snapshot marker.*silver\.engine=pyspark"):
        open_silver(streamer).resnapshot("date")


def test_a_resnapshot_of_a_table_the_streamer_reads_from_kafka_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hudi's Debezium sources never see the Bronze marker: the command says so before it signals,
    and names the switch that lets the streamer's driver apply it."""
    params = load_params(
        "local-kafka",
        {"state_dir": str(tmp_path), "silver.engine": "streamer", "silver.streamer.source": "kafka"},
    )
    monkeypatch.setattr("helpers.silver.backend.moved_to_bronze", lambda *_: False)  # still read from Kafka
    with pytest.raises(CaptureError, match=r"category: it is read from its Debezium topic.*source=bronze"):
        open_silver(params).resnapshot("ems.category")


def test_the_sources_follow_the_table(tmp_path: Path) -> None:
    local, aws = _local(tmp_path), load_params("aws", aws_overrides())
    assert (implementations(local).sources, implementations(aws).sources) == ("local", "rds")
    assert type(open_sources(local)) is LocalSources
    offline = boto3.Session(region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    assert type(open_sources(aws, boto3_session=offline)) is RdsSources  # clients made, no call sent
