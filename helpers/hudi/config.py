"""What the workbook knows about one Hudi table: where it is, its type, keys and ordering.

The official writer keeps everything else (``hoodie.properties``); :class:`HudiTableConfig` is what
the workbook's own steps around it need: the record key format (tombstones, TOAST lookups), the
ordering field (the precombine field), the delete mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from helpers.errors import HudiError

__all__ = [
    "COPY_ON_WRITE",
    "DELETE_MARKER_FIELD",
    "MERGE_ON_READ",
    "SOFT_DELETE_FIELD",
    "DeleteMode",
    "HudiTableConfig",
    "TableType",
    "delete_field",
]

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"

#: Column that marks a row as a delete inside an upsert batch (Hudi's own convention).
DELETE_MARKER_FIELD = "_hoodie_is_deleted"
#: Column that soft-delete tables carry: ``true`` for deleted rows, ``false`` otherwise.
SOFT_DELETE_FIELD = "__deleted"

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
DeleteMode = Literal["hard", "soft"]


def delete_field(delete_mode: str) -> str:
    """The column that says a row is deleted: :data:`SOFT_DELETE_FIELD` in soft mode (the row
    stays, flagged), else Hudi's :data:`DELETE_MARKER_FIELD` (the upsert deletes it)."""
    return SOFT_DELETE_FIELD if delete_mode == "soft" else DELETE_MARKER_FIELD


_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class HudiTableConfig:
    """One Hudi table as the workbook sees it.

    Attributes:
        table_name: ``hoodie.table.name`` (letters, digits, underscore).
        base_path: the table's base path or ``s3://`` URI.
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        record_key_fields: one field (key ``1``) or several (key ``id:1,line:2``, Hudi's
            complex / non-partitioned key generators).
        partition_fields: partition path fields; empty: not partitioned.
        ordering_fields: the precombine field (one: table version 6 takes one).
        delete_mode: ``hard`` removes deleted keys; ``soft`` keeps the row with ``__deleted=true``.
    """

    table_name: str
    base_path: str
    table_type: TableType = "COPY_ON_WRITE"
    record_key_fields: tuple[str, ...] = ("id",)
    partition_fields: tuple[str, ...] = ()
    ordering_fields: tuple[str, ...] = ()
    delete_mode: DeleteMode = "hard"

    def __post_init__(self) -> None:
        """Validate.

        Raises:
            HudiError: naming each invalid field.
        """
        problems: list[str] = []
        if not _NAME_RE.match(self.table_name):
            problems.append(f"table_name {self.table_name!r} must match {_NAME_RE.pattern}")
        if self.table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
            problems.append(f"table_type {self.table_type!r} must be COPY_ON_WRITE or MERGE_ON_READ")
        if not self.record_key_fields:
            problems.append("record_key_fields must name at least one field")
        if len(self.ordering_fields) > 1:
            problems.append(f"ordering_fields {self.ordering_fields}: table version 6 takes one field")
        if self.delete_mode not in ("hard", "soft"):
            problems.append(f"delete_mode {self.delete_mode!r} must be 'hard' or 'soft'")
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
        """The ordering (precombine) field, if any."""
        return self.ordering_fields[0] if self.ordering_fields else None
