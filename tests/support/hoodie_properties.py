"""A table's files held as Hudi 0.14's writer leaves them for a few milliseconds on every commit,
so a test can start a read inside that window on purpose: ``hoodie.properties`` when the table
has no metadata table (``docs/streamer.md``, "Traps of 0.14.0"), and on a local disk the newest
completed instant's file, created empty before its JSON is written
(:data:`helpers.hudi.read._TRANSIENT_TEXTS`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def properties_rewrite(base: str, *, absent: bool, hold_s: float) -> Iterator[None]:
    """Hold ``<base>/.hoodie/hoodie.properties`` as that writer leaves it (the copy in
    ``hoodie.properties.backup``, the file deleted, or created and still empty) for ``hold_s``
    seconds from a thread, then put it back as the writer does."""
    props = Path(base, ".hoodie", "hoodie.properties")
    backup = props.with_name("hoodie.properties.backup")
    text = props.read_bytes()
    backup.write_bytes(text)
    props.unlink()
    if not absent:
        props.write_bytes(b"")
    done = threading.Event()

    def restore() -> None:
        time.sleep(hold_s)
        props.write_bytes(text)
        backup.unlink()
        done.set()

    thread = threading.Thread(target=restore, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
        assert done.is_set() and props.read_bytes() == text


@contextlib.contextmanager
def commit_being_written(base: str, *, hold_s: float) -> Iterator[None]:
    """Hold the newest completed commit file of the table at ``base`` empty for ``hold_s`` seconds
    from a thread, then write its JSON back, as a writer that creates the file before writing it
    does."""
    commits = sorted(Path(base, ".hoodie").glob("*.commit")) + sorted(
        Path(base, ".hoodie").glob("*.deltacommit")
    )
    newest = max(commits, key=lambda p: p.name.split(".")[0])
    text = newest.read_bytes()
    newest.write_bytes(b"")
    done = threading.Event()

    def restore() -> None:
        time.sleep(hold_s)
        newest.write_bytes(text)
        done.set()

    thread = threading.Thread(target=restore, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
        assert done.is_set() and newest.read_bytes() == text
