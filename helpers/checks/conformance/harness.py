"""The conformance harness: the scenario table, the run (script, then every Silver variant compared
with the source and shown a tampered copy) and the pass/fail table's summaries."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

import helpers.checks.conformance.scenarios_mariadb as maria
import helpers.checks.conformance.scenarios_postgres as pg
from helpers.checks.compare import SOFT_FLAG, compare_rows, is_flagged
from helpers.checks.conformance.model import (
    CATEGORY,
    CATEGORY_BY_GROUP,
    DATE,
    EVENT,
    ORDER_ITEMS,
    ORDERS,
    SALE,
    SALE_BY_QTY,
    VENUE,
    ScenarioContext,
    Target,
    conformance_params,
)
from helpers.errors import CheckError, ParamsError, WorkbookError
from helpers.hudi.read import read_snapshot
from helpers.params import WorkbookParams
from helpers.silver.tables import table_config
from helpers.sources.connect import read_table

__all__ = [
    "SCENARIOS",
    "Scenario",
    "failed_scenarios",
    "require_passed",
    "run_scenario",
    "run_scenarios",
    "scenario_summary",
    "short_set",
    "tamper_rows",
]

log = logging.getLogger(__name__)


# --- the negative check (pure) -----------------------------------------------------------------


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
        Scenario("deletes_postgres", 1, "postgres", (CATEGORY,), pg.deletes, short=True),
        Scenario("deletes_mariadb", 1, "mariadb", (SALE,), maria.deletes, short=True),
        Scenario("delete_reinsert_postgres", 2, "postgres", (CATEGORY,), pg.delete_reinsert, short=True),
        Scenario("delete_reinsert_mariadb", 2, "mariadb", (SALE,), maria.delete_reinsert, short=True),
        Scenario("rapid_updates_postgres", 3, "postgres", (CATEGORY,), pg.rapid_updates, short=True),
        Scenario("rapid_updates_mariadb", 3, "mariadb", (SALE,), maria.rapid_updates, short=True),
        Scenario("redelivery_postgres", 4, "postgres", (CATEGORY,), pg.redelivery, short=True),
        Scenario("redelivery_mariadb", 4, "mariadb", (SALE,), maria.redelivery, short=True),
        Scenario("redelivery_delete_postgres", 4, "postgres", (CATEGORY,), pg.redelivery_delete),
        Scenario("redelivery_delete_mariadb", 4, "mariadb", (SALE,), maria.redelivery_delete),
        Scenario("partition_move_postgres", 5, "postgres", (CATEGORY_BY_GROUP,), pg.partition_move),
        Scenario("partition_move_mariadb", 5, "mariadb", (SALE_BY_QTY,), maria.partition_move),
        Scenario("add_column_postgres", 6, "postgres", (VENUE,), pg.add_column),
        Scenario("add_column_mariadb", 6, "mariadb", (DATE,), maria.add_column),
        Scenario("toast_postgres", 7, "postgres", (EVENT,), pg.toast),
        Scenario(
            "toast_mariadb", 7, "mariadb", (), None, na="TOAST is PostgreSQL-only (MariaDB sends full rows)"
        ),
        Scenario("exact_values_postgres", 8, "postgres", (ORDER_ITEMS, ORDERS), pg.exact_values, short=True),
        Scenario("exact_values_mariadb", 8, "mariadb", (SALE,), maria.exact_values, short=True),
        Scenario("out_of_order_postgres", 9, "postgres", (CATEGORY,), pg.out_of_order),
        Scenario("out_of_order_mariadb", 9, "mariadb", (SALE,), maria.out_of_order),
        Scenario("snapshot_handover_postgres", 11, "postgres", (CATEGORY,), pg.handover, slow=True),
        Scenario("snapshot_handover_mariadb", 11, "mariadb", (SALE,), maria.handover, slow=True),
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
