"""The command line's AWS paths: ``cluster create|check`` and ``run --env aws``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

import helpers.cli
from helpers.cli import main
from helpers.deploy import emr
from helpers.runner import NotebookResult, RunResult

AWS = [
    "--set", "aws.s3_bucket=test-bucket",
    "--set", "aws.rds.postgres.instance_id=ems-pg",
    "--set", "aws.rds.mysql.instance_id=ecomm-my",
    "--set", "aws.rds.sqlserver.instance_id=crm-ss",
    "--set", "lake.bronze=s3://test-bucket/bronze",
    "--set", "lake.silver=s3://test-bucket/silver",
    "--set", "aws.emr.subnet_id=subnet-0abc",
]  # fmt: skip


def test_cluster_create_is_a_dry_run_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Expected: the request printed as JSON, exit 0, and no AWS call (no credentials are set)."""
    assert main(["cluster", "create", *AWS]) == 0
    captured = capsys.readouterr()
    request = json.loads(captured.out)
    assert request["ReleaseLabel"] == "emr-7.12.0" and request["Instances"]["Ec2SubnetId"] == "subnet-0abc"
    assert "--apply" in captured.err


def test_cluster_create_without_a_subnet_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "create", *AWS, "--set", "aws.emr.subnet_id=''"]) == 2
    assert "aws.emr.subnet_id is empty" in capsys.readouterr().err


def test_cluster_check_prints_the_findings_and_fails_on_a_missing_piece(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster with nothing of the workbook's set-up. Expected: exit 1, the Glue line says FAIL."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    client = boto3.client("emr", region_name="us-east-1")
    monkeypatch.setattr(emr, "open_emr_client", lambda params: client)
    with Stubber(client) as stub:
        cluster = {"Id": "j-1", "Status": {"State": "WAITING"}, "ReleaseLabel": "emr-7.12.0"}
        stub.add_response("describe_cluster", {"Cluster": cluster}, {"ClusterId": "j-1"})
        stub.add_response("list_bootstrap_actions", {"BootstrapActions": []}, {"ClusterId": "j-1"})
        assert main(["cluster", "check", *AWS, "--cluster-id", "j-1"]) == 1
        stub.assert_no_pending_responses()
    lines = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "FAIL" in lines["Glue catalog (spark-hive-site)"]
    assert " ok " in lines["release label"]


def test_cluster_check_needs_a_cluster_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "check", *AWS]) == 2
    assert "--cluster-id" in capsys.readouterr().err


def test_run_env_aws_goes_to_notebook_executions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Expected: the AWS path gets the same options as the local runner, and its failure is exit 1."""
    seen: dict[str, Any] = {}

    def fake(
        env: str,
        overrides: Mapping[str, Any],
        only: Sequence[str],
        run_dir: Path | None,
        progress: bool,
    ) -> RunResult:
        seen.update(env=env, overrides=overrides, only=only, run_dir=run_dir, progress=progress)
        failed = NotebookResult("01_enable_cdc.ipynb", tmp_path / "01", 1.0, False, "ex-1 FAILED")
        return RunResult(env, tmp_path, [failed])

    monkeypatch.setattr(helpers.cli, "run_notebook_executions", fake)
    monkeypatch.setattr(helpers.cli, "run_workbook", None)  # the local path must not be taken
    argv = ["run", "--env", "aws", "--only", "01", "--no-progress", "--set", "aws.emr.cluster_id=j-1"]
    assert main([*argv, "--run-dir", str(tmp_path)]) == 1
    assert seen == {
        "env": "aws",
        "overrides": {"aws.emr.cluster_id": "j-1"},
        "only": ["01"],
        "run_dir": tmp_path,
        "progress": False,
    }
    assert "FAIL 01_enable_cdc.ipynb" in capsys.readouterr().out
