"""File-system view: file groups and slices visible on the timeline (format notes F.1)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from helpers.hudi.format import parse_base_file_name, parse_log_file_name
from helpers.hudi.timeline import completed_instants, read_commit_metadata

__all__ = ["FileSlice", "FileGroup", "load_file_groups", "list_partition_dirs"]


@dataclass(frozen=True)
class FileSlice:
    """A base file (optional) plus the log files appended to it."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None
    base_size: int
    log_files: tuple[str, ...]
    log_sizes: tuple[int, ...]

    @property
    def total_size(self) -> int:
        """Bytes of base and log files."""
        return self.base_size + sum(self.log_sizes)

    def rel(self, name: str) -> str:
        """Path of a file of this slice relative to the base path.

        Args:
            name: file name.

        Returns:
            ``<partition>/<name>`` or ``<name>``.
        """
        return f"{self.partition_path}/{name}" if self.partition_path else name

    @property
    def next_log_version(self) -> int:
        """Version number for a new log file of this slice."""
        versions = [parse_log_file_name(n) for n in self.log_files]
        return 1 + max((v.version for v in versions if v is not None), default=0)


@dataclass(frozen=True)
class FileGroup:
    """All visible slices of one file id, oldest first."""

    partition_path: str
    file_id: str
    slices: tuple[FileSlice, ...]

    @property
    def latest(self) -> FileSlice:
        """The newest slice."""
        return self.slices[-1]


def list_partition_dirs(base_path: str) -> list[str]:
    """Directories (relative, ``""`` for the base path) that hold data files.

    Args:
        base_path: table base path.

    Returns:
        Sorted relative paths.
    """
    found: list[str] = []
    for root, dirs, files in os.walk(base_path):
        rel = os.path.relpath(root, base_path)
        if rel == ".":
            rel = ""
            dirs[:] = [d for d in dirs if d != ".hoodie" and not d.startswith(("__MACOSX", "."))]
        if any(f.endswith(".parquet") or ".log." in f for f in files):
            found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def load_file_groups(base_path: str, as_of: str | None = None) -> list[FileGroup]:
    """File groups of a table built from storage listing and completed instants.

    Files of instants that are not completed are ignored (as readers do); groups replaced by a
    completed replacecommit are dropped.

    Args:
        base_path: table base path.
        as_of: only consider instants up to this one.

    Returns:
        File groups sorted by (partition, file id).
    """
    instants = [i for i in completed_instants(base_path) if as_of is None or i.timestamp <= as_of]
    completed = {i.timestamp for i in instants}
    replaced: set[tuple[str, str]] = set()
    for inst in instants:
        if inst.action == "replacecommit":
            meta = read_commit_metadata(base_path, inst)
            for partition, ids in (meta.get("partitionToReplaceFileIds") or {}).items():
                replaced.update((partition, fid) for fid in ids)
    groups: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
    for partition in list_partition_dirs(base_path):
        directory = os.path.join(base_path, partition) if partition else base_path
        for entry in os.scandir(directory):
            if not entry.is_file():
                continue
            base = parse_base_file_name(entry.name)
            if base is not None:
                if base.instant not in completed:
                    continue
                slot = groups.setdefault((partition, base.file_id), {}).setdefault(
                    base.instant, {"base": None, "size": 0, "logs": []}
                )
                slot["base"] = entry.name
                slot["size"] = entry.stat().st_size
                continue
            log = parse_log_file_name(entry.name)
            if log is not None and log.base_instant in completed:
                slot = groups.setdefault((partition, log.file_id), {}).setdefault(
                    log.base_instant, {"base": None, "size": 0, "logs": []}
                )
                logs = slot["logs"]
                assert isinstance(logs, list)
                logs.append((log.version, entry.name, entry.stat().st_size))
    result: list[FileGroup] = []
    for (partition, fid), by_instant in sorted(groups.items()):
        if (partition, fid) in replaced:
            continue
        slices = []
        for base_instant in sorted(by_instant):
            slot = by_instant[base_instant]
            logs = sorted(slot["logs"])  # type: ignore[call-overload]
            base_name = slot["base"]
            size = slot["size"]
            assert base_name is None or isinstance(base_name, str)
            assert isinstance(size, int)
            slices.append(
                FileSlice(
                    partition,
                    fid,
                    base_instant,
                    base_name,
                    size,
                    tuple(n for _, n, _ in logs),
                    tuple(s for _, _, s in logs),
                )
            )
        result.append(FileGroup(partition, fid, tuple(slices)))
    return result
