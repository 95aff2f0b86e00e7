"""A process of its own that ingests one Silver table on the local S3 server and reads it back
through the official Spark datasource (tests/integration/test_s3_local.py).

Run as ``python -m support.s3_silver <overrides.json> <table> <out.parquet>``: it loads the ``ci``
parameters with those overrides (nothing else tells it where S3 is), ingests the table with
:func:`helpers.silver.ingest.ingest_table` in a SparkSession of its own (s3a, the official Hudi
bundle), then writes what ``read_hudi_df`` returns to ``out.parquet`` and the ingestion result to
``out.parquet.json``, with the command lines of this process and its children (the Spark JVM) for
the check that no key is on one. A process of its own, because a JVM's class path is fixed when the first
SparkSession of a process starts, and other tests may have started one without s3a.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from helpers.hudi.api import read_hudi_df
from helpers.memory import workbook_processes
from helpers.params import load_params
from helpers.silver.ingest import ingest_table
from helpers.silver.tables import table_config
from helpers.spark import build_spark_session


def main(argv: list[str]) -> int:
    overrides_file, table_name, out = argv
    params = load_params("ci", json.loads(Path(overrides_file).read_text()))
    table = next(t for t in params.silver.tables if t.name == table_name)
    spark = build_spark_session(params, app_name="wb-s3-test", conf={"spark.driver.memory": "1g"})
    try:
        result = ingest_table(params, table, spark=spark)
        frame = read_hudi_df(spark, table_config(params, table).base_path).toPandas()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out)
        cmdlines = []
        for pid in workbook_processes(os.getpid(), params.state_path):
            try:
                cmdlines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
        Path(out + ".json").write_text(json.dumps({"result": result.__dict__, "cmdlines": cmdlines}))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
