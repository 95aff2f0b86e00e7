"""The workbook's exception hierarchy.

Every error raised on purpose by the helper package derives from :class:`WorkbookError`.
Messages read ``"Failed to <verb> <object>: <cause>"`` and, when the fix is known, say it.
"""

from __future__ import annotations

__all__ = [
    "WorkbookError",
    "ParamsError",
    "StackError",
    "SourceError",
    "CdcSetupError",
    "HudiError",
    "HudiCommitError",
    "HudiLockError",
    "TimeTravelError",
    "RunnerError",
    "AwsError",
    "BronzeError",
    "CaptureError",
    "SchemaRegistryError",
    "WireFormatError",
    "SparkSetupError",
    "ReconcileError",
    "RetentionError",
    "QueryError",
    "InstantError",
    "JarsMissingError",
    "BronzeNotWritableError",
    "DashboardError",
    "CheckError",
    "UnreadableBronzeError",
    "WaitTimeoutError",
    "PackageError",
    "LabError",
    "BrowserError",
    "ConfigLintError",
    "cause_line",
]


class WorkbookError(Exception):
    """Base class of all errors the helper package raises on purpose."""


class ParamsError(WorkbookError):
    """A parameters file or override is invalid (unknown key, wrong type, missing setting)."""


class StackError(WorkbookError):
    """A local server (PostgreSQL, MariaDB) could not be started, stopped or reached."""


class SourceError(WorkbookError):
    """Loading or changing data in a source database failed."""


class CdcSetupError(WorkbookError):
    """Enabling or checking change data capture on a source failed."""


class HudiError(WorkbookError):
    """A Hudi table could not be created, written or read."""


class HudiCommitError(HudiError):
    """A Hudi write could not be committed; the table is left as of its last completed commit."""


class HudiLockError(HudiError):
    """Another live writer holds the table's lock."""


class TimeTravelError(HudiError):
    """A time-travel query cannot be answered (unknown table, instant outside the timeline...)."""


class RunnerError(WorkbookError):
    """A notebook of the workbook failed while being executed."""


class AwsError(WorkbookError):
    """An AWS API call failed or AWS settings are missing."""


class CaptureError(WorkbookError):
    """A connector could not be configured, registered, started or queried."""


class SchemaRegistryError(CaptureError):
    """The schema registry refused a request, could not be reached, or knows no such schema."""


class WireFormatError(SchemaRegistryError):
    """A Kafka message is not in the Confluent wire format (magic byte 0, 4-byte schema id, body)."""


class BronzeError(WorkbookError):
    """A change event could not be written to (or read from) the Bronze zone."""


class SparkSetupError(WorkbookError):
    """The SparkSession could not be built or inspected (a project jar missing, no Java, ...)."""


class ReconcileError(WorkbookError):
    """A source or Silver table could not be read or compared."""


class RetentionError(CaptureError):
    """A connector's stored position is gone from the source log (or could not be checked)."""


class QueryError(WorkbookError):
    """A SQL file could not be loaded, transpiled or run (the message names the file and engine)."""


class InstantError(WorkbookError, ValueError):
    """A value cannot be turned into a Hudi instant (or an instant into a time)."""


class JarsMissingError(WorkbookError):
    """A jar of ``scripts/jars.tsv`` is not in ``.jars/``."""


class BronzeNotWritableError(BronzeError):
    """The Bronze folder refuses writes (permissions, read-only or immutable file system)."""


class DashboardError(WorkbookError):
    """A dashboard could not be built, written or checked."""


class CheckError(WorkbookError):
    """A check found differences (rows, counts, checksums) between two sides that must agree."""


class WaitTimeoutError(WorkbookError, TimeoutError):
    """A wait for an observable state ran out of time (the message names what was awaited)."""


class UnreadableBronzeError(BronzeError):
    """A Bronze file cannot be decoded (corrupt or truncated); its events are set aside."""


class PackageError(WorkbookError):
    """The workbook's wheel, EMR bootstrap script or manifest could not be built."""


class LabError(WorkbookError):
    """JupyterLab (``./workbook lab``) could not be started or did not answer."""


class BrowserError(WorkbookError):
    """Headless Chromium could not be started or driven over the DevTools protocol."""


class ConfigLintError(WorkbookError):
    """A configuration file given to the linter cannot be read or parsed (names file and line)."""


#: What Py4J puts before a Java exception's own text (``"An error occurred while calling o59.load."``).
_PY4J_PREAMBLE = "An error occurred while calling "


def cause_line(exc: BaseException, limit: int = 2000) -> str:
    """The line of ``exc``'s text that says what went wrong, for a ``: <cause>`` message.

    A Java exception raised through Py4J starts with a line naming only the call
    (``An error occurred while calling o436.load.``); its cause is the next line
    (``org.apache.hudi.exception.TableNotFoundException: ...``), which is returned instead.

    Args:
        exc: any exception.
        limit: most characters returned.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith(_PY4J_PREAMBLE):
        return lines[1].removeprefix(":").strip()[:limit]
    return (lines[0] if lines else type(exc).__name__)[:limit]
