"""Local source databases: PostgreSQL 15 and MariaDB 10.11 on 127.0.0.1, data in the state dir.

:class:`LocalStack` starts, stops and reports both servers (``./workbook stack start|stop|status``)
and opens connections (``connect_postgres``, ``connect_mariadb``). Starting is idempotent. The
folder layout, the accounts and crash handling: ``docs/architecture.md``, "Sources".
"""

from __future__ import annotations

import logging

from helpers.metastore import LocalMetastore
from helpers.proc import ServerStatus
from helpers.s3_server import LocalS3Server
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
from helpers.spark_cluster import LocalSparkCluster

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
        apply roles, users and databases; also the local Spark cluster when ``spark.master`` names
        it (:mod:`helpers.spark_cluster`) and the lake's local S3 server when ``local.s3.enabled``
        (:mod:`helpers.s3_server`), so notebook 01's start brings up every server a later
        Spark session or capture worker needs.

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
            cluster = LocalSparkCluster(self.params)
            if cluster.wanted:
                cluster.start()
            if self.params.local.s3.enabled:
                LocalS3Server(self.params).start()
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
