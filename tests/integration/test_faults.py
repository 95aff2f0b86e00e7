"""Fault injection on the running pipeline (real PostgreSQL, MariaDB, Debezium, the official Hudi
writer and reader): after each fault and its recovery, Bronze and Silver equal the sources.

* ``kill -9`` of a capture worker while changes stream, then a restart;
* ``kill -9`` of the continuous Silver job (its Python process and Spark driver JVM) while a
  Merge-on-Read delta commit is in flight;
* ``kill -9`` of a source database server while capturing, changes before and after;
* the Bronze folder made read-only: the worker reports it and marks nothing processed; once
  writable again and restarted, nothing is lost.

Read-only as root: ``chmod`` does not stop root, so the topic's Bronze folder is bind-mounted
read-only over itself (``mount --bind`` then ``mount -o remount,bind,ro``: writes fail with
EROFS "Read-only file system"); where mounting is not permitted, ``chattr -R +i`` (immutable:
EPERM "Operation not permitted") is used. Both are undone in ``finally``.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pipeline import Capture, own_job_params
from support.threads import Pacing, RaisingThread

from helpers.capture.backends import wait_until_running
from helpers.checks.parity import bronze_vs_source
from helpers.params import WorkbookParams
from helpers.poll import wait_until
from helpers.proc import pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _insert_venues(cap: Capture, keys: range, pacing: Pacing | None = None) -> None:
    db = cap.stack.params.source("ems").database
    with cap.stack.connect_postgres(db, autocommit=True) as conn:
        (pacing or Pacing()).each(
            keys,
            lambda key: conn.execute(
                "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats)"
                " VALUES (%s, %s, 'c', 'ST', 1)",
                (key, f"fault{key}"),
            ),
        )


def _insert_dates(cap: Capture, keys: range, pacing: Pacing | None = None) -> None:
    conn = cap.stack.connect_mariadb(cap.stack.params.source("ecomm").database, autocommit=True)
    try:
        with conn.cursor() as cur:
            (pacing or Pacing()).each(
                keys,
                lambda key: cur.execute(
                    "INSERT INTO `date` (dateid, caldate, day, week, month, qtr, year, holiday)"
                    " VALUES (%s, '2031-01-01', 'MO', 1, 'JAN', '1', 2031, 0)",
                    (key,),
                ),
            )
    finally:
        conn.close()


INSERT = {"ems": (_insert_venues, "venue"), "ecomm": (_insert_dates, "date")}


def _silver_equals_source(params: WorkbookParams, names: list[str]) -> None:
    from helpers.checks.parity import silver_vs_source
    from helpers.silver.ingest import ingest_all

    ingest_all(params, names)
    check = silver_vs_source(params, names)
    assert check["equal"].all(), check


def _ensure_running(cap: Capture, source: str) -> None:
    name = cap.specs[source].name
    if cap.backend.status(name).state != "RUNNING":
        cap.backend.restart(name)
    wait_until_running(cap.backend, name, timeout_s=180)


@pytest.mark.parametrize(("source", "first"), [("ems", 21_000), ("ecomm", 31_000)])
def test_kill_9_capture_worker_mid_stream_then_silver_equals_the_source(
    capture: Capture, source: str, first: int
) -> None:
    """Single-row commits 20 ms apart; the worker is killed with SIGKILL once 20 reached Bronze,
    the commits go on while it is down (40 more after the kill, waited for), then it is
    restarted: Bronze and the Silver table (CoW) equal the source, redeliveries collapsed."""
    insert, table = INSERT[source]
    name = capture.specs[source].name
    keys = range(first, first + 400)  # below the next test's keys; about 100 are used
    pacing = Pacing(pace_s=0.02)
    thread = RaisingThread(insert, capture, keys, pacing)
    thread.start()
    try:
        from helpers.capture import read_bronze

        topic = capture.specs[source].topics[f"{capture.stack.params.source(source).namespace}.{table}"]
        key_col = "venueid" if source == "ems" else "dateid"
        wait_until(
            # r.get: a topic may hold TRUNCATE / re-snapshot markers, which have no key
            lambda: sum(1 for r in read_bronze(capture.bronze, topic) if r.get(key_col) in keys) >= 20,
            timeout_s=60,
            what="the first changes before the kill",
            interval_s=0.1,
            max_interval_s=0.1,
        )
        assert capture.backend.kill(name) is not None
        at_kill = len(pacing.done)
        assert capture.backend.status(name).state == "FAILED"

        def committed_since_kill() -> bool:
            thread.raise_error()
            return len(pacing.done) >= at_kill + 40

        wait_until(committed_since_kill, timeout_s=60, what="40 commits while the worker is down")
    finally:
        pacing.stop.set()
        try:
            thread.join()
        finally:
            _ensure_running(capture, source)  # the shared pipeline's worker runs again, whatever failed
    params = capture.stack.params
    assert bronze_vs_source(params, [capture.specs[source]], wait_s=90)["equal"].all()
    _silver_equals_source(params, [table])


def test_kill_9_silver_job_mid_merge_on_read_commit_then_it_catches_up(
    capture: Capture, tmp_path: Path
) -> None:
    """A Merge-on-Read table (``sale``) of its own Silver root, ingested by the continuous job while
    sales are updated; the job is killed with SIGKILL while a delta commit is in flight (checked),
    then restarted: the interrupted instant is rolled back, its Bronze files taken again, and the
    table equals the source with nothing pending."""
    from helpers.checks.parity import silver_vs_source
    from helpers.hudi.timeline import pending_instants
    from helpers.silver.job import SilverJob
    from helpers.silver.tables import table_config

    base = capture.stack.params
    params, job_params = own_job_params(base, "sale_mor", tmp_path, min_interval_s=0.2)
    job = SilverJob(job_params)
    path = table_config(params, params.silver.tables[0]).base_path
    stop = threading.Event()

    def update_sales() -> None:
        conn = capture.stack.connect_mariadb(base.source("ecomm").database, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT salesid FROM sale ORDER BY salesid LIMIT 200")
                ids = [r[0] for r in cur.fetchall()]
                for i, key in enumerate(ids):
                    if stop.is_set():
                        break
                    cur.execute("UPDATE sale SET qtysold = %s WHERE salesid = %s", (1 + i % 7, key))
                    time.sleep(0.01)
        finally:
            conn.close()

    writer = RaisingThread(update_sales)
    job.start()
    try:
        writer.start()
        wait_until(
            lambda: pending_instants(path),
            timeout_s=90,
            what="a delta commit of sale_mor in flight",
            interval_s=0.001,
            max_interval_s=0.001,  # an instant is pending for a moment only
        )
        assert job.kill() is not None
        assert pending_instants(path), "the kill did not hit a delta commit in flight"
        assert job.status()["state"] == "DEAD"
        writer.join()
        assert bronze_vs_source(base, [capture.specs["ecomm"]], wait_s=60)["equal"].all()
        job.start()

        def caught_up() -> bool:
            return bool(silver_vs_source(params)["equal"].all()) and not pending_instants(path)

        wait_until(caught_up, timeout_s=180, what="the MoR table to equal the source after the restart")
        lag = wait_until(lambda: job.status().get("lag"), timeout_s=30, what="the job's lag")
        assert lag["sale_mor"]["pending_files"] == 0, lag
    finally:
        stop.set()
        try:
            if writer.is_alive():
                writer.join()
        finally:
            job.stop()


def _kill_server(cap: Capture, engine: str) -> None:
    import os
    import signal

    paths = cap.stack.paths
    pid_file = paths.pg_pid if engine == "postgres" else paths.maria_pid
    pid = int(pid_file.read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), timeout_s=30, what=f"{engine} to die")  # a zombie is dead


@pytest.mark.parametrize(
    ("source", "first"),
    [
        ("ems", 21_500),
        ("ecomm", 31_500),
    ],
)
def test_source_server_killed_while_capturing_then_bronze_and_silver_equal_the_source(
    capture: Capture, source: str, first: int
) -> None:
    """Changes, then ``kill -9`` of the source's database server and a start, then more changes:
    the capture worker recovers by itself (Debezium's retries) or reports FAILED; after that (and a
    restart when it failed) Bronze and Silver equal the source."""
    insert, table = INSERT[source]
    engine = capture.stack.params.source(source).engine
    name = capture.specs[source].name
    insert(capture, range(first, first + 20))
    params = capture.stack.params
    assert bronze_vs_source(params, [capture.specs[source]], wait_s=60)["equal"].all()
    _kill_server(capture, engine)
    capture.stack.start()
    insert(capture, range(first + 20, first + 40))
    recovered = bool(bronze_vs_source(params, [capture.specs[source]], wait_s=90)["equal"].all())
    state = capture.backend.status(name)
    print(f"{source}: after the server restart the worker is {state.state}; caught up alone: {recovered}")
    if not recovered:  # leave the shared pipeline consistent whatever the outcome
        capture.backend.restart(name)
        wait_until_running(capture.backend, name, timeout_s=180)
        assert bronze_vs_source(params, [capture.specs[source]], wait_s=120)["equal"].all()
    _silver_equals_source(params, [table])
    assert recovered or state.state == "FAILED", f"worker neither caught up nor reported a failure: {state}"


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[str]:
    """The folder read-only for every process, root included (module docstring); yields how."""
    mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if mounted.returncode == 0:
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True)
        if ro.returncode != 0:
            subprocess.run(["umount", str(folder)], check=True)
            raise AssertionError(f"cannot remount {folder} read-only: {ro.stderr.decode()}")
        try:
            yield "read-only bind mount"
        finally:
            subprocess.run(["umount", str(folder)], check=True)
        return
    chattr = shutil.which("chattr")
    immutable = subprocess.run([chattr, "-R", "+i", str(folder)], capture_output=True) if chattr else None
    assert immutable is not None and immutable.returncode == 0, (
        f"neither mount ({mounted.stderr.decode().strip()}) nor chattr"
        f" ({immutable.stderr.decode().strip() if immutable else 'not installed'}) can make {folder}"
        " read-only: run the tests as root with CAP_SYS_ADMIN or CAP_LINUX_IMMUTABLE (as CI does)"
    )
    try:
        yield "chattr +i"
    finally:
        subprocess.run([chattr, "-R", "-i", str(folder)], check=True)


def test_read_only_bronze_fails_clearly_then_loses_nothing_once_writable(capture: Capture) -> None:
    """The venue topic's Bronze folder made read-only; new venues: the ems worker turns FAILED
    with "Bronze folder ... is not writable" and the venues are not in Bronze. Made writable and
    restarted, the worker delivers them again: Bronze and Silver equal the source."""
    from helpers.capture import read_bronze

    params = capture.stack.params
    name = capture.specs["ems"].name
    topic = capture.specs["ems"].topics["ems.venue"]
    folder = capture.bronze / topic
    assert folder.is_dir()
    keys = range(22_000, 22_030)
    status: Any = None
    try:
        with _read_only(folder) as how:

            def failed() -> Any:
                st = capture.backend.status(name)
                return st if st.state == "FAILED" else None

            _insert_venues(capture, keys)
            status = wait_until(
                failed, timeout_s=60, what="the worker to report the unwritable Bronze folder"
            )
            print(f"Bronze made read-only with {how}; worker: {status.error}")
            # the failed worker closes its engine (the last offset flush) and exits: once it is gone
            # no offset can be stored any more, so the restart below shows whether one passed the venues
            worker = status.details["pid"]
            wait_until(lambda: not pid_alive(worker), timeout_s=120, what="the failed worker to exit")
            assert "is not writable" in (status.error or "")
            assert str(folder) in (status.error or "")
            assert not any(r.get("venueid") in keys for r in read_bronze(capture.bronze, topic))
    finally:
        _ensure_running(capture, "ems")
    assert bronze_vs_source(params, [capture.specs["ems"]], wait_s=90)["equal"].all()
    assert {r.get("venueid") for r in read_bronze(capture.bronze, topic)} >= set(keys)
    _silver_equals_source(params, ["venue"])
