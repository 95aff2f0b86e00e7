"""RDS parameter groups, SQL Server CDC statements and secrets, against moto's AWS API stubs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from support.aws import aws_overrides

from helpers.errors import AwsError
from helpers.params import load_params
from helpers.sources.rds_cdc import (
    MYSQL_CDC_PARAMETERS,
    POSTGRES_CDC_PARAMETERS,
    check_parameter_group,
    enable_rds_mysql_cdc,
    enable_rds_postgres_cdc,
    ensure_parameter_group,
    execute_statements,
    mysql_binlog_retention_statement,
    read_db_secret,
    sqlserver_cdc_statements,
)

AWS_OVERRIDES = aws_overrides()


@pytest.fixture
def rds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    with mock_aws():
        client = boto3.client("rds", region_name="us-east-1")
        for ident, engine in (("ems-pg", "postgres"), ("ecomm-my", "mysql")):
            client.create_db_instance(
                DBInstanceIdentifier=ident,
                DBInstanceClass="db.t3.micro",
                Engine=engine,
                MasterUsername="admin",
                MasterUserPassword="not-a-real-password",
                AllocatedStorage=20,
            )
        yield client


def _values(client: Any, group: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for page in client.get_paginator("describe_db_parameters").paginate(DBParameterGroupName=group):
        for p in page["Parameters"]:
            out[p["ParameterName"]] = p.get("ParameterValue")
    return out


def test_postgres_parameter_group_created_attached_and_checked(rds: Any) -> None:
    """Expected: group exists with rds.logical_replication=1 (pending reboot), instance uses it."""
    params = load_params("aws", AWS_OVERRIDES)
    checks = enable_rds_postgres_cdc(rds, params)
    group = params.aws.rds.postgres.parameter_group  # type: ignore[union-attr]
    assert [(c.name, c.actual, c.passed) for c in checks] == [("rds.logical_replication", "1", True)]
    assert _values(rds, group)["rds.logical_replication"] == "1"
    inst = rds.describe_db_instances(DBInstanceIdentifier="ems-pg")["DBInstances"][0]
    assert [g["DBParameterGroupName"] for g in inst["DBParameterGroups"]] == [group]


def test_mysql_parameter_group_is_idempotent(rds: Any) -> None:
    """Expected: running twice leaves one group with ROW/FULL, and no error."""
    params = load_params("aws", AWS_OVERRIDES)
    enable_rds_mysql_cdc(rds, params)
    checks = enable_rds_mysql_cdc(rds, params)
    assert all(c.passed for c in checks) and {c.name for c in checks} == set(MYSQL_CDC_PARAMETERS)
    groups = rds.describe_db_parameter_groups()["DBParameterGroups"]
    assert [g["DBParameterGroupName"] for g in groups].count("tickit-mysql80-cdc") == 1


def test_check_reports_fix_for_wrong_value(rds: Any) -> None:
    ensure_parameter_group(rds, "pg-wrong", "postgres15", {"rds.logical_replication": "0"})
    [check] = check_parameter_group(rds, "pg-wrong", POSTGRES_CDC_PARAMETERS)
    assert not check.passed and check.actual == "0"
    assert check.fix is not None and "rds.logical_replication=1" in check.fix and "reboot" in check.fix


def test_family_mismatch_is_an_error(rds: Any) -> None:
    ensure_parameter_group(rds, "shared-name", "postgres15", {})
    with pytest.raises(AwsError, match="family 'postgres15'"):
        ensure_parameter_group(rds, "shared-name", "mysql8.0", MYSQL_CDC_PARAMETERS)


def test_static_parameters_use_pending_reboot() -> None:
    """The request RDS receives: static parameters pending-reboot, dynamic ones immediate."""
    client = boto3.client("rds", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(client)
    stub.add_client_error("describe_db_parameter_groups", service_error_code="DBParameterGroupNotFound")
    stub.add_response(
        "create_db_parameter_group",
        {"DBParameterGroup": {"DBParameterGroupName": "g"}},
        {
            "DBParameterGroupName": "g",
            "DBParameterGroupFamily": "postgres15",
            "Description": "CDC settings for the lakehouse workbook",
        },
    )
    stub.add_response(
        "modify_db_parameter_group",
        {"DBParameterGroupName": "g"},
        {
            "DBParameterGroupName": "g",
            "Parameters": [
                {
                    "ParameterName": "rds.logical_replication",
                    "ParameterValue": "1",
                    "ApplyMethod": "pending-reboot",
                },
                {"ParameterName": "wal_sender_timeout", "ParameterValue": "0", "ApplyMethod": "immediate"},
            ],
        },
    )
    with stub:
        needs_reboot = ensure_parameter_group(
            client, "g", "postgres15", {"rds.logical_replication": "1", "wal_sender_timeout": "0"}
        )
    stub.assert_no_pending_responses()
    assert needs_reboot == ["rds.logical_replication"]


def test_unknown_instance_is_a_clear_error(rds: Any) -> None:
    params = load_params("aws", {**AWS_OVERRIDES, "aws.rds.postgres.instance_id": "nope"})
    with pytest.raises(AwsError, match="attach parameter group .* 'nope'"):
        enable_rds_postgres_cdc(rds, params)


def test_sqlserver_statements_bind_names() -> None:
    stmts = sqlserver_cdc_statements("crm", "dbo", ["users"])
    assert stmts[0].sql == "EXEC msdb.dbo.rds_cdc_enable_db %s" and stmts[0].parameters == ("crm",)
    assert stmts[1].sql == "USE [crm]"
    assert "sys.sp_cdc_enable_table" in stmts[2].sql
    assert stmts[2].parameters == ("dbo", "users", None, 0)
    assert all("users" not in s.sql for s in stmts)  # table names are bound, not pasted


@pytest.mark.parametrize("bad", ["users; DROP TABLE x", "a]b", "", "1abc"])
def test_sqlserver_statements_reject_non_identifiers(bad: str) -> None:
    with pytest.raises(AwsError, match="not a plain identifier"):
        sqlserver_cdc_statements("crm", "dbo", [bad])


def test_binlog_retention_statement() -> None:
    stmt = mysql_binlog_retention_statement(24)
    assert stmt.sql == "CALL mysql.rds_set_configuration(%s, %s)"
    assert stmt.parameters == ("binlog retention hours", 24)
    for bad in (0, 169, True, "24"):
        with pytest.raises(AwsError):
            mysql_binlog_retention_statement(bad)  # type: ignore[arg-type]


class _RecordingCursor:
    def __init__(self, fail_on: str | None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...] | None]] = []
        self.fail_on = fail_on

    def execute(self, sql: str, params: tuple[Any, ...] | None = None) -> None:
        if self.fail_on and self.fail_on in sql:
            raise RuntimeError("Cannot enable CDC: the SQL Server Agent is not running")
        self.calls.append((sql, params))

    def close(self) -> None:
        pass


class _Connection:
    def __init__(self, fail_on: str | None = None) -> None:
        self.cur = _RecordingCursor(fail_on)
        self.committed = False

    def cursor(self) -> _RecordingCursor:
        return self.cur

    def commit(self) -> None:
        self.committed = True


def test_execute_statements_passes_parameters_separately() -> None:
    conn = _Connection()
    n = execute_statements(conn, sqlserver_cdc_statements("crm", "dbo", ["users", "groups"]))
    assert n == 4 and conn.committed
    assert conn.cur.calls[0] == ("EXEC msdb.dbo.rds_cdc_enable_db %s", ("crm",))
    assert conn.cur.calls[1] == ("USE [crm]", None)


def test_execute_statements_names_failing_statement() -> None:
    conn = _Connection(fail_on="sp_cdc_enable_table")
    with pytest.raises(AwsError, match="sp_cdc_enable_table.*Agent is not running"):
        execute_statements(conn, sqlserver_cdc_statements("crm", "dbo", ["users"]))
    assert not conn.committed


def test_read_db_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    with mock_aws():
        sm = boto3.client("secretsmanager", region_name="us-east-1")
        sm.create_secret(
            Name="tickit/ems/postgres",
            SecretString=json.dumps({"username": "dbz", "password": "s3cr3t-value", "port": 5432}),
        )
        sm.create_secret(Name="broken", SecretString=json.dumps({"user": "x"}))
        secret = read_db_secret(sm, "tickit/ems/postgres")
        assert (secret.username, secret.password, secret.port) == ("dbz", "s3cr3t-value", 5432)
        assert "s3cr3t-value" not in repr(secret) and "s3cr3t-value" not in str(secret)
        with pytest.raises(AwsError, match="username and password"):
            read_db_secret(sm, "broken")
        with pytest.raises(AwsError, match="ResourceNotFoundException"):
            read_db_secret(sm, "missing")
