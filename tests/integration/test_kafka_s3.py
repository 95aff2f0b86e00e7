"""The local-kafka profile with Bronze and Silver at ``s3://`` URIs on the local S3 server (S3Proxy):
the Bronze sink writes each file with one PutObject through boto3, Silver is written by the
official Hudi writer through Spark's s3a, and both equal the sources row by row. The flow runs in
a process of its own (tests/support/kafka_s3_flow.py): its Spark session needs s3a from the start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

FLOW = Path(__file__).resolve().parents[1] / "support" / "kafka_s3_flow.py"


@pytest.fixture(scope="module", autouse=True)
def _spark_first() -> None:
    """No Spark session in this process: the flow's own process has one with s3a."""
    return None


def test_bronze_and_silver_on_s3_equal_the_sources(tmp_path: Path) -> None:
    out = tmp_path / "flow.json"
    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, str(FLOW), str(out)], capture_output=True, text=True, timeout=1100, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(out.read_text())
    bronze = seen["bronze"]
    assert len(bronze) == 11 and all(row["equal"] for row in bronze), bronze
    assert all(row["redelivered"] == 0 for row in bronze), bronze
    avro = [o for o in seen["bronze_objects"] if o.endswith(".avro")]
    assert avro and all(o.startswith("s3://wb-kafka-lake/bronze/") and "/year=" in o for o in avro)
    assert seen["local_leftovers"] == []  # nothing written to a local folder named "s3:"
    listed = seen["bronze_frame"]  # notebook 02's listing, from S3
    assert len(listed) == 11 and sum(r["files"] for r in listed) == len(avro), listed
    assert all(r["files"] and r["newest"].startswith(f"{r['topic']}/year=") for r in listed), listed
    assert seen["ingested_files"] >= len(avro)
    silver = seen["silver"]
    assert len(silver) == 12 and all(row["equal"] for row in silver), silver
