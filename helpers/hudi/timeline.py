"""Reading a Hudi table's active timeline (``.hoodie/``, layout version 1 of table version 6).

The official writer keeps the timeline; the workbook only reads it, to find the instants readers
can travel to and the commit metadata it stores its own state in (the Bronze checkpoint, tombstone
and quarantine records: :mod:`helpers.silver.checkpoint`). Table version 6 names instant files
``<instant>.<action>[.requested|.inflight]`` (a commit's inflight is ``<instant>.inflight``), and
commit / delta commit / replace commit metadata is JSON. Works on a local path or an ``s3://`` URI
(:mod:`helpers.lake_store`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from helpers.errors import HudiError, WaitTimeoutError
from helpers.lake_store import LakeStore, is_s3, join, open_store
from helpers.poll import wait_until

__all__ = [
    "DATA_ACTIONS",
    "Instant",
    "commit_metadata_newest_first",
    "completed_instants",
    "hoodie_dir",
    "latest_instant_time",
    "list_instants",
    "pending_instants",
    "read_commit_metadata",
    "table_exists",
    "write_stats",
]

#: Actions whose completed instants hold data and carry JSON commit metadata.
DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")
_KNOWN_ACTIONS = (
    "commit",
    "deltacommit",
    "replacecommit",
    "clean",
    "rollback",
    "compaction",
    "savepoint",
    "restore",
    "indexing",
)
_INSTANT_RE = re.compile(r"^(\d{14,17})\.([a-z]+)(?:\.(requested|inflight))?$")


@dataclass(frozen=True)
class Instant:
    """One instant of the timeline in its most advanced state."""

    timestamp: str
    action: str
    state: str  # "REQUESTED" | "INFLIGHT" | "COMPLETED"
    file_name: str
    modified_time: float

    @property
    def is_completed(self) -> bool:
        """Whether the completed file exists."""
        return self.state == "COMPLETED"


def hoodie_dir(base_path: str) -> str:
    """``<base_path>/.hoodie``."""
    return join(str(base_path), ".hoodie")


#: The table's properties, and the copy Hudi's writer keeps while it rewrites them.
_PROPERTIES = ("hoodie.properties", "hoodie.properties.backup")


def table_exists(base_path: str) -> bool:
    """Whether a Hudi table is at ``base_path`` (a path or an ``s3://`` URI).

    A table is there when ``.hoodie/hoodie.properties`` is, or the backup Hudi's writer makes
    before it deletes and writes that file again (Hudi 0.14's streamer does so on every commit:
    ``docs/streamer.md``, "Traps of 0.14.0"), so a check during a rewrite does not say "no table".
    The backup is removed only once the new file is written, so the file is looked for again last.
    """
    folder = hoodie_dir(base_path)
    if is_s3(str(base_path)):
        return any(e.name in _PROPERTIES for e in open_store(folder).list(""))
    props, backup = (os.path.join(folder, name) for name in _PROPERTIES)
    return os.path.exists(props) or os.path.exists(backup) or os.path.exists(props)


def _parse(name: str) -> tuple[str, str, str] | None:
    match = _INSTANT_RE.match(name)
    if not match:
        return None
    ts, action, state = match.group(1), match.group(2), match.group(3)
    if action == "inflight" and state is None:  # a commit's inflight: <t>.inflight
        return ts, "commit", "INFLIGHT"
    if action not in _KNOWN_ACTIONS:
        return None
    return ts, action, {"requested": "REQUESTED", "inflight": "INFLIGHT", None: "COMPLETED"}[state]


def list_instants(base_path: str, store: LakeStore | None = None) -> list[Instant]:
    """All instants on the active timeline, each in its most advanced state, in time order.

    A compaction whose ``<t>.commit`` exists is reported once, as a completed ``commit``.

    Args:
        base_path: table base path or URI.
        store: where to list (default :func:`helpers.lake_store.open_store` of the base path).

    Returns:
        Instants sorted by (timestamp, action); none for a table not written yet.
    """
    base = str(base_path)
    store = store or open_store(base)
    rank = {"REQUESTED": 0, "INFLIGHT": 1, "COMPLETED": 2}
    best: dict[tuple[str, str], Instant] = {}
    relative = (
        ".hoodie" if store.root.rstrip("/") == base.rstrip("/") else hoodie_dir(base)[len(store.root) :]
    )
    for entry in store.list(relative):
        parsed = _parse(entry.name)
        if parsed is None:
            continue
        ts, action, state = parsed
        inst = Instant(ts, action, state, entry.name, entry.modified)
        current = best.get((ts, action))
        if current is None or rank[state] > rank[current.state]:
            best[(ts, action)] = inst
    completed_commits = {ts for (ts, action), i in best.items() if action == "commit" and i.is_completed}
    result = [
        i for (ts, action), i in best.items() if not (action == "compaction" and ts in completed_commits)
    ]
    return sorted(result, key=lambda i: (i.timestamp, i.action))


def completed_instants(
    base_path: str, actions: Iterable[str] = DATA_ACTIONS, store: LakeStore | None = None
) -> list[Instant]:
    """Completed instants of the given actions, oldest first."""
    wanted = set(actions)
    return [i for i in list_instants(base_path, store) if i.is_completed and i.action in wanted]


def pending_instants(base_path: str, store: LakeStore | None = None) -> list[Instant]:
    """Requested or inflight instants without a completed file, oldest first."""
    return [i for i in list_instants(base_path, store) if not i.is_completed]


def latest_instant_time(base_path: str, store: LakeStore | None = None) -> str | None:
    """Greatest instant time of any state and action (None on an empty timeline)."""
    return max((i.timestamp for i in list_instants(base_path, store)), default=None)


def read_commit_metadata(base_path: str, instant: Instant, store: LakeStore | None = None) -> dict[str, Any]:
    """The JSON metadata of a completed commit / deltacommit / replacecommit.

    Raises:
        HudiError: if the file is not valid JSON.
    """
    store = store or open_store(str(base_path))
    location = join(hoodie_dir(str(base_path)), instant.file_name)

    def parsed() -> tuple[dict[str, Any]] | None:  # the writer creates the file, then writes it
        try:
            raw = store.read(location)
            return (dict(json.loads(raw)),) if raw.strip() else None
        except ValueError:
            return None  # a half-written file; read again
        except OSError as exc:
            raise HudiError(f"Failed to read commit metadata {location}: {exc}") from exc

    try:
        return wait_until(parsed, timeout_s=2.0, what=f"commit metadata {location}", interval_s=0.05)[0]
    except WaitTimeoutError:
        pass
    try:
        return dict(json.loads(store.read(location) or b"{}"))
    except ValueError as exc:
        raise HudiError(f"Failed to read commit metadata {location}: {exc}") from exc


def write_stats(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The write statistics of a commit's metadata (``partitionToWriteStats``), one per file."""
    return [s for stats in (meta.get("partitionToWriteStats") or {}).values() for s in stats or []]


def commit_metadata_newest_first(base_path: str, store: LakeStore | None = None) -> Iterator[dict[str, Any]]:
    """The metadata of the completed data commits, newest first (read lazily)."""
    store = store or open_store(str(base_path))
    for instant in reversed(completed_instants(base_path, store=store)):
        yield read_commit_metadata(base_path, instant, store)
