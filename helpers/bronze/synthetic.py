"""A synthetic Bronze backlog: TICKIT ``sale`` change events written straight into Bronze by the
project's own :class:`helpers.bronze.writer.BronzeWriter`, for backlogs larger than a source here
can produce quickly (benchmarks of scale, and the tests that show the driver's memory stays flat
as the backlog grows).

The events look as Debezium's MySQL connector, flattened, writes them: a snapshot read (``r``)
of every key first, then updates and deletes of random keys in binlog order, in files of
``batch`` events. The same arguments give the same files.

Example:
    >>> write_sale_backlog("/tmp/bronze", events=450_000, keys=172_456)   # doctest: +SKIP
    BacklogSummary(topic='tickit.ecomm.sale', events=450000, files=55, keys=172456, deletes=...)
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.bronze.events import BronzeEvent
from helpers.bronze.writer import BronzeWriter

__all__ = ["SALE_TOPIC", "BacklogSummary", "write_sale_backlog"]

SALE_TOPIC = "tickit.ecomm.sale"
_MONEY: dict[str, Any] = {
    "name": "org.apache.kafka.connect.data.Decimal",
    "parameters": {"scale": "2", "connect.decimal.precision": "8"},
}


def _field(kind: str, field: str, optional: bool = True, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": field, **extra}


_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": f"{SALE_TOPIC}.Value",
    "fields": [
        _field("int32", "salesid", False),
        _field("int32", "listid", False),
        _field("int32", "sellerid", False),
        _field("int32", "buyerid", False),
        _field("int32", "eventid", False),
        _field("int16", "dateid", False),
        _field("int16", "qtysold", False),
        _field("bytes", "pricepaid", **_MONEY),
        _field("bytes", "commission", **_MONEY),
        _field("int64", "saletime", name="io.debezium.time.Timestamp"),
        _field("string", "__deleted"),
        _field("string", "__op"),
        _field("string", "__table"),
        _field("string", "__file"),
        _field("int64", "__pos"),
        _field("int32", "__row"),
        _field("int64", "__source_ts_ms"),
    ],
}


@dataclass(frozen=True)
class BacklogSummary:
    """What :func:`write_sale_backlog` wrote."""

    topic: str
    events: int
    files: int
    keys: int
    deletes: int


def write_sale_backlog(
    root: str | Path,
    *,
    events: int,
    keys: int,
    batch: int = 8192,
    seed: int = 20080101,
    start: dt.datetime = dt.datetime(2026, 3, 1, tzinfo=dt.UTC),
) -> BacklogSummary:
    """Write ``events`` change events of ``keys`` sale rows into the Bronze zone ``root``.

    Args:
        root: the Bronze zone (a folder or an ``s3://`` URI).
        events: how many events in all (at least ``keys``: the snapshot reads every key once).
        keys: how many distinct sale ids.
        batch: events per Bronze file (the capture workers' ``capture.max_batch_size``).
        seed: the random seed (same seed, same files).
        start: the source commit time of the first event (one event per millisecond after it).

    Returns:
        How many events, files, keys and deletes were written.
    """
    writer = BronzeWriter(root, "avro")
    rnd = random.Random(seed)
    first_ms = int(start.timestamp() * 1000)
    pending: list[BronzeEvent] = []
    files = deletes = 0
    position = 4
    cent = decimal.Decimal("0.01")
    rate = decimal.Decimal("0.15")
    for i in range(max(events, keys)):
        snapshot = i < keys
        key = i + 1 if snapshot else rnd.randint(1, keys)
        op = "r" if snapshot else ("d" if rnd.random() < 0.1 else "u")
        deletes += op == "d"
        position += 0 if snapshot else 97
        price = decimal.Decimal(rnd.randint(100, 200_000)).scaleb(-2)
        value = {
            "salesid": key,
            "listid": key % 5000 + 1,
            "sellerid": key % 3000 + 1,
            "buyerid": key % 4000 + 1,
            "eventid": key % 800 + 1,
            "dateid": 1827 + key % 365,
            "qtysold": 1 + key % 4,
            "pricepaid": price,
            "commission": (price * rate).quantize(cent),
            "saletime": first_ms + i,
            "__deleted": "true" if op == "d" else "false",
            "__op": op,
            "__table": "sale",
            "__file": "mysql-bin.000001",
            "__pos": position,
            "__row": 0,
            "__source_ts_ms": first_ms + i,
        }
        pending.append(BronzeEvent(SALE_TOPIC, value, _SCHEMA, f"{position}:{key}:{i}".encode()))
        if len(pending) == batch:
            files += len(writer.write_batch(pending))
            pending = []
    if pending:
        files += len(writer.write_batch(pending))
    return BacklogSummary(SALE_TOPIC, max(events, keys), files, keys, deletes)
