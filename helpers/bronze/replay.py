"""The one Bronze replay: what a table holds once every change event is applied in log order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from helpers.bronze.events import UNAVAILABLE_VALUE, position_of
from helpers.bronze.read import read_bronze

__all__ = ["replay", "replay_topic"]

_PLACEHOLDERS = (UNAVAILABLE_VALUE, UNAVAILABLE_VALUE.encode())


def replay(events: Iterable[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    """The rows ``events`` leave behind: the newest event per key by log position, a TOAST
    placeholder keeping the key's previous value, deleted keys (``__deleted=true``) dropped.

    Args:
        events: decoded change events (:func:`helpers.bronze.read.read_bronze`), in any order.
        key: primary-key columns.
    """
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in sorted(events, key=position_of):
        k = tuple(event[c] for c in key)
        before = latest.get(k)
        if before is not None:
            event = {c: before.get(c) if v in _PLACEHOLDERS else v for c, v in event.items()}
        latest[k] = event
    return [e for e in latest.values() if e.get("__deleted") != "true"]


def replay_topic(bronze_root: str | Path, topic: str, key: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`replay` of every event of ``topic`` under ``bronze_root``."""
    return replay(read_bronze(bronze_root, topic), key)
