"""Enabling change data capture on Amazon RDS sources.

DB parameter groups for PostgreSQL (``rds.logical_replication``) and MySQL (``binlog_format``,
``binlog_row_image``; binlog retention by stored procedure), and ``rds_cdc_enable_db`` /
``sp_cdc_enable_table`` for SQL Server over any DB-API connection. Every function takes a boto3
client, so callers choose session, region and credentials. See ``docs/architecture.md``, "Sources".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helpers.errors import AwsError

if TYPE_CHECKING:
    from helpers.params import WorkbookParams

__all__ = [
    "ParameterCheck",
    "SqlStatement",
    "POSTGRES_CDC_PARAMETERS",
    "MYSQL_CDC_PARAMETERS",
    "ensure_parameter_group",
    "attach_parameter_group",
    "check_parameter_group",
    "enable_rds_postgres_cdc",
    "enable_rds_mysql_cdc",
    "mysql_binlog_retention_statement",
    "sqlserver_cdc_statements",
    "execute_statements",
    "read_db_secret",
    "DbSecret",
    "call_aws",
    "check_identifier",
]

POSTGRES_CDC_PARAMETERS: Mapping[str, str] = {"rds.logical_replication": "1"}
"""What logical decoding needs on RDS for PostgreSQL (sets ``wal_level=logical``)."""

MYSQL_CDC_PARAMETERS: Mapping[str, str] = {"binlog_format": "ROW", "binlog_row_image": "FULL"}
"""What the Debezium MySQL connector needs on RDS for MySQL."""

# Static parameters only take effect after a reboot; RDS refuses ApplyMethod=immediate for them.
_STATIC = frozenset({"rds.logical_replication", "max_replication_slots", "max_wal_senders"})


@dataclass(frozen=True)
class ParameterCheck:
    """One parameter of a parameter group compared with what CDC needs."""

    parameter_group: str
    name: str
    expected: str
    actual: str | None
    passed: bool
    fix: str | None


@dataclass(frozen=True)
class SqlStatement:
    """A statement with its bound parameters (``%s`` placeholders, pyformat for pymssql)."""

    sql: str
    parameters: tuple[Any, ...] = ()


@dataclass(frozen=True)
class DbSecret:
    """Database credentials read from AWS Secrets Manager; the password never shows in repr."""

    username: str
    password: str
    host: str | None = None
    port: int | None = None

    def __repr__(self) -> str:
        return f"DbSecret(username={self.username!r}, password='***', host={self.host!r}, port={self.port!r})"

    __str__ = __repr__


def call_aws(what: str, fn: Any, **kwargs: Any) -> Any:
    """Call the boto3 method ``fn(**kwargs)``; a botocore error becomes :class:`AwsError` naming ``what``."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(**kwargs)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise AwsError(
            f"Failed to {what}: {err.get('Code', 'ClientError')}: {err.get('Message', exc)}"
        ) from exc
    except BotoCoreError as exc:
        raise AwsError(f"Failed to {what}: {exc}") from exc


def ensure_parameter_group(
    rds: Any,
    name: str,
    family: str,
    parameters: Mapping[str, str],
    description: str = "CDC settings for the lakehouse workbook",
) -> list[str]:
    """Create the DB parameter group if missing, then set ``parameters`` on it (create-or-update).

    Args:
        rds: a boto3 RDS client.
        name: the parameter group's name.
        family: its family, e.g. ``postgres15`` or ``mysql8.0``.
        parameters: name to value.
        description: used only when the group is created.

    Returns:
        The names of parameters that need a reboot of the instances using the group.

    Raises:
        AwsError: on an API error (message from RDS), or when an existing group of that name has
            another family.
    """
    from botocore.exceptions import ClientError

    try:
        found = rds.describe_db_parameter_groups(DBParameterGroupName=name)["DBParameterGroups"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "DBParameterGroupNotFound":
            raise AwsError(f"Failed to describe parameter group {name!r}: {exc}") from exc
        found = []
    if found:
        existing_family = found[0].get("DBParameterGroupFamily")
        if existing_family and existing_family != family:
            raise AwsError(
                f"Failed to use parameter group {name!r}: it has family {existing_family!r}, "
                f"not {family!r}; choose another name"
            )
    else:
        call_aws(
            f"create parameter group {name!r}",
            rds.create_db_parameter_group,
            DBParameterGroupName=name,
            DBParameterGroupFamily=family,
            Description=description,
        )
    items = [
        {
            "ParameterName": key,
            "ParameterValue": value,
            "ApplyMethod": "pending-reboot" if key in _STATIC else "immediate",
        }
        for key, value in parameters.items()
    ]
    for start in range(0, len(items), 20):  # the API takes at most 20 parameters per call
        call_aws(
            f"modify parameter group {name!r}",
            rds.modify_db_parameter_group,
            DBParameterGroupName=name,
            Parameters=items[start : start + 20],
        )
    return [key for key in parameters if key in _STATIC]


def check_parameter_group(rds: Any, name: str, expected: Mapping[str, str]) -> list[ParameterCheck]:
    """Compare a parameter group's values with ``expected``.

    Returns:
        One check per expected parameter, with the fix for each failure.

    Raises:
        AwsError: when the group cannot be described.
    """
    actual: dict[str, str | None] = {}
    paginator = rds.get_paginator("describe_db_parameters")
    try:
        for page in paginator.paginate(DBParameterGroupName=name):
            for p in page.get("Parameters", []):
                actual[p["ParameterName"]] = p.get("ParameterValue")
    except Exception as exc:  # botocore raises ClientError subclasses from the paginator
        raise AwsError(f"Failed to describe parameters of group {name!r}: {exc}") from exc
    checks = []
    for key, want in expected.items():
        got = actual.get(key)
        ok = got is not None and got.upper() == want.upper()
        fix = (
            None
            if ok
            else (
                f"set {key}={want} in parameter group {name!r} (ensure_parameter_group)"
                + (" and reboot the instance" if key in _STATIC else "")
            )
        )
        checks.append(ParameterCheck(name, key, want, got, ok, fix))
    return checks


def attach_parameter_group(rds: Any, instance_id: str, group: str, reboot: bool = False) -> str:
    """Make an RDS instance use ``group``; optionally reboot it so static parameters apply.

    Returns:
        The group's apply status on the instance (``in-sync``, ``applying``, ``pending-reboot``).

    Raises:
        AwsError: on an API error, e.g. an unknown instance.
    """
    call_aws(
        f"attach parameter group {group!r} to instance {instance_id!r}",
        rds.modify_db_instance,
        DBInstanceIdentifier=instance_id,
        DBParameterGroupName=group,
        ApplyImmediately=True,
    )
    if reboot:
        call_aws(f"reboot instance {instance_id!r}", rds.reboot_db_instance, DBInstanceIdentifier=instance_id)
    described = call_aws(
        f"describe instance {instance_id!r}", rds.describe_db_instances, DBInstanceIdentifier=instance_id
    )
    for inst in described.get("DBInstances", []):
        for pg in inst.get("DBParameterGroups", []):
            if pg.get("DBParameterGroupName") == group:
                return str(pg.get("ParameterApplyStatus", "unknown"))
    return "unknown"


def enable_rds_postgres_cdc(rds: Any, params: WorkbookParams, reboot: bool = False) -> list[ParameterCheck]:
    """Create/update the PostgreSQL CDC parameter group, attach it, and check it.

    Raises:
        AwsError: when AWS settings are missing or an API call fails.
    """
    aws = _aws(params)
    pg = aws.rds.postgres
    ensure_parameter_group(rds, pg.parameter_group, pg.parameter_group_family, POSTGRES_CDC_PARAMETERS)
    attach_parameter_group(rds, pg.instance_id, pg.parameter_group, reboot=reboot)
    return check_parameter_group(rds, pg.parameter_group, POSTGRES_CDC_PARAMETERS)


def enable_rds_mysql_cdc(rds: Any, params: WorkbookParams, reboot: bool = False) -> list[ParameterCheck]:
    """Create/update the MySQL CDC parameter group, attach it, and check it.

    The binlog retention is set separately with :func:`mysql_binlog_retention_statement`.

    Raises:
        AwsError: when AWS settings are missing or an API call fails.
    """
    aws = _aws(params)
    my = aws.rds.mysql
    ensure_parameter_group(rds, my.parameter_group, my.parameter_group_family, MYSQL_CDC_PARAMETERS)
    attach_parameter_group(rds, my.instance_id, my.parameter_group, reboot=reboot)
    return check_parameter_group(rds, my.parameter_group, MYSQL_CDC_PARAMETERS)


def mysql_binlog_retention_statement(hours: int) -> SqlStatement:
    """The RDS call that keeps binlogs for ``hours`` (1-168) so a paused connector can resume.

    Raises:
        AwsError: when ``hours`` is outside 1..168 (RDS's limit).
    """
    if not isinstance(hours, int) or isinstance(hours, bool) or not 1 <= hours <= 168:
        raise AwsError(f"Failed to set binlog retention: hours must be an integer in 1..168, got {hours!r}")
    return SqlStatement("CALL mysql.rds_set_configuration(%s, %s)", ("binlog retention hours", hours))


def sqlserver_cdc_statements(
    database: str,
    schema: str,
    tables: Sequence[str],
    role_name: str | None = None,
    supports_net_changes: bool = False,
) -> list[SqlStatement]:
    """Statements that enable CDC on an RDS for SQL Server database and its tables.

    ``rds_cdc_enable_db`` runs in ``msdb``; ``sp_cdc_enable_table`` must run in the database
    itself (``USE`` cannot take a parameter, so the database name is bracket-quoted).

    Args:
        database: the database (e.g. ``crm``).
        schema: the tables' schema (e.g. ``dbo``).
        tables: table names.
        role_name: gating role for change data (``None``: no gating role).
        supports_net_changes: also create the net-changes function (needs a primary key).

    Returns:
        Statements in execution order.

    Raises:
        AwsError: for an empty table list or a name that is not a plain identifier.
    """
    if not tables:
        raise AwsError(f"Failed to build SQL Server CDC statements for {database!r}: no tables given")
    for ident in (database, schema, *tables):
        check_identifier(ident)
    statements = [
        SqlStatement("EXEC msdb.dbo.rds_cdc_enable_db %s", (database,)),
        SqlStatement(f"USE {_bracket(database)}"),
    ]
    for table in tables:
        statements.append(
            SqlStatement(
                "EXEC sys.sp_cdc_enable_table @source_schema = %s, @source_name = %s, "
                "@role_name = %s, @supports_net_changes = %s",
                (schema, table, role_name, 1 if supports_net_changes else 0),
            )
        )
    return statements


def execute_statements(connection: Any, statements: Iterable[SqlStatement]) -> int:
    """Run statements on a DB-API connection (``pymssql``/``pyodbc``/``PyMySQL``) and commit.

    Returns:
        The number of statements run.

    Raises:
        AwsError: naming the statement that failed, with the database's message.
    """
    count = 0
    cursor = connection.cursor()
    try:
        for stmt in statements:
            try:
                if stmt.parameters:
                    cursor.execute(stmt.sql, stmt.parameters)
                else:
                    cursor.execute(stmt.sql)
            except Exception as exc:
                raise AwsError(f"Failed to run {stmt.sql.split(' @')[0]!r}: {exc}") from exc
            count += 1
        connection.commit()
    finally:
        cursor.close()
    return count


def read_db_secret(secretsmanager: Any, secret_id: str) -> DbSecret:
    """Read ``{"username", "password", "host"?, "port"?}`` from AWS Secrets Manager.

    Raises:
        AwsError: when the secret is missing or lacks username/password.
    """
    value = call_aws(f"read secret {secret_id!r}", secretsmanager.get_secret_value, SecretId=secret_id)
    try:
        data = json.loads(value["SecretString"])
        return DbSecret(
            username=str(data["username"]),
            password=str(data["password"]),
            host=data.get("host"),
            port=int(data["port"]) if data.get("port") is not None else None,
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise AwsError(
            f"Failed to read secret {secret_id!r}: expected a JSON object with username and password"
        ) from exc


def _aws(params: WorkbookParams) -> Any:
    if params.aws is None:
        raise AwsError("Failed to enable CDC on RDS: the parameters have no 'aws' section (use env='aws')")
    return params.aws


def check_identifier(name: str) -> None:
    """Raise :class:`AwsError` unless ``name`` is a plain SQL Server identifier (safe in brackets)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
        raise AwsError(f"Failed to build SQL Server CDC statements: {name!r} is not a plain identifier")


def _bracket(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"
