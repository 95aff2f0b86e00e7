"""Run the workbook: every notebook in ``notebooks/``, in order, with papermill (:func:`run_workbook`).

Each run writes to ``<runs_dir>/<UTC timestamp>-<env>/`` and stops at the first failing notebook,
naming the notebook, the cell and the error. ``./workbook run`` (:mod:`helpers.cli`) calls it; see
``docs/architecture.md``, "Running the workbook".
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import papermill as pm
from jupyter_client.manager import AsyncKernelManager
from papermill.exceptions import PapermillExecutionError
from tqdm.auto import tqdm

from helpers.artefacts import RUN_STAMP_FORMAT, RUN_SUMMARY
from helpers.environments import implementations
from helpers.errors import RunnerError, StackError
from helpers.local.trino import LocalTrino
from helpers.memory import PeakMemory, describe_makeup
from helpers.params import WorkbookParams, load_params, project_root
from helpers.spark import RunDriver

GIB = 1024**3
log = logging.getLogger(__name__)

__all__ = [
    "QUERY_NOTEBOOKS",
    "SKIP_METADATA",
    "NotebookResult",
    "RunResult",
    "discover_notebooks",
    "run_workbook",
    "skip_reason",
    "skipped_result",
    "write_run_summary",
]

#: The notebook-level metadata key that names the environments a notebook does not run in, each
#: with the reason: ``{"workbook": {"skip_environments": {"aws": "why"}}}``. Both runners (local
#: papermill and EMR Studio executions) honour it and report the notebook as skipped.
SKIP_METADATA = "workbook"

#: notebooks whose engine reads Silver through the query engine (05 the SQL files, 06 the
#: dashboard's datasets): locally, the run holds Trino across them (:class:`_TrinoForTheRun`)
QUERY_NOTEBOOKS = ("05", "06")

_NOTEBOOK_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")


class IpcKernelManager(AsyncKernelManager):
    """Kernel manager whose kernel talks over unix sockets (0700 temporary folder), not TCP.

    The default TCP transport opens five unauthenticated-by-network ports; IPC keeps the kernel
    reachable only by this user on this machine.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._ipc_dir = tempfile.mkdtemp(prefix="workbook-kernel-")
        kwargs.setdefault("transport", "ipc")
        kwargs.setdefault("ip", os.path.join(self._ipc_dir, "kernel"))
        super().__init__(**kwargs)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)

    async def _async_interrupt_kernel(self) -> None:
        """Interrupt, except as the kernel is shut down. jupyter_client interrupts a kernel (SIGINT)
        before it asks it to shut down; when the signal lands while ipykernel handles a message, the
        kernel logs ``ERROR | KeyboardInterrupt caught in kernel.`` to the run's console after a
        notebook that passed. A shutdown needs no interrupt: the kernel exits on the request, and
        one that does not (still busy) gets SIGTERM, then SIGKILL (``shutdown_wait_time``)."""
        if self.shutting_down:
            return
        await super()._async_interrupt_kernel()


@dataclass(frozen=True)
class NotebookResult:
    """Outcome of one executed notebook."""

    name: str
    output_path: Path
    seconds: float
    ok: bool
    error: str | None = None
    peak_rss_bytes: int | None = None  # summed resident memory of the run's processes, this notebook
    skipped: str | None = None  # why the notebook did not run in this environment (its metadata)
    peak_pss_bytes: int | None = None  # the same, each shared page split between its sharers


@dataclass
class RunResult:
    """Outcome of a workbook run; ``ok`` is false when a notebook failed."""

    env: str
    run_dir: Path
    notebooks: list[NotebookResult] = field(default_factory=list)
    peak_rss_bytes: int | None = None  # summed resident memory of all the run's processes
    #: summed proportional set size (helpers.memory.process_pss): what the processes use together
    peak_pss_bytes: int | None = None
    #: that peak taken apart: (what the processes are, how many, bytes), largest first
    peak_makeup: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        """Time of all notebooks together."""
        return sum(nb.seconds for nb in self.notebooks)

    @property
    def ok(self) -> bool:
        """True when every notebook ran to the end."""
        return all(nb.ok for nb in self.notebooks)

    def summary(self) -> str:
        """A short, human-readable account of the run."""
        lines = [f"Workbook run ({self.env}) in {self.run_dir}"]
        for nb in self.notebooks:
            if nb.skipped:
                lines.append(f"  skip {nb.name:<40} not run on {self.env}: {nb.skipped}")
                continue
            mark = "ok  " if nb.ok else "FAIL"
            memory = f"  peak {_memory(nb.peak_pss_bytes, nb.peak_rss_bytes)}" if nb.peak_rss_bytes else ""
            lines.append(f"  {mark} {nb.name:<40} {nb.seconds:7.1f} s{memory}")
            if nb.error:
                lines.extend("       " + line for line in nb.error.splitlines())
        if self.notebooks:
            memory = (
                f", peak memory {_memory(self.peak_pss_bytes, self.peak_rss_bytes)}"
                if self.peak_rss_bytes
                else ""
            )
            lines.append(f"  total {self.seconds:.1f} s{memory} (all processes of the run together)")
            if self.peak_makeup:
                lines.append(f"  at the peak: {describe_makeup(self.peak_makeup)}")
        return "\n".join(lines)


def _memory(pss: int | None, rss: int | None) -> str:
    """A peak as the summary shows it: proportional set size, then summed resident memory."""
    return f"{(pss or 0) / GIB:5.2f} GiB proportional ({(rss or 0) / GIB:.2f} GiB resident)"


def discover_notebooks(folder: Path | None = None, only: Sequence[str] = ()) -> list[Path]:
    """List the workbook's notebooks in run order (``NN_verb_object.ipynb``).

    Args:
        folder: the notebooks folder (default ``<project root>/notebooks``).
        only: name prefixes to keep (e.g. ``["01", "02"]``); empty keeps all.

    Returns:
        Paths sorted by their number.

    Raises:
        RunnerError: when the folder holds no notebook, or ``only`` matches none.
    """
    folder = folder or project_root() / "notebooks"
    found = sorted(p for p in folder.glob("*.ipynb") if _NOTEBOOK_NAME.match(p.name))
    if only:
        found = [p for p in found if any(p.name.startswith(prefix) for prefix in only)]
    if not found:
        raise RunnerError(
            f"Failed to find notebooks in {folder}: none named NN_verb_object.ipynb"
            + (f" starting with {list(only)}" if only else "")
        )
    return found


def skip_reason(notebook: Path, env: str) -> str | None:
    """Why ``notebook`` does not run in ``env`` (its :data:`SKIP_METADATA` metadata), or None."""
    metadata = json.loads(notebook.read_text(encoding="utf-8")).get("metadata", {})
    reason = metadata.get(SKIP_METADATA, {}).get("skip_environments", {}).get(env)
    return None if reason is None else str(reason)


def skipped_result(notebook: Path, output: Path, env: str) -> NotebookResult | None:
    """The result of a notebook that does not run in ``env``, or None when it runs."""
    reason = skip_reason(notebook, env)
    return None if reason is None else NotebookResult(notebook.name, output, 0.0, True, skipped=reason)


def _describe_failure(exc: BaseException) -> str:
    """Turn papermill's execution error into 'cell In [N]: Type: message'."""

    if isinstance(exc, PapermillExecutionError):
        evalue = str(exc.evalue).strip()
        if len(evalue) > 2000:
            evalue = evalue[:2000] + " ..."
        return f"cell In [{exc.exec_count}]: {exc.ename}: {evalue}"
    return f"{type(exc).__name__}: {exc}"


def _failed_cell_source(output: Path) -> str | None:
    """First lines of the cell whose output holds the error, read from the executed notebook."""
    if not output.exists():
        return None
    try:
        nb = json.loads(output.read_text(encoding="utf-8"))
    except ValueError:
        return None
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else str(source)
            first = [line for line in text.splitlines() if line.strip()][:3]
            return "\n".join(first) if first else None
    return None


def run_workbook(
    env: str = "local",
    overrides: Mapping[str, Any] | None = None,
    only: Sequence[str] = (),
    run_dir: Path | None = None,
    kernel_name: str = "python3",
    progress: bool = True,
    notebooks_dir: Path | None = None,
) -> RunResult:
    """Execute the notebooks in order with papermill; stop at the first failure.

    Args:
        env: parameters overlay (``local``, ``aws``, ``ci``).
        overrides: dotted parameter overrides passed to every notebook.
        only: notebook name prefixes to run (default: all).
        run_dir: output folder (default ``<runs_dir>/<UTC timestamp>-<env>``).
        kernel_name: Jupyter kernel (the standard Python 3 kernel).
        progress: show a progress bar over notebooks and cells.
        notebooks_dir: where the notebooks are (default ``<project root>/notebooks``).

    Returns:
        The run's result; check ``ok``.

    Raises:
        ParamsError: when the parameters are invalid (checked before anything runs).
        RunnerError: when there is no notebook to run.
    """

    params = load_params(env, overrides)  # fail fast, before any notebook starts
    notebooks = discover_notebooks(notebooks_dir, only=only)
    stamp = datetime.now(UTC).strftime(RUN_STAMP_FORMAT)
    out_dir = run_dir or params.path(params.runs_dir) / f"{stamp}-{env}"
    out_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(env=env, run_dir=out_dir)
    nb_params: dict[str, Any] = {
        "env": env,
        "overrides": dict(overrides or {}),
        "run_dir": str(out_dir),
    }
    bar = tqdm(notebooks, desc="workbook", unit="notebook", disable=not progress, file=sys.stderr)
    memory = PeakMemory(params.state_path).start()
    trino = _TrinoForTheRun(params, notebooks)
    driver = RunDriver(params, notebooks[0].parent) if RunDriver.wanted(params) else None
    lent = driver.start() if driver is not None else {}
    os.environ.update(lent)  # the kernels papermill starts inherit it
    try:
        _run_notebooks(bar, out_dir, env, nb_params, kernel_name, progress, result, memory, trino, driver)
    finally:
        for key in lent:
            os.environ.pop(key, None)
        if driver is not None:
            driver.close()
        trino.release()
        result.peak_rss_bytes, result.peak_pss_bytes = memory.stop()
        result.peak_makeup = memory.makeup
    bar.close()
    write_run_summary(result)
    return result


def _run_notebooks(
    bar: Any,
    out_dir: Path,
    env: str,
    nb_params: dict[str, Any],
    kernel_name: str,
    progress: bool,
    result: RunResult,
    memory: PeakMemory,
    trino: _TrinoForTheRun,
    driver: RunDriver | None,
) -> None:
    for nb in bar:
        bar.set_postfix_str(nb.name)
        trino.before(nb)
        output = out_dir / nb.name
        skipped = skipped_result(nb, output, env)
        if skipped is not None:
            result.notebooks.append(skipped)
            continue
        memory.mark()  # the section before this notebook ends (not timed with it)
        start = time.monotonic()
        try:
            _execute(nb, output, nb_params, kernel_name, progress, driver)
        except Exception as exc:  # papermill wraps kernel errors; anything else is also a failure
            detail = _describe_failure(exc)
            source = _failed_cell_source(output)
            if source:
                detail += f"\nthe cell starts with:\n{source}"
            detail += f"\nexecuted notebook: {output}"
            seconds = time.monotonic() - start
            peak = memory.mark()
            result.notebooks.append(
                NotebookResult(nb.name, output, seconds, False, detail, peak.rss, peak_pss_bytes=peak.pss)
            )
            break
        seconds = time.monotonic() - start
        peak = memory.mark()
        result.notebooks.append(
            NotebookResult(nb.name, output, seconds, True, None, peak.rss, peak_pss_bytes=peak.pss)
        )
        trino.after(nb)


def _execute(
    nb: Path,
    output: Path,
    nb_params: dict[str, Any],
    kernel_name: str,
    progress: bool,
    driver: RunDriver | None,
) -> None:
    """One notebook with papermill, in a kernel of its own; then the run's driver (if any) drops
    the SparkContext the kernel left in it."""
    try:
        pm.execute_notebook(
            str(nb),
            str(output),
            parameters=nb_params,
            kernel_name=kernel_name,
            cwd=str(nb.parent),
            progress_bar=progress,
            log_output=False,
            report_mode=False,
            kernel_manager_class="helpers.runner.IpcKernelManager",
        )
    finally:
        if driver is not None:
            driver.release_context()


class _TrinoForTheRun:
    """The local Trino held by a run across the notebooks that query through it
    (:data:`QUERY_NOTEBOOKS`), so it starts once, not once per notebook's engine: started in the
    background when the first of them begins (beside its kernel's start), released after the last.
    (Started one notebook earlier, behind notebook 04, it slowed 04 by more than it saved.) Each
    notebook's engine still claims it, and the last release stops it
    (:meth:`helpers.local.trino.LocalTrino.release`)."""

    def __init__(self, params: WorkbookParams, notebooks: Sequence[Path]) -> None:
        prefixes = [nb.name[:2] for nb in notebooks]
        querying = [i for i, prefix in enumerate(prefixes) if prefix in QUERY_NOTEBOOKS]
        wanted = bool(querying) and implementations(params).query == "trino"
        self.server = LocalTrino(params) if wanted else None
        self.start_at = notebooks[querying[0]].name if wanted else ""
        self.stop_after = notebooks[querying[-1]].name if wanted else ""
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trino")
        self.claim: Future[str] | None = None

    def before(self, nb: Path) -> None:
        if self.server is not None and nb.name == self.start_at and self.claim is None:
            self.claim = self.pool.submit(self.server.acquire)

    def after(self, nb: Path) -> None:
        if nb.name == self.stop_after:
            self.release()

    def release(self) -> None:
        claim, self.claim = self.claim, None
        if claim is not None and self.server is not None:
            try:
                self.server.release(claim.result())
            except StackError as exc:  # the notebook's own engine said so, where it mattered
                log.warning("the run's Trino: %s", exc)
        self.pool.shutdown(wait=True)


def write_run_summary(result: RunResult) -> Path:
    """Write ``<run_dir>/run-summary.json`` (env, ok, and per notebook name, seconds, ok, error).

    Returns:
        The file written.
    """
    path = result.run_dir / RUN_SUMMARY
    path.write_text(
        json.dumps(
            {
                "env": result.env,
                "ok": result.ok,
                "seconds": round(result.seconds, 2),
                "peak_rss_bytes": result.peak_rss_bytes,
                "peak_pss_bytes": result.peak_pss_bytes,
                "peak_makeup": [
                    {"processes": label, "count": count, "pss_bytes": size}
                    for label, count, size in result.peak_makeup
                ],
                "notebooks": [
                    {
                        "name": n.name,
                        "seconds": round(n.seconds, 2),
                        "ok": n.ok,
                        "error": n.error,
                        "peak_rss_bytes": n.peak_rss_bytes,
                        "peak_pss_bytes": n.peak_pss_bytes,
                        "skipped": n.skipped,
                    }
                    for n in result.notebooks
                ],
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return path
