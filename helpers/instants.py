"""The one place that turns user time input into Hudi instants, and instants back into times.

A Hudi instant is a commit's UTC time as 17 digits, ``yyyyMMddHHmmssSSS``. :func:`to_instant`
takes the inputs listed in ``docs/hudi.md`` (naive = UTC); :func:`instant_to_datetime` goes back.

Example:
    >>> to_instant("2025-03-31T05:06:42.808+02:00")
    '20250331030642808'
    >>> instant_to_datetime("20250331030642808").isoformat()
    '2025-03-31T03:06:42.808000+00:00'
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from helpers.errors import InstantError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import pandas as pd

__all__ = [
    "INSTANT_FORMAT",
    "InstantInput",
    "format_instant",
    "instant_now",
    "instant_to_datetime",
    "is_instant",
    "to_instant",
]

#: ``strftime`` pattern of the first 14 digits; the last 3 digits are milliseconds.
INSTANT_FORMAT = "%Y%m%d%H%M%S"

#: Everything :func:`to_instant` accepts.
InstantInput = Union[str, dt.datetime, dt.date, "pd.Timestamp", "np.datetime64"]

_INSTANT_RE = re.compile(r"^\d{17}$")
_SECONDS_RE = re.compile(r"^\d{14}$")
_DATE_DIGITS_RE = re.compile(r"^\d{8}$")
_ACCEPTED = (
    "yyyyMMddHHmmssSSS, yyyyMMddHHmmss, yyyyMMdd, ISO-8601 date or date-time "
    "(optional offset or Z), datetime, date, pandas.Timestamp or numpy.datetime64"
)


def _bad(value: Any, cause: str) -> InstantError:
    return InstantError(f"Failed to convert {value!r} to a Hudi instant: {cause}. Accepted: {_ACCEPTED}")


def format_instant(moment: dt.datetime) -> str:
    """Format a datetime as a 17-digit Hudi instant (naive = UTC, aware converted to UTC).

    Args:
        moment: The time to format.

    Returns:
        ``yyyyMMddHHmmssSSS`` in UTC, milliseconds truncated.

    Raises:
        InstantError: if the year is outside 1000..9999 (not representable in 17 digits).
    """
    utc = _as_utc(moment)
    if not 1000 <= utc.year <= 9999:
        raise _bad(moment, "the year must have four digits")
    return f"{utc.strftime(INSTANT_FORMAT)}{utc.microsecond // 1000:03d}"


def _as_utc(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        return moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def _from_digits(text: str) -> dt.datetime:
    """Parse 8, 14 or 17 digits into an aware UTC datetime (validates the calendar)."""
    if len(text) == 8:
        return dt.datetime.strptime(text, "%Y%m%d").replace(tzinfo=dt.UTC)
    base = dt.datetime.strptime(text[:14], INSTANT_FORMAT).replace(tzinfo=dt.UTC)
    millis = int(text[14:17]) if len(text) == 17 else 0
    return base + dt.timedelta(milliseconds=millis)


def is_instant(value: object) -> bool:
    """Tell whether ``value`` is a valid 17-digit Hudi instant string.

    Args:
        value: Anything.

    Returns:
        True for a 17-digit string that is a real calendar time, else False.
    """
    if not isinstance(value, str) or not _INSTANT_RE.match(value):
        return False
    try:
        _from_digits(value)
    except ValueError:
        return False
    return True


def to_instant(value: InstantInput) -> str:
    """Turn user time input into a 17-digit Hudi instant (UTC).

    Args:
        value: One of the accepted inputs listed in ``docs/hudi.md``.

    Returns:
        The instant ``yyyyMMddHHmmssSSS``.

    Raises:
        InstantError: naming the value, if it has an unsupported type or cannot be parsed.

    Example:
        >>> to_instant("2024-04-18")
        '20240418000000000'
        >>> to_instant(dt.datetime(2024, 4, 18, 17, 35, 50, 988123))
        '20240418173550988'
    """
    if isinstance(value, str):
        return _string_to_instant(value)
    if isinstance(value, dt.datetime):  # includes pandas.Timestamp (and pandas.NaT)
        if type(value).__name__ == "NaTType":
            raise _bad(value, "NaT is not a time")
        return format_instant(value)
    if isinstance(value, dt.date):
        return format_instant(dt.datetime(value.year, value.month, value.day))
    if type(value).__name__ == "datetime64" and type(value).__module__ == "numpy":
        return _numpy_to_instant(value)
    raise _bad(value, f"unsupported type {type(value).__name__}")


def _string_to_instant(value: str) -> str:
    text = value.strip()
    if not text:
        raise _bad(value, "the string is empty")
    if text.isdigit():
        if not (_INSTANT_RE.match(text) or _SECONDS_RE.match(text) or _DATE_DIGITS_RE.match(text)):
            raise _bad(value, f"a number string must have 8, 14 or 17 digits, not {len(text)}")
        try:
            return format_instant(_from_digits(text))
        except ValueError as exc:
            raise _bad(value, "the digits are not a calendar time (check month, day, hour)") from exc
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise _bad(value, "not an ISO-8601 date or date-time") from exc
    return format_instant(parsed)


def _numpy_to_instant(value: Any) -> str:

    if np.isnat(value):
        raise _bad(value, "NaT is not a time")
    micros = value.astype("datetime64[us]").astype(np.int64)
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(micros))
    return format_instant(moment)


def instant_to_datetime(instant: str) -> dt.datetime:
    """Turn a Hudi instant back into an aware UTC datetime.

    Args:
        instant: ``yyyyMMddHHmmssSSS`` or ``yyyyMMddHHmmss``.

    Returns:
        The time, ``tzinfo=UTC``, millisecond precision.

    Raises:
        InstantError: naming the value, if it is not a 14- or 17-digit calendar time.
    """
    if not isinstance(instant, str) or not (_INSTANT_RE.match(instant) or _SECONDS_RE.match(instant)):
        raise InstantError(
            f"Failed to convert Hudi instant {instant!r} to a datetime: expected 17 digits "
            "yyyyMMddHHmmssSSS (or 14 digits yyyyMMddHHmmss)"
        )
    try:
        return _from_digits(instant)
    except ValueError as exc:
        raise InstantError(
            f"Failed to convert Hudi instant {instant!r} to a datetime: not a calendar time ({exc})"
        ) from exc


def instant_now() -> str:
    """Return the current UTC time as a Hudi instant.

    Returns:
        ``yyyyMMddHHmmssSSS`` for now (UTC).
    """
    return format_instant(dt.datetime.now(dt.UTC))
