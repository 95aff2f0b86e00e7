"""A long-running workbook job (the Silver job, the Bronze sink) runs with the parameters it was
last started with: started again with the same ones it is left alone, with others it restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

import helpers.proc as proc


class _Job(proc.ModuleJob):
    module: ClassVar[str] = "helpers.nothing"
    pid_name: ClassVar[str] = "job.pid"
    log_name: ClassVar[str] = "job.log"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def directory(self) -> Path:
        return self.folder


def test_launch_keeps_a_job_with_the_same_config_and_restarts_one_with_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    alive: dict[str, Any] = {"pid": None}

    def spawn(*_args: Any, **_kwargs: Any) -> int:
        calls.append("spawn")
        alive["pid"] = 4242
        return 4242

    def stop(pid: int, _timeout: float) -> None:
        calls.append(f"stop {pid}")
        alive["pid"] = None

    monkeypatch.setattr(proc, "spawn_module", spawn)
    monkeypatch.setattr(proc, "stop_process", stop)
    monkeypatch.setattr(proc, "live_pid", lambda _path: alive["pid"])
    job = _Job(tmp_path)
    assert job.launch({"tables": ["a"]}, {}) == 4242
    assert job.launch({"tables": ["a"]}, {}) == 4242
    assert calls == ["spawn"]  # the same parameters: left running
    assert job.launch({"tables": ["a", "b"]}, {}) == 4242
    assert calls == ["spawn", "stop 4242", "spawn"]  # a table added: stopped after its round, started again
