"""Scenario drivers both engines share: Bronze tombstones inspected, Bronze files redelivered or
delivered out of order, and a fresh connector's snapshot hand-over under concurrent writes."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.bronze.events import MARKER_OPS
from helpers.bronze.read import bronze_files, read_bronze_arrow
from helpers.capture.backends import wait_until_running
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.register import connector_specs, embedded_backend
from helpers.checks.conformance.model import (
    ScenarioContext,
    bronze_differences,
    scratch_params,
    variants,
    wait_for_bronze,
)
from helpers.errors import WaitTimeoutError
from helpers.poll import wait_until
from helpers.silver.ingest import ingest_tables
from helpers.sources.api import LocalSources
from helpers.sources.connect import connect
from helpers.sources.edge_cases.session import Target

__all__ = ["check_tombstones", "redeliver", "shuffled_delivery", "snapshot_handover"]

log = logging.getLogger(__name__)


def check_tombstones(
    ctx: ScenarioContext, target: Target, keys: list[tuple[Any, ...]], timeout_s: float = 60.0
) -> None:
    """What Bronze holds for the deleted keys: one delete event each, and no null-value event
    (the connectors set ``tombstones.on.delete=false``). A row inserted and deleted within one
    round leaves the source as it was, so Bronze can replay equal to the source before its two
    events are captured: the delete events are waited for (up to ``timeout_s``)."""
    root = ctx.bronze_root or ctx.params.path(ctx.params.lake.bronze)
    wanted = set(keys)
    found: dict[str, list[tuple[Any, ...]]] = {}

    def read() -> bool:
        events = read_bronze_arrow(bronze_files(root, target.topic(ctx.params)))
        key_values = list(zip(*(events.column(c).to_pylist() for c in target.key), strict=True))
        flags = events.column("__deleted").to_pylist() if "__deleted" in events.column_names else []
        ops = events.column("__op").to_pylist() if "__op" in events.column_names else [None] * len(key_values)
        # a TRUNCATE or re-snapshot marker has no key either, but it is an event (item 13), not a null
        found["tombstones"] = [
            k
            for k, op in zip(key_values, ops, strict=True)
            if all(v is None for v in k) and op not in MARKER_OPS
        ]
        found["deletes"] = [
            k for k, flag in zip(key_values, flags, strict=True) if flag == "true" and k in wanted
        ]
        return len(set(found["deletes"])) == len(wanted)

    with contextlib.suppress(WaitTimeoutError):  # what is still missing is reported below
        wait_until(read, timeout_s=timeout_s, what=f"the delete events of {keys} in Bronze", interval_s=0.5)
    tombstones, deletes = found["tombstones"], found["deletes"]
    ctx.notes.append(
        f"Bronze: {len(deletes)} delete event(s) for {len(keys)} deleted keys, {len(tombstones)} tombstone(s)"
    )
    if tombstones:
        ctx.problems.append(
            f"Bronze holds {len(tombstones)} null-value (tombstone) event(s) on {target.topic(ctx.params)}"
        )
    if len(set(deletes)) != len(wanted):
        missing = sorted(wanted - set(deletes))
        ctx.problems.append(f"Bronze lacks delete events for {missing} of {keys} after {timeout_s:.0f} s")


def redeliver(
    ctx: ScenarioContext,
    target: Target,
    update: Callable[[str], None],
    key: tuple[Any, ...],
    *,
    old_round: bool = True,
) -> None:
    """Item 4: ``update("old")`` then ``update("new")``, each captured into Bronze files of its
    own; then the Bronze files of the old change are delivered again (new names, after the newer
    files) and ingested: Silver must keep the newer values.

    With ``old_round`` the old change is ingested in a round of its own before the new one is
    made, so Silver has stored it (a delete's redelivery needs the row stored, then deleted);
    without, both are ingested in one round, one sync point fewer, since what an update's
    redelivery checks is only that Silver holds the newer value when the old files come again."""
    ctx.use_scratch(f"redelivery-{target.table}")  # the copies go to a mirror, not the real Bronze
    # the mirror starts with what Bronze holds now, which the variants' copies have taken (a file
    # another scenario adds meanwhile is mirrored at the next sync, and delivered again below too)
    ctx.mirror_now(target)
    root = ctx.bronze_root
    assert root is not None
    topic = target.topic(ctx.params)
    before = set(bronze_files(root, topic))
    update("old")
    if old_round:
        ctx.sync()
    else:
        ctx.capture([target])
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


def shuffled_delivery(ctx: ScenarioContext, target: Target, change: Callable[[], None]) -> None:
    """Item 9: copy the topic's Bronze files into a scratch Bronze root in shuffled rounds, all with
    one modification time, ingesting after each round into scratch Silver tables."""
    change()
    wait_for_bronze(ctx.params, target)
    real = ctx.params.path(ctx.params.lake.bronze)
    files = bronze_files(real, target.topic(ctx.params))
    scratch = (
        Path(ctx.cparams.path(ctx.cparams.lake.silver))
        / "_scratch"
        / f"{target.table}-{uuid.uuid4().hex[:8]}"
    )
    sparams = scratch_params(ctx.cparams, scratch)
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
            tables = variants(target)
            for table, r in zip(tables, ingest_tables(sparams, tables), strict=True):
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


def snapshot_handover(
    ctx: ScenarioContext, source: str, target: Target, writer: Callable[[int], None]
) -> None:
    """Item 11: a fresh connector (own name, slot / server id, scratch Bronze) snapshots the source
    while ``writer`` keeps changing the target table; after the hand-over Bronze and Silver must
    equal the source (nothing lost)."""
    tag = uuid.uuid4().hex[:6]
    scratch = Path(ctx.cparams.path(ctx.cparams.lake.silver)) / "_scratch" / f"handover-{source}-{tag}"
    spec = next(
        s for s in connector_specs(ctx.params, LocalSources(ctx.params).endpoints()) if s.source == source
    )
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
    backend = embedded_backend(ctx.params, scratch / "bronze")
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
                stop.wait(0.02)  # pace the writes (about 50 changes a second)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def snapshot_over() -> bool:
        if backend.status(name).details.get("streaming"):
            return True
        return len(written) > 20 and not bronze_differences(ctx.params, target, scratch / "bronze")

    thread = threading.Thread(target=keep_writing, daemon=True)
    sparams = scratch_params(ctx.cparams, scratch)
    try:
        thread.start()
        backend.create_or_update(fresh)
        wait_until_running(backend, name, timeout_s=240)
        wait_until(snapshot_over, timeout_s=600, what=f"connector {name} to finish its snapshot")
        time.sleep(2.0)  # the writer goes on into the streaming phase for a while
        stop.set()
        thread.join(30)
        if errors:
            raise errors[0]
        wait_for_bronze(ctx.params, target, bronze_root=scratch / "bronze", timeout_s=180)
        tables = variants(target)
        for table, result in zip(tables, ingest_tables(sparams, tables), strict=True):
            ctx.ingested.setdefault(table.name, []).append(result)
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
            _drop_slot(ctx, source, slot)


def _drop_slot(ctx: ScenarioContext, source: str, slot: str) -> None:
    """Drop the fresh connector's replication slot once its worker has let go of it (best effort:
    a slot left behind is logged)."""
    try:
        with connect(ctx.params, source, autocommit=True) as c:

            def released() -> bool:
                row = c.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                ).fetchone()
                if row is None:
                    return True
                if not row[0]:
                    c.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                    return True
                return False

            wait_until(
                released,
                timeout_s=10,
                what=f"replication slot {slot} to be released",
                interval_s=0.5,
                max_interval_s=0.5,
            )
    except Exception as exc:  # noqa: BLE001 - clean-up: the scenario's result stands
        log.warning("could not drop replication slot %s: %s", slot, exc)
