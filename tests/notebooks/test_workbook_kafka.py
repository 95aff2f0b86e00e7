"""Notebook tier, local-kafka profile with its lake on the local S3 server: notebooks 01 to 03 under
papermill with the CI parameters and the profile's settings (a real KRaft broker, a Kafka Connect
worker with Debezium's plugins writing Avro with Apicurio's converter, Apicurio Registry, and the
Bronze sink on Spark's Kafka source), on a throw-away stack with free ports, Bronze and Silver at
``s3://`` URIs on S3Proxy. The notebooks are the same files as the default profile's; only
parameters differ. Checked here against the sources: Bronze after notebook 02 (each file one
object under ``year=/month=/day=``, nothing written to a local folder named ``s3:``), Silver after
notebook 03 (the official Hudi writer through Spark's s3a). The later notebooks read Silver only,
the same in both profiles; changes flowing through the broker, the worker and the sink while they
are killed are tests/integration/test_kafka_bronze_sink.py's.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from support.kafka_profile import kafka_overrides

from helpers.isolation import isolated_folder, isolated_overrides
from helpers.lake_store import open_store, use_lake_s3
from helpers.params import WorkbookParams, load_params, project_root
from helpers.pipeline import stop_all
from helpers.proc import free_port
from helpers.runner import RunResult, run_workbook

pytestmark = [pytest.mark.notebook, pytest.mark.integration]

BUCKET = "wb-kafka-lake"


@pytest.fixture(scope="module")
def kafka_run() -> Iterator[tuple[RunResult, WorkbookParams, list[str]]]:
    """The run, its parameters, and what Bronze's bucket held after it (listed before the stop)."""
    scratch = isolated_folder("wbnbk-")
    overrides: dict[str, Any] = {
        **isolated_overrides(scratch),
        "local.s3.enabled": True,
        "local.s3.port": free_port(),
        "local.s3.bucket": BUCKET,
        "lake.bronze": f"s3://{BUCKET}/bronze",
        "lake.silver": f"s3://{BUCKET}/silver",
        **kafka_overrides(avro=True),  # params/local-kafka.yaml's settings at CI scale
    }
    params = load_params("ci", overrides)
    try:
        result = run_workbook(
            "ci", overrides=overrides, only=("01", "02", "03"), run_dir=scratch / "run", progress=False
        )
        assert result.ok, result.summary()
        use_lake_s3(params)
        objects = [e.location for e in open_store(params.lake.bronze).list("", recursive=True)]
        yield result, params, objects
    finally:
        try:
            stop_all(params)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def test_notebooks_01_to_03_ran_on_the_kafka_profile(
    kafka_run: tuple[RunResult, WorkbookParams, list[str]],
) -> None:
    names = [nb.name[:2] for nb in kafka_run[0].notebooks]
    assert names == ["01", "02", "03"]


def test_02_registered_through_kafka_connect_and_bronze_on_s3_equals_the_sources(
    kafka_run: tuple[RunResult, WorkbookParams, list[str]],
) -> None:
    """The connectors ran in the Connect worker (a worker id in their status); the sink wrote each
    Bronze file as one object of the bucket, under its topic's day partition; notebook 02 listed
    those objects; and Bronze replays to every source table, nothing delivered twice."""
    run, _, objects = kafka_run
    status = pd.read_csv(run.run_dir / "02_capture_status.csv")
    assert set(status["state"]) == {"RUNNING"}
    assert status["worker"].str.startswith("127.0.0.1:").all(), status["worker"]
    avro = [o for o in objects if o.endswith(".avro")]
    assert avro and all(o.startswith(f"s3://{BUCKET}/bronze/") and "/year=" in o for o in avro), objects
    for folder in (project_root(), project_root() / "notebooks", run.run_dir):
        assert list(folder.glob("s3:*")) == [], folder  # nothing written to a local folder "s3:"
    listed = pd.read_csv(run.run_dir / "02_bronze_files.csv")
    assert len(listed) == 11 and (listed["files"] > 0).all(), listed
    assert all(n.startswith(f"{t}/year=") for t, n in zip(listed["topic"], listed["newest"], strict=True))
    bronze = pd.read_csv(run.run_dir / "02_bronze_vs_source.csv")
    assert len(bronze) == 11 and bronze["equal"].all(), bronze
    assert (bronze["source_rows"] == bronze["bronze_rows"]).all() and (bronze["redelivered"] == 0).all()


def test_03_silver_on_s3_equals_the_sources(kafka_run: tuple[RunResult, WorkbookParams, list[str]]) -> None:
    run, params, _ = kafka_run
    ingested = pd.read_csv(run.run_dir / "03_ingested.csv")
    assert ingested["files"].sum() > 0
    shown = pd.read_csv(run.run_dir / "03_reconciliation.csv")
    compared = shown[shown["equal"].notna()]
    assert len(compared) >= 8 and compared["equal"].astype(bool).all(), shown
    assert (compared["source_rows"] == compared["silver_rows"]).all()
    silver = pd.read_csv(run.run_dir / "03_silver_tables.csv")
    assert len(silver) == len(params.silver.tables), silver
