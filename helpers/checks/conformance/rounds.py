"""Scenarios side by side with shared ingestion rounds: each scenario's script runs in a thread of
its own, and a sync point is a barrier where every running scenario waits. When all have arrived
(or finished), one of them ingests the changes of all of them, one round per Silver variant of the
tables they named, then lets them go on. A round's cost is Hudi's commit, about the same for one
changed row as for ten (``bench/README.md``, "Conformance on slices"), so scenarios that share
their sync points share that cost.

What keeps a scenario's evidence its own:

- Its keys are fresh and its own: :meth:`SharedRounds.reserve` hands each scenario a block of
  :data:`KEY_BLOCK` keys that no other scenario of the run gets.
- Ingestion and the comparisons of Silver run only at a barrier, while no script is changing a
  source: a comparison of the whole table (or slice) with the source sees every scenario's changes
  in Silver too, never one half done. A scenario may wait for its changes to reach Bronze outside
  a barrier (:meth:`ScenarioContext.capture`, the redelivery of an update): that wait compares
  Bronze with the source as both are, so another scenario's change in flight only makes it wait
  until capture has it too.
- A scenario that changes a table's schema, truncates it, re-snapshots it or drives capture
  itself runs alone (``Scenario.shares_rounds`` is False for it): its effect is on the whole
  table, not on its own keys.

Written here rather than taken from a library: what a barrier phase does (the union of the
waiting scenarios' tables, ingested once, then their final checks) is the harness's own; the
standard library's :class:`threading.Condition` carries the waiting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helpers.errors import CheckError
from helpers.sources.edge_cases.session import Target

if TYPE_CHECKING:  # pragma: no cover - typing only
    from helpers.checks.conformance.model import ScenarioContext

__all__ = ["KEY_BLOCK", "SharedRounds", "sync_together"]

#: Keys a scenario of a shared run may use from the one its ``next_key`` gave (the scripts that
#: share rounds use at most ``k`` to ``k + 4``).
KEY_BLOCK = 8


def sync_together(requests: Sequence[tuple[ScenarioContext, Sequence[Target]]]) -> None:
    """One ingestion round for every request: the tables of the scenarios that ingest from the real
    Bronze are waited for and ingested once, all their variants in one call
    (:meth:`ScenarioContext.ingest_now` of the union); a scenario with a Bronze of its own (a mirror,
    :meth:`ScenarioContext.use_scratch`) syncs its own scratch tables. Each scenario records the
    results of its own tables."""
    on_real = [(ctx, targets) for ctx, targets in requests if not _own_bronze(ctx)]
    if on_real:
        union = list(dict.fromkeys(t for _, targets in on_real for t in targets))
        results = on_real[0][0].ingest_now(union)
        for ctx, targets in on_real:
            ctx.record(targets, results)
    for ctx, targets in requests:
        if _own_bronze(ctx):
            ctx.record(targets, ctx.ingest_now(targets))


def _own_bronze(ctx: ScenarioContext) -> bool:
    return ctx.mirror or ctx.bronze_root is not None


@dataclass(eq=False)
class _Parked:
    ctx: ScenarioContext
    targets: Sequence[Target]
    check: Callable[[], list[dict[str, Any]]] | None = None  # set: the scenario has finished
    done: bool = False
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None


class SharedRounds:
    """The barrier of one run of scenarios side by side (module docstring).

    Args:
        parties: how many scenarios run; each calls :meth:`sync` at its sync points and then
            :meth:`finish` (or :meth:`leave` when its script failed) exactly once.
        timeout_s: how long a scenario waits for the others at a barrier before the run fails.
    """

    def __init__(self, parties: int, *, timeout_s: float = 900.0) -> None:
        self._live = parties
        self._parked: list[_Parked] = []
        self._cond = threading.Condition()
        self._timeout_s = timeout_s
        self._reserved: dict[tuple[str, str], int] = {}

    def reserve(self, target: Target, free_from: int) -> int:
        """The first of :data:`KEY_BLOCK` keys of ``target``'s source table for one scenario: at
        least ``free_from`` (one past every key the table has or had) and past every block already
        handed out in this run."""
        with self._cond:
            table = (target.source, target.table)
            first = max(free_from, self._reserved.get(table, 0))
            self._reserved[table] = first + KEY_BLOCK
            return first

    def sync(self, ctx: ScenarioContext, targets: Sequence[Target]) -> None:
        """Wait at the barrier until the round that takes ``ctx``'s changes so far has run.

        Raises:
            CheckError: when the round failed (naming the error), or the others did not arrive
                within ``timeout_s``.
        """
        parked = _Parked(ctx, targets)
        self._park(parked)
        if parked.error is not None:
            raise CheckError(f"Failed to ingest the shared round: {parked.error}") from parked.error

    def finish(self, ctx: ScenarioContext, check: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """The scenario's script is done: at the next barrier its tables are ingested once more
        (another scenario may have changed the same table since) and ``check`` runs there; its rows.

        Raises:
            CheckError: as :meth:`sync`; or what ``check`` raised.
        """
        parked = _Parked(ctx, ctx.targets, check)
        self._park(parked)
        if parked.error is not None:
            raise parked.error
        return parked.rows

    def leave(self) -> None:
        """A scenario's script failed: the others no longer wait for it."""
        with self._cond:
            self._live -= 1
            self._cond.notify_all()
        self._run_if_all_parked()

    def _park(self, parked: _Parked) -> None:
        with self._cond:
            self._parked.append(parked)
            self._cond.notify_all()
        self._run_if_all_parked()
        with self._cond:
            if not self._cond.wait_for(lambda: parked.done, timeout=self._timeout_s):
                if parked in self._parked:  # the others never came: this one stops waiting
                    self._parked.remove(parked)
                    if parked.check is not None:  # and will not come back
                        self._live -= 1
                parked.error = CheckError(
                    f"Failed to meet the other scenarios at a sync point within {self._timeout_s:.0f} s"
                )

    def _run_if_all_parked(self) -> None:
        """The last scenario to arrive runs the round for all parked ones, outside the lock."""
        with self._cond:
            if not self._parked or len(self._parked) < self._live:
                return
            batch, self._parked = self._parked, []
            self._live -= sum(1 for p in batch if p.check is not None)
        try:
            sync_together([(p.ctx, p.targets) for p in batch])
        except Exception as exc:  # noqa: BLE001 - every scenario of the round gets the error
            for p in batch:
                p.error = exc
        else:
            for p in batch:
                if p.check is not None:
                    try:
                        p.rows = p.check()
                    except Exception as exc:  # noqa: BLE001 - the scenario's own failure
                        p.error = exc
        with self._cond:
            for p in batch:
                p.done = True
            self._cond.notify_all()
