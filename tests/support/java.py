"""A stand-in ``java`` executable for unit tests of how the workbook finds and uses a JDK: a shell
script that answers ``-version`` as a JDK of the given version does (no JVM starts)."""

from __future__ import annotations

import stat
from pathlib import Path


def fake_java(folder: Path, version: str) -> Path:
    """``<folder>/bin/java``, printing ``openjdk version "<version>"`` on stderr as ``java -version``
    does."""
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2026-01-01' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java
