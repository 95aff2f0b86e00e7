"""tests/support/threads.py: a background thread's failure reaches the test that joins it."""

from __future__ import annotations

import pytest
from support.threads import RaisingThread


def test_join_raises_what_the_target_raised() -> None:
    def fails(what: str) -> None:
        raise ValueError(what)

    thread = RaisingThread(fails, "the writer's insert failed")
    thread.start()
    with pytest.raises(ValueError, match="the writer's insert failed"):
        thread.join()


def test_join_returns_when_the_target_succeeded() -> None:
    done: list[int] = []
    thread = RaisingThread(done.extend, [1, 2])
    thread.start()
    thread.join()
    assert done == [1, 2] and thread.error is None


def test_raise_error_reports_a_failure_while_waiting() -> None:
    import threading

    go = threading.Event()

    def fails_then_waits() -> None:
        go.wait(10)
        raise RuntimeError("the insert failed")

    thread = RaisingThread(fails_then_waits)
    thread.start()
    thread.raise_error()  # nothing failed yet
    go.set()
    with pytest.raises(RuntimeError, match="the insert failed"):
        thread.join(10)
    with pytest.raises(RuntimeError, match="the insert failed"):
        thread.raise_error()
