"""A copy of the project's set-up files in a temporary folder, used as ``WORKBOOK_ROOT``: the jar
manifest, the fetch script and its POMs, the parameters, and (``jars``) an empty stand-in for
each pinned jar, so the settings that name the jars can be built without the set-up having run."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from helpers.jars import HADOOP_CLASSES_DIR, JARS_DIR, manifest
from helpers.params import project_root

ROOT = project_root()

#: What fetching the jar set ``kafka`` reads.
KAFKA_SCRIPTS = ("jars.tsv", "fetch_jars.sh", "poms/kafka.xml", "poms/kafka.sha256")


def project_copy(
    folder: Path, scripts: Iterable[str] = ("jars.tsv",), *, params: bool = True, jars: tuple[str, ...] = ()
) -> Path:
    """``folder`` holding ``scripts/<name>`` for each of ``scripts``, ``params/`` (``params``),
    and an empty file in ``.jars/`` for every jar of the sets ``jars`` and for the workbook's own
    Hadoop classes (``scripts/build_java.sh``); returns ``folder``."""
    for name in scripts:
        (folder / "scripts" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "scripts" / name, folder / "scripts" / name)
    if params:
        shutil.copytree(ROOT / "params", folder / "params")
    if jars:
        (folder / JARS_DIR).mkdir(exist_ok=True)
        for _, name, _ in manifest(jars):  # read from the real manifest, before WORKBOOK_ROOT moves
            (folder / JARS_DIR / name).touch()
        (folder / JARS_DIR / HADOOP_CLASSES_DIR).mkdir(exist_ok=True)
        (folder / JARS_DIR / HADOOP_CLASSES_DIR / f"{HADOOP_CLASSES_DIR}-0.jar").touch()
    return folder
