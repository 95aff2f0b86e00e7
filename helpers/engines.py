"""The source engines: their wire protocols, identifier quoting and Spark SQL literals (for SQL
built from parameters), and where and as whom a connector logs in (:class:`SourceEndpoint`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourceEndpoint", "engine_kind", "quote_mariadb", "quote_spark", "spark_string"]


def quote_mariadb(name: str) -> str:
    """Quote an identifier (database, table, user or host name) for MariaDB with backticks.

    Args:
        name: the raw name.

    Returns:
        The name in backticks, embedded backticks doubled.

    Raises:
        ValueError: if the name is empty or contains a NUL character.

    Example:
        >>> quote_mariadb("we`ird")
        '`we``ird`'
    """
    if "\x00" in name:
        raise ValueError(f"invalid MariaDB identifier {name!r}")
    return _backticked(name, "MariaDB")


def quote_spark(name: str) -> str:
    """Quote a column or table name for Spark SQL: backticks, embedded backticks doubled.

    Raises:
        ValueError: if the name is empty.

    Example:
        >>> quote_spark("a`b")
        '`a``b`'
    """
    return _backticked(name, "Spark SQL")


def _backticked(name: str, dialect: str) -> str:
    if not name:
        raise ValueError(f"invalid {dialect} identifier {name!r}")
    return "`" + name.replace("`", "``") + "`"


def spark_string(value: str) -> str:
    """A Spark SQL string literal of ``value``: single quotes, with backslashes and quotes escaped
    (Spark's default parser reads backslash escapes in literals): ``it's`` becomes ``'it\\'s'``.
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


_ENGINE_KIND = {"postgres": "postgres", "mariadb": "mysql", "mysql": "mysql", "sqlserver": "sqlserver"}


def engine_kind(engine: str) -> str:
    """The wire protocol of a source engine: ``postgres``, ``mysql`` (also MariaDB) or ``sqlserver``."""
    try:
        return _ENGINE_KIND[engine]
    except KeyError:
        raise ValueError(
            f"unknown source engine {engine!r}; expected one of {sorted(_ENGINE_KIND)}"
        ) from None


@dataclass(frozen=True)
class SourceEndpoint:
    """Where and as whom a connector logs in to a source (``password`` may be a config-provider
    reference that the Connect worker resolves; it is masked in ``repr``)."""

    host: str
    port: int
    user: str
    password: str

    def __repr__(self) -> str:
        return (
            f"SourceEndpoint(host={self.host!r}, port={self.port}, user={self.user!r}, password='********')"
        )
