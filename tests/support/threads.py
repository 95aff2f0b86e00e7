"""A test's background thread whose failure fails the test, and the paced commits such threads make."""

from __future__ import annotations

import dataclasses
import threading
import time
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


@dataclasses.dataclass
class Pacing:
    """Commits made one key at a time, ``pace_s`` apart, until ``stop`` is set; each key is
    appended to ``done`` once committed."""

    pace_s: float = 0.0
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    done: list[int] = dataclasses.field(default_factory=list)

    def each(self, keys: range, commit: Callable[[int], Any]) -> None:
        for key in keys:
            if self.stop.is_set():
                break
            commit(key)
            self.done.append(key)
            time.sleep(self.pace_s)
