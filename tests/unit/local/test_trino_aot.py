"""The local Trino's AOT cache (:class:`helpers.local.trino.LocalTrino`): which JVM options a start
gets, and what the cache's key covers. The real training and mapping: ``tests/integration/
test_athena_local.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.java import fake_java

import helpers.local.trino as trino_module
from helpers.local.trino import AOT_CACHE_DIR, LocalTrino
from helpers.params import load_params


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Trino install of two jars, and the project root in ``tmp_path``."""
    folder = tmp_path / "trino-server"
    (folder / "lib").mkdir(parents=True)
    for name in ("trino-main.jar", "airlift.jar"):
        (folder / "lib" / name).write_bytes(b"jar")
    monkeypatch.setattr(LocalTrino, "_install", lambda self: folder)
    monkeypatch.setattr(trino_module, "project_root", lambda: tmp_path / "project")
    return folder


def _server(tmp_path: Path, java: Path, **settings: str) -> LocalTrino:
    overrides = {"state_dir": str(tmp_path / "state"), "local.trino.java": str(java)}
    overrides.update({f"local.trino.{k}": v for k, v in settings.items()})
    return LocalTrino(load_params("ci", overrides=overrides))


def _aot(command: list[str]) -> list[str]:
    return [option for option in command if option.startswith("-XX:AOT")]


def test_a_start_maps_the_cache_once_the_set_up_made_it(tmp_path: Path, install: Path) -> None:
    server = _server(tmp_path, fake_java(tmp_path / "jdk25", "25.0.2"))
    cache = server.aot_cache()
    assert cache.parent.parent == tmp_path / "project" / AOT_CACHE_DIR
    assert _aot(server.command()) == []  # not made yet: Trino starts as before
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"cache")
    assert _aot(server.command()) == [f"-XX:AOTCache={cache}"]
    trainer = LocalTrino(server.params, aot_output=tmp_path / "work" / "trino.aot")
    assert _aot(trainer.command()) == [f"-XX:AOTCacheOutput={tmp_path / 'work' / 'trino.aot'}"]
    assert trainer.command()[1:4] == server.command()[1:4]  # the same heap, collector and JIT


def test_java_24_starts_without_a_cache_and_trains_none(tmp_path: Path, install: Path) -> None:
    server = _server(tmp_path, fake_java(tmp_path / "jdk24", "24.0.1"))
    cache = server.aot_cache()
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"cache")
    assert _aot(server.command()) == []  # -XX:AOTCache without one-step training: not used
    assert server.make_aot_cache() is None


def test_the_key_follows_java_and_the_jars_not_the_jvm_options(tmp_path: Path, install: Path) -> None:
    java = fake_java(tmp_path / "jdk25", "25.0.2")
    first = _server(tmp_path, java).aot_cache()
    assert _server(tmp_path, java, heap="2g", jit="tiered").aot_cache() == first  # Java checks those
    (install / "lib" / "trino-main.jar").write_bytes(b"a newer jar")
    assert _server(tmp_path, java).aot_cache() != first
    other = fake_java(tmp_path / "other-jdk25", "25.0.3")
    assert _server(tmp_path, other).aot_cache() != _server(tmp_path, java).aot_cache()
