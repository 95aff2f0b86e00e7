"""The local PostgreSQL 15 server: initdb, launch, stop, stale pid clean-up, roles, databases, connections."""

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
from helpers.poll import wait_until
from helpers.proc import log_tail, port_in_use, read_pid
from helpers.sources.local.config import (
    APP_USER,
    LOOPBACK,
    PG_SUPERUSER,
    ConnInfo,
    render_pg_hba,
    render_pg_ident,
    render_postgres_conf,
)
from helpers.sources.local.server import ServerHost, is_server, pids_in_dir

log = logging.getLogger(__name__)


class PostgresServer(ServerHost):
    """Lifecycle and connections of the local PostgreSQL server."""

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
                user=PG_SUPERUSER,
                autocommit=True,
                connect_timeout=10,
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
                    f"{result.stderr.strip() or result.stdout.strip()}\n{log_tail(self.paths.pg_log)}"
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

    def _launch_postgres(self) -> None:
        port = self.params.local.postgres.port
        if port_in_use(port):
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
                f"{self.paths.pg_log}:\n{log_tail(self.paths.pg_log)}"
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
