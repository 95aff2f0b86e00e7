"""The local metastore's empty catalog, made once by Hive's schema tool into the checkout's cache and
copied into each new state (:meth:`helpers.local.metastore.LocalMetastore.empty_catalog`). The
tool's and the service's real runs are the integration tier's (every stack starts a metastore);
here the tool is replaced to show which runs it, with which database, and what a failure leaves."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers.errors import StackError
from helpers.local import metastore as hms
from helpers.params import load_params


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> hms.LocalMetastore:
    monkeypatch.setattr(hms, "project_root", lambda: tmp_path / "checkout")
    monkeypatch.setattr(hms.LocalMetastore, "_classpath", lambda self: "cp")
    monkeypatch.setattr(hms.LocalMetastore, "_hive_home", lambda self: tmp_path / "hive")
    params = load_params("ci", {"state_dir": str(tmp_path / "state")})
    return hms.LocalMetastore(params)


def _cache(tmp_path: Path) -> Path:
    return tmp_path / "checkout" / ".cache" / "metastore" / f"schema-{hms.METASTORE_VERSION}"


def _fake_tool(calls: list[list[str]], returncode: int = 0) -> Any:
    """A schema tool that creates the Derby folder its ``-url`` names (or fails)."""

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        url = argv[argv.index("-url") + 1]
        database = Path(url.split("databaseName=", 1)[1].split(";", 1)[0])
        if returncode == 0:
            (database / "seg0").mkdir(parents=True)
            (database / "seg0" / "c10.dat").write_text("catalog", encoding="utf-8")
        return subprocess.CompletedProcess(argv, returncode, "", "schema tool: line one\nlast line")

    return run


def test_the_tool_runs_once_and_each_new_state_gets_a_copy(
    server: hms.LocalMetastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(hms.subprocess, "run", _fake_tool(calls))
    server.prepare()
    database = server.home / "hms_db"
    assert (database / "seg0" / "c10.dat").read_text(encoding="utf-8") == "catalog"
    assert (server.home / "hms_db.initialised").is_file()
    (tool,) = calls
    assert "-initSchema" in tool and tool[tool.index("-dbType") + 1] == "derby"
    url = tool[tool.index("-url") + 1]
    assert str(_cache(tmp_path).parent) in url and str(server.home) not in url  # never the state's
    assert (_cache(tmp_path) / "complete").is_file()
    assert sorted(p.name for p in _cache(tmp_path).parent.iterdir()) == [_cache(tmp_path).name]

    other = hms.LocalMetastore(load_params("ci", {"state_dir": str(tmp_path / "second")}))
    other.prepare()
    assert (other.home / "hms_db" / "seg0" / "c10.dat").is_file() and len(calls) == 1
    (database / "seg0" / "c10.dat").write_text("changed by the service", encoding="utf-8")
    assert (_cache(tmp_path) / "hms_db" / "seg0" / "c10.dat").read_text(encoding="utf-8") == "catalog"


def test_a_half_made_cache_is_made_again_and_a_failed_tool_leaves_nothing(
    server: hms.LocalMetastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    half = _cache(tmp_path) / "hms_db"
    half.mkdir(parents=True)  # an interrupted run: no "complete" marker
    calls: list[list[str]] = []
    monkeypatch.setattr(hms.subprocess, "run", _fake_tool(calls, returncode=1))
    with pytest.raises(StackError, match=r"schema tool exit status 1\):\nschema tool: line one\nlast line"):
        server.prepare()
    assert len(calls) == 1
    assert not (server.home / "hms_db").exists() and not (server.home / "hms_db.initialised").exists()
    assert list(_cache(tmp_path).parent.iterdir()) == []  # neither the half-made copy nor the tool's

    monkeypatch.setattr(hms.subprocess, "run", _fake_tool(calls))
    server.prepare()
    assert len(calls) == 2 and (server.home / "hms_db" / "seg0").is_dir()


def test_the_service_and_its_schema_tool_get_the_stack_s_jit(tmp_path: Path) -> None:
    """``local.jit: quick`` (the ci overlay) reaches the metastore's JVM as every other local JVM's."""
    quick = load_params("ci", {"state_dir": str(tmp_path / "a")})
    tiered = load_params("ci", {"state_dir": str(tmp_path / "b"), "local.jit": "tiered"})
    assert "-XX:TieredStopAtLevel=1" in hms.LocalMetastore(quick)._java(["Main"])
    assert not [a for a in hms.LocalMetastore(tiered)._java(["Main"]) if a.startswith("-XX:Tiered")]
