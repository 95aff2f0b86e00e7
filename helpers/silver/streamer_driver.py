"""The streamer engine's Spark driver: Hudi's own ``HoodieStreamer`` (DeltaStreamer) for every
Silver table, in one Spark application on the streamer runtime (pyspark 3.4.1, Hudi 0.14.0).

It is started by :mod:`helpers.silver.streamer` with the runtime's ``spark-submit`` and a plan
(JSON) that names, per table, the ``HoodieStreamer`` arguments of the properties files the workbook
generated. It runs in that runtime's Python, so it imports nothing of the workbook and passes no
row through Python: the driver only builds each ``HoodieStreamer.Config`` from the same arguments
``spark-submit --class org.apache.hudi.utilities.streamer.HoodieStreamer`` takes and calls
``sync()``; reading Bronze, the SQL transform and the Hudi write run in the JVM and its executors.

Why a driver and not one ``spark-submit --class ...HoodieStreamer`` per table (the form EMR steps
and the notebook show): twelve tables would start twelve JVMs per round on a 2-core machine. And
not HoodieStreamer's ``--continuous`` side by side in one JVM: 0.14.0's ``AvroDFSSource`` sets its
reader schema in the SparkContext's shared Hadoop configuration (``avro.schema.input.key``) when it
is constructed, so two of them in one application read each other's files with the wrong schema
(measured: "AvroTypeException: Found tickit.ecomm.sale.Value, expecting tickit.ems.event.Value").
Hudi's ``HoodieMultiTableStreamer`` avoids that by building each table's streamer just before its
sync, one table after the other; this driver does the same, and in ``continuous`` mode repeats the
round every ``min_sync_interval_s`` (each sync resumes from the checkpoint in the table's last
commit, as ``--continuous`` does). Unlike the multi-table streamer, a failed table is reported:
``once`` exits 1 naming it, ``continuous`` records it in its status and tries again next round.
In ``continuous`` mode the plan file is read again when it changes (the continuous job rewrites it
when a table's Bronze schema gains a column, or a table gets its first Bronze file), and the target
schemas are written again: each round builds its streamers from the files as they are then.

Before the streamers start, it writes each Bronze table's target schema (``target_schema``; a table
read from a Debezium topic has none: HoodieStreamer takes the transformed rows' schema): Hudi's own
conversion (``AvroConversionUtils``) of the transformed rows' Spark schema, the schema Hudi's
datasource writer gives the same rows (decimals as ``fixed``, record ``hoodie.<t>.<t>_record``).
``FilebasedSchemaProvider`` would otherwise use the Bronze schema as the target and drop the
transform's columns.

TRUNCATE and re-snapshot markers (a table's plan ``markers``): HoodieStreamer has no operation for
"delete every row written before position T", so the table's transform fails a round that holds a
marker, and the driver runs that round again from the same checkpoint with the table's truncate
properties (:func:`helpers.silver.streamer_sql.truncate_sql`), after registering the stored rows
as a global temporary view: the stored rows from before the marker become deletes in the round's
one commit, beside the changes after it, as the PySpark engine applies markers. The stored rows
are read on the executors; the driver sees only the error text.

Modes (the plan's ``mode``): ``once`` (each table's ``sync()`` in turn), ``continuous`` (rounds of
those until the process is stopped) and ``schemas`` (only the target schemas: the
first step on EMR, before one ``HoodieDeltaStreamer`` step per table).

Usage: ``spark-submit [spark options] streamer_driver.py PLAN.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

STREAMER_CLASS = "org.apache.hudi.utilities.streamer.HoodieStreamer"


def _write_status(path: str, status: dict[str, Any]) -> None:
    if not path:  # no status file (an EMR step: the step's state is its status)
        return
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(target)


def _read_text(spark: Any, uri: str) -> str:
    """A small file through Hadoop's file system API (``file://``, ``s3a://`` or EMR's ``s3://``)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.open(path)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def _write_text(spark: Any, uri: str, text: str) -> None:
    """Write a small file through Hadoop's file system API (replaced whole)."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def _transformed(spark: Any, table: dict[str, Any]) -> Any:
    """The transform applied to an empty frame of the table's source schema (a Java ``Dataset``:
    its schema only, no rows)."""
    jvm = spark.sparkContext._jvm
    source = jvm.org.apache.avro.Schema.Parser().parse(_read_text(spark, table["source_schema"]))
    struct = jvm.org.apache.hudi.AvroConversionUtils.convertAvroSchemaToStructType(source)
    empty = spark._jsparkSession.createDataFrame(jvm.java.util.ArrayList(), struct)
    view = f"workbook_src_{table['name']}"
    empty.createOrReplaceTempView(view)
    return spark._jsparkSession.sql(table["transform_sql"].replace("<SRC>", view))


def _target_schema(spark: Any, table: dict[str, Any]) -> None:
    """Write the table's target Avro schema: the transform's output, converted by Hudi (metadata
    only, no rows)."""
    jvm = spark.sparkContext._jvm
    schema = _transformed(spark, table).schema()
    record = f"{table['name']}_record"
    avro = jvm.org.apache.hudi.AvroConversionUtils.convertStructTypeToAvroSchema(
        schema, record, f"hoodie.{table['name']}"
    )
    _write_text(spark, table["target_schema"], avro.toString(True))


def _stored_rows_view(spark: Any, table: dict[str, Any]) -> None:
    """Register the global temporary view the truncate transform reads the stored rows through
    (the plan's ``markers``): the Silver table as Hudi reads it (soft deletes: the rows not yet
    flagged), shaped as the transform's output (a column the table lacks is null); an empty frame
    of that shape while the table has no completed commit. Lazy: the rows are read on the executors when the
    streamer's round runs."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    markers = table["markers"]
    shape = DataFrame(_transformed(spark, table), spark).schema
    completed = _completed_commits(spark, markers["base_path"])
    if completed is None or not completed.lastInstant().isPresent():  # nothing stored yet
        spark.createDataFrame([], shape).createOrReplaceGlobalTempView(markers["view"])
        return
    stored = spark.read.format("hudi").load(markers["base_path"])
    soft = markers.get("soft_field")
    if soft and soft in stored.columns:
        stored = stored.where(~F.coalesce(F.col(soft).cast("boolean"), F.lit(False)))
    columns = [
        (F.col(f.name) if f.name in stored.columns else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in shape.fields
    ]
    stored.select(*columns).createOrReplaceGlobalTempView(markers["view"])


def _sync(spark: Any, table: dict[str, Any]) -> str:
    """One ``sync()`` of the table: ``DONE``, or ``MARKERS_APPLIED`` when the round held a TRUNCATE
    or re-snapshot marker. The table's transform fails such a round with the plan's
    ``markers.error`` before anything commits (Hudi rolls back what a failed write left); it then
    runs again, from the same checkpoint, with the truncate properties file, whose transform turns
    the stored rows from before the marker into deletes in the round's one commit."""
    try:
        _streamer(spark, table["args"]).sync()
        return "DONE"
    except Exception as exc:  # noqa: BLE001 - Py4J errors of any kind
        markers = table.get("markers")
        if not markers or markers["error"] not in str(exc):
            raise
    _stored_rows_view(spark, table)
    args = list(table["args"])
    args[args.index("--props") + 1] = markers["properties"]
    _streamer(spark, args).sync()
    return "MARKERS_APPLIED"


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


def _completed_commits(spark: Any, base_path: str) -> Any:
    """The table's completed commits timeline, through Hudi's own timeline API (None: no table)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(base_path)
    if not path.getFileSystem(conf).exists(jvm.org.apache.hadoop.fs.Path(base_path + "/.hoodie")):
        return None
    client = jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder()
    timeline = client.setConf(conf).setBasePath(base_path).build().getActiveTimeline()
    return timeline.getCommitsTimeline().filterCompletedInstants()


def _last_checkpoint(spark: Any, base_path: str) -> str | None:
    """HoodieStreamer's checkpoint in the table's newest completed commit (None: no table, no
    commit, or none recorded)."""
    jvm = spark.sparkContext._jvm
    completed = _completed_commits(spark, base_path)
    last = None if completed is None else completed.lastInstant()
    if last is None or not last.isPresent():
        return None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()  # where --jars are
    metadata_class = jvm.java.lang.Class.forName(
        "org.apache.hudi.common.model.HoodieCommitMetadata", True, loader
    )
    details = completed.getInstantDetails(last.get()).get()
    metadata = jvm.org.apache.hudi.common.model.HoodieCommitMetadata.fromBytes(details, metadata_class)
    value = metadata.getMetadata("deltastreamer.checkpoint.key")
    return str(value) if value else None


def _kafka_news(spark: Any, table: dict[str, Any]) -> bool:
    """Whether a table read from a Kafka topic (the plan's ``kafka``) has messages after its
    checkpoint. Hudi 0.14.0's Debezium sources hand an empty frame *without columns* to the
    transformer when there are none, which the SQL transform cannot read ("UNRESOLVED_COLUMN",
    measured): such a table is not synced in that round, as HoodieStreamer commits nothing then."""
    kafka = table.get("kafka")
    if not kafka or "--checkpoint" in table["args"]:
        return True
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    props.put("bootstrap.servers", kafka["bootstrap"])
    for key in ("key.deserializer", "value.deserializer"):
        props.put(key, "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
    try:
        partitions = jvm.java.util.ArrayList()
        for info in consumer.partitionsFor(kafka["topic"]) or []:
            partitions.add(jvm.org.apache.kafka.common.TopicPartition(kafka["topic"], info.partition()))
        ends = consumer.endOffsets(partitions)
        end = {int(tp.partition()): int(ends.get(tp)) for tp in partitions}
    finally:
        consumer.close()
    checkpoint = _last_checkpoint(spark, table["base_path"])
    done: dict[int, int] = {}
    if checkpoint and checkpoint.startswith(kafka["topic"] + ","):
        for part in checkpoint.split(",")[1:]:
            number, offset = part.split(":")
            done[int(number)] = int(offset)
    return any(offset > done.get(number, 0) for number, offset in end.items())


def run(plan_path: str) -> int:
    """Run the plan; 0 when every table synced, 1 otherwise (each failure on stderr)."""
    from pyspark.sql import SparkSession

    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))  # local, or shipped with --files
    status: dict[str, Any] = {"state": "STARTING", "tables": {}, "error": None, "started": time.time()}
    status_path = plan.get("status", "")
    _write_status(status_path, status)
    spark = SparkSession.builder.appName(plan.get("app_name", "workbook-streamer")).getOrCreate()
    failures: dict[str, str] = {}
    for table in plan["tables"]:
        if table.get("target_schema"):
            try:
                _target_schema(spark, table)
            except Exception as exc:  # noqa: BLE001 - Py4J errors of any kind
                failures[table["name"]] = f"target schema: {str(exc)[:2000]}"
    if failures or plan["mode"] == "schemas":  # schemas: the target schemas only (an EMR step)
        return _finish(status, status_path, failures)

    def sync(table: dict[str, Any]) -> None:
        started = time.time()
        status["tables"][table["name"]] = {"state": "RUNNING", "started": started}
        try:
            if not _kafka_news(spark, table):
                status["tables"][table["name"]] = {"state": "NOTHING_NEW", "seconds": 0.0}
                failures.pop(table["name"], None)
                return
            state = _sync(spark, table)
            status["tables"][table["name"]] = {"state": state, "seconds": round(time.time() - started, 3)}
            if state == "MARKERS_APPLIED":
                status["markers_applied"] = status.get("markers_applied", 0) + 1
            failures.pop(table["name"], None)
        except Exception as exc:  # noqa: BLE001 - Py4J errors of any kind
            failures[table["name"]] = str(exc)[:4000]
            status["tables"][table["name"]] = {"state": "FAILED", "error": str(exc)[:1000]}
            traceback.print_exc()
        _write_status(status_path, status)

    status["state"] = "RUNNING"
    _write_status(status_path, status)
    if plan["mode"] != "continuous":
        for table in plan["tables"]:
            sync(table)
        return _finish(status, status_path, failures)
    interval = float(plan.get("min_sync_interval_s", 0))
    status["rounds"] = 0
    seen = os.stat(plan_path).st_mtime_ns
    while True:  # until the process is stopped (SIGTERM: a commit in flight is rolled back next start)
        started = time.monotonic()
        if os.stat(plan_path).st_mtime_ns != seen:  # a new column or table: the plan was rewritten
            seen = os.stat(plan_path).st_mtime_ns
            plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
            for table in plan["tables"]:
                if table.get("target_schema"):
                    _target_schema(spark, table)
            status["plan_reloads"] = status.get("plan_reloads", 0) + 1
        for table in plan["tables"]:
            sync(table)
        status["rounds"] += 1
        status["error"] = "; ".join(f"{n}: {e[:300]}" for n, e in failures.items()) or None
        _write_status(status_path, status)
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


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
