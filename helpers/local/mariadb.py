"""The local MariaDB 10.11 server: install, users, databases, connections.

:class:`MariaDBServer` is a :class:`~helpers.local.server.LocalServer`: the one start/stop/status
path starts ``mariadbd`` with the generated defaults file (which names the system user it switches
to when run as root) and stops it with SIGTERM, its clean shutdown. :class:`MariaDBAccess` is the
stack's MariaDB half: connections and the user and databases.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pymysql

from helpers.engines import quote_mariadb
from helpers.errors import StackError
from helpers.local.db_config import (
    APP_USER,
    DEBEZIUM_VERSION_FALLBACK,
    LOOPBACK,
    MARIADB_BIN,
    MARIADB_GLOBAL_PRIVILEGES,
    MARIADB_INSTALL,
    ConnInfo,
    render_mariadb_cnf,
)
from helpers.local.db_host import ServerHost, binary_version, is_server, pids_in_dir, which
from helpers.local.server import LocalServer, ServerPort
from helpers.proc import read_pid

log = logging.getLogger(__name__)


class MariaDBAccess(ServerHost):
    """The local MariaDB server's lifecycle (through :class:`MariaDBServer`) and connections."""

    @property
    def mariadb_server(self) -> MariaDBServer:
        """The server process, on the one start/stop/status path."""
        return MariaDBServer(self)

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
                f"as {APP_USER}: {exc}; start the stack with `./workbook stack start`"
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
                "start the stack with `./workbook stack start`"
            ) from None

    def start_mariadb(self) -> None:
        """Install (first time), configure and start MariaDB, then apply the user and databases.

        Raises:
            StackError: if the installation, the start or the bootstrap fails.
        """
        with self._locked():
            self.mariadb_server.start()

    def stop_mariadb(self) -> None:
        """Stop MariaDB (SIGTERM, clean shutdown); no-op when it is not running."""
        with self._locked():
            self.mariadb_server.stop(self.params.local.start_timeout_s)

    def _mariadb_pid(self) -> int | None:
        pid = read_pid(self.paths.maria_pid)
        if pid is not None and is_server(pid, self.paths.maria_data):
            return pid
        # pid file missing or stale, but a server may still run in the datadir
        if self.paths.maria_data.exists():
            for candidate in pids_in_dir(self.paths.maria_data):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{candidate}/comm").read_text().strip() == MARIADB_BIN:
                        return candidate
        return None

    def mariadb_version_string(self) -> str:
        """The version string MariaDB reports, ``5.5.5-<installed version>-log`` (for Debezium).

        Returns:
            E.g. ``"5.5.5-10.11.19-log"``.
        """
        version = binary_version(which(MARIADB_BIN))
        if re.fullmatch(r"\d+\.\d+\.\d+", version):
            return f"5.5.5-{version}-log"
        return DEBEZIUM_VERSION_FALLBACK

    def _prepare_mariadb(self) -> None:
        self._prepare_root()
        home = self.paths.maria_home
        for folder in (home, self.paths.maria_run, self.paths.maria_files, self.paths.maria_tmp):
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
            which(MARIADB_INSTALL),
            "--no-defaults",
            f"--datadir={tmp}",
            f"--tmpdir={self.paths.maria_tmp}",  # not /tmp: CI once lost an install's temporary table there
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

    def _bootstrap_mariadb(self) -> None:
        """Create or update user ``workbook``@``127.0.0.1`` and the MariaDB source databases."""
        account = f"{quote_mariadb(APP_USER)}@{quote_mariadb(LOOPBACK)}"
        password = self.credentials.mariadb_password.get_secret_value()
        conn = self.connect_mariadb_admin()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY %s", (password,))
                cur.execute(f"ALTER USER {account} IDENTIFIED BY %s", (password,))
                cur.execute(f"GRANT {', '.join(MARIADB_GLOBAL_PRIVILEGES)} ON *.* TO {account}")
                for source in self._sources("mariadb"):
                    db = quote_mariadb(source.database)
                    cur.execute(
                        f"CREATE DATABASE IF NOT EXISTS {db} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                    )
                    cur.execute(f"GRANT ALL PRIVILEGES ON {db}.* TO {account}")
        except pymysql.MySQLError as exc:
            raise StackError(f"Failed to set up the MariaDB user and databases: {exc}") from None
        finally:
            conn.close()


class MariaDBServer(LocalServer):
    """``mariadbd``, started and stopped on the one path; found again through the pid file it
    writes (or, without one, as the ``mariadbd`` process running in its datadir)."""

    name = "mariadb"
    title = "MariaDB"
    own_pid_file = True

    def __init__(self, access: MariaDBAccess) -> None:
        self.access = access
        paths = access.paths
        super().__init__(
            paths.maria_home,
            pid_file=paths.maria_pid,
            log_file=paths.maria_log,
            console_file=paths.maria_home / "mariadbd.out",
            start_timeout_s=access.params.local.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.access.params.local.mariadb.port, "local.mariadb.port")]

    @property
    def version(self) -> str:
        return binary_version(which(MARIADB_BIN))

    @property
    def data_location(self) -> str:
        return str(self.access.paths.maria_data)

    @property
    def address(self) -> str:
        return f"port {self.ports[0].number}"

    def command(self) -> list[str]:
        return [which(MARIADB_BIN), f"--defaults-file={self.access.paths.maria_cnf}"]

    def pid(self) -> int | None:
        return self.access._mariadb_pid()

    def prepare(self) -> None:
        """The system tables on the first start, the defaults file rewritten, a stale pid file
        (of a killed server) removed."""
        self.access._prepare_mariadb()
        if self.pid_file.exists():
            log.warning("Removing stale MariaDB pid file %s", self.pid_file)
            self.pid_file.unlink()
        return None

    def ready(self) -> bool:
        """Its socket accepts root's connection."""
        if not self.access.paths.maria_socket.exists():
            return False
        try:
            self.access.connect_mariadb_admin().close()
        except StackError:
            return False
        return True

    def after_start(self) -> None:
        self.access._bootstrap_mariadb()
