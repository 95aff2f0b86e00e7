"""The local drivers' scratch folders under the state directory (``helpers.local.scratch``): one
per live Python process; the others removed when a driver starts, unless a running process (a
driver that outlived its Python) names them on its command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from helpers.local.scratch import SCRATCH_DIR, driver_scratch, scratch_conf
from helpers.proc import process_start


def test_a_process_gets_one_folder_and_the_folders_nothing_uses_go(tmp_path: Path) -> None:
    """This process's folder is named by its pid and start time (the start agrees with psutil's)
    and kept with its files; a folder of a process that has ended, one of a live pid with another
    start time (a reused pid) and one of no process at all are removed with their files; a live
    process's stays, and so does an ended process's folder that a running process names, until
    that process ends too."""
    root = tmp_path / SCRATCH_DIR
    mine = driver_scratch(tmp_path)
    pid, _, start = mine.name.partition("-")
    assert mine.parent == root and int(pid) == os.getpid()
    started = int(start) / os.sysconf("SC_CLK_TCK") + psutil.boot_time()
    assert abs(started - psutil.Process().create_time()) < 1.0
    (mine / "spark-1").mkdir()
    (mine / "spark-1" / "hudi.jar").write_bytes(b"x" * 1024)

    code = "import os; print(os.getpid())"
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dead = root / f"{ended.stdout.strip()}-1"
    parent = os.getppid()
    reused = root / f"{parent}-{int(process_start(parent) or 0) + 1}"
    alive = root / f"{parent}-{process_start(parent)}"
    odd = root / "not-a-process"
    orphaned = root / f"{ended.stdout.strip()}-2"  # its maker has ended, a driver it started runs
    for folder in (dead, reused, alive, odd, orphaned):
        (folder / "blockmgr-1").mkdir(parents=True)
        (folder / "blockmgr-1" / "shuffle.data").write_bytes(b"y")
    driver = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"-Djava.io.tmpdir={orphaned}"]
    )
    try:
        assert driver_scratch(tmp_path) == mine
        assert sorted(p.name for p in root.iterdir()) == sorted([mine.name, alive.name, orphaned.name])
        assert (mine / "spark-1" / "hudi.jar").stat().st_size == 1024
        assert (alive / "blockmgr-1" / "shuffle.data").is_file()
    finally:
        driver.kill()
        driver.wait()
    driver_scratch(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == sorted([mine.name, alive.name])


def test_scratch_conf_names_the_folder_as_spark_local_dir_and_jvm_and_hadoop_tmpdir(tmp_path: Path) -> None:
    """The driver's other options are kept, in order, before the temporary dir."""
    folder = tmp_path / "tmp" / "spark" / "1-2"
    assert scratch_conf(folder, "-Da=1 -Db=2") == {
        "spark.local.dir": str(folder),
        "spark.driver.extraJavaOptions": f"-Da=1 -Db=2 -Djava.io.tmpdir={folder}",
        "spark.hadoop.hadoop.tmp.dir": str(folder / "hadoop"),
    }
    assert scratch_conf(folder, "")["spark.driver.extraJavaOptions"] == f"-Djava.io.tmpdir={folder}"
