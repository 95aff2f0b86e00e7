"""Notebook tier, local-kafka profile: notebooks 01 to 03 under papermill with the CI parameters
and the profile's settings (a real KRaft broker, a Kafka Connect worker with Debezium's plugins
writing Avro with Apicurio's converter, Apicurio Registry, and the Bronze sink on Spark's Kafka
source), on a throw-away stack with free ports. The
notebooks are the same files as the default profile's; only parameters differ. Their artefacts
are checked here against the sources: Bronze after notebook 02, Silver after notebook 03. The
later notebooks read Silver only, the same in both profiles; changes flowing through the broker,
the worker and the sink while they are killed are tests/integration/test_kafka_bronze_sink.py's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.kafka_profile import free_port, kafka_overrides

from helpers.params import load_params
from helpers.pipeline import stop_all
from helpers.runner import RunResult, run_workbook

pytestmark = [pytest.mark.notebook, pytest.mark.integration]


@pytest.fixture(scope="module")
def kafka_run() -> Iterator[RunResult]:
    scratch = Path(tempfile.mkdtemp(prefix="wbnbk-", dir="/tmp"))
    scratch.chmod(0o711)
    overrides: dict[str, Any] = {
        "state_dir": str(scratch / "st"),
        "runs_dir": str(scratch / "runs"),
        "lake.bronze": str(scratch / "lake" / "bronze"),
        "lake.silver": str(scratch / "lake" / "silver"),
        "local.postgres.port": free_port(),
        "local.mariadb.port": free_port(),
        "local.metastore.port": free_port(),
        **kafka_overrides(avro=True),  # params/local-kafka.yaml's settings at CI scale
    }
    params = load_params("ci", overrides)
    try:
        result = run_workbook(
            "ci", overrides=overrides, only=("01", "02", "03"), run_dir=scratch / "run", progress=False
        )
        assert result.ok, result.summary()
        yield result
    finally:
        try:
            stop_all(params)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def test_notebooks_01_to_03_ran_on_the_kafka_profile(kafka_run: RunResult) -> None:
    names = [nb.name[:2] for nb in kafka_run.notebooks]
    assert names == ["01", "02", "03"]


def test_02_registered_through_kafka_connect_and_bronze_equals_the_sources(kafka_run: RunResult) -> None:
    """The connectors ran in the Connect worker (a worker id in their status) and the sink's Bronze
    replays to every source table."""
    status = pd.read_csv(kafka_run.run_dir / "02_capture_status.csv")
    assert set(status["state"]) == {"RUNNING"}
    assert status["worker"].str.startswith("127.0.0.1:").all(), status["worker"]
    bronze = pd.read_csv(kafka_run.run_dir / "02_bronze_vs_source.csv")
    assert len(bronze) >= 8 and bronze["equal"].all(), bronze
    assert (bronze["source_rows"] == bronze["bronze_rows"]).all()


def test_03_silver_equals_the_sources(kafka_run: RunResult) -> None:
    shown = pd.read_csv(kafka_run.run_dir / "03_reconciliation.csv")
    compared = shown[shown["equal"].notna()]
    assert len(compared) >= 8 and compared["equal"].astype(bool).all(), shown
    assert (compared["source_rows"] == compared["silver_rows"]).all()
