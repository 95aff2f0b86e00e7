"""One way to wait for an observable state: :func:`wait_until` replaces hand-written sleep loops."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from helpers.errors import WaitTimeoutError

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    check: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.2,
    max_interval_s: float = 2.0,
    detail: Callable[[], str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call ``check`` until it returns a truthy value, and return that value.

    The pause between calls starts at ``interval_s`` and doubles up to ``max_interval_s``. An
    exception raised by ``check`` propagates at once (a failure is not a state to wait out).

    Args:
        check: returns the awaited value, or a falsy value while it is not there yet.
        timeout_s: how long to wait in total; ``check`` runs at least once.
        what: what is awaited, for the error (``"Silver to catch up with Bronze"``).
        interval_s: first pause between two calls.
        max_interval_s: longest pause between two calls.
        detail: called once on timeout; its text (the last state seen) ends the error message.
        sleep: how to pause (tests pass a recorder).
        clock: a monotonic clock in seconds.

    Raises:
        WaitTimeoutError: ``check`` stayed falsy for ``timeout_s``.
    """
    deadline = clock() + timeout_s
    pause = interval_s
    while True:
        value = check()
        if value:
            return value
        left = deadline - clock()
        if left <= 0:
            tail = f": {detail()}" if detail is not None else ""
            raise WaitTimeoutError(f"Failed to wait for {what} within {timeout_s:g} s{tail}")
        sleep(min(pause, left))
        pause = min(pause * 2, max_interval_s)
