"""``helpers.proc.set_timer_slack``: the capture workers' timer slack, and that the threads a
thread starts afterwards inherit it (the JVM's threads, in a worker)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from helpers.capture.backends import EmbeddedBackend
from helpers.capture.register import open_backend
from helpers.params import load_params
from helpers.poll import wait_until

ROOT = Path(__file__).resolve().parents[3]

#: In a process of its own (the slack is the calling thread's): the slack before, whether each
#: call set it, then what a thread started afterwards has (``prctl(PR_GET_TIMERSLACK)``).
_PROBE = textwrap.dedent(
    """
    import ctypes, json, threading
    from helpers.proc import set_timer_slack
    libc = ctypes.CDLL(None)
    def slack():
        return libc.prctl(30, 0, 0, 0, 0)
    seen = [slack(), set_timer_slack(0), slack(), set_timer_slack(2000)]
    child = []
    thread = threading.Thread(target=lambda: child.append(slack()))
    thread.start(); thread.join()
    print(json.dumps(seen + child))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_slack_is_set_and_the_threads_started_after_inherit_it() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    before, set_zero, after_zero, set_two_ms, in_thread = json.loads(out)
    assert (set_zero, after_zero) == (False, before)  # 0 leaves the kernel's slack
    assert set_two_ms is True
    assert in_thread == 2_000_000


def test_the_workers_config_carries_the_slack(tmp_path: Path) -> None:
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    assert params.capture.timer_slack_us == 2000
    backend = open_backend(params)
    assert isinstance(backend, EmbeddedBackend) and backend.timer_slack_us == 2000
    off = load_params("ci", overrides={"state_dir": str(tmp_path / "st"), "capture.timer_slack_us": 0})
    backend = open_backend(off)
    assert isinstance(backend, EmbeddedBackend) and backend.timer_slack_us == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_server_started_with_a_slack_keeps_it_across_exec_and_the_starter_keeps_its_own(
    tmp_path: Path,
) -> None:
    """Each server reports its own slack (reading another process's needs CAP_SYS_NICE); the
    starting thread, here one with a slack of its own (3 ms), has it again afterwards."""
    from helpers.proc import set_timer_slack, spawn_server, stop_process, thread_timer_slack_ns

    seen: dict[str, int] = {}
    started = []

    def start() -> None:
        set_timer_slack(3000)
        for us in (2000, 0):
            log = tmp_path / f"{us}.log"
            argv = ["sh", "-c", "cat /proc/self/timerslack_ns; exec sleep 30"]
            started.append(
                (log, spawn_server(argv, log_file=log, pid_file=None, cwd=tmp_path, timer_slack_us=us))
            )
        seen["after"] = thread_timer_slack_ns()

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    try:
        for log, _ in started:
            wait_until(lambda log=log: log.read_text().strip(), timeout_s=10, what=f"{log.name}'s report")
        reports = {log.name: int(log.read_text()) for log, _ in started}
        assert reports == {"2000.log": 2_000_000, "0.log": 3_000_000}  # 0: the starter's own
        assert seen["after"] == 3_000_000
    finally:
        for _, proc in started:
            stop_process(proc.pid, 5.0)
