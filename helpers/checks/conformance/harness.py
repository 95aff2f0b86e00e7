"""The conformance harness: the scenario table, the run (script, then every Silver variant compared
with the source and shown a tampered copy) and the pass/fail table's summaries."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import filelock
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

import helpers.checks.conformance.scenarios_mariadb as maria
import helpers.checks.conformance.scenarios_postgres as pg
from helpers.checks.compare import SOFT_FLAG, compare_tables, split_soft_deleted
from helpers.checks.conformance.model import ScenarioContext, conformance_params, target_rows, variants
from helpers.checks.conformance.rounds import SharedRounds
from helpers.environments import implementations
from helpers.errors import CheckError, ParamsError, WorkbookError
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import table_exists
from helpers.params import WorkbookParams
from helpers.proc import read_pid
from helpers.silver.hold import hold_rounds
from helpers.silver.tables import table_config
from helpers.sources.edge_cases.catalogue import EDGE_CASES
from helpers.sources.edge_cases.session import CATEGORY, DATE, SALE, VENUE, Target

__all__ = [
    "SCENARIOS",
    "Scenario",
    "failed_scenarios",
    "require_passed",
    "run_scenario",
    "run_scenarios",
    "RUN_LOCK",
    "one_run_at_a_time",
    "scenario_groups",
    "scenario_summary",
    "short_set",
    "tamper_table",
]

log = logging.getLogger(__name__)


# --- the negative check (pure) -----------------------------------------------------------------


def _damaged(value: Any) -> Any:
    """A value unlike ``value`` of the same type (None: the type has no such value here)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value - 1 if value > 0 else value + 1
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        unit = Decimal(1).scaleb(exponent if isinstance(exponent, int) else 0)
        return value - unit if value > 0 else value + unit
    if isinstance(value, str):
        return value + "~"
    if isinstance(value, bytes):
        return value + b"~"
    if isinstance(value, dt.datetime | dt.date):
        return value + dt.timedelta(days=1)
    return None


def _rows_with_key(table: pa.Table, key: Sequence[str], keys: set[tuple[Any, ...]]) -> list[int]:
    values = zip(*(table.column(c).to_pylist() for c in key), strict=True)
    return [i for i, k in enumerate(values) if k in keys]


def _with_cell(table: pa.Table, row: int, column: str, value: Any) -> pa.Table:
    index = table.column_names.index(column)
    cells = table.column(column).to_pylist()
    cells[row] = value
    return table.set_column(index, table.field(index), pa.array(cells, table.field(index).type))


def tamper_table(
    silver: pa.Table,
    key: Sequence[str],
    focus: Sequence[tuple[Any, ...]],
    deleted: Sequence[tuple[Any, ...]],
    delete_mode: str,
) -> pa.Table:
    """A copy of Silver with one row damaged, for the negative check of a comparison.

    A deleted key is brought back (soft mode: its flag cleared; hard mode: a live row with that
    key); otherwise one non-key column of the first focus key's live row (or of any live row)
    gets another value of its type.

    Returns:
        The damaged copy (Arrow tables are immutable: the input is not changed).
    """
    soft = delete_mode == "soft"
    flags = silver.column(SOFT_FLAG).to_pylist() if SOFT_FLAG in silver.column_names else []
    flagged = [f in (True, "true") for f in flags] if soft and flags else [False] * silver.num_rows
    present = set(zip(*(silver.column(c).to_pylist() for c in key), strict=True))
    for k in map(tuple, deleted):
        if soft:
            rows = [i for i in _rows_with_key(silver, key, {k}) if flagged[i]]
            if rows:
                flag = silver.column(SOFT_FLAG).type
                return _with_cell(silver, rows[0], SOFT_FLAG, "false" if pa.types.is_string(flag) else False)
        if k not in present and silver.num_rows:  # (deleted and inserted again is live: damage a value)
            template = silver.slice(0, 1).to_pylist()[0]
            template.update(dict(zip(key, k, strict=True)))
            if SOFT_FLAG in template:
                template[SOFT_FLAG] = False
            return pa.concat_tables([silver, pa.Table.from_pylist([template], schema=silver.schema)])
    live = [i for i in range(silver.num_rows) if not flagged[i]]  # a flagged row's values are not compared
    wanted = {tuple(f) for f in focus}
    candidates = [i for i in _rows_with_key(silver, key, wanted) if not flagged[i]] or live
    if not candidates:
        return silver
    row = silver.slice(candidates[0], 1).to_pylist()[0]
    for column, value in row.items():
        if column in key or column.startswith(("_hoodie", "__")) or column == SOFT_FLAG:
            continue
        damaged = _damaged(value)
        if damaged is not None:
            return _with_cell(silver, candidates[0], column, damaged)
    return silver.filter(
        pa.array([i != candidates[0] for i in range(silver.num_rows)])
    )  # no value to change: drop the row


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
        shares_rounds: runs side by side with the other such scenarios of a run, sharing their
            ingestion rounds (:mod:`helpers.checks.conformance.rounds`): it changes rows of its own
            keys only (at most :data:`~helpers.checks.conformance.rounds.KEY_BLOCK` from its
            ``next_key``). False: it runs after them (schema changes, TRUNCATE,
            re-snapshots, capture or Bronze driven outside a sync point, partition moves).
        beside_other_tables: changes its whole table at the source and nothing else (TRUNCATE):
            after the scenarios that share rounds, it runs side by side with the other such
            scenarios of the run whose tables are not its own, sharing their rounds; else alone.
    """

    name: str
    item: int
    engine: str
    targets: tuple[Target, ...]
    script: Callable[[ScenarioContext], None] | None
    short: bool = False
    slow: bool = False
    na: str = ""
    shares_rounds: bool = False
    beside_other_tables: bool = False


def _edge(
    name: str,
    script: Callable[[ScenarioContext], None] | None = None,
    *,
    short: bool = False,
    shares_rounds: bool = False,
    beside_other_tables: bool = False,
) -> Scenario:
    """A scenario over a case of the catalogue (:data:`helpers.sources.edge_cases.catalogue.EDGE_CASES`):
    its script, or one that runs it and checks more."""
    case = EDGE_CASES[name]
    return Scenario(
        name,
        case.item,
        case.engine,
        case.tables,
        script or case.script,
        short=short,
        shares_rounds=shares_rounds,
        beside_other_tables=beside_other_tables,
    )


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        _edge("deletes_postgres", pg.deletes, short=True, shares_rounds=True),
        _edge("deletes_mariadb", maria.deletes, short=True, shares_rounds=True),
        _edge("delete_reinsert_postgres", short=True, shares_rounds=True),
        _edge("delete_reinsert_mariadb", short=True, shares_rounds=True),
        _edge("rapid_updates_postgres", short=True, shares_rounds=True),
        _edge("rapid_updates_mariadb", short=True, shares_rounds=True),
        Scenario(
            "redelivery_postgres", 4, "postgres", (CATEGORY,), pg.redelivery, short=True, shares_rounds=True
        ),
        Scenario(
            "redelivery_mariadb", 4, "mariadb", (SALE,), maria.redelivery, short=True, shares_rounds=True
        ),
        Scenario(
            "redelivery_delete_postgres", 4, "postgres", (CATEGORY,), pg.redelivery_delete, shares_rounds=True
        ),
        Scenario(
            "redelivery_delete_mariadb", 4, "mariadb", (SALE,), maria.redelivery_delete, shares_rounds=True
        ),
        # alone: a round holding a partition move (Hudi's global index writes the old partition a
        # delete with an integer ordering value) and another scenario's delete (the log position, a
        # string) gives a MoR variant a delete block the Rust reader refuses (docs/cdc-edge-cases.md,
        # item 5)
        _edge("partition_move_postgres"),
        _edge("partition_move_mariadb"),
        _edge("add_column_postgres"),
        _edge("add_column_mariadb"),
        _edge("toast_postgres", pg.toast),
        Scenario(
            "toast_mariadb", 7, "mariadb", (), None, na="TOAST is PostgreSQL-only (MariaDB sends full rows)"
        ),
        _edge("exact_values_postgres", short=True, shares_rounds=True),
        _edge("exact_values_mariadb", short=True, shares_rounds=True),
        Scenario("out_of_order_postgres", 9, "postgres", (CATEGORY,), pg.out_of_order),
        Scenario("out_of_order_mariadb", 9, "mariadb", (SALE,), maria.out_of_order),
        _edge("truncate_postgres", short=True, beside_other_tables=True),
        _edge("truncate_mariadb", short=True, beside_other_tables=True),
        Scenario("resnapshot_postgres", 14, "postgres", (CATEGORY, VENUE), pg.resnapshot),
        Scenario("resnapshot_mariadb", 14, "mariadb", (DATE,), maria.resnapshot),
        Scenario("add_table_postgres", 15, "postgres", (VENUE,), pg.add_table),
        Scenario("snapshot_handover_postgres", 11, "postgres", (CATEGORY,), pg.handover, slow=True),
        Scenario("snapshot_handover_mariadb", 11, "mariadb", (SALE,), maria.handover, slow=True),
    )
}


def short_set() -> list[str]:
    """Names of the short (CI) set: items 1, 2, 3, 4, 8 and 13 (TRUNCATE) on both engines."""
    return [n for n, s in SCENARIOS.items() if s.short]


def _check(ctx: ScenarioContext, scenario: Scenario, started: float, cap: int = 5) -> list[dict[str, Any]]:

    rows = []
    for target in ctx.targets:  # a scenario may add targets it creates (item 15)
        source, json_columns = target_rows(ctx.params, target)
        deleted = [tuple(k) for k in ctx.deleted.get(target, [])]
        for table in variants(target):
            base = table_config(ctx.cparams, table).base_path
            if not table_exists(base):
                silver = source.slice(0, 0)
            else:
                silver = read_snapshot(base)
            wanted_deleted = deleted if table.delete_mode == "soft" else []

            options: dict[str, Any] = {
                "delete_mode": table.delete_mode,
                "deleted_keys": wanted_deleted,
                "partition": target.partition,
                "cap": cap,
                "json_columns": json_columns,
            }
            problems = list(ctx.problems) + compare_tables(source, silver, target.key, **options)
            tampered = tamper_table(silver, target.key, ctx.focus.get(target, []), deleted, table.delete_mode)
            caught = bool(compare_tables(source, tampered, target.key, **options))
            if not caught:
                problems.append("negative check: a tampered copy of Silver was not reported")
            n_flagged = split_soft_deleted(silver, table.delete_mode)[1].num_rows
            n_live = silver.num_rows - n_flagged
            detail = (
                "; ".join(problems)
                if problems
                else (
                    f"equal: {source.num_rows} source rows, {n_live} Silver rows"
                    + (f" (+{n_flagged} flagged deleted)" if silver.num_rows != n_live else "")
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
    side_by_side: bool = True,
    hold_job: bool | None = None,
) -> pd.DataFrame:
    """Run scenarios against the running local pipeline; the pass/fail table.

    The sources, capture and Bronze must be running (:func:`helpers.pipeline.ensure_pipeline`); Silver variant
    tables are written under ``silver_root`` (default ``<lake.silver>/_conformance``).

    Args:
        params: the workbook's parameters (local environment).
        names: scenarios to run (default: all, or the short set with ``short``).
        short: only the short set (items 1, 2, 3, 4, 8, 13 on both engines; for CI).
        silver_root: where the variant Silver tables go.
        progress: show a progress bar.
        side_by_side: run the scenarios that may (``Scenario.shares_rounds``) side by side, sharing
            their ingestion rounds (:mod:`helpers.checks.conformance.rounds`), then the TRUNCATE
            scenarios (``Scenario.beside_other_tables``) side by side on distinct tables, then the
            others one at a time; False: every scenario alone, in the given order
            (``bench/bench_conformance.py``'s baseline, or to see one failure on its own).
        hold_job: hold the continuous Silver job for the run (:func:`helpers.silver.hold.hold_rounds`):
            the scenarios get the cores, and the job takes their changes to the workbook's own
            tables in its first round after the run; False: the job ingests beside the scenarios
            (``bench/bench_conformance.py``'s baseline); None: ``conformance.hold_job``.

    Returns:
        One row per scenario and Silver variant: scenario, item, source, table_type, delete_mode,
        silver_table, status (``passed``, ``FAILED``, ``n/a``), passed (None for n/a),
        negative_check, detail, seconds. A scenario that raises is a ``FAILED`` row naming the error.

    Raises:
        ParamsError: for an unknown scenario name (the known ones are listed).
        CheckError: when another run holds the pipeline's conformance lock (:func:`one_run_at_a_time`).
    """
    if names is None:
        names = short_set() if short else list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ParamsError(f"Failed to find scenario(s) {unknown}: known scenarios are {list(SCENARIOS)}")
    if not implementations(params).local_servers:
        raise ParamsError("Failed to run the conformance scenarios: they script changes on the local sources")

    cparams = conformance_params(params, silver_root)
    by_name: dict[str, list[dict[str, Any]]] = {}
    hold = params.conformance.hold_job if hold_job is None else hold_job
    held = hold_rounds(params, f"conformance scenarios ({len(names)})")
    with (
        one_run_at_a_time(params),
        held if hold else contextlib.nullcontext(),
        tqdm(total=len(names), desc="conformance", disable=not progress) as bar,
    ):
        for group in scenario_groups(names, side_by_side=side_by_side):
            if len(group) == 1:
                by_name[group[0]] = _run_one(params, cparams, SCENARIOS[group[0]], None)
                bar.update()
                continue
            rounds = SharedRounds(len(group))
            with ThreadPoolExecutor(len(group), thread_name_prefix="scenario") as pool:
                futures = {pool.submit(_run_one, params, cparams, SCENARIOS[n], rounds): n for n in group}
                for future in as_completed(futures):
                    by_name[futures[future]] = future.result()
                    bar.update()
    return pd.DataFrame([row for name in names for row in by_name[name]])


#: Under the state directory: held by the process that runs scenarios on its sources.
RUN_LOCK = "conformance.lock"


@contextlib.contextmanager
def one_run_at_a_time(params: WorkbookParams) -> Iterator[None]:
    """Hold the state directory's conformance lock (``<state_dir>/conformance.lock``) while
    scenarios run. Two runs on one pipeline change the same source rows and Silver variants and
    would fail each other's checks; the second is refused at once instead. The lock is the
    operating system's (``filelock``), so a run that was killed holds it no longer. A process that
    holds it may enter it again (``./workbook conformance`` holds it from before it starts the
    pipeline, then :func:`run_scenarios` enters it).

    Raises:
        CheckError: when another process holds it, naming its pid.
    """
    params.state_path.mkdir(parents=True, exist_ok=True)
    path = params.state_path / RUN_LOCK
    owner = params.state_path / f"{RUN_LOCK}.pid"
    lock = filelock.FileLock(str(path), timeout=0, is_singleton=True)  # one per path: re-entrant
    try:
        lock.acquire()
    except filelock.Timeout:
        holder = read_pid(owner) or "unknown"  # unknown: the holder has not written it yet
        raise CheckError(
            f"Failed to start the conformance scenarios: another run (pid {holder}) is running them on the "
            f"pipeline of {params.state_path} ({path}); two runs change the same source rows and Silver "
            "variants and fail each other's checks. Wait for it to finish, or stop it"
        ) from None
    outermost = lock.lock_counter == 1
    try:
        if outermost:
            owner.write_text(f"{os.getpid()}\n")
        yield
    finally:
        if outermost:
            owner.unlink(missing_ok=True)
        lock.release()


def scenario_groups(names: Sequence[str], *, side_by_side: bool = True) -> list[list[str]]:
    """The order :func:`run_scenarios` runs ``names`` in: groups one after another, the scenarios of
    a group of more than one side by side, sharing their rounds.

    Returns:
        With ``side_by_side``: the scenarios that share rounds (``Scenario.shares_rounds``); then
        the TRUNCATE scenarios (``Scenario.beside_other_tables``), in groups whose source tables
        do not overlap (the first group without any of a scenario's tables takes it); then every
        other scenario alone, in the given order. Without: each scenario alone, in the given order.
    """
    if not side_by_side:
        return [[n] for n in names]
    runnable = [n for n in names if SCENARIOS[n].script is not None]
    shared = [n for n in runnable if SCENARIOS[n].shares_rounds]
    beside: list[tuple[list[str], set[tuple[str, str]]]] = []
    for name in (n for n in runnable if SCENARIOS[n].beside_other_tables):
        tables = {(t.source, t.table) for t in SCENARIOS[name].targets}
        group = next((g for g in beside if not g[1] & tables), None)
        if group is None:
            beside.append(([name], tables))
        else:
            group[0].append(name)
            group[1].update(tables)
    grouped = [shared, *(g[0] for g in beside)]
    taken = {n for g in grouped for n in g}
    return [g for g in grouped if g] + [[n] for n in names if n not in taken]


def _run_one(
    params: WorkbookParams, cparams: WorkbookParams, scenario: Scenario, rounds: SharedRounds | None
) -> list[dict[str, Any]]:
    """One scenario's rows: its script, then its check (at the shared barrier when ``rounds``)."""
    started = time.monotonic()
    if scenario.script is None:
        return [
            {
                "scenario": scenario.name,
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
        ]
    ctx = ScenarioContext(params, cparams, scenario.targets, rounds=rounds)
    finishing = False
    try:
        scenario.script(ctx)
        finishing = True
        if rounds is not None:
            return rounds.finish(ctx, lambda: _check(ctx, scenario, started))
        return _check(ctx, scenario, started)
    except WorkbookError as exc:
        return [_error_row(scenario, exc, started)]
    except Exception as exc:  # noqa: BLE001 - any failure is a failed scenario, named
        log.exception("scenario %s failed", scenario.name)
        return [_error_row(scenario, exc, started)]
    finally:
        if rounds is not None and not finishing:
            rounds.leave()  # its script failed: the others go on without it
        if ctx.scratch is not None:
            shutil.rmtree(ctx.scratch, ignore_errors=True)
        log.info("scenario %s: %.1f s", scenario.name, time.monotonic() - started)


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
        rows = frame[frame["status"] == "FAILED"]
        details = "; ".join(f"{r.silver_table}: {r.detail}" for r in rows.itertuples())
        raise CheckError(f"Conformance scenarios failed: {failed}: {details}")
    return f"{frame['scenario'].nunique()} scenarios, none failed"
