"""The local drivers' scratch folders under the state directory (``helpers.local.scratch``): one
per live Python process, the others removed when a driver starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.local.scratch import SCRATCH_DIR, driver_scratch


def _start_ticks(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]


def test_a_process_gets_one_folder_and_the_folders_of_ended_processes_go(tmp_path: Path) -> None:
    """This process's folder is named by its pid and start time and kept with its files; a folder
    of a process that has ended, one of a live pid with another start time (a reused pid) and one
    of no process at all are removed with their files; a live process's stays."""
    root = tmp_path / SCRATCH_DIR
    mine = driver_scratch(tmp_path)
    assert mine == root / f"{os.getpid()}-{_start_ticks(os.getpid())}"
    (mine / "spark-1").mkdir()
    (mine / "spark-1" / "hudi.jar").write_bytes(b"x" * 1024)

    code = "import os; print(os.getpid())"
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dead = root / f"{ended.stdout.strip()}-1"
    parent = os.getppid()
    reused = root / f"{parent}-{int(_start_ticks(parent)) + 1}"
    alive = root / f"{parent}-{_start_ticks(parent)}"
    odd = root / "not-a-process"
    for folder in (dead, reused, alive, odd):
        (folder / "blockmgr-1").mkdir(parents=True)
        (folder / "blockmgr-1" / "shuffle.data").write_bytes(b"y")

    assert driver_scratch(tmp_path) == mine
    assert sorted(p.name for p in root.iterdir()) == sorted([mine.name, alive.name])
    assert (mine / "spark-1" / "hudi.jar").stat().st_size == 1024
    assert (alive / "blockmgr-1" / "shuffle.data").is_file()
