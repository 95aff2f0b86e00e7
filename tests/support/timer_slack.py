"""Another process's timer slack, as ``/proc`` shows it (its first thread's, which a JVM's
threads inherit)."""

from __future__ import annotations

from pathlib import Path

import pytest


def timer_slack_ns(pid: int) -> int:
    """``/proc/<pid>/timerslack_ns``. Linux lets only a process with CAP_SYS_NICE (root, as CI
    runs the tests) read another process's: without it the test fails, saying why, since a skip
    would leave the worker's timer slack unchecked."""
    try:
        return int(Path(f"/proc/{pid}/timerslack_ns").read_text())
    except PermissionError:
        pytest.fail(
            "reading another process's timer slack needs CAP_SYS_NICE: run the tests as root (as CI does)"
        )
