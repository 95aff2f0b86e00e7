"""The streamer engine's Spark driver: Hudi's own ``HoodieStreamer`` (DeltaStreamer) for every
Silver table, in one Spark application on the streamer runtime (pyspark 3.4.1, Hudi 0.14.0).

It is started by :mod:`helpers.silver.streamer` with the runtime's ``spark-submit`` and a plan
(JSON) that names, per table, the ``HoodieStreamer`` arguments of the properties files the workbook
generated. It runs in that runtime's Python, so it imports nothing of the workbook and passes no
row through Python: the driver only builds each ``HoodieStreamer.Config`` from the same arguments
``spark-submit --class org.apache.hudi.utilities.streamer.HoodieStreamer`` takes and calls
``sync()``; reading Bronze, the SQL transform and the Hudi write run in the JVM and its executors.

Why a driver and not one ``spark-submit --class ...HoodieStreamer`` per table (the form EMR steps
and the notebook show): twelve tables would start twelve JVMs per one-shot round, and twelve
``--continuous`` drivers would hold twelve heaps on a 2-core machine. Hudi's own
``HoodieMultiTableStreamer`` runs tables in one JVM but has no continuous mode (its ``sync`` runs
the tables one after another) and logs a failed table without failing. This driver does what it does,
runs ``--continuous`` tables side by side (one thread each, like separate drivers) and exits 1
naming every failed table.

Before the streamers start, it writes each table's target schema (``target_schema``): Hudi's own
conversion (``AvroConversionUtils``) of the transformed rows' Spark schema, the schema Hudi's
datasource writer gives the same rows (decimals as ``fixed``, record ``hoodie.<t>.<t>_record``).
``FilebasedSchemaProvider`` would otherwise use the Bronze schema as the target and drop the
transform's columns.

Usage: ``spark-submit [spark options] streamer_driver.py PLAN.json``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

STREAMER_CLASS = "org.apache.hudi.utilities.streamer.HoodieStreamer"


def _write_status(path: str, status: dict[str, Any]) -> None:
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(target)


def _target_schema(spark: Any, table: dict[str, Any]) -> None:
    """Write the table's target Avro schema: the transform applied to an empty frame of the source
    schema, converted by Hudi (metadata only, no rows)."""
    jvm = spark.sparkContext._jvm
    text = Path(table["source_schema"]).read_text(encoding="utf-8")
    source = jvm.org.apache.avro.Schema.Parser().parse(text)
    struct = jvm.org.apache.hudi.AvroConversionUtils.convertAvroSchemaToStructType(source)
    empty = spark._jsparkSession.createDataFrame(jvm.java.util.ArrayList(), struct)
    view = f"workbook_src_{table['name']}"
    empty.createOrReplaceTempView(view)
    sql = table["transform_sql"].replace("<SRC>", view)
    schema = spark._jsparkSession.sql(sql).schema()
    record = f"{table['name']}_record"
    avro = jvm.org.apache.hudi.AvroConversionUtils.convertStructTypeToAvroSchema(
        schema, record, f"hoodie.{table['name']}"
    )
    Path(table["target_schema"]).write_text(avro.toString(True), encoding="utf-8")


def _streamer(spark: Any, args: list[str]) -> Any:
    """``new HoodieStreamer(HoodieStreamer.getConfig(args), jsc)``. The static ``getConfig`` is
    called through reflection: Py4J does not find a static method that shares its name with an
    instance method (``Config getConfig()``)."""
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    array = gateway.new_array(jvm.java.lang.String, len(args))
    for i, arg in enumerate(args):
        array[i] = arg
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName(STREAMER_CLASS, True, loader)
    signature = gateway.new_array(jvm.java.lang.Class, 1)
    signature[0] = array.getClass()
    call = gateway.new_array(jvm.java.lang.Object, 1)
    call[0] = array
    config = cls.getMethod("getConfig", signature).invoke(None, call)
    return jvm.org.apache.hudi.utilities.streamer.HoodieStreamer(config, spark.sparkContext._jsc)


def run(plan_path: str) -> int:
    """Run the plan; 0 when every table synced, 1 otherwise (each failure on stderr)."""
    from pyspark.sql import SparkSession

    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    status: dict[str, Any] = {"state": "STARTING", "tables": {}, "error": None, "started": time.time()}
    status_path = plan["status"]
    _write_status(status_path, status)
    spark = SparkSession.builder.appName(plan.get("app_name", "workbook-streamer")).getOrCreate()
    failures: dict[str, str] = {}
    for table in plan["tables"]:
        if table.get("target_schema"):
            try:
                _target_schema(spark, table)
            except Exception as exc:  # noqa: BLE001 - Py4J errors of any kind
                failures[table["name"]] = f"target schema: {str(exc)[:2000]}"
    if failures:
        return _finish(status, status_path, failures)

    def sync(table: dict[str, Any]) -> None:
        started = time.time()
        status["tables"][table["name"]] = {"state": "RUNNING", "started": started}
        try:
            _streamer(spark, table["args"]).sync()
            status["tables"][table["name"]] = {"state": "DONE", "seconds": round(time.time() - started, 3)}
        except Exception as exc:  # noqa: BLE001 - Py4J errors of any kind
            failures[table["name"]] = str(exc)[:4000]
            status["tables"][table["name"]] = {"state": "FAILED", "error": str(exc)[:1000]}
            traceback.print_exc()
        _write_status(status_path, status)

    status["state"] = "RUNNING"
    _write_status(status_path, status)
    if plan["mode"] == "continuous":
        threads = [threading.Thread(target=sync, args=(t,), daemon=True) for t in plan["tables"]]
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads) and not failures:
            time.sleep(1.0)
    else:
        for table in plan["tables"]:
            sync(table)
    return _finish(status, status_path, failures)


def _finish(status: dict[str, Any], status_path: str, failures: dict[str, str]) -> int:
    status["state"] = "FAILED" if failures else "DONE"
    status["error"] = "; ".join(f"{name}: {error[:300]}" for name, error in failures.items()) or None
    _write_status(status_path, status)
    for name, error in failures.items():
        print(f"workbook-streamer: table {name} failed: {error}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: spark-submit streamer_driver.py PLAN.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1]))
