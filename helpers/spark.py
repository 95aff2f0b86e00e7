"""The one place that builds the workbook's SparkSession (:func:`build_spark_session`).

Every notebook, job, test and benchmark gets its session here, so the Hudi bundle, the Hive
catalog, loopback binding and UTC are the same everywhere. :func:`spark_conf` returns the settings;
``docs/architecture.md``, "Foundation", explains them.

Example:
    >>> spark = build_spark_session(load_params("local"))       # doctest: +SKIP
    >>> spark.sql("SELECT count(*) FROM tickit_cdc_hudi.sale")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.errors import JarsMissingError, SparkSetupError
from helpers.jars import hadoop_classes_jar, project_jars
from helpers.lake_store import lake_s3, use_lake_s3
from helpers.local.class_data import archive_for
from helpers.local.credentials import write_private
from helpers.local.metastore import LocalMetastore
from helpers.local.s3 import S3Connection
from helpers.local.scratch import driver_scratch, scratch_conf
from helpers.local.spark_cluster import LocalSparkCluster, runs_on_this_machine
from helpers.params import WorkbookParams, load_params
from helpers.poll import wait_until
from helpers.proc import log_tail

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_SPARK_CONF",
    "DRIVER_LOG",
    "HUDI_DATASOURCE_CLASS",
    "LOOPBACK",
    "RUN_DRIVER_ENV",
    "RunDriver",
    "attach_run_driver",
    "build_spark_session",
    "hudi_datasource_available",
    "jvm_class_available",
    "s3a_conf",
    "spark_conf",
]

log = logging.getLogger(__name__)

#: Class of the official Hudi Spark datasource (in the Hudi Spark bundle).
HUDI_DATASOURCE_CLASS = "org.apache.hudi.DefaultSource"

LOOPBACK = "127.0.0.1"

#: JVM options of every driver and executor, local or on a cluster: UTC and IPv4, and no attach of
#: HotSpot's Serviceability Agent by JOL, the object-layout library Hudi shades to size the records
#: of a merge (``ExternalSpillableMap``). Without the flag, a JVM's first merge starts a second JVM
#: that tries to attach to it (refused here, where ``ptrace`` is not allowed; where it is allowed, it
#: stops the JVM while attached), and JOL then guesses the layout as it does with the flag: 2.1-2.7 s
#: once per JVM on this machine (bench/README.md, "JOL's attach at a JVM's first merge").
COMMON_JVM = ("-Duser.timezone=UTC", "-Djava.net.preferIPv4Stack=true", "-Djol.skipHotspotSAAttach=true")

#: Settings applied to every session (``spark.conf`` of the parameters and the caller's ``conf``
#: win). Sized for 2 cores / 24 GiB.
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.maxResultSize": "2g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": LOOPBACK,
    "spark.driver.host": LOOPBACK,
    "spark.driver.extraJavaOptions": " ".join(COMMON_JVM),
    "spark.executor.extraJavaOptions": " ".join(COMMON_JVM),
    # the official Hudi datasource: Kryo with Hudi's registrar, its SQL extension and catalog
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.sql.hive.convertMetastoreParquet": "false",
}

#: Settings of a session on this machine (local mode or the local cluster); a cluster of real
#: nodes keeps Spark's defaults, which size the work by its data and executors. Shuffles in four
#: partitions, SQL's and RDDs' (Hudi's), for two cores: a cluster starts from 200 SQL shuffle
#: partitions, coalesced adaptively, where four would leave a large first load to four tasks. A read
#: of over 32 files (a Bronze round's) lists them in four tasks, not one per file as a cluster spreads
#: S3 requests: 1.9 s instead of 5.4 s for 275 files (bench/README.md, "The spread taken apart").
LOCAL_SPARK_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
}

#: The ``file:`` file system of local sessions with the project's jars (the workbook's own class,
#: ``hadoop/src``): Hadoop's local file system, checksums included, setting permissions in the JVM.
#: Hadoop's own starts a ``chmod`` process for every file and folder it creates (15 per one-row
#: Hudi commit on a copy-on-write table, 13 on a merge-on-read one); with this class a one-row
#: upsert took 0.06 s less (bench/README.md, "One chmod process per file"). ``FileContext``
#: (Structured Streaming's checkpoints: the local-kafka profile's Bronze sink) builds its own from
#: ``fs.AbstractFileSystem.file.impl``: the same class under Hadoop's ``FileContext`` API.
LOCAL_FILE_SYSTEMS: Mapping[str, str] = {
    "spark.hadoop.fs.file.impl": "workbook.hadoop.NioLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "workbook.hadoop.NioLocalFs",
}

#: JVM options of a driver on this machine (local mode's, its own executor, and the local cluster's)
#: and of that cluster's executors (:func:`helpers.local.spark_cluster.runs_on_this_machine`). The serial
#: collector keeps heaps small on 2 cores: writing a 172,456-row Hudi table eight times (CoW and MoR,
#: bulk insert then upserts) peaked at 759 MiB resident instead of 1,066 MiB with the default G1, in
#: the same time (24.2 s against 23.3 s); a cluster executor of two cores, 965-1,022 MiB against
#: 1,124-1,141 MiB (bench/README.md, "The executors' collector"). Without the performance-data file
#: (read only by ``jps`` and ``jstat``) the JVM's periodic task stops sampling it every 50 ms, 0.12 %
#: of a core of an idle continuous job ("An idle pipeline"). Not for real clusters (no ``spark.master``).
LOCAL_DRIVER_JVM = ("-XX:+UseSerialGC", "-XX:-UsePerfData")


def local_driver_options(params: WorkbookParams) -> tuple[str, ...]:
    """JVM options of every driver the workbook starts on this machine (sessions', and the streamer
    runtime's ``spark-submit``): :data:`LOCAL_DRIVER_JVM`, then ``local.jit``'s."""
    return (*LOCAL_DRIVER_JVM, *params.local.jit_options)


_QUIET_LOG_LEVEL = "ERROR"

#: Where a local driver JVM's own output goes, under the state directory: log4j's console lines,
#: Hadoop's ``NativeCodeLoader`` warning at start-up and JOL's at the first merge (:data:`COMMON_JVM`). They
#: used to land on the console between the workbook's progress bars; errors still reach Python
#: (py4j carries the Java exception), and a JVM that fails to start is reported with this file.
DRIVER_LOG = Path("logs") / "spark-driver.log"


def spark_conf(params: WorkbookParams, extra_jar_sets: tuple[str, ...] = ()) -> dict[str, str]:
    """The Spark settings of a session for ``params`` (see ``docs/architecture.md``, "Foundation").

    For a driver on this machine it also makes this process's scratch folder under the state
    directory (Spark's local dir and the JVM's temporary dir), after removing the folders of
    processes that have ended (:mod:`helpers.local.scratch`).

    Args:
        params: workbook parameters (``spark`` section; ``local.metastore`` for the local catalog).
        extra_jar_sets: further sets of ``scripts/jars.tsv`` to load (benchmarks: ``bench``).

    Returns:
        Setting name to value.

    Raises:
        SparkSetupError: when a project jar is missing.
    """
    settings: dict[str, str] = dict(DEFAULT_SPARK_CONF)
    settings["spark.driver.memory"] = params.spark.driver_memory
    cluster = LocalSparkCluster(params)
    on_this_machine = runs_on_this_machine(params)
    if on_this_machine:
        settings["spark.driver.extraJavaOptions"] += " ".join(("", *local_driver_options(params)))
        settings.update(LOCAL_SPARK_CONF)
        scratch = driver_scratch(params.state_path)  # not /tmp: a killed driver's files are removed later
        settings.update(scratch_conf(scratch, settings["spark.driver.extraJavaOptions"]))
    if cluster.wanted:  # the local standalone cluster: executors in JVMs of their own, bounded
        if cluster.pids()["master"] is None:
            raise SparkSetupError(
                f"Failed to configure Spark: spark.master is the local cluster {cluster.url}, which is not "
                "running; start it with ./workbook stack start"
            )
        settings["spark.executor.memory"] = params.local.spark.executor_memory
        executor_options = (*local_driver_options(params), f"-Djava.io.tmpdir={cluster.tmp_dir}")
        settings["spark.executor.extraJavaOptions"] += " ".join(("", *executor_options))
        settings["spark.cores.max"] = str(params.local.spark.app_cores)
    local_s3 = use_lake_s3(params)
    jars: list[str] = []
    if params.spark.jars == "project":
        try:
            jars = [str(p) for p in project_jars(("spark", *extra_jar_sets))]
            if on_this_machine:
                jars.append(str(hadoop_classes_jar()))
                settings.update(LOCAL_FILE_SYSTEMS)
            if local_s3 is not None:  # s3a and its AWS SDK (not the server's own jar)
                jars += [str(p) for p in project_jars(("s3",)) if not p.name.startswith("s3proxy-")]
        except JarsMissingError as exc:
            raise SparkSetupError(str(exc)) from None
    jars += list(params.spark.extra_jars)
    archive = archive_for(jars) if on_this_machine and jars else None  # the set-up's, for these jars
    sides = ("spark.driver", "spark.executor") if cluster.wanted else ("spark.driver",)
    for side in sides if archive is not None else ():  # the cluster's executors: the driver's class path
        settings[f"{side}.extraJavaOptions"] += f" -XX:SharedArchiveFile={archive}"
    if jars:
        settings["spark.jars"] = ",".join(jars)
        # on the driver's own class path too: Kryo's registrar is loaded by a class loader that
        # does not see spark.jars
        settings["spark.driver.extraClassPath"] = os.pathsep.join(jars)
        settings["spark.executor.extraClassPath"] = os.pathsep.join(jars)
    if params.spark.catalog == "local":
        metastore = LocalMetastore(params)
        if metastore.pid() is None:
            raise SparkSetupError(
                f"Failed to configure the Spark catalog: the local metastore (127.0.0.1:{metastore.port}, "
                f"state {params.state_path}) is not running; start it with ./workbook stack start, or set "
                "spark.catalog: none for a session without catalog"
            )
        settings.update(metastore.spark_conf())
    elif params.spark.catalog == "cluster":
        settings["spark.sql.catalogImplementation"] = "hive"
    if local_s3 is not None:
        settings.update(s3a_conf(local_s3))
    settings.update(params.spark.conf)
    return settings


def s3a_conf(connection: S3Connection) -> dict[str, str]:
    """Hadoop settings that send ``s3://`` and ``s3a://`` paths to the local S3 server through
    s3a, as EMR's S3 file system does on AWS: endpoint, region, path-style requests over plain
    HTTP, and the provider that reads ``fs.s3a.access.key`` / ``fs.s3a.secret.key``. The keys
    themselves are not here: PySpark hands every setting of the builder to ``spark-submit`` as a
    ``--conf`` argument, visible in ``ps``; :func:`build_spark_session` sets them on the running
    session's Hadoop configuration instead (through the local Py4J gateway)."""
    return {f"spark.hadoop.{key}": value for key, value in connection.hadoop_settings().items()}


def _set_s3_keys(spark: SparkSession, connection: S3Connection) -> None:
    """The local S3 server's keys on the session's Hadoop configuration (never on a command line)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop.set("fs.s3a.access.key", connection.access_key)
    hadoop.set("fs.s3a.secret.key", connection.secret_key)


def build_spark_session(
    params: WorkbookParams | None = None,
    app_name: str = "cdc-lakehouse-workbook",
    conf: Mapping[str, str] | None = None,
    *,
    extra_jar_sets: tuple[str, ...] = (),
) -> SparkSession:
    """Build (or return the running) SparkSession with the workbook's settings.

    ``getOrCreate`` semantics: a session already running in this process is returned as it is
    (only runtime-modifiable settings of ``conf`` are applied); static settings take effect only
    on the first call, before the JVM starts. A running session on another master than
    ``params`` asks for is returned with a warning that names both (a kernel restarted with the
    new parameters builds the asked one).

    Args:
        params: workbook parameters; default ``load_params("local")``.
        app_name: Spark application name.
        conf: extra or overriding Spark settings (win over everything else).
        extra_jar_sets: further jar sets of ``scripts/jars.tsv`` (benchmarks: ``("bench",)``).

    Returns:
        The active SparkSession: Hudi datasource available, session time zone UTC.

    Raises:
        SparkSetupError: if a jar is missing (naming the set-up command) or the JVM or the
            session cannot be started (e.g. no Java).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        running = active.sparkContext.master
        if params is not None and params.spark.master and running != params.spark.master:
            log.warning(
                "The Spark session already running in this process is on %s, not on spark.master %s as "
                "asked: it is used as it is; restart the kernel (or the process) to build one on %s",
                running,
                params.spark.master,
                params.spark.master,
            )
        _apply_runtime_conf(active, conf or {})
        return active
    if params is None:
        params = load_params("local")
    settings = spark_conf(params, extra_jar_sets)
    settings.update(conf or {})
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if params.spark.master:
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # block manager and (if enabled) UI on loopback
    master = params.spark.master or None
    driver_log = Path(params.state_dir) / DRIVER_LOG
    try:
        if master is not None and not attach_run_driver():
            _launch_driver(settings, master, app_name, driver_log)
        builder = SparkSession.builder.appName(app_name)
        if master is not None:
            builder = builder.master(master)
        for key, value in settings.items():
            builder = builder.config(key, value)
        if settings.get("spark.sql.catalogImplementation") == "hive":
            builder = builder.enableHiveSupport()
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(_QUIET_LOG_LEVEL)
        local_s3 = lake_s3()
        if local_s3 is not None:
            _set_s3_keys(spark, local_s3)
    except Exception as exc:  # noqa: BLE001 - JVM start-up errors have many types
        output = ""
        if driver_log.exists():
            output = f" The driver's output ({driver_log}) ends with:\n{log_tail(driver_log)}"
        raise SparkSetupError(
            f"Failed to build SparkSession {app_name!r} on {master!r}: {exc}. "
            f"Check that Java 17 is installed (java -version) and run ./workbook setup.{output}"
        ) from exc
    return spark


def _launch_driver(settings: Mapping[str, str], master: str, app_name: str, log: Path) -> None:
    """Start this process's driver JVM (the py4j gateway) with its standard output and error
    appended to ``log`` instead of the console; the session is then built on it. A gateway that
    already runs (an earlier session of this process, or spark-submit's) is left as it is."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    SparkContext._ensure_initialized(gateway=_start_gateway(settings, master, app_name, log))


def _start_gateway(
    settings: Mapping[str, str], master: str, app_name: str, log: Path, cwd: Path | None = None
) -> Any:
    """A new driver JVM started by PySpark's own launcher (``spark-submit pyspark-shell``), its
    output appended to ``log``; returns PySpark's Py4J connection to it."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).setAll(list(settings.items())).setAppName(app_name).setMaster(master)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        out.write(f"--- {stamp} pid {os.getpid()}: driver of {app_name!r} on {master}\n".encode())
        out.flush()
        popen: dict[str, Any] = {"stdout": out, "stderr": subprocess.STDOUT}
        if cwd is not None:
            popen["cwd"] = str(cwd)
        return launch_gateway(conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]


#: Names, to the kernels of a workbook run, the driver JVM the run lends them (:class:`RunDriver`):
#: ``<the run's process id>:<the file that gives the JVM's Py4J port and secret>``.
RUN_DRIVER_ENV = "WORKBOOK_RUN_SPARK_DRIVER"

#: How long a kernel waits for its run's driver JVM to be up (the run starts it on the kernel's
#: request; a start takes a few seconds).
RUN_DRIVER_WAIT_S = 300.0


class RunDriver:
    """The local Spark driver JVM a workbook run starts once and lends to its notebooks' kernels,
    one after another (:func:`helpers.runner.run_workbook`).

    Each kernel used to start a driver JVM of its own and pay its warm-up again: the JIT compiles
    Spark's, Hudi's and Py4J's hot code anew (a third to two fifths of a cold driver's CPU,
    ``bench/README.md``), and Spark generates and compiles its query classes anew. Lent one JVM,
    a notebook finds the code the notebooks before it warmed.

    How: when the first kernel asks for it (a request file beside the connection file), the run
    starts the JVM with PySpark's own launcher in a background thread, with the settings a kernel's
    own driver would start with (:func:`spark_conf`: Hudi reads its Hive sync's metastore from the
    local file system's configuration, which the launch caches) and the notebooks' folder as its
    working folder, and writes the JVM's Py4J port and secret to a file only this user can read
    (:func:`helpers.local.credentials.write_private`). A run whose notebooks use no Spark starts
    no JVM. A kernel whose parent is the run connects through PySpark's own hand-over
    (``PYSPARK_GATEWAY_PORT`` and ``PYSPARK_GATEWAY_SECRET``, as spark-submit gives a Python
    driver) and builds its session there, with a SparkContext of its own
    (:func:`build_spark_session`, unchanged otherwise). A kernel ends without stopping its
    context; the run stops it after each notebook (:meth:`release_context`), so each notebook
    starts with a fresh context in a warm JVM. Processes the kernels start (the continuous Silver
    job, capture workers) are not the run's children, and start drivers of their own.

    Only for a local master (``local[...]``): on a cluster, the cluster's driver is the cluster's.
    Written here because no component does it: Spark Connect shares a driver between clients,
    but its clients have no Py4J access to the JVM, which Silver's rounds and Hudi's APIs use.
    """

    def __init__(self, params: WorkbookParams, cwd: Path) -> None:
        self.params = params
        self.cwd = cwd
        self.info = params.state_path / "run" / f"spark-driver-{os.getpid()}.json"
        self.log = params.state_path / DRIVER_LOG
        self._gateway: Any = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._launched = threading.Event()

    @staticmethod
    def wanted(params: WorkbookParams) -> bool:
        """Whether a run with ``params`` lends its kernels a driver (a local master)."""
        return params.spark.master.startswith("local")

    def start(self) -> dict[str, str]:
        """Wait in the background for the first kernel's request; returns the environment entry
        that names this driver to the run's kernels."""
        self.info.parent.mkdir(parents=True, exist_ok=True)
        self.info.unlink(missing_ok=True)
        _request_file(self.info).unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._serve, name="run-spark-driver", daemon=True)
        self._thread.start()
        return {RUN_DRIVER_ENV: f"{os.getpid()}:{self.info}"}

    def _serve(self) -> None:
        request = _request_file(self.info)
        while not request.exists():
            if self._closing.wait(0.2):
                return
        try:
            self._launch()
        finally:
            self._launched.set()

    def _launch(self) -> None:
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # block manager on loopback, as a session's own driver
        try:
            settings = spark_conf(self.params)
            master = self.params.spark.master
            self._gateway = _start_gateway(settings, master, "workbook run", self.log, self.cwd)
            if hasattr(self._gateway, "java_parameters"):  # PySpark's default, pinned threads
                parameters = self._gateway.java_parameters
            else:
                parameters = self._gateway.gateway_parameters
            payload: dict[str, Any] = {"port": parameters.port, "secret": parameters.auth_token}
        except Exception as exc:  # noqa: BLE001 - reported to the kernel that needs the driver
            reason = str(exc).rstrip(".")  # the kernel's error adds the end of the driver's log
            payload = {"error": f"Failed to start the workbook run's Spark driver: {reason}."}
        write_private(self.info, json.dumps(payload), replace=True)

    @property
    def pid(self) -> int | None:
        """The JVM's process id, once a kernel has asked for it."""
        return self._gateway.proc.pid if self._launched.is_set() and self._gateway is not None else None

    def active_context(self) -> Any:
        """The JVM's running SparkContext (a Py4J reference), or None."""
        if not self._launched.is_set() or self._gateway is None:
            return None  # no kernel asked for it (yet)
        contexts = getattr(getattr(self._gateway.jvm.org.apache.spark, "SparkContext$"), "MODULE$")
        active = contexts.getActive()  # the Scala object's method (no static forwarder)
        return active.get() if active.isDefined() else None

    def release_context(self) -> None:
        """Stop the SparkContext a finished notebook's kernel left in the JVM, if any."""
        try:
            context = self.active_context()
            if context is not None:
                context.stop()
        except Exception as exc:  # noqa: BLE001 - Py4J's errors; the next kernel's session says more
            log.warning("the workbook run's Spark driver did not stop a notebook's context: %s", exc)

    def close(self) -> None:
        """Stop the JVM (its context first), if it started, and remove the run's files."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join()  # a launch under way ends first
        try:
            self.release_context()
        finally:
            gateway, self._gateway = self._gateway, None
            self.info.unlink(missing_ok=True)
            _request_file(self.info).unlink(missing_ok=True)
            if gateway is not None:
                gateway.shutdown()
                process = gateway.proc
                process.stdin.close()  # the gateway's JVM exits when its standard input ends
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _request_file(info: Path) -> Path:
    """The file by which a kernel asks its run for the driver (:class:`RunDriver`)."""
    return info.with_suffix(".wanted")


def attach_run_driver() -> bool:
    """Connect this process to the driver JVM its workbook run lends it (:class:`RunDriver`):
    only a process whose parent is that run does (a notebook's kernel), not the processes it
    starts. Returns whether it did."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    owner, _, info = os.environ.get(RUN_DRIVER_ENV, "").partition(":")
    if SparkContext._gateway is not None or not info or owner != str(os.getppid()):
        return False
    where = Path(info)
    _request_file(where).touch(mode=0o600)
    wait_until(where.exists, timeout_s=RUN_DRIVER_WAIT_S, what=f"the workbook run's Spark driver ({where})")
    address = json.loads(where.read_text())
    if "error" in address:
        raise SparkSetupError(address["error"])
    os.environ["PYSPARK_GATEWAY_PORT"] = str(address["port"])
    os.environ["PYSPARK_GATEWAY_SECRET"] = address["secret"]
    try:
        gateway = launch_gateway()  # type: ignore[no-untyped-call]
    finally:  # not for the processes this one starts
        del os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"]
    SparkContext._ensure_initialized(gateway=gateway)
    return True


def _apply_runtime_conf(spark: SparkSession, conf: Mapping[str, str]) -> None:
    """Apply the runtime-modifiable settings of ``conf`` to a running session."""
    for key, value in conf.items():
        try:
            if spark.conf.isModifiable(key):
                spark.conf.set(key, value)
        except Exception:  # noqa: BLE001 - static settings cannot change after start-up
            continue


def jvm_class_available(spark: SparkSession, class_name: str) -> bool:
    """Tell whether a JVM class can be loaded by the session's context class loader.

    Args:
        spark: A classic (non-Connect) SparkSession.
        class_name: Fully qualified Java class name.

    Returns:
        True if ``Class.forName`` succeeds, False otherwise (also on Spark Connect).
    """
    try:
        jvm = spark.sparkContext._jvm
        if jvm is None:
            return False
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
        return True
    except Exception:  # noqa: BLE001 - Py4JJavaError (ClassNotFound), Connect sessions, ...
        return False


def hudi_datasource_available(spark: SparkSession) -> bool:
    """Tell whether the official Hudi Spark datasource (``format("hudi")``) can be used.

    Args:
        spark: The active SparkSession.

    Returns:
        True if :data:`HUDI_DATASOURCE_CLASS` loads in the driver JVM.
    """
    return jvm_class_available(spark, HUDI_DATASOURCE_CLASS)
