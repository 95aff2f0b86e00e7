"""``./workbook run --env aws``: the notebooks in order as EMR Studio notebook executions on the
workbook's cluster (:func:`run_notebook_executions`).

Each notebook gets the parameters papermill passes locally (``env``, ``overrides``, ``run_dir``),
runs in the workspace ``aws.studio.editor_id`` on the cluster ``aws.emr.cluster_id``, and is
awaited until it ends; the run stops at the first notebook that does not finish. The executed
notebooks are copied from S3 into the local run folder, next to the same ``run-summary.json`` as
a local run (:func:`helpers.runner.write_run_summary`).

Example:
    >>> result = run_notebook_executions(overrides={"aws.emr.cluster_id": "j-..."})  # doctest: +SKIP
    >>> print(result.summary())                                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from helpers.deploy.emr import aws_settings, open_emr_client
from helpers.errors import AwsError, WaitTimeoutError
from helpers.params import StudioParams, WorkbookParams, load_params
from helpers.poll import wait_until
from helpers.runner import (
    NotebookResult,
    RunResult,
    discover_notebooks,
    skip_reason,
    skipped_result,
    write_run_summary,
)
from helpers.sources.rds_cdc import call_aws

__all__ = [
    "TERMINAL_STATES",
    "execution_request",
    "output_location",
    "run_notebook_executions",
    "wait_for_execution",
]

#: Where a notebook execution ends; only ``FINISHED`` is a success.
TERMINAL_STATES = ("FINISHED", "FAILED", "STOPPED")

_log = logging.getLogger(__name__)


def output_location(params: WorkbookParams) -> tuple[str, str]:
    """Bucket and key prefix of the executed notebooks: ``aws.studio.output_location``, or
    ``s3://<aws.s3_bucket>/workbook/executions``.

    Raises:
        AwsError: when ``aws.studio.output_location`` is not an ``s3://`` URI.
    """
    aws = aws_settings(params, "find the notebook output location")
    uri = aws.studio.output_location or f"s3://{aws.s3_bucket}/workbook/executions"
    if not uri.startswith("s3://"):
        raise AwsError(f"Failed to use aws.studio.output_location {uri!r}: write it as s3://bucket/prefix")
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def execution_request(
    params: WorkbookParams, notebook: str, *, run_name: str, notebook_params: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``StartNotebookExecution`` request of one notebook of the run ``run_name``.

    Args:
        params: workbook parameters (``aws.emr.cluster_id``, ``aws.studio``).
        notebook: the notebook's file name (``01_enable_cdc.ipynb``).
        run_name: the run (``<UTC timestamp>-aws``): names the execution and its output folder.
        notebook_params: the papermill parameters, sent as JSON.

    Raises:
        AwsError: when the workspace or the cluster is not set.
    """
    aws = aws_settings(params, "build a notebook execution request")
    for key, value in (
        ("aws.studio.editor_id", aws.studio.editor_id),
        ("aws.emr.cluster_id", aws.emr.cluster_id),
    ):
        if not value:
            raise AwsError(
                f"Failed to build a notebook execution request: {key} is empty; set it, e.g. --set {key}=... "
                "(the EMR Studio workspace id e-..., the cluster id j-... from cluster create --apply)"
            )
    bucket, prefix = output_location(params)
    return {
        "EditorId": aws.studio.editor_id,
        "RelativePath": f"{aws.studio.notebooks_path.strip('/')}/{notebook}",
        "NotebookExecutionName": f"{params.project}-{run_name}-{notebook.removesuffix('.ipynb')}",
        "ExecutionEngine": {"Id": aws.emr.cluster_id, "Type": "EMR"},
        "ServiceRole": aws.studio.service_role,
        "NotebookParams": json.dumps(dict(notebook_params), sort_keys=True),
        "OutputNotebookS3Location": {"Bucket": bucket, "Key": f"{prefix}/{run_name}".lstrip("/")},
        "Tags": [{"Key": "workbook-run", "Value": run_name}],
    }


def wait_for_execution(
    emr_client: Any,
    execution_id: str,
    *,
    timeout_s: float,
    max_interval_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Describe a notebook execution until it is in one of :data:`TERMINAL_STATES`.

    Returns:
        The last ``NotebookExecution`` description.

    Raises:
        AwsError: when EMR cannot describe it.
        WaitTimeoutError: when it has not ended within ``timeout_s`` (naming its last state).
    """
    last: dict[str, Any] = {}

    def ended() -> dict[str, Any] | None:
        response = call_aws(
            f"describe notebook execution {execution_id}",
            emr_client.describe_notebook_execution,
            NotebookExecutionId=execution_id,
        )
        last.clear()
        last.update(response["NotebookExecution"])
        return last if last.get("Status") in TERMINAL_STATES else None

    return wait_until(
        ended,
        timeout_s=timeout_s,
        what=f"notebook execution {execution_id} to end",
        interval_s=min(5.0, max_interval_s),
        max_interval_s=max_interval_s,
        detail=lambda: f"its last status was {last.get('Status')}",
        sleep=sleep,
        clock=clock,
    )


def _download(s3_client: Any, uri: str, target: Path) -> bool:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        body = call_aws(f"download {uri}", s3_client.get_object, Bucket=bucket, Key=key)["Body"]
        target.write_bytes(body.read())
    except AwsError as exc:
        _log.warning("%s (the executed notebook stays in S3)", exc)
        return False
    return True


def _execute(
    emr: Any,
    s3_client: Any,
    request: dict[str, Any],
    output: Path,
    studio: StudioParams,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> NotebookResult:
    """Start one notebook execution, wait for its end, copy the executed notebook to ``output``."""
    started = clock()
    try:
        execution_id = call_aws(
            f"start notebook execution {request['NotebookExecutionName']}",
            emr.start_notebook_execution,
            **request,
        )["NotebookExecutionId"]
    except AwsError as exc:  # e.g. the cluster is not WAITING: this notebook failed
        return NotebookResult(output.name, output, clock() - started, False, str(exc))
    try:
        execution = wait_for_execution(
            emr,
            execution_id,
            timeout_s=studio.timeout_s,
            max_interval_s=studio.poll_interval_s,
            sleep=sleep,
            clock=clock,
        )
    except WaitTimeoutError as exc:
        call_aws(
            f"stop notebook execution {execution_id}",
            emr.stop_notebook_execution,
            NotebookExecutionId=execution_id,
        )
        return NotebookResult(
            output.name, output, clock() - started, False, f"{exc}; the execution was stopped"
        )
    uri = execution.get("OutputNotebookURI", "")
    copied = bool(uri) and _download(s3_client, uri, output)
    if execution.get("Status") == "FINISHED":
        return NotebookResult(output.name, output, clock() - started, True)
    reason = execution.get("LastStateChangeReason") or "no reason given"
    detail = f"notebook execution {execution_id} {execution.get('Status')}: {reason}"
    detail += f"\nexecuted notebook: {uri or 'none written'}" + (f" (copy: {output})" if copied else "")
    return NotebookResult(output.name, output, clock() - started, False, detail)


def run_notebook_executions(
    env: str = "aws",
    overrides: Mapping[str, Any] | None = None,
    only: Sequence[str] = (),
    run_dir: Path | None = None,
    *,
    emr_client: Any = None,
    s3_client: Any = None,
    notebooks_dir: Path | None = None,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> RunResult:
    """Run the notebooks in order as EMR Studio notebook executions; stop at the first failure.

    Args:
        env: parameters overlay (``aws``).
        overrides: dotted parameter overrides, passed to every notebook too.
        only: notebook name prefixes to run (default: all of ``notebooks/``).
        run_dir: local folder of the summary and executed notebooks (default
            ``<runs_dir>/<UTC timestamp>-<env>``); its name is the run's name on AWS too.
        emr_client: a boto3 EMR client (default: one in ``aws.region``).
        s3_client: a boto3 S3 client for copying the executed notebooks (default: one in ``aws.region``).
        notebooks_dir: the local notebooks folder that names the notebooks (default ``notebooks/``).
        progress: show a progress bar over the notebooks.
        sleep: how to pause between status calls (tests pass a recorder).
        clock: a monotonic clock in seconds.

    Returns:
        The run's result (``run-summary.json`` written); check ``ok``. A failed notebook's error
        names the execution, its status, EMR's reason and the executed notebook in S3.

    Raises:
        ParamsError: when the parameters are invalid (before anything starts).
        AwsError: when a setting is missing (before anything starts) or EMR cannot describe or
            stop an execution; a refused start is the failure of that notebook.
    """
    params = load_params(env, overrides)
    aws = aws_settings(params, "run the notebooks on EMR")
    notebooks = discover_notebooks(notebooks_dir, only=only)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = run_dir or params.path(params.runs_dir) / f"{stamp}-{env}"
    run_name = out_dir.name  # names the executions, their S3 folder and the run_dir on the cluster
    requests = {
        nb.name: execution_request(
            params,
            nb.name,
            run_name=run_name,
            notebook_params={
                "env": env,
                "overrides": dict(overrides or {}),
                "run_dir": f"{aws.studio.runs_dir.rstrip('/')}/{run_name}",
            },
        )
        for nb in notebooks
        if skip_reason(nb, env) is None
    }  # every request is built (and its settings checked) before the first one starts
    emr = emr_client if emr_client is not None else open_emr_client(params)
    if s3_client is None:
        import boto3

        s3_client = boto3.client("s3", region_name=aws.region)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = RunResult(env=env, run_dir=out_dir)
    bar = tqdm(notebooks, desc="workbook on EMR", unit="notebook", disable=not progress, file=sys.stderr)
    for nb in bar:
        bar.set_postfix_str(nb.name)
        skipped = skipped_result(nb, out_dir / nb.name, env)
        if skipped is not None:
            result.notebooks.append(skipped)
            continue
        outcome = _execute(emr, s3_client, requests[nb.name], out_dir / nb.name, aws.studio, sleep, clock)
        result.notebooks.append(outcome)
        if not outcome.ok:
            break
    bar.close()
    write_run_summary(result)
    return result
