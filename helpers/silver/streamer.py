"""``silver.engine: streamer``: Silver written by Hudi's own HoodieStreamer (DeltaStreamer), as in
the original design, on what EMR 6.15 runs (Hudi 0.14.0, Spark 3.4).

The workbook generates the properties files the posts wrote by hand, one base file and one file per
table (``include=base.properties``), from the same parameters and write options as the PySpark
engine (:func:`helpers.silver.tables.silver_write_options`), so both engines write the same tables:

* the source is the table's Bronze topic folder (``AvroDFSSource``, or ``JsonDFSSource`` for
  JSON-lines Bronze), its schema the newest Bronze file's (``FilebasedSchemaProvider``);
* one SQL transform (``SqlQueryBasedTransformer``) adds the log position ``_cdc_position``
  (:func:`helpers.silver.tables.position_sql`, the ordering field, compared with the stored row by
  ``DefaultHoodieRecordPayload``) and the delete marker: ``_hoodie_is_deleted`` in hard mode, so a
  delete really deletes, or a boolean ``__deleted`` in soft mode; it drops TRUNCATE and re-snapshot
  markers, which HoodieStreamer cannot apply (``docs/streamer.md``, "Limits");
* JSON-lines Bronze carries decimals as JSON numbers: HoodieStreamer 0.14.0's JSON-to-Avro
  converter would store a ``bytes`` decimal's text as its bytes (10.5 becomes 8252411.41), so the
  source schema reads them as strings and the transform casts them to their exact decimal type.

Locally the runtime is project-local (``./workbook setup streamer``): pyspark 3.4.1 in
``.venv-streamer``, the Hudi 0.14.0 Spark bundle and the utilities jar re-shaded by the set-up
(``scripts/jars.tsv``, set ``streamer``). :mod:`helpers.silver.streamer_driver` runs every table's
HoodieStreamer in one Spark application, once (:func:`run_streamer_once`) or ``--continuous``
(:func:`streamer_job_argv`, supervised by :mod:`helpers.silver.job`). On EMR the same files go to
S3 and each table is one ``spark-submit --class ...HoodieDeltaStreamer`` step
(:func:`helpers.deploy.emr.streamer_steps`).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pandas as pd

from helpers.bronze.events import avro_schema_from_connect
from helpers.bronze.store import BronzeObject
from helpers.errors import HudiError, JarsMissingError, WorkbookError
from helpers.hudi.api import write_options
from helpers.hudi.config import DELETE_MARKER_FIELD, SOFT_DELETE_FIELD
from helpers.hudi.timeline import completed_instants
from helpers.jars import project_jars, shaded_jar
from helpers.lakefs import join, lake_uri
from helpers.naming import silver_topic
from helpers.params import SilverTableParams, WorkbookParams, project_root
from helpers.proc import read_status, write_status
from helpers.silver.state import read_table_state
from helpers.silver.tables import (
    POSITION_COLUMN,
    bronze_store,
    pending_bronze,
    position_fields,
    position_sql,
    silver_write_options,
    table_config,
)

__all__ = [
    "DRIVER",
    "RUNTIME_DIR",
    "STREAMER_CLASS",
    "StreamerTable",
    "resume_checkpoint",
    "run_streamer_job",
    "run_streamer_once",
    "spark_submit_command",
    "streamer_config",
    "streamer_job_argv",
    "streamer_overview",
    "transform_sql",
    "write_streamer_config",
]

#: HoodieStreamer's class; ``HoodieDeltaStreamer`` (the posts' name) is its deprecated alias.
STREAMER_CLASS = "org.apache.hudi.utilities.streamer.HoodieStreamer"
DELTASTREAMER_CLASS = "org.apache.hudi.utilities.deltastreamer.HoodieDeltaStreamer"
#: The streamer runtime's virtual environment (pyspark 3.4.1), made by ``scripts/bootstrap.sh``.
RUNTIME_DIR = ".venv-streamer"
#: The driver script the runtime's spark-submit runs.
DRIVER = Path(__file__).with_name("streamer_driver.py")
#: The streamer's change operations; TRUNCATE (``t``) and re-snapshot markers are dropped.
CHANGE_OPS = ("c", "u", "d", "r")
_SHADE_POM = "hudi-utilities-streamer"
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PY = "3.11"  # the runtime venv's Python (scripts/bootstrap.sh makes it with the workbook's python3)
#: Options of the PySpark engine's writer that HoodieStreamer 0.14.0 does not take from a file:
#: the table version and upgrade (0.14.0 writes version 6, the only one it knows), Hive sync (the
#: workbook syncs after a run with Hudi's HiveSyncTool, as for the PySpark engine), the commit
#: metadata prefix of the workbook's own checkpoints, and the write operation (``--op``).
_NOT_STREAMER = (
    "hoodie.write.table.version",
    "hoodie.write.auto.upgrade",
    "hoodie.datasource.hive_sync.",
    "hoodie.datasource.meta.sync.",
    "hoodie.datasource.write.commitmeta.key.prefix",
    "hoodie.datasource.write.operation",
    "hoodie.write.set.null.for.missing.columns",
)
_SPARK_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -Djava.net.preferIPv4Stack=true -XX:+UseSerialGC",
}


@dataclass(frozen=True)
class StreamerTable:
    """One Silver table's HoodieStreamer run.

    Attributes:
        name: the Silver table.
        properties: its properties file (``include=base.properties``).
        source_schema: the Bronze schema file (``.avsc``).
        target_schema: the target schema file the driver writes (Hudi's conversion of the
            transform's output).
        transform_sql: the SQL transform (``<SRC>`` is the source rows).
        base_path: the Hudi table.
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        source_class: ``AvroDFSSource`` or ``JsonDFSSource``.
    """

    name: str
    properties: str
    source_schema: str
    target_schema: str
    transform_sql: str
    base_path: str
    table_type: str
    source_class: str
    checkpoint: str | None = None

    def args(self, *, continuous: bool = False, min_sync_interval_s: int = 0) -> list[str]:
        """HoodieStreamer's arguments (what follows the jar in ``spark-submit``)."""
        out = [
            "--props",
            _uri(self.properties),
            "--target-base-path",
            _uri(self.base_path),
            "--target-table",
            self.name,
            "--table-type",
            self.table_type,
            "--op",
            "UPSERT",
            "--source-class",
            self.source_class,
            "--source-ordering-field",
            POSITION_COLUMN,
            "--payload-class",
            "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            "--schemaprovider-class",
            "org.apache.hudi.utilities.schema.FilebasedSchemaProvider",
            "--transformer-class",
            "org.apache.hudi.utilities.transform.SqlQueryBasedTransformer",
        ]
        if self.checkpoint is not None:
            out += ["--checkpoint", self.checkpoint]
        if continuous:
            out += ["--continuous", "--min-sync-interval-seconds", str(min_sync_interval_s)]
        return out


def _uri(path: str) -> str:
    return path if "://" in path else f"file://{path}"


def _avro_type(field_type: Any) -> Any:
    """The non-null branch of a field's type."""
    if isinstance(field_type, list):
        branches = [b for b in field_type if b != "null"]
        return branches[0] if len(branches) == 1 else field_type
    return field_type


def _is_decimal(field_type: Any) -> bool:
    inner = _avro_type(field_type)
    return isinstance(inner, dict) and inner.get("logicalType") == "decimal"


def transform_sql(
    schema: Mapping[str, Any], engine: str, positions: tuple[str, ...], delete_mode: str, *, jsonl: bool
) -> str:
    """The table's SQL transform over the Bronze rows (``<SRC>``): every data and Debezium column
    but ``__deleted``, ``_cdc_position`` and the delete marker; TRUNCATE and re-snapshot markers
    dropped. For JSON-lines Bronze the rows are the converter's ``payload`` and decimals arrive as
    text, cast here to their exact type.

    Raises:
        HudiError: for an unknown source engine.
    """
    columns = []
    for field in schema["fields"]:
        name = field["name"]
        if not _AVRO_NAME.fullmatch(name):  # Avro's own rule: the name is safe between backticks
            raise HudiError(f"Failed to build the streamer's SQL transform: {name!r} is no Avro field name")
        if name == "__deleted":
            continue
        if jsonl and _is_decimal(field["type"]):
            inner = _avro_type(field["type"])
            exact = f"DECIMAL({int(inner['precision'])}, {int(inner.get('scale', 0))})"
            columns.append(f"CAST(`{name}` AS {exact}) AS `{name}`")
        else:
            columns.append(f"`{name}`")
    marker = SOFT_DELETE_FIELD if delete_mode == "soft" else DELETE_MARKER_FIELD
    ops = ", ".join(f"'{o}'" for o in CHANGE_OPS)
    source = "(SELECT payload.* FROM <SRC>) AS bronze" if jsonl else "<SRC>"
    # names checked against Avro's rule above, everything else is the workbook's own text
    select = f"SELECT {', '.join(columns)}, {position_sql(engine, positions)} AS `{POSITION_COLUMN}`, "
    deleted = f"coalesce(`__deleted` = 'true', false) AS `{marker}`"
    return f"{select}{deleted} FROM {source} WHERE `__op` IN ({ops})"


def _json_source_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The reader schema of JSON-lines Bronze: the converter's envelope, ``payload`` holding the
    row; decimals as strings (see the module docstring)."""
    fields = []
    for field in schema["fields"]:
        if _is_decimal(field["type"]):
            fields.append({"name": field["name"], "type": ["null", "string"], "default": None})
        else:
            fields.append(field)
    payload = {"type": "record", "name": "payload", "fields": fields}
    return {
        "type": "record",
        "name": schema.get("name", "envelope").replace(".", "_") + "_envelope",
        "fields": [{"name": "payload", "type": payload}],
    }


def resume_checkpoint(params: WorkbookParams, table: SilverTableParams) -> str | None:
    """``--checkpoint`` for a table the PySpark engine wrote last (``silver.engine`` switched to
    streamer), else None: the newest millisecond up to which every Bronze file is taken, so the
    streamer goes on where the PySpark engine stopped. Re-reading a few files below it applies
    nothing twice: an upsert by key with the log position as ordering field leaves the same row.
    """
    state = read_table_state(table_config(params, table).base_path)
    if state.is_new or state.streamer_checkpoint:
        return None
    store = bronze_store(params)
    listing = store.list(silver_topic(params, table))
    pending, _ = pending_bronze(
        params.model_copy(update={"silver": params.silver.model_copy(update={"engine": "pyspark"})}),
        table,
        store,
        state,
    )
    if not listing:
        return "0"
    if pending:
        return str(min(int(o.modified * 1000) for o in pending) - 1)
    return str(max(int(o.modified * 1000) for o in listing))


def _newest_bronze_schema(params: WorkbookParams, table: SilverTableParams) -> dict[str, Any] | None:
    """The Avro schema of the newest Bronze file of the table's topic (None: no file yet)."""
    store = bronze_store(params)
    topic = silver_topic(params, table)
    files = store.list(topic)
    if not files:
        return None
    newest: BronzeObject = max(files, key=lambda f: (f.modified, f.uri))
    data = store.lake.read(newest.uri)
    if newest.is_jsonl:
        first = json.loads(data.split(b"\n", 1)[0])
        return avro_schema_from_connect(first.get("schema") or {}, topic)
    schema: dict[str, Any] = fastavro.reader(io.BytesIO(data)).writer_schema  # type: ignore[assignment]
    return schema


def streamer_config(params: WorkbookParams) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The properties: the keys every table shares (``base.properties``) and each table's own.

    Raises:
        HudiError: from the write options (a bad table setting).
    """
    per_table: dict[str, dict[str, str]] = {}
    for table in params.silver.tables:
        options = write_options(silver_write_options(params, table))
        options = {k: v for k, v in options.items() if not k.startswith(_NOT_STREAMER)}
        options["hoodie.payload.ordering.field"] = options["hoodie.datasource.write.precombine.field"]
        # on by default in 0.14.0: it turns the reader schema's bytes decimals into fixed, which
        # then cannot read Bronze's bytes ("AvroTypeException: Found bytes, expecting union")
        options["hoodie.streamer.schemaprovider.spark_avro_post_processor.enable"] = "false"
        options["hoodie.streamer.source.dfs.root"] = join(
            lake_uri(params, params.lake.bronze), silver_topic(params, table)
        )
        per_table[table.name] = dict(sorted(options.items()))
    shared = set.intersection(*(set(o.items()) for o in per_table.values())) if per_table else set()
    base = dict(sorted(shared))
    tables = {name: {k: v for k, v in o.items() if base.get(k) != v} for name, o in per_table.items()}
    return base, tables


def _properties_text(values: Mapping[str, str], header: str, include: str = "") -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    if include:
        lines.append(f"include={include}")
    lines += [f"{key}={value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def write_streamer_config(params: WorkbookParams, directory: Path | None = None) -> list[StreamerTable]:
    """Write ``base.properties``, one ``<table>.properties`` and one ``<table>.source.avsc`` per table
    with Bronze files, into ``directory`` (default ``<state_dir>/streamer/conf``).

    Returns:
        The tables with Bronze files (a table without any has nothing to ingest yet).

    Raises:
        HudiError: for a bad table setting.
    """
    conf = directory or params.state_path / "streamer" / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    base, tables = streamer_config(params)
    header = (
        "Generated by the workbook from params (helpers.silver.streamer); edits are overwritten.\n"
        "HoodieStreamer 0.14.0 (DeltaStreamer): shared by every table's file."
    )
    (conf / "base.properties").write_text(_properties_text(base, header), encoding="utf-8")
    jsonl = params.capture.bronze_format == "jsonl"
    out = []
    for table in params.silver.tables:
        schema = _newest_bronze_schema(params, table)
        if schema is None:
            continue
        config = table_config(params, table)
        engine = params.source(table.source).engine
        sql = transform_sql(schema, engine, position_fields(params, table), config.delete_mode, jsonl=jsonl)
        source_schema = _json_source_schema(schema) if jsonl else schema
        schema_file = conf / f"{table.name}.source.avsc"
        schema_file.write_text(json.dumps(source_schema, indent=2), encoding="utf-8")
        target_file = conf / f"{table.name}.target.avsc"
        values = dict(tables[table.name])
        values["hoodie.streamer.schemaprovider.source.schema.file"] = _uri(str(schema_file))
        values["hoodie.streamer.schemaprovider.target.schema.file"] = _uri(str(target_file))
        values["hoodie.streamer.transformer.sql"] = sql
        props = conf / f"{table.name}.properties"
        props.write_text(
            _properties_text(values, f"Silver table {table.name}: HoodieStreamer 0.14.0", "base.properties"),
            encoding="utf-8",
        )
        out.append(
            StreamerTable(
                name=table.name,
                properties=str(props),
                source_schema=str(schema_file),
                target_schema=str(target_file),
                transform_sql=sql,
                base_path=config.base_path,
                table_type=table.table_type,
                source_class="org.apache.hudi.utilities.sources."
                + ("JsonDFSSource" if jsonl else "AvroDFSSource"),
                checkpoint=resume_checkpoint(params, table),
            )
        )
    return out


def streamer_overview(params: WorkbookParams) -> dict[str, str]:
    """What notebook 03 shows before a run: each generated file's text (the properties, and the
    source schema's field names) and the one-table ``spark-submit`` command, by name."""
    tables = write_streamer_config(params)
    conf = params.state_path / "streamer" / "conf"
    out = {"base.properties": (conf / "base.properties").read_text(encoding="utf-8")}
    for t in tables:
        out[Path(t.properties).name] = Path(t.properties).read_text(encoding="utf-8")
    if tables:
        command = spark_submit_command(params, tables[0])
        out[f"spark-submit ({tables[0].name})"] = " \\\n  ".join(command)
    return out


def runtime_python() -> Path:
    """The streamer runtime's Python.

    Raises:
        JarsMissingError: when the runtime is not installed, naming the command that installs it.
    """
    python = project_root() / RUNTIME_DIR / "bin" / "python"
    if not python.exists():
        raise JarsMissingError(
            f"Failed to find the streamer runtime {RUNTIME_DIR}/ (pyspark 3.4.1): "
            "run ./workbook setup streamer"
        )
    return python


def _classpath() -> tuple[list[str], str]:
    jars = [str(p) for p in project_jars(("streamer",))]
    return jars, str(shaded_jar(_SHADE_POM, "streamer"))


def spark_submit_command(
    params: WorkbookParams, table: StreamerTable, *, continuous: bool = False
) -> list[str]:
    """The one-table command of the posts, for this machine: ``spark-submit --class
    ...HoodieStreamer <utilities jar> --props ...`` (notebook 03 shows it; the driver runs the
    same arguments for every table in one application)."""
    jars, app = _classpath()
    conf = [f"--conf={k}={v}" for k, v in _SPARK_CONF.items()]
    return [
        str(project_root() / RUNTIME_DIR / "bin" / "spark-submit"),
        "--master",
        params.silver.streamer.master,
        "--driver-memory",
        params.silver.streamer.driver_memory,
        "--jars",
        ",".join(jars),
        *conf,
        "--class",
        STREAMER_CLASS,
        app,
        *table.args(continuous=continuous, min_sync_interval_s=params.silver.streamer.min_sync_interval_s),
    ]


def _env() -> dict[str, str]:
    python = runtime_python()
    return {
        **os.environ,
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the runtime's own Spark, never one of the environment (the workbook's 3.5.6 or a cluster's)
        "SPARK_HOME": str(python.parent.parent / "lib" / f"python{_PY}" / "site-packages" / "pyspark"),
    }


def streamer_job_argv(
    params: WorkbookParams, tables: list[StreamerTable], directory: Path, *, continuous: bool
) -> tuple[list[str], dict[str, str]]:
    """``spark-submit`` of :mod:`helpers.silver.streamer_driver` for ``tables`` and its environment;
    the plan and the driver's ``status.json`` live in ``directory``."""
    runtime_python()
    jars, app = _classpath()
    directory.mkdir(parents=True, exist_ok=True)
    interval = params.silver.streamer.min_sync_interval_s
    plan = {
        "mode": "continuous" if continuous else "once",
        "status": str(directory / "driver-status.json"),
        "app_name": "workbook-streamer",
        "tables": [
            {
                "name": t.name,
                "source_schema": t.source_schema,
                "target_schema": t.target_schema,
                "transform_sql": t.transform_sql,
                "args": t.args(continuous=continuous, min_sync_interval_s=interval),
            }
            for t in tables
        ],
    }
    plan_file = directory / "plan.json"
    plan_file.write_text(json.dumps(plan, indent=2), encoding="utf-8")
    conf = [f"--conf={k}={v}" for k, v in _SPARK_CONF.items()]
    env = _env()
    env["PYSPARK_SUBMIT_ARGS"] = ""
    argv = [
        str(project_root() / RUNTIME_DIR / "bin" / "spark-submit"),
        "--master",
        params.silver.streamer.master,
        "--driver-memory",
        params.silver.streamer.driver_memory,
        "--jars",
        ",".join([*jars, app]),
        *conf,
        str(DRIVER),
        str(plan_file),
    ]
    return argv, env


def _latest(base_path: str) -> str | None:
    instants = completed_instants(base_path)
    return instants[-1].timestamp if instants else None


def run_streamer_once(params: WorkbookParams) -> pd.DataFrame:
    """One HoodieStreamer run of every Silver table with Bronze files (run-once mode): each takes
    the Bronze files modified after its checkpoint and commits them in one Hudi commit.

    Returns:
        Per table: ``table``, ``instant`` (the new commit; None when there was nothing new),
        ``commits``.

    Raises:
        HudiError: naming the tables that failed and the log.
        JarsMissingError: when the streamer runtime is not installed.
    """
    tables = write_streamer_config(params)
    before = {t.name: _latest(t.base_path) for t in tables}
    directory = params.state_path / "streamer" / "once"
    argv, env = streamer_job_argv(params, tables, directory, continuous=False)
    log_file = directory / "streamer.log"
    started = time.monotonic()
    with open(log_file, "wb") as log:
        try:
            done = subprocess.run(  # noqa: S603 - argv built here, no secret in it
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=params.silver.streamer.timeout_s,
                cwd=directory,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HudiError(
                f"Failed to run HoodieStreamer: no result in {params.silver.streamer.timeout_s:.0f} s; "
                f"see {log_file}"
            ) from None
    status_file = directory / "driver-status.json"
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    if done.returncode != 0:
        raise HudiError(
            f"Failed to run HoodieStreamer (exit code {done.returncode}): "
            f"{status.get('error') or 'no table failed, the driver did'}; see {log_file}"
        )
    rows = []
    for t in tables:
        after = _latest(t.base_path)
        rows.append(
            {
                "table": t.name,
                "instant": after if after != before[t.name] else None,
                "commits": len(completed_instants(t.base_path)),
                "seconds": (status.get("tables", {}).get(t.name) or {}).get("seconds"),
            }
        )
    frame = pd.DataFrame(rows, columns=["table", "instant", "commits", "seconds"])
    frame.attrs["seconds"] = round(time.monotonic() - started, 3)
    return frame


def run_streamer_job(params: WorkbookParams, directory: Path) -> int:
    """The continuous Silver job with ``silver.engine: streamer`` (the body of
    :mod:`helpers.silver.job`'s process): HoodieStreamer ``--continuous`` for every table with
    Bronze files, in one child ``spark-submit`` of :mod:`helpers.silver.streamer_driver` (same
    process group: a ``kill -9`` of the job's group takes it along). It writes the job's
    ``status.json`` every ``silver.min_interval_s``: ``loops`` counts the checks while the
    streamer runs, ``last_commit`` the newest instant per table. SIGTERM stops the streamer (a
    commit in flight is rolled back by the next start, as after a crash). A table added later
    is taken when the job starts again (``./workbook run`` restarts it with the new parameters).
    """
    stopping = {"flag": False}

    def stop(signum: int, _frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    previous = read_status(directory)
    status: dict[str, Any] = {
        "state": "STARTING",
        "engine": "streamer",
        "pid": os.getpid(),
        "run_id": previous.get("run_id") or uuid.uuid4().hex,
        "loops": 0,
        "last_commit": {},
        "error": None,
    }
    write_status(directory, status)
    try:
        tables = write_streamer_config(params)
        argv, env = streamer_job_argv(params, tables, directory / "streamer", continuous=True)
    except WorkbookError as exc:
        status.update(state="FAILED", error=str(exc))
        write_status(directory, status)
        return 1
    with open(directory / "streamer.log", "ab") as log:
        child = subprocess.Popen(  # noqa: S603 - argv built here, no secret in it
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=directory
        )
    driver_status = directory / "streamer" / "driver-status.json"
    while not stopping["flag"] and child.poll() is None:
        driver = json.loads(driver_status.read_text()) if driver_status.exists() else {}
        if driver.get("state") == "RUNNING":
            status["state"] = "RUNNING"
            status["loops"] += 1
            for t in tables:
                latest = _latest(t.base_path)
                if latest and (status["last_commit"].get(t.name) or {}).get("instant") != latest:
                    status["last_commit"][t.name] = {"instant": latest, "at": time.time()}
        write_status(directory, status)
        time.sleep(params.silver.min_interval_s)
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
        status["state"] = "STOPPED"
    else:
        driver = json.loads(driver_status.read_text()) if driver_status.exists() else {}
        status["state"] = "FAILED"
        status["error"] = (
            f"HoodieStreamer stopped (exit code {child.returncode}): {driver.get('error') or 'see the log'}; "
            f"see {directory / 'streamer.log'}"
        )
    write_status(directory, status)
    return 0 if status["state"] == "STOPPED" else 1
