"""The project's git-ignored build cache, ``.cache/``: folders made once per checkout (the
metastore's empty catalog and compiled launcher, the Spark drivers' class-data archive) and
published whole, so a reader never sees one half made."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["publish_folder"]


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
