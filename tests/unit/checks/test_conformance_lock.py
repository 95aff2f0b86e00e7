"""One conformance run at a time per pipeline: a second run is refused at once, naming the first;
a run that was killed does not hold the pipeline any more."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.checks.conformance import run_scenarios
from helpers.checks.conformance.harness import RUN_LOCK, one_run_at_a_time
from helpers.errors import CheckError
from helpers.params import WorkbookParams, load_params, project_root
from helpers.poll import wait_until


def _holder(params: WorkbookParams) -> subprocess.Popen[str]:
    """A child process that holds the pipeline's lock (it prints ``holding`` once it does)."""
    holder = textwrap.dedent(
        f"""
        import time
        from helpers.checks.conformance.harness import one_run_at_a_time
        from helpers.params import load_params
        with one_run_at_a_time(load_params("ci", overrides={{"state_dir": {str(params.state_path)!r}}})):
            print("holding", flush=True)
            time.sleep(120)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder], cwd=project_root(), stdout=subprocess.PIPE, text=True, env=os.environ
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "holding"
    return child


def test_a_second_run_is_refused_and_a_killed_run_frees_the_pipeline(tmp_path: Path) -> None:
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    child = _holder(params)
    try:
        with pytest.raises(CheckError, match=rf"another run \(pid {child.pid}\).*{RUN_LOCK}.*Wait for it"):
            run_scenarios(params, ["deletes_postgres"])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    def free() -> bool:
        try:
            with one_run_at_a_time(params):
                return (params.state_path / f"{RUN_LOCK}.pid").read_text().strip() == str(os.getpid())
        except CheckError:
            return False

    wait_until(free, timeout_s=10, what="the killed run's lock to be free")


def test_the_command_is_refused_before_it_starts_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``./workbook conformance`` takes the lock before it starts servers or registers connectors,
    so a second command leaves the first run's pipeline alone."""
    from helpers import cli

    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    started: list[WorkbookParams] = []
    monkeypatch.setattr(cli, "ensure_pipeline", started.append)
    child = _holder(params)
    try:
        code = cli.main(["conformance", "--env", "ci", "--set", f"state_dir={params.state_path}", "--short"])
    finally:
        child.kill()
        child.wait()
    assert code == 2
    assert f"another run (pid {child.pid})" in capsys.readouterr().err
    assert started == []


def test_the_process_holding_the_lock_may_enter_it_again(tmp_path: Path) -> None:
    """The command holds it, then run_scenarios enters it: the pid file stays until the outer exit."""
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    owner = params.state_path / f"{RUN_LOCK}.pid"
    with one_run_at_a_time(params):
        with one_run_at_a_time(params):
            assert owner.read_text().strip() == str(os.getpid())
        assert owner.read_text().strip() == str(os.getpid())
    assert not owner.exists()
    child = _holder(params)  # and another process may take it afterwards
    child.kill()
    child.wait()
