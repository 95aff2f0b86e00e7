"""Which Bronze files a Silver table has taken: a checkpoint kept inside the table's commits.

Every ingestion commit carries in ``extraMetadata``, atomically with its data, the files it took and
the state after it (a watermark plus the names of recent files). :func:`plan_round` picks the new
files; :mod:`helpers.silver.state` reads the state. Why each file
is taken exactly once: ``docs/architecture.md``, "Silver ingestion". Bronze lists its own files
(:class:`helpers.bronze.store.BronzeStore`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from helpers.bronze.store import BronzeObject
from helpers.errors import HudiError

__all__ = [
    "CHECKPOINT_KEY",
    "FILES_KEY",
    "BronzeCheckpoint",
    "plan_round",
]

FILES_KEY = "workbook.bronze.files"
CHECKPOINT_KEY = "workbook.bronze.checkpoint"


@dataclass(frozen=True)
class BronzeCheckpoint:
    """Files modified before ``watermark`` are taken; of later ones, those in ``files``."""

    watermark: float = 0.0
    files: frozenset[str] = field(default_factory=frozenset)

    def to_json(self) -> str:
        """The form stored in commit metadata."""
        return json.dumps({"watermark": self.watermark, "files": sorted(self.files)})

    @classmethod
    def from_json(cls, text: str) -> BronzeCheckpoint:
        """Parse :meth:`to_json` output.

        Raises:
            HudiError: when the text is not a checkpoint.
        """
        try:
            raw = json.loads(text)
            return cls(float(raw["watermark"]), frozenset(str(n) for n in raw["files"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise HudiError(f"Failed to read the Bronze checkpoint {text[:80]!r}: {exc}") from None


def plan_round(
    listing: Sequence[BronzeObject],
    checkpoint: BronzeCheckpoint,
    listed_at: float,
    margin_s: float,
    limit: int | None = None,
) -> tuple[list[BronzeObject], BronzeCheckpoint]:
    """The files to take now and the checkpoint to commit with them.

    Args:
        listing: every Bronze file of the topic, listed after ``listed_at``.
        checkpoint: the state of the table's newest commit.
        listed_at: when the listing started (epoch s, same clock as the modification times).
        margin_s: how long a file may take from its modification time to being listed.
        limit: take at most this many files (the oldest by modification time); the others stay
            new for the next round (the watermark stops before the oldest of them).

    Returns:
        New files sorted by name, and the state after taking them.
    """
    new = [o for o in listing if o.modified >= checkpoint.watermark and o.name not in checkpoint.files]
    watermark = max(checkpoint.watermark, listed_at - margin_s)
    if limit is not None and len(new) > limit:
        by_age = sorted(new, key=lambda o: (o.modified, o.name))
        new, left = by_age[:limit], by_age[limit:]
        watermark = max(checkpoint.watermark, min(watermark, min(o.modified for o in left)))
    new = sorted(new, key=lambda o: o.name)
    taken = checkpoint.files | {o.name for o in new}
    keep = frozenset(o.name for o in listing if o.modified >= watermark and o.name in taken)
    return new, BronzeCheckpoint(watermark, keep)
