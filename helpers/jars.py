"""The project's JVM jars: pinned in ``scripts/jars.tsv``, fetched by the set-up into ``.jars/``.

``scripts/fetch_jars.sh`` (run by ``./workbook setup``, ``run`` and ``test``) downloads them from
Maven Central with Maven and checks each against its SHA-256; this module only finds them, so
that a missing jar fails with the command that fetches it instead of a JVM class-loading error.
"""

from __future__ import annotations

from pathlib import Path

from helpers.errors import JarsMissingError
from helpers.params import project_root

__all__ = ["JARS_DIR", "MANIFEST", "manifest", "project_jars"]

#: Where the set-up puts the jars (relative to the project root; git-ignored).
JARS_DIR = ".jars"
#: The pinned list: set, group:artifact:version, sha256 (tab separated).
MANIFEST = Path("scripts") / "jars.tsv"


def manifest(sets: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``(coordinates, jar file name, sha256)`` of the manifest's entries in ``sets``, in order."""
    out = []
    for line in (project_root() / MANIFEST).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        group_set, coords, sha = line.split("\t")
        if group_set in sets:
            _group, artifact, version = coords.split(":")
            out.append((coords, f"{artifact}-{version}.jar", sha))
    return out


def project_jars(sets: tuple[str, ...] = ("spark", "metastore")) -> list[Path]:
    """The jars of ``sets`` as paths in ``.jars/``.

    Raises:
        JarsMissingError: naming the missing jars and the set-up command that fetches them.
    """
    folder = project_root() / JARS_DIR
    wanted = manifest(sets)
    missing = [coords for coords, name, _ in wanted if not (folder / name).is_file()]
    if missing:
        extra = [s for s in sets if s not in ("spark", "metastore")]
        command = "./workbook setup"
        if extra:
            command += f" and bash scripts/fetch_jars.sh {' '.join(extra)}"
        raise JarsMissingError(
            f"Failed to find the jar(s) {', '.join(missing)} in {folder}: run {command}, which fetches "
            "them from Maven Central and checks them against scripts/jars.tsv"
        )
    return [folder / name for _, name, _ in wanted]
