"""Background worker processes of the workbook (capture workers, the continuous Silver job).

One place spawns ``python -m <module> <directory>`` in its own session with the project on
``PYTHONPATH``, records its pid, and stops (SIGTERM, then SIGKILL after a timeout) or kills it.
Liveness is read from ``/proc`` (a zombie is not alive); the local servers
(:mod:`helpers.local.stack`) and :mod:`helpers.local.metastore` use the same checks.
"""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from helpers.errors import WaitTimeoutError
from helpers.poll import wait_until

__all__ = [
    "ModuleJob",
    "STATUS_FILE",
    "ServerStatus",
    "kill_process",
    "live_pid",
    "log_tail",
    "pid_alive",
    "process_start",
    "process_identity",
    "identity_alive",
    "port_in_use",
    "read_pid",
    "read_status",
    "replace_text",
    "set_timer_slack",
    "stop_on_signal",
    "register_child",
    "spawn_module",
    "spawn_server",
    "stop_process",
    "thread_timer_slack_ns",
    "wait_started",
    "write_status",
]

_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ServerStatus:
    """State of one local server (``./workbook stack status`` shows one row each)."""

    server: str
    running: bool
    pid: int | None
    port: int
    version: str
    data_dir: str
    log_file: str

    @property
    def state(self) -> str:
        """``"running"`` or ``"stopped"``."""
        return "running" if self.running else "stopped"


def register_child(proc: subprocess.Popen[bytes]) -> None:
    """Remember a server this process started, so its exit status is collected (no zombie)."""
    _CHILDREN[proc.pid] = proc


def _reap_children() -> None:
    for pid, proc in list(_CHILDREN.items()):
        if proc.poll() is not None:
            del _CHILDREN[pid]


def _stat_after_command(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the parenthesised command (field 3 on), or None
    when the process is gone or has ended (a zombie: state Z or X)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return None if fields[0] in ("Z", "X") else fields


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (zombies count as dead)."""
    _reap_children()
    return _stat_after_command(pid) is not None


def process_start(pid: int) -> str | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None
    when it does not run: with the pid, it names one process even after the pid is reused."""
    fields = _stat_after_command(pid)
    return None if fields is None else fields[19]


def process_identity(pid: int | None = None) -> str:
    """``<pid>-<start>`` (:func:`process_start`) of a process, by default this one: a name for
    files and folders that it owns which still tells it apart after its pid is reused."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{process_start(pid)}"


def identity_alive(identity: str) -> bool:
    """Whether the process a :func:`process_identity` names still runs (False for another form)."""
    pid, _, start = identity.partition("-")
    return pid.isdigit() and process_start(int(pid)) == start


#: ``prctl`` options that set and get the calling thread's timer slack (``<linux/prctl.h>``).
_PR_SET_TIMERSLACK = 29
_PR_GET_TIMERSLACK = 30


def _prctl_timer_slack(option: int, nanoseconds: int = 0) -> int | None:
    """``prctl(option, nanoseconds)`` for one of the timer-slack options (None where ``prctl`` is
    not Linux's)."""
    if not sys.platform.startswith("linux"):
        return None
    return int(ctypes.CDLL(None, use_errno=True).prctl(option, ctypes.c_ulong(nanoseconds), 0, 0, 0))


def set_timer_slack(microseconds: int) -> bool:
    """Let the kernel end this thread's timed waits up to ``microseconds`` late, and so those of
    every thread it starts from now on (threads inherit their creator's slack): Linux's
    ``prctl(PR_SET_TIMERSLACK)``, what systemd's ``TimerSlackNSec=`` sets for a service. The
    kernel's default is 50 µs; 0 leaves it. Called by a worker before it starts its JVM.

    Why here and with ``ctypes``: the call is one line of libc; the PyPI wrapper (``python-prctl``)
    builds a C extension against libcap's headers for it.

    Returns:
        Whether the slack was set (False for 0, or where ``prctl`` is not Linux's).
    """
    return microseconds > 0 and _prctl_timer_slack(_PR_SET_TIMERSLACK, microseconds * 1000) == 0


def thread_timer_slack_ns() -> int:
    """This thread's timer slack in nanoseconds (``prctl(PR_GET_TIMERSLACK)``; 0 where ``prctl``
    is not Linux's)."""
    return _prctl_timer_slack(_PR_GET_TIMERSLACK) or 0


def read_pid(pid_file: Path) -> int | None:
    """The pid on the first line of ``pid_file`` (None: no file, or not a number)."""
    try:
        first = pid_file.read_text().split("\n", 1)[0].strip()
    except (FileNotFoundError, PermissionError):
        return None
    return int(first) if first.isdigit() else None


def live_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file`` if that process is alive."""
    pid = read_pid(pid_file)
    return pid if pid is not None and pid_alive(pid) else None


def spawn_module(
    module: str, directory: Path, *, log_file: Path, pid_file: Path, cwd: Path | None = None
) -> int:
    """Start ``python -m module directory`` detached, output appended to ``log_file``.

    Returns:
        The new process's pid (also written to ``pid_file``).
    """
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, "-m", module, str(directory)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    pid_file.write_text(str(proc.pid))
    return proc.pid


class ModuleJob:
    """A long-running ``python -m <module> <directory>`` of the workbook: ``config.json``, a pid
    file, a log and ``status.json`` in its directory (the continuous Silver job, the Bronze sink).

    Subclasses set :attr:`module`, :attr:`pid_name`, :attr:`log_name` and :attr:`directory`.
    """

    module: ClassVar[str]
    pid_name: ClassVar[str]
    log_name: ClassVar[str]

    @property
    def directory(self) -> Path:
        raise NotImplementedError

    @property
    def log_file(self) -> Path:
        return self.directory / self.log_name

    def pid(self) -> int | None:
        return live_pid(self.directory / self.pid_name)

    def launch(self, config: dict[str, Any], status: dict[str, Any]) -> int:
        """Start the process unless it runs with this ``config`` (one running with another, say
        a table added to the parameters, is stopped after its round and started again), with a
        first ``status``; its pid."""
        running = self.pid()
        if running:
            path = self.directory / "config.json"
            current = json.loads(path.read_text()) if path.exists() else None
            if current == json.loads(json.dumps(config)):
                return running
            self.stop()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "config.json").write_text(json.dumps(config))
        write_status(self.directory, status)
        return spawn_module(
            self.module, self.directory, log_file=self.log_file, pid_file=self.directory / self.pid_name
        )

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop after the current round (SIGTERM), or kill after ``timeout_s``."""
        pid = self.pid()
        if pid is not None:
            stop_process(pid, timeout_s)

    def kill(self) -> int | None:
        """``kill -9`` of the process and its Spark driver JVM at once (crash tests): its process
        group, as a machine or container crash would."""
        pid = self.pid()
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if pid_alive(pid):
                kill_process(pid)
        return pid

    def status(self) -> dict[str, Any]:
        """The last status; ``state`` is ``DEAD`` when the process is gone unexpectedly."""
        st = read_status(self.directory)
        if st.get("state") in ("STARTING", "RUNNING") and self.pid() is None:
            st["state"] = "DEAD"
        return st


def spawn_server(
    argv: Sequence[str],
    *,
    log_file: Path,
    pid_file: Path | None,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
    timer_slack_us: int = 0,
) -> subprocess.Popen[bytes]:
    """Start a local server detached (its own session), output appended to ``log_file``, its pid
    written to ``pid_file`` (None: the server writes its own) and its exit status collected later
    (:func:`register_child`). ``user``: the system user it runs as (root only; its primary group,
    no supplementary groups). ``timer_slack_us``: the server's timer slack (:func:`set_timer_slack`;
    0 leaves the caller's): set on this thread while it starts the server, which inherits it and
    keeps it across ``exec``, then this thread's own value again.

    Returns:
        The process (see :func:`wait_started`).
    """
    account = pwd.getpwnam(user) if user else None
    own_slack = thread_timer_slack_ns() if timer_slack_us > 0 else 0
    with open(log_file, "ab") as out:
        try:
            set_timer_slack(timer_slack_us)
            proc = subprocess.Popen(  # noqa: S603 - the caller's fixed argv, no secret in it
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=None if env is None else dict(env),
                start_new_session=True,
                user=account.pw_uid if account else None,
                group=account.pw_gid if account else None,
                extra_groups=[] if account else None,
            )
        finally:
            if own_slack:
                _prctl_timer_slack(_PR_SET_TIMERSLACK, own_slack)
    register_child(proc)
    if pid_file is not None:
        pid_file.write_text(str(proc.pid))
    return proc


def wait_started(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.2,
    max_interval_s: float = 0.5,
) -> bool:
    """Wait until a server started by :func:`spawn_server` is ready, or has exited for good.

    Returns:
        Whether it runs and is ready (False: it exited, or was not ready within ``timeout_s``).
    """
    try:
        wait_until(
            lambda: proc.poll() is not None or ready(),
            timeout_s=timeout_s,
            what=what,
            interval_s=interval_s,
            max_interval_s=max_interval_s,
        )
    except WaitTimeoutError:
        pass
    return proc.poll() is None and ready()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_process(pid: int, timeout_s: float, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (SIGTERM), wait up to ``timeout_s`` for it to exit, then SIGKILL."""
    os.kill(pid, sig)

    def exited() -> bool:
        _reap(pid)
        return not pid_alive(pid)

    try:
        wait_until(
            exited, timeout_s=timeout_s, what=f"process {pid} to exit", interval_s=0.05, max_interval_s=0.5
        )
    except WaitTimeoutError:
        pass
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    _collect(pid)


def _collect(pid: int, timeout_s: float = 10.0) -> None:
    """Collect the exit status of ``pid`` if it is our child. A JVM's main thread shows as a
    zombie while its other threads still exit, and only then can it be collected: wait for that
    (bounded), so no zombie is left behind."""

    def collected() -> bool:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child, or collected already
            return True
        return done == pid

    try:
        wait_until(collected, timeout_s=timeout_s, what=f"process {pid} to be collected", interval_s=0.01)
    except WaitTimeoutError:
        pass
    _CHILDREN.pop(pid, None)


def kill_process(pid: int) -> None:
    """SIGKILL (crash tests) and collect the exit status if it is our child."""
    os.kill(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


_RESERVATIONS = Path(tempfile.gettempdir()) / "cdc-workbook-ports"
_RESERVATION_TTL_S = 900.0
_FREE_PORT_LOW = 20000


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default if unreadable)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _reserve(port: int) -> bool:
    """Claim ``port`` across processes with an exclusive file; a claim older than the TTL is
    stale (by then its server holds the port, and ``port_in_use`` sees it)."""
    _RESERVATIONS.mkdir(mode=0o1777, exist_ok=True)
    claim = _RESERVATIONS / str(port)
    try:
        if time.time() - claim.stat().st_mtime > _RESERVATION_TTL_S:
            claim.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing holds now, for a server of a workbook started beside
    another (tests, benchmarks, the lab).

    Picked below the kernel's ephemeral range, so no client's outgoing connection can take it
    between this pick and the server's bind (a port the kernel picks with ``bind(0)`` can), and
    claimed with a file in the temp folder, so two processes picking at once get different ports.
    """
    low, high = _ephemeral_range()
    # below the range when it leaves room there (Linux's default: 32768), else above it
    bottom, top = (_FREE_PORT_LOW, low) if low > _FREE_PORT_LOW + 1000 else (high + 1, 65535)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(bottom, top)
        if not port_in_use(port, host) and _reserve(port):
            return port
    raise RuntimeError(f"no free TCP port on {host} between {bottom} and {top - 1} after 200 tries")


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether another socket holds ``host:port`` (a bind there fails), before a server starts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a server's log, for an error message."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(log is empty)"


STATUS_FILE = "status.json"
"""The status file a worker process rewrites atomically after every step."""


def stop_on_signal(on_stop: Callable[[], object] | None = None) -> threading.Event:
    """SIGTERM and SIGINT ask a worker process to stop: the returned event is set (and ``on_stop``
    called, in the signal handler), and the worker's loop ends after its current step.

    Returns:
        The event a worker's loop watches.
    """
    stopping = threading.Event()

    def stop(_signum: int, _frame: Any) -> None:
        stopping.set()
        if on_stop is not None:
            on_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return stopping


def replace_text(path: Path, text: str) -> None:
    """Write a file whole or not at all (a temporary file renamed over it): a reader sees the old
    text or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_status(directory: Path, status: dict[str, Any]) -> None:
    """Atomically replace the status file."""
    status = {**status, "updated_at": time.time()}
    tmp = directory / f".{STATUS_FILE}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(status, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, directory / STATUS_FILE)


def read_status(directory: Path) -> dict[str, Any]:
    """The last status the worker wrote (``{}`` if none)."""
    try:
        return dict(json.loads((directory / STATUS_FILE).read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError):
        return {}
