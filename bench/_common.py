"""What the capture and Silver benchmarks share (not a benchmark itself).

* :func:`temporary_params`: :func:`helpers.isolation.isolated_params` (its own state directory, lake
  and server ports; everything it started stopped on exit) with the default profile's parameters;
* :func:`single_row_updates`: one autocommit connection to a source, one committed update a call;
* :func:`source_to_bronze`: per single-row commit of :data:`BRONZE_CHANGES`, commit's return -> a
  new Bronze file visible;
* :class:`Case` and :func:`commit_to_silver`: per change, commit's return -> the official reader
  returns the new value, with where the time went;
* :func:`quantiles`: p50, p95 and max.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.bronze.read import read_bronze
from helpers.engines import engine_kind
from helpers.hudi.read import read_snapshot
from helpers.isolation import isolated_params
from helpers.local.stack import LocalStack
from helpers.naming import table_topic
from helpers.params import WorkbookParams
from helpers.silver.tables import table_config

_COMPLETED = (".commit", ".deltacommit")


@contextmanager
def temporary_params(
    prefix: str, overrides: Mapping[str, Any], *, env: str = "local", keep: bool = False
) -> Iterator[WorkbookParams]:
    """:func:`helpers.isolation.isolated_params` of ``env`` (the benchmarks measure the default
    profile, not the CI overlay)."""
    with isolated_params(prefix, overrides, env=env, keep=keep) as params:
        yield params


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95 and max; p95 interpolated between the samples (``inclusive``: with few samples the
    default method extrapolates beyond the largest)."""
    q = statistics.quantiles(values, n=20, method="inclusive")
    return statistics.median(values), q[18], max(values)


@contextmanager
def single_row_updates(params: WorkbookParams, source: str, sql: str) -> Iterator[Callable[[Any, Any], None]]:
    """``update(value, key)`` runs ``sql`` with ``(value, key)`` on ``source`` and returns once
    committed (one autocommit connection for all calls)."""
    stack = LocalStack(params)
    sp = params.source(source)
    if engine_kind(sp.engine) == "postgres":
        with stack.connect_postgres(sp.database, autocommit=True) as pg:

            def update_pg(value: Any, key: Any) -> None:
                pg.execute(sql, (value, key))

            yield update_pg
        return
    my = stack.connect_mariadb(sp.database, autocommit=True)
    try:

        def update_my(value: Any, key: Any) -> None:
            with my.cursor() as cur:
                cur.execute(sql, (value, key))

        yield update_my
    finally:
        my.close()


def _visible(topic_dir: Path, known: set[str]) -> list[Path]:
    out = []
    for dirpath, _, files in os.walk(topic_dir):
        for name in files:
            if not name.startswith(".") and name not in known:
                out.append(Path(dirpath) / name)
    return out


#: Per source, the single-row commit the commit-to-Bronze figures time (on key 1): table, SQL,
#: value of change ``i``.
BRONZE_CHANGES: dict[str, tuple[str, str, Callable[[int], Any]]] = {
    "ems": ("category", "UPDATE ems.category SET catdesc = %s WHERE catid = %s", lambda i: f"bench {i}"),
    "ecomm": ("sale", "UPDATE sale SET qtysold = %s WHERE salesid = %s", lambda i: 1 + i % 8),
}


def source_to_bronze(
    params: WorkbookParams, source: str, changes: int, *, first: int = 0, timeout_s: float = 30.0
) -> list[float]:
    """``changes`` commits of ``BRONZE_CHANGES[source]`` (its values from number ``first`` on: a
    second round goes on from the first's, so that no update writes the value already there), one
    at a time, each timed from its return until a new Bronze file of the table's topic is visible
    (polled every 2 ms); checks that Bronze then holds at least ``changes`` updates of the topic."""
    table, sql, value_of = BRONZE_CHANGES[source]
    bronze = params.path(params.lake.bronze)
    topic = table_topic(params, source, table)
    known = {p.name for p in _visible(bronze / topic, set())}
    latencies = []
    with single_row_updates(params, source, sql) as update:
        for i in range(first, first + changes):
            update(value_of(i), 1)
            committed = time.monotonic()
            while not (new := _visible(bronze / topic, known)):
                if time.monotonic() - committed > timeout_s:
                    raise SystemExit(f"change {i} on {topic} not visible after {timeout_s:.0f} s")
                time.sleep(0.002)
            latencies.append(time.monotonic() - committed)
            known.update(p.name for p in new)
    updates = [r for r in read_bronze(bronze, topic) if r["__op"] == "u"]
    assert len(updates) >= changes, f"{topic}: {len(updates)} updates in Bronze"
    return latencies


def silver_base(params: WorkbookParams, name: str) -> str:
    """The base path of the Silver table ``name``."""
    return str(table_config(params, next(t for t in params.silver.tables if t.name == name)).base_path)


def _bronze_files(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*.avro")} | {p.name for p in root.rglob("*.jsonl")}


def _timeline(base: str) -> dict[str, float]:
    """Completed instants of a table -> mtime of their ``.requested`` file (or the completed one)."""
    folder = Path(base, ".hoodie")
    out: dict[str, float] = {}
    if not folder.exists():
        return out
    names = {p.name: p for p in folder.iterdir()}
    for name, path in names.items():
        if name.endswith(_COMPLETED) and not name.startswith("."):
            stem, action = name.split(".", 1)
            requested = names.get(f"{stem}.{action}.requested") or names.get(f"{stem}.requested")
            for candidate in (requested, path):
                try:
                    if candidate is not None:
                        out[name] = candidate.stat().st_mtime
                        break
                except FileNotFoundError:  # archived by the writer meanwhile
                    continue
    return out


@dataclass
class Case:
    """One benchmarked table: its base path, how to read the changed value back."""

    label: str
    base: str
    key: str
    column: str
    latencies: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(
        default_factory=lambda: {"capture": [], "pickup": [], "write": [], "visible": []}
    )


def _observe(
    cases: list[Case], key_value: Any, value: Any, topic_dir: Path, committed: float, known: set[str]
) -> None:
    """Poll until every case's reader returns ``value``; record latency and phases.

    The timeline is polled every 10 ms (a folder listing); the reader reads the table only when a
    commit completed since its last read. Reading the snapshot every 10 ms, as this did before,
    kept most of a core busy on the big table and slowed the job it measured."""
    before = {c.label: _timeline(c.base) for c in cases}
    bronze_at: float | None = None
    done: dict[str, bool] = {c.label: False for c in cases}
    completed: dict[str, tuple[float, float]] = {}
    read_at: dict[str, frozenset[str] | None] = {c.label: None for c in cases}  # timeline of the last read
    while not all(done.values()):
        now = time.monotonic()
        if now - committed > 120:
            raise SystemExit(f"change not in Silver after 120 s: {[c.label for c in cases]}")
        if bronze_at is None:
            new = _bronze_files(topic_dir) - known
            if new:
                bronze_at = now
                known |= new
        for case in cases:
            if done[case.label]:
                continue
            after = _timeline(case.base)
            if case.label not in completed:
                fresh = [after[n] for n in after if n not in before[case.label]]
                if fresh:
                    newest = max(n for n in after if n not in before[case.label])
                    try:
                        done_at = Path(case.base, ".hoodie", newest).stat().st_mtime
                    except FileNotFoundError:
                        done_at = max(fresh)
                    completed[case.label] = (min(fresh), done_at)
            timeline = frozenset(after)
            if timeline == read_at[case.label]:
                continue  # no commit completed since the last read: the reader cannot see more
            read_at[case.label] = timeline
            rows = read_snapshot(
                case.base, columns=[case.key, case.column], filters=[(case.key, "=", str(key_value))]
            ).to_pylist()
            if rows and str(rows[0][case.column]) == str(value):
                seen = time.monotonic()
                done[case.label] = True
                case.latencies.append(seen - committed)
                wall_offset = time.time() - seen  # monotonic -> wall clock, for file times
                b = bronze_at if bronze_at is not None else seen
                requested, finished = completed.get(case.label, (seen + wall_offset, seen + wall_offset))
                requested, finished = requested - wall_offset, finished - wall_offset
                case.phases["capture"].append(b - committed)
                case.phases["pickup"].append(max(0.0, requested - b))
                case.phases["write"].append(max(0.0, finished - requested))
                case.phases["visible"].append(max(0.0, seen - finished))
        time.sleep(0.01)


def commit_to_silver(
    cases: list[Case],
    topic_dir: Path,
    update: Callable[[Any, Any], None],
    value_of: Callable[[int], Any],
    changes: int,
) -> None:
    """``changes`` single-row updates of the first row of ``cases[0]``'s table, one at a time,
    each observed in every case until the reader returns it (``Case.latencies`` and ``phases``)."""
    first = cases[0]
    key_value = int(read_snapshot(first.base, columns=[first.key]).column(first.key)[0].as_py())
    known = _bronze_files(topic_dir)
    for i in range(changes):
        value = value_of(i)
        update(value, key_value)
        _observe(cases, key_value, value, topic_dir, time.monotonic(), known)
