"""CDC conformance: scripted edge cases on the real sources, checked end to end in Silver.

Each scenario of ``docs/cdc-edge-cases.md`` (items 1 to 9, 11 and 13 to 15) changes a real source
table: a case of the edge-case catalogue (:mod:`helpers.sources.edge_cases`), run through a
:class:`ScenarioContext`, or a delivery fault of :mod:`.scenarios_postgres` and
:mod:`.scenarios_mariadb` (with the drivers of :mod:`.drivers`). It waits until Bronze has
captured the changes, ingests them into Silver tables of every variant (Copy-on-Write and
Merge-on-Read, hard and soft deletes; :mod:`.model`) under ``<silver>/_conformance`` and compares
each with the source table on keys and every column.
In soft-delete mode the rows not flagged must equal the source and every key the scenario deleted
must be present with ``__deleted=true``. Each comparison must also report a tampered copy of
Silver (:mod:`.harness`). Command line: ``./workbook conformance [--short] [--only NAME ...]``.

Example:
    >>> frame = run_scenarios(params, ["deletes_postgres"])  # doctest: +SKIP
    >>> frame[["scenario", "table_type", "delete_mode", "status"]]  # doctest: +SKIP
"""

from __future__ import annotations

from helpers.checks.conformance.harness import (
    SCENARIOS,
    Scenario,
    failed_scenarios,
    one_run_at_a_time,
    require_passed,
    run_scenario,
    run_scenarios,
    scenario_groups,
    scenario_summary,
    short_set,
    tamper_table,
)
from helpers.checks.conformance.model import (
    VARIANTS,
    ScenarioContext,
    conformance_params,
    wait_for_bronze,
)

__all__ = [
    "SCENARIOS",
    "VARIANTS",
    "Scenario",
    "ScenarioContext",
    "conformance_params",
    "failed_scenarios",
    "one_run_at_a_time",
    "require_passed",
    "run_scenario",
    "run_scenarios",
    "scenario_groups",
    "scenario_summary",
    "short_set",
    "tamper_table",
    "wait_for_bronze",
]
