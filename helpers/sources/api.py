"""The source systems of one environment, behind one small interface for the notebooks.

``open_sources(params)`` returns :class:`LocalSources` (PostgreSQL and MariaDB on 127.0.0.1,
started by :class:`helpers.sources.local.stack.LocalStack`) or :class:`RdsSources` (Amazon RDS instances named
in ``params.aws.rds``, credentials from AWS Secrets Manager). Both offer the same four steps of
``notebooks/01_enable_cdc.ipynb``, each returning a DataFrame for display:

* :meth:`start` - servers (local: started if needed) or instances (AWS: described) and their state;
* :meth:`load_sample_data` - TICKIT and the orders outbox, idempotent
  (see :mod:`helpers.sources.sample.load`);
* :meth:`enable_cdc` - set the CDC prerequisites and return a preflight table with one row per
  check (``passed``, ``actual``, ``expected`` and the ``fix`` of each failure);
* :meth:`row_counts` - exact row counts of every configured source table.

Example:
    >>> sources = open_sources(load_params("local"))   # doctest: +SKIP
    >>> sources.start()                                # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from helpers.errors import AwsError, CdcSetupError, SourceError
from helpers.params import SourceParams, WorkbookParams
from helpers.sources import rds_cdc as aws_cdc
from helpers.sources.cdc import enable_cdc_local, preflight_frame, source_row_counts
from helpers.sources.local.stack import LocalStack
from helpers.sources.sample.load import LoadReport, TableLoad, load_orders, load_tickit

__all__ = ["Sources", "LocalSources", "RdsSources", "open_sources", "PREFLIGHT_COLUMNS", "check_preflight"]

PREFLIGHT_COLUMNS = ["source", "engine", "database", "check", "passed", "actual", "expected", "fix"]
"""Columns of the table :meth:`Sources.enable_cdc` returns."""


class Sources(Protocol):
    """What notebook 01 needs from the source systems of an environment."""

    params: WorkbookParams

    def start(self) -> pd.DataFrame:
        """Make the source servers available; one row per server or instance."""

    def load_sample_data(self, reload: bool | None = None) -> pd.DataFrame:
        """Create and load TICKIT and the orders; one row per table."""

    def enable_cdc(self) -> pd.DataFrame:
        """Set the CDC prerequisites; one row per check (columns :data:`PREFLIGHT_COLUMNS`)."""

    def row_counts(self) -> pd.DataFrame:
        """Exact row counts: ``system, engine, database, table, rows``."""

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> Any:
        """A connection to a PostgreSQL source database as the workbook's user."""

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> Any:
        """A connection to a MySQL / MariaDB source database as the workbook's user."""


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
    """PostgreSQL 15 and MariaDB 10.11 on 127.0.0.1 (:class:`helpers.sources.local.stack.LocalStack`).

    Args:
        params: workbook parameters with ``environment == "local"``.
    """

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.stack = LocalStack(params)

    def __repr__(self) -> str:
        return f"LocalSources({self.stack!r})"

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> Any:
        """:meth:`helpers.sources.local.stack.LocalStack.connect_postgres`."""
        return self.stack.connect_postgres(database, autocommit=autocommit)

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> Any:
        """:meth:`helpers.sources.local.stack.LocalStack.connect_mariadb`."""
        return self.stack.connect_mariadb(database, autocommit=autocommit)

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
        """Publications, replica identity, binlog settings and grants; then the preflight table.

        Returns:
            Columns :data:`PREFLIGHT_COLUMNS`.

        Raises:
            CdcSetupError: if a change cannot be applied.
        """
        return preflight_frame(enable_cdc_local(self.stack, self.params))

    def row_counts(self) -> pd.DataFrame:
        """``count(*)`` of every configured table; raises :class:`SourceError` for a missing one."""
        return source_row_counts(self.stack, self.params)


# --------------------------------------------------------------------------------------------
# AWS


@dataclass(frozen=True)
class _Endpoint:
    host: str
    port: int
    engine: str
    status: str


class RdsSources:
    """Amazon RDS instances for PostgreSQL (ems, crm/orders), MySQL (ecomm) and SQL Server (crm).

    Clients come from ``boto3_session`` (default: ``boto3.Session(region_name=params.aws.region)``)
    so that the caller picks credentials, and tests pass moto- or Stubber-backed sessions.
    Database passwords are read from AWS Secrets Manager (``params.aws.secrets``), never from
    params files; connections use TLS.

    Args:
        params: workbook parameters with ``environment == "aws"``.
        boto3_session: a ``boto3.Session``-like object with ``client(name)``.
        reboot: reboot an instance when its new parameter group needs it (static parameters).

    Raises:
        AwsError: if the parameters have no ``aws`` section.
    """

    def __init__(self, params: WorkbookParams, boto3_session: Any = None, reboot: bool = False) -> None:
        if params.aws is None:
            raise AwsError("Failed to open the RDS sources: the parameters have no 'aws' section (env='aws')")
        self.params = params
        self.aws = params.aws
        self.reboot = reboot
        if boto3_session is None:
            import boto3

            boto3_session = boto3.Session(region_name=self.aws.region)
        self._session = boto3_session
        self._rds = boto3_session.client("rds")
        self._secrets = boto3_session.client("secretsmanager")

    def __repr__(self) -> str:
        return f"RdsSources(region={self.aws.region!r})"

    def _instances(self) -> dict[str, str]:
        rds = self.aws.rds
        return {
            "postgres": rds.postgres.instance_id,
            "mysql": rds.mysql.instance_id,
            "sqlserver": rds.sqlserver.instance_id,
        }

    def _engines(self) -> set[str]:
        engines: set[str] = set()
        for source in self.params.sources.values():
            engines.add("mysql" if source.engine in ("mysql", "mariadb") else source.engine)
        return engines

    def _endpoint(self, engine: str) -> _Endpoint:
        instance_id = self._instances()[engine]
        described = aws_cdc._call(  # noqa: SLF001 - the module's shared error wrapper
            f"describe RDS instance {instance_id!r}",
            self._rds.describe_db_instances,
            DBInstanceIdentifier=instance_id,
        )
        instances = described.get("DBInstances", [])
        if not instances:
            raise AwsError(f"Failed to describe RDS instance {instance_id!r}: not found")
        inst = instances[0]
        address = inst.get("Endpoint", {})
        return _Endpoint(
            host=str(address.get("Address", "")),
            port=int(address.get("Port", 0) or 0),
            engine=str(inst.get("Engine", "")),
            status=str(inst.get("DBInstanceStatus", "unknown")),
        )

    def start(self) -> pd.DataFrame:
        """Describe the instances the configured sources use (RDS instances are not started here).

        Returns:
            ``server, instance_id, engine, state, host, port``.

        Raises:
            AwsError: if an instance is unknown or not ``available``.
        """
        rows = []
        for engine in sorted(self._engines()):
            endpoint = self._endpoint(engine)
            instance_id = self._instances()[engine]
            if endpoint.status != "available":
                raise AwsError(
                    f"Failed to use RDS instance {instance_id!r}: its state is {endpoint.status!r}; "
                    "wait until it is 'available' (RDS console or `aws rds wait db-instance-available`)"
                )
            rows.append(
                {
                    "server": engine,
                    "instance_id": instance_id,
                    "engine": endpoint.engine,
                    "state": endpoint.status,
                    "host": endpoint.host,
                    "port": endpoint.port,
                }
            )
        return pd.DataFrame(rows)

    def _secret(self, engine: str) -> aws_cdc.DbSecret:
        secret_id = {
            "postgres": self.aws.secrets.postgres,
            "mysql": self.aws.secrets.mysql,
            "sqlserver": self.aws.secrets.sqlserver,
        }[engine]
        return aws_cdc.read_db_secret(self._secrets, secret_id)

    def _address(self, engine: str, secret: aws_cdc.DbSecret) -> tuple[str, int]:
        if secret.host and secret.port:
            return secret.host, secret.port
        endpoint = self._endpoint(engine)
        return secret.host or endpoint.host, secret.port or endpoint.port

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> Any:
        """Open a TLS connection to an RDS for PostgreSQL database (credentials from the secret).

        Raises:
            SourceError: if the database is not reachable or refuses the login.
        """
        import psycopg

        secret = self._secret("postgres")
        host, port = self._address("postgres", secret)
        try:
            return psycopg.connect(
                host=host,
                port=port,
                dbname=database,
                user=secret.username,
                password=secret.password,
                sslmode="require",
                connect_timeout=10,
                autocommit=autocommit,
            )
        except psycopg.Error as exc:
            raise SourceError(
                f"Failed to connect to PostgreSQL database {database!r} on {host}:{port} as "
                f"{secret.username}: {str(exc).strip()}"
            ) from None

    def connect_mariadb(self, database: str | None, *, autocommit: bool = False) -> Any:
        """Open a TLS connection to an RDS for MySQL database (``LOAD DATA LOCAL`` enabled).

        Raises:
            SourceError: if the database is not reachable or refuses the login.
        """
        import pymysql

        secret = self._secret("mysql")
        host, port = self._address("mysql", secret)
        try:
            return pymysql.connect(
                host=host,
                port=port,
                user=secret.username,
                password=secret.password,
                database=database,
                charset="utf8mb4",
                local_infile=True,
                connect_timeout=10,
                autocommit=autocommit,
                ssl={"ssl": {}},
            )
        except pymysql.MySQLError as exc:
            raise SourceError(
                f"Failed to connect to MySQL database {database!r} on {host}:{port} "
                f"as {secret.username}: {exc}"
            ) from None

    def connect_sqlserver(self, database: str) -> Any:
        """Open a connection to an RDS for SQL Server database with ``pymssql`` (TLS by the server).

        Raises:
            SourceError: if the database is not reachable or refuses the login.
        """
        import pymssql

        secret = self._secret("sqlserver")
        host, port = self._address("sqlserver", secret)
        try:
            return pymssql.connect(
                server=host,
                port=str(port),
                user=secret.username,
                password=secret.password,
                database=database,
                login_timeout=10,
            )
        except pymssql.Error as exc:
            raise SourceError(
                f"Failed to connect to SQL Server database {database!r} on {host}:{port} as "
                f"{secret.username}: {exc}"
            ) from None

    def _without_sqlserver(self) -> tuple[WorkbookParams, dict[str, SourceParams]]:
        kept = {n: s for n, s in self.params.sources.items() if s.engine != "sqlserver"}
        skipped = {n: s for n, s in self.params.sources.items() if s.engine == "sqlserver"}
        return self.params.model_copy(update={"sources": kept}), skipped

    def load_sample_data(self, reload: bool | None = None) -> pd.DataFrame:
        """Load TICKIT and the orders into the PostgreSQL and MySQL instances.

        SQL Server tables are listed with ``loaded=False`` and the reason: this package does not
        bulk-load SQL Server (load ``crm.users`` with ``bcp`` from the generator's CSV).

        Returns:
            ``source, table, rows, loaded, reason, seconds``.

        Raises:
            SourceError: if a load fails.
        """
        params, skipped = self._without_sqlserver()
        tickit = load_tickit(self, params, reload=reload)
        orders = load_orders(self, params, reload=reload) if "orders" in params.sources else LoadReport()
        extra = LoadReport(
            [
                TableLoad(name, table, 0, False, "not loaded: SQL Server bulk loading is done with bcp", 0.0)
                for name, source in skipped.items()
                for table in source.tables
            ]
        )
        return pd.concat([tickit.to_frame(), orders.to_frame(), extra.to_frame()], ignore_index=True)

    def enable_cdc(self) -> pd.DataFrame:
        """Parameter groups for PostgreSQL and MySQL, binlog retention, and SQL Server CDC.

        Returns:
            Columns :data:`PREFLIGHT_COLUMNS`; a static parameter waiting for a reboot fails with
            the fix "reboot the instance".

        Raises:
            AwsError: if an API call or a statement fails.
        """
        rows: list[dict[str, Any]] = []
        engines = self._engines()
        checks: list[tuple[str, str, aws_cdc.ParameterCheck]] = []
        if "postgres" in engines:
            checks += [
                ("postgres", self.aws.rds.postgres.instance_id, c)
                for c in aws_cdc.enable_rds_postgres_cdc(self._rds, self.params, reboot=self.reboot)
            ]
        if "mysql" in engines:
            checks += [
                ("mysql", self.aws.rds.mysql.instance_id, c)
                for c in aws_cdc.enable_rds_mysql_cdc(self._rds, self.params, reboot=self.reboot)
            ]
            hours = self.aws.rds.mysql.binlog_retention_hours
            conn = self.connect_mariadb(None)
            try:
                aws_cdc.execute_statements(conn, [aws_cdc.mysql_binlog_retention_statement(hours)])
            finally:
                conn.close()
            rows.append(
                {
                    "source": "mysql",
                    "engine": "mysql",
                    "database": self.aws.rds.mysql.instance_id,
                    "check": "binlog retention hours",
                    "passed": True,
                    "actual": str(hours),
                    "expected": str(hours),
                    "fix": None,
                }
            )
        for engine, instance, c in checks:
            rows.append(
                {
                    "source": engine,
                    "engine": engine,
                    "database": instance,
                    "check": f"{c.parameter_group}: {c.name}",
                    "passed": c.passed,
                    "actual": c.actual,
                    "expected": c.expected,
                    "fix": c.fix,
                }
            )
        for name, source in self.params.sources.items():
            if source.engine != "sqlserver":
                continue
            statements = aws_cdc.sqlserver_cdc_statements(
                source.database, source.schema_name or "dbo", list(source.tables)
            )
            conn = self.connect_sqlserver(source.database)
            try:
                aws_cdc.execute_statements(conn, statements)
            finally:
                conn.close()
            for table in source.tables:
                rows.append(
                    {
                        "source": name,
                        "engine": "sqlserver",
                        "database": source.database,
                        "check": f"sys.sp_cdc_enable_table {table}",
                        "passed": True,
                        "actual": "enabled",
                        "expected": "enabled",
                        "fix": None,
                    }
                )
        return pd.DataFrame(rows, columns=PREFLIGHT_COLUMNS)

    def row_counts(self) -> pd.DataFrame:
        """``count(*)`` of every configured PostgreSQL, MySQL and SQL Server table."""
        params, skipped = self._without_sqlserver()
        frame = source_row_counts(self, params)  # type: ignore[arg-type]
        extra = []
        for name, source in skipped.items():
            conn = self.connect_sqlserver(source.database)
            try:
                cursor = conn.cursor()
                for table in source.tables:
                    aws_cdc._check_identifier(table)  # noqa: SLF001
                    schema = source.schema_name or "dbo"
                    aws_cdc._check_identifier(schema)  # noqa: SLF001
                    cursor.execute(f"SELECT COUNT_BIG(*) FROM [{schema}].[{table}]")  # noqa: S608
                    extra.append(
                        {
                            "system": name,
                            "engine": "sqlserver",
                            "database": source.database,
                            "table": table,
                            "rows": int(cursor.fetchone()[0]),
                        }
                    )
            finally:
                conn.close()
        if extra:
            frame = pd.concat([frame, pd.DataFrame(extra).astype({"rows": "Int64"})], ignore_index=True)
        return frame


def open_sources(params: WorkbookParams, *, boto3_session: Any = None, reboot_rds: bool = False) -> Sources:
    """The source systems of ``params.environment``.

    Args:
        params: workbook parameters.
        boto3_session: AWS only: the session to create clients from.
        reboot_rds: AWS only: reboot instances whose new parameter group needs it.

    Returns:
        :class:`LocalSources` or :class:`RdsSources`.
    """
    if params.environment == "aws":
        return RdsSources(params, boto3_session=boto3_session, reboot=reboot_rds)
    return LocalSources(params)
