"""The local PostgreSQL 15 server: initdb, stale lock clean-up, roles, databases, connections.

:class:`PostgresServer` is a :class:`~helpers.local.server.LocalServer`: the one start/stop/status
path starts ``postgres -D <data>`` (as the ``postgres`` system user when run as root) and stops it
with SIGINT, PostgreSQL's fast shutdown (SIGTERM would wait for every client, Debezium's included).
:class:`PostgresAccess` is the stack's PostgreSQL half: connections and the role and databases.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from helpers.errors import StackError, WaitTimeoutError
from helpers.local.db_config import (
    APP_USER,
    LOOPBACK,
    PG_SUPERUSER,
    ConnInfo,
    render_pg_hba,
    render_pg_ident,
    render_postgres_conf,
)
from helpers.local.db_host import ServerHost, binary_version, is_server, pids_in_dir
from helpers.local.server import LocalServer, ServerPort
from helpers.poll import wait_until
from helpers.proc import read_pid

log = logging.getLogger(__name__)


class PostgresAccess(ServerHost):
    """The local PostgreSQL server's lifecycle (through :class:`PostgresServer`) and connections."""

    @property
    def postgres_server(self) -> PostgresServer:
        """The server process, on the one start/stop/status path."""
        return PostgresServer(self)

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
                f"as {APP_USER}: {str(exc).strip()}; start the stack with `./workbook stack start`"
            ) from None

    def connect_postgres_admin(
        self, database: str = "postgres", *, connect_timeout: int = 10
    ) -> psycopg.Connection[Any]:
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
                user=PG_SUPERUSER,
                autocommit=True,
                connect_timeout=connect_timeout,
            )
        except psycopg.Error as exc:
            raise StackError(
                f"Failed to connect to PostgreSQL as superuser over {self.paths.pg_socket_dir}: "
                f"{str(exc).strip()}; start the stack with `./workbook stack start`"
            ) from None

    def start_postgres(self) -> None:
        """Initialise (first time), configure and start PostgreSQL, then apply roles and databases.

        Raises:
            StackError: if initdb, the start or the bootstrap fails.
        """
        with self._locked():
            self.postgres_server.start()

    def stop_postgres(self) -> None:
        """Stop PostgreSQL (fast shutdown); no-op when it is not running."""
        with self._locked():
            self.postgres_server.stop(self.params.local.start_timeout_s)

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
        pid = read_pid(self.paths.pg_pid)
        if pid is not None and is_server(pid, self.paths.pg_data):
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
            conf.write_text(text + f"\n# added by helpers.local.stack\n{include}\n")
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
                PG_SUPERUSER,
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
        stale_pids = {pid for f in lock_files if (pid := read_pid(f)) is not None}
        if not any(f.exists() for f in lock_files):
            return

        def gone() -> bool:
            lingering = [p for p in stale_pids if Path(f"/proc/{p}").exists() and not is_server(p, data)]
            return not pids_in_dir(data) and not lingering

        with contextlib.suppress(WaitTimeoutError):  # whatever is left is ended below
            wait_until(
                gone,
                timeout_s=15,
                what=f"the processes of the dead PostgreSQL server in {data} to exit",
                interval_s=0.1,
                max_interval_s=0.5,
            )
        running = self._postgres_pid()
        if running is not None:  # pragma: no cover - raced with another start
            raise StackError(f"Failed to start PostgreSQL: it is already running as pid {running}")
        for pid in pids_in_dir(data):  # still there: they belong to our dead server, end them
            log.warning("Ending orphaned PostgreSQL process %s of %s", pid, data)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for lock_file in lock_files:
            pid = read_pid(lock_file)
            if lock_file.exists() and (pid is None or not is_server(pid, data)):
                log.warning("Removing stale PostgreSQL lock file %s (pid %s is gone)", lock_file, pid)
                lock_file.unlink(missing_ok=True)

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


class PostgresServer(LocalServer):
    """The postmaster, started and stopped on the one path; found again through its own pid file
    (``postmaster.pid``), checked to run in the data directory (not a recycled pid)."""

    name = "postgres"
    title = "PostgreSQL"
    own_pid_file = True
    stop_signal = signal.SIGINT  # fast shutdown: SIGTERM (smart) waits until every client leaves

    def __init__(self, access: PostgresAccess) -> None:
        self.access = access
        paths = access.paths
        super().__init__(
            paths.pg_home,
            pid_file=paths.pg_pid,
            log_file=paths.pg_log,
            start_timeout_s=access.params.local.start_timeout_s,
            run_as=access._pg_user if access._root else None,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.access.params.local.postgres.port, "local.postgres.port")]

    @property
    def version(self) -> str:
        return binary_version(str(self.access._pg_bin("postgres")))

    @property
    def data_location(self) -> str:
        return str(self.access.paths.pg_data)

    @property
    def address(self) -> str:
        return f"port {self.ports[0].number}"

    def command(self) -> list[str]:
        return [str(self.access._pg_bin("postgres")), "-D", str(self.access.paths.pg_data)]

    def pid(self) -> int | None:
        return self.access._postgres_pid()

    def prepare(self) -> None:
        """initdb on the first start, the settings rewritten, a killed server's lock files removed."""
        self.access._prepare_postgres()
        self.access._clear_stale_postgres()
        return None

    def ready(self) -> bool:
        """It accepts the superuser's connection on its socket (not only its port: a starting
        server refuses logins until recovery ends)."""
        try:
            self.access.connect_postgres_admin(connect_timeout=2).close()
        except StackError:
            return False
        return True

    def after_start(self) -> None:
        self.access._bootstrap_postgres()
