"""Reading a Kafka topic whole with ``kafka-python`` (tests and notebooks look at what the
connectors wrote): :func:`read_topic` from its first offset to its end offset at the call."""

from __future__ import annotations

import json
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.serializer import Deserializer

from helpers.errors import CaptureError, WaitTimeoutError
from helpers.poll import wait_until

__all__ = ["JsonDeserializer", "read_topic"]


def read_topic(bootstrap: str, topic: str, *, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Every record of ``topic`` from its first offset up to its end offset at the time of the
    call: ``partition``, ``offset``, ``key`` and ``value`` (JSON decoded; ``None`` for a null).

    A topic that does not exist yet reads as empty.

    Raises:
        CaptureError: when the records up to the end offsets do not arrive within ``timeout_s``.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        request_timeout_ms=10_000,
        key_deserializer=JsonDeserializer(),
        value_deserializer=JsonDeserializer(),
    )
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not assigned:
            return []
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        ends = consumer.end_offsets(assigned)
        records: list[dict[str, Any]] = []

        def caught_up() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(
                    {"partition": r.partition, "offset": r.offset, "key": r.key, "value": r.value}
                    for r in batch
                )
            return all(consumer.position(tp) >= ends[tp] for tp in assigned)

        try:
            wait_until(caught_up, timeout_s=timeout_s, what=f"topic {topic} up to its end", interval_s=0.01)
        except WaitTimeoutError:
            raise CaptureError(
                f"Failed to read topic {topic} from {bootstrap}: {len(records)} record(s) of "
                f"{sum(ends.values())} after {timeout_s:.0f} s"
            ) from None
        return records
    finally:
        consumer.close()


class JsonDeserializer(Deserializer):  # type: ignore[misc]
    """JSON record keys and values (what Kafka's ``JsonConverter`` writes); ``None`` for a null."""

    def deserialize(self, topic: str, headers: Any, data: bytes | None) -> Any:
        return None if data is None else json.loads(data)
