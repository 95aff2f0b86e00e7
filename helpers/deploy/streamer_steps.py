"""``silver.engine: streamer`` on AWS: the generated HoodieStreamer files go to S3 and each Silver
table is one EMR step, ``spark-submit --class ...HoodieDeltaStreamer`` with the cluster's own Hudi
utilities bundle, as in the original posts (``docs/streamer.md``, "On EMR").

The cluster is an EMR 6.15 one (Hudi 0.14.0 on Spark 3.4, the pair the local streamer runtime
pins), given by ``silver.streamer.emr_cluster_id``; the notebooks' EMR 7 cluster
(:mod:`helpers.deploy.emr`) has no utilities bundle of that version. The first step writes every
table's target schema (:mod:`helpers.silver.streamer_driver` in its ``schemas`` mode, the same
code as locally); one ``HoodieDeltaStreamer`` step per table follows, reading the properties,
schemas and Bronze on S3 and syncing the table to the Glue Data Catalog.

Example:
    >>> tables = write_streamer_config(params, folder, location=streamer_location(params))  # doctest: +SKIP
    >>> submit_streamer_steps(params, tables, folder, dry_run=False).step_ids            # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.deploy.emr import aws_settings, open_emr_client
from helpers.errors import AwsError
from helpers.lake_store import join, s3_client, split_s3
from helpers.params import WorkbookParams
from helpers.silver.streamer import DELTASTREAMER_CLASS, DRIVER, SPARK_CONF
from helpers.silver.streamer_config import StreamerTable
from helpers.sources.rds_cdc import call_aws

__all__ = ["StreamerSubmission", "streamer_location", "streamer_steps", "submit_streamer_steps"]

#: Spark settings of the posts' DeltaStreamer steps (Kryo with Hudi's registrar); EMR binds and
#: sizes the rest.
STEP_CONF = {
    k: v for k, v in SPARK_CONF.items() if k.startswith(("spark.serializer", "spark.kryo", "spark.sql."))
}


@dataclass(frozen=True)
class StreamerSubmission:
    """What :func:`submit_streamer_steps` did: the files uploaded, the steps, their ids (none on a
    dry run)."""

    uploaded: list[str]
    steps: list[dict[str, Any]]
    step_ids: list[str] = field(default_factory=list)


def streamer_location(params: WorkbookParams) -> str:
    """The S3 folder of the generated files: ``s3://<package bucket>/<prefix>/streamer/<project>``."""
    aws = aws_settings(params, "upload the streamer's files")
    bucket = aws.package.bucket or aws.s3_bucket
    return f"s3://{bucket}/{aws.package.prefix.strip('/')}/streamer/{params.project}"


def _spark_submit(name: str, args: list[str]) -> dict[str, Any]:
    return {
        "Name": name,
        "ActionOnFailure": "CONTINUE",  # a failed table leaves the others and the cluster running
        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["spark-submit", *args]},
    }


def streamer_steps(
    params: WorkbookParams, tables: list[StreamerTable], location: str
) -> list[dict[str, Any]]:
    """The EMR steps: the target schemas, then one ``HoodieDeltaStreamer`` per table (run once;
    schedule the steps again for the next batch, or pass ``--continuous`` in a long-running step).
    """
    bundle = params.silver.streamer.emr_utilities_jar
    conf = [arg for k, v in STEP_CONF.items() for arg in ("--conf", f"{k}={v}")]
    steps = [
        _spark_submit(
            "workbook: streamer target schemas",
            [
                "--deploy-mode",
                "cluster",
                *conf,
                "--jars",
                bundle,
                "--files",
                join(location, "plan.json"),
                join(location, DRIVER.name),
                "plan.json",
            ],
        )
    ]
    for table in tables:
        sync = ["--enable-sync"] if params.silver.sync else []
        steps.append(
            _spark_submit(
                f"HoodieDeltaStreamer {table.name}",
                [
                    "--deploy-mode",
                    "cluster",
                    *conf,
                    "--class",
                    DELTASTREAMER_CLASS,
                    bundle,
                    *table.args(),
                    *sync,
                ],
            )
        )
    return steps


def _plan(tables: list[StreamerTable]) -> dict[str, Any]:
    return {
        "mode": "schemas",
        "status": "",
        "app_name": "workbook-streamer-schemas",
        "tables": [t.plan_entry() for t in tables],
    }


def submit_streamer_steps(
    params: WorkbookParams,
    tables: list[StreamerTable],
    folder: Path,
    *,
    emr_client: Any = None,
    s3: Any = None,
    dry_run: bool = True,
) -> StreamerSubmission:
    """Upload the files of ``folder`` (written by :func:`helpers.silver.streamer_config.write_streamer_config`
    with ``location=streamer_location(params)``), the plan and the driver to S3, then add the steps
    to ``silver.streamer.emr_cluster_id``. A dry run calls nothing and returns the steps.

    Raises:
        AwsError: when no cluster is given, or S3 or EMR refuses (naming the call).
    """
    location = streamer_location(params)
    cluster = params.silver.streamer.emr_cluster_id
    if not cluster:
        raise AwsError(
            "Failed to submit the streamer steps: silver.streamer.emr_cluster_id is empty (the j-... of an "
            "EMR 6.15 cluster: Hudi 0.14.0 on Spark 3.4)"
        )
    if any(not t.properties.startswith(location) for t in tables):
        raise AwsError(
            f"Failed to submit the streamer steps: the files name another folder than {location}; write them "
            "with write_streamer_config(params, folder, location=streamer_location(params))"
        )
    steps = streamer_steps(params, tables, location)
    files = sorted(
        p for p in folder.iterdir() if p.suffix in (".properties", ".avsc") and ".target." not in p.name
    )
    bodies = {p.name: p.read_bytes() for p in files}
    bodies["plan.json"] = json.dumps(_plan(tables), indent=2).encode()
    bodies[DRIVER.name] = DRIVER.read_bytes()
    uploaded = [join(location, name) for name in bodies]
    if dry_run:
        return StreamerSubmission(uploaded, steps)
    s3 = s3 if s3 is not None else s3_client(params.aws.region if params.aws else None)
    bucket, prefix = split_s3(location)
    for name, body in bodies.items():
        key = f"{prefix}/{name}"
        call_aws(
            f"upload s3://{bucket}/{key}", lambda k=key, b=body: s3.put_object(Bucket=bucket, Key=k, Body=b)
        )
    emr_client = emr_client or open_emr_client(params)
    response = call_aws(
        f"add the streamer steps to {cluster}",
        lambda: emr_client.add_job_flow_steps(JobFlowId=cluster, Steps=steps),
    )
    return StreamerSubmission(uploaded, steps, list(response.get("StepIds", [])))
