"""CDC conformance: scripted edge cases on the real sources, checked end to end in Silver.

Each scenario of ``docs/cdc-edge-cases.md`` (items 1 to 9 and 11) scripts changes
on a real source table (a PostgreSQL and a MariaDB variant where the item applies), waits until
Bronze has captured them, ingests them into Silver tables of every variant (Copy-on-Write and
Merge-on-Read, hard and soft deletes; written under ``<silver>/_conformance`` so the workbook's
own Silver tables are not touched) and compares each Silver table with the source table on keys
and every column (through the official Hudi reader). In soft-delete mode the rows not flagged
must equal the source and every key the scenario deleted must be present with ``__deleted=true``.

Each comparison is checked to be able to fail: a copy of the Silver rows with one row tampered
(a value changed, a deleted key brought back or un-flagged) must be reported as different.

Command line (starts the local stack, loads the sample data, enables CDC and registers capture
when needed)::

    ./workbook conformance [--short] [--env local|ci] [--set KEY=VALUE] [--only NAME ...]

Example:
    >>> frame = run_scenarios(params, ["deletes_postgres"])  # doctest: +SKIP
    >>> frame[["scenario", "table_type", "delete_mode", "status"]]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import logging
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from helpers.bronze.read import bronze_files, read_bronze, read_bronze_arrow
from helpers.bronze.replay import replay_topic
from helpers.capture import connector_specs
from helpers.capture.backends import EmbeddedBackend, wait_until_running
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.register import local_endpoints
from helpers.checks.compare import SOFT_FLAG, compare_rows, is_flagged
from helpers.errors import CheckError, ParamsError, SourceError, WorkbookError
from helpers.hudi.read import read_snapshot
from helpers.naming import table_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.ingest import ingest_table
from helpers.silver.tables import table_config
from helpers.sources.changes import toast_default_identity
from helpers.sources.connect import read_table
from helpers.sources.local.stack import LocalStack

__all__ = [
    "SCENARIOS",
    "Scenario",
    "Target",
    "conformance_params",
    "failed_scenarios",
    "run_scenarios",
    "tamper_rows",
]

log = logging.getLogger(__name__)

#: Silver variants every scenario is checked in: (table type, delete mode).
VARIANTS: tuple[tuple[str, str], ...] = (
    ("COPY_ON_WRITE", "hard"),
    ("COPY_ON_WRITE", "soft"),
    ("MERGE_ON_READ", "hard"),
    ("MERGE_ON_READ", "soft"),
)
_SHORT_TYPE = {"COPY_ON_WRITE": "cow", "MERGE_ON_READ": "mor"}


@dataclass(frozen=True)
class Target:
    """A source table checked by a scenario, and how its Silver variants are keyed/partitioned."""

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

    def variant(self, table_type: str, delete_mode: str) -> SilverTableParams:
        """The Silver table of one variant (``c_<table>[_p]_<cow|mor>_<hard|soft>``)."""
        part = "_p" if self.partition else ""
        return SilverTableParams(
            name=f"c_{self.table}{part}_{_SHORT_TYPE[table_type]}_{delete_mode}",
            source=self.source,
            table=self.table,
            record_key=self.key,
            partition=self.partition,
            table_type=table_type,  # type: ignore[arg-type]
            delete_mode=delete_mode,  # type: ignore[arg-type]
        )

    def variants(self) -> list[SilverTableParams]:
        """Every variant's Silver table (see :data:`VARIANTS`)."""
        return [self.variant(t, m) for t, m in VARIANTS]


CATEGORY = Target("ems", "category", ("catid",))
CATEGORY_BY_GROUP = Target("ems", "category", ("catid",), ("catgroup",))
VENUE = Target("ems", "venue", ("venueid",))
EVENT = Target("ems", "event", ("eventid",))
ORDERS = Target("orders", "orders", ("order_id",))
ORDER_ITEMS = Target("orders", "order_items", ("order_id", "line_no"))
SALE = Target("ecomm", "sale", ("salesid",))
SALE_BY_QTY = Target("ecomm", "sale", ("salesid",), ("qtysold",))
DATE = Target("ecomm", "date", ("dateid",))
ALL_TARGETS = (CATEGORY, CATEGORY_BY_GROUP, VENUE, EVENT, ORDERS, ORDER_ITEMS, SALE, SALE_BY_QTY, DATE)


def conformance_params(params: WorkbookParams, silver_root: str | Path | None = None) -> WorkbookParams:
    """The parameters the scenarios ingest with: every variant table, under their own Silver root.

    Args:
        params: the workbook's parameters.
        silver_root: where the variant tables live (default ``<lake.silver>/_conformance``).

    Returns:
        A copy of ``params`` whose ``silver.tables`` are the variants and ``lake.silver`` the root;
        the variants are not registered in the catalog (``silver.sync`` off: they are the checks'
        scratch tables, not the workbook's).
    """
    root = Path(silver_root) if silver_root else params.path(params.lake.silver) / "_conformance"
    tables = tuple(v for t in ALL_TARGETS for v in t.variants())
    return params.model_copy(
        update={
            "lake": params.lake.model_copy(update={"silver": str(root)}),
            "silver": params.silver.model_copy(update={"tables": tables, "sync": False}),
        }
    )


# --- comparison (pure) -----------------------------------------------------------------------


class _Tampered:
    """A value equal to nothing (what a tampered cell holds)."""

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<tampered>"


def tamper_rows(
    silver: Sequence[Mapping[str, Any]],
    key: Sequence[str],
    focus: Sequence[tuple[Any, ...]],
    deleted: Sequence[tuple[Any, ...]],
    delete_mode: str,
) -> list[dict[str, Any]]:
    """A copy of Silver's rows with one row damaged, for the negative check of a comparison.

    A deleted key is brought back (hard mode: a live row with that key; soft mode: its flag
    cleared); otherwise one non-key column of the first focus key's row (or of any row) gets a
    value equal to nothing.

    Returns:
        The damaged copy (the input is not changed).
    """
    rows = [dict(r) for r in silver]
    present = {tuple(r.get(c) for c in key) for r in rows}
    for k in map(tuple, deleted):
        if delete_mode == "soft":
            for r in rows:
                if tuple(r.get(c) for c in key) == k and is_flagged(r):
                    r[SOFT_FLAG] = False
                    return rows
        if k not in present:  # (a key deleted and inserted again is live: damage a value instead)
            template = dict(rows[0]) if rows else {}
            template.update(dict(zip(key, k, strict=True)))
            template[SOFT_FLAG] = False
            rows.append(template)
            return rows
    wanted = {tuple(f) for f in focus}
    live = [
        r for r in rows if not (delete_mode == "soft" and is_flagged(r))
    ]  # a flagged row's values are not compared
    candidates = [r for r in live if tuple(r.get(c) for c in key) in wanted] or live
    if candidates:
        row = candidates[0]
        for c in row:
            if c not in key and not c.startswith("_hoodie") and c != SOFT_FLAG and not c.startswith("__"):
                row[c] = _Tampered()
                break
    return rows


# --- the running pipeline ----------------------------------------------------------------------


def wait_for_bronze(
    params: WorkbookParams, target: Target, *, timeout_s: float = 90.0, bronze_root: str | Path | None = None
) -> None:
    """Wait until Bronze of the target's topic replays to the source table.

    Raises:
        SourceError: when it has not after ``timeout_s`` (the differences are named).
    """
    root = bronze_root or params.path(params.lake.bronze)
    deadline = time.monotonic() + timeout_s
    while True:
        source = read_table(params, target.source, target.table)
        problems = compare_rows(
            source,
            replay_topic(root, target.topic(params), target.key),
            target.key,
        )
        if not problems:
            return
        if time.monotonic() > deadline:
            raise SourceError(
                f"Failed to capture the changes of {target.label} into Bronze within {timeout_s:.0f} s: "
                + "; ".join(problems)
            )
        time.sleep(0.5)


# --- scenario context -------------------------------------------------------------------------


@dataclass
class ScenarioContext:
    """What a scenario script works with: the workbook parameters, the variant parameters, and
    what it records (keys it touched and deleted per target, notes, ingestion results)."""

    params: WorkbookParams
    cparams: WorkbookParams
    targets: tuple[Target, ...]
    focus: dict[Target, list[tuple[Any, ...]]] = field(default_factory=dict)
    deleted: dict[Target, list[tuple[Any, ...]]] = field(default_factory=dict)
    gone: dict[Target, list[tuple[Any, ...]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ingested: dict[str, list[Any]] = field(default_factory=dict)
    bronze_root: Path | None = None
    scratch: Path | None = None
    mirror: bool = False

    @contextlib.contextmanager
    def postgres(self, source: str, *, autocommit: bool = True) -> Iterator[Any]:
        """A connection to a PostgreSQL source's database."""

        with LocalStack(self.params).connect_postgres(
            self.params.source(source).database, autocommit=autocommit
        ) as c:
            yield c

    @contextlib.contextmanager
    def mariadb(self) -> Iterator[Any]:
        """A cursor on the MariaDB source's database (autocommit: one commit per statement)."""

        conn = LocalStack(self.params).connect_mariadb(self.params.source("ecomm").database, autocommit=True)
        try:
            with conn.cursor() as cur:
                yield cur
        finally:
            conn.close()

    def touch(self, target: Target, *keys: tuple[Any, ...]) -> None:
        """Record keys the scenario changed (the negative check tampers with one of them)."""
        self.focus.setdefault(target, []).extend(keys)

    def delete(self, target: Target, *keys: tuple[Any, ...], ingested: bool = True) -> None:
        """Record keys the scenario deleted for good.

        Args:
            target: the table.
            keys: the keys.
            ingested: whether Silver held the row before the delete (soft mode must then keep it
                flagged). A row inserted and deleted between two ingestion rounds never reaches
                Silver: the writer drops deletes of keys it does not hold, in soft mode too, so
                such keys are only required to be absent from the live rows.
        """
        (self.deleted if ingested else self.gone).setdefault(target, []).extend(keys)
        self.touch(target, *keys)

    def use_scratch(self, label: str) -> None:
        """From now on ingest from a scratch Bronze root (a mirror of the captured files that the
        scenario may add to) into scratch Silver tables, leaving the real Bronze untouched."""
        self.scratch = (
            Path(self.cparams.path(self.cparams.lake.silver)) / "_scratch" / f"{label}-{uuid.uuid4().hex[:8]}"
        )
        self.bronze_root = self.scratch / "bronze"
        self.mirror = True
        self.cparams = self.cparams.model_copy(
            update={
                "lake": self.cparams.lake.model_copy(
                    update={"bronze": str(self.bronze_root), "silver": str(self.scratch / "silver")}
                )
            }
        )

    def _mirror(self, target: Target) -> None:

        assert self.bronze_root is not None
        real = self.params.path(self.params.lake.bronze)
        for path in bronze_files(real, target.topic(self.params)):
            dest = self.bronze_root / path.relative_to(real)
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest.with_name("." + dest.name))
                os.replace(dest.with_name("." + dest.name), dest)

    def sync(self, targets: Sequence[Target] | None = None) -> None:
        """Wait until Bronze holds the changes, then ingest every variant of the targets."""

        for target in targets or self.targets:
            wait_for_bronze(self.params, target, bronze_root=None if self.mirror else self.bronze_root)
            if self.mirror:
                self._mirror(target)
            for table in target.variants():
                result = ingest_table(self.cparams, table)
                self.ingested.setdefault(table.name, []).append(result)


def _next_key(ctx: ScenarioContext, target: Target, column: str) -> int:
    """One past the largest key in the source and in every Silver variant (keys a soft-delete
    table still holds are not reused unless the scenario means to)."""
    rows = read_table(ctx.params, target.source, target.table)
    top = max((int(r[column]) for r in rows), default=0)
    for table in target.variants():
        base = Path(ctx.cparams.path(ctx.cparams.lake.silver)) / table.name
        if Path(base, ".hoodie", "hoodie.properties").exists():
            values = read_snapshot(str(base), columns=[column]).column(column).to_pylist()
            top = max([top, *(int(v) for v in values if v is not None)])
    return top + 1


def _sale_template(cur: Any) -> dict[str, Any]:
    cur.execute("SELECT * FROM sale ORDER BY salesid LIMIT 1")
    row = cur.fetchone()
    if row is None:
        raise SourceError("Failed to script a sale: ecomm.sale is empty (run notebook 01)")
    return dict(zip([d[0] for d in cur.description], row, strict=True))


def _insert_sale(cur: Any, salesid: int, template: Mapping[str, Any], **values: Any) -> None:
    row = {**template, **values, "salesid": salesid}
    cols = ", ".join(f"`{c}`" for c in row)
    marks = ", ".join(["%s"] * len(row))
    cur.execute(f"INSERT INTO sale ({cols}) VALUES ({marks})", tuple(row.values()))  # noqa: S608 - column names from the table


# --- scenario scripts ----------------------------------------------------------------------------


def _deletes_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY, "catid")
    ids = [k, k + 1, k + 2]
    with ctx.postgres("ems") as c:
        for i in ids:
            c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', %s, 'to delete')", (i, f"del{i}"))
    ctx.sync()  # k and k+1 are in Silver before they are deleted
    with ctx.postgres("ems") as c:
        for i in ids[:2]:
            c.execute("DELETE FROM ems.category WHERE catid = %s", (i,))
        c.execute(
            "INSERT INTO ems.category VALUES (%s, 'Scripted', %s, 'short-lived')", (k + 3, f"del{k + 3}")
        )
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 3,))  # inserted and deleted in one batch
    ctx.delete(CATEGORY, (k,), (k + 1,))
    ctx.delete(CATEGORY, (k + 3,), ingested=False)
    ctx.touch(CATEGORY, (k + 2,))
    ctx.sync()
    _check_tombstones(ctx, CATEGORY, [(k,), (k + 1,), (k + 3,)])


def _deletes_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)
        for i in (k, k + 1, k + 2):
            _insert_sale(cur, i, template)
    ctx.sync()
    with ctx.mariadb() as cur:
        for i in (k, k + 1):
            cur.execute("DELETE FROM sale WHERE salesid = %s", (i,))
        _insert_sale(cur, k + 3, template)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 3,))
    ctx.delete(SALE, (k,), (k + 1,))
    ctx.delete(SALE, (k + 3,), ingested=False)
    ctx.touch(SALE, (k + 2,))
    ctx.sync()
    _check_tombstones(ctx, SALE, [(k,), (k + 1,), (k + 3,)])


def _check_tombstones(ctx: ScenarioContext, target: Target, keys: list[tuple[Any, ...]]) -> None:
    """What Bronze holds for the deleted keys: one delete event each, and no null-value event
    (the connectors set ``tombstones.on.delete=false``; ingestion read every event above)."""

    events = read_bronze(
        ctx.bronze_root or ctx.params.path(ctx.params.lake.bronze),
        target.topic(ctx.params),
    )
    tombstones = [e for e in events if all(e.get(c) is None for c in target.key)]
    deletes = [
        e for e in events if e.get("__deleted") == "true" and tuple(e[c] for c in target.key) in set(keys)
    ]
    ctx.notes.append(
        f"Bronze: {len(deletes)} delete event(s) for {len(keys)} deleted keys, {len(tombstones)} tombstone(s)"
    )
    if tombstones:
        ctx.problems.append(
            f"Bronze holds {len(tombstones)} null-value (tombstone) event(s) on {target.topic(ctx.params)}"
        )
    if len({tuple(e[c] for c in target.key) for e in deletes}) != len(keys):
        ctx.problems.append(f"Bronze lacks delete events for some of {keys}")


def _delete_reinsert_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'first', 'v1')", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'gone', 'v1')", (k + 1,))
    ctx.sync()
    with ctx.postgres("ems") as c:  # separate commits, one ingestion batch
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'second', 'v2')", (k,))
    with ctx.postgres("ems", autocommit=False) as c, c.transaction():  # one transaction
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'third', 'v3')", (k,))
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'back', 'v2')", (k + 1,))
        c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))
    ctx.touch(CATEGORY, (k,))
    ctx.delete(CATEGORY, (k + 1,))
    ctx.sync()
    with ctx.postgres("ems") as c:  # deleted in one batch, re-inserted in the next
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'again', 'v4')", (k + 1,))
    ctx.deleted[CATEGORY].remove((k + 1,))
    ctx.sync()


def _delete_reinsert_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)
        _insert_sale(cur, k, template, qtysold=1)
        _insert_sale(cur, k + 1, template, qtysold=1)
    ctx.sync()
    with ctx.mariadb() as cur:
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))
        _insert_sale(cur, k, template, qtysold=2)
        cur.execute("BEGIN")
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))
        _insert_sale(cur, k, template, qtysold=3)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))
        _insert_sale(cur, k + 1, template, qtysold=2)
        cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))
        cur.execute("COMMIT")
    ctx.touch(SALE, (k,))
    ctx.delete(SALE, (k + 1,))
    ctx.sync()
    with ctx.mariadb() as cur:
        _insert_sale(cur, k + 1, template, qtysold=4)
    ctx.deleted[SALE].remove((k + 1,))
    ctx.sync()


def _rapid_updates_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'rapid', 'u0')", (k,))
        for n in range(1, 6):  # five commits within a few milliseconds
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (f"u{n}", k))
    with ctx.postgres("ems", autocommit=False) as c, c.transaction():  # and five in one transaction
        for n in range(6, 11):
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (f"u{n}", k))
    ctx.touch(CATEGORY, (k,))
    ctx.sync()


def _rapid_updates_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        _insert_sale(cur, k, _sale_template(cur), qtysold=1, commission="0.00")
        for n in range(1, 6):  # source.ts_ms has 1-second resolution: only the binlog orders these
            cur.execute("UPDATE sale SET qtysold = %s, commission = %s WHERE salesid = %s", (n, f"{n}.00", k))
        cur.execute("BEGIN")
        for n in (6, 7, 8):
            cur.execute("UPDATE sale SET qtysold = %s, commission = %s WHERE salesid = %s", (n, f"{n}.00", k))
        cur.execute("COMMIT")
    ctx.touch(SALE, (k,))
    ctx.sync()


def _redelivery(
    ctx: ScenarioContext, target: Target, update: Callable[[str], None], key: tuple[Any, ...]
) -> None:

    ctx.use_scratch(f"redelivery-{target.table}")  # the copies go to a mirror, not the real Bronze
    ctx.sync()
    root = ctx.bronze_root
    assert root is not None
    topic = target.topic(ctx.params)
    before = set(bronze_files(root, topic))
    update("old")
    ctx.sync()
    old_files = sorted(set(bronze_files(root, topic)) - before)
    update("new")
    ctx.sync()
    copies = []
    for path in old_files:  # the same events again, under a new name, after the newer ones
        stem = path.name[: -len(path.suffix)].rsplit("+", 1)[0]
        copy = path.with_name(f"{stem}+redelivered{uuid.uuid4().hex[:12]}{path.suffix}")
        tmp = copy.with_name("." + copy.name)
        shutil.copyfile(path, tmp)
        os.replace(tmp, copy)
        copies.append(copy.name)
    ctx.touch(target, key)
    taken_before = {n: len(r) for n, r in ctx.ingested.items()}
    ctx.sync()
    for name, results in ctx.ingested.items():
        files = sum(r.files for r in results[taken_before.get(name, 0) :])
        if files < len(copies):
            ctx.problems.append(f"{name} took {files} of the {len(copies)} redelivered file(s)")
    ctx.notes.append(f"redelivered {len(copies)} Bronze file(s) holding older values")
    if not copies:
        ctx.problems.append("no Bronze file held the older value to redeliver")


def _redelivery_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'redelivery', 'start')", (k,))
    ctx.sync()

    def update(value: str) -> None:
        with ctx.postgres("ems") as c:
            c.execute("UPDATE ems.category SET catdesc = %s WHERE catid = %s", (value, k))

    _redelivery(ctx, CATEGORY, update, (k,))


def _redelivery_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        _insert_sale(cur, k, _sale_template(cur), qtysold=1)
    ctx.sync()

    def update(value: str) -> None:
        with ctx.mariadb() as cur:
            cur.execute("UPDATE sale SET qtysold = %s WHERE salesid = %s", (2 if value == "old" else 3, k))

    _redelivery(ctx, SALE, update, (k,))


def _redelivery_delete_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY, "catid")

    def change(step: str) -> None:
        with ctx.postgres("ems") as c:
            if step == "old":
                c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'redelivery', 'doomed')", (k,))
            else:
                c.execute("DELETE FROM ems.category WHERE catid = %s", (k,))

    ctx.delete(CATEGORY, (k,))
    _redelivery(ctx, CATEGORY, change, (k,))


def _redelivery_delete_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")

    def change(step: str) -> None:
        with ctx.mariadb() as cur:
            if step == "old":
                _insert_sale(cur, k, _sale_template(cur), qtysold=1)
            else:
                cur.execute("DELETE FROM sale WHERE salesid = %s", (k,))

    ctx.delete(SALE, (k,))
    _redelivery(ctx, SALE, change, (k,))


def _exact_values_postgres(ctx: ScenarioContext) -> None:
    with ctx.postgres("orders") as c:
        row = c.execute(
            "SELECT order_id, line_no FROM orders.order_items ORDER BY order_id, line_no LIMIT 2"
        ).fetchall()
    if len(row) < 2:
        raise SourceError(
            "Failed to script exact values: orders.order_items has fewer than 2 rows (run notebook 01)"
        )
    (o1, l1), (o2, l2) = row
    with ctx.postgres("orders", autocommit=False) as c, c.transaction():
        c.execute(
            "UPDATE orders.order_items SET unit_price = %s WHERE order_id = %s AND line_no = %s",
            (decimal.Decimal("99999999.99"), o1, l1),
        )
        c.execute(
            "UPDATE orders.order_items SET unit_price = %s WHERE order_id = %s AND line_no = %s",
            (decimal.Decimal("0.01"), o2, l2),
        )
        c.execute(
            "UPDATE orders.orders SET updated_at = %s WHERE order_id = %s",
            (
                dt.datetime(
                    2024, 2, 29, 23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))
                ),
                o1,
            ),
        )
        c.execute(
            "UPDATE orders.orders SET ordered_at = %s WHERE order_id = %s",
            (dt.datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=dt.UTC), o1),
        )
    ctx.touch(ORDER_ITEMS, (o1, l1), (o2, l2))
    ctx.touch(ORDERS, (o1,))
    ctx.sync()


def _exact_values_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)
        _insert_sale(
            cur, k, template, pricepaid="999999.99", commission="0.01", saletime="2008-12-31 23:59:59"
        )
        _insert_sale(
            cur, k + 1, template, pricepaid="0.01", commission="149999.99", saletime="2008-01-01 00:00:00"
        )
        cur.execute(
            "UPDATE sale SET pricepaid = %s, commission = %s, saletime = %s WHERE salesid = %s",
            ("123456.78", "18518.52", "2008-06-30 12:34:56", k),
        )
    ctx.touch(SALE, (k,), (k + 1,))
    ctx.sync()


def _partition_move_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY_BY_GROUP, "catid")
    with ctx.postgres("ems") as c:
        c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'mover', 'before')", (k,))
    ctx.sync()
    with ctx.postgres("ems") as c:
        c.execute("UPDATE ems.category SET catgroup = 'Moved', catdesc = 'after' WHERE catid = %s", (k,))
    ctx.touch(CATEGORY_BY_GROUP, (k,))
    ctx.sync()
    with ctx.postgres("ems") as c:  # and back again, with a move and an update in one batch
        c.execute("UPDATE ems.category SET catgroup = 'Scripted' WHERE catid = %s", (k,))
        c.execute("UPDATE ems.category SET catdesc = 'back' WHERE catid = %s", (k,))
    ctx.sync()


def _partition_move_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE_BY_QTY, "salesid")
    with ctx.mariadb() as cur:
        _insert_sale(cur, k, _sale_template(cur), qtysold=1)
    ctx.sync()
    with ctx.mariadb() as cur:
        cur.execute("UPDATE sale SET qtysold = 7 WHERE salesid = %s", (k,))
    ctx.touch(SALE_BY_QTY, (k,))
    ctx.sync()
    with ctx.mariadb() as cur:
        cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k,))
        cur.execute("UPDATE sale SET pricepaid = 10.00 WHERE salesid = %s", (k,))
    ctx.sync()


def _add_column_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, VENUE, "venueid")
    with ctx.postgres("ems") as c:
        c.execute("ALTER TABLE ems.venue ADD COLUMN IF NOT EXISTS venueurl varchar(200)")
        c.execute(
            "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats, venueurl)"
            " VALUES (%s, 'Scripted Hall', 'Nowhere', 'NA', 100, 'https://example.com')",
            (k,),
        )
    ctx.touch(VENUE, (k,))
    ctx.sync()


def _add_column_mariadb(ctx: ScenarioContext) -> None:
    with ctx.mariadb() as cur:
        cur.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = DATABASE()"
            " AND table_name = 'date' AND column_name = 'note'"
        )
        row = cur.fetchone()
        if not row or not row[0]:
            cur.execute("ALTER TABLE `date` ADD COLUMN note varchar(50) NULL")
        cur.execute("SELECT max(dateid) FROM `date`")
        top = cur.fetchone()
        k = int(top[0]) if top and top[0] is not None else 1
        cur.execute("UPDATE `date` SET note = %s WHERE dateid = %s", (f"scripted {time.time():.0f}", k))
    ctx.touch(DATE, (k,))
    ctx.sync()


def _toast_postgres(ctx: ScenarioContext) -> None:

    result = toast_default_identity(LocalStack(ctx.params), ctx.params)
    ctx.touch(EVENT, *((k,) for k in result.keys))
    ctx.sync()
    filled = sum(r.unavailable_filled for results in ctx.ingested.values() for r in results)
    unresolved = sum(r.unavailable_unresolved for results in ctx.ingested.values() for r in results)
    ctx.notes.append(f"TOAST placeholders filled {filled}, unresolved {unresolved}")


def _out_of_order(ctx: ScenarioContext, target: Target, change: Callable[[], None]) -> None:
    """Copy the topic's Bronze files into a scratch Bronze root in shuffled rounds, all with one
    modification time, ingesting after each round into scratch Silver tables."""

    change()
    wait_for_bronze(ctx.params, target)
    real = ctx.params.path(ctx.params.lake.bronze)
    topic = target.topic(ctx.params)
    files = bronze_files(real, topic)
    scratch = (
        Path(ctx.cparams.path(ctx.cparams.lake.silver))
        / "_scratch"
        / f"{target.table}-{uuid.uuid4().hex[:8]}"
    )
    sparams = ctx.cparams.model_copy(
        update={
            "lake": ctx.cparams.lake.model_copy(
                update={"bronze": str(scratch / "bronze"), "silver": str(scratch / "silver")}
            )
        }
    )
    order = files[:]
    random.Random(20240229).shuffle(order)
    newest_first = sorted(files, key=lambda p: p.name, reverse=True)
    rounds = [newest_first[:1]]  # the newest file first: its events are newer than all others
    rest = [p for p in order if p not in rounds[0]]
    rounds += [rest[: len(rest) // 2], rest[len(rest) // 2 :]]
    stamp = time.time() - 5
    total_events = 0
    taken: dict[str, tuple[int, int]] = {}
    try:
        for part in rounds:
            for path in part:
                dest = scratch / "bronze" / path.relative_to(real)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)
                os.utime(dest, (stamp, stamp))
            for table in target.variants():
                r = ingest_table(sparams, table)
                files_n, events_n = taken.get(table.name, (0, 0))
                taken[table.name] = (files_n + r.files, events_n + r.events)

        total_events = read_bronze_arrow(files).num_rows if files else 0
        for name, (files_n, events_n) in taken.items():
            if files_n != len(files) or events_n != total_events:
                ctx.problems.append(
                    f"{name} took {files_n} file(s) / {events_n} event(s) of {len(files)} / {total_events}"
                )
        ctx.notes.append(f"{len(files)} files in 3 shuffled rounds, one mtime, {total_events} events")
        ctx.cparams = sparams  # compare the scratch tables
        ctx.scratch = scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _out_of_order_postgres(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, CATEGORY, "catid")

    def change() -> None:
        with ctx.postgres("ems") as c:
            c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'order', 'o1')", (k,))
            c.execute("INSERT INTO ems.category VALUES (%s, 'Scripted', 'order', 'o1')", (k + 1,))
        wait_for_bronze(ctx.params, CATEGORY)  # the inserts in older files than the changes below
        with ctx.postgres("ems") as c:
            c.execute("UPDATE ems.category SET catdesc = 'o2' WHERE catid = %s", (k,))
            c.execute("DELETE FROM ems.category WHERE catid = %s", (k + 1,))

    ctx.touch(CATEGORY, (k,))
    ctx.delete(CATEGORY, (k + 1,))
    _out_of_order(ctx, CATEGORY, change)


def _out_of_order_mariadb(ctx: ScenarioContext) -> None:
    k = _next_key(ctx, SALE, "salesid")

    def change() -> None:
        with ctx.mariadb() as cur:
            _insert_sale(cur, k, _sale_template(cur), qtysold=1)
            _insert_sale(cur, k + 1, _sale_template(cur), qtysold=1)
        wait_for_bronze(ctx.params, SALE)
        with ctx.mariadb() as cur:
            cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k,))
            cur.execute("DELETE FROM sale WHERE salesid = %s", (k + 1,))

    ctx.touch(SALE, (k,))
    ctx.delete(SALE, (k + 1,))
    _out_of_order(ctx, SALE, change)


def _snapshot_handover(
    ctx: ScenarioContext, source: str, target: Target, writer: Callable[[int], None]
) -> None:
    """A fresh connector (own name, slot / server id, scratch Bronze) snapshots the source while
    ``writer`` keeps changing the target table; after the hand-over Bronze and Silver must equal
    the source (nothing lost)."""

    tag = uuid.uuid4().hex[:6]
    scratch = Path(ctx.cparams.path(ctx.cparams.lake.silver)) / "_scratch" / f"handover-{source}-{tag}"
    spec = next(s for s in connector_specs(ctx.params, local_endpoints(ctx.params)) if s.source == source)
    config = dict(spec.config)
    name = f"{spec.name}-conformance-{tag}"
    config["name"] = name
    slot = f"{ctx.params.project}_conformance_{tag}"
    if spec.engine == "postgres":
        config["slot.name"] = slot
        config["slot.drop.on.stop"] = "false"
    else:
        config["database.server.id"] = str(
            ctx.params.capture.mysql_server_id + 1000 + random.Random(tag).randrange(1000)
        )
    fresh = ConnectorSpec(name, spec.engine, spec.source, config, spec.topics)
    backend = EmbeddedBackend(
        state_dir=ctx.params.state_path,
        bronze_root=scratch / "bronze",
        bronze_format=ctx.params.capture.bronze_format,
        flush_interval_ms=ctx.params.capture.flush_interval_ms,
        max_batch_size=ctx.params.capture.max_batch_size,
    )
    stop = threading.Event()
    written: list[int] = []
    errors: list[BaseException] = []

    def keep_writing() -> None:
        n = 0
        try:
            while not stop.is_set():
                writer(n)
                written.append(n)
                n += 1
                time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=keep_writing, daemon=True)
    sparams = ctx.cparams.model_copy(
        update={
            "lake": ctx.cparams.lake.model_copy(
                update={"bronze": str(scratch / "bronze"), "silver": str(scratch / "silver")}
            )
        }
    )
    try:
        thread.start()
        backend.create_or_update(fresh)
        wait_until_running(backend, name, timeout_s=240)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:  # until the snapshot is over, then a little more
            details = backend.status(name).details
            if details.get("snapshot_done") or details.get("streaming"):
                break
            if wait_bronze_equal_once(ctx.params, target, scratch / "bronze") and len(written) > 20:
                break
            time.sleep(0.2)
        time.sleep(2.0)
        stop.set()
        thread.join(30)
        if errors:
            raise errors[0]
        wait_for_bronze(ctx.params, target, bronze_root=scratch / "bronze", timeout_s=180)
        for table in target.variants():
            ctx.ingested.setdefault(table.name, []).append(ingest_table(sparams, table))
        ctx.notes.append(f"{len(written)} change(s) made while the fresh connector started and snapshotted")
        ctx.cparams = sparams
        ctx.bronze_root = scratch / "bronze"
        ctx.scratch = scratch
    finally:
        stop.set()
        thread.join(30)
        with contextlib.suppress(Exception):
            backend.delete(name)
        shutil.rmtree(backend.directory(name), ignore_errors=True)  # its offsets and history
        if spec.engine == "postgres":
            with (
                contextlib.suppress(Exception),
                LocalStack(ctx.params).connect_postgres(
                    ctx.params.source(source).database, autocommit=True
                ) as c,
            ):
                for _ in range(20):
                    row = c.execute(
                        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                    ).fetchone()
                    if row is None:
                        break
                    if not row[0]:
                        c.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                        break
                    time.sleep(0.5)


def wait_bronze_equal_once(params: WorkbookParams, target: Target, root: Path) -> bool:
    """Whether the Bronze under ``root`` replays to the source table now."""
    source = read_table(params, target.source, target.table)
    return not compare_rows(source, replay_topic(root, target.topic(params), target.key), target.key)


def _handover_postgres(ctx: ScenarioContext) -> None:
    base = _next_key(ctx, CATEGORY, "catid")

    def writer(n: int) -> None:
        with ctx.postgres("ems") as c:
            k = base + n
            c.execute("INSERT INTO ems.category VALUES (%s, 'Handover', %s, 'h0')", (k, f"h{k}"))
            if n % 3 == 1:
                c.execute("UPDATE ems.category SET catdesc = 'h1' WHERE catid = %s", (k - 1,))
            if n % 5 == 4:
                c.execute("DELETE FROM ems.category WHERE catid = %s", (k - 2,))
                ctx.delete(CATEGORY, (k - 2,), ingested=False)

    _snapshot_handover(ctx, "ems", CATEGORY, writer)


def _handover_mariadb(ctx: ScenarioContext) -> None:
    base = _next_key(ctx, SALE, "salesid")
    with ctx.mariadb() as cur:
        template = _sale_template(cur)

    def writer(n: int) -> None:
        with ctx.mariadb() as cur:
            k = base + n
            _insert_sale(cur, k, template, qtysold=1)
            if n % 3 == 1:
                cur.execute("UPDATE sale SET qtysold = 2 WHERE salesid = %s", (k - 1,))
            if n % 5 == 4:
                cur.execute("DELETE FROM sale WHERE salesid = %s", (k - 2,))
                ctx.delete(SALE, (k - 2,), ingested=False)

    _snapshot_handover(ctx, "ecomm", SALE, writer)


# --- the scenario table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One scripted edge case on one engine.

    Attributes:
        name: ``<case>_<engine>``.
        item: number in cdc-edge-cases.md.
        engine: ``postgres`` or ``mariadb``.
        targets: the source tables it checks (every Silver variant of each).
        script: what it does (None: not applicable to this engine; ``na`` says why).
        short: part of the short (CI) set.
        slow: starts a fresh connector (minutes at full scale).
        na: why the item does not apply to the engine.
    """

    name: str
    item: int
    engine: str
    targets: tuple[Target, ...]
    script: Callable[[ScenarioContext], None] | None
    short: bool = False
    slow: bool = False
    na: str = ""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("deletes_postgres", 1, "postgres", (CATEGORY,), _deletes_postgres, short=True),
        Scenario("deletes_mariadb", 1, "mariadb", (SALE,), _deletes_mariadb, short=True),
        Scenario(
            "delete_reinsert_postgres", 2, "postgres", (CATEGORY,), _delete_reinsert_postgres, short=True
        ),
        Scenario("delete_reinsert_mariadb", 2, "mariadb", (SALE,), _delete_reinsert_mariadb, short=True),
        Scenario("rapid_updates_postgres", 3, "postgres", (CATEGORY,), _rapid_updates_postgres, short=True),
        Scenario("rapid_updates_mariadb", 3, "mariadb", (SALE,), _rapid_updates_mariadb, short=True),
        Scenario("redelivery_postgres", 4, "postgres", (CATEGORY,), _redelivery_postgres, short=True),
        Scenario("redelivery_mariadb", 4, "mariadb", (SALE,), _redelivery_mariadb, short=True),
        Scenario("redelivery_delete_postgres", 4, "postgres", (CATEGORY,), _redelivery_delete_postgres),
        Scenario("redelivery_delete_mariadb", 4, "mariadb", (SALE,), _redelivery_delete_mariadb),
        Scenario("partition_move_postgres", 5, "postgres", (CATEGORY_BY_GROUP,), _partition_move_postgres),
        Scenario("partition_move_mariadb", 5, "mariadb", (SALE_BY_QTY,), _partition_move_mariadb),
        Scenario("add_column_postgres", 6, "postgres", (VENUE,), _add_column_postgres),
        Scenario("add_column_mariadb", 6, "mariadb", (DATE,), _add_column_mariadb),
        Scenario("toast_postgres", 7, "postgres", (EVENT,), _toast_postgres),
        Scenario(
            "toast_mariadb", 7, "mariadb", (), None, na="TOAST is PostgreSQL-only (MariaDB sends full rows)"
        ),
        Scenario(
            "exact_values_postgres", 8, "postgres", (ORDER_ITEMS, ORDERS), _exact_values_postgres, short=True
        ),
        Scenario("exact_values_mariadb", 8, "mariadb", (SALE,), _exact_values_mariadb, short=True),
        Scenario("out_of_order_postgres", 9, "postgres", (CATEGORY,), _out_of_order_postgres),
        Scenario("out_of_order_mariadb", 9, "mariadb", (SALE,), _out_of_order_mariadb),
        Scenario("snapshot_handover_postgres", 11, "postgres", (CATEGORY,), _handover_postgres, slow=True),
        Scenario("snapshot_handover_mariadb", 11, "mariadb", (SALE,), _handover_mariadb, slow=True),
    )
}


def short_set() -> list[str]:
    """Names of the short (CI) set: items 1, 2, 3, 4 and 8 on both engines."""
    return [n for n, s in SCENARIOS.items() if s.short]


def _check(ctx: ScenarioContext, scenario: Scenario, started: float, cap: int = 5) -> list[dict[str, Any]]:

    rows = []
    for target in scenario.targets:
        source = read_table(ctx.params, target.source, target.table)
        deleted = [tuple(k) for k in ctx.deleted.get(target, [])]
        for table in target.variants():
            base = table_config(ctx.cparams, table).base_path
            if not Path(base, ".hoodie", "hoodie.properties").exists():
                silver: list[dict[str, Any]] = []
            else:
                silver = read_snapshot(base).to_pylist()
            wanted_deleted = deleted if table.delete_mode == "soft" else []
            problems = list(ctx.problems) + compare_rows(
                source,
                silver,
                target.key,
                delete_mode=table.delete_mode,
                deleted_keys=wanted_deleted,
                partition=target.partition,
                cap=cap,
            )
            tampered = tamper_rows(silver, target.key, ctx.focus.get(target, []), deleted, table.delete_mode)
            caught = bool(
                compare_rows(
                    source,
                    tampered,
                    target.key,
                    delete_mode=table.delete_mode,
                    deleted_keys=wanted_deleted,
                    partition=target.partition,
                )
            )
            if not caught:
                problems.append("negative check: a tampered copy of Silver was not reported")
            n_live = sum(1 for r in silver if not (table.delete_mode == "soft" and is_flagged(r)))
            detail = (
                "; ".join(problems)
                if problems
                else (
                    f"equal: {len(source)} source rows, {n_live} Silver rows"
                    + (f" (+{len(silver) - n_live} flagged deleted)" if len(silver) != n_live else "")
                    + ("; " + "; ".join(ctx.notes) if ctx.notes else "")
                )
            )
            rows.append(
                {
                    "scenario": scenario.name,
                    "item": scenario.item,
                    "source": f"{scenario.engine} {target.label}",
                    "table_type": table.table_type,
                    "delete_mode": table.delete_mode,
                    "silver_table": table.name,
                    "status": "passed" if not problems else "FAILED",
                    "passed": not problems,
                    "negative_check": "detected" if caught else "MISSED",
                    "detail": detail,
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
    return rows


def run_scenario(params: WorkbookParams, name: str, *, silver_root: str | Path | None = None) -> pd.DataFrame:
    """Run one scenario; its rows of the pass/fail table (one per Silver variant)."""
    return run_scenarios(params, [name], silver_root=silver_root)


def run_scenarios(
    params: WorkbookParams,
    names: Sequence[str] | None = None,
    *,
    short: bool = False,
    silver_root: str | Path | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Run scenarios against the running local pipeline; the pass/fail table.

    The sources, capture and Bronze must be running (:func:`helpers.pipeline.ensure_pipeline`); Silver variant
    tables are written under ``silver_root`` (default ``<lake.silver>/_conformance``).

    Args:
        params: the workbook's parameters (local environment).
        names: scenarios to run (default: all, or the short set with ``short``).
        short: only the short set (items 1, 2, 3, 4, 8 on both engines; for CI).
        silver_root: where the variant Silver tables go.
        progress: show a progress bar.

    Returns:
        One row per scenario and Silver variant: scenario, item, source, table_type, delete_mode,
        silver_table, status (``passed``, ``FAILED``, ``n/a``), passed (None for n/a),
        negative_check, detail, seconds. A scenario that raises is a ``FAILED`` row naming the error.

    Raises:
        ParamsError: for an unknown scenario name (the known ones are listed).
    """
    if names is None:
        names = short_set() if short else list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ParamsError(f"Failed to find scenario(s) {unknown}: known scenarios are {list(SCENARIOS)}")
    if params.environment != "local":
        raise ParamsError("Failed to run the conformance scenarios: they script changes on the local sources")

    cparams = conformance_params(params, silver_root)
    rows: list[dict[str, Any]] = []
    for name in tqdm(names, desc="conformance", disable=not progress):
        scenario = SCENARIOS[name]
        started = time.monotonic()
        if scenario.script is None:
            rows.append(
                {
                    "scenario": name,
                    "item": scenario.item,
                    "source": scenario.engine,
                    "table_type": "",
                    "delete_mode": "",
                    "silver_table": "",
                    "status": "n/a",
                    "passed": None,
                    "negative_check": "",
                    "detail": scenario.na,
                    "seconds": 0.0,
                }
            )
            continue
        ctx = ScenarioContext(params, cparams, scenario.targets)
        try:
            scenario.script(ctx)
            rows.extend(_check(ctx, scenario, started))
        except WorkbookError as exc:
            rows.append(_error_row(scenario, exc, started))
        except Exception as exc:  # noqa: BLE001 - any failure is a failed scenario, named
            log.exception("scenario %s failed", name)
            rows.append(_error_row(scenario, exc, started))
        finally:
            if ctx.scratch is not None:
                shutil.rmtree(ctx.scratch, ignore_errors=True)
        log.info("scenario %s: %.1f s", name, time.monotonic() - started)
    return pd.DataFrame(rows)


def _error_row(scenario: Scenario, exc: BaseException, started: float) -> dict[str, Any]:
    return {
        "scenario": scenario.name,
        "item": scenario.item,
        "source": scenario.engine,
        "table_type": "*",
        "delete_mode": "*",
        "silver_table": "",
        "status": "FAILED",
        "passed": False,
        "negative_check": "",
        "detail": f"{type(exc).__name__}: {exc}",
        "seconds": round(time.monotonic() - started, 1),
    }


def failed_scenarios(frame: pd.DataFrame) -> list[str]:
    """Names of the scenarios with a ``FAILED`` row (n/a rows are not failures)."""
    if frame.empty:
        return []
    return sorted(set(frame.loc[frame["status"] == "FAILED", "scenario"]))


def scenario_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario: ``item``, ``scenario``, ``result`` (``FAILED`` when a variant failed,
    ``n/a`` when none applied, else ``passed``)."""

    def verdict(statuses: pd.Series) -> str:
        if (statuses == "FAILED").any():
            return "FAILED"
        return "n/a" if (statuses == "n/a").all() else "passed"

    return (
        frame.groupby(["item", "scenario"], sort=True)["status"].agg(verdict).rename("result").reset_index()
    )


def require_passed(frame: pd.DataFrame) -> str:
    """A one-line account when no scenario failed.

    Raises:
        CheckError: naming each failed scenario, its Silver table and what differed.
    """
    failed = failed_scenarios(frame)
    if failed:
        details = frame[frame["status"] == "FAILED"][["scenario", "silver_table", "detail"]]
        raise CheckError(f"Conformance scenarios failed: {failed}\n{details.to_string(index=False)}")
    return f"{frame['scenario'].nunique()} scenarios, none failed"
