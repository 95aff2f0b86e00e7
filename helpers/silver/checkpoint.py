"""Which Bronze files a Silver table has taken: a checkpoint kept inside the table's commits.

Every ingestion commit carries in ``extraMetadata``, atomically with its data, the files it took and
the state after it (a watermark plus the names of recent files). :func:`plan_round` picks the new
files, :func:`latest_checkpoint` reads the state; Bronze is listed locally or on S3. Why each file
is taken exactly once: ``docs/architecture.md``, "Silver ingestion".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from helpers.bronze.read import bronze_files
from helpers.errors import HudiError

__all__ = [
    "CHECKPOINT_KEY",
    "FILES_KEY",
    "BronzeCheckpoint",
    "BronzeObject",
    "BronzeStore",
    "LocalBronze",
    "S3Bronze",
    "latest_checkpoint",
    "plan_round",
]

FILES_KEY = "workbook.bronze.files"
CHECKPOINT_KEY = "workbook.bronze.checkpoint"
_SUFFIXES = (".avro", ".jsonl")


@dataclass(frozen=True)
class BronzeObject:
    """One Bronze file: its name (unique per topic), where to read it, last modification (epoch s)."""

    name: str
    uri: str
    modified: float


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


def latest_checkpoint(metadata_newest_first: Iterable[dict[str, Any]]) -> BronzeCheckpoint:
    """The state in the newest commit that has one.

    Commits written before the checkpoint existed carry only their own files: those are united
    (watermark 0), which is exact while the timeline is complete.
    """
    legacy: set[str] = set()
    for meta in metadata_newest_first:
        extra = meta.get("extraMetadata") or {}
        if extra.get(CHECKPOINT_KEY):
            state = BronzeCheckpoint.from_json(extra[CHECKPOINT_KEY])
            return BronzeCheckpoint(state.watermark, state.files | frozenset(legacy))
        if extra.get(FILES_KEY):
            legacy.update(json.loads(extra[FILES_KEY]))
    return BronzeCheckpoint(0.0, frozenset(legacy))


def _split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
        raise HudiError(f"Failed to use {uri!r}: not an s3:// URI")
    return parsed.netloc, parsed.path.strip("/")


class BronzeStore(Protocol):
    """Where Bronze lives: lists a topic's files and reads their first bytes (Avro headers)."""

    def list(self, topic: str) -> list[BronzeObject]:
        """Every visible Bronze file of ``topic``."""
        ...

    def head(self, obj: BronzeObject, size: int = 65536) -> bytes:
        """The first ``size`` bytes of a file."""
        ...

    def read(self, obj: BronzeObject) -> bytes:
        """The whole file."""
        ...


class LocalBronze:
    """Bronze on the local file system (``lake.bronze`` a path)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def list(self, topic: str) -> list[BronzeObject]:
        """Every visible Bronze file of ``topic`` (hidden temporary files excluded)."""

        out = []
        for path in bronze_files(self.root, topic):
            try:
                out.append(BronzeObject(path.name, str(path), path.stat().st_mtime))
            except FileNotFoundError:  # removed between listing and stat
                continue
        return out

    def head(self, obj: BronzeObject, size: int = 65536) -> bytes:
        """The first ``size`` bytes of a file."""
        with open(obj.uri, "rb") as handle:
            return handle.read(size)

    def read(self, obj: BronzeObject) -> bytes:
        """The whole file (OSError when it cannot be opened: not bad input)."""
        with open(obj.uri, "rb") as handle:
            return handle.read()


class S3Bronze:
    """Bronze on S3 (``lake.bronze`` an ``s3://bucket/prefix`` URI), listed with boto3."""

    def __init__(self, s3: Any, uri: str) -> None:
        self.s3 = s3
        self.bucket, self.prefix = _split_s3(uri)

    def list(self, topic: str) -> list[BronzeObject]:
        """Every Bronze object of ``topic`` (``<prefix>/<topic>/year=/month=/day=/...``).

        Raises:
            HudiError: when S3 cannot be listed.
        """
        root = f"{self.prefix}/{topic}/" if self.prefix else f"{topic}/"
        out = []
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=root):
                for item in page.get("Contents", []):
                    name = item["Key"].rsplit("/", 1)[-1]
                    if name.startswith(".") or not name.endswith(_SUFFIXES):
                        continue
                    uri = f"s3://{self.bucket}/{item['Key']}"
                    out.append(BronzeObject(name, uri, item["LastModified"].timestamp()))
        except Exception as exc:  # noqa: BLE001 - botocore errors, re-raised with the place
            raise HudiError(f"Failed to list Bronze s3://{self.bucket}/{root}: {exc}") from None
        return sorted(out, key=lambda o: o.uri)

    def head(self, obj: BronzeObject, size: int = 65536) -> bytes:
        """The first ``size`` bytes of an object (a ranged GET)."""
        key = obj.uri.split("/", 3)[3]
        body: bytes = self.s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=0-{size - 1}")[
            "Body"
        ].read()
        return body

    def read(self, obj: BronzeObject) -> bytes:
        """The whole object (OSError when it cannot be read: not bad input)."""
        key = obj.uri.split("/", 3)[3]
        try:
            body: bytes = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as exc:  # noqa: BLE001 - botocore errors: the store, not the data
            raise OSError(f"Failed to read {obj.uri}: {exc}") from None
        return body
