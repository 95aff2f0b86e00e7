"""``run --env aws``: the notebooks as EMR Studio notebook executions, request by request against
botocore's Stubber, with an instant clock."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from support.aws import aws_overrides

from helpers.deploy.executions import run_notebook_executions
from helpers.errors import AwsError

OVERRIDES = aws_overrides(
    **{"aws.emr.cluster_id": "j-1ABC", "aws.studio.editor_id": "e-WORKSPACE", "tickit.scale": 0.1}
)
RUN = "20250102T030405Z-aws"
OUTPUT = f"s3://test-bucket/workbook/executions/{RUN}"


class FakeClock:
    """A monotonic clock that moves only when the run sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber, Any, Stubber]]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    emr = boto3.client("emr", region_name="us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    with Stubber(emr) as emr_stub, Stubber(s3) as s3_stub:
        yield emr, emr_stub, s3, s3_stub
        emr_stub.assert_no_pending_responses()
        s3_stub.assert_no_pending_responses()


@pytest.fixture
def notebooks(tmp_path: Path) -> Path:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("01_enable_cdc.ipynb", "02_register_connectors.ipynb", "03_hudi_ingestion.ipynb"):
        (folder / name).write_text("{}")
    return folder


def _start_request(notebook: str) -> dict[str, Any]:
    """What papermill gets locally (env, overrides, run_dir), as the execution's JSON parameters."""
    papermill_parameters = {"env": "aws", "overrides": OVERRIDES, "run_dir": f"/tmp/workbook-runs/{RUN}"}
    return {
        "EditorId": "e-WORKSPACE",
        "RelativePath": f"notebooks/{notebook}",
        "NotebookExecutionName": f"tickit-{RUN}-{notebook.removesuffix('.ipynb')}",
        "ExecutionEngine": {"Id": "j-1ABC", "Type": "EMR"},
        "ServiceRole": "EMR_Notebooks_DefaultRole",
        "NotebookParams": json.dumps(papermill_parameters, sort_keys=True),
        "OutputNotebookS3Location": {"Bucket": "test-bucket", "Key": f"workbook/executions/{RUN}"},
        "Tags": [{"Key": "workbook-run", "Value": RUN}],
    }


def _described(execution_id: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"NotebookExecution": {"NotebookExecutionId": execution_id, "Status": status, **extra}}


def _expect_execution(
    stub: Stubber, notebook: str, execution_id: str, statuses: list[dict[str, Any]]
) -> None:
    stub.add_response(
        "start_notebook_execution", {"NotebookExecutionId": execution_id}, _start_request(notebook)
    )
    for described in statuses:
        stub.add_response("describe_notebook_execution", described, {"NotebookExecutionId": execution_id})


def _expect_download(stub: Stubber, key: str, content: bytes) -> None:
    body = StreamingBody(io.BytesIO(content), len(content))
    stub.add_response("get_object", {"Body": body}, {"Bucket": "test-bucket", "Key": key})


def test_a_failed_execution_stops_the_run_and_is_reported(
    clients: Any, notebooks: Path, tmp_path: Path
) -> None:
    """01 runs (STARTING, RUNNING, FINISHED), 02 FAILS. Expected: the requests in notebook order
    with papermill's parameters, 03 never started, the failure named with EMR's reason and the
    executed notebook in S3, both executed notebooks copied next to run-summary.json."""
    emr, emr_stub, s3, s3_stub = clients
    out1 = f"{OUTPUT}/e-WORKSPACE/executions/ex-1/01_enable_cdc.ipynb"
    out2 = f"{OUTPUT}/e-WORKSPACE/executions/ex-2/02_register_connectors.ipynb"
    started = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    _expect_execution(
        emr_stub,
        "01_enable_cdc.ipynb",
        "ex-1",
        [
            _described("ex-1", "STARTING"),
            _described("ex-1", "RUNNING", StartTime=started),
            _described("ex-1", "FINISHED", OutputNotebookURI=out1),
        ],
    )
    _expect_download(s3_stub, out1.removeprefix("s3://test-bucket/"), b'{"cells": "one"}')
    reason = "Execution failed: cell 7: CdcSetupError: rds.logical_replication is 0"
    _expect_execution(
        emr_stub,
        "02_register_connectors.ipynb",
        "ex-2",
        [_described("ex-2", "FAILED", OutputNotebookURI=out2, LastStateChangeReason=reason)],
    )
    _expect_download(s3_stub, out2.removeprefix("s3://test-bucket/"), b'{"cells": "two"}')
    clock = FakeClock()
    run_dir = tmp_path / "runs" / RUN
    result = run_notebook_executions(
        overrides=OVERRIDES,
        run_dir=run_dir,
        emr_client=emr,
        s3_client=s3,
        notebooks_dir=notebooks,
        progress=False,
        sleep=clock.sleep,
        clock=clock,
    )
    assert not result.ok
    assert [(n.name, n.ok) for n in result.notebooks] == [
        ("01_enable_cdc.ipynb", True),
        ("02_register_connectors.ipynb", False),
    ]
    assert clock.sleeps == [5.0, 10.0]  # two pauses while 01 was STARTING and RUNNING
    assert result.notebooks[0].seconds == 15.0
    error = result.notebooks[1].error or ""
    assert "ex-2 FAILED" in error and reason in error and out2 in error
    assert (run_dir / "01_enable_cdc.ipynb").read_bytes() == b'{"cells": "one"}'
    assert (run_dir / "02_register_connectors.ipynb").read_bytes() == b'{"cells": "two"}'
    summary = json.loads((run_dir / "run-summary.json").read_text())
    assert summary["env"] == "aws" and summary["ok"] is False
    assert [(n["name"], n["ok"]) for n in summary["notebooks"]] == [
        ("01_enable_cdc.ipynb", True),
        ("02_register_connectors.ipynb", False),
    ]
    assert "FAIL 02_register_connectors.ipynb" in result.summary()


def test_every_notebook_finishing_is_a_successful_run(clients: Any, notebooks: Path, tmp_path: Path) -> None:
    emr, emr_stub, s3, _ = clients
    for number, name in enumerate(sorted(p.name for p in notebooks.iterdir()), start=1):
        _expect_execution(emr_stub, name, f"ex-{number}", [_described(f"ex-{number}", "FINISHED")])
    clock = FakeClock()
    result = run_notebook_executions(
        overrides=OVERRIDES,
        run_dir=tmp_path / RUN,
        emr_client=emr,
        s3_client=s3,
        notebooks_dir=notebooks,
        progress=False,
        sleep=clock.sleep,
        clock=clock,
    )
    assert result.ok and len(result.notebooks) == 3 and clock.sleeps == []
    assert json.loads((tmp_path / RUN / "run-summary.json").read_text())["ok"] is True


def test_an_execution_that_does_not_end_is_stopped_and_reported(
    clients: Any, notebooks: Path, tmp_path: Path
) -> None:
    """Timeout 12 s, pauses 5 s then 7 s (the rest of the time). Expected: three status calls,
    then a StopNotebookExecution, and the run ends with the timeout named."""
    emr, emr_stub, s3, _ = clients
    overrides = {**OVERRIDES, "aws.studio.timeout_s": 12, "aws.studio.poll_interval_s": 30}
    request = _start_request("01_enable_cdc.ipynb")
    request["NotebookParams"] = json.dumps(
        {"env": "aws", "overrides": overrides, "run_dir": f"/tmp/workbook-runs/{RUN}"}, sort_keys=True
    )
    emr_stub.add_response("start_notebook_execution", {"NotebookExecutionId": "ex-1"}, request)
    for _ in range(3):
        emr_stub.add_response(
            "describe_notebook_execution", _described("ex-1", "RUNNING"), {"NotebookExecutionId": "ex-1"}
        )
    emr_stub.add_response("stop_notebook_execution", {}, {"NotebookExecutionId": "ex-1"})
    clock = FakeClock()
    result = run_notebook_executions(
        overrides=overrides,
        run_dir=tmp_path / RUN,
        emr_client=emr,
        s3_client=s3,
        notebooks_dir=notebooks,
        progress=False,
        sleep=clock.sleep,
        clock=clock,
    )
    assert [(n.name, n.ok) for n in result.notebooks] == [("01_enable_cdc.ipynb", False)]
    assert clock.sleeps == [5.0, 7.0]
    error = result.notebooks[0].error or ""
    assert "ex-1 to end within 12 s" in error and "RUNNING" in error and "stopped" in error


def test_missing_cluster_or_workspace_fails_before_any_call(
    clients: Any, notebooks: Path, tmp_path: Path
) -> None:
    emr, _, s3, _ = clients
    for key in ("aws.emr.cluster_id", "aws.studio.editor_id"):
        with pytest.raises(AwsError, match=f"{key} is empty"):
            run_notebook_executions(
                overrides={**OVERRIDES, key: ""},
                run_dir=tmp_path / RUN,
                emr_client=emr,
                s3_client=s3,
                notebooks_dir=notebooks,
                progress=False,
            )
    assert not (tmp_path / RUN).exists()


def test_a_refused_start_ends_the_run_with_its_reason(clients: Any, notebooks: Path, tmp_path: Path) -> None:
    emr, emr_stub, s3, _ = clients
    emr_stub.add_client_error(
        "start_notebook_execution", "InvalidRequestException", "Cluster j-1ABC is not in a valid state."
    )
    result = run_notebook_executions(
        overrides=OVERRIDES,
        run_dir=tmp_path / RUN,
        emr_client=emr,
        s3_client=s3,
        notebooks_dir=notebooks,
        progress=False,
    )
    assert [(n.name, n.ok) for n in result.notebooks] == [("01_enable_cdc.ipynb", False)]
    error = result.notebooks[0].error or ""
    assert f"start notebook execution tickit-{RUN}-01_enable_cdc" in error and "valid state" in error
    assert json.loads((tmp_path / RUN / "run-summary.json").read_text())["ok"] is False


def test_a_notebook_marked_local_only_is_skipped_on_emr(
    clients: Any, notebooks: Path, tmp_path: Path
) -> None:
    """02's metadata names aws in ``workbook.skip_environments``. Expected: no execution request
    for it (the stub would refuse one), 01 and 03 run, 02 is reported as skipped with its reason,
    and the run is a success."""
    emr, emr_stub, s3, _ = clients
    (notebooks / "02_register_connectors.ipynb").write_text(
        json.dumps({"metadata": {"workbook": {"skip_environments": {"aws": "edits local servers"}}}})
    )
    for number, name in ((1, "01_enable_cdc.ipynb"), (3, "03_hudi_ingestion.ipynb")):
        _expect_execution(emr_stub, name, f"ex-{number}", [_described(f"ex-{number}", "FINISHED")])
    clock = FakeClock()
    result = run_notebook_executions(
        overrides=OVERRIDES,
        run_dir=tmp_path / RUN,
        emr_client=emr,
        s3_client=s3,
        notebooks_dir=notebooks,
        progress=False,
        sleep=clock.sleep,
        clock=clock,
    )
    emr_stub.assert_no_pending_responses()
    assert result.ok
    assert [(n.name, n.skipped) for n in result.notebooks] == [
        ("01_enable_cdc.ipynb", None),
        ("02_register_connectors.ipynb", "edits local servers"),
        ("03_hudi_ingestion.ipynb", None),
    ]
    text = result.summary()
    assert "skip 02_register_connectors.ipynb" in text and "edits local servers" in text
    summary = json.loads((tmp_path / RUN / "run-summary.json").read_text())
    assert summary["notebooks"][1]["skipped"] == "edits local servers"
