"""``helpers.proc.set_timer_slack``: the capture workers' timer slack, and that the threads a
thread starts afterwards inherit it (the JVM's threads, in a worker)."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.capture.backends import EmbeddedBackend
from helpers.capture.register import open_backend
from helpers.params import load_params

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
    from helpers.proc import spawn_server, stop_process

    def own() -> int:  # this thread's (/proc/<pid>/timerslack_ns is a process's first thread's)
        return int(ctypes.CDLL(None).prctl(30, 0, 0, 0, 0))  # PR_GET_TIMERSLACK

    before = own()
    started = {
        us: spawn_server(
            ["sleep", "30"], log_file=tmp_path / f"{us}.log", pid_file=None, cwd=tmp_path, timer_slack_us=us
        )
        for us in (2000, 0)
    }
    try:
        slack = {us: int(Path(f"/proc/{p.pid}/timerslack_ns").read_text()) for us, p in started.items()}
        assert slack == {2000: 2_000_000, 0: before}
        assert own() == before != 2_000_000
    finally:
        for proc in started.values():
            stop_process(proc.pid, 5.0)
