"""Peak memory of a workbook run's processes (helpers.memory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from helpers.memory import (
    PeakMemory,
    describe_makeup,
    process_label,
    process_pss,
    process_rss,
    workbook_processes,
)
from helpers.poll import wait_until


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
        assert first.rss >= 64 << 20 and memory.peak_bytes >= first.rss
        assert 0 < first.pss <= first.rss
    finally:
        for proc in (child, detached, stranger):
            proc.kill()
            proc.wait()
    assert process_rss(child.pid) == 0


def test_pages_a_forked_process_shares_count_once_in_the_proportional_sum(tmp_path: Path) -> None:
    """A parent touches 64 MiB, then forks: each process's resident memory holds the 64 MiB
    (the summed resident memory counts them twice), the proportional set sizes split them."""
    state = tmp_path / "state"
    state.mkdir()
    code = "import os, time; x = bytearray(64 << 20); os.fork(); time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=state, start_new_session=True)
    try:
        wait_until(
            lambda: (
                len(workbook_processes(parent.pid, state)) == 2
                and min(process_rss(p) for p in workbook_processes(parent.pid, state)) >= 64 << 20
            ),
            timeout_s=30,
            what="the fork",
        )
        with PeakMemory(state, interval_s=0.05, root_pid=parent.pid, pss_every=2) as memory:
            peak = memory.mark()
        assert peak.rss >= 128 << 20
        assert 64 << 20 <= peak.pss <= peak.rss - (48 << 20)
        assert memory.peak == peak and memory.peak_bytes == peak.rss
        [(label, count, size)] = memory.makeup  # the peak taken apart: both processes, one label
        assert (label, count, size) == ("python -c", 2, peak.pss)
        assert describe_makeup(memory.makeup) == f"python -c x2 {peak.pss / 2**30:.2f} GiB"
        assert 0 < process_pss(parent.pid) < process_rss(parent.pid)
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()
    assert process_pss(parent.pid) == 0


def test_a_sampler_takes_the_processes_it_is_given_or_needs_a_state_directory() -> None:
    with PeakMemory(interval_s=0.05, pids=lambda: [os.getpid()]) as memory:
        pass
    assert 0 < memory.peak.pss <= memory.peak.rss == memory.peak_bytes
    with pytest.raises(ValueError, match="state directory"):
        PeakMemory()


def test_a_sampler_without_proportional_sizes_reads_none_and_bad_settings_are_refused() -> None:
    with PeakMemory(interval_s=0.05, pss_every=None, pids=lambda: [os.getpid()]) as memory:
        pass
    assert memory.peak.pss == 0 < memory.peak.rss
    with pytest.raises(ValueError, match="pss_every"):
        PeakMemory(pss_every=0, pids=lambda: [os.getpid()])


def test_a_process_is_labelled_by_its_module_script_or_program(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text("import time; time.sleep(30)")
    procs = {
        "timeit": subprocess.Popen([sys.executable, "-m", "timeit", "-n1", "__import__('time').sleep(30)"]),
        "sleeper.py": subprocess.Popen([sys.executable, "-u", str(script), "-c", "its own -c"]),
        "sleep": subprocess.Popen(["sleep", "30"]),
    }
    try:
        # right after exec the kernel may show an empty command line for a moment (once in 200
        # starts here): such a process is labelled by its name until its arguments are readable
        wait_until(
            lambda: all(psutil.Process(proc.pid).cmdline() for proc in procs.values()),
            timeout_s=10,
            what="the children's command lines",
        )
        assert {label: process_label(proc.pid) for label, proc in procs.items()} == {
            label: label for label in procs
        }
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    assert process_label(procs["sleep"].pid) == "gone"
    groups = [("SparkSubmit", 1, 3 << 30), ("postgres", 9, 1 << 29), ("a", 1, 1 << 20), ("b", 2, 1 << 20)]
    assert describe_makeup(groups, top=2) == "SparkSubmit 3.00, postgres x9 0.50, 3 others 0.00 GiB"
