"""The barrier of scenarios run side by side (helpers.checks.conformance.rounds): one ingestion
round per barrier for every scenario waiting there, final checks only at a barrier, disjoint key
blocks, and a failed script that does not hold the others up. The rounds themselves are recorded
here instead of ingested; tests/integration/test_conformance.py runs them on the real pipeline."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import helpers.checks.conformance.rounds as rounds_module
from helpers.checks.conformance.rounds import KEY_BLOCK, SharedRounds
from helpers.errors import CheckError
from helpers.sources.edge_cases.session import CATEGORY, CATEGORY_BY_GROUP, SALE, Target


class _Ctx:
    def __init__(self, name: str, targets: tuple[Target, ...]) -> None:
        self.name = name
        self.targets = targets


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[str, tuple[str, ...]]]]:
    """Each round: the scenarios in it and the tables each asked for."""
    log: list[list[tuple[str, tuple[str, ...]]]] = []

    def record(requests: Sequence[tuple[Any, Sequence[Target]]]) -> None:
        time.sleep(0.05)  # a round takes a while: nobody may slip past it
        log.append(sorted((ctx.name, tuple(t.table for t in targets)) for ctx, targets in requests))

    monkeypatch.setattr(rounds_module, "sync_together", record)
    return log


def test_scenarios_share_each_round_and_check_only_at_a_barrier(recorded: list[Any]) -> None:
    """Three scripts with 1, 2 and 3 sync points: three rounds, not six; a finished scenario's
    check runs in the round of the others' next sync point, while no script is running."""
    shared = SharedRounds(3)
    lock = threading.Lock()
    running = [0]  # scripts inside a step (changing their source) now
    checked_while_running: list[int] = []

    def step(seconds: float) -> None:
        with lock:
            running[0] += 1
        time.sleep(seconds)
        with lock:
            running[0] -= 1

    def script(name: str, syncs: int, target: Target) -> list[dict[str, Any]]:
        ctx: Any = _Ctx(name, (target,))
        step(0.01 * syncs)
        for _ in range(syncs):
            shared.sync(ctx, (target,))
            step(0.01)

        def check() -> list[dict[str, Any]]:
            checked_while_running.append(running[0])
            return [{"scenario": name}]

        return shared.finish(ctx, check)

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(script, ["a", "b", "c"], [1, 2, 3], [CATEGORY, SALE, CATEGORY_BY_GROUP]))
    assert results == [[{"scenario": "a"}], [{"scenario": "b"}], [{"scenario": "c"}]]
    assert [len(r) for r in recorded] == [3, 3, 2, 1], recorded  # a's finish shares b's and c's 2nd round
    assert recorded[0] == [("a", ("category",)), ("b", ("sale",)), ("c", ("category",))]
    assert checked_while_running == [0, 0, 0]


def test_key_blocks_never_overlap_and_start_past_the_table(recorded: list[Any]) -> None:
    """Two scenarios on one source table (two targets over ``ems.category``) get blocks of
    KEY_BLOCK keys one after the other; another table starts on its own."""
    shared = SharedRounds(3)
    first = shared.reserve(CATEGORY, 100)
    second = shared.reserve(CATEGORY_BY_GROUP, 100)
    assert (first, second) == (100, 100 + KEY_BLOCK)
    assert shared.reserve(CATEGORY, 500) == 500  # past both blocks already
    assert shared.reserve(SALE, 7) == 7


def test_a_failed_script_leaves_and_the_others_go_on(recorded: list[Any]) -> None:
    shared = SharedRounds(2)

    def failing() -> None:
        shared.leave()  # what the harness does when a script raises

    def going_on() -> list[dict[str, Any]]:
        ctx: Any = _Ctx("ok", (SALE,))
        shared.sync(ctx, (SALE,))
        return shared.finish(ctx, lambda: [{"scenario": "ok"}])

    with ThreadPoolExecutor(2) as pool:
        done = pool.submit(going_on)
        pool.submit(failing).result()
        assert done.result(timeout=10) == [{"scenario": "ok"}]


def test_a_failed_round_fails_every_scenario_in_it_naming_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(requests: Sequence[tuple[Any, Sequence[Target]]]) -> None:
        raise OSError("disk full under c_category_cow_hard")

    monkeypatch.setattr(rounds_module, "sync_together", broken)
    shared = SharedRounds(2)

    def one(name: str) -> str:
        try:
            shared.sync(_Ctx(name, (CATEGORY,)), (CATEGORY,))  # type: ignore[arg-type]
        except CheckError as exc:
            return str(exc)
        return "no error"

    with ThreadPoolExecutor(2) as pool:
        messages = list(pool.map(one, ["a", "b"]))
    assert all("disk full under c_category_cow_hard" in m for m in messages), messages


def test_a_scenario_the_others_never_meet_stops_waiting() -> None:
    shared = SharedRounds(2, timeout_s=0.2)
    with pytest.raises(CheckError, match="sync point within 0 s"):
        shared.sync(_Ctx("alone", (SALE,)), (SALE,))  # type: ignore[arg-type]
