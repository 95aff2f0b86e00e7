"""Whole-table digests already computed, kept on disk so that a check run again (a poll, the next
notebook's kernel, ``./workbook status``) only recomputes the sides that changed.

A side's digests are a pure function of what it reads: a topic's Bronze replay of its files
(written once, never changed: identified by location, size and modification time), a Silver
table of its timeline (every write, rollback, restore or compaction adds an instant). The entry
is named by the side and holds the fingerprint of those inputs and of the comparison (key,
columns, JSON columns, reader version); a different fingerprint is a miss, never a stale hit.
The source side is always read again: it changes without leaving a trace the workbook could
fingerprint.

One file per side (the newest entry replaces the one before), written atomically; a cache that
cannot be read or written is skipped with a debug log, so the check never fails because of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from helpers.checks.digests import BucketDigests

__all__ = ["DigestCache", "fingerprint"]

log = logging.getLogger(__name__)

#: Raised whenever the canonical row text, the bucket hash or the replay's rules change.
_VERSION = 1


def fingerprint(*parts: Any) -> str:
    """A stable hash of JSON-serialisable parts (with the cache's version)."""
    text = json.dumps([_VERSION, *parts], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DigestCache:
    """Digests (and a few counts) per side, under ``folder``."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _file(self, side: str) -> Path:
        return self.folder / f"{hashlib.sha256(side.encode('utf-8')).hexdigest()[:24]}.json"

    def get(self, side: str, print_: str) -> tuple[BucketDigests, dict[str, int]] | None:
        """The digests and counts stored for ``side`` under fingerprint ``print_``, or None."""
        try:
            entry = json.loads(self._file(side).read_text())
        except (OSError, ValueError):
            return None
        if entry.get("side") != side or entry.get("fingerprint") != print_:
            return None
        try:
            buckets = {int(b): (int(n), int(x), int(y)) for b, n, x, y in entry["buckets"]}
            counts = {str(k): int(v) for k, v in entry.get("counts", {}).items()}
        except (KeyError, TypeError, ValueError):
            return None
        return BucketDigests(buckets), counts

    def put(
        self, side: str, print_: str, digests: BucketDigests, counts: dict[str, int] | None = None
    ) -> None:
        """Store ``side``'s digests under fingerprint ``print_`` (replacing what was there)."""
        entry = {
            "side": side,
            "fingerprint": print_,
            "buckets": [[b, n, x, y] for b, (n, x, y) in sorted(digests.buckets.items())],
            "counts": counts or {},
        }
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".digests-", suffix=".tmp")
            with os.fdopen(fd, "w") as out:
                json.dump(entry, out, separators=(",", ":"))
            os.replace(tmp, self._file(side))
            tmp = None
        except OSError as exc:
            log.debug("digest cache %s not written: %s", self.folder, exc)
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
