"""The catalogue of edge cases, and running one on the local sources (``./workbook changes``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helpers.environments import implementations
from helpers.errors import ParamsError
from helpers.params import WorkbookParams
from helpers.sources.edge_cases import mariadb as maria
from helpers.sources.edge_cases import postgres as pg
from helpers.sources.edge_cases.session import (
    CATEGORY,
    CATEGORY_BY_GROUP,
    DATE,
    EVENT,
    ORDER_ITEMS,
    ORDERS,
    SALE,
    SALE_BY_QTY,
    VENUE,
    EditSession,
    RecordingSession,
    Target,
)

__all__ = ["EDGE_CASES", "EdgeCase", "EdgeCaseResult", "apply_edge_case"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EdgeCase:
    """One scripted edge case on one engine.

    Attributes:
        name: ``<case>_<engine>``.
        item: its number in ``docs/cdc-edge-cases.md`` (13 to 15: the day-2 cases).
        engine: ``postgres`` or ``mariadb``.
        tables: the source tables it edits.
        script: the script, run through an :class:`~.session.EditSession`.
    """

    name: str
    item: int
    engine: str
    tables: tuple[Target, ...]
    script: Callable[[EditSession], None]

    @property
    def summary(self) -> str:
        """The first sentence of the script's docstring, as plain text."""
        paragraph = (self.script.__doc__ or "").strip().split("\n\n")[0]
        text = " ".join(paragraph.split()).replace("``", "")
        return text.split(". ")[0].rstrip(".")


EDGE_CASES: dict[str, EdgeCase] = {
    c.name: c
    for c in (
        EdgeCase("deletes_postgres", 1, "postgres", (CATEGORY,), pg.deletes),
        EdgeCase("deletes_mariadb", 1, "mariadb", (SALE,), maria.deletes),
        EdgeCase("delete_reinsert_postgres", 2, "postgres", (CATEGORY,), pg.delete_reinsert),
        EdgeCase("delete_reinsert_mariadb", 2, "mariadb", (SALE,), maria.delete_reinsert),
        EdgeCase("rapid_updates_postgres", 3, "postgres", (CATEGORY,), pg.rapid_updates),
        EdgeCase("rapid_updates_mariadb", 3, "mariadb", (SALE,), maria.rapid_updates),
        EdgeCase("burst_postgres", 4, "postgres", (CATEGORY,), pg.burst),
        EdgeCase("partition_move_postgres", 5, "postgres", (CATEGORY_BY_GROUP,), pg.partition_move),
        EdgeCase("partition_move_mariadb", 5, "mariadb", (SALE_BY_QTY,), maria.partition_move),
        EdgeCase("add_column_postgres", 6, "postgres", (VENUE,), pg.add_column),
        EdgeCase("add_column_mariadb", 6, "mariadb", (DATE,), maria.add_column),
        EdgeCase("toast_postgres", 7, "postgres", (EVENT,), pg.toast),
        EdgeCase("toast_full_identity_postgres", 7, "postgres", (EVENT,), pg.toast_full_identity),
        EdgeCase("exact_values_postgres", 8, "postgres", (ORDER_ITEMS, ORDERS), pg.exact_values),
        EdgeCase("exact_values_mariadb", 8, "mariadb", (SALE,), maria.exact_values),
        EdgeCase("truncate_postgres", 13, "postgres", (CATEGORY,), pg.truncate),
        EdgeCase("truncate_mariadb", 13, "mariadb", (DATE,), maria.truncate),
    )
}


@dataclass
class EdgeCaseResult:
    """What a case did at the source.

    Attributes:
        scenario: its name.
        topic: the Bronze topic of the first table it changed.
        keys: the keys it changed in that table (a single-column key as its value).
        deleted: the keys it deleted there for good.
        statements: every statement run, in commit order (values bound, shown as text).
        note: what Silver must do with it.
    """

    scenario: str
    topic: str
    keys: list[Any] = field(default_factory=list)
    deleted: list[Any] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)
    note: str = ""


def _values(keys: list[tuple[Any, ...]]) -> list[Any]:
    return [k[0] if len(k) == 1 else k for k in keys]


def apply_edge_case(params: WorkbookParams, name: str) -> EdgeCaseResult:
    """Run one edge case on the local sources, recording what it did.

    Raises:
        ParamsError: for an unknown case (the known ones are listed), or outside the local profiles.
        SourceError: when the sources are not ready for it.
    """
    if name not in EDGE_CASES:
        raise ParamsError(f"Failed to find edge case {name!r}: known cases are {sorted(EDGE_CASES)}")
    if not implementations(params).local_servers:
        raise ParamsError(f"Failed to run edge case {name}: scripted changes run on the local sources only")
    case = EDGE_CASES[name]
    session = RecordingSession(params)
    started = time.monotonic()
    case.script(session)
    seconds = time.monotonic() - started
    log.info("edge case %s: %d statements in %.2f s", name, len(session.statements), seconds)
    first = next(iter(session.touched), case.tables[0])
    return EdgeCaseResult(
        scenario=name,
        topic=first.topic(params),
        keys=_values(session.touched.get(first, [])),
        deleted=_values(session.deleted.get(first, [])),
        statements=session.statements,
        note=case.summary,
    )
