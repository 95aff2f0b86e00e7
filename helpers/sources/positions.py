"""Positions in a source's change log: PostgreSQL LSNs and MySQL/MariaDB binlog coordinates."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourcePosition", "binlog_index", "format_lsn", "parse_lsn"]


def format_lsn(lsn: int) -> str:
    """A PostgreSQL LSN as PostgreSQL writes it (``16/B374D848``)."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """``16/B374D848`` -> its integer value."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def binlog_index(name: str) -> int:
    """The number of a binlog file (``mariadb-bin.000003`` -> 3; -1 when it has none)."""
    suffix = name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else -1


@dataclass(frozen=True, order=False)
class SourcePosition:
    """A point in a source's log: a PostgreSQL LSN, or a MySQL/MariaDB binlog file and position.

    Attributes:
        engine: ``postgres`` or ``mysql`` (MariaDB is captured with the MySQL connector).
        lsn: PostgreSQL LSN (bytes).
        file: binlog file name.
        pos: byte position in ``file``.
    """

    engine: str
    lsn: int | None = None
    file: str | None = None
    pos: int | None = None

    def key(self) -> tuple[int, int]:
        """A sortable form (PostgreSQL ``(0, lsn)``; MySQL ``(file number, pos)``)."""
        if self.engine == "postgres":
            return (0, int(self.lsn or 0))
        return (binlog_index(self.file or ""), int(self.pos or 0))

    def reaches(self, other: SourcePosition) -> bool:
        """Whether this position is at or after ``other`` (same engine)."""
        return self.engine == other.engine and self.key() >= other.key()

    def __str__(self) -> str:
        if self.engine == "postgres":
            return format_lsn(int(self.lsn or 0))
        return f"{self.file}:{self.pos}"
