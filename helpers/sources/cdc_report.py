"""The preflight report of the CDC prerequisites: one :class:`Check` per setting, shown as a table.

:mod:`helpers.sources.cdc_postgres` and :mod:`helpers.sources.cdc_mariadb` fill it;
:mod:`helpers.sources.cdc` runs them for every local source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from helpers.errors import CdcSetupError

__all__ = [
    "FIXED_BY_ENABLE",
    "PREFLIGHT_COLUMNS",
    "Check",
    "PreflightReport",
    "preflight_frame",
    "raise_for_failures",
]

FIXED_BY_ENABLE = "run enable_cdc_local(stack, params)"
"""The fix of a check that :func:`helpers.sources.cdc.enable_cdc_local` corrects."""

PREFLIGHT_COLUMNS = ["source", "engine", "database", "check", "passed", "actual", "expected", "fix"]
"""Columns of the table :func:`preflight_frame` and :meth:`Sources.enable_cdc` return."""


@dataclasses.dataclass(frozen=True)
class Check:
    """One preflight check: what was found, what is needed and, when it failed, how to fix it."""

    name: str
    passed: bool
    actual: str
    expected: str
    fix: str = ""


@dataclasses.dataclass(frozen=True)
class PreflightReport:
    """All checks of one source system."""

    source: str
    engine: str
    database: str
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        """The checks that failed."""
        return tuple(c for c in self.checks if not c.passed)


def preflight_frame(reports: Sequence[PreflightReport]) -> pd.DataFrame:
    """Turn preflight reports into one table for the notebook.

    Args:
        reports: from :func:`helpers.sources.cdc.preflight` or
            :func:`helpers.sources.cdc.enable_cdc_local`.

    Returns:
        Columns :data:`PREFLIGHT_COLUMNS`: ``source, engine, database, check, passed, actual,
        expected, fix``.
    """
    rows = [
        {
            "source": r.source,
            "engine": r.engine,
            "database": r.database,
            "check": c.name,
            "passed": c.passed,
            "actual": c.actual,
            "expected": c.expected,
            "fix": c.fix,
        }
        for r in reports
        for c in r.checks
    ]
    return pd.DataFrame(rows, columns=PREFLIGHT_COLUMNS)


def raise_for_failures(reports: Sequence[PreflightReport]) -> None:
    """Raise when any preflight check failed, listing each failure with its fix.

    Args:
        reports: from :func:`helpers.sources.cdc.preflight` or
            :func:`helpers.sources.cdc.enable_cdc_local`.

    Raises:
        CdcSetupError: if a check failed.
    """
    lines = [
        f"{r.source}: {c.name} is {c.actual!r}, expected {c.expected!r}; fix: {c.fix}"
        for r in reports
        for c in r.failures
    ]
    if lines:
        raise CdcSetupError("Failed to verify the CDC prerequisites:\n  " + "\n  ".join(lines))
