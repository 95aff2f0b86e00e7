"""The one command line (``helpers.cli``): parsing, exit codes and the pipeline status."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import build_parser, main


def test_socket_path_too_long_is_a_clear_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / ("x" * 120)
    code = main(["stack", "start", "--env", "ci", "--state-dir", str(deep)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Failed to prepare the state directory" in err and "shorter state_dir" in err


def test_status_of_a_fresh_state_dir_shows_every_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--env", "ci", "--state-dir", str(tmp_path / "st"), "--set", "local.mariadb.port=50123"]
    args += ["--set", f"lake.bronze={tmp_path / 'bronze'}"]
    assert main(["status", *args]) == 0
    out = capsys.readouterr().out
    sections = dict(part.split("\n", 1) for part in out.strip().split("\n\n"))
    assert list(sections) == ["== servers", "== connectors", "== silver_job", "== lag", "== divergence"]
    servers = {line.split()[0]: line.split()[1] for line in sections["== servers"].splitlines()[1:]}
    # (Trino is listed only while a query engine runs it)
    assert servers == dict.fromkeys(["postgres", "mariadb", "metastore"], "stopped")
    assert "50123" in sections["== servers"]
    connectors = {line.split()[0]: line.split()[1] for line in sections["== connectors"].splitlines()[1:]}
    assert connectors == {f"tickit-{s}": "UNASSIGNED" for s in ("ecomm", "ems", "crm", "orders")}
    assert "NOT STARTED" in sections["== silver_job"]
    lag = sections["== lag"].splitlines()
    assert lag[0].split() == ["table", "pending_files", "oldest_pending_s"]
    assert len(lag) > 1 and all(line.split()[1] == "0" for line in lag[1:])
    # the check of Silver against the sources cannot read a stopped source: it says so
    assert sections["== divergence"].startswith("(none)\nnot checked now: Failed to read source ecomm")
    assert main(["stack", "status", *args]) == 0  # the same, without running the check
    assert capsys.readouterr().out == out.split("\nnot checked now:")[0] + "\n"


def test_bad_override_names_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--env", "ci", "--set", "local.nope=1"]) == 2
    assert "local.nope" in capsys.readouterr().err


def test_changes_run_without_a_name_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["changes", "run", "--env", "ci"]) == 2
    assert "scenario name" in capsys.readouterr().err


def test_lists_need_no_servers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["changes", "list"]) == 0
    assert "deletes_postgres" in capsys.readouterr().out
    assert main(["conformance", "--list"]) == 0
    assert "item" in capsys.readouterr().out


def test_every_command_is_there() -> None:
    parser = build_parser()
    for argv in (["run"], ["stack", "stop"], ["status"], ["changes", "list"], ["conformance", "--short"]):
        assert parser.parse_args(argv).command == argv[0]
    with pytest.raises(SystemExit):
        parser.parse_args(["stack", "restart"])
