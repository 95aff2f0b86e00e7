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
from pathlib import Path
from typing import Any

from helpers.errors import StackError
from helpers.params import WorkbookParams
from helpers.proc import (
    ServerStatus,
    live_pid,
    log_tail,
    port_in_use,
    spawn_server,
    stop_process,
    wait_started,
)

__all__ = ["LocalSparkCluster", "pyspark_home"]

_LOOPBACK = "127.0.0.1"


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

    @property
    def url(self) -> str:
        """The master's URL, what ``spark.master`` is set to for this cluster."""
        return f"spark://{_LOOPBACK}:{self.settings.port}"

    @property
    def web_url(self) -> str:
        """The master's web UI (its ``/json`` lists workers and applications)."""
        return f"http://{_LOOPBACK}:{self.settings.web_port}"

    @property
    def wanted(self) -> bool:
        """Whether ``spark.master`` names this cluster (then the stack manages it)."""
        return self.params.environment != "aws" and self.params.spark.master == self.url

    def _pid_file(self, role: str) -> Path:
        return self.home / f"{role}.pid"

    def _log(self, role: str) -> Path:
        return self.home / f"{role}.log"

    def pids(self) -> dict[str, int | None]:
        """The master's and the worker's pids while they run."""
        return {role: live_pid(self._pid_file(role)) for role in ("master", "worker")}

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(pyspark_home()),
                "SPARK_LOCAL_IP": _LOOPBACK,
                "SPARK_DAEMON_MEMORY": self.settings.daemon_heap,
                "SPARK_WORKER_DIR": str(self.home / "work"),
                "SPARK_LOG_DIR": str(self.home),
                "PYSPARK_PYTHON": sys.executable,
                "SPARK_NO_DAEMONIZE": "1",
            }
        )
        if self.params.local.jit_options:
            env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(self.params.local.jit_options)
        return env

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
        if all(self.pids().values()) and self._worker_alive():
            return self.status()
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "work").mkdir(exist_ok=True)
        spark_class = str(pyspark_home() / "bin" / "spark-class")
        if self.pids()["master"] is None:
            for port in (self.settings.port, self.settings.web_port):
                if port_in_use(port, _LOOPBACK):
                    raise StackError(
                        f"Failed to start the local Spark master: port {port} on {_LOOPBACK} is taken by "
                        "another program; set local.spark.port / local.spark.web_port to free ports"
                    )
            argv = [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                _LOOPBACK,
                "--port",
                str(self.settings.port),
                "--webui-port",
                str(self.settings.web_port),
            ]
            proc = spawn_server(
                argv,
                log_file=self._log("master"),
                pid_file=self._pid_file("master"),
                cwd=self.home,
                env=self._env(),
            )
            if not wait_started(
                proc,
                lambda: self.state() is not None,
                timeout_s=self.params.local.start_timeout_s,
                what="the local Spark master",
            ):
                raise StackError(
                    f"Failed to start the local Spark master on {self.url} (see {self._log('master')}):\n"
                    f"{log_tail(self._log('master'), 10)}"
                )
        if self.pids()["worker"] is None:
            argv = [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                _LOOPBACK,
                "--cores",
                str(self.settings.worker_cores),
                "--memory",
                self.settings.worker_memory,
                "--webui-port",
                str(self.settings.worker_web_port),
                "--work-dir",
                str(self.home / "work"),
                self.url,
            ]
            proc = spawn_server(
                argv,
                log_file=self._log("worker"),
                pid_file=self._pid_file("worker"),
                cwd=self.home,
                env=self._env(),
            )
            if not wait_started(
                proc,
                self._worker_alive,
                timeout_s=self.params.local.start_timeout_s,
                what="the local Spark worker",
            ):
                raise StackError(
                    f"Failed to start the local Spark worker for {self.url} (see {self._log('worker')}):\n"
                    f"{log_tail(self._log('worker'), 10)}"
                )
        return self.status()

    def stop(self, timeout_s: float = 30.0) -> list[ServerStatus]:
        """Stop the worker (and the executors it started), then the master."""
        for role in ("worker", "master"):
            pid = self.pids()[role]
            if pid is not None:
                stop_process(pid, timeout_s)
        return self.status()

    def status(self) -> list[ServerStatus]:
        """One row per daemon: running or not, pid, port, version, scratch folder and log."""
        import pyspark

        pids = self.pids()
        return [
            ServerStatus(
                server=f"spark-{role}",
                running=pids[role] is not None,
                pid=pids[role],
                port=self.settings.port if role == "master" else self.settings.worker_web_port,
                version=f"spark {pyspark.__version__}",
                data_dir=str(self.home / "work"),
                log_file=str(self._log(role)),
            )
            for role in ("master", "worker")
        ]
