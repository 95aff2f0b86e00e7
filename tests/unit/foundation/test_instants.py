"""Unit tests of :mod:`helpers.instants`: every accepted input form, errors, and round trips."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.errors import WorkbookError
from helpers.instants import (
    InstantError,
    format_instant,
    instant_now,
    instant_to_datetime,
    is_instant,
    to_instant,
)

EXPECTED = "20250331030642808"


@pytest.mark.parametrize(
    "value",
    [
        "20250331030642808",
        " 20250331030642808 ",
        "2025-03-31T03:06:42.808",
        "2025-03-31 03:06:42.808",
        "2025-03-31T03:06:42.808999",
        "2025-03-31T03:06:42.808Z",
        "2025-03-31T05:06:42.808+02:00",
        "2025-03-30T22:06:42.808-05:00",
        dt.datetime(2025, 3, 31, 3, 6, 42, 808999),
        dt.datetime(2025, 3, 31, 5, 6, 42, 808000, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        pd.Timestamp("2025-03-31 03:06:42.808999999"),
        pd.Timestamp("2025-03-31 05:06:42.808", tz="Europe/Berlin"),
        np.datetime64("2025-03-31T03:06:42.808123"),
    ],
)
def test_accepted_forms_give_the_same_instant(value: object) -> None:
    """All forms denote 2025-03-31 03:06:42.808 UTC (sub-millisecond digits truncated)."""
    assert to_instant(value) == EXPECTED  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("20250331030642", "20250331030642000"),
        ("20250331", "20250331000000000"),
        ("2025-03-31", "20250331000000000"),
        (dt.date(2025, 3, 31), "20250331000000000"),
        ("2024-02-29T23:59:59.999", "20240229235959999"),
    ],
)
def test_short_forms_are_padded(value: object, expected: str) -> None:
    """Second precision gets ``000`` milliseconds, dates are midnight UTC."""
    assert to_instant(value) == expected  # type: ignore[arg-type]


def test_naive_datetime_is_utc_even_if_local_zone_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A naive datetime is taken as UTC, never as the machine's local time."""
    monkeypatch.setenv("TZ", "America/New_York")
    assert to_instant(dt.datetime(2025, 1, 1, 0, 0)) == "20250101000000000"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "2025133",
        "202503310306428",
        "20251331000000000",
        "20250230000000000",
        "2025-02-30",
        12,
        1.5,
        None,
        True,
        pd.NaT,
        np.datetime64("NaT"),
    ],
)
def test_invalid_values_are_named_in_the_error(value: object) -> None:
    """The error is an InstantError (a WorkbookError and a ValueError) naming the value."""
    with pytest.raises(InstantError) as info:
        to_instant(value)  # type: ignore[arg-type]
    assert isinstance(info.value, WorkbookError)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("Failed to convert ")
    assert repr(value) in str(info.value)


def test_instant_to_datetime_round_trip() -> None:
    """Back conversion is aware UTC with millisecond precision."""
    moment = instant_to_datetime(EXPECTED)
    assert moment == dt.datetime(2025, 3, 31, 3, 6, 42, 808000, tzinfo=dt.UTC)
    assert instant_to_datetime("20250331030642") == dt.datetime(2025, 3, 31, 3, 6, 42, tzinfo=dt.UTC)


@pytest.mark.parametrize("bad", ["2025", "2025-03-31", "20251301000000000", "x" * 17])
def test_instant_to_datetime_rejects(bad: str) -> None:
    """Only 14/17-digit calendar times convert back; the error names the value."""
    with pytest.raises(InstantError, match=repr(bad)):
        instant_to_datetime(bad)


def test_is_instant() -> None:
    """Only real 17-digit calendar instants qualify."""
    assert is_instant(EXPECTED)
    assert not is_instant("20250331030642")
    assert not is_instant("20251331030642808")
    assert not is_instant(20250331030642808)


def test_instant_now_is_increasing_and_utc() -> None:
    """``instant_now`` is a valid instant close to the current UTC time."""
    first = instant_now()
    assert is_instant(first)
    delta = dt.datetime.now(dt.UTC) - instant_to_datetime(first)
    assert dt.timedelta(0) <= delta < dt.timedelta(seconds=5)
    assert instant_now() >= first


def test_format_instant_rejects_five_digit_years() -> None:
    """Years outside 1000..9999 have no 17-digit instant."""
    with pytest.raises(InstantError):
        format_instant(dt.datetime(999, 1, 1))


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(9999, 12, 31)))
def test_round_trip_property(moment: dt.datetime) -> None:
    """datetime -> instant -> datetime loses only sub-millisecond digits; string order = time order."""
    instant = to_instant(moment)
    back = instant_to_datetime(instant)
    assert back == moment.replace(microsecond=moment.microsecond // 1000 * 1000, tzinfo=dt.UTC)
    assert to_instant(instant) == instant
    assert to_instant(moment.isoformat()) == instant
