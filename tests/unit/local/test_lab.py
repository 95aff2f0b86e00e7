"""How ``./workbook lab`` starts JupyterLab: loopback, ``notebooks/``, the token in a 0600 file only."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import build_parser
from helpers.errors import LabError
from helpers.local import lab
from helpers.params import project_root


def test_the_command_line_carries_no_setting_but_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "jupyter_lab_config.json"
    assert lab.lab_command(config) == [sys.executable, "-m", "jupyterlab", f"--config={config}"]


def test_the_config_binds_loopback_on_the_notebooks_with_the_token(tmp_path: Path) -> None:
    notebooks = project_root() / "notebooks"
    config = lab.lab_config(port=8123, notebook_dir=notebooks, token="tok-123", checkpoint_dir=tmp_path)
    server = config["ServerApp"]
    assert server["ip"] == "127.0.0.1"
    assert (server["port"], server["port_retries"]) == (8123, 0)
    assert server["root_dir"] == str(notebooks)
    assert server["open_browser"] is False and server["allow_remote_access"] is False
    assert config["IdentityProvider"] == {"token": "tok-123"}
    assert "token" not in server  # the deprecated spelling would be logged as a warning
    assert config["LabApp"]["news_url"] is None
    assert config["FileCheckpoints"] == {"checkpoint_dir": str(tmp_path)}  # not in notebooks/


def test_the_environment_puts_this_checkout_first_and_drops_inherited_tokens(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere", "JUPYTER_TOKEN": "x", "JUPYTER_TOKEN_FILE": "/t"}
    env = lab.lab_environment(tmp_path, base)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(project_root()), "/elsewhere"]
    assert "JUPYTER_TOKEN" not in env and "JUPYTER_TOKEN_FILE" not in env
    assert env["JUPYTER_RUNTIME_DIR"] == str(tmp_path / "runtime")
    assert env["JUPYTER_PREFER_ENV_PATH"] == "1"


def test_start_writes_the_token_to_a_private_file_never_to_argv_or_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is replaced by ``true``: start_lab records how it would have started it, sees it
    exit, and fails naming the log."""
    seen: dict[str, Any] = {}
    real_popen = subprocess.Popen

    def fake_popen(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        seen.update(argv=argv, **kwargs)
        return real_popen(["true"], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake_popen)
    home = tmp_path / "lab"
    with pytest.raises(LabError, match="exited with status 0"):
        lab.start_lab(home, timeout_s=10)
    config_file = home / "jupyter_lab_config.json"
    assert seen["argv"] == lab.lab_command(config_file)
    assert seen["cwd"] == project_root() / "notebooks"
    assert seen["start_new_session"] is True
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "runtime").stat().st_mode) == 0o700
    config = json.loads(config_file.read_text())
    token = config["IdentityProvider"]["token"]
    assert len(token) >= 40  # secrets.token_urlsafe(32)
    assert config["ServerApp"]["ip"] == "127.0.0.1"
    assert not any(token in arg for arg in seen["argv"])
    assert not any(token in value for value in seen["env"].values())
    assert token not in (home / "jupyterlab.log").read_text()
    assert not (home / "jupyterlab.pid").exists()


def test_a_new_token_each_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **kw: real_popen(["true"], **kw))
    tokens = set()
    for _ in range(2):
        with pytest.raises(LabError):
            lab.start_lab(tmp_path / "lab", timeout_s=10)
        tokens.add(
            json.loads((tmp_path / "lab" / "jupyter_lab_config.json").read_text())["IdentityProvider"][
                "token"
            ]
        )
    assert len(tokens) == 2


def test_a_running_lab_of_the_same_folder_is_not_started_twice(tmp_path: Path) -> None:
    home = tmp_path / "lab"
    home.mkdir()
    (home / "jupyterlab.pid").write_text(str(os.getpid()))  # alive, but not a lab: a stale pid file
    with pytest.raises(LabError, match="port .* is in use"):  # got past the pid check
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            lab.start_lab(home, port=held.getsockname()[1])
    stand_in = subprocess.Popen(  # a process with the lab's command line
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            *lab.lab_command(home / "jupyter_lab_config.json"),
        ]
    )
    try:
        (home / "jupyterlab.pid").write_text(str(stand_in.pid))
        with pytest.raises(LabError, match=f"already runs from {home} \\(pid {stand_in.pid}\\)"):
            lab.start_lab(home)
    finally:
        stand_in.kill()
        stand_in.wait()


def test_a_taken_port_is_refused_before_starting(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(LabError, match=f"port {port} on 127.0.0.1 is in use"):
            lab.start_lab(tmp_path / "lab", port=port)


def test_the_lab_command_parses() -> None:
    args = build_parser().parse_args(["lab", "--env", "ci", "--port", "8899", "--state-dir", "/tmp/x"])
    assert (args.command, args.port, args.env, args.state_dir) == ("lab", 8899, "ci", "/tmp/x")
    assert build_parser().parse_args(["lab"]).port is None
