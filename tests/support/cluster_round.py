"""One Silver round of ``sale`` in a driver process of its own, for the cluster tests: the
parameters come as a JSON file; the report (the round, Spark's executor metrics from the driver's
monitoring API, the process's peak resident memory, the driver's and the executors' JVM arguments,
and whether they mapped a class-data archive) is printed as one JSON line.

    python -m support.cluster_round PARAMS.json
"""

from __future__ import annotations

import json
import resource
import sys
import urllib.request

import psutil

from helpers.params import WorkbookParams
from helpers.proc import free_port
from helpers.silver.ingest import ingest_table
from helpers.spark import build_spark_session


def main(path: str) -> int:
    params = WorkbookParams.model_validate(json.loads(open(path).read()))
    ui_port = free_port()
    spark = build_spark_session(
        params,
        app_name="workbook-cluster-test",
        conf={"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)},
    )
    table = next(t for t in params.silver.tables if t.name == "sale")
    result = ingest_table(params, table, spark=spark)
    app = spark.sparkContext.applicationId
    url = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/allexecutors"
    executors = json.loads(urllib.request.urlopen(url).read())  # noqa: S310 - loopback
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    report = {
        "files": result.files,
        "events": result.events,
        "instant": result.instant,
        "master": spark.sparkContext.master,
        "executors": [
            {k: e[k] for k in ("id", "hostPort", "totalTasks", "totalInputBytes", "isActive")}
            for e in executors
        ],
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "driver_jvm": list(runtime.getInputArguments()),
        "driver_vm_info": spark.sparkContext._jvm.System.getProperty("java.vm.info"),
        "class_path": spark.sparkContext.getConf().get("spark.driver.extraClassPath"),
        "executor_jvm": [  # each of this application's executors, as the worker started it
            proc.info["cmdline"]
            for proc in psutil.process_iter(["cmdline"])
            if app in (proc.info["cmdline"] or [])
            and any(a.endswith(".CoarseGrainedExecutorBackend") for a in proc.info["cmdline"])
        ],
        "executor_vm_info": sorted(
            {
                row[0]
                for row in spark.range(0, 4, 1, 4)
                .selectExpr("reflect('java.lang.System', 'getProperty', 'java.vm.info')")
                .collect()
            }
        ),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
