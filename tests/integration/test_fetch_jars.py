"""``scripts/fetch_jars.sh`` itself, offline from the project's Maven cache (``WORKBOOK_M2``,
``-o``), which the set-up fills (``./workbook test`` sets up every jar set these use): a jar, a
Maven-built tree and an archive with a wrong pinned SHA-256 are refused and removed; with the right
one each is placed (unpacked, stamped) and a second run fetches nothing. In the integration tier:
they need the set-up's Maven and its cache, which the unit tier must not."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.project import KAFKA_SCRIPTS, project_copy

from helpers.jars import ARCHIVE_STAMP, JARS_DIR
from helpers.params import project_root

pytestmark = pytest.mark.integration

ROOT = project_root()


def _cached(path: Path, setup: str) -> None:
    """The set-up has filled the project's Maven cache with ``path``."""
    assert path.exists(), f"the project's Maven cache has no {path.name} (run {setup})"


def _offline_fetch(root: Path, set_name: str, rows: str) -> subprocess.CompletedProcess[str]:
    """``scripts/fetch_jars.sh <set_name>`` in ``root`` with ``rows`` as its ``jars.tsv``, Maven
    offline from the project's own cache (``WORKBOOK_M2``), which the set-up fills."""
    (root / "scripts" / "jars.tsv").write_text(rows)
    env = {**os.environ, "WORKBOOK_M2": str(ROOT / ".cache" / "m2"), "WORKBOOK_MVN_FLAGS": "-o"}
    return subprocess.run(
        ["bash", "scripts/fetch_jars.sh", set_name],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _script_only(tmp_path: Path) -> Path:
    """A folder holding only ``scripts/fetch_jars.sh``."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "fetch_jars.sh", tmp_path / "scripts" / "fetch_jars.sh")
    return tmp_path


def test_fetch_jars_refuses_a_jar_whose_checksum_differs(tmp_path: Path) -> None:
    """fetch_jars.sh with a wrong pinned SHA-256: exit 1, the jar removed, the message names the
    coordinates; with the right one the jar is copied and a second run fetches nothing. Maven
    works offline from the project's own cache here (WORKBOOK_M2), filled by the set-up."""
    m2 = ROOT / ".cache" / "m2"
    _cached(m2 / "org" / "apache" / "spark" / "spark-avro_2.12" / "3.5.6", "./workbook setup")
    good = hashlib.sha256((ROOT / JARS_DIR / "spark-avro_2.12-3.5.6.jar").read_bytes()).hexdigest()
    root = _script_only(tmp_path)

    def run(sha: str) -> subprocess.CompletedProcess[str]:
        return _offline_fetch(root, "spark", f"spark\torg.apache.spark:spark-avro_2.12:3.5.6\t{sha}\n")

    bad = run("0" * 64)
    assert bad.returncode == 1
    assert "Failed to verify org.apache.spark:spark-avro_2.12:3.5.6" in bad.stderr
    assert not (tmp_path / JARS_DIR / "spark-avro_2.12-3.5.6.jar").exists()
    ok = run(good)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / JARS_DIR / "spark-avro_2.12-3.5.6.jar").is_file()
    again = run(good)
    assert again.returncode == 0 and "fetching" not in again.stderr


def test_fetch_jars_unpacks_a_checked_archive_once(tmp_path: Path) -> None:
    """An archive entry with a wrong SHA-256: exit 1, nothing unpacked; with the right one it is
    unpacked with its stamp and a second run fetches nothing. Maven runs offline from the
    project's cache (WORKBOOK_M2), which the set-up fills."""
    m2 = ROOT / ".cache" / "m2"
    coords = "io.apicurio:apicurio-registry-distro-connect-converter:2.5.11.Final:tar.gz"
    cached = m2 / "io/apicurio/apicurio-registry-distro-connect-converter/2.5.11.Final"
    archive = cached / "apicurio-registry-distro-connect-converter-2.5.11.Final.tar.gz"
    _cached(archive, "./workbook setup registry")
    good = hashlib.sha256(archive.read_bytes()).hexdigest()
    root = _script_only(tmp_path)
    unpacked = tmp_path / JARS_DIR / "apicurio-registry-distro-connect-converter-2.5.11.Final"

    def run(sha: str) -> subprocess.CompletedProcess[str]:
        return _offline_fetch(root, "registry", f"registry\t{coords}\t{sha}\n")

    bad = run("0" * 64)
    assert bad.returncode == 1
    assert f"Failed to verify {coords}" in bad.stderr
    assert not unpacked.exists() and list((tmp_path / JARS_DIR).iterdir()) == []
    ok = run(good)
    assert ok.returncode == 0, ok.stderr
    assert (unpacked / ARCHIVE_STAMP).read_text().strip() == good
    assert (unpacked / "apicurio-registry-utils-converter-2.5.11.Final.jar").is_file()
    assert not any(p.name.endswith(".tar.gz") for p in (tmp_path / JARS_DIR).rglob("*"))
    again = run(good)
    assert again.returncode == 0 and "fetching" not in again.stderr


def test_fetch_jars_checks_a_tree_and_a_plugin_archive_then_unpacks_it(tmp_path: Path) -> None:
    """Offline from the project's Maven cache (filled by ``./workbook setup kafka``): a tree with
    one wrong pinned checksum is refused and removed; a plugin archive with a wrong checksum is
    refused; with the right ones the tree is copied, the archive unpacked under
    ``connect-plugins/``, and a second run fetches nothing."""
    m2 = ROOT / ".cache" / "m2"
    _cached(m2 / "io" / "debezium" / "debezium-connector-postgres" / "3.6.3.Final", "./workbook setup kafka")
    root = project_copy(tmp_path, KAFKA_SCRIPTS)
    sums = root / "scripts" / "poms" / "kafka.sha256"
    good_sums = sums.read_text()
    plugin = "io.debezium:debezium-connector-postgres:3.6.3.Final:tar.gz:plugin"
    good_sha = next(line.split("\t")[2] for line in (ROOT / "scripts" / "jars.tsv").read_text().splitlines()
                    if plugin in line)  # fmt: skip
    tree = "kafka\ttree:scripts/poms/kafka.xml\tscripts/poms/kafka.sha256\n"

    sums.write_text("0" * 64 + good_sums[64:])
    bad_tree = _offline_fetch(root, "kafka", tree)
    assert bad_tree.returncode == 1 and "Failed to verify the kafka tree" in bad_tree.stderr
    assert not (root / JARS_DIR / "kafka").exists()
    bad_plugin = _offline_fetch(root, "kafka", f"kafka\t{plugin}\t{'0' * 64}\n")
    assert bad_plugin.returncode == 1 and f"Failed to verify {plugin}" in bad_plugin.stderr

    sums.write_text(good_sums)
    ok = _offline_fetch(root, "kafka", tree + f"kafka\t{plugin}\t{good_sha}\n")
    assert ok.returncode == 0, ok.stderr
    assert len(list((root / JARS_DIR / "kafka").glob("*.jar"))) == len(good_sums.splitlines())
    unpacked = root / JARS_DIR / "connect-plugins" / "debezium-connector-postgres-3.6.3.Final"
    assert (
        unpacked / "debezium-connector-postgres" / "debezium-connector-postgres-3.6.3.Final.jar"
    ).is_file()
    again = _offline_fetch(root, "kafka", tree + f"kafka\t{plugin}\t{good_sha}\n")
    assert again.returncode == 0 and "fetch" not in again.stderr
