"""How ``silver.engine: streamer`` runs: Hudi's own HoodieStreamer (DeltaStreamer), as in the
original design, on what EMR 6.15 runs (Hudi 0.14.0, Spark 3.4). What it is told (the properties
files, schemas and SQL transform): :mod:`helpers.silver.streamer_config`.

Locally the runtime is project-local (``./workbook setup streamer``): pyspark 3.4.1 in
``.venv-streamer``, the Hudi 0.14.0 Spark bundle and the utilities jar re-shaded by the set-up
(``scripts/jars.tsv``, set ``streamer``). :mod:`helpers.silver.streamer_driver` runs every table's
HoodieStreamer in one Spark application, once (:func:`run_streamer_once`) or in rounds until stopped
(the continuous job, :func:`run_streamer_job`; why not ``--continuous``: the driver's docstring).
On EMR the same files go to S3 and each table is one ``spark-submit --class ...HoodieDeltaStreamer``
step (:mod:`helpers.deploy.streamer_steps`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.capture.raw_topics import ensure_raw_capture
from helpers.errors import HudiError, JarsMissingError, WorkbookError
from helpers.hudi.timeline import completed_instants
from helpers.jars import project_archive, project_jars, shaded_jar
from helpers.local.scratch import SCRATCH_DIR, driver_scratch, scratch_conf
from helpers.params import SilverTableParams, WorkbookParams, project_root
from helpers.proc import read_status, replace_text, stop_on_signal, write_status
from helpers.silver.streamer_config import StreamerTable, write_streamer_config
from helpers.silver.tables import table_lock
from helpers.spark import DEFAULT_SPARK_CONF, LOCAL_SPARK_CONF, local_driver_options

__all__ = [
    "DELTASTREAMER_CLASS",
    "DRIVER",
    "RUNTIME_DIR",
    "SPARK_CONF",
    "STREAMER_CLASS",
    "run_streamer_job",
    "run_streamer_once",
    "spark_submit_base",
    "spark_submit_command",
    "streamer_job_argv",
    "streamer_overview",
]

#: HoodieStreamer's class; ``HoodieDeltaStreamer`` (the posts' name) is its deprecated alias.
STREAMER_CLASS = "org.apache.hudi.utilities.streamer.HoodieStreamer"
DELTASTREAMER_CLASS = "org.apache.hudi.utilities.deltastreamer.HoodieDeltaStreamer"
#: The streamer runtime's virtual environment (pyspark 3.4.1), made by ``scripts/bootstrap.sh``.
RUNTIME_DIR = ".venv-streamer"
#: The driver script the runtime's spark-submit runs.
DRIVER = Path(__file__).with_name("streamer_driver.py")
_SHADE_POM = "hudi-utilities-streamer"
#: How often the continuous job generates the configuration again (a new column or table in Bronze).
SCHEMA_CHECK_S = 10.0
_PY = "3.11"  # the runtime venv's Python (scripts/bootstrap.sh makes it with the workbook's python3)
#: Spark settings of every streamer run (the probe's, plus loopback binding and UTC locally).
SPARK_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.extraJavaOptions": DEFAULT_SPARK_CONF["spark.driver.extraJavaOptions"],
}


def streamer_overview(params: WorkbookParams) -> dict[str, str]:
    """What notebook 03 shows before a run: each generated file's text (the properties, and the
    source schema's field names) and the one-table ``spark-submit`` command, by name."""
    tables = write_streamer_config(params)
    conf = params.state_path / "streamer" / "conf"
    out = {"base.properties": (conf / "base.properties").read_text(encoding="utf-8")}
    for t in tables:
        out[f"{t.name}.properties"] = (conf / f"{t.name}.properties").read_text(encoding="utf-8")
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


def _classpath(params: WorkbookParams) -> tuple[list[str], str]:
    jars = [str(p) for p in project_jars(("streamer",))]
    if params.silver.streamer.source == "kafka":  # Apicurio's deserializer for the Debezium sources
        converter = project_archive("registry", "apicurio-registry-distro-connect-converter")
        jars += [str(p) for p in sorted(converter.glob("apicurio-*.jar"))]
    return jars, str(shaded_jar(_SHADE_POM, "streamer"))


def spark_submit_command(params: WorkbookParams, table: StreamerTable) -> list[str]:
    """The one-table command of the posts, for this machine: ``spark-submit --class
    ...HoodieStreamer <utilities jar> --props ...`` (notebook 03 shows it; the driver runs the
    same arguments for every table in one application)."""
    jars, app = _classpath(params)
    return [
        *spark_submit_base(params, jars, scratch=None),
        "--class",
        STREAMER_CLASS,
        app,
        *table.args(),
    ]


def spark_submit_base(params: WorkbookParams, jars: list[str], *, scratch: Path | None) -> list[str]:
    """The streamer runtime's ``spark-submit`` with the master, driver memory, ``jars`` and
    :data:`SPARK_CONF` (what follows is the application). A local master's driver also gets the
    options of the workbook's own local drivers (:func:`helpers.spark.local_driver_options`: the
    serial collector, and ``local.jit``'s; with CI's ``quick``, a run of the twelve tables on CI's
    data used 41-45 s of CPU against 60-68 s, in about the same wall time; ``bench/README.md``) and
    ``scratch``, the starting process's folder under the state directory
    (:mod:`helpers.local.scratch`), for Spark's local dir and the JVM's temporary files; None for
    a command that is only shown, which names the folder's pattern and creates nothing."""
    conf = dict(SPARK_CONF)
    if params.silver.streamer.master.startswith("local"):
        # shuffles sized for this machine, as the workbook's own local sessions (a cluster's
        # master keeps Spark's defaults, which grow with its executors)
        shuffles = ("spark.sql.shuffle.partitions", "spark.default.parallelism")
        conf.update({k: LOCAL_SPARK_CONF[k] for k in shuffles})
        folder = scratch or params.state_path / SCRATCH_DIR / "PID-START"
        options = " ".join((conf["spark.driver.extraJavaOptions"], *local_driver_options(params)))
        conf.update(scratch_conf(folder, options))
    return [
        str(project_root() / RUNTIME_DIR / "bin" / "spark-submit"),
        "--master",
        params.silver.streamer.master,
        "--driver-memory",
        params.silver.streamer.driver_memory,
        "--jars",
        ",".join(jars),
        *[f"--conf={k}={v}" for k, v in conf.items()],
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
    jars, app = _classpath(params)
    directory.mkdir(parents=True, exist_ok=True)
    interval = params.silver.streamer.min_sync_interval_s
    plan = {
        "mode": "continuous" if continuous else "once",
        "status": str(directory / "driver-status.json"),
        "app_name": "workbook-streamer",
        "min_sync_interval_s": interval,
        "tables": [t.plan_entry() for t in tables],
    }
    plan_file = directory / "plan.json"
    text = json.dumps(plan, indent=2)
    if not plan_file.exists() or plan_file.read_text(encoding="utf-8") != text:
        replace_text(plan_file, text)  # a change: the running driver reads it again
    env = _env()
    env["PYSPARK_SUBMIT_ARGS"] = ""
    argv = [
        # a killed driver's scratch (107 MB of copied jars) is not left in /tmp
        *spark_submit_base(params, [*jars, app], scratch=driver_scratch(params.state_path)),
        str(DRIVER),
        str(plan_file),
    ]
    return argv, env


@contextlib.contextmanager
def _locked(params: WorkbookParams, names: list[str], timeout_s: float = 300.0) -> Iterator[ExitStack]:
    """The writer locks of the tables ``names`` (:func:`helpers.silver.tables.table_lock`, the ones
    the PySpark engine takes): HoodieStreamer is then the tables' only writer; more are taken
    through the returned stack."""
    with ExitStack() as stack:
        for name in names:
            stack.enter_context(table_lock(params, _table(params, name), timeout_s))
        yield stack


def _table(params: WorkbookParams, name: str) -> SilverTableParams:
    return next(t for t in params.silver.tables if t.name == name)


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
    if params.silver.streamer.source == "kafka":
        ensure_raw_capture(params)  # the Debezium topics it reads, caught up with the workbook's
    tables = write_streamer_config(params)
    before = {t.name: _latest(t.base_path) for t in tables}
    directory = params.state_path / "streamer" / "once"
    argv, env = streamer_job_argv(params, tables, directory, continuous=False)
    log_file = directory / "streamer.log"
    started = time.monotonic()
    with _locked(params, [t.name for t in tables]), open(log_file, "wb") as log:
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
    :mod:`helpers.silver.job`'s process): every table with Bronze files synced by its HoodieStreamer
    in rounds, every ``silver.streamer.min_sync_interval_s``, in one child ``spark-submit`` of
    :mod:`helpers.silver.streamer_driver` (same process group: a ``kill -9`` of the job's group
    takes it along). The job's ``status.json``: ``loops`` counts the driver's finished rounds,
    ``last_commit`` the newest instant per table, ``error`` the failed tables of the last round.
    The job holds the writer locks of its tables while it runs
    (:func:`helpers.silver.tables.table_lock`): a PySpark ingestion of one of them waits, then fails
    naming the lock, instead of writing beside HoodieStreamer. SIGTERM stops the streamer (a commit
    in flight is rolled back by the next start, as after a crash). Every :data:`SCHEMA_CHECK_S` the
    job generates the configuration again: a Bronze schema with a new column, or a table's first
    Bronze file, rewrites the plan, which the driver reads again before its next round (and
    :func:`helpers.silver.streamer_resume.reread_checkpoint` reads again what an older reader
    schema took). A table added to the parameters is taken when the job starts again
    (``./workbook run`` restarts it with the new parameters).
    """
    stopping = stop_on_signal()
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
    with ExitStack() as held:
        try:
            if params.silver.streamer.source == "kafka":
                ensure_raw_capture(params)
            tables = write_streamer_config(params)
            locks = held.enter_context(_locked(params, [t.name for t in tables]))
            argv, env = streamer_job_argv(params, tables, directory / "streamer", continuous=True)
        except WorkbookError as exc:
            status.update(state="FAILED", error=str(exc))
            write_status(directory, status)
            return 1
        return _supervise(params, directory, status, stopping, tables, locks, argv, env)


def _supervise(
    params: WorkbookParams,
    directory: Path,
    status: dict[str, Any],
    stopping: threading.Event,
    tables: list[StreamerTable],
    locks: ExitStack,
    argv: list[str],
    env: dict[str, str],
) -> int:
    """Run the continuous driver until stopped or failed (see :func:`run_streamer_job`)."""
    with open(directory / "streamer.log", "ab") as log:
        child = subprocess.Popen(  # noqa: S603 - argv built here, no secret in it
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=directory
        )
    driver_status = directory / "streamer" / "driver-status.json"
    refreshed = time.monotonic()
    while not stopping.is_set() and child.poll() is None:
        driver = json.loads(driver_status.read_text()) if driver_status.exists() else {}
        if driver.get("state") == "RUNNING" and driver.get("rounds", 0) > status["loops"]:
            status.update(state="RUNNING", loops=driver["rounds"], error=driver.get("error"))
            for t in tables:
                latest = _latest(t.base_path)
                if latest and (status["last_commit"].get(t.name) or {}).get("instant") != latest:
                    status["last_commit"][t.name] = {"instant": latest, "at": time.time()}
        if time.monotonic() - refreshed >= SCHEMA_CHECK_S:  # new columns, new tables: a new plan
            refreshed = time.monotonic()
            try:
                known = {t.name for t in tables}
                fresh = write_streamer_config(params)
                for name in sorted({t.name for t in fresh} - known):  # a table's first Bronze file
                    locks.enter_context(table_lock(params, _table(params, name)))
                tables = fresh
                streamer_job_argv(params, tables, directory / "streamer", continuous=True)
            except WorkbookError as exc:
                status["error"] = f"Failed to refresh the streamer's configuration: {exc}"
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
