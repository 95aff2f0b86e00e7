"""helpers.sources.api on AWS: RDS instances, parameter groups and secrets against moto's AWS API stubs;
the database connections are stubbed with a recording DB-API connection (no RDS here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pandas as pd
import pytest
from moto import mock_aws
from support.aws import aws_overrides

from helpers.errors import AwsError, CdcSetupError
from helpers.params import load_params
from helpers.sources.api import LocalSources, check_preflight, open_sources
from helpers.sources.cdc_report import PREFLIGHT_COLUMNS
from helpers.sources.rds import RdsSources

AWS_OVERRIDES = aws_overrides()


class RecordingConnection:
    """A DB-API connection that records statements (stands in for RDS MySQL / SQL Server)."""

    def __init__(self, log: list[tuple[str, tuple[Any, ...]]], fail_on: str | None = None) -> None:
        self.log = log
        self.fail_on = fail_on
        self.committed = 0
        self.closed = False

    def cursor(self) -> RecordingConnection:
        return self

    def execute(self, sql: str, parameters: tuple[Any, ...] = ()) -> None:
        if self.fail_on and self.fail_on in sql:
            raise RuntimeError(
                "Msg 22830: Could not update the metadata that indicates database crm is enabled"
            )
        self.log.append((sql, tuple(parameters)))

    def fetchone(self) -> tuple[int]:
        return (49990,)

    def commit(self) -> None:
        self.committed += 1

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    with mock_aws():
        sess = boto3.Session(region_name="us-east-1")
        rds = sess.client("rds")
        for ident, engine in (("ems-pg", "postgres"), ("ecomm-my", "mysql"), ("crm-ss", "sqlserver-se")):
            rds.create_db_instance(
                DBInstanceIdentifier=ident,
                DBInstanceClass="db.t3.micro",
                Engine=engine,
                MasterUsername="admin",
                MasterUserPassword="not-a-real-password",
                AllocatedStorage=20,
            )
        secrets = sess.client("secretsmanager")
        for name in ("tickit/ems/postgres", "tickit/ecomm/mysql", "tickit/crm/sqlserver"):
            secrets.create_secret(
                Name=name, SecretString=json.dumps({"username": "cdc", "password": "s3cr3t-x"})
            )
        yield sess


def test_open_sources_picks_the_environment(session: Any) -> None:
    assert isinstance(open_sources(load_params("ci")), LocalSources)
    assert isinstance(open_sources(load_params("aws", AWS_OVERRIDES), boto3_session=session), RdsSources)


def test_start_describes_every_instance(session: Any) -> None:
    """Expected: one row per engine the sources use, with the instance endpoint; no password."""
    frame = RdsSources(load_params("aws", AWS_OVERRIDES), boto3_session=session).start()
    assert list(frame["server"]) == ["mysql", "postgres", "sqlserver"]
    assert list(frame["instance_id"]) == ["ecomm-my", "ems-pg", "crm-ss"]
    assert (frame["state"] == "available").all() and (frame["port"] > 0).all()
    assert "s3cr3t" not in frame.to_string()


def test_start_fails_for_a_missing_instance(session: Any) -> None:
    params = load_params("aws", {**AWS_OVERRIDES, "aws.rds.mysql.instance_id": "no-such-db"})
    with pytest.raises(AwsError, match="no-such-db"):
        RdsSources(params, boto3_session=session).start()


def test_enable_cdc_sets_groups_retention_and_sqlserver(
    session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expected: PostgreSQL and MySQL parameter groups created and checked, binlog retention set
    with bound parameters, SQL Server CDC enabled for the database and crm.users; all rows pass."""
    params = load_params("aws", AWS_OVERRIDES)
    sources = RdsSources(params, boto3_session=session)
    log: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(sources, "connect_mariadb", lambda database, **_: RecordingConnection(log))
    monkeypatch.setattr(sources, "connect_sqlserver", lambda database: RecordingConnection(log))
    preflight = sources.enable_cdc()
    assert list(preflight.columns) == PREFLIGHT_COLUMNS
    checks = set(preflight["check"])
    assert "tickit-postgres15-cdc: rds.logical_replication" in checks
    assert {"tickit-mysql80-cdc: binlog_format", "tickit-mysql80-cdc: binlog_row_image"} <= checks
    assert "sys.sp_cdc_enable_table users" in checks
    assert preflight["passed"].all()
    check_preflight(preflight)
    assert log[0] == ("CALL mysql.rds_set_configuration(%s, %s)", ("binlog retention hours", 24))
    assert ("EXEC msdb.dbo.rds_cdc_enable_db %s", ("crm",)) in log
    assert any(s.startswith("EXEC sys.sp_cdc_enable_table") and p[:2] == ("dbo", "users") for s, p in log)
    groups = session.client("rds").describe_db_instances(DBInstanceIdentifier="ems-pg")["DBInstances"][0]
    assert groups["DBParameterGroups"][0]["DBParameterGroupName"] == "tickit-postgres15-cdc"


def test_enable_cdc_reports_the_sqlserver_error(session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sources = RdsSources(load_params("aws", AWS_OVERRIDES), boto3_session=session)
    log: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(sources, "connect_mariadb", lambda database, **_: RecordingConnection(log))
    monkeypatch.setattr(
        sources, "connect_sqlserver", lambda database: RecordingConnection(log, fail_on="rds_cdc_enable_db")
    )
    with pytest.raises(AwsError, match="rds_cdc_enable_db.*Msg 22830"):
        sources.enable_cdc()


def test_secret_host_and_port_win(session: Any) -> None:
    """A secret carrying host/port is used as is; otherwise the instance endpoint fills in."""
    sources = RdsSources(load_params("aws", AWS_OVERRIDES), boto3_session=session)
    secret = sources.secret("postgres")
    host, port = sources.address("postgres", secret)
    assert port > 0 and "ems-pg" in host
    session.client("secretsmanager").put_secret_value(
        SecretId="tickit/ems/postgres",
        SecretString=json.dumps({"username": "cdc", "password": "x", "host": "db.example", "port": 6543}),
    )
    assert sources.address("postgres", sources.secret("postgres")) == ("db.example", 6543)


def test_check_preflight_lists_each_failure_with_its_fix() -> None:
    frame = pd.DataFrame(
        [
            {
                "source": "ems",
                "engine": "postgres",
                "database": "ems",
                "check": "wal_level",
                "passed": False,
                "actual": "replica",
                "expected": "logical",
                "fix": "ALTER SYSTEM SET wal_level = logical; restart",
            },
            {
                "source": "ems",
                "engine": "postgres",
                "database": "ems",
                "check": "publication",
                "passed": True,
                "actual": "x",
                "expected": "x",
                "fix": None,
            },
        ]
    )
    with pytest.raises(
        CdcSetupError, match="ems: wal_level is 'replica', expected 'logical'; fix: ALTER SYSTEM"
    ):
        check_preflight(frame)
    check_preflight(frame[frame["passed"]])
