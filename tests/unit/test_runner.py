"""The runner executes notebooks in order with papermill and stops at the first failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from helpers import runner
from helpers.errors import ParamsError, RunnerError
from helpers.memory import process_label
from helpers.params import load_params
from helpers.runner import discover_notebooks, run_workbook, skip_reason


def _notebook(path: Path, *cells: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('env: str = "local"\noverrides: dict = {}\nrun_dir: str = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(c) for c in cells)]
    nbformat.write(nb, str(path))


def test_discover_orders_by_number_and_filters(tmp_path: Path) -> None:
    for name in ("02_b.ipynb", "01_a.ipynb", "10_c.ipynb", "notes.ipynb", "3_bad.ipynb"):
        _notebook(tmp_path / name, "pass")
    assert [p.name for p in discover_notebooks(tmp_path)] == ["01_a.ipynb", "02_b.ipynb", "10_c.ipynb"]
    assert [p.name for p in discover_notebooks(tmp_path, only=["02"])] == ["02_b.ipynb"]
    with pytest.raises(RunnerError, match="none named"):
        discover_notebooks(tmp_path, only=["99"])


def test_run_stops_at_first_failure_with_readable_summary(tmp_path: Path) -> None:
    """Expected: 01 runs with the injected env, 02 fails in its third cell, 03 never runs."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(
        nbs / "01_first.ipynb",
        "import json, pathlib\n"
        "pathlib.Path(run_dir, 'seen.json').write_text(json.dumps({'env': env, 'overrides': overrides}))",
    )
    _notebook(nbs / "02_second.ipynb", "x = 1", "raise ValueError('source table ems.venue is empty')")
    _notebook(nbs / "03_third.ipynb", "import pathlib\npathlib.Path(run_dir, 'third').touch()")
    out = tmp_path / "run"
    result = run_workbook("ci", {"tickit.scale": 0.02}, run_dir=out, notebooks_dir=nbs, progress=False)
    assert not result.ok
    assert [(n.name, n.ok) for n in result.notebooks] == [
        ("01_first.ipynb", True),
        ("02_second.ipynb", False),
    ]
    assert json.loads((out / "seen.json").read_text()) == {"env": "ci", "overrides": {"tickit.scale": 0.02}}
    assert not (out / "third").exists()
    error = result.notebooks[1].error or ""
    assert "cell In [4]" in error and "ValueError: source table ems.venue is empty" in error
    assert "raise ValueError" in error and "x = 1" not in error and str(out / "02_second.ipynb") in error
    summary = json.loads((out / "run-summary.json").read_text())
    assert summary["ok"] is False and summary["notebooks"][1]["name"] == "02_second.ipynb"
    assert "FAIL 02_second.ipynb" in result.summary()
    # the run's memory: the kernels count (they are children of the runner), per notebook and in all
    assert summary["peak_rss_bytes"] >= max(n["peak_rss_bytes"] for n in summary["notebooks"]) > 20 << 20
    assert 0 < summary["peak_pss_bytes"] <= summary["peak_rss_bytes"]
    assert "peak memory" in result.summary() and summary["seconds"] > 0
    # that peak taken apart by process: the runner's own process is among them, the parts add up
    makeup = {part["processes"]: part for part in summary["peak_makeup"]}
    assert process_label(os.getpid()) in makeup
    assert sum(part["pss_bytes"] for part in makeup.values()) == summary["peak_pss_bytes"]
    assert "at the peak: " in result.summary()


def test_a_notebook_marked_for_other_environments_is_skipped_and_said_so(tmp_path: Path) -> None:
    """02's metadata skips it on ci (as 07's skips aws). Expected: 01 and 03 run, 02 does not (its
    cell would fail), the summary and run-summary.json give the reason, the run is ok."""
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "01_first.ipynb", "x = 1")
    _notebook(nbs / "02_local_only.ipynb", "raise RuntimeError('ran where it must not')")
    skipped = nbformat.read(str(nbs / "02_local_only.ipynb"), as_version=4)
    skipped.metadata["workbook"] = {"skip_environments": {"ci": "needs the user's own servers"}}
    nbformat.write(skipped, str(nbs / "02_local_only.ipynb"))
    _notebook(nbs / "03_third.ipynb", "import pathlib\npathlib.Path(run_dir, 'third').touch()")
    out = tmp_path / "run"
    result = run_workbook("ci", run_dir=out, notebooks_dir=nbs, progress=False)
    assert result.ok, result.summary()
    assert [(n.name, n.skipped) for n in result.notebooks] == [
        ("01_first.ipynb", None),
        ("02_local_only.ipynb", "needs the user's own servers"),
        ("03_third.ipynb", None),
    ]
    assert (out / "third").exists() and not (out / "02_local_only.ipynb").exists()
    assert "skip 02_local_only.ipynb" in result.summary()
    assert json.loads((out / "run-summary.json").read_text())["notebooks"][1]["skipped"] == (
        "needs the user's own servers"
    )


def test_a_finished_notebook_s_kernel_is_shut_down_without_an_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jupyter_client sends SIGINT before every shutdown request, which ipykernel can log as an
    error on the run's console after a notebook that passed. The runner's kernels are asked to shut
    down without it; every kernel still exits."""
    import psutil
    from jupyter_client.manager import AsyncKernelManager

    signals: list[int] = []
    send = AsyncKernelManager._async_signal_kernel

    async def recorded(self: AsyncKernelManager, signum: int) -> None:
        signals.append(signum)
        await send(self, signum)

    monkeypatch.setattr(AsyncKernelManager, "_async_signal_kernel", recorded)
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    _notebook(nbs / "01_first.ipynb", "import os\nprint(os.getpid())")
    _notebook(nbs / "02_second.ipynb", "import os\nprint(os.getpid())")
    result = run_workbook("ci", run_dir=tmp_path / "run", notebooks_dir=nbs, progress=False)
    assert result.ok, result.summary()
    assert signals == []  # no SIGINT (jupyter_client's own shutdown sends one per kernel)
    kernels = []
    for name in ("01_first.ipynb", "02_second.ipynb"):
        ran = nbformat.read(str(tmp_path / "run" / name), as_version=4)
        kernels.append(int(ran.cells[-1].outputs[0]["text"]))
    assert len(set(kernels)) == 2 and not [pid for pid in kernels if psutil.pid_exists(pid)]


def test_the_conformance_notebook_is_skipped_on_aws_only() -> None:
    """Notebook 07 scripts changes on the local servers: skipped on aws, run everywhere else."""
    nb07 = next(p for p in discover_notebooks() if p.name.startswith("07_"))
    assert skip_reason(nb07, "aws") and "local source servers" in (skip_reason(nb07, "aws") or "")
    assert all(skip_reason(nb07, env) is None for env in ("local", "ci", "local-kafka"))
    assert all(skip_reason(nb, "aws") is None for nb in discover_notebooks() if nb != nb07)


def test_bad_parameters_fail_before_any_notebook(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="tickit.scael"):
        run_workbook(
            "ci", {"tickit.scael": 1}, run_dir=tmp_path / "r", notebooks_dir=tmp_path, progress=False
        )
    assert not (tmp_path / "r").exists()


class _RecordingTrino:
    """Stands in for the Trino server in the runner's bookkeeping only (the real server's
    on-demand start and stop are tested in tests/integration/test_stack.py)."""

    events: list[str] = []

    def __init__(self, _params: object) -> None:
        pass

    def acquire(self) -> str:
        self.events.append("acquire")
        return "claim"

    def release(self, claim: str) -> bool:
        self.events.append(f"release {claim}")
        return True


@pytest.mark.parametrize(
    ("names", "engine", "expected"),
    [
        (
            ["03_a", "04_b", "05_c", "06_d", "07_e"],
            "trino",
            ["before 05_c", "acquire", "after 06_d", "release"],
        ),
        (["05_c", "06_d"], "trino", ["before 05_c", "acquire", "after 06_d", "release"]),
        (["05_c"], "trino", ["before 05_c", "acquire", "after 05_c", "release"]),
        (["07_e"], "trino", []),
        (["04_b", "05_c", "06_d"], "duckdb", []),
    ],
)
def test_a_run_holds_trino_from_the_first_query_notebook_to_the_last(
    monkeypatch: pytest.MonkeyPatch, names: list[str], engine: str, expected: list[str]
) -> None:
    monkeypatch.setattr(runner, "LocalTrino", _RecordingTrino)
    _RecordingTrino.events = []
    params = load_params("local", {"local.query_engine": engine})
    trino = runner._TrinoForTheRun(params, [Path(f"{n}.ipynb") for n in names])
    for name in names:
        before = len(_RecordingTrino.events)
        trino.before(Path(f"{name}.ipynb"))
        if trino.claim is not None:
            trino.claim.result()
        if len(_RecordingTrino.events) > before:
            _RecordingTrino.events.insert(before, f"before {name}")
        before = len(_RecordingTrino.events)
        trino.after(Path(f"{name}.ipynb"))
        if len(_RecordingTrino.events) > before:
            _RecordingTrino.events.insert(before, f"after {name}")
    trino.release()  # as the run's end does: nothing more
    assert [e.replace(" claim", "") for e in _RecordingTrino.events] == expected
