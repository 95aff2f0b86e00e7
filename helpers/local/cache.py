"""The project's git-ignored build cache, ``.cache/``: folders made once per checkout (the
metastore's empty catalog and compiled launcher, the Spark drivers' class-data archive) and
published whole, so a reader never sees one half made."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["WORK_PREFIX", "drop_others", "files_key", "publish_folder"]

#: The prefix of a folder still being made (``tempfile.mkdtemp(prefix=WORK_PREFIX, dir=...)``).
WORK_PREFIX = ".work-"
#: A work folder older than this was left by a set-up that was interrupted.
_WORK_STALE_S = 3600.0


def files_key(paths: Iterable[Path]) -> str:
    """A cache key: a digest of the files a cache was made for (a ``java`` binary, jars), each with
    its path, size and modification time, in the order given.

    Raises:
        OSError: when one of them is gone.
    """
    entries = []
    for path in paths:
        stat = path.stat()
        entries.append([str(path), stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()[:16]


def publish_folder(work: Path, folder: Path, marker: str) -> None:
    """Move a finished ``work`` folder to ``folder`` in one rename, so ``folder`` is never seen half
    made; when another process was first (two test workers or set-ups at once), its equal copy,
    with its ``marker`` file, stays and the caller drops ``work``.

    Raises:
        OSError: when the rename fails and ``folder`` holds no ``marker``.
    """
    try:
        os.rename(work, folder)
    except OSError:
        if not (folder / marker).is_file():
            raise


def drop_others(root: Path, keep: str) -> None:
    """Remove every folder of ``root`` but ``keep`` (the other keys' caches: a running JVM keeps the
    file it mapped), except work folders younger than an hour (another set-up under way)."""
    stale = time.time() - _WORK_STALE_S
    for other in root.iterdir():
        if other.name == keep:
            continue
        try:
            if other.name.startswith(WORK_PREFIX) and other.stat().st_mtime > stale:
                continue
        except OSError:  # gone meanwhile
            continue
        shutil.rmtree(other, ignore_errors=True)
