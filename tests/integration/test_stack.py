"""Integration tests of the local stack against real PostgreSQL 15 and MariaDB 10.11 servers.

One stack per module in a temporary state dir with free ports, with the lake's local S3 server
(``local.s3.enabled``) and Trino reading it; tests run in file order (the last one stops the
servers as ``./workbook stack stop`` does).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.sockets import listeners_on

from helpers.errors import StackError
from helpers.local.s3 import LocalS3Server
from helpers.local.stack import LocalStack, ServerStatus
from helpers.local.trino import LocalTrino
from helpers.params import WorkbookParams
from helpers.pipeline import pipeline_status, start_servers, stop_all
from helpers.poll import wait_until
from helpers.proc import free_port, pid_alive
from helpers.query.engines import open_engine

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def running(stack_factory: Callable[..., Any]) -> Iterator[tuple[LocalStack, WorkbookParams]]:
    """The stack with the lake's S3 server, and Trino started on demand by a query engine held open
    for the module (notebook 05 opens one the same way)."""
    overrides = {
        "local.query_engine": "trino",
        "local.s3.enabled": True,
        "local.s3.port": free_port(),
        "local.s3.bucket": "wb-stack-lake",
    }
    with stack_factory("wb-stack-", overrides) as stack:
        assert [s.server for s in stack.status()] == ["postgres", "mariadb", "metastore"]  # no Trino yet
        with open_engine(stack.params, progress=False):
            yield stack, stack.params


def _pids(stack: LocalStack) -> dict[str, int | None]:
    return {s.server: s.pid for s in stack.status()}


def _wait_stopped(stack: LocalStack, server: str) -> None:
    """Wait until the stack reports ``server`` stopped (a killed server's zombie counts as gone;
    the stack reaps its own MariaDB child)."""
    wait_until(
        lambda: next(s for s in stack.status() if s.server == server).state == "stopped",
        timeout_s=10,
        what=f"the killed {server} to be gone",
        interval_s=0.05,
    )


def test_start_is_idempotent(running: tuple[LocalStack, WorkbookParams]) -> None:
    """A second start changes nothing: both servers keep their pids."""
    stack, _ = running
    before = _pids(stack)
    assert all(before.values())
    stack.start()
    assert _pids(stack) == before


def test_status_reports_each_server(running: tuple[LocalStack, WorkbookParams]) -> None:
    stack, params = running
    pg, maria, metastore, trino = stack.status()
    assert isinstance(pg, ServerStatus)
    assert (metastore.server, metastore.state, metastore.port) == (
        "metastore",
        "running",
        params.local.metastore.port,
    )
    assert metastore.data_dir == str(params.state_path / "metastore" / "hms_db")
    assert (trino.server, trino.state, trino.port) == ("trino", "running", params.local.trino.port)
    info = requests.get(f"http://127.0.0.1:{params.local.trino.port}/v1/info", timeout=5).json()
    assert trino.version == f"trino {info['nodeVersion']['version']}" == "trino 476"  # what answers
    assert (pg.server, pg.state, pg.port) == ("postgres", "running", params.local.postgres.port)
    assert (maria.server, maria.state, maria.port) == ("mariadb", "running", params.local.mariadb.port)
    assert pg.version.startswith("15.") and maria.version.startswith("10.11.")
    assert pg.data_dir == str(params.state_path / "postgres" / "data")
    assert maria.data_dir == str(params.state_path / "mariadb" / "data")


def test_stack_start_and_status_include_the_s3_server(running: tuple[LocalStack, WorkbookParams]) -> None:
    """``./workbook stack start|status`` (``start_servers``, ``pipeline_status``) with
    ``local.s3.enabled``: the S3 server started with the other servers, its bucket exists, and the
    status lists it running on its port."""
    _, params = running
    statuses = {s.server: s for s in start_servers(params)}
    assert {"postgres", "mariadb", "metastore", "trino", "s3"} <= set(statuses)
    assert statuses["s3"].running and statuses["s3"].port == params.local.s3.port
    assert statuses["trino"].running  # (started by the module's open engine)
    LocalS3Server(params).client().head_bucket(Bucket="wb-stack-lake")
    servers = pipeline_status(params)["servers"].set_index("server")
    assert servers.loc["s3", "state"] == "running"
    assert int(servers.loc["s3", "port"]) == params.local.s3.port


def test_servers_listen_only_on_loopback(running: tuple[LocalStack, WorkbookParams]) -> None:
    _, params = running
    assert listeners_on(params.local.postgres.port) == ["127.0.0.1"]
    assert listeners_on(params.local.mariadb.port) == ["127.0.0.1"]
    # the Hive Metastore (Hive 3.1 alone would listen on every interface: helpers/local/hms) and Trino
    assert listeners_on(params.local.metastore.port) == ["127.0.0.1"]
    assert listeners_on(params.local.trino.port) == ["127.0.0.1"]
    assert listeners_on(params.local.s3.port) == ["127.0.0.1"]


def test_application_accounts(running: tuple[LocalStack, WorkbookParams], tmp_path: Path) -> None:
    """workbook owns the PostgreSQL source databases and schemas and may replicate; the MariaDB
    user can bulk-load with LOAD DATA LOCAL INFILE into ecomm."""
    stack, params = running
    for name in ("ems", "crm", "orders"):
        source = params.source(name)
        with stack.connect_postgres(source.database) as conn:
            row = conn.execute(
                "SELECT current_user, current_schema(), r.rolreplication, "
                "pg_get_userbyid(d.datdba), pg_get_userbyid(n.nspowner) "
                "FROM pg_roles r, pg_database d, pg_namespace n "
                "WHERE r.rolname = current_user AND d.datname = current_database() AND n.nspname = %s",
                (source.schema_name,),
            ).fetchone()
        assert row == ("workbook", source.schema_name, True, "workbook", "workbook")
    data = tmp_path / "rows.tsv"
    data.write_text("1\talpha\n2\tbeta\n")
    conn = stack.connect_mariadb("ecomm")
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t_load (id INT PRIMARY KEY, name VARCHAR(10)) ENGINE=InnoDB")
            cur.execute("LOAD DATA LOCAL INFILE %s INTO TABLE t_load", (str(data),))
            cur.execute("SELECT COUNT(*), CURRENT_USER() FROM t_load")
            assert cur.fetchone() == (2, "workbook@127.0.0.1")
            cur.execute("DROP TABLE t_load")
        conn.commit()
    finally:
        conn.close()


def test_wrong_password_is_refused(running: tuple[LocalStack, WorkbookParams]) -> None:
    import psycopg
    import pymysql

    stack, _ = running
    info = stack.postgres_conninfo("ems")
    info["password"] = "wrong"
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(**info)
    minfo = stack.mariadb_conninfo("ecomm")
    minfo["password"] = "wrong"
    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
        pymysql.connect(**minfo)


def test_passwords_never_leak(running: tuple[LocalStack, WorkbookParams]) -> None:
    """Credentials file is 0600; no password appears in the server logs, config or CLI output."""
    stack, params = running
    paths = stack.paths
    assert oct(paths.credentials.stat().st_mode & 0o777) == "0o600"
    secrets = [
        stack.credentials.postgres_password.get_secret_value(),
        stack.credentials.mariadb_password.get_secret_value(),
    ]
    cli = subprocess.run(
        [sys.executable, "-m", "helpers.cli", "stack", "start", "--env", "ci",
         "--state-dir", str(params.state_path),
         "--set", f"local.postgres.port={params.local.postgres.port}",
         "--set", f"local.mariadb.port={params.local.mariadb.port}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert "running" in cli.stdout
    texts = [cli.stdout, cli.stderr]
    for path in (paths.pg_log, paths.maria_log, paths.maria_cnf, paths.pg_data / "workbook.conf"):
        texts.append(path.read_text(errors="replace"))
    for text in texts:
        for secret in secrets:
            assert secret not in text


def test_kill9_postgres_is_recovered(running: tuple[LocalStack, WorkbookParams]) -> None:
    """After kill -9 of the postmaster, start brings it back with the committed data."""
    stack, _ = running
    with stack.connect_postgres("ems") as conn:
        conn.execute("CREATE TABLE ems.t_crash (id int PRIMARY KEY)")
        conn.execute("INSERT INTO ems.t_crash VALUES (1), (2), (3)")
    pid = _pids(stack)["postgres"]
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    _wait_stopped(stack, "postgres")
    assert stack.status()[0].state == "stopped"
    stack.start()
    new_pid = _pids(stack)["postgres"]
    assert new_pid and new_pid != pid
    with stack.connect_postgres("ems") as conn:
        assert conn.execute("SELECT count(*) FROM ems.t_crash").fetchone() == (3,)
        conn.execute("DROP TABLE ems.t_crash")


def test_kill9_mariadb_is_recovered(running: tuple[LocalStack, WorkbookParams]) -> None:
    """After kill -9 of mariadbd, start runs InnoDB crash recovery and keeps committed rows."""
    stack, _ = running
    conn = stack.connect_mariadb("ecomm", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t_crash (id INT PRIMARY KEY) ENGINE=InnoDB")
        cur.execute("INSERT INTO t_crash VALUES (1), (2)")
    conn.close()
    pid = _pids(stack)["mariadb"]
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    _wait_stopped(stack, "mariadb")
    assert stack.status()[1].state == "stopped"
    assert stack.paths.maria_pid.exists()  # the killed server's pid file is left behind
    stack.start()
    new_pid = _pids(stack)["mariadb"]
    assert new_pid and new_pid != pid
    conn = stack.connect_mariadb("ecomm", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t_crash")
        assert cur.fetchone() == (2,)
        cur.execute("DROP TABLE t_crash")
    conn.close()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_pid_files_are_handled(running: tuple[LocalStack, WorkbookParams]) -> None:
    """A pid file naming a process that is gone (or not our server) does not block the start. The
    stop before it also stops the Trino the module's engine started."""
    stack, params = running
    stack.stop()
    assert LocalTrino(params).pid() is None and listeners_on(params.local.trino.port) == []
    stack.paths.pg_pid.write_text(f"{_dead_pid()}\n{stack.paths.pg_data}\n")
    stack.paths.maria_pid.write_text(f"{os.getpid()}\n")  # alive, but not a MariaDB server
    assert [s.state for s in stack.status()] == ["stopped"] * 3  # (Trino, stopped too, is not listed)
    stack.start()
    pids = _pids(stack)
    assert pids["postgres"] and pids["mariadb"] and pids["mariadb"] != os.getpid()


def test_port_in_use_fails_clearly(running: tuple[LocalStack, WorkbookParams]) -> None:
    stack, params = running
    stack.stop_mariadb()
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    blocker.bind(("127.0.0.1", params.local.mariadb.port))
    blocker.listen()
    try:
        with pytest.raises(
            StackError, match=rf"Failed to start MariaDB: port {params.local.mariadb.port} .* in use"
        ):
            stack.start_mariadb()
    finally:
        blocker.close()
    stack.start_mariadb()
    assert stack.status()[1].running


def test_start_failure_shows_log_tail(running: tuple[LocalStack, WorkbookParams]) -> None:
    """A server that dies during start-up yields a StackError naming server, port and log lines."""
    stack, params = running
    stack.stop_postgres()
    auto = stack.paths.pg_data / "postgresql.auto.conf"
    original = auto.read_text()
    auto.write_text(original + "shared_buffers = 'not-a-size'\n")
    try:
        with pytest.raises(StackError) as info:
            stack.start_postgres()
        message = str(info.value)
        assert f"Failed to start PostgreSQL on port {params.local.postgres.port}" in message
        assert "shared_buffers" in message  # from the log's last lines
    finally:
        auto.write_text(original)
    stack.start_postgres()
    assert stack.status()[0].running


def test_trino_runs_while_an_engine_uses_it(running: tuple[LocalStack, WorkbookParams]) -> None:
    """Engines share one Trino; it stops after the last engine closes, and a claim left by a process
    that died (a killed kernel) neither keeps it from starting nor keeps it running. One start:
    each start of Trino costs tens of seconds of CPU."""
    stack, params = running
    trino = LocalTrino(params)
    assert trino.pid() is None  # the module's Trino was stopped by a test above
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    users = params.state_path / "trino" / "users"
    users.mkdir(parents=True, exist_ok=True)
    (users / f"{dead.pid}-deadbeef").touch()
    first = open_engine(params, progress=False)  # starts Trino beside the dead process's claim
    pid = trino.pid()
    assert pid is not None
    assert b"-XX:TieredStopAtLevel=1" in Path(f"/proc/{pid}/cmdline").read_bytes()  # local.trino.jit: quick
    # its catalogs read the lake through the S3 server, with the server's keys in files of mode 0600
    catalog = params.state_path / "trino" / "etc" / "catalog" / "hudi.properties"
    assert "fs.native-s3.enabled=true" in catalog.read_text(encoding="utf-8")
    assert catalog.stat().st_mode & 0o777 == 0o600
    with open_engine(params, progress=False) as second:
        assert second.query("SELECT 42 AS answer")["answer"].tolist() == [42]
        assert trino.pid() == pid
    assert trino.pid() == pid  # the first engine still uses it
    first.close()
    assert trino.pid() is None, "a dead process's claim kept Trino running"
    assert listeners_on(params.local.trino.port) == []
    assert [s.server for s in stack.status()] == ["postgres", "mariadb", "metastore"]


def test_stop(running: tuple[LocalStack, WorkbookParams]) -> None:
    """``./workbook stack stop`` (``stop_all``) stops every server, the S3 server's process too."""
    stack, params = running
    assert [s.server for s in stack.status()] == ["postgres", "mariadb", "metastore"]  # (Trino: above)
    s3_pid = LocalS3Server(params).pid()
    assert s3_pid is not None
    stopped = {s.server: s for s in stop_all(params)}
    assert [stopped[name].state for name in ("postgres", "mariadb", "metastore", "s3")] == ["stopped"] * 4
    assert not pid_alive(s3_pid)
    for port in (params.local.postgres.port, params.local.mariadb.port, params.local.metastore.port):
        assert listeners_on(port) == []
    assert listeners_on(params.local.trino.port) == [] and listeners_on(params.local.s3.port) == []
    assert [s.state for s in stack.stop()] == ["stopped"] * 3  # stopping twice is fine
