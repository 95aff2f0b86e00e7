"""Sources on Amazon RDS: instances described, CDC set through parameter groups, connections with
Secrets Manager credentials."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import psycopg
import pymysql

from helpers.engines import SourceEndpoint
from helpers.errors import AwsError, SourceError
from helpers.params import SourceParams, WorkbookParams
from helpers.sources import rds_cdc as aws_cdc
from helpers.sources.cdc import source_row_counts
from helpers.sources.cdc_report import PREFLIGHT_COLUMNS
from helpers.sources.sample.load import LoadReport, TableLoad, load_orders, load_tickit

__all__ = ["RdsSources"]


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
        described = aws_cdc.call_aws(
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

    def secret(self, engine: str) -> aws_cdc.DbSecret:
        return aws_cdc.read_db_secret(self._secrets, self._secret_ids()[engine])

    def endpoints(self) -> dict[str, SourceEndpoint]:
        """The RDS instances for Kafka/MSK Connect: host and user from each Secrets Manager secret,
        the password as a config-provider reference (``${secretsmanager:<id>:password}``) that
        the Connect workers resolve, so no password is ever in a connector configuration."""
        out = {}
        for engine, secret_id in self._secret_ids().items():
            secret = self.secret(engine)
            host, port = self.address(engine, secret)
            out[engine] = SourceEndpoint(
                host, port, secret.username, f"${{secretsmanager:{secret_id}:password}}"
            )
        return out

    def _secret_ids(self) -> dict[str, str]:
        return {
            "postgres": self.aws.secrets.postgres,
            "mysql": self.aws.secrets.mysql,
            "sqlserver": self.aws.secrets.sqlserver,
        }

    def address(self, engine: str, secret: aws_cdc.DbSecret) -> tuple[str, int]:
        if secret.host and secret.port:
            return secret.host, secret.port
        endpoint = self._endpoint(engine)
        return secret.host or endpoint.host, secret.port or endpoint.port

    def connect_postgres(self, database: str, *, autocommit: bool = False) -> Any:
        """Open a TLS connection to an RDS for PostgreSQL database (credentials from the secret).

        Raises:
            SourceError: if the database is not reachable or refuses the login.
        """

        secret = self.secret("postgres")
        host, port = self.address("postgres", secret)
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

        secret = self.secret("mysql")
        host, port = self.address("mysql", secret)
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

        secret = self.secret("sqlserver")
        host, port = self.address("sqlserver", secret)
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
                    aws_cdc.check_identifier(table)
                    schema = source.schema_name or "dbo"
                    aws_cdc.check_identifier(schema)
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
