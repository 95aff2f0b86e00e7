"""One start/stop/status code path for every background server of the workbook.

:class:`LocalServer` holds what every such server shares: a folder of its own under the state
directory with a pid file and a log, loopback ports checked before it starts, bounded memory on its
command line or in its settings (the subclass builds them), a detached process
(:func:`helpers.proc.spawn_server`, as another system user where the server must not run as root),
a readiness check with a time limit, a half-started process stopped again with the log's tail in
the error, and one :class:`~helpers.proc.ServerStatus` row for ``./workbook stack status``. A
subclass says only what differs: its command, its ports, what it writes before it starts, what
ready means, its stop signal and whether it writes its own pid file. Built on it: PostgreSQL
(:mod:`helpers.local.postgres`), MariaDB (:mod:`helpers.local.mariadb`), the metastore
(:mod:`helpers.local.metastore`), Trino (:mod:`helpers.local.trino`), the lake's S3 server
(:mod:`helpers.local.s3`), the schema registry (:mod:`helpers.local.registry`), the Kafka broker
and Connect worker (:mod:`helpers.local.kafka`) and the Spark standalone master and worker
(:mod:`helpers.local.spark_cluster`) and JupyterLab (:mod:`helpers.local.lab`, which ``./workbook
lab`` keeps in the foreground until Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import abc
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from helpers.errors import JarsMissingError, StackError, WaitTimeoutError
from helpers.poll import wait_until
from helpers.proc import (
    ServerStatus,
    live_pid,
    log_tail,
    port_in_use,
    spawn_server,
    stop_process,
    wait_started,
)

__all__ = ["LOOPBACK", "LocalServer", "ServerPort", "java_properties"]

LOOPBACK = "127.0.0.1"


def java_properties(values: Mapping[str, str], writer: str) -> str:
    """A Java ``.properties`` file's text (``key=value`` lines, in order) under a header naming the
    module that writes it on every start, as the JVM servers here read their settings."""
    lines = [f"# written by {writer}; rewritten on every start"]
    lines += [f"{key}={value}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ServerPort:
    """A port the server listens on, with the setting that chooses it (named when it is taken)."""

    number: int
    setting: str


class LocalServer(abc.ABC):
    """A local server of the workbook, started detached and found again through its pid file.

    Subclasses set :attr:`name` (the row in ``stack status``) and :attr:`title` (the server in
    messages: "the local metastore") and implement :meth:`command`, :attr:`ports`, :attr:`version`
    and :attr:`data_location`; they may override :meth:`prepare`, :meth:`ready`, :meth:`after_start`,
    :meth:`failure_detail` and :attr:`address`.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    #: the largest pause between two readiness checks while it starts
    poll_interval_s: ClassVar[float] = 0.5
    #: the first pause (it doubles up to :attr:`poll_interval_s`)
    first_interval_s: ClassVar[float] = 0.2
    #: the signal that asks it to shut down cleanly (SIGKILL follows after the stop's time limit)
    stop_signal: ClassVar[int] = signal.SIGTERM
    #: True when the server writes ``pid_file`` itself (PostgreSQL, MariaDB); it is then never
    #: written or removed here, and :meth:`pid` should check it is not a recycled pid
    own_pid_file: ClassVar[bool] = False
    #: how long :meth:`stop` waits for the stopped server's ports to be free
    release_timeout_s: ClassVar[float] = 10.0

    def __init__(
        self,
        home: Path,
        *,
        pid_file: Path,
        log_file: Path,
        start_timeout_s: float,
        console_file: Path | None = None,
        run_as: str | None = None,
        workdir: Path | None = None,
    ) -> None:
        """``log_file``: the server's log, shown by ``stack status``; ``console_file``: where its
        standard output and error go (default: the log); ``run_as``: the system user it runs as
        (None: this process's); ``workdir``: its working directory (default: ``home``)."""
        self.home = home
        self.pid_file = pid_file
        self.log_file = log_file
        self.console_file = console_file or log_file
        self.start_timeout_s = start_timeout_s
        self.run_as = run_as
        self.workdir = workdir or home

    # ------------------------------------------------------------------ what a server says

    @property
    @abc.abstractmethod
    def ports(self) -> Sequence[ServerPort]:
        """Its ports on 127.0.0.1; the first is the one ``stack status`` shows."""

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """What runs, e.g. ``trino 476``."""

    @property
    @abc.abstractmethod
    def data_location(self) -> str:
        """Where its data lives (a folder, or a database URL)."""

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The server's argv, its heap bounded (``-Xmx``).

        Raises:
            JarsMissingError: a jar or archive the set-up fetches is missing.
            StackError: anything else it needs is missing.
        """

    def prepare(self) -> Mapping[str, str] | None:
        """Write what the server reads before it starts (settings, generated secrets); return its
        environment, or None to inherit this process's."""
        return None

    @property
    def timer_slack_us(self) -> int:
        """The server's timer slack (:func:`helpers.proc.set_timer_slack`); 0: the kernel's."""
        return 0

    def ready(self) -> bool:
        """Whether it serves: by default, its first port accepts a connection."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            return sock.connect_ex((LOOPBACK, self.ports[0].number)) == 0

    def after_start(self) -> None:
        """Run once it is ready, on every start (also when it already ran): e.g. create a bucket."""
        return None

    def failure_detail(self) -> str:
        """What a failed start quotes: the last lines of its console output and of its log."""
        files = dict.fromkeys((self.console_file, self.log_file))
        return "\n".join(log_tail(log, 10) for log in files if log.exists())

    @property
    def address(self) -> str:
        """Where it listens, as a failed start names it."""
        return f"{LOOPBACK}:{self.ports[0].number}"

    @property
    def tmp_dir(self) -> Path:
        """The folder of its temporary files (a JVM's ``java.io.tmpdir``) under its home, not the
        machine's ``/tmp``, which other processes share and where a killed server's files stay."""
        return self.home / "tmp"

    # ------------------------------------------------------------------ the one code path

    def pid(self) -> int | None:
        """The server's pid while it runs."""
        return live_pid(self.pid_file)

    def start(self) -> ServerStatus:
        """Start the server unless it runs, wait until it is ready, then :meth:`after_start`.

        Raises:
            StackError: a jar is missing (naming the set-up command), a port is taken by another
                program (naming its setting), or the server did not become ready in
                ``start_timeout_s`` (it is stopped again; the error quotes its log).
        """
        if self.pid() is None:
            self._launch()
        self.after_start()
        return self.status()

    def _launch(self) -> None:
        try:
            argv = self.command()
        except JarsMissingError as exc:
            raise StackError(str(exc)) from None
        for port in self.ports:
            if port_in_use(port.number, LOOPBACK):
                raise StackError(
                    f"Failed to start {self.title}: port {port.number} on {LOOPBACK} is in use by another "
                    f"program; set {port.setting} to a free port"
                )
        self.home.mkdir(parents=True, exist_ok=True)
        env = self.prepare()
        proc = spawn_server(
            argv,
            log_file=self.console_file,
            pid_file=None if self.own_pid_file else self.pid_file,
            cwd=self.workdir,
            env=env,
            user=self.run_as,
            timer_slack_us=self.timer_slack_us,
        )
        if wait_started(
            proc,
            self.ready,
            timeout_s=self.start_timeout_s,
            what=f"{self.title} to be ready",
            interval_s=self.first_interval_s,
            max_interval_s=self.poll_interval_s,
        ):
            return
        if proc.poll() is None:  # up but never ready: not left running half-started
            stop_process(proc.pid, 30.0, self.stop_signal)
            cause = f"not ready after {self.start_timeout_s:.0f} s"
        else:
            cause = f"it exited with status {proc.returncode}"
        self._forget_pid()
        raise StackError(
            f"Failed to start {self.title} on {self.address} ({cause}; log {self.log_file}):\n"
            f"{self.failure_detail()}"
        )

    def stop(self, timeout_s: float = 30.0) -> ServerStatus:
        """Stop the server: :attr:`stop_signal`, then SIGKILL after ``timeout_s``; then wait (up to
        :attr:`release_timeout_s`) until its ports are free, so a start right after it finds them
        free. A JVM's pid can be gone (its main thread exited) while its other threads still hold
        the listening socket, and a process this one did not start cannot be waited for: a fresh
        clone's ``bench_query.py`` restarted the metastore that way and met ``port ... is in use by
        another program`` (2026-12-04). A port still taken after the wait is left to the next
        start's check, which names the setting."""
        pid = self.pid()
        if pid is not None:
            stop_process(pid, timeout_s, self.stop_signal)
            try:
                wait_until(
                    lambda: not any(port_in_use(p.number, LOOPBACK) for p in self.ports),
                    timeout_s=self.release_timeout_s,
                    what=f"{self.title}'s ports to be free",
                    interval_s=0.05,
                    max_interval_s=0.25,
                )
            except WaitTimeoutError:
                pass
        self._forget_pid()
        return self.status()

    def _forget_pid(self) -> None:
        if not self.own_pid_file:  # a server's own pid file is its business (and its lock)
            self.pid_file.unlink(missing_ok=True)

    def status(self) -> ServerStatus:
        """Running or stopped, pid, port, version, data and log."""
        pid = self.pid()
        return ServerStatus(
            server=self.name,
            running=pid is not None,
            pid=pid,
            port=self.ports[0].number,
            version=self.version,
            data_dir=self.data_location,
            log_file=str(self.log_file),
        )
