"""JupyterLab on the workbook's notebooks, for interactive use (``./workbook lab``).

:func:`start_lab` starts JupyterLab in the background from this interpreter's environment (the
project's ``.venv``) on the one start/stop/status path of the local servers
(:class:`~helpers.local.server.LocalServer`), bound to 127.0.0.1 and opened on ``notebooks/``;
:func:`stop_lab` stops it;
:func:`run_lab` is the foreground command. Each start generates a new token. It reaches the
server in a 0600 config file (``IdentityProvider.token``) inside the 0700 lab folder of the state
directory, never on the command line; a token set in config is shown as ``...`` in the server's
log, and :func:`run_lab` prints the URL with the token once, to the terminal only. Notebooks run
in the standard ``python3`` kernel, which Jupyter starts with the server's own interpreter; the
project root is put on the kernel's ``PYTHONPATH`` so ``helpers`` is imported from this checkout.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import jupyterlab
import requests

from helpers.errors import LabError, StackError
from helpers.local.credentials import write_private
from helpers.local.server import LocalServer, ServerPort
from helpers.params import WorkbookParams, project_root
from helpers.proc import free_port, live_pid, log_tail

__all__ = [
    "LOOPBACK",
    "LabServer",
    "lab_command",
    "lab_config",
    "lab_dir",
    "lab_environment",
    "run_lab",
    "start_lab",
    "stop_lab",
]

LOOPBACK = "127.0.0.1"
CONFIG_FILE = "jupyter_lab_config.json"
LOG_FILE = "jupyterlab.log"
PID_FILE = "jupyterlab.pid"


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab started by :func:`start_lab`."""

    url: str  # http://127.0.0.1:<port>/lab, without the token
    token: str
    pid: int
    port: int
    log_file: Path
    home: Path  # the lab folder of the state directory (config, runtime files, log)

    @property
    def url_with_token(self) -> str:
        """The URL to open in a browser; shown to the user once, never logged."""
        return f"{self.url}?token={self.token}"


def lab_dir(params: WorkbookParams) -> Path:
    """The lab's folder in the state directory: ``<state_dir>/lab``."""
    return params.state_path / "lab"


def lab_command(config_file: Path) -> list[str]:
    """The server's argv: JupyterLab of this interpreter, every setting in ``config_file``."""
    return [sys.executable, "-m", "jupyterlab", f"--config={config_file}"]


def lab_config(
    *, port: int, notebook_dir: Path, token: str, checkpoint_dir: Path
) -> dict[str, dict[str, Any]]:
    """The server's settings: loopback only, ``port`` (no retry on another), ``notebook_dir`` as
    the file browser's root, no browser, ``token`` as the only credential, and the notebooks'
    checkpoints in ``checkpoint_dir`` (outside the repository's ``notebooks/``)."""
    return {
        "ServerApp": {
            "ip": LOOPBACK,
            "port": port,
            "port_retries": 0,
            "root_dir": str(notebook_dir),
            "open_browser": False,
            "allow_remote_access": False,
            "allow_root": os.geteuid() == 0,  # containers and CI run as root
        },
        "IdentityProvider": {"token": token},
        "FileCheckpoints": {"checkpoint_dir": str(checkpoint_dir)},  # absolute: one folder for all
        # no outbound calls: no PyPI search, no news feed, no update check
        "LabApp": {
            "extension_manager": "readonly",
            "news_url": None,
            "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
        },
    }


def lab_environment(home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment (kernels inherit it): the project root first on ``PYTHONPATH``,
    Jupyter's runtime files (they hold the token) in ``home``, this environment's kernel specs
    before the user's."""
    env = dict(os.environ if base is None else base)
    env.pop("JUPYTER_TOKEN", None)
    env.pop("JUPYTER_TOKEN_FILE", None)
    root = str(project_root())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    env["JUPYTER_PREFER_ENV_PATH"] = "1"
    return env


def _running_lab(home: Path) -> int | None:
    """The pid of the lab started from ``home`` if it still runs (not a reused pid)."""
    pid = live_pid(home / PID_FILE)
    if pid is None:
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    return pid if lab_command(home / CONFIG_FILE)[-1] in argv else None


class _JupyterLab(LocalServer):
    """JupyterLab on the one start/stop/status path: a new token in its config file before each
    start, ready when its API answers, its runtime files made private once it runs."""

    name = "jupyterlab"
    title = "JupyterLab"

    def __init__(self, home: Path, port: int, notebooks: Path, timeout_s: float) -> None:
        super().__init__(
            home,
            pid_file=home / PID_FILE,
            log_file=home / LOG_FILE,
            start_timeout_s=timeout_s,
            workdir=notebooks,
        )
        self.port = port
        self.notebooks = notebooks
        self.token = secrets.token_urlsafe(32)

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.port, "--port")]

    @property
    def version(self) -> str:
        return f"jupyterlab {jupyterlab.__version__}"

    @property
    def data_location(self) -> str:
        return str(self.notebooks)

    def command(self) -> list[str]:
        return lab_command(self.home / CONFIG_FILE)

    def pid(self) -> int | None:
        return _running_lab(self.home)

    def prepare(self) -> Mapping[str, str]:
        self.home.chmod(0o700)
        (self.home / "runtime").mkdir(mode=0o700, exist_ok=True)
        settings = lab_config(
            port=self.port,
            notebook_dir=self.notebooks,
            token=self.token,
            checkpoint_dir=self.home / "checkpoints",
        )
        write_private(self.home / CONFIG_FILE, json.dumps(settings, indent=1), replace=True)
        return lab_environment(self.home)

    def ready(self) -> bool:
        try:
            return requests.get(f"http://{LOOPBACK}:{self.port}/api", timeout=2).ok
        except requests.RequestException:
            return False

    def after_start(self) -> None:
        # Jupyter writes its browser-open page (the URL with the token) with the default umask;
        # the folder is 0700 already, and the files are made private as well
        for path in (self.home / "runtime").iterdir():
            if path.is_file():
                path.chmod(0o600)


def start_lab(
    home: Path, *, port: int | None = None, notebook_dir: Path | None = None, timeout_s: float = 60.0
) -> LabServer:
    """Start JupyterLab in the background and wait until it answers.

    Args:
        home: the lab's folder (:func:`lab_dir`); created with mode 0700. It holds the config
            file with the token (0600), Jupyter's runtime files, the pid file and the log.
        port: the port on 127.0.0.1; default: a free one.
        notebook_dir: the file browser's root; default ``notebooks/`` of the project.
        timeout_s: how long the server may take to answer.

    Returns:
        The running server.

    Raises:
        LabError: a lab of this folder already runs, ``port`` is taken, the server exited, or it
            did not answer in time (the error quotes its log).
    """
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o700)
    running = _running_lab(home)
    if running is not None:
        raise LabError(
            f"Failed to start JupyterLab: one already runs from {home} (pid {running}); stop it first"
        )
    notebooks = (notebook_dir or project_root() / "notebooks").resolve()
    server = _JupyterLab(home, port or free_port(LOOPBACK), notebooks, timeout_s)
    try:
        status = server.start()
    except StackError as exc:
        raise LabError(str(exc)) from None
    assert status.pid is not None  # started: the one path raised otherwise
    return LabServer(
        f"http://{LOOPBACK}:{server.port}/lab", server.token, status.pid, server.port, server.log_file, home
    )


def stop_lab(server: LabServer, timeout_s: float = 20.0) -> None:
    """Stop the server (SIGTERM: Jupyter shuts its kernels down; SIGKILL after ``timeout_s``)."""
    _JupyterLab(server.home, server.port, project_root() / "notebooks", timeout_s).stop(timeout_s)


def run_lab(home: Path, *, port: int | None = None, out: TextIO | None = None) -> int:
    """The foreground command: start the lab, print its URL with the token once, wait.

    Ctrl-C stops the server. Returns 0 after Ctrl-C, 1 when the server ended by itself.
    """
    stream = out or sys.stdout
    server = start_lab(home, port=port)
    print(f"JupyterLab on notebooks/ (Ctrl-C stops it); open:\n    {server.url_with_token}", file=stream)
    print(f"log: {server.log_file}", file=stream, flush=True)
    try:
        os.waitpid(server.pid, 0)
    except KeyboardInterrupt:
        print("stopping JupyterLab", file=stream, flush=True)
        stop_lab(server)
        return 0
    except ChildProcessError:  # pragma: no cover - already reaped
        pass
    (home / PID_FILE).unlink(missing_ok=True)
    print(f"JupyterLab ended by itself; log {server.log_file}:\n{log_tail(server.log_file)}", file=stream)
    return 1
