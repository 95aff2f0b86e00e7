"""Configuration files as the linter reads them: Kafka Connect / MSK Connect JSON and Java
``.properties`` (DeltaStreamer, Connect workers), each setting with the file and line it came from.

:func:`read_config_file` parses one file into :class:`LintConfig` objects (a JSON file holds one
connector; a ``.properties`` file one configuration, with ``include=`` files merged in first, as
DeltaStreamer's ``DFSPropertiesConfiguration`` does). :func:`config_from_mapping` wraps a
configuration that exists only in memory (the workbook's own connectors and Silver options).
:func:`shown_value` is the only way a value leaves this module for display: secrets are masked.
The rules themselves: :mod:`helpers.checks.config_lint`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from helpers.errors import ConfigLintError

__all__ = [
    "ConfigKind",
    "LintConfig",
    "Setting",
    "classify",
    "config_from_mapping",
    "is_secret_key",
    "merged",
    "parse_properties",
    "read_config_file",
    "shown_value",
]

ConfigKind = Literal["debezium", "s3-sink", "hudi", "connect", "other"]

MASK = "********"

#: Words that make a key's value a secret (compared against the lower-cased key).
_SECRET_WORDS = (
    "password", "passwd", "secret", "token", "credential", "jaas", "private", "user.info", "userinfo",
)  # fmt: skip
#: Key endings that name key material (``aws.access.key``, ``ssl.key``), not ``key.converter``.
_SECRET_ENDINGS = (".key", "access.key.id", "apikey", "api.key", "key.id", "keystore.key")
_PROVIDER_REF = re.compile(r"^\$\{[^}]+\}$")  # ${secretsmanager:id:password}: a reference, not a secret
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]+):[^@/\s]+@")


@dataclass(frozen=True)
class Setting:
    """One ``key=value`` and where it was written.

    Attributes:
        key: the option name.
        value: its value (as text; JSON numbers and booleans as Kafka Connect reads them).
        source: the file (or in-memory name) that set it.
        line: 1-based line in ``source``; None for configurations built in memory.
    """

    key: str
    value: str
    source: str
    line: int | None


@dataclass(frozen=True)
class LintConfig:
    """One configuration to lint: a connector, a sink or a DeltaStreamer/Hudi property set.

    Attributes:
        name: what findings call it (file name, plus the connector name when it has one).
        kind: ``debezium`` (a Debezium source), ``s3-sink``, ``hudi`` (DeltaStreamer or Hudi
            writer options), ``connect`` (another Kafka Connect connector) or ``other``.
        settings: the settings by key (the last one wins, as in Kafka Connect and Java).
    """

    name: str
    kind: ConfigKind
    settings: Mapping[str, Setting]

    def get(self, key: str) -> str | None:
        """The value of ``key``, or None when it is not set."""
        setting = self.settings.get(key)
        return None if setting is None else setting.value

    def line(self, key: str) -> int | None:
        """The line that set ``key`` (None when unset or built in memory)."""
        setting = self.settings.get(key)
        return None if setting is None else setting.line

    @property
    def engine(self) -> str:
        """For a Debezium source, the connector package (``postgresql``, ``mysql``, ...); else ``""``."""
        match = re.search(r"io\.debezium\.connector\.(\w+)\.", self.get("connector.class") or "")
        return match.group(1) if match else ""


def is_secret_key(key: str) -> bool:
    """Whether ``key`` names a secret (password, secret, token, key material): its value is masked."""
    low = key.lower()
    return any(word in low for word in _SECRET_WORDS) or low.endswith(_SECRET_ENDINGS) or low == "key"


def shown_value(key: str, value: str | None) -> str:
    """``value`` safe to print: secrets masked (a config-provider reference is kept), and the
    password part of a URL's ``user:password@`` replaced."""
    if value is None:
        return ""
    if is_secret_key(key) and not _PROVIDER_REF.match(value.strip()):
        return MASK
    return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", value)


def classify(settings: Mapping[str, Setting]) -> ConfigKind:
    """The kind of a configuration, from its ``connector.class`` or its ``hoodie.*`` keys."""
    connector = settings["connector.class"].value if "connector.class" in settings else ""
    if connector.startswith("io.debezium.connector.") and not connector.endswith("SinkConnector"):
        return "debezium"  # a source (the JDBC sink is another kind of connector)
    if "s3" in connector.lower() and "sink" in connector.lower():
        return "s3-sink"
    if any(k.startswith("hoodie.") for k in settings):
        return "hudi"
    return "connect" if connector else "other"


def config_from_mapping(
    name: str, config: Mapping[str, str], *, kind: ConfigKind | None = None
) -> LintConfig:
    """A configuration built in memory (no file, no lines), e.g. a ``ConnectorSpec.config``."""
    settings = {k: Setting(k, str(v), name, None) for k, v in config.items()}
    return LintConfig(name, kind or classify(settings), settings)


def merged(name: str, layers: Iterable[LintConfig]) -> LintConfig:
    """Layers merged in order (later ones win), e.g. a DeltaStreamer base file and a table's file."""
    settings: dict[str, Setting] = {}
    for layer in layers:
        settings.update(layer.settings)
    return LintConfig(name, classify(settings), settings)


# --- .properties ---------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, where: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                # the escape's text is not echoed: it may be part of a password
                raise ConfigLintError(
                    f"Failed to parse {where}: a \\u escape needs four hex digits (\\uXXXX)"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(first line number, joined text) per logical line: comments and blank lines skipped, lines
    ending in an odd number of backslashes continued with the next line's text, leading blanks cut."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = []
    if pending:
        yield start, "".join(pending)


def _split_key_value(line: str) -> tuple[str, str]:
    """Java's rule: the key ends at the first unescaped ``=``, ``:`` or blank; one such separator
    (and the blanks around it) is dropped."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str, source: str) -> list[Setting]:
    """The settings of a Java ``.properties`` text, in file order, with their line numbers.

    Args:
        text: the file's text.
        source: the file name shown in findings and errors.

    Returns:
        One :class:`Setting` per ``key=value`` (``key: value`` and ``key value`` too).

    Raises:
        ConfigLintError: on a malformed ``\\uXXXX`` escape, naming the file and line.
    """
    settings = []
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        where = f"{source} line {number}"
        settings.append(Setting(_unescape(raw_key, where), _unescape(raw_value, where), source, number))
    return settings


def _read_properties(path: Path, seen: tuple[Path, ...] = ()) -> list[Setting]:
    if path.resolve() in seen:
        chain = " -> ".join(p.name for p in (*seen, path.resolve()))
        raise ConfigLintError(f"Failed to read {path}: its include= files form a cycle ({chain})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigLintError(f"Failed to read {path}: {exc}") from None
    out: list[Setting] = []
    for setting in parse_properties(text, str(path)):
        if setting.key == "include":  # DeltaStreamer: the included file first, this file on top
            included = Path(setting.value)
            if "://" in setting.value:
                continue  # s3:// or hdfs:// includes cannot be read here
            target = included if included.is_absolute() else path.parent / included.name
            if not target.is_file():
                raise ConfigLintError(
                    f"Failed to read {path} line {setting.line}: include={setting.value} names no file "
                    f"(looked for {target}); lint the included file alongside or fix the path"
                )
            out.extend(_read_properties(target, (*seen, path.resolve())))
            continue
        out.append(setting)
    return out


# --- JSON ----------------------------------------------------------------------------------------


def _scalar(value: Any, key: str, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    if value is None:
        return ""
    raise ConfigLintError(
        f"Failed to parse {where}: the value of {key!r} is a {type(value).__name__}; connector "
        "settings are strings, numbers or booleans"
    )


def _key_lines(text: str, keys: Iterable[str], after: int) -> dict[str, int]:
    """The line of each key's ``"key":`` at or after offset ``after`` (first match)."""
    lines = {}
    for key in keys:
        match = re.compile(re.escape(json.dumps(key)) + r"\s*:").search(text, after)
        if match:
            lines[key] = text.count("\n", 0, match.start()) + 1
    return lines


def _json_configs(path: Path, text: str) -> list[LintConfig]:
    source = str(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigLintError(
            f"Failed to parse {source} line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(doc, dict):
        raise ConfigLintError(
            f"Failed to parse {source} line 1: expected a JSON object, found {type(doc).__name__}"
        )
    name = path.name
    body: Any = doc
    wrapper = ""
    for field, name_field in (("config", "name"), ("connectorConfiguration", "connectorName")):
        if isinstance(doc.get(field), dict):  # Kafka Connect REST / MSK Connect CreateConnector
            body, wrapper = doc[field], field
            if isinstance(doc.get(name_field), str):
                name = f"{path.name} ({doc[name_field]})"
            break
    else:
        if isinstance(doc.get("name"), str):
            name = f"{path.name} ({doc['name']})"
    start = 0
    if wrapper:
        match = re.search(re.escape(json.dumps(wrapper)) + r"\s*:\s*\{", text)
        start = match.end() if match else 0
    lines = _key_lines(text, body, start)
    settings = {}
    for key, value in body.items():
        where = f"{source} line {lines.get(key, 1)}"
        settings[key] = Setting(key, _scalar(value, key, where), source, lines.get(key))
    return [LintConfig(name, classify(settings), settings)]


def read_config_file(path: str | Path) -> list[LintConfig]:
    """The configurations in one file: ``.json`` (a bare settings object, the Kafka Connect REST
    shape ``{"name", "config"}`` or MSK Connect's ``connectorConfiguration``), else Java
    ``.properties`` (with its ``include=`` files merged underneath).

    Raises:
        ConfigLintError: when the file cannot be read or parsed (naming the file and line).
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigLintError(f"Failed to read {path}: {exc}") from None
        return _json_configs(path, text)
    settings = {s.key: s for s in _read_properties(path)}
    return [LintConfig(path.name, classify(settings), settings)]
