"""A test's background thread whose failure fails the test."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class RaisingThread(threading.Thread):
    """A thread whose :meth:`join` raises what its target raised.

    A plain thread's exception only becomes pytest's unhandled-thread warning, so a background
    writer that failed half-way would leave a test comparing against fewer changes than it meant
    to make, and passing.
    """

    def __init__(self, target: Callable[..., Any], *args: Any) -> None:
        super().__init__(target=target, args=args)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            super().run()
        except BaseException as exc:  # noqa: BLE001 - handed to join()
            self.error = exc

    def raise_error(self) -> None:
        """Raise what the target raised, if it has (while it may still be running otherwise)."""
        if self.error is not None:
            raise self.error

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)
        self.raise_error()
