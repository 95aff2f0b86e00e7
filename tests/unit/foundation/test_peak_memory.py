"""Peak memory of a workbook run's processes (helpers.proc)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.poll import wait_until
from helpers.proc import PeakMemory, process_rss, workbook_processes


def test_processes_of_the_run_are_its_children_and_those_naming_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    code = "import time; x = bytearray(64 << 20); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code])  # a descendant of this process
    detached = subprocess.Popen(  # gone from the tree, but runs in the state dir
        [sys.executable, "-c", code], cwd=state, start_new_session=True
    )
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], cwd=tmp_path)
    try:
        wait_until(lambda: process_rss(detached.pid) >= 64 << 20, timeout_s=30, what="the allocation")
        found = workbook_processes(os.getpid(), state)
        assert {os.getpid(), child.pid, detached.pid} <= found
        assert stranger.pid in found  # a child of this process too: the tree counts
        unrelated = workbook_processes(detached.pid, tmp_path / "elsewhere")
        assert unrelated == {detached.pid}
        with PeakMemory(state, interval_s=0.05, root_pid=detached.pid) as memory:
            first = memory.mark()
        assert first >= 64 << 20 and memory.peak_bytes >= first
    finally:
        for proc in (child, detached, stranger):
            proc.kill()
            proc.wait()
    assert process_rss(child.pid) == 0
