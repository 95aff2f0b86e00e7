"""A table's ``hoodie.properties`` held as Hudi 0.14's writer leaves it for a few milliseconds on
every commit when the table has no metadata table (``docs/streamer.md``, "Traps of 0.14.0"), so a
test can start a read inside that window on purpose."""

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
