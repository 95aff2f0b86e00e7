"""``./workbook lab``: a real JupyterLab on 127.0.0.1, driven by a real headless Chromium that runs
the first cells of notebook 01; the token stays out of the log and every command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from support.chromium import DevToolsPage, devtools_page
from support.sockets import listening

from helpers.local.lab import LabServer, start_lab, stop_lab
from helpers.params import project_root
from helpers.poll import wait_until
from helpers.proc import pid_alive, port_in_use

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = project_root()
NOTEBOOK = ROOT / "notebooks" / "01_enable_cdc.ipynb"
SHIFT, CTRL = 8, 2


@pytest.fixture(autouse=True)
def _spark_first() -> None:
    """JupyterLab needs no Spark: these tests do without the tier's session Spark."""


def _kernels(server_pid: int) -> list[int]:
    """Pids of the ipykernel processes the server started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if ppid == server_pid and b"ipykernel_launcher" in cmdline:
            found.append(int(entry.name))
    return found


def _argv(pid: int) -> list[str]:
    return (Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"))[:-1]


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def _cell(index: int) -> str:
    return f'.jp-Notebook .jp-Cell[data-windowed-list-index="{index}"]'


def _text(page: DevToolsPage, selector: str) -> str:
    value = page.evaluate(f"document.querySelector({json.dumps(selector)})?.innerText ?? ''")
    return str(value)


def _status_bar(page: DevToolsPage) -> str:
    return str(
        page.evaluate(
            "[...document.querySelectorAll('.jp-StatusBar-Widget')].map(e => e.innerText).join(' | ')"
        )
    )


def _run_parameters_and_validation(page: DevToolsPage, server: LabServer) -> str:
    """In the browser: open notebook 01, set ``env = "ci"`` in its parameters cell by typing,
    run it and the validation cell with Shift+Enter, and return the validation cell's output."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    params_at = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    source = "".join(cells[params_at]["source"])
    assert 'env: str = "local"' in source and "load_params(env, overrides)" in "".join(
        cells[params_at + 1]["source"]
    )
    ci_source = source.replace('env: str = "local"', 'env: str = "ci"').rstrip("\n")

    page.navigate(f"{server.url}/tree/{NOTEBOOK.name}?token={server.token}")
    wait_until(
        lambda: "Python 3 (ipykernel) | Idle" in _status_bar(page),
        timeout_s=60,
        what="the notebook to open with an idle Python 3 kernel",
        detail=lambda: _status_bar(page),
    )
    editor = f"{_cell(params_at)} .cm-content"
    page.click(editor)
    wait_until(
        lambda: page.evaluate(f"document.activeElement === document.querySelector({json.dumps(editor)})"),
        timeout_s=10,
        what="the parameters cell's editor to have the focus",
    )
    page.press("a", code="KeyA", key_code=65, modifiers=CTRL)  # select all, then type over it
    page.insert_text(ci_source)
    wait_until(
        lambda: _text(page, editor) == ci_source,
        timeout_s=10,
        what="the typed parameters",
        detail=lambda: repr(_text(page, editor)),
    )
    prompt = f"{_cell(params_at)} .jp-InputPrompt"
    page.press("Enter", code="Enter", key_code=13, modifiers=SHIFT)  # run, select the next cell
    wait_until(
        lambda: _text(page, prompt) == "[1]:",
        timeout_s=30,
        what="the parameters cell to run",
        detail=lambda: repr(_text(page, prompt)),
    )
    output = f"{_cell(params_at + 1)} .jp-OutputArea-output"
    page.press("Enter", code="Enter", key_code=13, modifiers=SHIFT)
    return str(
        wait_until(
            lambda: _text(page, output),
            timeout_s=30,
            what="the validation cell's output",
            detail=lambda: _status_bar(page),
        )
    )


def test_lab_in_a_browser_runs_the_first_notebook_on_loopback_with_a_secret_token(tmp_path: Path) -> None:
    committed = NOTEBOOK.read_bytes()
    checkpoints = (ROOT / "notebooks" / ".ipynb_checkpoints").exists()
    server = start_lab(tmp_path / "lab")
    try:
        sockets = listening(server.pid)
        assert ("127.0.0.1", server.port) in sockets
        assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets

        api = f"http://127.0.0.1:{server.port}/api/contents"
        assert requests.get(api, timeout=10, allow_redirects=False).status_code == 403
        page_without = requests.get(server.url, timeout=10, allow_redirects=False)
        assert page_without.status_code == 302 and "/login" in page_without.headers["Location"]
        with_token = requests.get(api, headers={"Authorization": f"token {server.token}"}, timeout=10)
        assert with_token.status_code == 200
        assert NOTEBOOK.name in {
            item["name"] for item in with_token.json()["content"]
        }  # opened on notebooks/

        with devtools_page(timeout_s=60) as page:
            try:
                output = _run_parameters_and_validation(page, server)
            except Exception:
                page.screenshot(tmp_path / "lab.png")
                raise
        assert output == "('local', 0.01)"  # environment 'local', the ci overlay's scale

        (kernel,) = _kernels(server.pid)
        assert _argv(kernel)[0] == sys.executable  # the project's .venv interpreter
        assert _environ(kernel)["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
        assert {address for address, _ in listening(kernel)} <= {"127.0.0.1"}
        for pid in (server.pid, kernel):
            assert not any(server.token in arg for arg in _argv(pid))
            assert server.token not in "".join(_environ(pid).values())
        log = server.log_file.read_text()
        assert f"http://127.0.0.1:{server.port}/lab?token=..." in log
        assert "GET /api/contents" in log  # the refused request is in it, the token is not
        assert server.token not in log
        assert server.home.stat().st_mode & 0o077 == 0
        for path in server.home.rglob("*"):  # what holds the token is private
            if path.is_file() and server.token in path.read_text(errors="replace"):
                assert path.stat().st_mode & 0o077 == 0, path
    finally:
        stop_lab(server)
    wait_until(lambda: not _kernels(server.pid), timeout_s=20, what="the kernel to stop with the server")
    assert not pid_alive(server.pid)
    assert NOTEBOOK.read_bytes() == committed  # run, never saved
    assert (ROOT / "notebooks" / ".ipynb_checkpoints").exists() == checkpoints  # none left in the repo
    assert any((server.home / "checkpoints").glob("01_enable_cdc-checkpoint.ipynb"))


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_workbook_lab_prints_the_url_once_and_stops_with_its_server(tmp_path: Path, stop_signal: int) -> None:
    """Ctrl-C, or SIGTERM as ``timeout 90 ./workbook lab`` sends: the command stops JupyterLab
    (and so its kernels) before it ends; the port is free again."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "helpers.cli", "lab", "--env", "ci", "--state-dir", str(tmp_path / "st")]
    cli = subprocess.Popen(  # noqa: S603 - fixed argv
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the Ctrl-C below reaches this process only
    )
    stream = cli.stdout
    assert stream is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    home = tmp_path / "st" / "lab"
    try:
        url = wait_until(
            lambda: next((line.strip() for line in lines if "?token=" in line), None),
            timeout_s=60,
            what="the lab command to print its URL",
            detail=lambda: "".join(lines),
        )
        base, token = url.split("?token=")
        assert base.startswith("http://127.0.0.1:") and base.endswith("/lab")
        server_pid = int((home / "jupyterlab.pid").read_text())
        api = base.removesuffix("/lab") + "/api/contents"
        assert requests.get(api, headers={"Authorization": f"token {token}"}, timeout=10).status_code == 200
        assert not any(token in arg for arg in _argv(server_pid))
    finally:
        os.kill(cli.pid, stop_signal)
        code = cli.wait(timeout=60)
        reader.join(timeout=10)
    assert code == 0, "".join(lines)
    assert not pid_alive(server_pid)
    assert not port_in_use(int(base.rsplit(":", 1)[1].split("/", 1)[0]))
    assert "".join(lines).count(token) == 1  # printed once, to the terminal
    assert token not in (home / "jupyterlab.log").read_text()
