"""The local-kafka profile with its lake on the local S3 server, end to end, in a process of its
own (its Spark session needs s3a from the start, which a test session's shared Spark lacks).

Run by tests/integration/test_kafka_s3.py as ``python tests/support/kafka_s3_flow.py OUT.json``:
a throw-away stack on free ports (PostgreSQL, MariaDB, the metastore off, the S3 server, the
registry, the broker, the Connect worker, the Bronze sink), the CI sample data, the connectors
registered, then Bronze compared with the sources, Silver ingested from S3 by the official Hudi
writer through s3a and compared with the sources. Writes what it saw to ``OUT.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]

from conftest import temporary_stack  # noqa: E402

from helpers.capture.register import (  # noqa: E402
    bronze_frame,
    connector_specs,
    expected_rows,
    local_endpoints,
    open_backend,
    wait_for_snapshots,
)
from helpers.checks.parity import bronze_vs_source, silver_vs_source  # noqa: E402
from helpers.lakefs import open_store, use_lake_s3  # noqa: E402
from helpers.pipeline import ensure_pipeline  # noqa: E402
from helpers.silver.ingest import ingest_all  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402
from support.kafka_profile import free_port, kafka_overrides  # noqa: E402

BUCKET = "wb-kafka-lake"


def main(out: Path) -> int:
    overrides = {
        **kafka_overrides(avro=True),
        "local.s3.enabled": True,
        "local.s3.port": free_port(),
        "local.s3.bucket": BUCKET,
        "lake.bronze": f"s3://{BUCKET}/bronze",
        "lake.silver": f"s3://{BUCKET}/silver",
        "spark.catalog": "none",
    }
    with temporary_stack("wb-kafkas3-", overrides) as stack:
        params = stack.params
        ensure_pipeline(params, timeout_s=300)  # servers, sample data, CDC, connectors registered
        backend = open_backend(params)
        specs = connector_specs(params, local_endpoints(params))
        counts = LocalSources(params).row_counts()
        wait_for_snapshots(backend, specs, expected_rows(params, counts), timeout_s=600)
        bronze = bronze_vs_source(params, specs, wait_s=120)
        use_lake_s3(params)
        objects = [e.location for e in open_store(params.lake.bronze).list("", recursive=True)]
        local_leftovers = [str(p) for p in Path.cwd().glob("s3:*")]
        listed = bronze_frame(params.lake.bronze, [t for s in specs for t in s.topics.values()])
        ingested = ingest_all(params)
        silver = silver_vs_source(params)
        out.write_text(
            json.dumps(
                {
                    "bronze": bronze.to_dict("records"),
                    "bronze_objects": objects,
                    "bronze_frame": listed.to_dict("records"),
                    "local_leftovers": local_leftovers,
                    "ingested_files": int(ingested["files"].sum()),
                    "silver": silver.to_dict("records"),
                },
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
