"""The driver JVM a workbook run lends its notebooks' kernels (``helpers.spark.RunDriver``), with
real Spark: kernels stand in as this process's child processes, as papermill's kernels are the
run's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support.sockets import listening

from helpers.isolation import isolated_folder, isolated_overrides
from helpers.params import load_params
from helpers.spark import DRIVER_LOG, RUN_DRIVER_ENV, RunDriver

pytestmark = pytest.mark.integration

#: A stand-in kernel: builds its session as a notebook does, runs a Spark job, and prints what it
#: ran on; then starts a child of its own that only asks whether it would be lent the driver.
KERNEL = """
import json, os, subprocess, sys
from helpers.params import load_params
from helpers.spark import build_spark_session
spark = build_spark_session(load_params("ci", json.loads(sys.argv[1])))
jvm = spark.sparkContext._jvm
child = subprocess.run(
    [sys.executable, "-c", "from helpers.spark import attach_run_driver; print(attach_run_driver())"],
    capture_output=True, text=True, check=True,
)
print(json.dumps({
    "jvm": jvm.java.lang.ProcessHandle.current().pid(),
    "context": spark.sparkContext.applicationId,
    "sum": spark.range(1000).selectExpr("sum(id)").collect()[0][0],
    "child_attached": child.stdout.strip(),
}))
"""


@pytest.fixture()
def overrides() -> Iterator[dict[str, Any]]:
    work = isolated_folder("wb-rundriver-")
    yield {**isolated_overrides(work), "spark.catalog": "none"}
    shutil.rmtree(work, ignore_errors=True)


def _kernel(overrides: Mapping[str, Any], lent: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KERNEL, json.dumps(dict(overrides))],
        env={**os.environ, **lent},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_kernels_one_after_another_run_in_the_run_s_driver_each_with_a_fresh_context(
    overrides: dict[str, Any],
) -> None:
    params = load_params("ci", overrides)
    driver = RunDriver(params, Path.cwd())
    lent = driver.start()
    try:
        assert driver.info.parent.is_dir() and not driver.info.exists()  # no kernel asked yet
        seen = []
        for _ in range(2):
            done = _kernel(overrides, lent)
            assert done.returncode == 0, done.stderr[-3000:]
            seen.append(json.loads(done.stdout.strip().splitlines()[-1]))
            assert driver.pid is not None
            # the kernel's context is still up: the JVM's Py4J gateway, RPC endpoint and block
            # manager all listen, on loopback only
            sockets = listening(driver.pid)
            assert len(sockets) >= 3 and {address for address, _ in sockets} == {"127.0.0.1"}, sockets
            driver.release_context()
        jvm = driver.pid
        assert oct(driver.info.stat().st_mode & 0o777) == "0o600"  # its secret: this user only
        assert driver.active_context() is None  # the second kernel's context was stopped
    finally:
        driver.close()
    assert [s["jvm"] for s in seen] == [jvm, jvm]
    assert seen[0]["context"] != seen[1]["context"]
    assert [s["sum"] for s in seen] == [499500, 499500]
    # a process a kernel starts (the continuous Silver job, a worker) is not lent the run's driver
    assert [s["child_attached"] for s in seen] == ["False", "False"]
    assert not driver.info.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(jvm, 0)  # the JVM ended with the run
    log = (params.state_path / DRIVER_LOG).read_text()
    assert log.count(f"pid {os.getpid()}: driver of 'workbook run'") == 1
    assert "driver of 'cdc-lakehouse-workbook'" not in log  # no kernel started a JVM of its own


def test_a_run_whose_kernels_use_no_spark_starts_no_jvm(overrides: dict[str, Any]) -> None:
    driver = RunDriver(load_params("ci", overrides), Path.cwd())
    assert driver.start() == {RUN_DRIVER_ENV: f"{os.getpid()}:{driver.info}"}
    driver.release_context()
    driver.close()
    assert driver.pid is None
    assert not driver.info.exists()


def test_a_driver_that_cannot_start_is_reported_to_the_kernel_with_its_output(
    overrides: dict[str, Any],
) -> None:
    """A heap size the JVM refuses: the kernel's session fails with the run driver's error and the
    end of its log, not with a hang or a driver of its own."""
    broken = {**overrides, "spark.conf": {"spark.driver.memory": "lots"}}
    driver = RunDriver(load_params("ci", broken), Path.cwd())
    lent = driver.start()
    try:
        done = _kernel(broken, lent)
    finally:
        driver.close()
    assert done.returncode != 0
    assert "Failed to start the workbook run's Spark driver" in done.stderr
    assert "Invalid maximum heap size: -Xmxlots" in done.stderr  # the JVM's own words, from its log
    log = (load_params("ci", broken).state_path / DRIVER_LOG).read_text()
    assert "driver of 'cdc-lakehouse-workbook'" not in log  # the kernel did not start one instead
