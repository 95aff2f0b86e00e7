"""The default capture profile with its lake on the local S3 server and Silver on the local Spark
cluster: the embedded connectors write Bronze to ``s3://`` (one PutObject per file), the cluster's
executors read it through s3a and write Silver there (the tables that hold every column kind), and
both equal the sources row by row. Notebook 07's reconciliation reads that ``s3://`` Silver too: it
finds every table equal at a source position, then names the one key of ``date`` changed behind
capture's back and the command that repairs it. The flow runs in a process of its own
(tests/support/embedded_s3_cluster_flow.py), the cluster's driver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.silver_tables import STREAMER_TABLES

from helpers.capture.owner import OWNER_FILE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

FLOW = Path(__file__).resolve().parents[1] / "support" / "embedded_s3_cluster_flow.py"


def test_embedded_capture_to_s3_and_silver_on_the_cluster_equal_the_sources(tmp_path: Path) -> None:
    out = tmp_path / "flow.json"
    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, str(FLOW), str(out)], capture_output=True, text=True, timeout=1100, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(out.read_text())
    bronze = seen["bronze"]
    assert len(bronze) == 11 and all(row["equal"] for row in bronze), bronze
    avro = [o for o in seen["bronze_objects"] if o.endswith(".avro")]
    assert avro and all(o.startswith("s3://wb-embedded-lake/bronze/") and "/year=" in o for o in avro)
    assert seen["local_leftovers"] == []  # nothing written to a local folder named "s3:"
    assert f"s3://wb-embedded-lake/bronze/{OWNER_FILE}" in seen["bronze_objects"]  # claimed, on S3 too
    for row in seen["ingested"]:  # each table's round took every Bronze file of its topic
        topic = f"s3://wb-embedded-lake/bronze/{seen['topics'][row['table']]}/"
        assert row["files"] == len([o for o in avro if o.startswith(topic)]) > 0, row
    assert seen["master"].startswith("spark://127.0.0.1:")
    driver = next(e for e in seen["executors"] if e["id"] == "driver")
    workers = [e for e in seen["executors"] if e["id"] != "driver"]
    assert driver["totalTasks"] == 0 and driver["totalInputBytes"] == 0  # the driver read nothing
    assert workers and all(e["totalTasks"] > 0 and e["totalInputBytes"] > 0 for e in workers), workers
    silver = seen["silver"]
    assert {row["table"] for row in silver} == set(STREAMER_TABLES), silver  # every column kind
    assert all(row["equal"] for row in silver), silver
    reconciled = seen["reconciled"]
    assert {row["table"] for row in reconciled} == set(STREAMER_TABLES), reconciled
    assert all(row["equal"] and row["caught_up"] and row["silver_rows"] > 0 for row in reconciled), reconciled
    (diverged,) = seen["diverged"]
    assert not diverged["equal"] and diverged["caught_up"], diverged
    assert diverged["differing_keys"] == [{"dateid": seen["diverged_key"], "difference": "different"}], (
        diverged
    )
    assert (diverged["different"], diverged["missing_in_silver"], diverged["extra_in_silver"]) == (1, 0, 0)
    assert "resnapshot date" in diverged["fix"], diverged
