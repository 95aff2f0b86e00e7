"""A small typed client of a schema registry's Confluent-compatible API (Apicurio's ``/apis/ccompat/v7``).

Only what the workbook needs: register an Avro schema under a subject, read a schema by its id
(the id a Confluent-wire-format message carries), read a subject's latest version, check and set
compatibility. Errors carry the registry's own ``error_code`` and message.

Example:
    >>> client = SchemaRegistryClient(LocalRegistry(params).ccompat_url)   # doctest: +SKIP
    >>> schema_id = client.register("tickit.ems.venue-value", {"type": "record", ...})  # doctest: +SKIP
    >>> client.schema_by_id(schema_id)["name"]                              # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import requests

from helpers.errors import SchemaRegistryError

__all__ = [
    "COMPATIBILITY_LEVELS",
    "NOT_FOUND_CODES",
    "Compatibility",
    "RegisteredSchema",
    "SchemaRegistryClient",
    "avro_text",
]

Compatibility = Literal[
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"
]
COMPATIBILITY_LEVELS: tuple[str, ...] = Compatibility.__args__  # type: ignore[attr-defined]
#: Confluent error codes for a missing subject (40401), version (40402) or schema (40403).
NOT_FOUND_CODES = (40401, 40402, 40403)
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class RegisteredSchema:
    """One version of a subject: its id (what messages carry), version number and schema."""

    subject: str
    version: int
    schema_id: int
    schema: dict[str, Any] | list[Any] | str

    @property
    def text(self) -> str:
        """The schema as JSON text."""
        return avro_text(self.schema)


def avro_text(schema: dict[str, Any] | list[Any] | str) -> str:
    """An Avro schema as compact JSON text (a string is taken to be JSON text already)."""
    return schema if isinstance(schema, str) else json.dumps(schema, separators=(",", ":"))


class SchemaRegistryClient:
    """Calls to a Confluent-compatible schema registry API.

    Args:
        base_url: the API's root, e.g. ``http://127.0.0.1:18081/apis/ccompat/v7``.
        timeout_s: per request.
    """

    def __init__(self, base_url: str, *, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = requests.Session()
        self._session.headers.update({"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE})

    def __repr__(self) -> str:
        return f"SchemaRegistryClient({self.base_url!r})"

    def _call(self, method: str, path: str, what: str, body: dict[str, Any] | None = None) -> Any:
        url = f"{self.base_url}{path}"
        try:
            answer = self._session.request(method, url, json=body, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise SchemaRegistryError(
                f"Failed to {what}: the schema registry at {self.base_url} is not reachable ({exc}); "
                "start it (./workbook stack start --env local-kafka)"
            ) from None
        if answer.status_code >= 400:
            code, message = answer.status_code, answer.text.strip()[:300]
            try:
                payload = answer.json()
                code = int(payload.get("error_code", code))
                message = str(payload.get("message", message))
            except (ValueError, AttributeError, TypeError):
                pass
            raise SchemaRegistryError(
                f"Failed to {what}: the schema registry at {self.base_url} answered HTTP "
                f"{answer.status_code}, error {code}: {message}"
            )
        return answer.json() if answer.content else None

    @staticmethod
    def _subject(subject: str) -> str:
        return quote(subject, safe="")

    def register(self, subject: str, schema: dict[str, Any] | list[Any] | str) -> int:
        """Register an Avro schema under ``subject`` (idempotent: the same schema keeps its id).

        Returns:
            The schema's id.

        Raises:
            SchemaRegistryError: e.g. when it is incompatible with the subject's earlier versions.
        """
        body = {"schema": avro_text(schema), "schemaType": "AVRO"}
        answer = self._call(
            "POST",
            f"/subjects/{self._subject(subject)}/versions",
            f"register a schema under {subject!r}",
            body,
        )
        return int(answer["id"])

    def schema_by_id(self, schema_id: int) -> dict[str, Any] | list[Any] | str:
        """The Avro schema with id ``schema_id``, parsed from JSON.

        Raises:
            SchemaRegistryError: when the registry knows no such id (error 40403).
        """
        answer = self._call("GET", f"/schemas/ids/{int(schema_id)}", f"read schema id {schema_id}")
        parsed: dict[str, Any] | list[Any] | str = json.loads(answer["schema"])
        return parsed

    def latest(self, subject: str) -> RegisteredSchema:
        """The newest version of ``subject``.

        Raises:
            SchemaRegistryError: when the subject does not exist (error 40401).
        """
        answer = self._call(
            "GET",
            f"/subjects/{self._subject(subject)}/versions/latest",
            f"read the latest schema of {subject!r}",
        )
        return RegisteredSchema(
            subject=str(answer["subject"]),
            version=int(answer["version"]),
            schema_id=int(answer["id"]),
            schema=json.loads(answer["schema"]),
        )

    def versions(self, subject: str) -> list[int]:
        """The version numbers of ``subject``, oldest first."""
        answer = self._call(
            "GET", f"/subjects/{self._subject(subject)}/versions", f"list the versions of {subject!r}"
        )
        return [int(v) for v in answer]

    def subjects(self) -> list[str]:
        """Every subject the registry holds."""
        return [str(s) for s in self._call("GET", "/subjects", "list the subjects")]

    def is_compatible(self, subject: str, schema: dict[str, Any] | list[Any] | str) -> bool:
        """Whether ``schema`` may become the next version of ``subject`` under its compatibility rule."""
        body = {"schema": avro_text(schema), "schemaType": "AVRO"}
        answer = self._call(
            "POST",
            f"/compatibility/subjects/{self._subject(subject)}/versions/latest",
            f"check a schema's compatibility with {subject!r}",
            body,
        )
        return bool(answer["is_compatible"])

    def set_compatibility(self, subject: str, level: Compatibility) -> None:
        """Set the compatibility rule of ``subject`` (e.g. ``BACKWARD``)."""
        if level not in COMPATIBILITY_LEVELS:
            raise SchemaRegistryError(
                f"Failed to set the compatibility of {subject!r}: unknown level {level!r}; use one of "
                f"{', '.join(COMPATIBILITY_LEVELS)}"
            )
        self._call(
            "PUT",
            f"/config/{self._subject(subject)}",
            f"set the compatibility of {subject!r}",
            {"compatibility": level},
        )
