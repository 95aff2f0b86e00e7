"""Reading a Kafka topic whole with ``kafka-python`` (tests and notebooks look at what the
connectors wrote, and a re-snapshot reads Debezium's notifications): :func:`read_topic` from its
first offset to its end offset at the call, :func:`end_offsets`."""

from __future__ import annotations

import json
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.serializer import Deserializer

from helpers.errors import CaptureError, WaitTimeoutError
from helpers.poll import wait_until

__all__ = ["JsonDeserializer", "end_offsets", "read_topic"]


def read_topic(
    bootstrap: str, topic: str, *, timeout_s: float = 30.0, raw_values: bool = False
) -> list[dict[str, Any]]:
    """Every record of ``topic`` from its first offset up to its end offset at the time of the
    call: ``partition``, ``offset``, ``timestamp`` (epoch ms), ``key`` and ``value`` (JSON decoded,
    or the bytes with ``raw_values``; ``None`` for a null).

    A topic that does not exist yet reads as empty.

    Raises:
        CaptureError: when the records up to the end offsets do not arrive within ``timeout_s``.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        request_timeout_ms=10_000,
        key_deserializer=None if raw_values else JsonDeserializer(),
        value_deserializer=None if raw_values else JsonDeserializer(),
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
                    {
                        "partition": r.partition,
                        "offset": r.offset,
                        "timestamp": r.timestamp,
                        "key": r.key,
                        "value": r.value,
                    }
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


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition of ``topic`` and its end offset now (empty for a topic that does not exist).

    Raises:
        CaptureError: when the broker cannot be reached (kafka-python's message).
    """
    try:
        consumer = KafkaConsumer(  # kafka-python waits 30 s to bootstrap by default
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            group_id=None,
            bootstrap_timeout_ms=5000,
            request_timeout_ms=10_000,
        )
    except KafkaError as exc:
        raise CaptureError(f"Failed to reach Kafka at {bootstrap}: {exc}") from None
    try:
        assigned = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())]
        return {tp.partition: int(end) for tp, end in consumer.end_offsets(assigned).items()}
    except KafkaError as exc:
        raise CaptureError(f"Failed to read the end offsets of {topic} at {bootstrap}: {exc}") from None
    finally:
        consumer.close()


class JsonDeserializer(Deserializer):  # type: ignore[misc]
    """JSON record keys and values (what Kafka's ``JsonConverter`` writes); ``None`` for a null."""

    def deserialize(self, topic: str, headers: Any, data: bytes | None) -> Any:
        return None if data is None else json.loads(data)
