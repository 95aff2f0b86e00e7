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

import logging

from helpers.metastore import LocalMetastore
from helpers.proc import ServerStatus
from helpers.sources.local.config import (
    APP_USER,
    LOOPBACK,
    MARIADB_BIN,
    ConnInfo,
    StackPaths,
)
from helpers.sources.local.mariadb import MariaDBServer
from helpers.sources.local.postgres import PostgresServer
from helpers.sources.local.server import binary_version, which

__all__ = ["APP_USER", "LOOPBACK", "ConnInfo", "LocalStack", "StackPaths"]

log = logging.getLogger(__name__)


class LocalStack(PostgresServer, MariaDBServer):
    """Local PostgreSQL 15 and MariaDB 10.11 servers for the workbook's source databases.

    Args:
        params: workbook parameters; uses ``state_path``, ``local`` and ``sources``.

    Example:
        >>> stack = LocalStack(load_params("ci"))   # doctest: +SKIP
        >>> stack.start(); stack.status()           # doctest: +SKIP
    """

    def __repr__(self) -> str:
        return f"LocalStack(state_dir={str(self.paths.root)!r})"

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
        """Stop the metastore and both database servers (no-op for a stopped one). Stop what uses
        them first: :func:`helpers.pipeline.stop_all` does it in order.

        Returns:
            The status of every server.

        Raises:
            StackError: if a server does not stop within the start timeout.
        """
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
                version=binary_version(str(self._pg_bin("postgres"))),
                data_dir=str(self.paths.pg_data),
                log_file=str(self.paths.pg_log),
            ),
            ServerStatus(
                server="mariadb",
                running=maria_pid is not None,
                pid=maria_pid,
                port=self.params.local.mariadb.port,
                version=binary_version(which(MARIADB_BIN)),
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
