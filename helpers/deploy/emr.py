"""The EMR cluster the notebooks run on: its ``RunJobFlow`` request built from ``aws.emr``
(:func:`cluster_request`), creating it (:func:`create_cluster`, a dry run by default) and checking a
running one for what the workbook needs (:func:`check_cluster`).

The cluster runs what the workbook runs locally: Spark 3.5.6 with the Hudi 1.0.2 bundle EMR ships
(``/usr/lib/hudi/hudi-spark-bundle.jar``), the same Hudi Spark settings as :mod:`helpers.spark`,
and the Glue Data Catalog as the Hive metastore Hudi's Hive sync registers the Silver tables in.
JupyterEnterpriseGateway and Livy let an EMR Studio workspace attach to it.

Example:
    >>> request = cluster_request(load_params("aws", overrides))  # doctest: +SKIP
    >>> create_cluster(params, dry_run=False).cluster_id          # doctest: +SKIP
    'j-2AXXXXXXGAPLF'
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from helpers.deploy.package import BOOTSTRAP_NAME, EMR_PYTHON, package_location
from helpers.errors import AwsError
from helpers.params import AwsParams, WorkbookParams
from helpers.sources.rds_cdc import call_aws
from helpers.spark import DEFAULT_SPARK_CONF

__all__ = [
    "APPLICATIONS",
    "GLUE_CLIENT_FACTORY",
    "HUDI_BUNDLE",
    "HUDI_SPARK_SETTINGS",
    "SUPPORTED_RELEASES",
    "ClusterCreation",
    "ClusterFinding",
    "aws_settings",
    "bootstrap_path",
    "check_cluster",
    "cluster_configurations",
    "cluster_request",
    "create_cluster",
    "open_emr_client",
]

#: EMR releases that ship Spark 3.5.6 and Hudi 1.0.2, the versions the project pins (pyspark 3.5.6,
#: hudi-spark3.5-bundle 1.0.2): emr-7.11.0 (Hudi 1.0.2-amzn-0), emr-7.12.0 (1.0.2-amzn-1) and
#: emr-7.13.0 (1.0.2-amzn-2), after the EMR release guide's Spark and Hudi release histories. 7.3 to
#: 7.10 ship Hudi 0.15.0, which the workbook's table version 6 writes with 1.0.2 options do not suit.
SUPPORTED_RELEASES = ("emr-7.11", "emr-7.12", "emr-7.13")

#: Spark and Hadoop for the notebooks; Hive so that the ``hive-site`` classification (the Glue
#: client Hudi's Hive sync uses) applies; JupyterEnterpriseGateway and Livy for EMR Studio.
APPLICATIONS = ("Hadoop", "Spark", "Hive", "JupyterEnterpriseGateway", "Livy")

#: The Hive metastore client that talks to the Glue Data Catalog.
GLUE_CLIENT_FACTORY = "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"

#: The Hudi Spark bundle EMR installs (a link to the versioned jar).
HUDI_BUNDLE = "/usr/lib/hudi/hudi-spark-bundle.jar"

#: The Hudi settings of every local session (:data:`helpers.spark.DEFAULT_SPARK_CONF`): Kryo with
#: Hudi's registrar, Hudi's SQL extension and catalog, Hudi's own Parquet reading.
HUDI_SPARK_SETTINGS: Mapping[str, str] = {
    key: DEFAULT_SPARK_CONF[key]
    for key in (
        "spark.serializer",
        "spark.kryo.registrator",
        "spark.sql.extensions",
        "spark.sql.catalog.spark_catalog",
        "spark.sql.hive.convertMetastoreParquet",
    )
}

_GLUE_KEY = "hive.metastore.client.factory.class"
_READY_STATES = ("WAITING", "RUNNING")
_RECREATE = "create a new cluster: python -m helpers.cli cluster create --env aws --apply"


@dataclass(frozen=True)
class ClusterCreation:
    """The ``RunJobFlow`` request, and the new cluster's id (``None`` for a dry run)."""

    request: dict[str, Any]
    cluster_id: str | None = None
    cluster_arn: str | None = None


@dataclass(frozen=True)
class ClusterFinding:
    """One thing the workbook needs from a cluster, what the cluster has, and how to fix it."""

    check: str
    expected: str
    actual: str
    passed: bool
    fix: str | None


def aws_settings(params: WorkbookParams, what: str) -> AwsParams:
    """The ``aws`` section of ``params``.

    Raises:
        AwsError: naming ``what`` when the section is missing (parameters not loaded with ``--env aws``).
    """
    if params.aws is None:
        raise AwsError(f"Failed to {what}: the parameters have no 'aws' section; load them with env 'aws'")
    return params.aws


def open_emr_client(params: WorkbookParams) -> Any:
    """A boto3 EMR client in ``aws.region``."""
    import boto3

    return boto3.client("emr", region_name=aws_settings(params, "open the EMR client").region)


def bootstrap_path(params: WorkbookParams) -> str:
    """``aws.emr.bootstrap_path``, or where ``./workbook package --upload`` puts the bootstrap
    script: ``s3://<package bucket>/<package prefix>/<package version>/emr-bootstrap.sh``.

    Raises:
        AwsError: when the path is not set and the installed package's version is unknown.
    """
    aws = aws_settings(params, "find the bootstrap script")
    if aws.emr.bootstrap_path:
        return aws.emr.bootstrap_path
    try:
        version = importlib.metadata.version("cdc-lakehouse-workbook")
    except importlib.metadata.PackageNotFoundError:
        raise AwsError(
            "Failed to find the bootstrap script: the workbook is not installed, so its version is "
            "unknown; set aws.emr.bootstrap_path to the script ./workbook package --upload printed"
        ) from None
    bucket, prefix = package_location(params)
    return f"s3://{bucket}/{prefix}/{version}/{BOOTSTRAP_NAME}"


def cluster_configurations() -> list[dict[str, Any]]:
    """The cluster's configuration classifications: Glue as the metastore of Spark and Hive, the
    Hudi bundle and settings in ``spark-defaults``, and in ``spark-env`` the Python the bootstrap
    action installs the workbook into (``PYSPARK_PYTHON``).

    The bundle goes into ``spark.jars`` only: a ``spark-defaults`` value replaces EMR's own, and
    EMR's ``spark.driver.extraClassPath`` carries EMRFS and the Glue client.
    """
    glue = {_GLUE_KEY: GLUE_CLIENT_FACTORY}
    return [
        {"Classification": "spark-hive-site", "Properties": dict(glue)},
        {"Classification": "hive-site", "Properties": dict(glue)},
        {
            "Classification": "spark-defaults",
            "Properties": {"spark.jars": HUDI_BUNDLE, **HUDI_SPARK_SETTINGS},
        },
        {
            "Classification": "spark-env",
            "Configurations": [
                {"Classification": "export", "Properties": {"PYSPARK_PYTHON": f"/usr/bin/{EMR_PYTHON}"}}
            ],
            "Properties": {},
        },
    ]


def _release_supported(label: str) -> bool:
    return re.sub(r"\.[0-9]+$", "", label) in SUPPORTED_RELEASES


def cluster_request(params: WorkbookParams) -> dict[str, Any]:
    """The ``RunJobFlow`` request of the workbook's cluster, from ``aws.emr``.

    Raises:
        AwsError: when ``aws.emr.subnet_id`` is empty, or ``aws.emr.release_label`` does not ship
            Spark 3.5.6 and Hudi 1.0.2 (:data:`SUPPORTED_RELEASES`).
    """
    aws = aws_settings(params, "build the EMR cluster request")
    emr = aws.emr
    if not _release_supported(emr.release_label):
        raise AwsError(
            f"Failed to build the EMR cluster request: release {emr.release_label!r} does not ship Spark "
            f"3.5.6 with Hudi 1.0.2; set aws.emr.release_label to one of {', '.join(SUPPORTED_RELEASES)}.x"
        )
    if not emr.subnet_id:
        raise AwsError(
            "Failed to build the EMR cluster request: aws.emr.subnet_id is empty; set it to a subnet that "
            "reaches the RDS instances, MSK and the EMR Studio (--set aws.emr.subnet_id=subnet-...)"
        )
    return {
        "Name": emr.name,
        "ReleaseLabel": emr.release_label,
        "LogUri": emr.log_uri or f"s3://{aws.s3_bucket}/emr-logs/",
        "Applications": [{"Name": name} for name in APPLICATIONS],
        "Configurations": cluster_configurations(),
        "Instances": {
            "InstanceGroups": [
                {
                    "Name": "primary",
                    "InstanceRole": "MASTER",
                    "Market": "ON_DEMAND",
                    "InstanceType": emr.primary_instance_type,
                    "InstanceCount": 1,
                },
                {
                    "Name": "core",
                    "InstanceRole": "CORE",
                    "Market": "ON_DEMAND",
                    "InstanceType": emr.core_instance_type,
                    "InstanceCount": emr.core_instance_count,
                },
            ],
            "Ec2SubnetId": emr.subnet_id,
            "KeepJobFlowAliveWhenNoSteps": True,
            "TerminationProtected": False,
        },
        "BootstrapActions": [
            {"Name": "workbook", "ScriptBootstrapAction": {"Path": bootstrap_path(params), "Args": []}}
        ],
        "ServiceRole": emr.service_role,
        "JobFlowRole": emr.instance_profile,
        "VisibleToAllUsers": True,
        "AutoTerminationPolicy": {"IdleTimeout": emr.idle_timeout_s},
        "Tags": [{"Key": "project", "Value": params.project}, {"Key": "created-by", "Value": "workbook"}],
    }


def create_cluster(
    params: WorkbookParams, *, dry_run: bool = True, emr_client: Any = None
) -> ClusterCreation:
    """Build the cluster request and, unless ``dry_run``, call ``RunJobFlow`` with it.

    Args:
        params: workbook parameters (``aws.emr``, ``aws.s3_bucket``).
        dry_run: only build the request (no AWS call).
        emr_client: a boto3 EMR client (default: one in ``aws.region``).

    Returns:
        The request, and the new cluster's id and ARN unless ``dry_run``.

    Raises:
        AwsError: when a setting is missing or wrong, or EMR refuses the request (its message).
    """
    request = cluster_request(params)
    if dry_run:
        return ClusterCreation(request)
    client = emr_client if emr_client is not None else open_emr_client(params)
    response = call_aws(f"create EMR cluster {request['Name']!r}", client.run_job_flow, **request)
    return ClusterCreation(request, response["JobFlowId"], response.get("ClusterArn"))


def _properties(configurations: list[dict[str, Any]], classification: str) -> dict[str, str]:
    for item in configurations:
        if item.get("Classification") == classification:
            return dict(item.get("Properties") or {})
    return {}


def _bootstrap_paths(client: Any, cluster_id: str) -> list[str]:
    paths: list[str] = []
    kwargs: dict[str, Any] = {"ClusterId": cluster_id}
    while True:
        page = call_aws(
            f"list bootstrap actions of EMR cluster {cluster_id}", client.list_bootstrap_actions, **kwargs
        )
        paths += [action["ScriptPath"] for action in page.get("BootstrapActions", [])]
        if not page.get("Marker"):
            return paths
        kwargs["Marker"] = page["Marker"]


def check_cluster(cluster_id: str, params: WorkbookParams, emr_client: Any) -> list[ClusterFinding]:
    """Check a cluster for what the workbook needs; each finding that failed says how to fix it.

    Checks: the state (WAITING or RUNNING), the release label, each application of
    :data:`APPLICATIONS`, Glue as the metastore (``spark-hive-site`` and ``hive-site``), the Hudi
    bundle on Spark's class path and Hudi's Spark settings (``spark-defaults``), and the workbook's
    bootstrap action.

    Args:
        cluster_id: the cluster (``j-...``).
        params: workbook parameters (``aws.emr``: the expected bootstrap script).
        emr_client: a boto3 EMR client.

    Returns:
        One finding per check, in that order.

    Raises:
        AwsError: naming the cluster when EMR cannot describe it (unknown id, no permission).
    """
    wanted_release = aws_settings(params, f"check EMR cluster {cluster_id}").emr.release_label
    cluster = call_aws(
        f"describe EMR cluster {cluster_id}", emr_client.describe_cluster, ClusterId=cluster_id
    )["Cluster"]
    findings: list[ClusterFinding] = []

    def add(check: str, expected: str, actual: str, passed: bool, fix: str) -> None:
        findings.append(ClusterFinding(check, expected, actual, passed, None if passed else fix))

    state = cluster.get("Status", {}).get("State", "")
    add(
        "state",
        " or ".join(_READY_STATES),
        state,
        state in _READY_STATES,
        "wait while it is STARTING or BOOTSTRAPPING; a terminated cluster cannot come back: " + _RECREATE,
    )
    label = cluster.get("ReleaseLabel", "")
    add(
        "release label",
        f"{' / '.join(SUPPORTED_RELEASES)}.x (Spark 3.5.6, Hudi 1.0.2)",
        label,
        _release_supported(label),
        f"the release of a cluster cannot change: {_RECREATE} (release {wanted_release})",
    )
    installed = {
        app.get("Name", "").lower(): app.get("Version", "") for app in cluster.get("Applications", [])
    }
    for name in APPLICATIONS:
        add(
            f"application {name}",
            "installed",
            f"installed {installed[name.lower()]}".strip() if name.lower() in installed else "missing",
            name.lower() in installed,
            f"applications are chosen at launch: {_RECREATE} (it installs {', '.join(APPLICATIONS)})",
        )
    configurations = cluster.get("Configurations", [])
    for classification in ("spark-hive-site", "hive-site"):
        actual = _properties(configurations, classification).get(_GLUE_KEY, "")
        add(
            f"Glue catalog ({classification})",
            f"{_GLUE_KEY}={GLUE_CLIENT_FACTORY}",
            actual or "not set",
            actual == GLUE_CLIENT_FACTORY,
            f"set {_GLUE_KEY}={GLUE_CLIENT_FACTORY} in classification {classification} (cluster create "
            "sets it; on a running cluster reconfigure its instance groups)",
        )
    spark_defaults = _properties(configurations, "spark-defaults")
    jars = [jar.strip() for jar in spark_defaults.get("spark.jars", "").split(",") if jar.strip()]
    add(
        "Hudi jars (spark-defaults spark.jars)",
        HUDI_BUNDLE,
        ",".join(jars) or "not set",
        HUDI_BUNDLE in jars,
        f"add {HUDI_BUNDLE} to spark.jars in classification spark-defaults (cluster create sets it), or "
        "start each session with it in spark.jars",
    )
    for key, value in HUDI_SPARK_SETTINGS.items():
        actual = spark_defaults.get(key, "")
        add(
            f"Hudi setting (spark-defaults {key})",
            value,
            actual or "not set",
            actual == value,
            f"set {key}={value} in classification spark-defaults (cluster create sets it)",
        )
    expected_script = bootstrap_path(params)
    scripts = _bootstrap_paths(emr_client, cluster_id)
    add(
        "bootstrap action",
        expected_script,
        ", ".join(scripts) or "none",
        expected_script in scripts,
        "bootstrap actions run only at launch: upload the package (./workbook package --upload), then "
        + _RECREATE,
    )
    return findings
