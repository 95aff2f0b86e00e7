"""Table configuration of the Python Hudi v6 writer.

One frozen :class:`HudiTableConfig` describes a table: where it lives, its type, its record key,
partitioning, ordering (precombine) fields, delete mode and the file sizing / compaction /
cleaning knobs. It maps one to one onto what ``hoodie.properties`` records plus the writer-side
options of Hudi's Spark datasource.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from helpers.errors import HudiError

__all__ = [
    "COPY_ON_WRITE",
    "MERGE_ON_READ",
    "DELETE_MARKER_FIELD",
    "SOFT_DELETE_FIELD",
    "HudiTableConfig",
    "Operation",
    "TableType",
    "DeleteMode",
]

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"

#: Input column that marks a row as a delete inside an upsert batch (Hudi's own convention).
DELETE_MARKER_FIELD = "_hoodie_is_deleted"
#: Column that soft-delete tables carry: ``true`` for deleted rows, ``false`` otherwise.
SOFT_DELETE_FIELD = "__deleted"

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
DeleteMode = Literal["hard", "soft"]
Operation = Literal["bulk_insert", "insert", "upsert", "delete"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class HudiTableConfig:
    """Everything the writer needs to know about one Hudi table.

    Attributes:
        table_name: ``hoodie.table.name`` (letters, digits, underscore).
        base_path: local directory of the table (created on the first write).
        table_type: ``"COPY_ON_WRITE"`` or ``"MERGE_ON_READ"``.
        record_key_fields: one field (SimpleKeyGenerator, key ``1``) or several
            (ComplexKeyGenerator, key ``id:1,name:Alice``).
        partition_fields: partition path fields; empty means a non-partitioned table
            (NonpartitionedKeyGenerator).
        hive_style_partitioning: directories named ``field=value`` instead of ``value``.
        ordering_fields: fields compared as a tuple to pick the newest change of a key, e.g.
            ``("_binlog_file", "_binlog_pos", "_binlog_row")``. The first one is recorded as
            ``hoodie.table.precombine.field`` (readers support one field only; see
            :mod:`helpers.hudi.writer` for why the writer's filtering keeps that correct).
        delete_mode: ``"hard"`` removes deleted keys; ``"soft"`` keeps the row with
            ``__deleted=true``.
        database_name: ``hoodie.database.name`` (input of the table checksum).
        target_file_size_bytes: upper bound for new base files (estimated from record sizes).
        small_file_limit_bytes: base files below this size receive new inserts first.
        inline_compaction_delta_commits: MoR only: compact after this many delta commits
            since the last compaction; 0 disables inline compaction.
        cleaner_commits_retained: keep the file slices needed by the last N commits;
            0 disables cleaning.
        parquet_compression: codec of base files.
        bloom_filter: write Hudi's DYNAMIC_V0 bloom filter into base file footers (needed only
            by Java writers using the BLOOM index; costs ~430 KB per file like Java's).
        lock_timeout_seconds: how long a writer waits for another live writer.
    """

    table_name: str
    base_path: str
    table_type: TableType = "COPY_ON_WRITE"
    record_key_fields: tuple[str, ...] = ("id",)
    partition_fields: tuple[str, ...] = ()
    hive_style_partitioning: bool = True
    ordering_fields: tuple[str, ...] = ()
    delete_mode: DeleteMode = "hard"
    database_name: str = "default"
    target_file_size_bytes: int = 120 * 1024 * 1024
    small_file_limit_bytes: int = 100 * 1024 * 1024
    inline_compaction_delta_commits: int = 5
    cleaner_commits_retained: int = 10
    parquet_compression: str = "snappy"
    bloom_filter: bool = True
    lock_timeout_seconds: float = 60.0
    extra_properties: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        """Validate the configuration.

        Raises:
            HudiError: when a field has an invalid value.
        """
        problems: list[str] = []
        if not _NAME_RE.match(self.table_name):
            problems.append(f"table_name {self.table_name!r} must match {_NAME_RE.pattern}")
        if self.table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
            problems.append(f"table_type {self.table_type!r} must be COPY_ON_WRITE or MERGE_ON_READ")
        if not self.record_key_fields:
            problems.append("record_key_fields must name at least one field")
        if self.delete_mode not in ("hard", "soft"):
            problems.append(f"delete_mode {self.delete_mode!r} must be 'hard' or 'soft'")
        if self.target_file_size_bytes <= 0 or self.small_file_limit_bytes < 0:
            problems.append("file sizes must be positive")
        if self.inline_compaction_delta_commits < 0 or self.cleaner_commits_retained < 0:
            problems.append("inline_compaction_delta_commits and cleaner_commits_retained must be >= 0")
        for name in (*self.record_key_fields, *self.partition_fields, *self.ordering_fields):
            if not isinstance(name, str) or not name:
                problems.append(f"invalid field name {name!r}")
        if problems:
            raise HudiError(
                f"Failed to validate Hudi table config {self.table_name!r}: " + "; ".join(problems)
            )

    @property
    def is_mor(self) -> bool:
        """Whether the table is Merge-on-Read."""
        return self.table_type == MERGE_ON_READ

    @property
    def precombine_field(self) -> str | None:
        """The single ordering field recorded in ``hoodie.properties`` (first ordering field)."""
        return self.ordering_fields[0] if self.ordering_fields else None

    @property
    def keygen_class(self) -> str:
        """The Java key generator class whose key format the writer reproduces."""
        if not self.partition_fields:
            return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
        if len(self.record_key_fields) > 1 or len(self.partition_fields) > 1:
            return "org.apache.hudi.keygen.ComplexKeyGenerator"
        return "org.apache.hudi.keygen.SimpleKeyGenerator"
