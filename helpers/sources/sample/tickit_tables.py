"""The TICKIT tables: columns with their Arrow and SQL types, primary keys and row counts per scale.

The seven tables keep the column names and types of the TICKIT sample database documented for
Amazon Redshift (``sales`` is called ``sale`` here, as in ``params/base.yaml``);
:mod:`helpers.sources.sample.tickit` generates their rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa

__all__ = [
    "DOCUMENTED_ROW_COUNTS",
    "LIKE_COLUMNS",
    "TABLES",
    "TABLE_NAMES",
    "Column",
    "TableSpec",
    "arrow_schema",
    "expected_row_counts",
]

TABLE_NAMES: tuple[str, ...] = ("category", "date", "venue", "users", "event", "listing", "sale")
"""Table names in dependency order (referenced tables first)."""

DOCUMENTED_ROW_COUNTS: dict[str, int] = {
    "category": 11,
    "date": 365,
    "event": 8_798,
    "listing": 192_497,
    "sale": 172_456,
    "users": 49_990,
    "venue": 202,
}
"""Row counts of the TICKIT sample at scale 1.0 (424,319 rows)."""

# category and date stay whole at every scale so the data stays coherent
_FIXED_TABLES = frozenset({"category", "date"})
# users needs two rows so that a buyer can differ from the seller
_MINIMUM_ROWS = {"users": 2}


@dataclass(frozen=True)
class Column:
    """One column of a TICKIT table.

    Attributes:
        name: column name.
        arrow_type: the exact Arrow type of the generated column.
        sql_type: the SQL type (PostgreSQL spelling; :mod:`helpers.sources.sample.ddl` maps it for MariaDB).
        nullable: whether the column allows NULL (TICKIT declares the keys ``NOT NULL``).
    """

    name: str
    arrow_type: pa.DataType
    sql_type: str
    nullable: bool = True


@dataclass(frozen=True)
class TableSpec:
    """One TICKIT table: its columns and primary key."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]

    @property
    def column_names(self) -> list[str]:
        """The column names in table order."""
        return [c.name for c in self.columns]


_MONEY = pa.decimal128(8, 2)
_TS = pa.timestamp("us")
LIKE_COLUMNS = (
    "likesports",
    "liketheatre",
    "likeconcerts",
    "likejazz",
    "likeclassical",
    "likeopera",
    "likerock",
    "likevegas",
    "likebroadway",
    "likemusicals",
)
"""The ``users`` preference columns (boolean, often NULL)."""

TABLES: dict[str, TableSpec] = {
    "users": TableSpec(
        "users",
        (
            Column("userid", pa.int32(), "integer", False),
            Column("username", pa.string(), "char(8)"),
            Column("firstname", pa.string(), "varchar(30)"),
            Column("lastname", pa.string(), "varchar(30)"),
            Column("city", pa.string(), "varchar(30)"),
            Column("state", pa.string(), "char(2)"),
            Column("email", pa.string(), "varchar(100)"),
            Column("phone", pa.string(), "char(14)"),
            *(Column(name, pa.bool_(), "boolean") for name in LIKE_COLUMNS),
        ),
        ("userid",),
    ),
    "venue": TableSpec(
        "venue",
        (
            Column("venueid", pa.int16(), "smallint", False),
            Column("venuename", pa.string(), "varchar(100)"),
            Column("venuecity", pa.string(), "varchar(30)"),
            Column("venuestate", pa.string(), "char(2)"),
            Column("venueseats", pa.int32(), "integer"),
        ),
        ("venueid",),
    ),
    "category": TableSpec(
        "category",
        (
            Column("catid", pa.int16(), "smallint", False),
            Column("catgroup", pa.string(), "varchar(10)"),
            Column("catname", pa.string(), "varchar(10)"),
            Column("catdesc", pa.string(), "varchar(50)"),
        ),
        ("catid",),
    ),
    "date": TableSpec(
        "date",
        (
            Column("dateid", pa.int16(), "smallint", False),
            Column("caldate", pa.date32(), "date", False),
            Column("day", pa.string(), "char(3)", False),
            Column("week", pa.int16(), "smallint", False),
            Column("month", pa.string(), "char(5)", False),
            Column("qtr", pa.string(), "char(5)", False),
            Column("year", pa.int16(), "smallint", False),
            Column("holiday", pa.bool_(), "boolean"),
        ),
        ("dateid",),
    ),
    "event": TableSpec(
        "event",
        (
            Column("eventid", pa.int32(), "integer", False),
            Column("venueid", pa.int16(), "smallint", False),
            Column("catid", pa.int16(), "smallint", False),
            Column("dateid", pa.int16(), "smallint", False),
            Column("eventname", pa.string(), "varchar(200)"),
            Column("starttime", _TS, "timestamp"),
        ),
        ("eventid",),
    ),
    "listing": TableSpec(
        "listing",
        (
            Column("listid", pa.int32(), "integer", False),
            Column("sellerid", pa.int32(), "integer", False),
            Column("eventid", pa.int32(), "integer", False),
            Column("dateid", pa.int16(), "smallint", False),
            Column("numtickets", pa.int16(), "smallint", False),
            Column("priceperticket", _MONEY, "decimal(8,2)"),
            Column("totalprice", _MONEY, "decimal(8,2)"),
            Column("listtime", _TS, "timestamp"),
        ),
        ("listid",),
    ),
    "sale": TableSpec(
        "sale",
        (
            Column("salesid", pa.int32(), "integer", False),
            Column("listid", pa.int32(), "integer", False),
            Column("sellerid", pa.int32(), "integer", False),
            Column("buyerid", pa.int32(), "integer", False),
            Column("eventid", pa.int32(), "integer", False),
            Column("dateid", pa.int16(), "smallint", False),
            Column("qtysold", pa.int16(), "smallint", False),
            Column("pricepaid", _MONEY, "decimal(8,2)"),
            Column("commission", _MONEY, "decimal(8,2)"),
            Column("saletime", _TS, "timestamp"),
        ),
        ("salesid",),
    ),
}
"""The TICKIT tables by name (``sale`` is TICKIT's ``sales``)."""


def expected_row_counts(scale: float) -> dict[str, int]:
    """Return the number of rows :func:`helpers.sources.sample.tickit.generate_tickit` makes per table.

    ``category`` and ``date`` keep their 11 and 365 rows; the other tables get
    ``round(documented * scale)`` rows (half up), at least one (``users`` at least two, so that
    a buyer can differ from the seller).

    Args:
        scale: 1.0 for the documented TICKIT row counts; must be > 0.

    Returns:
        Table name -> row count, in :data:`TABLE_NAMES` order.

    Raises:
        ValueError: if ``scale`` is not positive.
    """
    if not scale > 0:
        raise ValueError(f"Failed to compute TICKIT row counts: scale must be > 0, got {scale!r}")
    counts: dict[str, int] = {}
    for name in TABLE_NAMES:
        documented = DOCUMENTED_ROW_COUNTS[name]
        if name in _FIXED_TABLES:
            counts[name] = documented
        else:
            # Decimal(str(...)) so that 192497 * 0.01 rounds as written, not as the float says
            scaled = int((Decimal(documented) * Decimal(str(scale))).to_integral_value("ROUND_HALF_UP"))
            counts[name] = max(_MINIMUM_ROWS.get(name, 1), scaled)
    return counts


def arrow_schema(table: str) -> pa.Schema:
    """Return the exact Arrow schema of a generated TICKIT table.

    Args:
        table: one of :data:`TABLE_NAMES`.

    Returns:
        The schema, NOT NULL columns marked non-nullable.

    Raises:
        KeyError: for an unknown table name.
    """
    spec = TABLES[table]
    return pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in spec.columns])
