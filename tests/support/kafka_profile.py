"""The local-kafka profile in tests: its settings on free ports, and rows inserted one commit each
into the sources (PostgreSQL ``ems.venue`` and MariaDB ``date``, whose keys are ``smallint``)."""

from __future__ import annotations

from typing import Any

from helpers.local.registry import CONVERTER_CLASS
from helpers.local.stack import LocalStack
from helpers.proc import free_port


def kafka_overrides(*, avro: bool) -> dict[str, Any]:
    """``params/local-kafka.yaml``'s capture settings with free ports for the broker, the worker
    and (``avro``: Apicurio's converter, as in the profile) the registry; without ``avro`` the
    JSON converter and no registry."""
    overrides: dict[str, Any] = {
        "capture.backend": "kafka_connect",
        "capture.kafka_connect.url": "",
        "capture.kafka_connect.bootstrap_servers": "",
        "local.kafka.broker_port": free_port(),
        "local.kafka.controller_port": free_port(),
        "local.kafka.connect_port": free_port(),
    }
    if avro:
        overrides |= {
            "capture.kafka_connect.converter": CONVERTER_CLASS,
            "local.registry.enabled": True,
            "local.registry.port": free_port(),
            "local.registry.management_port": free_port(),
        }
    return overrides


def insert_venues(stack: LocalStack, keys: range, name: str = "kc") -> None:
    """One committed insert into ``ems.venue`` per key."""
    with stack.connect_postgres(stack.params.source("ems").database, autocommit=True) as conn:
        for key in keys:
            conn.execute(
                "INSERT INTO ems.venue (venueid, venuename, venuecity, venuestate, venueseats)"
                " VALUES (%s, %s, 'c', 'ST', 1)",
                (key, f"{name}{key}"),
            )


def insert_dates(stack: LocalStack, keys: range, year: int = 2031) -> None:
    """One committed insert into ecomm's ``date`` per key."""
    conn = stack.connect_mariadb(stack.params.source("ecomm").database, autocommit=True)
    try:
        with conn.cursor() as cur:
            for key in keys:
                cur.execute(
                    "INSERT INTO `date` (dateid, caldate, day, week, month, qtr, year, holiday)"
                    " VALUES (%s, %s, 'MO', 1, 'JAN', '1', %s, 0)",
                    (key, f"{year}-01-01", year),
                )
    finally:
        conn.close()
