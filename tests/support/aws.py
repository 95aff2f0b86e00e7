"""The ``aws`` parameter set in tests: every placeholder of ``params/aws.yaml`` filled in, so
``load_params("aws", aws_overrides())`` passes its checks; nothing reaches AWS (stubs do)."""

from __future__ import annotations

from typing import Any


def aws_overrides(bucket: str = "test-bucket", **extra: Any) -> dict[str, Any]:
    """The bucket, the three RDS instances and the lake under the bucket, then ``extra`` (dotted
    keys: ``aws_overrides(**{"aws.emr.subnet_id": "subnet-0abc"})``)."""
    return {
        "aws.s3_bucket": bucket,
        "aws.rds.postgres.instance_id": "ems-pg",
        "aws.rds.mysql.instance_id": "ecomm-my",
        "aws.rds.sqlserver.instance_id": "crm-ss",
        "lake.bronze": f"s3://{bucket}/bronze",
        "lake.silver": f"s3://{bucket}/silver",
        **extra,
    }
