"""The ``.hoodie`` timeline (layout version 1): instants, state files and their contents.

File names per action/state follow ``hudi-v6-format.md`` B.2 (legacy ``<t>.inflight`` for
commits). Commit metadata is Jackson-style pretty JSON (B.3); rollback, clean and compaction
files are Avro object container files whose writer schemas are the ones the Spark-written
rollback fixture carries (rollback) or Hudi's published ``.avsc`` shapes (clean, compaction).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import fastavro

from helpers.errors import HudiError
from helpers.hudi.format import fsync_write

__all__ = [
    "Instant",
    "WriteStat",
    "hoodie_dir",
    "list_instants",
    "completed_instants",
    "pending_instants",
    "latest_instant_time",
    "instant_file_name",
    "write_instant_file",
    "delete_instant_files",
    "commit_metadata_json",
    "read_commit_metadata",
    "avro_container_bytes",
    "read_avro_container",
    "ROLLBACK_PLAN_SCHEMA",
    "ROLLBACK_METADATA_SCHEMA",
    "CLEANER_PLAN_SCHEMA",
    "CLEAN_METADATA_SCHEMA",
    "COMPACTION_PLAN_SCHEMA",
    "DATA_ACTIONS",
]

#: Actions whose completed instants readers load (hudi-rs) and that carry JSON commit metadata.
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


@dataclass
class WriteStat:
    """Write statistics of one file written by a commit (Hudi ``HoodieWriteStat``)."""

    fileId: str
    path: str
    partitionPath: str
    prevCommit: str = "null"
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    fileSizeInBytes: int = 0
    totalLogRecords: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogBlocks: int = 0
    totalRollbackBlocks: int = 0
    createTimeMs: int = 0
    upsertTimeMs: int = 0
    scanTimeMs: int = 0
    logVersion: int | None = None
    baseFile: str | None = None
    logFiles: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The stat object in Spark's key order (B.3).

        Returns:
            JSON-ready dict.
        """
        out: dict[str, Any] = {
            "fileId": self.fileId,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prevCommit,
            "numWrites": self.numWrites,
            "numDeletes": self.numDeletes,
            "numUpdateWrites": self.numUpdateWrites,
            "numInserts": self.numInserts,
            "totalWriteBytes": self.totalWriteBytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partitionPath,
            "totalLogRecords": self.totalLogRecords,
            "totalLogFilesCompacted": self.totalLogFilesCompacted,
            "totalLogSizeCompacted": self.totalLogSizeCompacted,
            "totalUpdatedRecordsCompacted": self.totalUpdatedRecordsCompacted,
            "totalLogBlocks": self.totalLogBlocks,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": self.totalRollbackBlocks,
            "fileSizeInBytes": self.fileSizeInBytes,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": {
                "totalScanTime": self.scanTimeMs,
                "totalUpsertTime": self.upsertTimeMs,
                "totalCreateTime": self.createTimeMs,
            },
        }
        if self.logVersion is not None:
            out["logVersion"] = self.logVersion
            out["logOffset"] = 0
            out["baseFile"] = self.baseFile or ""
            out["logFiles"] = list(self.logFiles or [])
            out["recordsStats"] = {"val": None}
        out.update(self.extra)
        return out

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of the dataclass fields (picklable, for Spark rows).

        Returns:
            Field values.
        """
        return asdict(self)


def hoodie_dir(base_path: str) -> str:
    """Path of the ``.hoodie`` folder.

    Args:
        base_path: table base path.

    Returns:
        ``<base_path>/.hoodie``.
    """
    return os.path.join(base_path, ".hoodie")


def _parse(name: str) -> tuple[str, str, str] | None:
    match = _INSTANT_RE.match(name)
    if not match:
        return None
    ts, action, state = match.group(1), match.group(2), match.group(3)
    if action == "inflight" and state is None:  # legacy commit inflight
        return ts, "commit", "INFLIGHT"
    if action not in _KNOWN_ACTIONS:
        return None
    return ts, action, {"requested": "REQUESTED", "inflight": "INFLIGHT", None: "COMPLETED"}[state]


def list_instants(base_path: str) -> list[Instant]:
    """All instants on the active timeline, each in its most advanced state, in time order.

    A compaction whose ``<t>.commit`` exists is reported once, as a completed ``commit``.

    Args:
        base_path: table base path.

    Returns:
        Instants sorted by (timestamp, action).
    """
    directory = hoodie_dir(base_path)
    rank = {"REQUESTED": 0, "INFLIGHT": 1, "COMPLETED": 2}
    best: dict[tuple[str, str], Instant] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        parsed = _parse(entry.name)
        if parsed is None or not entry.is_file():
            continue
        ts, action, state = parsed
        inst = Instant(ts, action, state, entry.name, entry.stat().st_mtime)
        current = best.get((ts, action))
        if current is None or rank[state] > rank[current.state]:
            best[(ts, action)] = inst
    completed_commits = {ts for (ts, action), i in best.items() if action == "commit" and i.is_completed}
    result = [
        i for (ts, action), i in best.items() if not (action == "compaction" and ts in completed_commits)
    ]
    return sorted(result, key=lambda i: (i.timestamp, i.action))


def completed_instants(base_path: str, actions: Iterable[str] = DATA_ACTIONS) -> list[Instant]:
    """Completed instants of the given actions, oldest first.

    Args:
        base_path: table base path.
        actions: action names to keep.

    Returns:
        The instants.
    """
    wanted = set(actions)
    return [i for i in list_instants(base_path) if i.is_completed and i.action in wanted]


def pending_instants(base_path: str) -> list[Instant]:
    """Requested or inflight instants without a completed file.

    Args:
        base_path: table base path.

    Returns:
        The pending instants, oldest first.
    """
    return [i for i in list_instants(base_path) if not i.is_completed]


def latest_instant_time(base_path: str) -> str | None:
    """Greatest instant time of any state and action on the timeline.

    Args:
        base_path: table base path.

    Returns:
        The instant or None on an empty timeline.
    """
    instants = list_instants(base_path)
    return max((i.timestamp for i in instants), default=None)


def instant_file_name(timestamp: str, action: str, state: str) -> str:
    """File name of an instant in a state (B.2; ``<t>.inflight`` for commits).

    Args:
        timestamp: instant time.
        action: action name.
        state: ``REQUESTED``, ``INFLIGHT`` or ``COMPLETED``.

    Returns:
        The file name.
    """
    if state == "COMPLETED":
        return f"{timestamp}.{action}"
    if state == "INFLIGHT":
        return f"{timestamp}.inflight" if action == "commit" else f"{timestamp}.{action}.inflight"
    return f"{timestamp}.{action}.requested"


def write_instant_file(base_path: str, timestamp: str, action: str, state: str, content: bytes = b"") -> str:
    """Write an instant file atomically (temp file, fsync, rename).

    Args:
        base_path: table base path.
        timestamp: instant time.
        action: action name.
        state: ``REQUESTED``, ``INFLIGHT`` or ``COMPLETED``.
        content: file content.

    Returns:
        Path written.

    Raises:
        HudiCommitError: never directly; OS errors propagate to the caller that wraps them.
    """
    path = os.path.join(hoodie_dir(base_path), instant_file_name(timestamp, action, state))
    fsync_write(path, content)
    return path


def delete_instant_files(base_path: str, timestamp: str, action: str) -> None:
    """Remove the requested and inflight files of an instant (after a rollback).

    Args:
        base_path: table base path.
        timestamp: instant time.
        action: action name.
    """
    for state in ("INFLIGHT", "REQUESTED"):
        path = os.path.join(hoodie_dir(base_path), instant_file_name(timestamp, action, state))
        if os.path.exists(path):
            os.remove(path)


def commit_metadata_json(
    stats: Iterable[WriteStat],
    *,
    schema_json: str,
    operation_type: str,
    compacted: bool = False,
    partitions: Iterable[str] = (),
    extra: dict[str, str] | None = None,
) -> bytes:
    """Commit metadata (B.3) as Jackson-style pretty JSON bytes.

    Args:
        stats: write stats of every file written.
        schema_json: Avro schema of the data columns (extraMetadata.schema).
        operation_type: ``UPSERT``, ``INSERT``, ``BULK_INSERT``, ``DELETE``, ``COMPACT``...
        compacted: True for compaction commits.
        partitions: partitions to list even without stats.
        extra: more extraMetadata entries.

    Returns:
        UTF-8 JSON.
    """
    by_partition: dict[str, list[dict[str, Any]]] = {p: [] for p in partitions}
    for stat in stats:
        by_partition.setdefault(stat.partitionPath, []).append(stat.to_json())
    extra_metadata = {"schema": schema_json}
    extra_metadata.update(extra or {})
    doc = {
        "partitionToWriteStats": by_partition,
        "compacted": compacted,
        "extraMetadata": extra_metadata,
        "operationType": operation_type,
    }
    return json.dumps(doc, indent=2, separators=(",", " : ")).encode("utf-8")


def read_commit_metadata(base_path: str, instant: Instant) -> dict[str, Any]:
    """Parse the JSON metadata of a completed commit/deltacommit/replacecommit.

    Args:
        base_path: table base path.
        instant: a completed data instant.

    Returns:
        The parsed JSON.

    Raises:
        HudiError: if the file is not valid JSON.
    """
    path = os.path.join(hoodie_dir(base_path), instant.file_name)
    try:
        with open(path, "rb") as handle:
            parsed: dict[str, Any] = json.loads(handle.read() or b"{}")
        return parsed
    except ValueError as exc:
        raise HudiError(f"Failed to read commit metadata {path}: {exc}") from exc


# ----------------------------------------------------------------------------------------------
# Avro metadata files
# ----------------------------------------------------------------------------------------------

_STR = {"type": "string", "avro.java.string": "String"}
_INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [{"name": "commitTime", "type": _STR}, {"name": "action", "type": _STR}],
}
ROLLBACK_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "instantToRollback", "type": ["null", _INSTANT_INFO], "default": None},
        {
            "name": "RollbackRequests",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieRollbackRequest",
                        "fields": [
                            {"name": "partitionPath", "type": _STR},
                            {"name": "fileId", "type": ["null", _STR], "default": None},
                            {"name": "latestBaseInstant", "type": ["null", _STR], "default": None},
                            {
                                "name": "filesToBeDeleted",
                                "type": {"type": "array", "items": _STR},
                                "default": [],
                            },
                            {
                                "name": "logBlocksToBeDeleted",
                                "type": [
                                    "null",
                                    {"type": "map", "values": "long", "avro.java.string": "String"},
                                ],
                                "default": None,
                            },
                        ],
                    },
                },
            ],
            "default": None,
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}
ROLLBACK_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "startRollbackTime", "type": _STR},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": _STR}},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "avro.java.string": "String",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": _STR},
                        {"name": "successDeleteFiles", "type": {"type": "array", "items": _STR}},
                        {"name": "failedDeleteFiles", "type": {"type": "array", "items": _STR}},
                        {
                            "name": "rollbackLogFiles",
                            "type": ["null", {"type": "map", "values": "long", "avro.java.string": "String"}],
                            "default": None,
                        },
                        {
                            "name": "logFilesFromFailedCommit",
                            "type": ["null", {"type": "map", "values": "long", "avro.java.string": "String"}],
                            "default": None,
                        },
                    ],
                },
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "instantsRollback",
            "type": {"type": "array", "items": "HoodieInstantInfo", "default": []},
            "default": [],
        },
    ],
}
# HoodieInstantInfo must be defined before use: put it into the first schema that references it.
ROLLBACK_METADATA_SCHEMA["fields"][-1]["type"]["items"] = _INSTANT_INFO

_ACTION_INSTANT = {
    "type": "record",
    "name": "HoodieActionInstant",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "timestamp", "type": "string"},
        {"name": "action", "type": "string"},
        {"name": "state", "type": "string"},
    ],
}
CLEANER_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "earliestInstantToRetain", "type": ["null", _ACTION_INSTANT], "default": None},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "policy", "type": "string"},
        {
            "name": "filesToBeDeletedPerPartition",
            "type": ["null", {"type": "map", "values": {"type": "array", "items": "string"}}],
            "default": None,
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "filePathsToBeDeletedPerPartition",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieCleanFileInfo",
                            "fields": [
                                {"name": "filePath", "type": ["null", "string"], "default": None},
                                {"name": "isBootstrapBaseFile", "type": ["null", "boolean"], "default": None},
                            ],
                        },
                    },
                },
            ],
            "default": None,
        },
        {
            "name": "partitionsToBeDeleted",
            "type": ["null", {"type": "array", "items": "string"}],
            "default": None,
        },
    ],
}
_CLEAN_PARTITION = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "policy", "type": "string"},
        {"name": "deletePathPatterns", "type": {"type": "array", "items": "string"}},
        {"name": "successDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "failedDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "isPartitionDeleted", "type": ["null", "boolean"], "default": None},
    ],
}
CLEAN_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "policy", "type": "string", "default": ""},
        {"name": "startCleanTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": "string"},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "bootstrapPartitionMetadata",
            "type": ["null", {"type": "map", "values": "HoodieCleanPartitionMetadata"}],
            "default": None,
        },
    ],
}
COMPACTION_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {
            "name": "operations",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieCompactionOperation",
                        "fields": [
                            {"name": "baseInstantTime", "type": ["null", "string"]},
                            {
                                "name": "deltaFilePaths",
                                "type": ["null", {"type": "array", "items": "string"}],
                                "default": None,
                            },
                            {"name": "dataFilePath", "type": ["null", "string"], "default": None},
                            {"name": "fileId", "type": ["null", "string"]},
                            {"name": "partitionPath", "type": ["null", "string"], "default": None},
                            {
                                "name": "metrics",
                                "type": ["null", {"type": "map", "values": "double"}],
                                "default": None,
                            },
                            {"name": "externalDataFilePath", "type": ["null", "string"], "default": None},
                        ],
                    },
                },
            ],
            "default": None,
        },
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}


def avro_container_bytes(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """One record as an Avro object container file (``Obj\\x01`` magic, embedded schema).

    Args:
        schema: writer schema.
        record: the datum.

    Returns:
        File bytes.
    """
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), [record], codec="null")
    return buffer.getvalue()


def read_avro_container(path: str) -> list[dict[str, Any]]:
    """Records of an Avro container file (rollback/clean/compaction metadata).

    Args:
        path: file path.

    Returns:
        The records.
    """
    with open(path, "rb") as handle:
        return [r for r in fastavro.reader(handle) if isinstance(r, dict)]
