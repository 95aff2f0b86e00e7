"""Unit tests of the local stack's pure parts: config rendering, quoting, CLI argument handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.engines import quote_mariadb
from helpers.errors import CdcSetupError
from helpers.local.db_config import (
    ConnInfo,
    StackPaths,
    render_mariadb_cnf,
    render_pg_hba,
    render_pg_ident,
    render_postgres_conf,
)
from helpers.local.stack import LocalStack
from helpers.naming import publication_name
from helpers.params import WorkbookParams, load_params
from helpers.sources.cdc_report import Check, PreflightReport, preflight_frame, raise_for_failures


@pytest.fixture()
def params(tmp_path: Path) -> WorkbookParams:
    return load_params(
        "ci",
        overrides={
            "state_dir": str(tmp_path / "st"),
            "local.postgres.port": 50001,
            "local.postgres.max_replication_slots": 7,
            "local.postgres.max_wal_senders": 9,
            "local.mariadb.port": 50002,
            "local.mariadb.server_id": 42,
            "local.mariadb.binlog_expire_days": 3,
        },
    )


def _settings(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
        elif line and not line.startswith("["):
            out[line] = ""
    return out


def test_postgres_conf_binds_loopback_with_logical_wal(params: WorkbookParams) -> None:
    paths = StackPaths(params.state_path)
    conf = _settings(render_postgres_conf(params, paths))
    assert conf["listen_addresses"] == "'127.0.0.1'"
    assert conf["port"] == "50001"
    assert conf["wal_level"] == "'logical'"
    assert conf["max_replication_slots"] == "7"
    assert conf["max_wal_senders"] == "9"
    assert conf["unix_socket_directories"] == f"'{paths.pg_socket_dir}'"
    assert conf["password_encryption"] == "'scram-sha-256'"


def test_postgres_conf_quotes_paths(tmp_path: Path) -> None:
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "it's")})
    conf = _settings(render_postgres_conf(params, StackPaths(params.state_path)))
    assert conf["unix_socket_directories"].endswith("it''s/postgres/run'")


def test_pg_hba_allows_only_loopback_scram_and_peer_superuser() -> None:
    rules = [line.split() for line in render_pg_hba().splitlines() if line and not line.startswith("#")]
    host_rules = [r for r in rules if r[0] == "host"]
    assert host_rules and all(r[3] == "127.0.0.1/32" and r[4] == "scram-sha-256" for r in host_rules)
    assert {r[1] for r in host_rules} == {"all", "replication"}
    local_rules = [r for r in rules if r[0] == "local"]
    assert local_rules[0][2:4] == ["postgres", "peer"]
    assert local_rules[-1][-1] == "reject"
    assert not any("trust" in r for r in rules)


def test_pg_ident_maps_os_users_to_superuser() -> None:
    lines = render_pg_ident(["root", "postgres", "root"]).splitlines()[1:]
    assert lines == ["workbook_admin root postgres", "workbook_admin postgres postgres"]


def test_mariadb_cnf_has_debezium_binlog_settings(params: WorkbookParams) -> None:
    paths = StackPaths(params.state_path)
    text = render_mariadb_cnf(params, paths, run_as="mysql", version_string="5.5.5-10.11.19-log")
    assert text.splitlines()[1] == "[mariadbd]"
    conf = _settings(text)
    assert conf["bind-address"] == "127.0.0.1"
    assert conf["port"] == "50002"
    assert conf["user"] == "mysql"
    assert conf["socket"] == str(paths.maria_socket)
    assert conf["datadir"] == str(paths.maria_data)
    assert conf["log_bin"] == "mariadb-bin"
    assert conf["server_id"] == "42"
    assert conf["binlog_format"] == "ROW"
    assert conf["binlog_row_image"] == "FULL"
    assert conf["binlog_checksum"] == "NONE"
    assert conf["version"] == "5.5.5-10.11.19-log"
    assert conf["expire_logs_days"] == "3"
    assert conf["local_infile"] == "1"
    assert conf["secure-file-priv"] == str(paths.maria_files)
    assert conf["tmpdir"] == str(paths.maria_tmp)  # not the machine's shared /tmp
    # the reason for the version string is documented next to it
    assert "Debezium" in text.split("version =")[0].rsplit("binlog_row_image", 1)[1]


def test_mariadb_cnf_without_user_line_when_not_root(params: WorkbookParams) -> None:
    text = render_mariadb_cnf(params, StackPaths(params.state_path), run_as=None)
    assert "user" not in _settings(text)


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [("ecomm", "`ecomm`"), ("we`ird", "`we``ird`"), ("a``b", "`a````b`"), ("127.0.0.1", "`127.0.0.1`")],
)
def test_quote_mariadb(raw: str, quoted: str) -> None:
    assert quote_mariadb(raw) == quoted


@pytest.mark.parametrize("bad", ["", "a\x00b"])
def test_quote_mariadb_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        quote_mariadb(bad)


def test_conninfo_hides_password() -> None:
    info = ConnInfo(host="127.0.0.1", port=1, user="workbook", password="s3cr3t-value")
    assert "s3cr3t-value" not in repr(info)
    assert "s3cr3t-value" not in str(info)
    assert "s3cr3t-value" not in f"{info}"
    assert info["password"] == "s3cr3t-value"  # still usable as keyword arguments


def test_stack_repr_has_no_secrets(params: WorkbookParams) -> None:
    assert repr(LocalStack(params)) == f"LocalStack(state_dir={str(params.state_path)!r})"


def test_publication_name(params: WorkbookParams) -> None:
    assert publication_name(params, "ems") == "tickit_ems_pub"


def test_preflight_frame_and_failures() -> None:
    reports = [
        PreflightReport(
            "ems",
            "postgres",
            "ems",
            (
                Check("wal_level", False, "replica", "logical", "ALTER SYSTEM RESET wal_level, then restart"),
                Check("max_wal_senders", True, "10", ">= 10"),
            ),
        )
    ]
    frame = preflight_frame(reports)
    assert list(frame.columns) == [
        "source",
        "engine",
        "database",
        "check",
        "passed",
        "actual",
        "expected",
        "fix",
    ]
    assert frame["passed"].tolist() == [False, True]
    assert not reports[0].passed and [c.name for c in reports[0].failures] == ["wal_level"]
    with pytest.raises(
        CdcSetupError, match=r"ems: wal_level is 'replica', expected 'logical'; fix: ALTER SYSTEM"
    ):
        raise_for_failures(reports)
    raise_for_failures([PreflightReport("x", "postgres", "x", (Check("a", True, "1", "1"),))])
