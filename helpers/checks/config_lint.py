"""A linter for Debezium, Kafka Connect / MSK Connect and Hudi DeltaStreamer configurations.

It reads the configurations a user brings from an existing stack (JSON or ``.properties``, see
:mod:`helpers.checks.config_files`) or the workbook's own (:func:`workbook_configs`), and reports
each risky setting as a :class:`Finding`: the rule, the file and line, the value (secrets masked),
what goes wrong and the fix. Some rules look at one configuration (lossy decimals, wall-clock
rotation, a malformed registry URL, Debezium 1.x/2.x option names that 3.x no longer reads, a
PostgreSQL connector without a heartbeat); the others look at the whole set linted together, as
one pipeline (a soft-delete flattening feeding a Silver table that upserts the deleted rows,
deletes dropped on the way to a Silver table that expects them, partition and sync fields that
disagree once a DeltaStreamer base file and a table's file are merged). HoodieStreamer 0.14.0's
traps are rules too: bytes decimals in the schema it writes with, its Spark-Avro post-processor on
a bytes-decimal source, the registry provider without its converter key. ``docs/config-lint.md``
lists the rules. The module is one cohesive piece: the rule table, the option tables and the rules
share how a flattening SMT handles deletes and how a Silver config marks them.

Example::

    findings = lint_files(["mysql-connector.json", "sink.json", "base.properties", "sale.properties"])
    findings_frame(findings)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pandas as pd

from helpers.capture.connectors import ConnectorSpec, bronze_s3_sink_config
from helpers.capture.register import connector_specs
from helpers.checks.config_files import (
    LintConfig,
    config_from_mapping,
    merged,
    read_config_file,
    shown_value,
)
from helpers.engines import SourceEndpoint
from helpers.errors import CheckError
from helpers.lake_store import is_s3, lake_uri
from helpers.params import WorkbookParams
from helpers.silver.tables import silver_write_options

__all__ = [
    "DELETE_MODE_KEY",
    "FINDING_COLUMNS",
    "LEGACY_OPTIONS",
    "RULES",
    "Finding",
    "LegacyOption",
    "Rule",
    "findings_frame",
    "has_errors",
    "require_no_errors",
    "lint_configs",
    "lint_files",
    "lint_workbook",
    "workbook_configs",
]

Severity = Literal["error", "warning"]

#: Pseudo key on the workbook's own Silver options: its ``delete_mode`` (``hard`` or ``soft``).
#: The workbook's writer reads ``__deleted`` itself (``helpers.silver.prepare``).
DELETE_MODE_KEY = "workbook.silver.delete_mode"

_FLATTEN_SMT = "io.debezium.transforms.ExtractNewRecordState"
_HOODIE_PREFIXES = ("hoodie.deltastreamer.", "hoodie.streamer.")


@dataclass(frozen=True)
class Rule:
    """A lint rule: its id, severity, what goes wrong and the fix (``docs/config-lint.md``)."""

    rule_id: str
    severity: Severity
    title: str
    problem: str
    fix: str


RULES: Mapping[str, Rule] = {
    r.rule_id: r
    for r in (
        Rule(
            "decimal-double", "error", "lossy decimal handling",
            "decimal.handling.mode=double turns DECIMAL/NUMERIC columns into binary floating point: "
            "money loses cents and large values lose digits, silently, in Bronze and Silver",
            "decimal.handling.mode=precise (exact decimals in Avro/JSON with schemas), or string",
        ),
        Rule(
            "s3-wallclock-rotation", "error", "wall-clock rotation in the S3 sink",
            "rotate.schedule.interval.ms closes files by the worker's clock, so a task restarted after a "
            "crash cuts its files at other offsets than before: objects are written twice with different "
            "contents and the sink is no longer exactly-once",
            "remove rotate.schedule.interval.ms; rotate with rotate.interval.ms on record time "
            "(timestamp.extractor=Record or RecordField) plus flush.size",
        ),
        Rule(
            "s3-wallclock-partitioning", "error", "wall-clock partitioning in the S3 sink",
            "a time-based partitioner with timestamp.extractor=Wallclock (Confluent's default) files a "
            "record under the hour it was processed, not when it changed: a replay after a restart puts "
            "the same records into other partitions (duplicates); rotate.interval.ms follows the wall "
            "clock too",
            "timestamp.extractor=Record (the Kafka record time, the change's commit time with Debezium) or "
            "RecordField with timestamp.field=__source_ts_ms",
        ),
        Rule(
            "registry-url", "error", "malformed schema registry URL",
            "the converter or DeltaStreamer cannot reach the registry (a doubled or missing scheme, blanks, "
            "no host): the connector fails on its first record, or the DeltaStreamer job on start",
            "one scheme and a host: http(s)://host:port/path (Apicurio: .../apis/registry/v2 or v3; "
            "DeltaStreamer: .../subjects/<topic>-value/versions/latest)",
        ),
        Rule(
            "legacy-option", "error", "option name of an older Debezium version",
            "Debezium 3.x does not read this Debezium 1.x/2.x name (Kafka Connect passes it along without a "
            "word): the setting silently has no effect, or a required 3.x option is missing",
            "use the 3.x name shown (the replacement column)",
        ),
        Rule(
            "postgres-heartbeat", "warning", "PostgreSQL connector without a heartbeat",
            "with no heartbeat the connector confirms its replication slot's position only when a captured "
            "table changes: while they are quiet and the rest of the server writes, the slot pins WAL, and "
            "the disk (RDS storage) fills up",
            "heartbeat.interval.ms=10000, plus heartbeat.action.query writing a table of the publication: "
            "heartbeats alone do not move the slot",
        ),
        Rule(
            "soft-delete-upserted", "error", "soft-delete flattening into a Silver table that upserts it",
            "the flattening SMT rewrites each delete into the old row plus __deleted=true, and this Silver "
            "config upserts it like any other row: deleted rows stay live in Silver and in every query",
            "hoodie.payload.delete.field=__deleted and hoodie.payload.delete.marker=true with "
            "DefaultHoodieRecordPayload (or a transformer setting _hoodie_is_deleted), or keep soft deletes "
            "on purpose and filter __deleted in every reader",
        ),
        Rule(
            "deletes-dropped", "error", "tombstones or deletes dropped where hard deletes are expected",
            "the delete never reaches the Silver table that should remove the row: the SMT drops delete "
            "events, or turns them into null-value tombstones that the S3 sink ignores; Silver keeps the "
            "deleted rows forever",
            "transforms.<alias>.delete.tombstone.handling.mode=rewrite with tombstones.on.delete=false, and "
            "a Silver config that applies __deleted (hoodie.payload.delete.field=__deleted)",
        ),
        Rule(
            "partition-sync-mismatch", "error", "partition and sync fields disagree",
            "Hudi writes the partition path from hoodie.datasource.write.partitionpath.field but Hive/Glue "
            "sync registers the table with other partition columns: queries find no rows, wrong values or "
            "the sync fails",
            "set hoodie.datasource.hive_sync.partition_fields to the same fields, in the same order (and "
            "MultiPartKeysValueExtractor; NonPartitionedExtractor only for unpartitioned tables)",
        ),
        Rule(
            "streamer-registry-converter", "error", "0.14.0 registry provider without a converter key",
            "0.14.0's SchemaRegistryProvider reads hoodie.streamer.schemaprovider.registry.schemaconverter "
            "without a default: the streamer stops on start with \"Property ... schemaconverter not found\"",
            "hoodie.streamer.schemaprovider.registry.schemaconverter= (empty) next to the registry URL",
        ),
        Rule(
            "streamer-kafka-deserializer", "warning", "Confluent's Avro deserializer on a Kafka source",
            "Hudi's Kafka sources (the Debezium ones too) deserialize with Confluent's KafkaAvroDeserializer "
            "unless told otherwise; Maven Central does not serve it (io.confluent), so outside Confluent's "
            "platform the streamer fails with ClassNotFoundException",
            "hoodie.deltastreamer.source.kafka.value.deserializer.class="
            "io.apicurio.registry.serde.avro.AvroKafkaDeserializer with apicurio.registry.url, "
            "apicurio.registry.as-confluent=true and apicurio.registry.use-id=contentId (the workbook's "
            "converter settings; jar set registry), as silver.streamer.source: kafka writes it",
        ),
        Rule(
            "streamer-bytes-decimal", "error", "bytes decimal in the streamer's target schema",
            "a decimal declared as Avro bytes in the schema HoodieStreamer writes with (the target schema, "
            "or the source schema when no target is given): 0.14.0 stores it as Parquet BINARY, readers fail "
            "with \"Parquet column cannot be converted ... Expected: decimal, Found: BINARY\"; from JSON "
            "sources the bytes are the number's text (10.5 becomes 8252411.41), silently",
            "declare decimals as fixed in the target schema (Hudi's own conversion of the rows, as "
            "helpers.silver.streamer writes it); from JSON read them as string and CAST them in the "
            "transformer SQL",
        ),
        Rule(
            "streamer-avro-post-processor", "error", "Spark-Avro post-processor on a bytes-decimal source",
            "0.14.0 turns the source schema's bytes decimals into fixed (SparkAvroPostProcessor, on by "
            "default) and then cannot read the Avro files that hold bytes: \"AvroTypeException: Found "
            "bytes, expecting union\"",
            "hoodie.streamer.schemaprovider.spark_avro_post_processor.enable=false",
        ),
    )
}  # fmt: skip


@dataclass(frozen=True)
class LegacyOption:
    """A Debezium 1.x/2.x option name and what 3.x reads instead.

    Attributes:
        old: the old name (a prefix when it ends with ``.``).
        new: the 3.x replacement.
        effect: what happens under 3.x when only the old name is set.
        engines: connector packages it applies to (empty: all).
        severity: ``error`` when 3.x ignores or rejects it, ``warning`` when it is only deprecated.
    """

    old: str
    new: str
    effect: str
    engines: tuple[str, ...] = ()
    severity: Severity = "error"


_IGNORED_FILTER = "the filter is not read, so the connector captures every table it can see"
_IGNORED_EXCLUDE = "the exclusion is not read, so the excluded objects are captured too"
_HISTORY = (
    "the schema history is not configured where you think: the MySQL/SQL Server connector fails "
    "validation or keeps its history in the default place"
)

#: Debezium 1.x/2.x option names 3.x no longer reads (checked against the 3.6.3 connector jars).
LEGACY_OPTIONS: tuple[LegacyOption, ...] = (
    LegacyOption("database.server.name", "topic.prefix",
                 "3.x requires topic.prefix: without it the connector is rejected; with it, this is ignored"),
    LegacyOption("table.whitelist", "table.include.list", _IGNORED_FILTER),
    LegacyOption("table.blacklist", "table.exclude.list", _IGNORED_EXCLUDE),
    LegacyOption("database.whitelist", "database.include.list", _IGNORED_FILTER),
    LegacyOption("database.blacklist", "database.exclude.list", _IGNORED_EXCLUDE),
    LegacyOption("schema.whitelist", "schema.include.list", _IGNORED_FILTER),
    LegacyOption("schema.blacklist", "schema.exclude.list", _IGNORED_EXCLUDE),
    LegacyOption("column.whitelist", "column.include.list", "every column is captured, sensitive ones too"),
    LegacyOption("column.blacklist", "column.exclude.list", "excluded (sensitive) columns are captured"),
    LegacyOption("database.history", "schema.history.internal", _HISTORY),
    LegacyOption("database.history.", "schema.history.internal.", _HISTORY),
    LegacyOption("database.dbname", "database.names",
                 "the SQL Server connector captures no database (3.x reads database.names)", ("sqlserver",)),
    LegacyOption("sanitize.field.names",
                 "field.name.adjustment.mode=avro and schema.name.adjustment.mode=avro",
                 "names are no longer adjusted: Avro converters reject fields with characters Avro forbids",
                 severity="warning"),
    LegacyOption("event.deserialization.failure.handling.mode", "event.processing.failure.handling.mode",
                 "deprecated: 3.6 still reads it with a warning, a later release will not",
                 ("mysql", "mariadb"), "warning"),
)  # fmt: skip

#: Values 3.x no longer accepts: (key, old value, whole value or prefix) -> (replacement, what
#: happens, engines).
_LEGACY_VALUES: Mapping[tuple[str, str, bool], tuple[str, str, tuple[str, ...]]] = {
    ("snapshot.mode", "schema_only", False): ("no_data", "3.x rejects the value", ()),
    ("snapshot.mode", "schema_only_recovery", False): ("recovery", "3.x rejects the value", ()),
    ("plugin.name", "wal2json", True): (
        "pgoutput",
        "3.x knows only pgoutput and decoderbufs: the connector does not start",
        ("postgresql",),
    ),
}


@dataclass(frozen=True)
class Finding:
    """One risky setting.

    Attributes:
        rule: rule id (:data:`RULES`).
        severity: ``error`` or ``warning``.
        config: the configuration (file, and connector name when it has one).
        key: the setting at fault (for a missing setting: the one to add).
        line: its line in ``source`` (None when missing or built in memory).
        value: its value, secrets masked (empty when missing).
        problem: what goes wrong.
        fix: how to fix it.
        source: the file that set the key (an included base file, say); else ``config``.
    """

    rule: str
    severity: Severity
    config: str
    key: str
    line: int | None
    value: str
    problem: str
    fix: str
    source: str = ""


def _finding(
    rule_id: str,
    config: LintConfig,
    key: str,
    *,
    problem: str = "",
    fix: str = "",
    severity: Severity | None = None,
) -> Finding:
    rule = RULES[rule_id]
    setting = config.settings.get(key)
    return Finding(
        rule=rule_id,
        severity=severity or rule.severity,
        config=config.name,
        key=key,
        line=setting.line if setting else None,
        value=shown_value(key, setting.value if setting else None),
        problem=problem or rule.problem,
        fix=fix or rule.fix,
        source=setting.source if setting else config.name,
    )


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def _fields(value: str | None) -> list[str]:
    """A comma list of fields, each without a CustomKeyGenerator ``:TYPE`` suffix."""
    return [f.split(":", 1)[0].strip() for f in (value or "").split(",") if f.strip()]


def _hoodie(config: LintConfig, suffix: str) -> tuple[str, str | None]:
    """The key and value of a DeltaStreamer option under its old or new prefix."""
    for prefix in _HOODIE_PREFIXES:
        if (value := config.get(prefix + suffix)) is not None:
            return prefix + suffix, value
    return _HOODIE_PREFIXES[0] + suffix, None


# --- the flattening SMT --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Flattening:
    """An ``ExtractNewRecordState`` of a configuration and how it handles deletes."""

    config: LintConfig
    alias: str
    mode: str  # as 3.x names it: drop, tombstone, rewrite, rewrite-with-tombstone, delete-to-tombstone
    key: str  # the setting that decided it (the type key when nothing did)


def _flattenings(config: LintConfig) -> list[_Flattening]:
    """The ``ExtractNewRecordState`` transforms, with the delete handling they were written for:
    the 3.x key when set, else what the 1.x/2.x keys meant, else the 3.x default (``tombstone``)."""
    out = []
    for alias in [a.strip() for a in (config.get("transforms") or "").split(",") if a.strip()]:
        base = f"transforms.{alias}."
        if config.get(base + "type") != _FLATTEN_SMT:
            continue
        new_key = base + "delete.tombstone.handling.mode"
        old_mode, old_drop = config.get(base + "delete.handling.mode"), config.get(base + "drop.tombstones")
        if (value := config.get(new_key)) is not None:
            out.append(_Flattening(config, alias, value.strip().lower(), new_key))
        elif old_mode is not None or old_drop is not None:
            out.append(
                _Flattening(
                    config,
                    alias,
                    _legacy_delete_mode(old_mode, old_drop),
                    base + ("delete.handling.mode" if old_mode is not None else "drop.tombstones"),
                )
            )
        else:
            out.append(_Flattening(config, alias, "tombstone", base + "type"))
    return out


def _legacy_delete_mode(old_mode: str | None, old_drop: str | None) -> str:
    """The 3.x ``delete.tombstone.handling.mode`` equal to 1.x/2.x ``delete.handling.mode`` (default
    ``drop``) with ``drop.tombstones`` (default ``true``)."""
    mode = (old_mode or "drop").strip().lower()
    keep_tombstones = (old_drop or "true").strip().lower() == "false"
    if mode == "rewrite":
        return "rewrite-with-tombstone" if keep_tombstones else "rewrite"
    if mode == "none":  # a null-value record per delete: what consumers see as a tombstone
        return "tombstone"
    return "tombstone" if keep_tombstones else "drop"


# --- rules on one configuration ------------------------------------------------------------------


def _legacy_findings(config: LintConfig) -> list[Finding]:
    out = []
    engine = config.engine
    for key in config.settings:
        for option in LEGACY_OPTIONS:
            prefix = option.old.endswith(".")
            if not (key.startswith(option.old) if prefix else key == option.old):
                continue
            if option.engines and engine not in option.engines:
                continue
            new = option.new + key[len(option.old) :] if prefix else option.new
            out.append(
                _finding(
                    "legacy-option",
                    config,
                    key,
                    severity=option.severity,
                    problem=f"Debezium 3.x reads {new}, not {key}: {option.effect}",
                    fix=f"rename {key} to {new}",
                )
            )
            break
    for (key, old, prefix), (new, effect, engines) in _LEGACY_VALUES.items():
        value = (config.get(key) or "").strip().lower()
        matches = value.startswith(old) if prefix else value == old
        if matches and (not engines or engine in engines):
            out.append(
                _finding(
                    "legacy-option",
                    config,
                    key,
                    problem=f"{key}={value} is a Debezium 1.x/2.x value: {effect}",
                    fix=f"{key}={new}",
                )
            )
    return out


def _smt_legacy_findings(config: LintConfig) -> list[Finding]:
    out = []
    for flat in _flattenings(config):
        base = f"transforms.{flat.alias}."
        for old in ("delete.handling.mode", "drop.tombstones"):
            if config.get(base + old) is None:
                continue
            new_key = base + "delete.tombstone.handling.mode"
            shadowed = config.get(new_key) is not None
            out.append(
                _finding(
                    "legacy-option",
                    config,
                    base + old,
                    severity="warning" if shadowed else "error",
                    problem=(
                        f"ExtractNewRecordState in Debezium 3.x reads only delete.tombstone.handling.mode; "
                        f"{base + old} is ignored"
                        + (
                            ""
                            if shadowed
                            else ": 3.x uses its default 'tombstone', so each delete reaches "
                            "consumers as a null-value tombstone, without __deleted"
                        )
                    ),
                    fix=f"{new_key}={flat.mode}"
                    + ("" if not shadowed else f" (already set); remove {base + old}"),
                )
            )
    return out


def _registry_url_problem(url: str) -> tuple[str, Severity] | None:
    if url.startswith("${"):
        return None  # a config-provider reference, resolved by the worker
    if not url:
        return "the URL is empty", "error"
    if re.search(r"\s", url):
        return "the URL contains blanks", "error"
    schemes = re.findall(r"[A-Za-z][A-Za-z0-9+.-]*:/{1,2}", url)
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        return "the URL has no scheme (http:// or https://)", "error"
    if len(schemes) > 1 or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://(https?)(:|/)", url, re.I):
        return "the scheme is written twice", "error"
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        return f"the scheme {parts.scheme!r} is not http or https", "error"
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return "the port is not a number", "error"
    if not parts.hostname:
        return "the URL has no host", "error"
    return None


def _registry_findings(config: LintConfig) -> list[Finding]:
    out = []
    for key, setting in config.settings.items():
        low = key.lower()
        if not low.endswith(("registry.url", "registry.targeturl", "registry.baseurl")):
            continue
        for url in [u.strip() for u in setting.value.split(",")] or [""]:
            problem = _registry_url_problem(url)
            if problem:
                out.append(
                    _finding(
                        "registry-url",
                        config,
                        key,
                        severity=problem[1],
                        problem=f"{problem[0]}: {RULES['registry-url'].problem}",
                    )
                )
                break
    return out


def _single_findings(config: LintConfig) -> list[Finding]:
    out = _registry_findings(config) + _smt_legacy_findings(config)
    if config.kind == "debezium":
        out += _legacy_findings(config)
        if (config.get("decimal.handling.mode") or "").strip().lower() == "double":
            out.append(_finding("decimal-double", config, "decimal.handling.mode"))
        if config.engine == "postgresql":
            interval = (config.get("heartbeat.interval.ms") or "0").strip()
            if not interval.isdigit() or int(interval) <= 0:
                out.append(_finding("postgres-heartbeat", config, "heartbeat.interval.ms"))
    if config.kind == "s3-sink":
        schedule = (config.get("rotate.schedule.interval.ms") or "").strip()
        if schedule and schedule != "-1" and schedule != "0":
            out.append(_finding("s3-wallclock-rotation", config, "rotate.schedule.interval.ms"))
        partitioner = config.get("partitioner.class") or ""
        extractor = (config.get("timestamp.extractor") or "Wallclock").strip()
        if (
            re.search(r"(TimeBased|Daily|Hourly)Partitioner", partitioner)
            and extractor.lower() == "wallclock"
        ):
            out.append(_finding("s3-wallclock-partitioning", config, "timestamp.extractor"))
    if config.kind == "hudi":
        out += _partition_sync_findings(config) + _streamer_findings(config)
    return out


def _schema_file(config: LintConfig, suffix: str) -> tuple[str, dict[str, Any] | None]:
    """A DeltaStreamer schema file's key and its schema, when the value is an absolute local path
    that can be read (a file on S3 or a relative path is not checked)."""
    key, value = _hoodie(config, suffix)
    path = (value or "").strip().removeprefix("file://")
    if not path.startswith("/"):
        return key, None
    try:
        schema = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return key, None
    return key, schema if isinstance(schema, dict) else None


def _bytes_decimals(schema: Any) -> list[str]:
    """Paths of the fields whose type is a decimal on Avro ``bytes`` (nested records too)."""
    out: list[str] = []

    def visit(node: Any, path: str) -> None:
        if isinstance(node, list):
            for branch in node:
                visit(branch, path)
        elif isinstance(node, dict):
            if node.get("type") == "bytes" and node.get("logicalType") == "decimal":
                out.append(path)
            elif node.get("type") == "record":
                for field in node.get("fields", []):
                    visit(field.get("type"), f"{path}.{field.get('name')}".lstrip("."))
            elif isinstance(node.get("type"), (dict, list)):
                visit(node["type"], path)

    visit(schema, "")
    return out


def _streamer_findings(config: LintConfig) -> list[Finding]:
    """HoodieStreamer 0.14.0's traps (measured in this project: ``docs/streamer.md``)."""
    out = []
    _, url = _hoodie(config, "schemaprovider.registry.url")
    converter_key, converter = _hoodie(config, "schemaprovider.registry.schemaconverter")
    if url and converter is None:
        out.append(_finding("streamer-registry-converter", config, converter_key))
    _, topic = _hoodie(config, "source.kafka.topic")
    deserializer_key, deserializer = _hoodie(config, "source.kafka.value.deserializer.class")
    if topic and url and (deserializer is None or deserializer.strip().startswith("io.confluent.")):
        out.append(_finding("streamer-kafka-deserializer", config, deserializer_key))
    source_key, source = _schema_file(config, "schemaprovider.source.schema.file")
    target_key, target = _schema_file(config, "schemaprovider.target.schema.file")
    has_target = _hoodie(config, "schemaprovider.target.schema.file")[1] is not None
    written, written_key = (target, target_key) if has_target else (source, source_key)
    if written is not None and (fields := _bytes_decimals(written)):
        problem = f"{', '.join(fields)}: {RULES['streamer-bytes-decimal'].problem}"
        out.append(_finding("streamer-bytes-decimal", config, written_key, problem=problem))
    processor_key, processor = _hoodie(config, "schemaprovider.spark_avro_post_processor.enable")
    if source is not None and _bytes_decimals(source) and (processor or "true").strip().lower() != "false":
        out.append(_finding("streamer-avro-post-processor", config, processor_key))
    return out


def _partition_sync_findings(config: LintConfig) -> list[Finding]:
    write_key, sync_key = (
        "hoodie.datasource.write.partitionpath.field",
        "hoodie.datasource.hive_sync.partition_fields",
    )
    extractor_key = "hoodie.datasource.hive_sync.partition_extractor_class"
    sync_on = _true(config.get("hoodie.datasource.hive_sync.enable")) or _true(
        config.get("hoodie.datasource.meta.sync.enable")
    )
    if not sync_on and config.get(sync_key) is None:
        return []
    written, synced = _fields(config.get(write_key)), _fields(config.get(sync_key))
    out = []
    if written != synced:
        out.append(
            _finding(
                "partition-sync-mismatch",
                config,
                sync_key,
                problem=f"Hudi partitions by {written or 'nothing'} but the sync registers {synced or 'no'} "
                f"partition columns: {RULES['partition-sync-mismatch'].problem}",
                fix=f"{sync_key}={','.join(written)}",
            )
        )
    extractor = config.get(extractor_key) or ""
    if written and extractor.endswith("NonPartitionedExtractor"):
        out.append(
            _finding(
                "partition-sync-mismatch",
                config,
                extractor_key,
                problem="a partitioned table synced with NonPartitionedExtractor: the catalog sees no "
                "partitions",
                fix=f"{extractor_key}=org.apache.hudi.hive.MultiPartKeysValueExtractor",
            )
        )
    return out


# --- rules on the set ----------------------------------------------------------------------------


def _delete_marker(config: LintConfig) -> bool:
    """Whether a Hudi config turns ``__deleted`` (or ``_hoodie_is_deleted``) into a delete."""
    if config.get(DELETE_MODE_KEY) is not None:
        return True  # the workbook's writer applies __deleted itself (hard) or keeps it on purpose (soft)
    payload = config.get("hoodie.datasource.write.payload.class") or config.get(
        "hoodie.compaction.payload.class"
    )
    field = config.get("hoodie.payload.delete.field")
    if field and not (payload or "").endswith("OverwriteWithLatestAvroPayload"):
        return True
    sql = " ".join(s.value for k, s in config.settings.items() if k.endswith("transformer.sql"))
    source = _hoodie(config, "source.class")[1] or ""
    return "_hoodie_is_deleted" in sql or "DebeziumSource" in source


def _expects_hard_deletes(config: LintConfig) -> bool:
    return (config.get(DELETE_MODE_KEY) or "hard") == "hard"


def _cross_findings(configs: Sequence[LintConfig]) -> list[Finding]:
    flattenings = [
        f for c in configs if c.kind in ("debezium", "s3-sink", "connect") for f in _flattenings(c)
    ]
    hudi = [c for c in configs if c.kind == "hudi"]
    sinks = [c for c in configs if c.kind == "s3-sink"]
    out: list[Finding] = []
    soft = [f for f in flattenings if f.mode.startswith("rewrite")]
    for table in hudi:
        if soft and not _delete_marker(table):
            names = ", ".join(sorted({f.config.name for f in soft}))
            key = "hoodie.payload.delete.field"
            out.append(
                _finding(
                    "soft-delete-upserted",
                    table,
                    key,
                    problem=f"{names} rewrite each delete into the old row plus __deleted=true, "
                    "and this Silver config has no delete marker, so it upserts that row: deleted "
                    "rows stay live in Silver and in every query",
                )
            )
    if not any(_expects_hard_deletes(t) for t in hudi):
        return out
    expecting = ", ".join(t.name for t in hudi if _expects_hard_deletes(t))
    for flat in flattenings:
        if flat.mode == "drop":
            out.append(
                _finding(
                    "deletes-dropped",
                    flat.config,
                    flat.key,
                    problem=f"the {flat.alias} SMT drops delete events (mode drop), so {expecting} "
                    "never learn of a delete and keep the deleted rows",
                )
            )
        elif flat.mode in ("tombstone", "delete-to-tombstone"):
            for sink in sinks:
                if (sink.get("behavior.on.null.values") or "").strip().lower() == "ignore":
                    out.append(
                        _finding(
                            "deletes-dropped",
                            sink,
                            "behavior.on.null.values",
                            problem=f"{flat.config.name} sends each delete only as a null-value "
                            f"tombstone (mode {flat.mode}) and this sink ignores null values: "
                            f"{expecting} never see the delete",
                        )
                    )
    return out


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        ident = (f.rule, f.config, f.key, f.problem)
        if ident not in seen:
            seen.add(ident)
            out.append(f)
    return out


def lint_configs(configs: Sequence[LintConfig]) -> list[Finding]:
    """Every finding of ``configs``, linted together as one pipeline.

    Args:
        configs: connectors, sinks and Hudi/DeltaStreamer configurations (DeltaStreamer layers
            already merged: :func:`lint_files` does that).

    Returns:
        The findings, errors first, in configuration order.
    """
    findings = [f for c in configs for f in _single_findings(c)] + _cross_findings(configs)
    return sorted(_dedupe(findings), key=lambda f: f.severity != "error")


def _layered(configs: Sequence[tuple[Path, LintConfig]]) -> list[LintConfig]:
    """Multi-table DeltaStreamer: a base file naming a table's file in
    ``hoodie.deltastreamer.ingestion.<db>.<table>.configFile`` lies under that file when both are
    linted; the base alone is then not linted separately."""
    bases: dict[str, LintConfig] = {}
    for _path, config in configs:
        for key, setting in config.settings.items():
            if re.fullmatch(r"hoodie\.(deltastreamer|streamer)\.ingestion\..+\.configfile", key.lower()):
                bases[Path(setting.value.rstrip("/")).name] = config
    used: set[str] = set()
    out = []
    for path, config in configs:
        base = bases.get(path.name)
        if base is not None and base is not config:
            used.add(base.name)
            out.append(merged(config.name, (base, config)))
        else:
            out.append(config)
    return [c for c in out if c.name not in used]


def lint_files(paths: Iterable[str | Path]) -> list[Finding]:
    """Read and lint configuration files together (JSON connectors, ``.properties`` files).

    Raises:
        ConfigLintError: when a file cannot be read or parsed (the message names file and line).
    """
    read = [(Path(p), c) for p in paths for c in read_config_file(p)]
    return lint_configs(_layered(read))


# --- the workbook's own configurations -----------------------------------------------------------

#: Endpoints for linting the connector shape only (no server is reached, no password read).
_LINT_ENDPOINTS = {
    "postgres": SourceEndpoint("postgres.source", 5432, "cdc", "${env:POSTGRES_PASSWORD}"),
    "mysql": SourceEndpoint("mysql.source", 3306, "cdc", "${env:MYSQL_PASSWORD}"),
    "sqlserver": SourceEndpoint("sqlserver.source", 1433, "cdc", "${env:SQLSERVER_PASSWORD}"),
}


def workbook_configs(
    params: WorkbookParams, specs: Sequence[ConnectorSpec] | None = None
) -> list[LintConfig]:
    """The workbook's own configurations: one per connector, the Bronze S3 sink when Bronze is on
    S3, and one per Silver table (its Hudi write options plus :data:`DELETE_MODE_KEY`).

    Args:
        params: the workbook parameters.
        specs: the connectors as registered (notebook 02); default: built from ``params`` with
            placeholder endpoints (the rules look at the configuration's shape, not at servers).
    """
    specs = list(specs) if specs is not None else connector_specs(params, _LINT_ENDPOINTS)
    configs = [config_from_mapping(s.name, s.config) for s in specs]
    bronze = lake_uri(params, params.lake.bronze)
    if is_s3(bronze):
        bucket, _, prefix = bronze.split("://", 1)[1].partition("/")
        sink = bronze_s3_sink_config(
            name=f"{params.project}-bronze-sink",
            topics=[t for s in specs for t in s.topics.values()],
            bucket=bucket,
            prefix=prefix,
            region=params.aws.region if params.aws else "us-east-1",
        )
        configs.append(config_from_mapping(sink["name"], sink))
    for table in params.silver.tables:
        options = {**silver_write_options(params, table), DELETE_MODE_KEY: table.delete_mode}
        configs.append(config_from_mapping(f"silver {table.name}", options, kind="hudi"))
    return configs


def lint_workbook(params: WorkbookParams, specs: Sequence[ConnectorSpec] | None = None) -> list[Finding]:
    """:func:`lint_configs` over :func:`workbook_configs`."""
    return lint_configs(workbook_configs(params, specs))


def has_errors(findings: Iterable[Finding]) -> bool:
    """Whether any finding has severity ``error``."""
    return any(f.severity == "error" for f in findings)


def require_no_errors(findings: Sequence[Finding], what: str) -> None:
    """Nothing when no finding has severity ``error``.

    Raises:
        CheckError: naming ``what`` and each error (rule, configuration, key, line).
    """
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        listed = "; ".join(
            f"{f.rule} {f.config} {f.key}" + (f" line {f.line}" if f.line else "") for f in errors
        )
        raise CheckError(f"Failed to pass the configuration lint of {what}: {len(errors)} error(s): {listed}")


FINDING_COLUMNS = ["severity", "rule", "config", "key", "line", "value", "problem", "fix"]


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """The findings as a table (errors first): ``severity``, ``rule``, ``config``, ``key``,
    ``line`` (nullable integer), ``value`` (masked), ``problem``, ``fix``."""
    frame = pd.DataFrame(
        [{c: getattr(f, c) for c in FINDING_COLUMNS} for f in findings], columns=FINDING_COLUMNS
    )
    frame["line"] = frame["line"].astype("Int64")
    return frame
