"""Unit tests of the value helpers :mod:`helpers.query.timetravel` shares with
:mod:`helpers.query.history`: nulls of every kind, pandas timestamps, soft-delete flags."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from helpers.query.timetravel import is_soft_deleted, plain_value


@pytest.mark.parametrize("value", [None, float("nan"), np.nan, pd.NaT, pd.NA])
def test_plain_value_turns_every_null_into_none(value: object) -> None:
    assert plain_value(value) is None


def test_plain_value_keeps_values_and_unwraps_timestamps() -> None:
    when = pd.Timestamp("2008-01-05 10:00:00.123456", tz="UTC")
    assert plain_value(when) == dt.datetime(2008, 1, 5, 10, 0, 0, 123456, tzinfo=dt.UTC)
    assert type(plain_value(when)) is dt.datetime
    for value in (Decimal("12.50"), 7, "x", [1, 2]):
        assert plain_value(value) == value


@pytest.mark.parametrize(
    ("row", "flagged"),
    [
        ({"__deleted": "true"}, True),
        ({"__deleted": True}, True),
        ({"__deleted": "false"}, False),
        ({}, False),
    ],
)
def test_is_soft_deleted(row: dict[str, object], flagged: bool) -> None:
    assert is_soft_deleted(row) is flagged
