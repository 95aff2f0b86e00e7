"""Silver ingestion on the local Spark standalone cluster (:mod:`helpers.local.spark_cluster`): executors in
JVMs of their own read, check, prepare and write every Bronze event; the driver keeps metadata.

One cluster per module, started by project code on free ports in a throw-away state directory.
Bronze is a synthetic ``sale`` backlog written by the project's Bronze writer
(:mod:`helpers.bronze.synthetic`); Silver is checked row by row against the replay of that Bronze.
Spark's own monitoring API (the driver's ``/api/v1``) says who read what.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.sockets import listening

from helpers.bronze.read import bronze_files, read_bronze_arrow
from helpers.bronze.replay import replay_arrow
from helpers.bronze.synthetic import SALE_TOPIC, write_sale_backlog
from helpers.checks.compare import compare_tables
from helpers.hudi.read import read_snapshot
from helpers.isolation import isolated_params
from helpers.local.class_data import archive_for
from helpers.params import WorkbookParams
from helpers.pipeline import server_statuses
from helpers.proc import free_port, read_pid
from helpers.silver.tables import table_config
from helpers.sources.api import LocalSources
from helpers.spark import local_driver_options

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster_params() -> Iterator[WorkbookParams]:
    """CI parameters whose ``spark.master`` is a local cluster of their own, started with the
    source servers by notebook 01's call (``LocalSources.start``: a workbook run starts nothing
    else before notebook 02's first Spark session)."""
    port = free_port()
    overrides = {
        "local.spark.port": port,
        "local.spark.web_port": free_port(),
        "local.spark.worker_web_port": free_port(),
        "spark.master": f"spark://127.0.0.1:{port}",
        "spark.catalog": "none",
        "silver.sync": False,
    }
    with isolated_params("wb-cluster-", overrides) as params:  # stops what it started, then removes it
        LocalSources(params).start()
        yield params


def _lake(params: WorkbookParams, name: str) -> WorkbookParams:
    folder = params.state_path.parent / name
    lake = params.lake.model_copy(update={"bronze": str(folder / "bronze"), "silver": str(folder / "silver")})
    return params.model_copy(update={"lake": lake})


def test_the_cluster_runs_on_loopback_with_bounded_heaps(cluster_params: WorkbookParams) -> None:
    """``stack status`` lists the master and the worker; both listen on 127.0.0.1 only; their
    heaps are ``local.spark.daemon_heap`` and the worker offers ``worker_memory`` to executors."""
    rows = {s.server: s for s in server_statuses(cluster_params)}
    assert rows["spark-master"].running and rows["spark-worker"].running
    for role in ("master", "worker"):
        pid = read_pid(cluster_params.state_path / "spark" / f"{role}.pid")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"-Xmx256m" in cmdline and b"127.0.0.1" in cmdline
        tmp = cluster_params.state_path / "spark" / "tmp"
        assert f"-Djava.io.tmpdir={tmp}".encode() in cmdline, cmdline  # scratch not in /tmp
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"SPARK_LOCAL_DIRS={cluster_params.state_path / 'spark' / 'local'}".encode() in environ
        sockets = listening(pid)
        assert sockets and {address for address, _ in sockets} == {"127.0.0.1"}, sockets
    state = json.loads(
        urllib.request.urlopen(f"http://127.0.0.1:{cluster_params.local.spark.web_port}/json").read()
    )
    assert [(w["state"], w["cores"], w["memory"]) for w in state["workers"]] == [("ALIVE", 4, 3072)]


def _round(params: WorkbookParams, folder: Path) -> dict[str, Any]:
    """One round of ``sale`` in a driver process of its own (:mod:`support.cluster_round`)."""
    config = folder / "params.json"
    config.write_text(params.model_dump_json(by_alias=True))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    proc = subprocess.run(
        [sys.executable, "-m", "support.cluster_round", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def backlog_rounds(cluster_params: WorkbookParams) -> dict[str, tuple[WorkbookParams, dict[str, Any]]]:
    """First loads of synthetic ``sale`` backlogs on the cluster, each by a driver process of its
    own: ``small``, 10,000 events (a snapshot of 5,000 keys, then updates and deletes) in files of
    4,096 events, and ``large``, 100,000 events over 40,000 keys. Name to (parameters, report)."""
    rounds = {}
    for name, events, keys, batch in (("small", 10_000, 5_000, 4096), ("large", 100_000, 40_000, 8192)):
        params = _lake(cluster_params, name)
        write_sale_backlog(params.path(params.lake.bronze), events=events, keys=keys, batch=batch)
        rounds[name] = (params, _round(params, params.state_path.parent / name))
    return rounds


def test_executors_read_every_bronze_record_and_silver_equals_the_replay(
    backlog_rounds: dict[str, tuple[WorkbookParams, dict[str, Any]]],
) -> None:
    """The small backlog's round: Spark's monitoring API shows the reading done by executors, not
    the driver (the driver ran no task and read nothing; the executors read at least every Bronze
    byte); Silver equals the replay of Bronze row by row."""
    params, report = backlog_rounds["small"]
    bronze = params.path(params.lake.bronze)
    files = bronze_files(bronze, SALE_TOPIC)
    assert len(files) == 3  # 10,000 events in files of at most 4,096
    assert (report["files"], report["events"], report["master"]) == (len(files), 10_000, params.spark.master)
    driver = next(e for e in report["executors"] if e["id"] == "driver")
    workers = [e for e in report["executors"] if e["id"] != "driver"]
    assert driver["totalTasks"] == 0 and driver["totalInputBytes"] == 0
    bronze_bytes = sum(p.stat().st_size for p in files)
    assert workers and sum(e["totalInputBytes"] for e in workers) >= bronze_bytes
    assert all(e["hostPort"].startswith("127.0.0.1:") for e in workers)

    sale = next(t for t in params.silver.tables if t.name == "sale")
    expected = replay_arrow(read_bronze_arrow(files), ["salesid"])
    silver = read_snapshot(table_config(params, sale).base_path)
    data = [c for c in expected.column_names if not c.startswith("__")]
    assert expected.num_rows > 0
    assert compare_tables(expected.select(data), silver.select(data), ["salesid"]) == []


def test_the_cluster_s_driver_starts_as_a_local_driver_does(
    backlog_rounds: dict[str, tuple[WorkbookParams, dict[str, Any]]],
) -> None:
    """The cluster's driver runs on this machine: it gets the local driver's JVM options (the serial
    collector, no performance-data file, ``local.jit``) and maps the set-up's class-data archive,
    as a local-mode driver does, and so do its executors, as their processes' command lines show
    (without the archive, a 2.25 M-event first load spent 13.1 s with no Spark job instead of 6.8 s,
    most of it loading classes; with G1, the executors' heaps peaked 10-15 % higher: bench/README.md)."""
    params, report = backlog_rounds["small"]
    arguments = report["driver_jvm"]
    for option in (*local_driver_options(params), "-Djava.io.tmpdir="):
        assert any(a.startswith(option) for a in arguments), (option, arguments)
    archive = archive_for([j for j in report["class_path"].split(os.pathsep) if j])
    assert archive is not None, "no class-data archive for the project jars: ./workbook setup makes it"
    assert f"-XX:SharedArchiveFile={archive}" in arguments, arguments
    assert "sharing" in report["driver_vm_info"]
    # the executors, started by the worker with the driver's class path, map the same archive and
    # get the same options (the serial collector: their JVMs would pick G1 on two CPUs)
    assert report["executor_vm_info"] and all("sharing" in info for info in report["executor_vm_info"])
    assert report["executor_jvm"], "no executor process of the application found"
    for executor in report["executor_jvm"]:
        for option in (*local_driver_options(params), f"-XX:SharedArchiveFile={archive}"):
            assert option in executor, (option, executor)


def test_the_drivers_python_memory_stays_flat_as_the_backlog_grows(
    backlog_rounds: dict[str, tuple[WorkbookParams, dict[str, Any]]],
) -> None:
    """From 10,000 to 100,000 events, the driver's Python peak resident memory grows by less than
    25 MiB (it holds file listings and per-file counts; the events stay on the executors).
    Backlogs of 0.45, 2.25 and 9 million events are ``bench/bench_backlog.py``'s."""
    small, large = backlog_rounds["small"][1], backlog_rounds["large"][1]
    assert (small["events"], large["events"]) == (10_000, 100_000)
    peaks = [small["peak_rss_kib"] / 1024, large["peak_rss_kib"] / 1024]
    assert peaks[1] - peaks[0] < 25, peaks
