"""The project's JVM jars: pinned in ``scripts/jars.tsv``, fetched by the set-up into ``.jars/``.

``scripts/fetch_jars.sh`` (run by ``./workbook setup``, ``run`` and ``test``) downloads them from
Maven Central with Maven and checks each against its SHA-256; this module only finds them, so
that a missing jar fails with the command that fetches it instead of a JVM class-loading error.
"""

from __future__ import annotations

from pathlib import Path

from helpers.errors import JarsMissingError
from helpers.params import project_root

__all__ = [
    "ARCHIVE_STAMP",
    "JARS_DIR",
    "MANIFEST",
    "archives",
    "CONNECT_TRANSFORMS_DIR",
    "connect_plugin_dirs",
    "connect_transforms_dir",
    "HADOOP_CLASSES_DIR",
    "hadoop_classes_jar",
    "jar_tree",
    "manifest",
    "project_archive",
    "project_jars",
    "shaded_jar",
]

#: Where the set-up puts the jars (relative to the project root; git-ignored).
JARS_DIR = ".jars"
#: The pinned list: set, group:artifact:version, sha256 (tab separated).
MANIFEST = Path("scripts") / "jars.tsv"
#: The file inside an unpacked archive's folder holding the archive's SHA-256 (written last).
ARCHIVE_STAMP = ".sha256"


def _rows(sets: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for line in (project_root() / MANIFEST).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        group_set, coords, third = line.split("\t")
        if group_set in sets:
            out.append((coords, third))
    return out


def manifest(sets: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``(coordinates, jar file name, sha256)`` of the manifest's single jars in ``sets``, in order
    (dependency trees and plugin archives: :func:`jar_tree`, :func:`connect_plugin_dirs`)."""
    out = []
    for coords, sha in _rows(sets):
        parts = coords.split(":")
        if len(parts) == 3:
            out.append((coords, f"{parts[1]}-{parts[2]}.jar", sha))
        elif len(parts) == 5 and parts[3] == "jar":  # a jar with a classifier
            out.append((coords, f"{parts[1]}-{parts[2]}-{parts[4]}.jar", sha))
    return out


def _setup_hint(sets: tuple[str, ...]) -> str:
    extra = [s for s in sets if s not in ("spark", "metastore", "trino")]
    command = "./workbook setup"
    if extra:
        command += f" {' '.join(extra)}"
    return command


def jar_tree(name: str, set_name: str) -> list[Path]:
    """The jars of the dependency tree ``scripts/poms/<name>.xml`` (set ``set_name``), as copied
    into ``.jars/<name>/`` and pinned in the tree's ``.sha256`` file.

    Raises:
        JarsMissingError: naming the missing jars and the set-up command that fetches them.
    """
    rows = [third for coords, third in _rows((set_name,)) if coords == f"tree:scripts/poms/{name}.xml"]
    if not rows:
        raise JarsMissingError(f"Failed to find the jar tree {name!r} in set {set_name!r} of {MANIFEST}")
    folder = project_root() / JARS_DIR / name
    names = [
        line.split()[-1].lstrip("*")
        for line in (project_root() / rows[0]).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise JarsMissingError(
            f"Failed to find {len(missing)} jar(s) of the {name} tree in {folder} (e.g. {missing[0]}): "
            f"run {_setup_hint((set_name,))}, which fetches them from Maven Central and checks them "
            f"against {rows[0]}"
        )
    return [folder / n for n in names]


def connect_plugin_dirs(set_name: str) -> dict[str, Path]:
    """Per plugin artifact (``debezium-connector-postgres``), the folder its archive was unpacked
    into (``.jars/connect-plugins/<artifact>-<version>``): one entry of a Connect ``plugin.path``.

    Raises:
        JarsMissingError: when an archive of the set was not unpacked yet (naming the set-up command).
    """
    out = {}
    for coords, sha in _rows((set_name,)):
        parts = coords.split(":")
        if len(parts) != 5 or parts[3:] != ["tar.gz", "plugin"]:
            continue
        folder = project_root() / JARS_DIR / "connect-plugins" / f"{parts[1]}-{parts[2]}"
        stamp = folder / ARCHIVE_STAMP
        if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != sha:
            raise JarsMissingError(
                f"Failed to find the Connect plugin {coords} in {folder}: run {_setup_hint((set_name,))}, "
                "which fetches it from Maven Central, checks it against scripts/jars.tsv and unpacks it"
            )
        out[parts[1]] = folder
    return out


def archives(sets: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """``(coordinates, folder name in .jars/, sha256)`` of the manifest's archives in ``sets`` (not
    the Connect plugins: :func:`connect_plugin_dirs`), as ``scripts/fetch_jars.sh`` unpacks them."""
    out = []
    for coords, sha in _rows(sets):
        parts = coords.split(":")
        if len(parts) < 4 or parts[3:] == ["tar.gz", "plugin"]:
            continue
        out.append((coords, f"{parts[1]}-{parts[2]}" + (f"-{parts[4]}" if len(parts) > 4 else ""), sha))
    return out


def project_archive(set_name: str, artifact: str) -> Path:
    """The folder that the set-up unpacked the archive ``artifact`` of set ``set_name`` into
    (``.jars/<artifact>-<version>[-<classifier>]``; Connect plugins: :func:`connect_plugin_dirs`).

    It counts as present once its :data:`ARCHIVE_STAMP` holds the pinned SHA-256 (the set-up
    writes it after unpacking, so a half-unpacked folder is never used).

    Raises:
        JarsMissingError: naming the archive and the command that fetches it.
    """
    for coords, name, sha in archives((set_name,)):
        if coords.split(":")[1] != artifact:
            continue
        folder = project_root() / JARS_DIR / name
        try:
            stamp = (folder / ARCHIVE_STAMP).read_text(encoding="utf-8").strip()
        except OSError:
            stamp = ""
        if stamp != sha:
            raise JarsMissingError(
                f"Failed to find the archive {coords} in {folder}: run {_setup_hint((set_name,))}, which "
                "fetches it from Maven Central, checks it against scripts/jars.tsv and unpacks it"
            )
        return folder
    raise JarsMissingError(
        f"Failed to find the archive {artifact!r} in set {set_name!r} of {project_root() / MANIFEST}: "
        "it is not pinned there"
    )


def project_jars(sets: tuple[str, ...] = ("spark",)) -> list[Path]:
    """The jars of ``sets`` as paths in ``.jars/``.

    Raises:
        JarsMissingError: naming the missing jars and the set-up command that fetches them.
    """
    folder = project_root() / JARS_DIR
    wanted = manifest(sets)
    missing = [coords for coords, name, _ in wanted if not (folder / name).is_file()]
    if missing:
        raise JarsMissingError(
            f"Failed to find the jar(s) {', '.join(missing)} in {folder}: run {_setup_hint(sets)}, "
            "which fetches them from Maven Central and checks them against scripts/jars.tsv"
        )
    return [folder / name for _, name, _ in wanted]


#: The folder of the workbook's own Connect transform jar (``scripts/build_java.sh``).
CONNECT_TRANSFORMS_DIR = "workbook-connect"
#: The folder of the workbook's own Hadoop file system jar (``scripts/build_java.sh``).
HADOOP_CLASSES_DIR = "workbook-hadoop"


def shaded_jar(name: str, set_name: str) -> Path:
    """The jar the set-up builds from ``scripts/poms/<name>.xml`` (row ``shade:`` of set
    ``set_name``), checked when it was built.

    Raises:
        JarsMissingError: naming the set-up command that builds it.
    """
    rows = [c for c, _ in _rows((set_name,)) if c == f"shade:scripts/poms/{name}.xml"]
    if not rows:
        raise JarsMissingError(f"Failed to find the built jar {name!r} in set {set_name!r} of {MANIFEST}")
    pom = (project_root() / "scripts" / "poms" / f"{name}.xml").read_text(encoding="utf-8")
    final = pom.split("<finalName>", 1)[1].split("</finalName>", 1)[0]
    jar = project_root() / JARS_DIR / f"{final}.jar"
    if not jar.exists():
        raise JarsMissingError(
            f"Failed to find {JARS_DIR}/{jar.name} (built from {name}.xml): run {_setup_hint((set_name,))}"
        )
    return jar


def _built_jar(name: str, source: str, what: str) -> Path:
    """The jar ``scripts/build_java.sh`` built from ``source`` into ``.jars/<name>/<name>-<hash>.jar``.

    Raises:
        JarsMissingError: when it is not built, naming ``what`` and the command that builds it.
    """
    folder = project_root() / JARS_DIR / name
    built = sorted(folder.glob(f"{name}-*.jar"))
    if not built:
        raise JarsMissingError(
            f"Failed to find the workbook's {what} jar in {folder}: run ./workbook setup "
            f"(scripts/build_java.sh compiles {source} with javac)"
        )
    return built[-1]


def connect_transforms_dir() -> Path:
    """The folder holding the workbook's own Kafka Connect jar (``TruncateMarker``,
    ``SnapshotPosition``, ``EngineBatches``), built from ``connect/src`` by the set-up: a plugin
    folder for Connect's ``plugin.path`` and a classpath entry for the embedded engine.

    Raises:
        JarsMissingError: when the jar is not built, naming the command that builds it.
    """
    return _built_jar(CONNECT_TRANSFORMS_DIR, "connect/src", "Connect transform").parent


def hadoop_classes_jar() -> Path:
    """The workbook's own Hadoop classes (``NioLocalFileSystem`` and, for ``FileContext``,
    ``NioLocalFs``), built from ``hadoop/src`` by the set-up: on the class path of the local Spark
    sessions.

    Raises:
        JarsMissingError: when the jar is not built, naming the command that builds it.
    """
    return _built_jar(HADOOP_CLASSES_DIR, "hadoop/src", "Hadoop classes")
