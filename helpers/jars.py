"""The project's JVM jars: pinned in ``scripts/jars.tsv``, fetched by the set-up into ``.jars/``.

``scripts/fetch_jars.sh`` (run by ``./workbook setup``, ``run`` and ``test``) downloads them from
Maven Central with Maven and checks each against its SHA-256; this module only finds them, so
that a missing jar fails with the command that fetches it instead of a JVM class-loading error.
An entry with a packaging (``group:artifact:version:tar.gz[:classifier]``) is an archive that the
set-up unpacks into a folder of ``.jars/`` (:func:`project_archive`).
"""

from __future__ import annotations

from pathlib import Path

from helpers.errors import JarsMissingError
from helpers.params import project_root

__all__ = ["ARCHIVE_STAMP", "JARS_DIR", "MANIFEST", "manifest", "project_archive", "project_jars"]

#: Where the set-up puts the jars (relative to the project root; git-ignored).
JARS_DIR = ".jars"
#: The pinned list: set, group:artifact:version, sha256 (tab separated).
MANIFEST = Path("scripts") / "jars.tsv"
#: The file inside an unpacked archive's folder holding the archive's SHA-256 (written last).
ARCHIVE_STAMP = ".sha256"


def _local_name(coords: str) -> str:
    """The name in ``.jars/``: ``<artifact>-<version>.jar`` for a jar, the folder
    ``<artifact>-<version>[-<classifier>]`` for an archive (as ``scripts/fetch_jars.sh`` names it)."""
    parts = coords.split(":")
    artifact, version = parts[1], parts[2]
    packaging = parts[3] if len(parts) > 3 else "jar"
    classifier = parts[4] if len(parts) > 4 else ""
    base = f"{artifact}-{version}" + (f"-{classifier}" if classifier else "")
    return f"{base}.jar" if packaging == "jar" else base


def manifest(sets: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``(coordinates, name in .jars/, sha256)`` of the manifest's entries in ``sets``, in order;
    the name is a jar file, or the folder an archive is unpacked into."""
    out = []
    for line in (project_root() / MANIFEST).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        group_set, coords, sha = line.split("\t")
        if group_set in sets:
            out.append((coords, _local_name(coords), sha))
    return out


def _missing(sets: tuple[str, ...], missing: list[str], folder: Path) -> JarsMissingError:
    extra = [s for s in sets if s not in ("spark", "metastore")]
    command = "./workbook setup"
    if extra:
        command += f" and bash scripts/fetch_jars.sh {' '.join(extra)}"
    return JarsMissingError(
        f"Failed to find the jar(s) {', '.join(missing)} in {folder}: run {command}, which fetches "
        "them from Maven Central and checks them against scripts/jars.tsv"
    )


def project_archive(set_name: str, artifact: str) -> Path:
    """The folder that the set-up unpacked the archive ``artifact`` of set ``set_name`` into.

    It counts as present once its :data:`ARCHIVE_STAMP` holds the pinned SHA-256 (the set-up
    writes it after unpacking, so a half-unpacked folder is never used).

    Raises:
        JarsMissingError: naming the archive and the command that fetches it.
    """
    folder = project_root() / JARS_DIR
    for coords, name, sha in manifest((set_name,)):
        if coords.split(":")[1] != artifact:
            continue
        try:
            stamp = (folder / name / ARCHIVE_STAMP).read_text(encoding="utf-8").strip()
        except OSError:
            stamp = ""
        if stamp != sha:
            raise _missing((set_name,), [coords], folder)
        return folder / name
    raise JarsMissingError(
        f"Failed to find the archive {artifact!r} in set {set_name!r} of {project_root() / MANIFEST}: "
        "it is not pinned there"
    )


def project_jars(sets: tuple[str, ...] = ("spark", "metastore")) -> list[Path]:
    """The jars of ``sets`` as paths in ``.jars/``.

    Raises:
        JarsMissingError: naming the missing jars and the set-up command that fetches them.
    """
    folder = project_root() / JARS_DIR
    wanted = manifest(sets)
    wanted = [entry for entry in wanted if entry[1].endswith(".jar")]  # archives: project_archive
    missing = [coords for coords, name, _ in wanted if not (folder / name).is_file()]
    if missing:
        raise _missing(sets, missing, folder)
    return [folder / name for _, name, _ in wanted]
