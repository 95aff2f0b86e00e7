"""The EMR cluster: its RunJobFlow request, request by request against botocore's Stubber, and the
check of a running cluster naming each missing piece with its fix."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from support.aws import aws_overrides

from helpers.deploy.emr import check_cluster, create_cluster
from helpers.errors import AwsError
from helpers.params import WorkbookParams, load_params

OVERRIDES = aws_overrides(**{"aws.emr.subnet_id": "subnet-0abc"})
VERSION = importlib.metadata.version("cdc-lakehouse-workbook")
BOOTSTRAP = f"s3://test-bucket/workbook/{VERSION}/emr-bootstrap.sh"
GLUE_FACTORY = "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"
GLUE = {"hive.metastore.client.factory.class": GLUE_FACTORY}
SPARK_DEFAULTS = {
    "spark.jars": "/usr/lib/hudi/hudi-spark-bundle.jar",
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.sql.hive.convertMetastoreParquet": "false",
}
CONFIGURATIONS = [
    {"Classification": "spark-hive-site", "Properties": GLUE},
    {"Classification": "hive-site", "Properties": GLUE},
    {"Classification": "spark-defaults", "Properties": SPARK_DEFAULTS},
    {  # the Python the bootstrap action installs the workbook into
        "Classification": "spark-env",
        "Configurations": [
            {"Classification": "export", "Properties": {"PYSPARK_PYTHON": "/usr/bin/python3.11"}}
        ],
        "Properties": {},
    },
]
APPLICATIONS = ["Hadoop", "Spark", "Hive", "JupyterEnterpriseGateway", "Livy"]

#: What the workbook's cluster must be, written out: a change of release, application, Glue or
#: Hudi setting, or bootstrap action in helpers/deploy/emr.py fails the test.
EXPECTED_REQUEST = {
    "Name": "cdc-lakehouse-workbook",
    "ReleaseLabel": "emr-7.12.0",  # Spark 3.5.6-amzn-1, Hudi 1.0.2-amzn-1
    "LogUri": "s3://test-bucket/emr-logs/",
    "Applications": [{"Name": name} for name in APPLICATIONS],
    "Configurations": CONFIGURATIONS,
    "Instances": {
        "InstanceGroups": [
            {
                "Name": "primary",
                "InstanceRole": "MASTER",
                "Market": "ON_DEMAND",
                "InstanceType": "m5.xlarge",
                "InstanceCount": 1,
            },
            {
                "Name": "core",
                "InstanceRole": "CORE",
                "Market": "ON_DEMAND",
                "InstanceType": "m5.xlarge",
                "InstanceCount": 2,
            },
        ],
        "Ec2SubnetId": "subnet-0abc",
        "KeepJobFlowAliveWhenNoSteps": True,
        "TerminationProtected": False,
    },
    "BootstrapActions": [{"Name": "workbook", "ScriptBootstrapAction": {"Path": BOOTSTRAP, "Args": []}}],
    "ServiceRole": "EMR_DefaultRole",
    "JobFlowRole": "EMR_EC2_DefaultRole",
    "VisibleToAllUsers": True,
    "AutoTerminationPolicy": {"IdleTimeout": 3600},
    "Tags": [{"Key": "project", "Value": "tickit"}, {"Key": "created-by", "Value": "workbook"}],
}


@pytest.fixture
def params() -> WorkbookParams:
    return load_params("aws", OVERRIDES)


@pytest.fixture
def emr(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber]]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    client = boto3.client("emr", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_create_sends_exactly_the_workbook_cluster_request(params: WorkbookParams, emr: Any) -> None:
    """Expected: one RunJobFlow with release emr-7.12.0, the five applications, Glue as the
    metastore of Spark and Hive, the Hudi bundle and settings, the package's bootstrap script."""
    client, stub = emr
    arn = "arn:aws:elasticmapreduce:us-east-1:123456789012:cluster/j-1ABC"
    stub.add_response("run_job_flow", {"JobFlowId": "j-1ABC", "ClusterArn": arn}, EXPECTED_REQUEST)
    created = create_cluster(params, dry_run=False, emr_client=client)
    assert (created.cluster_id, created.cluster_arn) == ("j-1ABC", arn)
    assert created.request == EXPECTED_REQUEST


def test_dry_run_makes_no_call(params: WorkbookParams, emr: Any) -> None:
    """Expected: the same request comes back and the stubbed client sees no call (an unexpected
    call on a Stubber with nothing queued raises)."""
    client, _ = emr
    created = create_cluster(params, emr_client=client)
    assert created.cluster_id is None
    assert created.request == EXPECTED_REQUEST


def test_a_wrong_release_label_or_no_subnet_is_refused_before_any_call(emr: Any) -> None:
    client, _ = emr
    wrong = load_params("aws", {**OVERRIDES, "aws.emr.release_label": "emr-7.10.0"})
    with pytest.raises(AwsError, match=r"emr-7\.10\.0.*Hudi 1\.0\.2"):
        create_cluster(wrong, dry_run=False, emr_client=client)
    no_subnet = load_params("aws", {**OVERRIDES, "aws.emr.subnet_id": ""})
    with pytest.raises(AwsError, match="aws.emr.subnet_id is empty"):
        create_cluster(no_subnet, dry_run=False, emr_client=client)


def test_create_names_the_cluster_when_emr_refuses(params: WorkbookParams, emr: Any) -> None:
    client, stub = emr
    stub.add_client_error(
        "run_job_flow", "ValidationException", "Invalid InstanceProfile: EMR_EC2_DefaultRole.", 400
    )
    with pytest.raises(AwsError, match="create EMR cluster 'cdc-lakehouse-workbook'.*InstanceProfile"):
        create_cluster(params, dry_run=False, emr_client=client)


def _cluster(**changes: Any) -> dict[str, Any]:
    cluster = {
        "Id": "j-1ABC",
        "Name": "cdc-lakehouse-workbook",
        "Status": {"State": "WAITING"},
        "ReleaseLabel": "emr-7.12.0",
        "Applications": [{"Name": name, "Version": "1"} for name in APPLICATIONS],
        "Configurations": CONFIGURATIONS,
    }
    cluster.update(changes)
    return {"Cluster": cluster}


def _bootstrap(path: str = BOOTSTRAP) -> dict[str, Any]:
    return {"BootstrapActions": [{"Name": "workbook", "ScriptPath": path, "Args": []}]}


def test_check_passes_the_cluster_create_makes(params: WorkbookParams, emr: Any) -> None:
    client, stub = emr
    stub.add_response("describe_cluster", _cluster(), {"ClusterId": "j-1ABC"})
    stub.add_response("list_bootstrap_actions", _bootstrap(), {"ClusterId": "j-1ABC"})
    findings = check_cluster("j-1ABC", params, client)
    assert [f.check for f in findings if not f.passed] == []
    assert len(findings) == 1 + 1 + 5 + 2 + 1 + 5 + 1


def test_check_names_each_missing_piece_with_its_fix(params: WorkbookParams, emr: Any) -> None:
    """A cluster on EMR 7.10 (Hudi 0.15), without JupyterEnterpriseGateway, with Spark's catalog
    left on the cluster's own metastore and no Hudi bundle in spark.jars. Expected: exactly those
    four findings fail, each saying what to do."""
    client, stub = emr
    broken_defaults = {k: v for k, v in SPARK_DEFAULTS.items() if k != "spark.jars"}
    broken = _cluster(
        ReleaseLabel="emr-7.10.0",
        Applications=[{"Name": n, "Version": "1"} for n in APPLICATIONS if n != "JupyterEnterpriseGateway"],
        Configurations=[
            {"Classification": "spark-hive-site", "Properties": {}},
            {"Classification": "hive-site", "Properties": GLUE},
            {"Classification": "spark-defaults", "Properties": broken_defaults},
        ],
    )
    stub.add_response("describe_cluster", broken, {"ClusterId": "j-1ABC"})
    stub.add_response("list_bootstrap_actions", _bootstrap(), {"ClusterId": "j-1ABC"})
    failed = {f.check: f for f in check_cluster("j-1ABC", params, client) if not f.passed}
    assert sorted(failed) == [
        "Glue catalog (spark-hive-site)",
        "Hudi jars (spark-defaults spark.jars)",
        "application JupyterEnterpriseGateway",
        "release label",
    ]
    release = failed["release label"]
    assert release.actual == "emr-7.10.0" and "emr-7.12.0" in (release.fix or "")
    assert "cluster create" in (failed["application JupyterEnterpriseGateway"].fix or "")
    glue = failed["Glue catalog (spark-hive-site)"]
    assert glue.actual == "not set" and "AWSGlueDataCatalogHiveClientFactory" in (glue.fix or "")
    assert "/usr/lib/hudi/hudi-spark-bundle.jar" in (
        failed["Hudi jars (spark-defaults spark.jars)"].fix or ""
    )


def test_check_names_a_missing_bootstrap_action_and_a_stopped_cluster(
    params: WorkbookParams, emr: Any
) -> None:
    client, stub = emr
    stub.add_response("describe_cluster", _cluster(Status={"State": "TERMINATED"}), {"ClusterId": "j-1ABC"})
    stub.add_response(
        "list_bootstrap_actions", {"BootstrapActions": [], "Marker": "m1"}, {"ClusterId": "j-1ABC"}
    )
    stub.add_response(
        "list_bootstrap_actions", _bootstrap("s3://other/boot.sh"), {"ClusterId": "j-1ABC", "Marker": "m1"}
    )
    failed = {f.check: f for f in check_cluster("j-1ABC", params, client) if not f.passed}
    assert sorted(failed) == ["bootstrap action", "state"]
    assert failed["bootstrap action"].actual == "s3://other/boot.sh"
    assert "./workbook package --upload" in (failed["bootstrap action"].fix or "")


def test_check_names_the_cluster_on_an_api_error(params: WorkbookParams, emr: Any) -> None:
    client, stub = emr
    stub.add_client_error("describe_cluster", "InvalidRequestException", "Cluster id 'j-NOPE' is not valid.")
    with pytest.raises(AwsError, match="describe EMR cluster j-NOPE: InvalidRequestException"):
        check_cluster("j-NOPE", params, client)
