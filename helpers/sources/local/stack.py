"""Local source databases: PostgreSQL 15 and MariaDB 10.11 on 127.0.0.1, data in the state dir.

:class:`LocalStack` starts, stops and reports both servers. Everything lives under
``params.state_path``::

    <state_dir>/                 mode 0711 (the server users may traverse it, nobody may list it)
      credentials.json           generated passwords, mode 0600 (see helpers.sources.local.credentials)
      stack.lock                 serialises start/stop between processes
      postgres/                  owned by user postgres
        data/                    the cluster (postmaster.pid is PostgreSQL's pid file)
        data/workbook.conf       settings written by this module on every start
        run/                     unix socket (.s.PGSQL.<port>), reachable by root/postgres only
        postgresql.log
      mariadb/                   owned by user mysql
        my.cnf                   generated on every start (root-owned, 0644)
        data/                    datadir incl. the binlog (mariadb-bin.*)
        run/                     mariadb.sock, mariadb.pid
        files/                   secure_file_priv: the only folder server-side LOAD DATA may read
        mariadb.log

Both servers listen on 127.0.0.1 only; the application accounts are PostgreSQL role
``workbook`` (LOGIN, REPLICATION, owner of every PostgreSQL source database and its schema)
and MariaDB user ``workbook``@``127.0.0.1`` (the privileges of the Debezium MySQL connector,
plus all rights on the MariaDB source databases and FILE for LOAD DATA). Their passwords come
from :mod:`helpers.sources.local.credentials`. Administration uses the unix sockets (PostgreSQL peer
authentication mapped to the superuser ``postgres``; MariaDB ``root`` via ``unix_socket``),
so no superuser password exists.

Starting is idempotent: a running server is left alone (same pid); a stale pid file is removed
once no process of the old server remains; a killed server is started again (PostgreSQL and
InnoDB crash recovery). Roles, users, databases and schemas are (re)applied on every start.

Example:
    >>> from helpers.params import load_params
    >>> from helpers.sources.local.stack import LocalStack
    >>> stack = LocalStack(load_params("local"))             # doctest: +SKIP
    >>> stack.start()                                        # doctest: +SKIP
    >>> with stack.connect_postgres("ems") as conn:          # doctest: +SKIP
    ...     conn.execute("select 1").fetchone()
    (1,)

CLI: ``python -m helpers.sources.local.stack {start,stop,status} [--env local|ci]`` or ``workbook-stack``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import filelock
import psycopg
import pymysql
from psycopg import sql

from helpers.errors import StackError, WorkbookError
from helpers.metastore import LocalMetastore
from helpers.params import ENVIRONMENTS, SourceParams, WorkbookParams, load_params, parse_overrides
from helpers.proc import ServerStatus, register_child
from helpers.proc import log_tail as _tail
from helpers.proc import pid_alive as _pid_alive
from helpers.proc import port_in_use as _port_in_use
from helpers.proc import read_pid as _read_pid
from helpers.sources.local.credentials import Credentials, load_credentials

__all__ = [
    "APP_USER",
    "LOOPBACK",
    "ConnInfo",
    "LocalStack",
    "ServerStatus",
    "StackPaths",
    "main",
    "quote_mariadb_identifier",
    "render_mariadb_cnf",
    "render_pg_hba",
    "render_pg_ident",
    "render_postgres_conf",
]

log = logging.getLogger(__name__)

APP_USER = "workbook"
"""Name of the application role (PostgreSQL) and user (MariaDB, at host 127.0.0.1)."""

LOOPBACK = "127.0.0.1"
"""The only address the servers listen on."""
_PG_SUPERUSER = "postgres"
_PG_IDENT_MAP = "workbook_admin"
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
_MARIADB_BIN = "mariadbd"
_MARIADB_INSTALL = "mariadb-install-db"
_DEBEZIUM_VERSION_FALLBACK = "5.5.5-10.11.19-log"
_MARIADB_GLOBAL_PRIVILEGES = (
    "SELECT",
    "RELOAD",
    "SHOW DATABASES",
    "REPLICATION SLAVE",
    "REPLICATION CLIENT",  # MariaDB >= 10.5 stores it as BINLOG MONITOR
    "LOCK TABLES",
    "FILE",
)

ServerName = Literal["postgres", "mariadb"]


# --------------------------------------------------------------------------------------------
# small value types


class ConnInfo(dict[str, Any]):
    """Connection keyword arguments; ``repr``/``str`` hide the password.

    It is a plain ``dict`` otherwise: ``psycopg.connect(**info)`` / ``pymysql.connect(**info)``.
    """

    def __repr__(self) -> str:
        shown = {k: ("**********" if k == "password" else v) for k, v in self.items()}
        return f"ConnInfo({shown!r})"

    __str__ = __repr__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython display
        printer.text(repr(self))


@dataclasses.dataclass(frozen=True)
class StackPaths:
    """Where each file of the local stack lives, derived from the state directory."""

    root: Path

    @property
    def credentials(self) -> Path:
        """``credentials.json`` (mode 0600)."""
        return self.root / "credentials.json"

    @property
    def lock(self) -> Path:
        """Lock file serialising start/stop."""
        return self.root / "stack.lock"

    @property
    def pg_home(self) -> Path:
        """PostgreSQL's folder (owned by ``postgres``)."""
        return self.root / "postgres"

    @property
    def pg_data(self) -> Path:
        """PostgreSQL data directory."""
        return self.pg_home / "data"

    @property
    def pg_socket_dir(self) -> Path:
        """Folder of PostgreSQL's unix socket."""
        return self.pg_home / "run"

    @property
    def pg_log(self) -> Path:
        """PostgreSQL server log."""
        return self.pg_home / "postgresql.log"

    @property
    def pg_pid(self) -> Path:
        """PostgreSQL's own pid file."""
        return self.pg_data / "postmaster.pid"

    @property
    def maria_home(self) -> Path:
        """MariaDB's folder (owned by the server user)."""
        return self.root / "mariadb"

    @property
    def maria_cnf(self) -> Path:
        """Generated defaults file."""
        return self.maria_home / "my.cnf"

    @property
    def maria_data(self) -> Path:
        """MariaDB datadir (binlog included)."""
        return self.maria_home / "data"

    @property
    def maria_run(self) -> Path:
        """Folder of MariaDB's socket and pid file."""
        return self.maria_home / "run"

    @property
    def maria_socket(self) -> Path:
        """MariaDB unix socket."""
        return self.maria_run / "mariadb.sock"

    @property
    def maria_pid(self) -> Path:
        """MariaDB pid file."""
        return self.maria_run / "mariadb.pid"

    @property
    def maria_files(self) -> Path:
        """``secure_file_priv``: server-side ``LOAD DATA INFILE`` reads only from here."""
        return self.maria_home / "files"

    @property
    def maria_log(self) -> Path:
        """MariaDB error log."""
        return self.maria_home / "mariadb.log"


# --------------------------------------------------------------------------------------------
# quoting and config rendering (pure)


def quote_mariadb_identifier(name: str) -> str:
    """Quote an identifier (database, table, user or host name) for MariaDB with backticks.

    Args:
        name: the raw name.

    Returns:
        The name in backticks, embedded backticks doubled.

    Raises:
        ValueError: if the name is empty or contains a NUL character.

    Example:
        >>> quote_mariadb_identifier("we`ird")
        '`we``ird`'
    """
    if not name or "\x00" in name:
        raise ValueError(f"invalid MariaDB identifier {name!r}")
    return "`" + name.replace("`", "``") + "`"


def _pg_conf_value(value: str | int) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def render_postgres_conf(params: WorkbookParams, paths: StackPaths) -> str:
    """Render ``workbook.conf``, included from the cluster's ``postgresql.conf``.

    ``ALTER SYSTEM`` (``postgresql.auto.conf``) still wins over these settings, which is how a
    deliberate misconfiguration is detected by :func:`helpers.sources.cdc.preflight`.

    Args:
        params: workbook parameters (``local.postgres``).
        paths: the stack's paths.

    Returns:
        The file's text.
    """
    pg = params.local.postgres
    settings: list[tuple[str, str | int]] = [
        ("listen_addresses", LOOPBACK),
        ("port", pg.port),
        ("unix_socket_directories", str(paths.pg_socket_dir)),
        ("unix_socket_permissions", "0700"),
        ("password_encryption", "scram-sha-256"),
        ("wal_level", "logical"),
        ("max_replication_slots", pg.max_replication_slots),
        ("max_wal_senders", pg.max_wal_senders),
        ("hba_file", str(paths.pg_data / "pg_hba.conf")),
        ("ident_file", str(paths.pg_data / "pg_ident.conf")),
        ("logging_collector", "off"),
        ("log_line_prefix", "%m [%p] %q%u@%d "),
    ]
    lines = ["# Generated by helpers.sources.local.stack on every start; edits are overwritten.", ""]
    lines += [f"{key} = {_pg_conf_value(value)}" for key, value in settings]
    return "\n".join(lines) + "\n"


def render_pg_hba() -> str:
    """Render ``pg_hba.conf``: superuser over the socket by peer map, everyone else TCP+SCRAM.

    Returns:
        The file's text.
    """
    return (
        "# Generated by helpers.sources.local.stack. TYPE DATABASE USER ADDRESS METHOD\n"
        f"local   all          {_PG_SUPERUSER:<10} peer map={_PG_IDENT_MAP}\n"
        "local   all          all        reject\n"
        f"host    all          all        {LOOPBACK}/32 scram-sha-256\n"
        f"host    replication  all        {LOOPBACK}/32 scram-sha-256\n"
    )


def render_pg_ident(os_users: Sequence[str]) -> str:
    """Render ``pg_ident.conf``: which OS users may act as the superuser over the socket.

    Args:
        os_users: OS user names (root and postgres when run as root).

    Returns:
        The file's text.
    """
    lines = ["# Generated by helpers.sources.local.stack. MAPNAME SYSTEM-USERNAME PG-USERNAME"]
    lines += [f"{_PG_IDENT_MAP} {user} {_PG_SUPERUSER}" for user in dict.fromkeys(os_users)]
    return "\n".join(lines) + "\n"


def render_mariadb_cnf(
    params: WorkbookParams,
    paths: StackPaths,
    *,
    run_as: str | None,
    version_string: str = _DEBEZIUM_VERSION_FALLBACK,
) -> str:
    """Render the MariaDB defaults file passed as ``--defaults-file``.

    Args:
        params: workbook parameters (``local.mariadb``).
        paths: the stack's paths.
        run_as: OS user the server switches to (``None``: the current user).
        version_string: the version the server reports to clients (see the comment in the file).

    Returns:
        The file's text.
    """
    maria = params.local.mariadb
    user_line = f"user = {run_as}\n" if run_as else ""
    return f"""# Generated by helpers.sources.local.stack on every start; edits are overwritten.
[mariadbd]
{user_line}datadir = {paths.maria_data}
socket = {paths.maria_socket}
pid-file = {paths.maria_pid}
log-error = {paths.maria_log}
port = {maria.port}
bind-address = {LOOPBACK}
skip-name-resolve
secure-file-priv = {paths.maria_files}
local_infile = 1
character-set-server = utf8mb4
collation-server = utf8mb4_unicode_ci
default-time-zone = '+00:00'
innodb_buffer_pool_size = 256M

# Change data capture (Debezium MySQL connector reading the binlog)
log_bin = mariadb-bin
server_id = {maria.server_id}
binlog_format = ROW
binlog_row_image = FULL
expire_logs_days = {maria.binlog_expire_days}
# Debezium 3.x has no MariaDB connector in the embedded wheel, so its MySQL connector reads
# MariaDB. It picks its SQL dialect from the server version string: the stock
# "10.11.x-MariaDB-log" makes it send MySQL 8.4 statements (SHOW BINARY LOG STATUS, ...) that
# MariaDB rejects. Reporting the classic "5.5.5-<version>-log" form (the prefix MariaDB itself
# used for old clients) selects the MySQL 5.x code path, and together with binlog_checksum=NONE
# it streamed with 0 lost and 0 duplicated events across restarts (offline-stack-facts.md);
# other variants failed or lost the first change after each restart.
binlog_checksum = NONE
version = {version_string}
"""


# --------------------------------------------------------------------------------------------
# process helpers (Linux /proc)


def _pid_cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def _pids_in_dir(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` (servers chdir to their data dir)."""
    target = directory.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _pid_cwd(int(entry.name)) == target and _pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def _is_server(pid: int, data_dir: Path) -> bool:
    """True when ``pid`` is alive and runs in ``data_dir`` (not a recycled pid)."""
    return _pid_alive(pid) and _pid_cwd(pid) == data_dir.resolve()


@functools.cache
def _binary_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", out.split("Ver", 1)[-1])
    return match.group(1) if match else out.strip()


def _which(name: str, extra_dirs: Sequence[str] = ("/usr/sbin", "/usr/bin")) -> str:
    found = shutil.which(name) or next(
        (str(Path(d) / name) for d in extra_dirs if (Path(d) / name).is_file()), None
    )
    if not found:
        raise StackError(f"Failed to find {name}: it is not installed; run scripts/bootstrap.sh")
    return found


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# the stack


class LocalStack:
    """Local PostgreSQL 15 and MariaDB 10.11 servers for the workbook's source databases.

    Args:
        params: workbook parameters; uses ``state_path``, ``local`` and ``sources``.

    Example:
        >>> stack = LocalStack(load_params("ci"))   # doctest: +SKIP
        >>> stack.start(); stack.status()           # doctest: +SKIP
    """

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.paths = StackPaths(params.state_path)
        self._lock = filelock.FileLock(str(self.paths.lock), timeout=params.local.start_timeout_s * 4)
        self._root = os.geteuid() == 0
        me = pwd.getpwuid(os.geteuid()).pw_name
        self._pg_user = _PG_SUPERUSER if self._root else me
        if self._root:
            self._maria_user: str | None = "mysql" if _user_exists("mysql") else "root"
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

    # ------------------------------------------------------------------ public API

    def start(self) -> list[ServerStatus]:
        """Start both database servers and the local metastore (no-op for a running one) and
        apply roles, users and databases.

        Returns:
            The status of every server.

        Raises:
            StackError: if a server cannot be set up, started or reached; the message names the
                server, its port and the last lines of its log.
        """
        with self._locked():
            self.start_postgres()
            self.start_mariadb()
            LocalMetastore(self.params).start()
        return self.status()

    def stop(self) -> list[ServerStatus]:
        """Stop the Silver job and the capture workers of this state directory, then the
        metastore and both database servers (no-op for a stopped one).

        Returns:
            The status of every server.

        Raises:
            StackError: if a server does not stop within the start timeout.
        """
        from helpers.capture.backends import stop_all_workers
        from helpers.silver.job import SilverJob

        SilverJob(self.params).stop()
        stop_all_workers(self.params.state_path)
        with self._locked():
            LocalMetastore(self.params).stop()
            self.stop_mariadb()
            self.stop_postgres()
        return self.status()

    def status(self) -> list[ServerStatus]:
        """Report each server: running or stopped, pid, port, version, data dir, log file.

        Returns:
            One :class:`ServerStatus` per server: PostgreSQL, MariaDB, the metastore.
        """
        pg_pid = self._postgres_pid()
        maria_pid = self._mariadb_pid()
        return [
            ServerStatus(
                server="postgres",
                running=pg_pid is not None,
                pid=pg_pid,
                port=self.params.local.postgres.port,
                version=_binary_version(str(self._pg_bin("postgres"))),
                data_dir=str(self.paths.pg_data),
                log_file=str(self.paths.pg_log),
            ),
            ServerStatus(
                server="mariadb",
                running=maria_pid is not None,
                pid=maria_pid,
                port=self.params.local.mariadb.port,
                version=_binary_version(_which(_MARIADB_BIN)),
                data_dir=str(self.paths.maria_data),
                log_file=str(self.paths.maria_log),
            ),
            LocalMetastore(self.params).status(),
        ]

    def apply_accounts(self) -> None:
        """(Re)apply the application role/user, passwords, grants, databases and schemas.

        Runs on every start; call it after changing a password override or the sources.

        Raises:
            StackError: if a server is not running or a statement fails.
        """
        with self._locked():
            self._bootstrap_postgres()
            self._bootstrap_mariadb()

    # ------------------------------------------------------------------ connections

    def postgres_conninfo(self, database: str) -> ConnInfo:
        """Keyword arguments for ``psycopg.connect`` as role ``workbook`` over TCP.

        Args:
            database: database name, e.g. ``"ems"``.

        Returns:
            ``host``, ``port``, ``dbname``, ``user``, ``password``, ``connect_timeout``; the
            password is hidden in ``repr``.
        """
        return ConnInfo(
            host=LOOPBACK,
            port=self.params.local.postgres.port,
            dbname=database,
            user=APP_USER,
            password=self.credentials.postgres_password.get_secret_value(),
            connect_timeout=10,
        )

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
        """Open a connection to a PostgreSQL source database as role ``workbook``.

        Args:
            database: database name, e.g. ``"ems"``.
            autocommit: open the connection in autocommit mode.

        Returns:
            A psycopg 3 connection (use it as a context manager).

        Raises:
            StackError: if the server is not reachable or refuses the login.
        """
        info = self.postgres_conninfo(database)
        try:
            return psycopg.connect(**info, autocommit=autocommit)
        except psycopg.Error as exc:
            raise StackError(
                f"Failed to connect to PostgreSQL database {database!r} on {LOOPBACK}:{info['port']} "
                f"as {APP_USER}: {str(exc).strip()}; start the stack with `workbook-stack start`"
            ) from None

    def mariadb_conninfo(self, database: str | None) -> ConnInfo:
        """Keyword arguments for ``pymysql.connect`` as ``workbook``@``127.0.0.1`` over TCP.

        Args:
            database: default database, e.g. ``"ecomm"`` (``None``: none).

        Returns:
            ``host``, ``port``, ``user``, ``password``, ``database``, ``charset``,
            ``local_infile`` (True, for ``LOAD DATA LOCAL INFILE``); password hidden in ``repr``.
        """
        return ConnInfo(
            host=LOOPBACK,
            port=self.params.local.mariadb.port,
            user=APP_USER,
            password=self.credentials.mariadb_password.get_secret_value(),
            database=database,
            charset="utf8mb4",
            local_infile=True,
            connect_timeout=10,
        )

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> pymysql.Connection[Any]:
        """Open a connection to a MariaDB source database as ``workbook``@``127.0.0.1``.

        Args:
            database: default database, e.g. ``"ecomm"`` (``None``: none).
            autocommit: open the connection in autocommit mode.

        Returns:
            A PyMySQL connection with ``local_infile`` enabled.

        Raises:
            StackError: if the server is not reachable or refuses the login.
        """
        info = self.mariadb_conninfo(database)
        try:
            return pymysql.connect(**info, autocommit=autocommit)
        except pymysql.MySQLError as exc:
            raise StackError(
                f"Failed to connect to MariaDB database {database!r} on {LOOPBACK}:{info['port']} "
                f"as {APP_USER}: {exc}; start the stack with `workbook-stack start`"
            ) from None

    def connect_postgres_admin(self, database: str = "postgres") -> psycopg.Connection[Any]:
        """Superuser connection over the unix socket (local set-up only; autocommit).

        Args:
            database: database to connect to.

        Returns:
            A psycopg connection as ``postgres``.

        Raises:
            StackError: if the server is not running or not reachable.
        """
        try:
            return psycopg.connect(
                host=str(self.paths.pg_socket_dir),
                port=self.params.local.postgres.port,
                dbname=database,
                user=_PG_SUPERUSER,
                autocommit=True,
                connect_timeout=10,
            )
        except psycopg.Error as exc:
            raise StackError(
                f"Failed to connect to PostgreSQL as superuser over {self.paths.pg_socket_dir}: "
                f"{str(exc).strip()}; start the stack with `workbook-stack start`"
            ) from None

    def connect_mariadb_admin(self, database: str | None = None) -> pymysql.Connection[Any]:
        """``root`` connection over the unix socket (local set-up only; autocommit).

        Args:
            database: default database (``None``: none).

        Returns:
            A PyMySQL connection as ``root``.

        Raises:
            StackError: if the server is not running or not reachable.
        """
        try:
            return pymysql.connect(
                unix_socket=str(self.paths.maria_socket),
                user="root",
                database=database,
                autocommit=True,
                charset="utf8mb4",
                connect_timeout=10,
            )
        except pymysql.MySQLError as exc:
            raise StackError(
                f"Failed to connect to MariaDB as root over {self.paths.maria_socket}: {exc}; "
                "start the stack with `workbook-stack start`"
            ) from None

    # ------------------------------------------------------------------ PostgreSQL

    def start_postgres(self) -> None:
        """Initialise (first time), configure and start PostgreSQL, then apply roles and databases.

        Raises:
            StackError: if initdb, the start or the bootstrap fails.
        """
        with self._locked():
            self._prepare_postgres()
            if self._postgres_pid() is not None:
                log.info("PostgreSQL is already running on port %s", self.params.local.postgres.port)
            else:
                self._clear_stale_postgres()
                self._launch_postgres()
            self._bootstrap_postgres()

    def stop_postgres(self) -> None:
        """Stop PostgreSQL (fast shutdown); no-op when it is not running.

        Raises:
            StackError: if it does not stop within the start timeout.
        """
        with self._locked():
            if self._postgres_pid() is None:
                return
            timeout = int(self.params.local.start_timeout_s)
            result = self._run_as_pg(
                [
                    str(self._pg_bin("pg_ctl")),
                    "stop",
                    "-D",
                    str(self.paths.pg_data),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    str(timeout),
                    "-s",
                ],
                check=False,
            )
            if result.returncode != 0 and self._postgres_pid() is not None:
                raise StackError(
                    f"Failed to stop PostgreSQL on port {self.params.local.postgres.port}: "
                    f"{result.stderr.strip() or result.stdout.strip()}\n{_tail(self.paths.pg_log)}"
                )
            log.info("PostgreSQL stopped")

    def restart_postgres(self) -> None:
        """Stop and start PostgreSQL (e.g. after ``ALTER SYSTEM`` of a restart-only setting).

        Raises:
            StackError: if the stop or the start fails.
        """
        with self._locked():
            self.stop_postgres()
            self.start_postgres()

    def _pg_bin(self, name: str) -> Path:
        return Path(self.params.local.postgres.bin_dir) / name

    def _postgres_pid(self) -> int | None:
        pid = _read_pid(self.paths.pg_pid)
        if pid is not None and _is_server(pid, self.paths.pg_data):
            return pid
        return None

    def _run_as_pg(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = ["runuser", "-u", self._pg_user, "--", *argv] if self._root else argv
        result = subprocess.run(
            cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/", check=False
        )
        if check and result.returncode != 0:
            raise StackError(
                f"Failed to run {Path(argv[0]).name} for PostgreSQL: "
                f"{(result.stderr or result.stdout).strip()}"
            )
        return result

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
        if len(str(path).encode()) > _SOCKET_PATH_MAX:
            raise StackError(
                f"Failed to prepare the state directory: the socket path {path} is longer than "
                f"{_SOCKET_PATH_MAX} bytes; choose a shorter state_dir"
            )

    def _prepare_postgres(self) -> None:
        self._prepare_root()
        home, data = self.paths.pg_home, self.paths.pg_data
        for folder in (home, self.paths.pg_socket_dir):
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o700)
            self._chown(folder, self._pg_user)
        if self._root:
            probe = subprocess.run(
                ["runuser", "-u", self._pg_user, "--", "test", "-w", str(home)], cwd="/", check=False
            )
            if probe.returncode != 0:
                raise StackError(
                    f"Failed to prepare PostgreSQL: user {self._pg_user} cannot reach {home}; make every "
                    f"parent folder of the state directory traversable (chmod o+x) or choose another "
                    "state_dir"
                )
        if not (data / "PG_VERSION").exists():
            self._initdb()
        # settings: our include file, hba and ident (rewritten every start)
        conf = data / "postgresql.conf"
        include = "include_if_exists = 'workbook.conf'"
        text = conf.read_text()
        if include not in text:
            conf.write_text(text + f"\n# added by helpers.sources.local.stack\n{include}\n")
        ident_users = [self._os_user, self._pg_user]
        for name, content in (
            ("workbook.conf", render_postgres_conf(self.params, self.paths)),
            ("pg_hba.conf", render_pg_hba()),
            ("pg_ident.conf", render_pg_ident(ident_users)),
        ):
            target = data / name
            target.write_text(content)
            os.chmod(target, 0o600)
            self._chown(target, self._pg_user)

    def _initdb(self) -> None:
        data, tmp = self.paths.pg_data, self.paths.pg_home / "data.initdb"
        if data.exists():
            if any(data.iterdir()):
                raise StackError(
                    f"Failed to initialise PostgreSQL: {data} is not empty but holds no cluster; move it away"
                )
            data.rmdir()
        shutil.rmtree(tmp, ignore_errors=True)  # an interrupted earlier attempt
        log.info("Initialising a PostgreSQL cluster in %s", data)
        result = self._run_as_pg(
            [
                str(self._pg_bin("initdb")),
                "-D",
                str(tmp),
                "-U",
                _PG_SUPERUSER,
                "-E",
                "UTF8",
                "--no-locale",
                "--auth-local=peer",
                "--auth-host=scram-sha-256",
            ],
            check=False,
        )
        if result.returncode != 0:
            raise StackError(f"Failed to initialise PostgreSQL in {data}: {result.stderr.strip()}")
        tmp.rename(data)  # atomic: a cluster dir either is complete or does not exist

    def _clear_stale_postgres(self) -> None:
        """Remove the pid and socket lock files of a killed postmaster once its processes are gone.

        Only files whose recorded pid is no longer a process running in our data directory are
        removed, and only after the dead postmaster and its orphaned backends have exited (they
        notice the postmaster's death within moments); a zombie still awaiting its parent's
        reap counts as present, because PostgreSQL's own lock check would see it.
        """
        data = self.paths.pg_data
        lock_files = [self.paths.pg_pid, *self.paths.pg_socket_dir.glob(".s.PGSQL.*.lock")]
        stale_pids = {pid for f in lock_files if (pid := _read_pid(f)) is not None}
        if not any(f.exists() for f in lock_files):
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            orphans = _pids_in_dir(data)
            lingering = [p for p in stale_pids if Path(f"/proc/{p}").exists() and not _is_server(p, data)]
            if not orphans and not lingering:
                break
            time.sleep(0.1)
        running = self._postgres_pid()
        if running is not None:  # pragma: no cover - raced with another start
            raise StackError(f"Failed to start PostgreSQL: it is already running as pid {running}")
        for pid in _pids_in_dir(data):  # still there: they belong to our dead server, end them
            log.warning("Ending orphaned PostgreSQL process %s of %s", pid, data)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for lock_file in lock_files:
            pid = _read_pid(lock_file)
            if lock_file.exists() and (pid is None or not _is_server(pid, data)):
                log.warning("Removing stale PostgreSQL lock file %s (pid %s is gone)", lock_file, pid)
                lock_file.unlink(missing_ok=True)

    def _launch_postgres(self) -> None:
        port = self.params.local.postgres.port
        if _port_in_use(port):
            raise StackError(
                f"Failed to start PostgreSQL: port {port} on {LOOPBACK} is already in use by another "
                "process; stop it or choose another port (local.postgres.port)"
            )
        timeout = int(self.params.local.start_timeout_s)
        log.info("Starting PostgreSQL on %s:%s", LOOPBACK, port)
        result = self._run_as_pg(
            [
                str(self._pg_bin("pg_ctl")),
                "start",
                "-D",
                str(self.paths.pg_data),
                "-l",
                str(self.paths.pg_log),
                "-w",
                "-t",
                str(timeout),
                "-s",
            ],
            check=False,
        )
        if result.returncode != 0 or self._postgres_pid() is None:
            raise StackError(
                f"Failed to start PostgreSQL on port {port}: "
                f"{(result.stderr or result.stdout).strip() or 'it exited'}; last lines of "
                f"{self.paths.pg_log}:\n{_tail(self.paths.pg_log)}"
            )

    def _bootstrap_postgres(self) -> None:
        """Create or update role ``workbook`` and the PostgreSQL source databases and schemas."""
        try:
            self._bootstrap_postgres_statements()
        except psycopg.Error as exc:
            raise StackError(
                f"Failed to set up the PostgreSQL role and databases: {str(exc).strip()}"
            ) from None

    def _bootstrap_postgres_statements(self) -> None:
        role = sql.Identifier(APP_USER)
        password = self.credentials.postgres_password.get_secret_value()
        with self.connect_postgres_admin() as conn:
            # send a SCRAM verifier, never the clear-text password, so it cannot reach a log
            verifier = conn.pgconn.encrypt_password(password.encode(), APP_USER.encode(), b"scram-sha-256")
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_USER,)).fetchone()
            verb = sql.SQL("ALTER ROLE" if exists else "CREATE ROLE")
            conn.execute(
                sql.SQL("{} {} WITH LOGIN REPLICATION PASSWORD {}").format(
                    verb, role, sql.Literal(verifier.decode())
                )
            )
            for source in self._sources("postgres"):
                db = sql.Identifier(source.database)
                if conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (source.database,)
                ).fetchone():
                    conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(db, role))
                else:
                    log.info("Creating PostgreSQL database %s", source.database)
                    conn.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'UTF8' TEMPLATE template0").format(
                            db, role
                        )
                    )
                conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
                schema = source.schema_name or "public"
                conn.execute(
                    sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}, public").format(
                        role, db, sql.Identifier(schema)
                    )
                )
                with self.connect_postgres_admin(source.database) as dbconn:
                    dbconn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(
                            sql.Identifier(schema), role
                        )
                    )
                    dbconn.execute(
                        sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(sql.Identifier(schema), role)
                    )

    def _sources(self, engine: str) -> list[SourceParams]:
        return [s for s in self.params.sources.values() if s.engine == engine]

    # ------------------------------------------------------------------ MariaDB

    def start_mariadb(self) -> None:
        """Install (first time), configure and start MariaDB, then apply the user and databases.

        Raises:
            StackError: if the installation, the start or the bootstrap fails.
        """
        with self._locked():
            self._prepare_mariadb()
            if self._mariadb_pid() is not None:
                log.info("MariaDB is already running on port %s", self.params.local.mariadb.port)
            else:
                self._launch_mariadb()
            self._bootstrap_mariadb()

    def stop_mariadb(self) -> None:
        """Stop MariaDB (SIGTERM, clean shutdown); no-op when it is not running.

        Raises:
            StackError: if it does not stop within the start timeout.
        """
        with self._locked():
            pid = self._mariadb_pid()
            if pid is None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + self.params.local.start_timeout_s
            while _pid_alive(pid):
                if time.monotonic() > deadline:
                    raise StackError(
                        f"Failed to stop MariaDB (pid {pid}) on port {self.params.local.mariadb.port}: "
                        f"still running after {self.params.local.start_timeout_s:.0f} s; last lines of "
                        f"{self.paths.maria_log}:\n{_tail(self.paths.maria_log)}"
                    )
                time.sleep(0.1)
            log.info("MariaDB stopped")

    def _mariadb_pid(self) -> int | None:
        pid = _read_pid(self.paths.maria_pid)
        if pid is not None and _is_server(pid, self.paths.maria_data):
            return pid
        # pid file missing or stale, but a server may still run in the datadir
        if self.paths.maria_data.exists():
            for candidate in _pids_in_dir(self.paths.maria_data):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{candidate}/comm").read_text().strip() == _MARIADB_BIN:
                        return candidate
        return None

    def mariadb_version_string(self) -> str:
        """The version string MariaDB reports, ``5.5.5-<installed version>-log`` (for Debezium).

        Returns:
            E.g. ``"5.5.5-10.11.19-log"``.
        """
        version = _binary_version(_which(_MARIADB_BIN))
        if re.fullmatch(r"\d+\.\d+\.\d+", version):
            return f"5.5.5-{version}-log"
        return _DEBEZIUM_VERSION_FALLBACK

    def _prepare_mariadb(self) -> None:
        self._prepare_root()
        home = self.paths.maria_home
        for folder in (home, self.paths.maria_run, self.paths.maria_files):
            folder.mkdir(exist_ok=True)
            os.chmod(folder, 0o750)
            self._chown(folder, self._maria_user)
        if not (self.paths.maria_data / "mysql").is_dir():
            self._install_mariadb()
        cnf = self.paths.maria_cnf
        cnf.write_text(
            render_mariadb_cnf(
                self.params,
                self.paths,
                run_as=self._maria_user,
                version_string=self.mariadb_version_string(),
            )
        )
        os.chmod(cnf, 0o644)  # mariadbd ignores world-writable option files

    def _install_mariadb(self) -> None:
        data, tmp = self.paths.maria_data, self.paths.maria_home / "data.install"
        if data.exists():
            if any(data.iterdir()):
                raise StackError(
                    f"Failed to install MariaDB: {data} is not empty but holds no system tables; move it away"
                )
            data.rmdir()
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("Installing MariaDB system tables into %s", data)
        argv = [
            _which(_MARIADB_INSTALL),
            "--no-defaults",
            f"--datadir={tmp}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
            "--skip-name-resolve",
        ]
        if self._maria_user:
            argv.append(f"--user={self._maria_user}")
        result = subprocess.run(
            argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/", check=False
        )
        if result.returncode != 0:
            raise StackError(
                f"Failed to install MariaDB into {data}: {(result.stderr or result.stdout).strip()[-2000:]}"
            )
        tmp.rename(data)
        self._chown(data, self._maria_user)

    def _launch_mariadb(self) -> None:
        port = self.params.local.mariadb.port
        pid_file = self.paths.maria_pid
        if pid_file.exists():
            log.warning("Removing stale MariaDB pid file %s", pid_file)
            pid_file.unlink()
        if _port_in_use(port):
            raise StackError(
                f"Failed to start MariaDB: port {port} on {LOOPBACK} is already in use by another "
                "process; stop it or choose another port (local.mariadb.port)"
            )
        log.info("Starting MariaDB on %s:%s", LOOPBACK, port)
        with open(self.paths.maria_home / "mariadbd.out", "ab") as out:
            proc = subprocess.Popen(
                [_which(_MARIADB_BIN), f"--defaults-file={self.paths.maria_cnf}"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd="/",
                start_new_session=True,  # not killed with the notebook's process group
            )
        register_child(proc)
        deadline = time.monotonic() + self.params.local.start_timeout_s
        while True:
            if proc.poll() is not None:
                raise StackError(
                    f"Failed to start MariaDB on port {port}: mariadbd exited with code {proc.returncode}; "
                    f"last lines of {self.paths.maria_log}:\n{_tail(self.paths.maria_log)}"
                )
            if self.paths.maria_socket.exists():
                try:
                    self.connect_mariadb_admin().close()
                    return
                except StackError:
                    pass
            if time.monotonic() > deadline:
                proc.terminate()
                raise StackError(
                    f"Failed to start MariaDB on port {port}: not ready after "
                    f"{self.params.local.start_timeout_s:.0f} s (raise local.start_timeout_s?); last "
                    f"lines of "
                    f"{self.paths.maria_log}:\n{_tail(self.paths.maria_log)}"
                )
            time.sleep(0.2)

    def _bootstrap_mariadb(self) -> None:
        """Create or update user ``workbook``@``127.0.0.1`` and the MariaDB source databases."""
        account = f"{quote_mariadb_identifier(APP_USER)}@{quote_mariadb_identifier(LOOPBACK)}"
        password = self.credentials.mariadb_password.get_secret_value()
        conn = self.connect_mariadb_admin()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY %s", (password,))
                cur.execute(f"ALTER USER {account} IDENTIFIED BY %s", (password,))
                cur.execute(f"GRANT {', '.join(_MARIADB_GLOBAL_PRIVILEGES)} ON *.* TO {account}")
                for source in self._sources("mariadb"):
                    db = quote_mariadb_identifier(source.database)
                    cur.execute(
                        f"CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                    )
                    cur.execute(f"GRANT ALL PRIVILEGES ON {db}.* TO {account}")
        except pymysql.MySQLError as exc:
            raise StackError(f"Failed to set up the MariaDB user and databases: {exc}") from None
        finally:
            conn.close()

    # ------------------------------------------------------------------ misc

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
# CLI


def _format_status(statuses: Sequence[ServerStatus]) -> str:
    from tabulate import tabulate

    rows = [[s.server, s.state, s.pid or "-", s.port, s.version, s.data_dir] for s in statuses]
    return tabulate(rows, headers=["server", "state", "pid", "port", "version", "data dir"])


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``workbook-stack {start,stop,status} [--env local|ci] [--state-dir DIR] [--set K=V]``.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        The exit code: 0 on success, 1 on failure (the message goes to stderr).
    """
    parser = argparse.ArgumentParser(
        prog="workbook-stack",
        description="Start, stop or show the local PostgreSQL and MariaDB servers and the metastore.",
    )
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--env", default="local", choices=[e for e in ENVIRONMENTS if e != "aws"])
    parser.add_argument("--state-dir", help="override params state_dir")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter, e.g. --set local.postgres.port=55999 (value parsed as YAML)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    try:
        overrides: dict[str, Any] = {"state_dir": args.state_dir} if args.state_dir else {}
        overrides.update(parse_overrides(args.set))
        stack = LocalStack(load_params(args.env, overrides=overrides))
        if args.command == "start":
            statuses = stack.start()
        elif args.command == "stop":
            statuses = stack.stop()
        else:
            statuses = stack.status()
    except WorkbookError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(_format_status(statuses))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
