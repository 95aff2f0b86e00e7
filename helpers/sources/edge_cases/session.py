"""What an edge-case script works with: the tables it edits and the session it edits them through."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
import pymysql

from helpers.naming import table_topic
from helpers.params import WorkbookParams
from helpers.sources.connect import connect, max_value

__all__ = [
    "CATEGORY",
    "CATEGORY_BY_GROUP",
    "DATE",
    "EVENT",
    "ORDERS",
    "ORDER_ITEMS",
    "SALE",
    "SALE_BY_QTY",
    "VENUE",
    "EditSession",
    "RecordingSession",
    "Target",
]


@dataclass(frozen=True)
class Target:
    """A source table an edge case edits: its key, and the partition field its Silver table is laid
    out by when the case is about partitions (a row that moves between them)."""

    source: str
    table: str
    key: tuple[str, ...]
    partition: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``source.table`` (plus the partition field)."""
        part = f" by {','.join(self.partition)}" if self.partition else ""
        return f"{self.source}.{self.table}{part}"

    def topic(self, params: WorkbookParams) -> str:
        """The table's Bronze topic."""
        return table_topic(params, self.source, self.table)


CATEGORY = Target("ems", "category", ("catid",))
CATEGORY_BY_GROUP = Target("ems", "category", ("catid",), ("catgroup",))
VENUE = Target("ems", "venue", ("venueid",))
EVENT = Target("ems", "event", ("eventid",))
ORDERS = Target("orders", "orders", ("order_id",))
ORDER_ITEMS = Target("orders", "order_items", ("order_id", "line_no"))
SALE = Target("ecomm", "sale", ("salesid",))
SALE_BY_QTY = Target("ecomm", "sale", ("salesid",), ("qtysold",))
DATE = Target("ecomm", "date", ("dateid",))


class EditSession(Protocol):
    """What a script needs: connections, sync points, and a record of the keys it changed."""

    params: WorkbookParams

    def postgres(self, source: str, *, autocommit: bool = True) -> AbstractContextManager[Any]:
        """A psycopg connection to a PostgreSQL source's database."""

    def mariadb(self, source: str = "ecomm") -> AbstractContextManager[Any]:
        """A cursor on a MariaDB source's database, autocommit (one commit per statement)."""

    def next_key(self, target: Target, column: str) -> int:
        """A key value no row of the table has, nor had where that still matters."""

    def sync(self) -> None:
        """What was done so far may now be ingested (one ingestion round ends here)."""

    def touch(self, target: Target, *keys: tuple[Any, ...]) -> None:
        """Record keys the script changed."""

    def delete(self, target: Target, *keys: tuple[Any, ...], ingested: bool = True) -> None:
        """Record keys the script deleted for good; ``ingested``: a sync point came between the
        row's insert and its delete (False: inserted and deleted within one round)."""

    def undelete(self, target: Target, key: tuple[Any, ...]) -> None:
        """A key recorded as deleted was inserted again."""


def _statement(query: Any, args: Any) -> str:
    text = query.as_string(None) if hasattr(query, "as_string") else str(query)
    return f"{text} -- {args}" if args else text


@dataclass
class RecordingSession:
    """An :class:`EditSession` that only records: the keys changed and deleted per table, and
    every statement run, in order (values bound, shown as text). Sync points do nothing: the
    capture and Silver jobs pick the changes up on their own schedule."""

    params: WorkbookParams
    touched: dict[Target, list[tuple[Any, ...]]] = field(default_factory=dict)
    deleted: dict[Target, list[tuple[Any, ...]]] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def postgres(self, source: str, *, autocommit: bool = True) -> Iterator[Any]:
        log = self.statements

        class Recording(psycopg.Cursor[Any]):  # psycopg's cursor_factory: the hook for every execute
            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                log.append(_statement(query, params))
                return super().execute(query, params, **kwargs)

            def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
                rows = list(params_seq)
                log.append(_statement(query, f"{len(rows)} rows"))
                super().executemany(query, rows, **kwargs)

        with connect(self.params, source, autocommit=autocommit) as conn:
            conn.cursor_factory = Recording
            yield conn

    @contextlib.contextmanager
    def mariadb(self, source: str = "ecomm") -> Iterator[Any]:
        log = self.statements

        class Recording(pymysql.cursors.Cursor):  # PyMySQL's cursor class: the hook for every execute
            def execute(self, query: str, args: Any = None) -> int:
                log.append(_statement(query, args))
                return int(super().execute(query, args))

        with connect(self.params, source, autocommit=True) as conn, conn.cursor(Recording) as cur:
            yield cur

    def next_key(self, target: Target, column: str) -> int:
        """One past the largest value of ``column`` at the source."""
        return int(max_value(self.params, target.source, target.table, column) or 0) + 1

    def sync(self) -> None:
        return None

    def touch(self, target: Target, *keys: tuple[Any, ...]) -> None:
        self.touched.setdefault(target, []).extend(keys)

    def delete(self, target: Target, *keys: tuple[Any, ...], ingested: bool = True) -> None:
        self.deleted.setdefault(target, []).extend(keys)
        self.touch(target, *keys)

    def undelete(self, target: Target, key: tuple[Any, ...]) -> None:
        self.deleted[target].remove(key)
