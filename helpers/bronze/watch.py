"""New Bronze files as they land in a local Bronze folder: the continuous Silver job's wake-up.

The continuous job (:mod:`helpers.silver.job`) looks for new Bronze files every
``silver.min_interval_s`` (``silver.idle_interval_s`` once idle). S3 gives no notice of a new
object, so there that poll is the only way. In a local Bronze folder :class:`BronzeWatch` also
wakes the job the moment a file lands: the operating system's file notices (inotify on Linux,
FSEvents on macOS) through the ``watchdog`` package, so a change does not wait out the rest of
the job's pause. The poll stays the safety net: a notice that never comes (a queue overflow, a
network file system written by another host) delays a file by one interval at most
(``silver.idle_interval_watched_s`` once idle, 15 s) and never loses it, since every round lists
Bronze whatever woke it. A watch that could not start is not active, and the job then paces as
on S3.

A landing is a visible Bronze name appearing (:func:`helpers.bronze.store.is_bronze_name`): the
writers rename a finished hidden temporary file to it, or create it whole. A new folder (a topic's
first file, or a new ``day=``) also counts, since a file written into it before its own watch
was added would give no notice of its own.

Example:
    >>> with BronzeWatch("lake/bronze") as watch:   # doctest: +SKIP
    ...     landed = watch.wait(2.0)                  # True as soon as a file lands, else after 2 s
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from helpers.bronze.store import is_bronze_name
from helpers.lake_store import is_s3

__all__ = ["BronzeWatch"]

log = logging.getLogger(__name__)

#: How often a wait looks whether its caller is stopping (a SIGTERM sets that event).
_STOP_CHECK_S = 0.5

#: The notices asked of the kernel: names appearing only. Without this filter every open and close
#: of a Bronze file (Spark reading it, in any process) is a notice the job's Python handles: 2,140
#: of them for one read of a full-scale Bronze zone's 1,070 files.
_LANDINGS = [FileCreatedEvent, FileMovedEvent, DirCreatedEvent, DirMovedEvent]


class _Landing(FileSystemEventHandler):
    """Sets ``landed`` when a visible Bronze name or a folder appears (created, or renamed to)."""

    def __init__(self, landed: threading.Event) -> None:
        self.landed = landed

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in ("created", "moved"):
            return
        path = os.fsdecode(event.dest_path or event.src_path)
        if event.is_directory or is_bronze_name(os.path.basename(path)):
            self.landed.set()


class BronzeWatch:
    """Wake-ups for new files under a Bronze zone (a no-op on S3, or until the folder exists).

    Args:
        root: the zone's folder or ``s3://`` URI (``lake.bronze``).
        enabled: False: never watch, every wait is the whole pause (``silver.watch_bronze``).
    """

    def __init__(self, root: str | Path, *, enabled: bool = True) -> None:
        self.root = str(root).rstrip("/")
        self.enabled = enabled
        self._landed = threading.Event()
        self._observer: Any = None
        self._failed = False

    @property
    def active(self) -> bool:
        """Whether the zone's file notices are being received."""
        return self._observer is not None

    def start(self) -> bool:
        """Start watching, when the zone is a local folder that exists (it may appear later: call
        again); whether the watch is active. A watch that cannot start (the system's limit of
        watches, say) is logged once, and the caller's poll alone finds new files."""
        if self._observer is not None or self._failed or not self.enabled:
            return self.active
        if is_s3(self.root) or not Path(self.root).is_dir():
            return False
        observer = Observer()
        try:
            observer.schedule(_Landing(self._landed), self.root, recursive=True, event_filter=_LANDINGS)
            observer.start()
        except OSError as exc:
            self._failed = True
            log.warning(
                "Failed to watch Bronze folder %s for new files (%s): new files are found by the poll alone",
                self.root,
                exc,
            )
            return False
        self._observer = observer
        return True

    def wait(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Sleep up to ``timeout_s``, less when a file lands (or landed since the last call) or
        ``stop`` is set (looked at every half second); whether a file landed. Without an active
        watch no file ends it."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while (left := deadline - time.monotonic()) > 0 and not (stop is not None and stop.is_set()):
            if self._observer is None:
                time.sleep(min(left, _STOP_CHECK_S))
            elif self._landed.wait(min(left, _STOP_CHECK_S)):
                break
        return self.take()

    def take(self) -> bool:
        """Whether a file landed since the last :meth:`take` (or :meth:`wait`); the notice is
        cleared, so call it just before a listing, which then sees every file landed so far. A
        file landing after it wakes the next wait."""
        if not self._landed.is_set():
            return False
        self._landed.clear()
        return True

    def stop(self) -> None:
        """Stop watching (idempotent)."""
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)

    def __enter__(self) -> BronzeWatch:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
