"""Notebook tier: the runner executes every notebook with the CI parameters (papermill), the
results are checked in pytest against the generator and the live databases, then nbval re-runs
the executed notebooks in lax mode (errors fail; cells marked NBVAL_CHECK_OUTPUT must reproduce).

The workbook runs against its own throw-away stack (state directory under /tmp, free ports), so
it never touches a developer's `.state` or `.state-ci`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from helpers.outbox import expected_order_counts
from helpers.params import WorkbookParams, load_params, project_root
from helpers.runner import RunResult, discover_notebooks, run_workbook
from helpers.stack import LocalStack
from helpers.tickit import expected_row_counts

pytestmark = [pytest.mark.notebook, pytest.mark.integration]

ROOT = project_root()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def workbook() -> Iterator[tuple[dict[str, Any], WorkbookParams, Path]]:
    """Overrides (own state dir and ports), the resulting params, and a scratch folder."""
    scratch = Path(tempfile.mkdtemp(prefix="wbnb-", dir="/tmp"))
    scratch.chmod(0o711)
    overrides: dict[str, Any] = {
        "state_dir": str(scratch / "st"),
        "runs_dir": str(scratch / "runs"),
        "lake.bronze": str(scratch / "lake" / "bronze"),
        "lake.silver": str(scratch / "lake" / "silver"),
        "local.postgres.port": _free_port(),
        "local.mariadb.port": _free_port(),
    }
    params = load_params("ci", overrides)
    try:
        yield overrides, params, scratch
    finally:
        try:
            LocalStack(params).stop()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(overrides: dict[str, Any], run_dir: Path) -> RunResult:
    result = run_workbook("ci", overrides=overrides, run_dir=run_dir, progress=False)
    assert result.ok, result.summary()
    return result


@pytest.fixture(scope="module")
def first_run(workbook: tuple[dict[str, Any], WorkbookParams, Path]) -> RunResult:
    overrides, _, scratch = workbook
    return _run(overrides, scratch / "run1")


def _expected_counts(params: WorkbookParams) -> dict[tuple[str, str], int]:
    tickit = expected_row_counts(params.tickit.scale)
    orders = expected_order_counts(params.orders.customers, params.orders.orders, params.orders.seed)
    expected: dict[tuple[str, str], int] = {}
    for name, source in params.sources.items():
        for table in source.tables:
            expected[(name, table)] = orders[table] if name == "orders" else tickit[table]
    return expected


def test_every_notebook_ran(first_run: RunResult) -> None:
    """Every notebook in notebooks/ ran, in order, and its executed copy is in the run folder."""
    names = [p.name for p in discover_notebooks()]
    assert [nb.name for nb in first_run.notebooks] == names
    for nb in first_run.notebooks:
        assert nb.output_path.exists()
    summary = json.loads((first_run.run_dir / "run-summary.json").read_text())
    assert summary["ok"] is True and [n["name"] for n in summary["notebooks"]] == names


def test_01_counts_equal_generator_and_database(
    first_run: RunResult, workbook: tuple[dict[str, Any], WorkbookParams, Path]
) -> None:
    """The table notebook 01 ends with equals the generator's counts and a fresh count(*)."""
    _, params, _ = workbook
    shown = pd.read_csv(first_run.run_dir / "01_source_row_counts.csv")
    got = {(r.system, r.table): int(r.rows) for r in shown.itertuples()}
    assert got == _expected_counts(params)

    from helpers.cdc import source_row_counts

    live = source_row_counts(LocalStack(params), params)
    assert {(r.system, r.table): int(r.rows) for r in live.itertuples()} == got


def test_01_preflight_all_pass(first_run: RunResult) -> None:
    """Every CDC check passed; each engine's key settings are among the checks."""
    preflight = pd.read_csv(first_run.run_dir / "01_preflight.csv")
    assert preflight["passed"].all(), preflight[~preflight["passed"]]
    checks = set(preflight["check"])
    assert {"wal_level", "max_replication_slots"} <= checks
    assert any("binlog_format" in c for c in checks) and any("binlog_row_image" in c for c in checks)
    assert set(preflight["source"]) == {"ecomm", "ems", "crm", "orders"}


def test_bronze_equals_the_sources_and_capture_keeps_running(
    first_run: RunResult, workbook: tuple[dict[str, Any], WorkbookParams, Path]
) -> None:
    """After notebooks 01 and 02 Bronze replays to exactly the source rows of every table (checked
    here again, independently of the notebook's own check), and a change made after the run
    reaches Bronze within seconds: capture runs on in the background."""
    from helpers.capture import connector_specs, local_endpoints, read_bronze
    from helpers.capture.api import bronze_vs_source

    _, params, _ = workbook
    shown = pd.read_csv(first_run.run_dir / "02_bronze_vs_source.csv")
    expected = _expected_counts(params)
    by_topic = {f"{params.project}.{params.source(s).namespace}.{t}": n for (s, t), n in expected.items()}
    assert {r.topic: int(r.source_rows) for r in shown.itertuples()} == by_topic
    assert shown["equal"].all() and (shown["source_rows"] == shown["bronze_rows"]).all()
    stack = LocalStack(params)
    with stack.connect_postgres("ems") as conn:
        conn.execute("UPDATE ems.category SET catdesc = 'changed after the run' WHERE catid = 2")
        conn.commit()
    bronze = params.path(params.lake.bronze)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if any(r["catdesc"] == "changed after the run" for r in read_bronze(bronze, "tickit.ems.category")):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("a change after the run did not reach Bronze within 15 s")
    specs = connector_specs(params, local_endpoints(params))
    assert bronze_vs_source(params, specs, wait_s=30)["equal"].all()


def test_silver_equals_the_sources_after_notebook_03(
    first_run: RunResult, workbook: tuple[dict[str, Any], WorkbookParams, Path]
) -> None:
    """Notebook 03 left every Silver table equal to its source (its reconciliation artefact), with
    the generator's row counts."""
    _, params, _ = workbook
    shown = pd.read_csv(first_run.run_dir / "03_reconciliation.csv")
    assert shown["equal"].all() and len(shown) == len(params.silver.tables)
    expected = _expected_counts(params)
    for table in params.silver.tables:
        row = shown[shown["table"] == table.name].iloc[0]
        assert int(row["silver_rows"]) == expected[(table.source, table.table)], table.name
    ingested = pd.read_csv(first_run.run_dir / "03_ingested.csv")
    assert (ingested["files"] > 0).all()
    registered = pd.read_csv(first_run.run_dir / "03_catalog.csv")
    names = {t.name for t in params.silver.tables if t.table_type == "COPY_ON_WRITE"}
    names |= {
        f"{t.name}_{s}" for t in params.silver.tables if t.table_type == "MERGE_ON_READ" for s in ("ro", "rt")
    }
    assert set(registered["name"]) == names
    # independently, through the official reader: the continuous job notebook 03 started takes
    # in what the sources changed since (an update made by the Bronze test above) on its own
    from helpers.silver import silver_vs_source
    from helpers.silver_job import SilverJob

    assert SilverJob(params).status().get("state") == "RUNNING"
    deadline = time.monotonic() + 60
    while not (check := silver_vs_source(params))["equal"].all():
        assert time.monotonic() < deadline, check[~check["equal"]]
        time.sleep(1)


def test_no_secret_in_executed_notebooks(
    first_run: RunResult, workbook: tuple[dict[str, Any], WorkbookParams, Path]
) -> None:
    """Generated passwords appear in no executed notebook or artefact."""
    _, params, _ = workbook
    creds = LocalStack(params).credentials
    secrets = [creds.postgres_password.get_secret_value(), creds.mariadb_password.get_secret_value()]
    for path in first_run.run_dir.iterdir():
        text = path.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, f"a password leaked into {path.name}"


def test_rerun_after_kill9_recovers_without_reloading(
    first_run: RunResult, workbook: tuple[dict[str, Any], WorkbookParams, Path]
) -> None:
    """kill -9 of both servers, then the main command again: servers come back, nothing reloads,
    and rows changed since the first load (a scripted update) are kept."""
    overrides, params, scratch = workbook
    stack = LocalStack(params)
    with stack.connect_postgres("ems") as conn:
        conn.execute("UPDATE ems.venue SET venueseats = 4242 WHERE venueid = 1")
        conn.commit()
    pids = {s.server: s.pid for s in stack.status()}
    assert all(pids.values()), pids
    for pid in pids.values():
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(s.running for s in stack.status()):
        time.sleep(0.2)
    assert not any(s.running for s in stack.status())

    second = _run(overrides, scratch / "run2")
    loads = pd.read_csv(second.run_dir / "01_loads.csv")
    assert not loads["loaded"].any(), loads[loads["loaded"]]
    new_pids = {s.server: s.pid for s in stack.status()}
    assert all(new_pids[k] != pids[k] for k in pids)
    with stack.connect_postgres("ems") as conn:
        row = conn.execute("SELECT venueseats FROM ems.venue WHERE venueid = 1").fetchone()
    assert row is not None and row[0] == 4242
    shown = pd.read_csv(second.run_dir / "01_source_row_counts.csv")
    assert {(r.system, r.table): int(r.rows) for r in shown.itertuples()} == _expected_counts(params)


def test_bad_params_fail_before_any_notebook(workbook: tuple[dict[str, Any], WorkbookParams, Path]) -> None:
    """An unknown key stops the runner at once with the key named; no run folder is written."""
    from helpers.errors import ParamsError

    overrides, _, scratch = workbook
    with pytest.raises(ParamsError, match="tickit.scael"):
        run_workbook(
            "ci", overrides={**overrides, "tickit.scael": 1}, run_dir=scratch / "bad", progress=False
        )
    assert not (scratch / "bad").exists()


def test_nbval_lax_reruns_the_executed_notebooks(first_run: RunResult) -> None:
    """nbval re-executes each executed notebook (which carries papermill's injected CI parameters)
    in a fresh kernel: no cell may raise, and cells marked NBVAL_CHECK_OUTPUT must reproduce."""
    executed = [str(nb.output_path) for nb in first_run.notebooks]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-sanitize-with",
            str(ROOT / "tests" / "notebooks" / "sanitize.cfg"),
            "-q",
            *executed,
        ],
        cwd=first_run.run_dir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_nbval_catches_a_changed_checked_output(first_run: RunResult, tmp_path: Path) -> None:
    """The nbval step is not vacuous: a checked output that no longer reproduces fails it."""
    nb01 = next(nb.output_path for nb in first_run.notebooks if nb.name.startswith("01_"))
    notebook = json.loads(nb01.read_text())
    tampered = 0
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "NBVAL_CHECK_OUTPUT" in source:
            for output in cell["outputs"]:
                data = output.get("data", {})
                if "text/plain" in data:
                    text = "".join(data["text/plain"])
                    data["text/plain"] = text.replace("outbox", "outbax")
                    tampered += text != data["text/plain"]
    assert tampered, "notebook 01 has no NBVAL_CHECK_OUTPUT cell with a table to tamper with"
    target = nb01.parent / "tampered_01.ipynb"
    target.write_text(json.dumps(notebook))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax", "-q", str(target)],
        cwd=nb01.parent,
        capture_output=True,
        text=True,
        timeout=900,
    )
    target.unlink()
    assert proc.returncode != 0 and "outbax" in proc.stdout, proc.stdout[-3000:]
