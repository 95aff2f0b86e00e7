"""What a conformance scenario works on: the edge cases' source tables and their Silver variants,
the scenario's parameters, and the :class:`ScenarioContext` a script records its changes in (an
:class:`~helpers.sources.edge_cases.session.EditSession` that ingests and checks)."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from helpers.bronze.read import bronze_files, read_bronze_arrow
from helpers.bronze.replay import replay_arrow
from helpers.checks.at_position import source_table
from helpers.checks.compare import compare_tables
from helpers.checks.divergence import DIFFERS, check_divergence
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import table_exists
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.silver.ingest import ingest_tables
from helpers.silver.tombstones import tombstone_folder
from helpers.sources.connect import connect, max_value
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
    Target,
)

__all__ = [
    "ALL_TARGETS",
    "SLICE_FROM",
    "VARIANTS",
    "ScenarioContext",
    "SharedSyncs",
    "bronze_differences",
    "conformance_params",
    "in_slice",
    "scratch_params",
    "target_rows",
    "variant",
    "variants",
    "wait_for_bronze",
]

#: Silver variants every scenario is checked in: (table type, delete mode).
VARIANTS: tuple[tuple[str, str], ...] = (
    ("COPY_ON_WRITE", "hard"),
    ("COPY_ON_WRITE", "soft"),
    ("MERGE_ON_READ", "hard"),
    ("MERGE_ON_READ", "soft"),
)
_SHORT_TYPE = {"COPY_ON_WRITE": "cow", "MERGE_ON_READ": "mor"}

#: The big tables whose variants hold a slice (:attr:`SilverTableParams.min_key`): only keys from
#: here on, which only the scenarios' own rows reach (:meth:`ScenarioContext.next_key` starts
#: there). A scenario's detection power is in its own rows, and a one-row commit into a slice costs
#: what it costs on a small table, not a rewrite of the 172,456-row ``sale``. TICKIT's keys stay far
#: below at any scale (``tickit.scale`` at most 10: 1,724,560 sales); the keys are INT columns.
SLICE_FROM: dict[Target, int] = {SALE: 1_000_000_000, SALE_BY_QTY: 1_000_000_000}


def variant(target: Target, table_type: str, delete_mode: str) -> SilverTableParams:
    """The Silver table of one variant of ``target``
    (``c_<table>[_p][_slice]_<cow|mor>_<hard|soft>``; ``_slice``: see :data:`SLICE_FROM`)."""
    part = "_p" if target.partition else ""
    part += "_slice" if target in SLICE_FROM else ""
    return SilverTableParams(
        name=f"c_{target.table}{part}_{_SHORT_TYPE[table_type]}_{delete_mode}",
        source=target.source,
        table=target.table,
        record_key=target.key,
        partition=target.partition,
        table_type=table_type,  # type: ignore[arg-type]
        delete_mode=delete_mode,  # type: ignore[arg-type]
        min_key=SLICE_FROM.get(target),
    )


def in_slice(rows: pa.Table, target: Target) -> pa.Table:
    """The rows of ``rows`` (Bronze events or their replay) in the target's slice, and those
    without a key (Bronze's TRUNCATE markers, which every slice keeps): all of them for a target
    without one (:data:`SLICE_FROM`), or when ``rows`` has no key column (no event with a key yet)."""
    if target not in SLICE_FROM or target.key[0] not in rows.column_names:
        return rows
    key = rows.column(target.key[0])
    return rows.filter(pc.or_kleene(pc.is_null(key), pc.greater_equal(key, SLICE_FROM[target])))


def target_rows(params: WorkbookParams, target: Target) -> tuple[pa.Table, frozenset[str]]:
    """The source table's rows now in the target's slice (only those are read), and its JSON
    columns: what every variant of the target is compared with."""
    lowest = SLICE_FROM.get(target)
    key_from = None if lowest is None else (target.key[0], lowest)
    return source_table(params, target.source, target.table, key_from=key_from)


def variants(target: Target) -> list[SilverTableParams]:
    """Every variant's Silver table of ``target`` (see :data:`VARIANTS`)."""
    return [variant(target, t, m) for t, m in VARIANTS]


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
    tables = tuple(v for t in ALL_TARGETS for v in variants(t))
    return params.model_copy(
        update={
            "lake": params.lake.model_copy(update={"silver": str(root)}),
            "silver": params.silver.model_copy(update={"tables": tables, "sync": False}),
        }
    )


def scratch_params(cparams: WorkbookParams, scratch: Path) -> WorkbookParams:
    """``cparams`` with Bronze at ``<scratch>/bronze`` and Silver at ``<scratch>/silver``."""
    return cparams.model_copy(
        update={
            "lake": cparams.lake.model_copy(
                update={"bronze": str(scratch / "bronze"), "silver": str(scratch / "silver")}
            )
        }
    )


# --- the running pipeline ----------------------------------------------------------------------


def bronze_differences(params: WorkbookParams, target: Target, root: str | Path) -> list[str]:
    """How the Bronze under ``root`` replayed differs from the source table now (empty: equal); a
    topic that replays to no row with its key yet (capture has not written its first file, or
    only TRUNCATE markers) is a difference too, not a ``KeyError``."""
    topic = target.topic(params)
    # the slice's events and the markers, then the replay: a key's replay needs only its own events
    # and the markers (0.15 s a poll for all 172,463 events of ecomm.sale at full scale)
    replayed = replay_arrow(in_slice(read_bronze_arrow(bronze_files(root, topic)), target), target.key)
    if not all(k in replayed.column_names for k in target.key):
        return [f"Bronze under {root} replays no row of {topic} yet"]
    source, json_columns = target_rows(params, target)
    return compare_tables(source, replayed, target.key, json_columns=json_columns)


def wait_for_bronze(
    params: WorkbookParams, target: Target, *, timeout_s: float = 90.0, bronze_root: str | Path | None = None
) -> None:
    """Wait until Bronze of the target's topic replays to the source table.

    Raises:
        WaitTimeoutError: when it has not after ``timeout_s`` (the last differences are named).
    """
    root = bronze_root or params.path(params.lake.bronze)
    last: list[str] = []

    def replays_to_source() -> bool:
        last[:] = bronze_differences(params, target, root)
        return not last

    wait_until(
        replays_to_source,
        timeout_s=timeout_s,
        what=f"the changes of {target.label} to be captured into Bronze",
        interval_s=0.5,
        max_interval_s=1.0,
        detail=lambda: "; ".join(last),
    )


# --- scenario context -------------------------------------------------------------------------


class SharedSyncs(Protocol):
    """What a run of scenarios side by side gives each of them
    (:class:`helpers.checks.conformance.rounds.SharedRounds`)."""

    def reserve(self, target: Target, free_from: int) -> int:
        """The first of a block of keys no other scenario of the run gets."""

    def sync(self, ctx: ScenarioContext, targets: Sequence[Target]) -> None:
        """Return once a round shared with the other scenarios has ingested ``ctx``'s changes."""


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
    rounds: SharedSyncs | None = None

    @contextlib.contextmanager
    def postgres(self, source: str, *, autocommit: bool = True) -> Iterator[Any]:
        """A connection to a PostgreSQL source's database."""
        with connect(self.params, source, autocommit=autocommit) as conn:
            yield conn

    @contextlib.contextmanager
    def mariadb(self, source: str = "ecomm") -> Iterator[Any]:
        """A cursor on a MariaDB source's database (autocommit: one commit per statement)."""
        with connect(self.params, source, autocommit=True) as conn, conn.cursor() as cur:
            yield cur

    def next_key(self, target: Target, column: str) -> int:
        """One past the largest key in the source and in every Silver variant (keys a soft-delete
        table still holds are not reused unless the scenario means to), and in a sliced target's
        slice (:data:`SLICE_FROM`); in a run with shared rounds, also past the keys handed to the
        other scenarios (:meth:`~helpers.checks.conformance.rounds.SharedRounds.reserve`)."""
        top = int(max_value(self.params, target.source, target.table, column) or 0)
        top = max(top, SLICE_FROM.get(target, 0) - 1)
        for table in variants(target):
            base = Path(self.cparams.path(self.cparams.lake.silver)) / table.name
            if table_exists(str(base)):
                values = read_snapshot(str(base), columns=[column]).column(column).to_pylist()
                top = max([top, *(int(v) for v in values if v is not None)])
        return self.rounds.reserve(target, top + 1) if self.rounds else top + 1

    def undelete(self, target: Target, key: tuple[Any, ...]) -> None:
        """A key recorded as deleted was inserted again (it must be live in Silver)."""
        self.deleted[target].remove(key)

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

    def expect_check(self, target: Target, result: str) -> None:
        """Run the status's check of Silver against the source (:mod:`helpers.checks.divergence`)
        on every variant of ``target`` and record a problem where it does not say ``result``
        (a ``DIFFERS`` must also name the repair command)."""
        names = [t.name for t in variants(target)]
        frame = check_divergence(self.cparams, names, wait_s=60.0, record=False)
        for row in frame.itertuples():
            if row.result != result or (result == DIFFERS and "resnapshot" not in row.fix):
                self.problems.append(
                    f"the check of {row.table} said {row.result!r} ({row.note}; fix {row.fix!r}), "
                    f"expected {result!r}"
                )
        self.notes.append(f"check: {', '.join(sorted(set(frame['result'])))}")

    def use_scratch(self, label: str) -> None:
        """From now on ingest from a scratch Bronze root (a mirror of the captured files that the
        scenario may add to) into scratch Silver tables, leaving the real Bronze untouched.

        The scratch tables start as copies of the target's variant tables: their commits carry the
        Bronze checkpoint, and the mirror keeps each file's name and modification time, so the
        copies take only the files their originals have not taken (not the whole table again).
        """
        self.scratch = (
            Path(self.cparams.path(self.cparams.lake.silver)) / "_scratch" / f"{label}-{uuid.uuid4().hex[:8]}"
        )
        real_silver = Path(self.cparams.path(self.cparams.lake.silver))
        for target in self.targets:
            for table in variants(target):
                if table_exists(str(real_silver / table.name)):
                    copy = self.scratch / "silver" / table.name
                    shutil.copytree(real_silver / table.name, copy, symlinks=True)
                    tombstones = Path(tombstone_folder(str(real_silver / table.name)))
                    if tombstones.exists():
                        shutil.copytree(tombstones, tombstone_folder(str(copy)))
        self.bronze_root = self.scratch / "bronze"
        self.mirror = True
        self.cparams = scratch_params(self.cparams, self.scratch)

    def mirror_now(self, target: Target) -> None:
        """Copy into the mirror (:meth:`use_scratch`) the files the real Bronze holds of
        ``target``'s topic now, without waiting for capture and without ingesting."""
        assert self.bronze_root is not None and self.mirror
        real = self.params.path(self.params.lake.bronze)
        for path in bronze_files(real, target.topic(self.params)):
            dest = self.bronze_root / path.relative_to(real)
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest.with_name("." + dest.name))  # name and mtime kept
                os.replace(dest.with_name("." + dest.name), dest)

    def sync(self, targets: Sequence[Target] | None = None) -> None:
        """Wait until Bronze holds the changes, then ingest every variant of the targets; in a run
        with shared rounds, in the round of every scenario of the run (:mod:`.rounds`)."""
        if self.rounds is not None:
            self.rounds.sync(self, targets or self.targets)
        else:
            self.record(targets or self.targets, self.ingest_now(targets or self.targets))

    def capture(self, targets: Sequence[Target]) -> None:
        """Wait until this scenario's Bronze (the real one, its mirror or its scratch root) holds
        the changes of ``targets``, copying them into its mirror if it has one; nothing is
        ingested."""
        for target in targets:
            wait_for_bronze(self.params, target, bronze_root=None if self.mirror else self.bronze_root)
            if self.mirror:
                self.mirror_now(target)

    def ingest_now(self, targets: Sequence[Target]) -> dict[str, Any]:
        """Wait until this scenario's Bronze (the real one, its mirror or its scratch root) holds
        the changes of ``targets``, then ingest every variant of them in one
        :func:`~helpers.silver.ingest.ingest_tables` call; the results by Silver table, not yet
        recorded (:meth:`record`)."""
        self.capture(targets)
        tables = [v for t in targets for v in variants(t)]
        return dict(zip((t.name for t in tables), ingest_tables(self.cparams, tables), strict=True))

    def record(self, targets: Sequence[Target], results: dict[str, Any]) -> None:
        """Record the results of ``targets``' variants among ``results`` (a round may have
        ingested other scenarios' tables too)."""
        for table in (v for t in targets for v in variants(t)):
            self.ingested.setdefault(table.name, []).append(results[table.name])
