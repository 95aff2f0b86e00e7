"""Where Bronze lives: the one listing of a topic's Bronze files, on the local file system or S3.

:class:`BronzeStore` lists the visible files of a topic (``<bronze>/<topic>/year=/month=/day=/``,
Avro or JSON lines, hidden temporary names left out) through :func:`helpers.lake_store.open_store`,
so a folder and an ``s3://`` prefix are listed by the same code (one S3 lister in the package).
The Silver checkpoint chooses among these files; Spark's executors read them
(:mod:`helpers.bronze.frames`).

Example:
    >>> store = BronzeStore("lake/bronze")                        # doctest: +SKIP
    >>> [f.name for f in store.list("tickit.ems.category")][:1]   # doctest: +SKIP
    ['tickit.ems.category+00000000000023592016+00000000000023592016+3f2a9c1d4e5f.avro']
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import BronzeError, WorkbookError
from helpers.lake_store import LakeStore, is_s3, open_store, read_if_present

__all__ = ["BRONZE_SUFFIXES", "OWNER_FILE", "BronzeObject", "BronzeOwner", "BronzeStore", "is_bronze_name"]

#: The file types Bronze holds: Avro object container files and JSON lines (Connect envelopes).
BRONZE_SUFFIXES = (".avro", ".jsonl")
#: The zone's owner record, at its root beside the topic folders (no topic listing meets it):
#: which state directory's capture writes the zone (:mod:`helpers.capture.owner` claims it).
OWNER_FILE = "_capture_owner.json"


def is_bronze_name(name: str) -> bool:
    """Whether a file name is a visible Bronze file (not a hidden temporary one)."""
    return not name.startswith(".") and name.endswith(BRONZE_SUFFIXES)


@dataclass(frozen=True)
class BronzeObject:
    """One Bronze file: its name (unique per topic), where it is (a path or an ``s3://`` URI), its
    last modification (epoch s) and its size in bytes."""

    name: str
    uri: str
    modified: float
    size: int = 0

    @property
    def is_jsonl(self) -> bool:
        """Whether the file holds JSON lines (else Avro)."""
        return self.name.endswith(".jsonl")


@dataclass(frozen=True)
class BronzeOwner:
    """Whose capture writes a Bronze zone: the state directory's random id (the zone's history: a
    new one means new source servers, whose log positions start again) and its path."""

    state_id: str
    state_dir: str


class BronzeStore:
    """A Bronze zone (``lake.bronze``): a local folder or an ``s3://`` prefix.

    Args:
        root: the zone's folder or URI.
        s3: a boto3 S3 client for an ``s3://`` root (default: the lake's, see
            :func:`helpers.lake_store.use_lake_s3`).
    """

    def __init__(self, root: str | Path, s3: Any = None) -> None:
        self.root = str(root).rstrip("/")
        self.lake: LakeStore = open_store(self.root, s3)

    @property
    def is_s3(self) -> bool:
        """Whether the zone is on S3."""
        return is_s3(self.root)

    def list(self, topic: str) -> list[BronzeObject]:
        """Every visible Bronze file of ``topic``, sorted by location.

        Raises:
            BronzeError: when the zone cannot be listed (S3 errors, permissions).
        """
        try:
            entries = self.lake.list(topic, recursive=True)
        except (OSError, WorkbookError) as exc:
            raise BronzeError(f"Failed to list Bronze files of {topic} under {self.root}: {exc}") from None
        return [
            BronzeObject(e.name, e.location, e.modified, e.size) for e in entries if is_bronze_name(e.name)
        ]

    def owner(self) -> BronzeOwner | None:
        """The zone's owner record (:data:`OWNER_FILE`); None when the zone has none: made before
        owner records existed, or by a writer other than the workbook's capture (a Kafka Connect
        S3 sink on AWS).

        Raises:
            BronzeError: when the record is there but cannot be read or parsed.
        """
        location = "/".join((self.root, OWNER_FILE))
        try:
            data = read_if_present(self.lake, OWNER_FILE)
            if data is None:
                return None
            record = json.loads(data)
            return BronzeOwner(str(record["state_id"]), str(record.get("state_dir", "unknown")))
        except (OSError, WorkbookError, ValueError, KeyError, TypeError) as exc:
            raise BronzeError(
                f"Failed to read the owner of Bronze zone {self.root} from {location}: {exc}"
            ) from None

    def copy(self, obj: BronzeObject, destination: LakeStore, relative: str) -> str:
        """Copy one file byte for byte into ``destination`` (a store of the same kind: its bytes
        never pass through Python, see :meth:`helpers.lake_store.LakeStore.copy`); its new location.

        Raises:
            BronzeError: naming both places, when the copy fails.
        """
        try:
            return destination.copy(obj.uri, relative)
        except (OSError, WorkbookError) as exc:
            raise BronzeError(
                f"Failed to copy Bronze file {obj.uri} to {destination.root}/{relative}: {exc}"
            ) from None
