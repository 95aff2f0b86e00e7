"""The workbook packaged for EMR: ``./workbook package [--upload]``.

:func:`build_package` writes three files into ``dist/workbook/<version>/``: the wheel of ``helpers``
(its SQL files and parameter overlays inside, as package data: :func:`helpers.params.data_dir`), an
EMR bootstrap action script that installs the wheel and its pinned dependencies on every node, and
``manifest.json`` (version, git commit, each file's size, SHA-256 and S3 URI). :func:`upload_package`
puts them under ``s3://<bucket>/<prefix>/<version>/`` (``aws.package`` in ``params/aws.yaml``).

Example:
    >>> params = load_params("aws", {"aws.package.bucket": "my-bucket"}, check_placeholders=False)
    >>> built = build_package(params)  # doctest: +SKIP
    >>> upload_package(built, region=params.aws.region)  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helpers.errors import AwsError, PackageError
from helpers.params import WorkbookParams, data_dir, project_root

__all__ = [
    "BOOTSTRAP_NAME",
    "EMR_PYTHON",
    "MANIFEST_NAME",
    "PackagedFile",
    "WorkbookPackage",
    "build_package",
    "emr_requirements",
    "package_location",
    "upload_package",
]

BOOTSTRAP_NAME = "emr-bootstrap.sh"
MANIFEST_NAME = "manifest.json"
EMR_PYTHON = "python3.11"
"""The interpreter the bootstrap action installs into: EMR 7.x ships Python 3.9 (``python3``) and
3.11, and the package needs 3.11 or later. Spark must use it too (``PYSPARK_PYTHON``)."""

#: what EMR provides itself, so the bootstrap action leaves it out
_PROVIDED_ON_EMR = {"pyspark"}
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
#: what the wheel is built from (paths relative to the repository root)
_SOURCES = ("pyproject.toml", "README.md", "helpers", "sql", "params")
_MIN_SETUPTOOLS = 77


@dataclass(frozen=True)
class PackagedFile:
    """One file of the package, as built (and where it goes on S3, when a bucket is configured)."""

    name: str
    path: Path
    size: int
    sha256: str
    s3_uri: str | None

    @classmethod
    def of(cls, path: Path, s3_prefix: str | None) -> PackagedFile:
        data = path.read_bytes()
        uri = f"{s3_prefix}{path.name}" if s3_prefix else None
        return cls(path.name, path, len(data), hashlib.sha256(data).hexdigest(), uri)


@dataclass(frozen=True)
class WorkbookPackage:
    """What :func:`build_package` wrote into ``folder``."""

    version: str
    folder: Path
    git_commit: str | None
    git_dirty: bool
    #: ``s3://<bucket>/<prefix>/<version>/``, or None when no bucket is configured
    s3_prefix: str | None
    wheel: PackagedFile
    bootstrap: PackagedFile
    manifest: PackagedFile

    @property
    def files(self) -> tuple[PackagedFile, PackagedFile, PackagedFile]:
        """Wheel, bootstrap script and manifest (the order they are uploaded in)."""
        return (self.wheel, self.bootstrap, self.manifest)

    @property
    def bootstrap_action(self) -> str | None:
        """The value of ``aws emr create-cluster --bootstrap-actions`` (None without a bucket)."""
        if self.bootstrap.s3_uri is None:
            return None
        return f"Path={self.bootstrap.s3_uri},Name=workbook-{self.version}"

    def describe(self) -> str:
        """What was built: one line per file."""
        commit = (self.git_commit or "unknown")[:12] + (" with local changes" if self.git_dirty else "")
        lines = [f"built {self.folder} (version {self.version}, commit {commit}):"]
        lines += [f"  {f.name:48} {f.size:>10} bytes  sha256 {f.sha256}" for f in self.files]
        return "\n".join(lines)


def package_location(params: WorkbookParams) -> tuple[str, str]:
    """The bucket and key prefix uploads go to: ``aws.package.bucket`` (else ``aws.s3_bucket``) and
    ``aws.package.prefix``.

    Raises:
        AwsError: when no bucket is configured (empty, still the ``REPLACE-ME`` placeholder) or it
            is not a valid S3 bucket name; the message names the key and the file to set it in.
    """
    where = data_dir("params") / "aws.yaml"
    fix = f"set aws.package.bucket (or aws.s3_bucket) in {where} or pass --set aws.package.bucket=NAME"
    if params.aws is None:
        raise AwsError(f"Failed to find the package's bucket: the parameters have no 'aws' section; {fix}")
    key = "aws.package.bucket" if params.aws.package.bucket else "aws.s3_bucket"
    bucket = params.aws.package.bucket or params.aws.s3_bucket
    if not bucket or "REPLACE-ME" in bucket:
        raise AwsError(
            f"Failed to find the package's bucket: no bucket configured ({key} is {bucket!r}); {fix}"
        )
    if not _BUCKET_RE.match(bucket) or ".." in bucket:
        raise AwsError(
            f"Failed to find the package's bucket: {key} {bucket!r} is not an S3 bucket name; {fix}"
        )
    return bucket, params.aws.package.prefix


def emr_requirements(pyproject: Path | None = None) -> list[str]:
    """The runtime requirements of ``pyproject.toml`` with their ranges, less what EMR provides."""
    path = pyproject or project_root() / "pyproject.toml"
    deps: list[str] = tomllib.loads(path.read_text(encoding="utf-8"))["project"]["dependencies"]
    out = []
    for dep in deps:
        name = re.split(r"[\[<>=!~;\s]", dep, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", name).lower() not in _PROVIDED_ON_EMR:
            out.append(dep)
    return out


def build_package(
    params: WorkbookParams,
    *,
    dist_dir: Path | None = None,
    root: Path | None = None,
    require_bucket: bool = False,
) -> WorkbookPackage:
    """Build the wheel, the EMR bootstrap script and the manifest into ``<dist_dir>/<version>/``.

    Args:
        params: the ``aws`` parameters; ``aws.package`` says where the files will be on S3.
        dist_dir: default ``<root>/dist/workbook``; the version's folder is emptied first.
        root: the repository checkout to build from (default :func:`helpers.params.project_root`).
        require_bucket: fail when no bucket is configured (the files are going to be uploaded);
            otherwise the S3 URIs are left out.

    Raises:
        AwsError: ``require_bucket`` and no usable bucket configured.
        PackageError: not a checkout, setuptools too old, or the wheel's build failed.
    """
    root = (root or project_root()).resolve()
    if not (root / "pyproject.toml").is_file():
        raise PackageError(
            f"Failed to build the wheel: {root} is not a checkout of the workbook (no pyproject.toml); "
            "run ./workbook package in the repository"
        )
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version = str(project["version"])
    s3_prefix = None
    if require_bucket or _has_bucket(params):
        bucket, prefix = package_location(params)
        s3_prefix = f"s3://{bucket}/{prefix}/{version}/"
    folder = (dist_dir or root / "dist" / "workbook") / version
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    commit, dirty = _git_state(root)

    wheel = PackagedFile.of(_build_wheel(root, folder), s3_prefix)
    script = folder / BOOTSTRAP_NAME
    script.write_text(
        _bootstrap_script(version, commit, wheel, emr_requirements(root / "pyproject.toml")), encoding="utf-8"
    )
    script.chmod(0o755)
    bootstrap = PackagedFile.of(script, s3_prefix)
    manifest_path = folder / MANIFEST_NAME
    manifest: dict[str, Any] = {
        "name": project["name"],
        "version": version,
        "git_commit": commit,
        "git_dirty": dirty,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "s3_prefix": s3_prefix,
        "files": [
            {"name": f.name, "size": f.size, "sha256": f.sha256, "s3_uri": f.s3_uri}
            for f in (wheel, bootstrap)
        ],
        "emr": {
            "python": f"/usr/bin/{EMR_PYTHON}",
            "bootstrap_action": bootstrap.s3_uri,
            "spark_env": {"PYSPARK_PYTHON": f"/usr/bin/{EMR_PYTHON}"},
        },
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return WorkbookPackage(
        version=version,
        folder=folder,
        git_commit=commit,
        git_dirty=dirty,
        s3_prefix=s3_prefix,
        wheel=wheel,
        bootstrap=bootstrap,
        manifest=PackagedFile.of(manifest_path, s3_prefix),
    )


def upload_package(package: WorkbookPackage, *, region: str, boto3_session: Any = None) -> list[str]:
    """Upload the wheel, the bootstrap script and (last) the manifest; returns their S3 URIs.

    Each object is sent with its SHA-256, which S3 checks against the bytes it receives.

    Raises:
        AwsError: no bucket in the package, the bucket missing or not reachable, or an upload
            failed; the message names the bucket and the object.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    if package.s3_prefix is None:
        raise AwsError(
            f"Failed to upload {package.folder}: it was built without a bucket (set aws.package.bucket)"
        )
    bucket, _, key_prefix = package.s3_prefix.removeprefix("s3://").partition("/")
    s3 = (boto3_session or boto3.Session(region_name=region)).client("s3", region_name=region)
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        why = "does not exist" if code in ("404", "NoSuchBucket") else f"is not reachable ({code}: {exc})"
        raise AwsError(
            f"Failed to upload the workbook package to {package.s3_prefix}: bucket {bucket!r} {why} "
            f"(region {region}); check aws.package.bucket / aws.s3_bucket"
        ) from None
    except BotoCoreError as exc:
        raise AwsError(f"Failed to upload the workbook package to {package.s3_prefix}: {exc}") from None
    uris = []
    for f in package.files:
        key = f"{key_prefix}{f.name}"
        kind = "application/json" if f.name.endswith(".json") else "application/octet-stream"
        try:
            s3.put_object(
                Bucket=bucket,
                Key=key,
                Body=f.path.read_bytes(),
                ContentType=kind,
                ChecksumSHA256=base64.b64encode(bytes.fromhex(f.sha256)).decode(),
                Metadata={"sha256": f.sha256, "workbook-version": package.version},
            )
        except (ClientError, BotoCoreError) as exc:
            raise AwsError(f"Failed to upload {f.path} to s3://{bucket}/{key}: {exc}") from None
        uris.append(f"s3://{bucket}/{key}")
    return uris


# --------------------------------------------------------------------------------------------
# building


def _has_bucket(params: WorkbookParams) -> bool:
    try:
        package_location(params)
    except AwsError:
        return False
    return True


def _git_state(root: Path) -> tuple[str | None, bool]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=False
            )
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no")
    return commit, bool(changes)


def _build_wheel(root: Path, folder: Path) -> Path:
    """``pip wheel --no-deps`` of a clean copy of the sources (no stale ``build/`` of the
    checkout), with this environment's setuptools: no download, no build isolation."""
    try:
        setuptools = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        setuptools = "0"
    if int(setuptools.split(".")[0]) < _MIN_SETUPTOOLS:
        raise PackageError(
            f"Failed to build the wheel: it needs setuptools>={_MIN_SETUPTOOLS} in {sys.prefix} "
            f"(found {setuptools}); run ./workbook setup"
        )
    with tempfile.TemporaryDirectory(prefix="workbook-package-") as tmp:
        src = Path(tmp) / "src"
        for name in _SOURCES:
            path = root / name
            if path.is_dir():
                # symlinks kept: helpers/_data/* link to ../../sql and ../../params of the copy
                shutil.copytree(
                    path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
            elif path.is_file():
                src.mkdir(exist_ok=True)
                shutil.copy2(path, src / name)
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        cmd += ["--disable-pip-version-check", "--no-input"]
        done = subprocess.run(
            [*cmd, "--quiet", "--wheel-dir", str(out), str(src)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        wheels = sorted(out.glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise PackageError(
                f"Failed to build the wheel of {root} (pip wheel exit {done.returncode}):\n{tail}"
            )
        wheel = folder / wheels[0].name
        shutil.copy2(wheels[0], wheel)
    _check_wheel(wheel, root)
    return wheel


def _check_wheel(wheel: Path, root: Path) -> None:
    """The wheel must carry every SQL file and parameter overlay of the checkout."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    wanted = [f"helpers/_data/sql/{p.name}" for p in sorted((root / "sql").glob("*.sql"))]
    wanted += [f"helpers/_data/params/{p.name}" for p in sorted((root / "params").glob("*.yaml"))]
    missing = [n for n in wanted if n not in names]
    if missing or not wanted:
        raise PackageError(
            f"Failed to build the wheel: {wheel.name} lacks {missing or 'the SQL and parameter files'} "
            "(helpers/_data/sql and helpers/_data/params must link to ../../sql and ../../params)"
        )


_BOOTSTRAP = """\
#!/usr/bin/env bash
# EMR bootstrap action of @@NAME@@ @@VERSION@@, written by ./workbook package (commit
# @@COMMIT@@).
# On every node of an EMR 7.x cluster (Amazon Linux 2023) it installs the workbook's Python
# dependencies (the ranges of pyproject.toml, less pyspark, which EMR provides) and then its wheel
# into @@PYTHON@@: EMR 7.x ships Python 3.9 as python3 and Python 3.11, and the workbook needs 3.11.
# Spark must run the same interpreter: PYSPARK_PYTHON=/usr/bin/@@PYTHON@@ (spark-env export).
#
# Usage: @@SCRIPT@@ [WHEEL_S3_URI]
#   default WHEEL_S3_URI: @@DEFAULT_NOTE@@
set -euo pipefail

WHEEL_URI="${1:-@@WHEEL_URI@@}"
WHEEL_NAME="@@WHEEL_NAME@@"
WHEEL_SHA256="@@WHEEL_SHA256@@"
PYTHON="${WORKBOOK_PYTHON:-@@PYTHON@@}"

log() { printf '[workbook bootstrap] %s\\n' "$*" >&2; }

if [ -z "$WHEEL_URI" ]; then
  log "no wheel location: pass the S3 URI of $WHEEL_NAME as the first argument"
  exit 2
fi
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  log "installing $PYTHON"
  sudo dnf install -y -q "${PYTHON##*/}"
fi
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  log "installing pip for $PYTHON"
  sudo dnf install -y -q "${PYTHON##*/}-pip"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "copying $WHEEL_URI"
aws s3 cp --only-show-errors "$WHEEL_URI" "$work/$WHEEL_NAME"
if ! printf '%s  %s\\n' "$WHEEL_SHA256" "$work/$WHEEL_NAME" | sha256sum --check --status; then
  log "$WHEEL_URI is not the wheel this script was written for (SHA-256 $WHEEL_SHA256)"
  exit 1
fi

cat > "$work/requirements.txt" <<'REQUIREMENTS'
@@REQUIREMENTS@@
REQUIREMENTS

log "installing the workbook's dependencies into $PYTHON"
sudo "$PYTHON" -m pip install --quiet --no-warn-script-location --requirement "$work/requirements.txt"
log "installing $WHEEL_NAME"
sudo "$PYTHON" -m pip install --quiet --no-deps --force-reinstall "$work/$WHEEL_NAME"
# the installed package finds its parameter overlays and SQL files (shipped inside the wheel)
"$PYTHON" -c 'from helpers.params import load_params; from helpers.query.sql_files import sql_files
load_params("local"); assert sql_files(), "no SQL files"'
log "installed @@NAME@@ @@VERSION@@ for $PYTHON"
"""


def _bootstrap_script(version: str, commit: str | None, wheel: PackagedFile, requirements: list[str]) -> str:
    values = {
        "NAME": "cdc-lakehouse-workbook",
        "VERSION": version,
        "COMMIT": commit or "unknown",
        "PYTHON": EMR_PYTHON,
        "SCRIPT": BOOTSTRAP_NAME,
        "DEFAULT_NOTE": wheel.s3_uri or "none (built without a bucket: pass it)",
        "WHEEL_URI": wheel.s3_uri or "",
        "WHEEL_NAME": wheel.name,
        "WHEEL_SHA256": wheel.sha256,
        "REQUIREMENTS": "\n".join(requirements),
    }
    text = _BOOTSTRAP
    for key, value in values.items():
        if any(c in value for c in '"$`\\') and key != "REQUIREMENTS":
            raise PackageError(f"Failed to write {BOOTSTRAP_NAME}: {key} {value!r} holds shell syntax")
        text = text.replace(f"@@{key}@@", value)
    return text
