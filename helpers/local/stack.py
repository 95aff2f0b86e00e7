"""Local source databases: PostgreSQL 15 and MariaDB 10.11 on 127.0.0.1, data in the state dir.

:class:`LocalStack` starts, stops and reports both servers with the catalog service, the Hive
Metastore (``./workbook stack start|stop|status``; stop and status also cover a Trino that a query
engine started)
and opens connections (``connect_postgres``, ``connect_mariadb``). Starting is idempotent. The
folder layout, the accounts and crash handling: ``docs/architecture.md``, "Sources".
"""

from __future__ import annotations

import logging

from helpers.local.db_config import (
    APP_USER,
    LOOPBACK,
    ConnInfo,
    StackPaths,
)
from helpers.local.mariadb import MariaDBAccess
from helpers.local.metastore import LocalMetastore
from helpers.local.postgres import PostgresAccess
from helpers.local.s3 import LocalS3Server
from helpers.local.spark_cluster import LocalSparkCluster
from helpers.local.trino import LocalTrino
from helpers.proc import ServerStatus

__all__ = ["APP_USER", "LOOPBACK", "ConnInfo", "LocalStack", "StackPaths"]

log = logging.getLogger(__name__)


class LocalStack(PostgresAccess, MariaDBAccess):
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
        """Start both database servers and the local metastore (no-op for a running one) and apply
        roles, users and databases; also the local Spark cluster when ``spark.master`` names
        it (:mod:`helpers.local.spark_cluster`) and the lake's local S3 server when ``local.s3.enabled``
        (:mod:`helpers.local.s3`), so notebook 01's start brings up every server a later
        Spark session or capture worker needs. Trino is not among them: the query engine starts it
        when it opens and stops it when it closes (:func:`helpers.query.engines.open_engine`).

        Returns:
            The status of every server.

        Raises:
            StackError: if a server cannot be set up, started or reached; the message names the
                server, its port and the last lines of its log.
        """
        with self._locked():
            self._prepare_root()  # the state dir's own faults first, before any port is probed
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
        """Stop Trino, the metastore and both database servers (no-op for a stopped one). Stop what uses
        them first: :func:`helpers.pipeline.stop_all` does it in order.

        Returns:
            The status of every server.

        Raises:
            StackError: if a server does not stop within the start timeout.
        """
        with self._locked():
            LocalTrino(self.params).stop()
            LocalMetastore(self.params).stop()
            self.stop_mariadb()
            self.stop_postgres()
        return self.status()

    def status(self) -> list[ServerStatus]:
        """Report each server: running or stopped, pid, port, version, data dir, log file.

        Returns:
            One :class:`ServerStatus` per server: PostgreSQL, MariaDB, the metastore, and Trino
            while a query engine has it running.
        """
        servers = [
            self.postgres_server.status(),
            self.mariadb_server.status(),
            LocalMetastore(self.params).status(),
        ]
        trino = LocalTrino(self.params).status()
        if trino.running:  # (started by the query engine, for as long as it is open)
            servers.append(trino)
        return servers

    def apply_accounts(self) -> None:
        """(Re)apply the application role/user, passwords, grants, databases and schemas.

        Runs on every start; call it after changing a password override or the sources.

        Raises:
            StackError: if a server is not running or a statement fails.
        """
        with self._locked():
            self._bootstrap_postgres()
            self._bootstrap_mariadb()
