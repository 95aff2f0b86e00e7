"""A Spark standalone cluster on this machine: one master and one worker from the pinned pyspark.

With ``spark.master`` set to :attr:`LocalSparkCluster.url` (``spark://127.0.0.1:<local.spark.port>``),
Silver's executors run in JVMs of their own, started by the worker, as they do on EMR's YARN
nodes; the driver (a notebook kernel, the continuous job) only plans and keeps metadata.
``./workbook stack start|stop|status`` manages the two daemons when ``spark.master`` names this
cluster.

The pyspark wheel carries ``bin/spark-class`` (not ``sbin/start-master.sh``), so the daemons are
started with it: bound to 127.0.0.1 (``--host`` and ``SPARK_LOCAL_IP``, which the web UIs bind to
as well), daemon heaps of ``local.spark.daemon_heap``, and the worker offering
``local.spark.worker_cores`` cores and ``local.spark.worker_memory`` to executors. Its scratch
and the executors' logs are under ``<state_dir>/spark/``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from helpers.environments import implementations
from helpers.local.server import LOOPBACK, LocalServer, ServerPort
from helpers.params import WorkbookParams
from helpers.proc import ServerStatus

__all__ = ["LocalSparkCluster", "pyspark_home", "runs_on_this_machine"]


def pyspark_home() -> Path:
    """The installed pyspark package folder: ``SPARK_HOME`` of a pip-installed Spark."""
    import pyspark

    return Path(pyspark.__file__).parent


class LocalSparkCluster:
    """Start, stop and describe the local standalone cluster of a parameter set."""

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.settings = params.local.spark
        self.home = params.state_path / "spark"
        self.master = _Master(self)
        self.worker = _Worker(self)

    @property
    def url(self) -> str:
        """The master's URL, what ``spark.master`` is set to for this cluster."""
        return f"spark://{LOOPBACK}:{self.settings.port}"

    @property
    def web_url(self) -> str:
        """The master's web UI (its ``/json`` lists workers and applications)."""
        return f"http://{LOOPBACK}:{self.settings.web_port}"

    @property
    def wanted(self) -> bool:
        """Whether ``spark.master`` names this cluster (then the stack manages it)."""
        return implementations(self.params).local_servers and self.params.spark.master == self.url

    def pids(self) -> dict[str, int | None]:
        """The master's and the worker's pids while they run."""
        return {"master": self.master.pid(), "worker": self.worker.pid()}

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(pyspark_home()),
                "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_DAEMON_MEMORY": self.settings.daemon_heap,
                "SPARK_WORKER_DIR": str(self.home / "work"),
                # executors' scratch (blockmgr-*) under the state directory, not /tmp (helpers.local.scratch)
                "SPARK_LOCAL_DIRS": str(self.home / "local"),
                "SPARK_LOG_DIR": str(self.home),
                "PYSPARK_PYTHON": sys.executable,
                "SPARK_NO_DAEMONIZE": "1",
            }
        )
        options = (*self.params.local.jit_options, f"-Djava.io.tmpdir={self.tmp_dir}")
        env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(options)
        return env

    @property
    def tmp_dir(self) -> Path:
        """The temporary dir (``java.io.tmpdir``) of the master's, the worker's and the executors'
        JVMs, under the state directory."""
        return self.home / "tmp"

    def state(self) -> dict[str, Any] | None:
        """The master's own view (its ``/json``): workers, cores, memory, applications; None
        when it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json", timeout=2) as response:  # noqa: S310 - loopback
                return dict(json.loads(response.read()))
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def _worker_alive(self) -> bool:
        state = self.state() or {}
        return any(w.get("state") == "ALIVE" for w in state.get("workers", []))

    def start(self) -> list[ServerStatus]:
        """Start the master and the worker unless they run; wait until the worker has registered.

        Raises:
            StackError: when a port is taken by another program or a daemon does not come up
                (with its log's last lines).
        """
        for folder in (self.home / "work", self.home / "local", self.tmp_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return [self.master.start(), self.worker.start()]

    def stop(self, timeout_s: float = 30.0) -> list[ServerStatus]:
        """Stop the worker (and the executors it started), then the master."""
        worker = self.worker.stop(timeout_s)
        return [self.master.stop(timeout_s), worker]

    def status(self) -> list[ServerStatus]:
        """One row per daemon: running or not, pid, port, version, scratch folder and log."""
        return [self.master.status(), self.worker.status()]


class _Daemon(LocalServer):
    """One daemon of :class:`LocalSparkCluster`, started with the wheel's ``bin/spark-class``; its
    heap is ``local.spark.daemon_heap`` (``SPARK_DAEMON_MEMORY``)."""

    role: ClassVar[str]

    def __init__(self, cluster: LocalSparkCluster) -> None:
        self.cluster = cluster
        super().__init__(
            cluster.home,
            pid_file=cluster.home / f"{self.role}.pid",
            log_file=cluster.home / f"{self.role}.log",
            start_timeout_s=cluster.params.local.start_timeout_s,
        )

    @property
    def version(self) -> str:
        import pyspark

        return f"spark {pyspark.__version__}"

    @property
    def data_location(self) -> str:
        return str(self.home / "work")

    def prepare(self) -> Mapping[str, str] | None:
        return self.cluster._env()


class _Master(_Daemon):
    name = "spark-master"
    title = "the local Spark master"
    role = "master"

    @property
    def ports(self) -> list[ServerPort]:
        s = self.cluster.settings
        return [ServerPort(s.port, "local.spark.port"), ServerPort(s.web_port, "local.spark.web_port")]

    @property
    def address(self) -> str:
        return self.cluster.url

    def command(self) -> list[str]:
        s = self.cluster.settings
        return [
            str(pyspark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.master.Master",
            "--host",
            LOOPBACK,
            "--port",
            str(s.port),
            "--webui-port",
            str(s.web_port),
        ]

    def ready(self) -> bool:
        return self.cluster.state() is not None


class _Worker(_Daemon):
    name = "spark-worker"
    title = "the local Spark worker"
    role = "worker"

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.cluster.settings.worker_web_port, "local.spark.worker_web_port")]

    @property
    def address(self) -> str:
        return f"{LOOPBACK} (master {self.cluster.url})"

    def command(self) -> list[str]:
        s = self.cluster.settings
        return [
            str(pyspark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            LOOPBACK,
            "--cores",
            str(s.worker_cores),
            "--memory",
            s.worker_memory,
            "--webui-port",
            str(s.worker_web_port),
            "--work-dir",
            str(self.home / "work"),
            self.cluster.url,
        ]

    def ready(self) -> bool:
        return self.cluster._worker_alive()


def runs_on_this_machine(params: WorkbookParams) -> bool:
    """Whether ``params``' Spark sessions run on this machine: local mode, or this cluster; not on a
    cluster of real nodes (``spark.master`` empty: EMR's YARN, through spark-submit or EMR Studio),
    whose own defaults size shuffles by its data and executors (``docs/architecture.md``)."""
    return params.spark.master.startswith("local") or LocalSparkCluster(params).wanted
