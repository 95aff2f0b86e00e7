"""The streamer engine on EMR: the generated files uploaded to S3 and the EMR steps added, request
by request against botocore's Stubber (helpers.deploy.streamer_steps)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from support.aws import aws_overrides

from helpers.deploy.streamer_steps import streamer_location, submit_streamer_steps
from helpers.errors import AwsError
from helpers.params import WorkbookParams, load_params
from helpers.silver.streamer import DRIVER
from helpers.silver.streamer_config import StreamerTable

OVERRIDES = aws_overrides(**{"silver.engine": "streamer", "silver.streamer.emr_cluster_id": "j-615STREAMER"})
LOCATION = "s3://test-bucket/workbook/streamer/tickit"
CONF = [
    "--conf",
    "spark.serializer=org.apache.spark.serializer.KryoSerializer",
    "--conf",
    "spark.kryo.registrator=org.apache.spark.HoodieSparkKryoRegistrar",
    "--conf",
    "spark.sql.extensions=org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "--conf",
    "spark.sql.catalog.spark_catalog=org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "--conf",
    "spark.sql.session.timeZone=UTC",
]
BUNDLE = "/usr/lib/hudi/hudi-utilities-bundle.jar"


@pytest.fixture
def params() -> WorkbookParams:
    return load_params("aws", OVERRIDES)


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber, Any, Stubber]]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    emr = boto3.client("emr", region_name="us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    with Stubber(emr) as emr_stub, Stubber(s3) as s3_stub:
        yield emr, emr_stub, s3, s3_stub
        emr_stub.assert_no_pending_responses()
        s3_stub.assert_no_pending_responses()


def _table(name: str = "sale") -> StreamerTable:
    return StreamerTable(
        name=name,
        properties=f"{LOCATION}/{name}.properties",
        source_schema=f"{LOCATION}/{name}.source.avsc",
        target_schema=f"{LOCATION}/{name}.target.avsc",
        transform_sql="SELECT `salesid` FROM <SRC>",
        base_path=f"s3://test-bucket/silver/{name}",
        table_type="COPY_ON_WRITE",
        source_class="org.apache.hudi.utilities.sources.AvroDFSSource",
    )


def _folder(tmp_path: Path) -> Path:
    for name, text in {
        "base.properties": "hoodie.datasource.write.precombine.field=_cdc_position\n",
        "sale.properties": "include=base.properties\nhoodie.table.name=sale\n",
        "sale.source.avsc": '{"type": "record", "name": "v", "fields": []}',
        "sale.target.avsc": "written by the schemas step, never uploaded",
    }.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_files_go_to_s3_and_each_table_is_a_deltastreamer_step(
    params: WorkbookParams, clients: Any, tmp_path: Path
) -> None:
    emr, emr_stub, s3, s3_stub = clients
    assert streamer_location(params) == LOCATION
    _folder(tmp_path)
    uploads = ["base.properties", "sale.properties", "sale.source.avsc", "plan.json", DRIVER.name]
    plan = {  # the driver writes the target schemas, nothing else (its "schemas" mode)
        "mode": "schemas",
        "status": "",
        "app_name": "workbook-streamer-schemas",
        "tables": [
            {
                "name": "sale",
                "source_schema": f"{LOCATION}/sale.source.avsc",
                "target_schema": f"{LOCATION}/sale.target.avsc",
                "transform_sql": "SELECT `salesid` FROM <SRC>",
                "args": _table().args(),
            }
        ],
    }
    bodies = {"plan.json": json.dumps(plan, indent=2).encode(), DRIVER.name: DRIVER.read_bytes()}
    for name in uploads:
        body = bodies[name] if name in bodies else (tmp_path / name).read_bytes()
        expected = {"Bucket": "test-bucket", "Key": f"workbook/streamer/tickit/{name}", "Body": body}
        s3_stub.add_response("put_object", {}, expected)
    schemas = {
        "Name": "workbook: streamer target schemas",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {
            "Jar": "command-runner.jar",
            "Args": [
                "spark-submit",
                "--deploy-mode",
                "cluster",
                *CONF,
                "--jars",
                BUNDLE,
                "--files",
                f"{LOCATION}/plan.json",
                f"{LOCATION}/streamer_driver.py",
                "plan.json",
            ],
        },
    }
    sale = {
        "Name": "HoodieDeltaStreamer sale",
        "ActionOnFailure": "CONTINUE",
        "HadoopJarStep": {
            "Jar": "command-runner.jar",
            "Args": [
                "spark-submit", "--deploy-mode", "cluster", *CONF,
                "--class", "org.apache.hudi.utilities.deltastreamer.HoodieDeltaStreamer", BUNDLE,
                "--props", f"{LOCATION}/sale.properties",
                "--target-base-path", "s3://test-bucket/silver/sale",
                "--target-table", "sale",
                "--table-type", "COPY_ON_WRITE",
                "--op", "UPSERT",
                "--source-class", "org.apache.hudi.utilities.sources.AvroDFSSource",
                "--source-ordering-field", "_cdc_position",
                "--payload-class", "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
                "--schemaprovider-class", "org.apache.hudi.utilities.schema.FilebasedSchemaProvider",
                "--transformer-class", "org.apache.hudi.utilities.transform.SqlQueryBasedTransformer",
                "--enable-sync",
            ],
        },
    }  # fmt: skip
    emr_stub.add_response(
        "add_job_flow_steps",
        {"StepIds": ["s-1", "s-2"]},
        {"JobFlowId": "j-615STREAMER", "Steps": [schemas, sale]},
    )
    folder = _folder(tmp_path)
    done = submit_streamer_steps(params, [_table()], folder, emr_client=emr, s3=s3, dry_run=False)
    assert done.step_ids == ["s-1", "s-2"]
    assert done.uploaded == [f"{LOCATION}/{name}" for name in uploads]


def test_the_plan_asks_the_driver_for_the_target_schemas_only(params: WorkbookParams, tmp_path: Path) -> None:
    done = submit_streamer_steps(params, [_table()], _folder(tmp_path))  # a dry run: no call
    assert [s["Name"] for s in done.steps] == [
        "workbook: streamer target schemas",
        "HoodieDeltaStreamer sale",
    ]


def test_no_cluster_or_files_for_another_folder_are_refused_before_any_call(
    params: WorkbookParams, tmp_path: Path
) -> None:
    none = load_params("aws", {**OVERRIDES, "silver.streamer.emr_cluster_id": ""})
    with pytest.raises(AwsError, match="emr_cluster_id is empty.*EMR 6.15"):
        submit_streamer_steps(none, [_table()], _folder(tmp_path))
    elsewhere = StreamerTable("sale", "/local/sale.properties", "s", "t", "q", "b", "COPY_ON_WRITE", "x")
    with pytest.raises(AwsError, match="another folder"):
        submit_streamer_steps(params, [elsewhere], _folder(tmp_path))


def test_a_refused_step_names_the_cluster(params: WorkbookParams, clients: Any, tmp_path: Path) -> None:
    emr, emr_stub, s3, s3_stub = clients
    for _ in range(5):
        s3_stub.add_response("put_object", {}, None)
    emr_stub.add_client_error("add_job_flow_steps", "ValidationException", "Cluster is terminated")
    with pytest.raises(AwsError, match="add the streamer steps to j-615STREAMER: ValidationException"):
        submit_streamer_steps(params, [_table()], _folder(tmp_path), emr_client=emr, s3=s3, dry_run=False)
