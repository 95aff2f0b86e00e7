"""Holding the continuous Silver job: a claim counts while its very process runs, and a held job
skips its rounds and says who holds it (``helpers.silver.hold``; the running job honouring it:
``tests/integration/test_capture_local.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import helpers.silver.job as job
from helpers.params import load_params
from helpers.proc import process_identity, process_start
from helpers.silver.hold import HOLDS_DIR, hold_rounds, holders


@pytest.fixture
def params(tmp_path: Path) -> Any:
    return load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.bronze": str(tmp_path / "b")})


def _directory(params: Any) -> Path:
    return params.state_path / "silver"


def test_a_hold_counts_for_the_block_and_is_gone_after_it(params: Any) -> None:
    assert holders(_directory(params)) == []
    with hold_rounds(params, "a test") as claim:
        held = holders(_directory(params))
        assert [(h["pid"], h["reason"]) for h in held] == [(os.getpid(), "a test")]
        assert claim.exists()
    assert not claim.exists()
    assert holders(_directory(params)) == []


def test_a_hold_ends_when_its_block_raises(params: Any) -> None:
    with pytest.raises(RuntimeError), hold_rounds(params, "a test"):
        raise RuntimeError("boom")
    assert holders(_directory(params)) == []


def _claim(params: Any, name: str, body: Any) -> Path:
    folder = _directory(params) / HOLDS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def test_a_claim_of_a_process_that_ended_holds_nothing_and_is_removed(params: Any) -> None:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    pid = int(child.stdout)
    path = _claim(params, f"{pid}-1-dead.json", {"pid": pid, "reason": "killed run"})
    assert holders(_directory(params)) == []
    assert not path.exists()


def test_a_claim_whose_pid_now_names_another_process_holds_nothing(params: Any) -> None:
    mine = os.getpid()
    other_start = str(int(process_start(mine) or 0) + 1)  # same pid, another start: a reused pid
    path = _claim(params, f"{mine}-{other_start}-reused.json", {"pid": mine, "reason": "old run"})
    assert holders(_directory(params)) == []
    assert not path.exists()


def test_a_damaged_claim_holds_nothing_and_is_removed(params: Any) -> None:
    path = _claim(params, f"{process_identity()}-damaged.json", "{not json")  # of a live process
    assert holders(_directory(params)) == []
    assert not path.exists()


class _Stop(threading.Event):
    """The job's stop event, set after ``rounds`` waits (each held wait or pause counts one)."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.left = waits

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        if self.left <= 0:
            self.set()
        return self.is_set()


class _Watch:
    active = True

    def __init__(self, stopping: _Stop) -> None:
        self.stopping = stopping

    def start(self) -> None:
        pass

    def wait(self, timeout: float, stop: Any = None) -> bool:
        self.stopping.wait(timeout)
        return True  # a file landed: each pause is one wait

    def take(self) -> bool:
        return False


def test_a_held_job_skips_its_rounds_and_names_the_holder_then_goes_on(params: Any, monkeypatch: Any) -> None:
    directory = _directory(params)
    directory.mkdir(parents=True)
    rounds: list[Any] = []
    statuses: list[dict[str, Any]] = []
    monkeypatch.setattr(
        job,
        "ingest_all",
        lambda p, spark=None: (
            rounds.append(p) or pd.DataFrame([{"table": "sale", "files": 0, "instant": None}])
        ),
    )
    monkeypatch.setattr(job, "write_status", lambda d, s: statuses.append(json.loads(json.dumps(s))))
    status: dict[str, Any] = {"state": "RUNNING", "loops": 0, "last_commit": {}}
    stopping = _Stop(3)
    with hold_rounds(params, "conformance scenarios (12)"):
        job._loop(params, directory, None, None, status, stopping, _Watch(stopping))  # type: ignore[arg-type]
    assert rounds == []  # three held looks, no round
    assert status["loops"] == 0
    assert statuses[-1]["held_by"] == [f"pid {os.getpid()}: conformance scenarios (12)"]

    stopping = _Stop(2)
    job._loop(params, directory, None, None, status, stopping, _Watch(stopping))  # type: ignore[arg-type]
    assert len(rounds) == 2  # the hold ended: rounds again
    assert status["loops"] == 2
    assert statuses[-1]["held_by"] is None


def test_a_wait_for_a_round_of_a_held_job_says_who_holds_it(tmp_path: Path) -> None:
    from helpers.errors import HudiError
    from helpers.silver.backend import wait_for_job_round

    class _HeldJob:
        directory = tmp_path

        def request_round(self) -> None:
            (tmp_path / "asked").touch()

        def status(self) -> dict[str, Any]:
            return {
                "state": "RUNNING",
                "run_id": "r",
                "loops": 3,
                "held_by": ["pid 42: conformance scenarios (12)"],
            }

    with pytest.raises(
        HudiError, match=r"no round finished in 1 s; it is held by pid 42: conformance scenarios"
    ):
        wait_for_job_round(_HeldJob(), timeout_s=1.0)
    assert (tmp_path / "asked").exists()  # the round was asked for; the hold keeps it waiting
