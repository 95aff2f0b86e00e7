"""The source systems of one environment, behind one small interface for the notebooks.

:func:`open_sources` returns :class:`LocalSources` or :class:`RdsSources`. Both offer the four
steps of notebook 01 (``start``, ``load_sample_data``, ``enable_cdc``, ``row_counts``), each
returning a DataFrame; see ``docs/architecture.md``, "Sources".

Example:
    >>> sources = open_sources(load_params("local"))   # doctest: +SKIP
    >>> sources.start()                                # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd

from helpers.engines import SourceEndpoint, engine_kind
from helpers.environments import implementations
from helpers.errors import CdcSetupError
from helpers.local.kafka import secret_reference
from helpers.local.stack import APP_USER, LOOPBACK, LocalStack
from helpers.params import WorkbookParams
from helpers.sources.cdc import enable_cdc_local, source_row_counts
from helpers.sources.cdc_report import preflight_frame
from helpers.sources.rds import RdsSources
from helpers.sources.sample.load import load_orders, load_tickit
from helpers.sources.signals import create_signal_table

__all__ = ["Sources", "LocalSources", "open_sources", "check_preflight"]


class Sources(Protocol):
    """What notebook 01 needs from the source systems of an environment."""

    params: WorkbookParams

    def start(self) -> pd.DataFrame:
        """Make the source servers available; one row per server or instance."""

    def load_sample_data(self, reload: bool | None = None) -> pd.DataFrame:
        """Create and load TICKIT and the orders; one row per table."""

    def enable_cdc(self) -> pd.DataFrame:
        """Set the CDC prerequisites; one row per check.

        Columns :data:`helpers.sources.cdc_report.PREFLIGHT_COLUMNS`.
        """

    def row_counts(self) -> pd.DataFrame:
        """Exact row counts: ``system, engine, database, table, rows``."""

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> Any:
        """A connection to a PostgreSQL source database as the workbook's user."""

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> Any:
        """A connection to a MySQL / MariaDB source database as the workbook's user."""

    def endpoints(self) -> dict[str, SourceEndpoint]:
        """Where and as whom the connectors log in, per engine kind (``postgres``, ``mysql``...):
        the password only as a reference their worker resolves, where the worker can."""


def check_preflight(preflight: pd.DataFrame) -> None:
    """Raise when a preflight row failed, listing each failure with its fix.

    Args:
        preflight: from :meth:`Sources.enable_cdc`.

    Raises:
        CdcSetupError: if any check did not pass.
    """
    failed = preflight[~preflight["passed"].astype(bool)]
    if not failed.empty:
        lines = [
            f"{r.source}: {r.check} is {r.actual!r}, expected {r.expected!r}; fix: {r.fix}"
            for r in failed.itertuples()
        ]
        raise CdcSetupError("Failed to verify the CDC prerequisites:\n  " + "\n  ".join(lines))


# --------------------------------------------------------------------------------------------
# local


class LocalSources:
    """PostgreSQL 15 and MariaDB 10.11 on 127.0.0.1 (:class:`helpers.local.stack.LocalStack`).

    Args:
        params: workbook parameters with ``environment == "local"``.
    """

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.stack = LocalStack(params)

    def __repr__(self) -> str:
        return f"LocalSources({self.stack!r})"

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> Any:
        """:meth:`helpers.local.stack.LocalStack.connect_postgres`."""
        return self.stack.connect_postgres(database, autocommit=autocommit)

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> Any:
        """:meth:`helpers.local.stack.LocalStack.connect_mariadb`."""
        return self.stack.connect_mariadb(database, autocommit=autocommit)

    def endpoints(self) -> dict[str, SourceEndpoint]:
        """The local servers as role ``workbook``. With ``capture.backend: kafka_connect`` the
        password is a ``${file:...}`` reference that the local Connect worker's config provider
        resolves (:func:`helpers.local.kafka.secret_reference`), so no password is in a connector
        configuration the REST API echoes back; the embedded workers get the password itself
        (their configuration file is mode 0600)."""
        ports = {"postgres": self.params.local.postgres.port, "mysql": self.params.local.mariadb.port}
        if self.params.capture.backend == "kafka_connect":
            passwords = {kind: secret_reference(self.params, kind) for kind in ports}
        else:
            creds = self.stack.credentials
            passwords = {
                "postgres": creds.postgres_password.get_secret_value(),
                "mysql": creds.mariadb_password.get_secret_value(),
            }
        return {
            kind: SourceEndpoint(LOOPBACK, port, APP_USER, passwords[kind]) for kind, port in ports.items()
        }

    def start(self) -> pd.DataFrame:
        """Start both servers (no-op when running; a killed server is restarted).

        Returns:
            ``server, state, pid, port, version, data_dir, log_file``.

        Raises:
            StackError: if a server cannot be started (the message says why and where the log is).
        """
        statuses = self.stack.start()
        return pd.DataFrame(
            [
                {
                    "server": s.server,
                    "state": s.state,
                    "pid": s.pid,
                    "port": s.port,
                    "version": s.version,
                    "data_dir": s.data_dir,
                    "log_file": s.log_file,
                }
                for s in statuses
            ]
        )

    def load_sample_data(self, reload: bool | None = None) -> pd.DataFrame:
        """Load TICKIT and the orders; tables loaded before are kept unless ``reload``.

        Args:
            reload: reload every table; ``None`` takes ``params.tickit.reload``.

        Returns:
            ``source, table, rows, loaded, reason, seconds``.

        Raises:
            SourceError: if a load fails (that table is rolled back).
        """
        tickit = load_tickit(self.stack, self.params, reload=reload)
        orders = load_orders(self.stack, self.params, reload=reload)
        return pd.concat([tickit.to_frame(), orders.to_frame()], ignore_index=True)

    def enable_cdc(self) -> pd.DataFrame:
        """Publications, replica identity, binlog settings, grants and the signal tables; then the
        preflight table.

        Returns:
            Columns :data:`helpers.sources.cdc_report.PREFLIGHT_COLUMNS`.

        Raises:
            CdcSetupError: if a change cannot be applied.
        """
        frame = preflight_frame(enable_cdc_local(self.stack, self.params))
        # the re-snapshot's signal table per source, in the namespace its connector captures
        for source in self.params.sources.values():
            kind = engine_kind(source.engine)
            if kind == "postgres":
                with self.connect_postgres(source.database, autocommit=True) as conn:
                    create_signal_table(conn, source.engine, source.namespace)
            elif kind == "mysql":
                conn = self.connect_mariadb(source.database, autocommit=True)
                try:
                    create_signal_table(conn, source.engine, source.namespace)
                finally:
                    conn.close()
        return frame

    def row_counts(self) -> pd.DataFrame:
        """``count(*)`` of every configured table; raises :class:`SourceError` for a missing one."""
        return source_row_counts(self.stack, self.params)


# --------------------------------------------------------------------------------------------
# AWS


def open_sources(params: WorkbookParams, *, boto3_session: Any = None, reboot_rds: bool = False) -> Sources:
    """The source systems of ``params.environment``.

    Args:
        params: workbook parameters.
        boto3_session: AWS only: the session to create clients from.
        reboot_rds: AWS only: reboot instances whose new parameter group needs it.

    Returns:
        :class:`LocalSources` or :class:`RdsSources`.
    """
    if implementations(params).sources == "rds":
        return RdsSources(params, boto3_session=boto3_session, reboot=reboot_rds)
    return LocalSources(params)
