"""The local Spark drivers' class-data archive (helpers.local.class_data): its key, where a session
finds it, and how the set-up publishes it (a real ``java -Xshare:dump`` of a small class list).
The archive of the real training driver, used by a real session: tests/integration/test_spark_session.py."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

import helpers.local.class_data as class_data
from helpers.errors import SparkSetupError
from helpers.params import load_params
from helpers.spark import spark_conf


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(class_data, "project_root", lambda: tmp_path)
    return tmp_path


def _jar(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("README", "not a class")
    return path


def test_the_key_follows_the_jars_their_order_and_their_changes(tmp_path: Path) -> None:
    java = class_data.driver_java()
    assert java is not None
    a, b = _jar(tmp_path / "a.jar"), _jar(tmp_path / "b.jar")
    key = class_data.archive_key([str(a), str(b)], java)
    assert key == class_data.archive_key([str(a), str(b)], java)
    assert key != class_data.archive_key([str(b), str(a)], java)
    os.utime(b, ns=(1, 1))
    assert key != class_data.archive_key([str(a), str(b)], java)


def test_a_session_finds_only_a_finished_archive_of_its_own_jars(root: Path) -> None:
    jar = str(_jar(root / "a.jar"))
    assert class_data.archive_for([jar]) is None
    java = class_data.driver_java()
    assert java is not None
    folder = root / class_data.CACHE / class_data.archive_key([jar], java)
    folder.mkdir(parents=True)
    assert class_data.archive_for([jar]) is None  # a folder without its archive
    (folder / class_data.ARCHIVE).write_bytes(b"x")
    assert class_data.archive_for([jar]) == folder / class_data.ARCHIVE
    assert class_data.archive_for([str(_jar(root / "other.jar"))]) is None
    assert class_data.archive_for([str(root / "gone.jar")]) is None


def test_publish_writes_the_archive_once_and_drops_other_keys(root: Path) -> None:
    java = class_data.driver_java()
    assert java is not None
    jar = str(_jar(root / "a.jar"))
    stale = root / class_data.CACHE / "0123456789abcdef"
    stale.mkdir(parents=True)
    left = root / class_data.CACHE / ".work-left"  # by an interrupted set-up, two hours ago
    left.mkdir()
    os.utime(left, (time.time() - 7200, time.time() - 7200))
    running = root / class_data.CACHE / ".work-running"  # another set-up's dump under way
    running.mkdir()
    classes = root / "classes.lst"
    classes.write_text("java/lang/Object\njava/lang/String\n")
    archive = class_data.publish_archive([jar], classes, jar, java)
    assert archive == class_data.archive_for([jar])
    assert archive.stat().st_size > 0
    assert not stale.exists() and not left.exists()
    assert sorted(p.name for p in (root / class_data.CACHE).iterdir()) == [
        ".work-running",
        archive.parent.name,
    ]


def test_a_failed_dump_says_why_and_leaves_nothing(root: Path) -> None:
    java = class_data.driver_java()
    assert java is not None
    jar = str(_jar(root / "a.jar"))
    with pytest.raises(SparkSetupError, match="exit status"):
        class_data.publish_archive([jar], root / "no-such-list.lst", jar, java)
    assert list((root / class_data.CACHE).iterdir()) == []


def test_a_local_driver_gets_the_archive_and_a_cluster_driver_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []

    def fake_archive(jars: Any) -> Path:
        seen.append(list(jars))
        return tmp_path / "x.jsa"

    monkeypatch.setattr("helpers.spark.archive_for", fake_archive)
    params = load_params("ci", {"state_dir": str(tmp_path / "st"), "spark.catalog": "none"})
    options = spark_conf(params)["spark.driver.extraJavaOptions"]
    assert options.endswith(f" -XX:SharedArchiveFile={tmp_path / 'x.jsa'}")
    assert seen and seen[0] == spark_conf(params)["spark.driver.extraClassPath"].split(os.pathsep)
    yarn = load_params(
        "ci", {"state_dir": str(tmp_path / "st"), "spark.catalog": "none", "spark.master": "yarn"}
    )
    assert "SharedArchiveFile" not in spark_conf(yarn)["spark.driver.extraJavaOptions"]
