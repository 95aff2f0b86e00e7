"""What both local servers share: state paths, the OS users they run as, locking, process checks."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import filelock

from helpers.errors import StackError
from helpers.local.credentials import Credentials, load_credentials
from helpers.local.db_config import (
    PG_SUPERUSER,
    SOCKET_PATH_MAX,
    StackPaths,
)
from helpers.params import SourceParams, WorkbookParams
from helpers.proc import pid_alive

log = logging.getLogger(__name__)


def pid_cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def pids_in_dir(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` (servers chdir to their data dir)."""
    target = directory.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and pid_cwd(int(entry.name)) == target and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def is_server(pid: int, data_dir: Path) -> bool:
    """True when ``pid`` is alive and runs in ``data_dir`` (not a recycled pid)."""
    return pid_alive(pid) and pid_cwd(pid) == data_dir.resolve()


@functools.cache
def binary_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", out.split("Ver", 1)[-1])
    return match.group(1) if match else out.strip()


def which(name: str, extra_dirs: Sequence[str] = ("/usr/sbin", "/usr/bin")) -> str:
    found = shutil.which(name) or next(
        (str(Path(d) / name) for d in extra_dirs if (Path(d) / name).is_file()), None
    )
    if not found:
        raise StackError(f"Failed to find {name}: it is not installed; run scripts/bootstrap.sh")
    return found


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# the stack


class ServerHost:
    """State shared by the PostgreSQL and MariaDB halves of the local stack."""

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.paths = StackPaths(params.state_path)
        self._lock = filelock.FileLock(str(self.paths.lock), timeout=params.local.start_timeout_s * 4)
        self._root = os.geteuid() == 0
        me = pwd.getpwuid(os.geteuid()).pw_name
        self._pg_user = PG_SUPERUSER if self._root else me
        if self._root:
            self._maria_user: str | None = "mysql" if user_exists("mysql") else "root"
        else:
            self._maria_user = None
        self._os_user = me

    def __repr__(self) -> str:
        return f"LocalStack(state_dir={str(self.paths.root)!r})"

    # ------------------------------------------------------------------ credentials

    @property
    def credentials(self) -> Credentials:
        """The effective passwords (generated on first use; values hidden in repr)."""
        return load_credentials(self.paths.root)

    def _chown(self, path: Path, user: str | None) -> None:
        if self._root and user:
            entry = pwd.getpwnam(user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _prepare_root(self) -> None:
        root = self.paths.root
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)
        self._check_socket_path(self.paths.pg_socket_dir / f".s.PGSQL.{self.params.local.postgres.port}")
        self._check_socket_path(self.paths.maria_socket)

    @staticmethod
    def _check_socket_path(path: Path) -> None:
        if len(str(path).encode()) > SOCKET_PATH_MAX:
            raise StackError(
                f"Failed to prepare the state directory: the socket path {path} is longer than "
                f"{SOCKET_PATH_MAX} bytes; choose a shorter state_dir"
            )

    def _sources(self, engine: str) -> list[SourceParams]:
        return [s for s in self.params.sources.values() if s.engine == engine]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.paths.root.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock:
                yield
        except filelock.Timeout:
            raise StackError(
                f"Failed to lock the local stack: another process holds {self.paths.lock}"
            ) from None


# --------------------------------------------------------------------------------------------
