"""The configuration linter (``helpers.checks.config_lint``) on configurations written the way the
original AWS posts wrote theirs (``tests/fixtures/configs``): MSK Connect and Kafka Connect JSON for
Debezium MySQL/PostgreSQL, a Confluent S3 sink, and a multi-table DeltaStreamer base file with one
file per table. Each listed risk is flagged at its key and line; the corrected files are clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.checks.config_files import (
    config_from_mapping,
    is_secret_key,
    parse_properties,
    read_config_file,
    shown_value,
)
from helpers.checks.config_lint import (
    LEGACY_OPTIONS,
    RULES,
    Finding,
    findings_frame,
    has_errors,
    lint_configs,
    lint_files,
    lint_workbook,
    require_no_errors,
    workbook_configs,
)
from helpers.cli import main
from helpers.errors import CheckError, ConfigLintError
from helpers.params import load_params

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
MYSQL = "msk-connect-mysql-ecomm.json"
POSTGRES = "kafka-connect-postgres-ems.json"
SINK = "s3-sink-bronze.json"
BASE, SALE, EVENT = (
    "deltastreamer/base.properties",
    "deltastreamer/sale.properties",
    "deltastreamer/event.properties",
)
ALL = [MYSQL, POSTGRES, SINK, BASE, SALE, EVENT]
SECRETS = ("Tick1t-Ecomm-2021!", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")

#: What fixes each risk, per file: (old text, new text); every old text occurs exactly once.
FIXES: dict[str, list[tuple[str, str]]] = {
    MYSQL: [
        ('"database.server.name"', '"topic.prefix"'),
        ('"database.whitelist"', '"database.include.list"'),
        ('"table.whitelist"', '"table.include.list"'),
        ('"database.history.kafka.bootstrap', '"schema.history.internal.kafka.bootstrap'),
        ('"database.history.kafka.topic"', '"schema.history.internal.kafka.topic"'),
        ('"database.history.consumer.security', '"schema.history.internal.consumer.security'),
        ('"database.history.consumer.sasl', '"schema.history.internal.consumer.sasl'),
        ('"database.history.producer.security', '"schema.history.internal.producer.security'),
        ('"database.history.producer.sasl', '"schema.history.internal.producer.sasl'),
        ('"decimal.handling.mode": "double"', '"decimal.handling.mode": "precise"'),
        ("http://http://registry", "http://registry"),
        ('    "transforms.unwrap.drop.tombstones": "false",\n', ""),
        (
            '"transforms.unwrap.delete.handling.mode": "rewrite"',
            '"transforms.unwrap.delete.tombstone.handling.mode": "rewrite"',
        ),
    ],
    POSTGRES: [
        ('"plugin.name": "pgoutput",', '"plugin.name": "pgoutput",\n    "heartbeat.interval.ms": "10000",'),
        (
            '"transforms.unwrap.add.fields"',
            '"tombstones.on.delete": "false",\n'
            '    "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",\n'
            '    "transforms.unwrap.add.fields"',
        ),
    ],
    SINK: [
        ('"rotate.schedule.interval.ms": "60000"', '"rotate.interval.ms": "600000"'),
        ('"timestamp.extractor": "Wallclock"', '"timestamp.extractor": "Record"'),
    ],
    BASE: [
        (
            "hoodie.datasource.write.hive_style_partitioning=true\n",
            "hoodie.datasource.write.hive_style_partitioning=true\n"
            "hoodie.payload.delete.field=__deleted\nhoodie.payload.delete.marker=true\n",
        ),
        (
            "# Bronze written by the S3 sink\n",
            "# Bronze written by the S3 sink\n"
            "hoodie.deltastreamer.schemaprovider.registry.schemaconverter=\n",
        ),
    ],
    SALE: [("partition_fields=saletime", "partition_fields=caldate")],
    EVENT: [],
}


def _line_of(relative: str, needle: str) -> int:
    """The one line of a fixture that contains ``needle`` (an oracle independent of the parser)."""
    lines = [i for i, text in enumerate((FIXTURES / relative).read_text().splitlines(), 1) if needle in text]
    assert len(lines) == 1, f"{needle!r} is on lines {lines} of {relative}"
    return lines[0]


def _copy(tmp_path: Path, fixed: bool) -> list[Path]:
    """The fixtures copied to ``tmp_path`` (the same folder layout), corrected when ``fixed``."""
    out = []
    for relative in ALL:
        text = (FIXTURES / relative).read_text()
        if fixed:
            for old, new in FIXES[relative]:
                assert text.count(old) == 1, (relative, old)
                text = text.replace(old, new)
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        out.append(target)
    return out


@pytest.fixture(scope="module")
def findings() -> list[Finding]:
    return lint_files([FIXTURES / f for f in ALL])


def _one(findings: list[Finding], rule: str, key: str, config: str) -> Finding:
    hits = [f for f in findings if f.rule == rule and f.key == key and config in f.config]
    assert len(hits) == 1, f"{rule} {key} in {config}: {[(f.rule, f.key, f.config) for f in findings]}"
    return hits[0]


@pytest.mark.parametrize(
    ("rule", "relative", "key", "needle"),
    [
        ("decimal-double", MYSQL, "decimal.handling.mode", '"decimal.handling.mode"'),
        ("s3-wallclock-rotation", SINK, "rotate.schedule.interval.ms", "rotate.schedule.interval.ms"),
        ("s3-wallclock-partitioning", SINK, "timestamp.extractor", '"timestamp.extractor"'),
        ("registry-url", MYSQL, "value.converter.apicurio.registry.url", "http://http://"),
        ("legacy-option", MYSQL, "database.server.name", '"database.server.name"'),
        ("legacy-option", MYSQL, "table.whitelist", '"table.whitelist"'),
        ("legacy-option", MYSQL, "database.history.kafka.topic", '"database.history.kafka.topic"'),
        ("legacy-option", MYSQL, "transforms.unwrap.delete.handling.mode", "delete.handling.mode"),
        ("legacy-option", MYSQL, "transforms.unwrap.drop.tombstones", "drop.tombstones"),
        ("deletes-dropped", SINK, "behavior.on.null.values", "behavior.on.null.values"),
        ("partition-sync-mismatch", SALE, "hoodie.datasource.hive_sync.partition_fields", "partition_fields"),
    ],
)
def test_each_listed_risk_is_flagged_at_its_key_and_line(
    findings: list[Finding], rule: str, relative: str, key: str, needle: str
) -> None:
    found = _one(findings, rule, key, Path(relative).name)
    assert found.line == _line_of(relative, needle)
    assert found.source.endswith(relative)
    assert found.severity == RULES[rule].severity or rule == "legacy-option"
    assert found.problem and found.fix


def test_missing_settings_are_flagged_where_they_are_missing(findings: list[Finding]) -> None:
    """A PostgreSQL connector without a heartbeat, and Silver configs with no delete marker under a
    soft-delete flattening: the key to add, no line."""
    heartbeat = _one(findings, "postgres-heartbeat", "heartbeat.interval.ms", POSTGRES)
    assert heartbeat.line is None and heartbeat.severity == "warning"
    for table in ("sale.properties", "event.properties"):
        soft = _one(findings, "soft-delete-upserted", "hoodie.payload.delete.field", table)
        assert soft.line is None and soft.severity == "error"
        assert MYSQL in soft.problem  # names the connector that flattens into __deleted


def test_3x_translation_of_the_old_delete_options(findings: list[Finding]) -> None:
    """delete.handling.mode=rewrite with drop.tombstones=false means rewrite-with-tombstone in 3.x;
    without the new key 3.x falls back to 'tombstone' (the finding says so)."""
    old = _one(findings, "legacy-option", "transforms.unwrap.delete.handling.mode", MYSQL)
    assert old.fix == "transforms.unwrap.delete.tombstone.handling.mode=rewrite-with-tombstone"
    assert "default 'tombstone'" in old.problem
    history = _one(findings, "legacy-option", "database.history.consumer.sasl.mechanism", MYSQL)
    assert history.fix.endswith("schema.history.internal.consumer.sasl.mechanism")


def test_layered_deltastreamer_files_are_linted_as_merged_tables(findings: list[Finding]) -> None:
    """The multi-table base file is linted under each table file, never alone; event.properties
    agrees on its partition fields, so only sale.properties has a mismatch."""
    assert not [f for f in findings if f.config == "base.properties"]
    assert not [f for f in findings if f.rule == "partition-sync-mismatch" and "event" in f.config]


#: Rules that read the schema files a configuration names: the posts' fixtures keep theirs on S3
#: (tested with local files at the end of this module).
SCHEMA_FILE_RULES = {"streamer-bytes-decimal", "streamer-avro-post-processor"}
#: The posts' streamer read Bronze from S3, never a Kafka topic (tested at the end of this module).
KAFKA_SOURCE_RULES = {"streamer-kafka-deserializer"}


def test_every_fixture_risk_and_nothing_else(findings: list[Finding]) -> None:
    assert {f.rule for f in findings} == set(RULES) - SCHEMA_FILE_RULES - KAFKA_SOURCE_RULES
    assert has_errors(findings)
    frame = findings_frame(findings)
    assert list(frame["severity"].iloc[:1]) == ["error"] and frame["severity"].iloc[-1] == "warning"
    assert str(frame["line"].dtype) == "Int64"
    with pytest.raises(CheckError, match="decimal-double msk-connect-mysql-ecomm.json .* line 28"):
        require_no_errors(findings, "the fixtures")
    require_no_errors([f for f in findings if f.severity == "warning"], "the warnings only")


def test_the_docs_list_every_rule_and_legacy_option() -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "config-lint.md").read_text()
    for rule in RULES.values():
        assert f"| `{rule.rule_id}`" in docs and f"| {rule.severity}" in docs
    for option in LEGACY_OPTIONS:
        assert f"`{option.old.rstrip('.')}" in docs


def test_the_corrected_fixtures_are_clean(tmp_path: Path) -> None:
    assert lint_files(_copy(tmp_path, fixed=True)) == []


#: The rules each file's own risks trigger once every other file is corrected.
OWN_RULES = {
    MYSQL: {"legacy-option", "decimal-double", "registry-url"},
    POSTGRES: {"postgres-heartbeat", "deletes-dropped"},
    SINK: {"s3-wallclock-rotation", "s3-wallclock-partitioning"},
    BASE: {"soft-delete-upserted", "streamer-registry-converter"},
    SALE: {"partition-sync-mismatch"},
    EVENT: set(),
}


@pytest.mark.parametrize("relative", ALL)
def test_each_fix_is_needed(tmp_path: Path, relative: str) -> None:
    """Undo the fixes of one file only: exactly that file's risks come back (the rules are not
    always-off, and a fixed file raises nothing)."""
    files = _copy(tmp_path, fixed=True)
    (tmp_path / relative).write_text((FIXTURES / relative).read_text())
    assert {f.rule for f in lint_files(files)} == OWN_RULES[relative]


def test_secrets_are_masked(findings: list[Finding], tmp_path: Path) -> None:
    text = findings_frame(findings).to_string()
    for secret in SECRETS:
        assert secret not in text
    mysql = read_config_file(FIXTURES / MYSQL)[0]
    sink = read_config_file(FIXTURES / SINK)[0]
    assert shown_value("database.password", mysql.get("database.password")) == "********"
    assert shown_value("aws.secret.access.key", sink.get("aws.secret.access.key")) == "********"
    assert shown_value("aws.access.key.id", sink.get("aws.access.key.id")) == "********"
    ref = "${secretsmanager:tickit/ems/postgres:password}"  # a reference is not a secret
    assert shown_value("database.password", ref) == ref
    assert shown_value("x.registry.url", "https://svc:hunter2@reg:8081") == "https://svc:********@reg:8081"
    assert is_secret_key("value.converter.basic.auth.user.info")
    assert not is_secret_key("key.converter") and not is_secret_key("hoodie.datasource.write.recordkey.field")
    # a finding on a secret key shows the mask, never the value
    leaky = config_from_mapping(
        "x", {"value.converter.schema.registry.url": "http://http://h", "ssl.key": "s3cr3t"}
    )
    assert all("s3cr3t" not in f.value for f in lint_configs([leaky]))


def test_cli_exit_codes_and_masking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint-config", *map(str, _copy(tmp_path / "bad", fixed=False))]) == 1
    out = capsys.readouterr().out
    assert "21 error(s), 1 warning(s)" in out and "decimal-double" in out
    assert not any(secret in out for secret in SECRETS)
    assert main(["lint-config", *map(str, _copy(tmp_path / "good", fixed=True))]) == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().out
    (tmp_path / "broken.json").write_text('{\n  "connector.class": "x",\n  "a": \n}\n')
    assert main(["lint-config", str(tmp_path / "broken.json")]) == 2
    assert "broken.json line 4" in capsys.readouterr().err


@pytest.mark.parametrize("env", ["local", "ci", "aws"])
def test_the_workbook_own_configs_are_clean(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    params = load_params(env, check_placeholders=False)
    configs = workbook_configs(params)
    kinds = [c.kind for c in configs]
    assert kinds.count("debezium") == len(params.sources)
    assert kinds.count("hudi") == len(params.silver.tables)
    assert kinds.count("s3-sink") == (1 if env == "aws" else 0)
    assert lint_workbook(params) == []
    assert main(["lint-config", "--env", env]) == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().out


def test_the_workbook_configs_are_linted_by_the_same_rules() -> None:
    """The workbook's own connector with a risk put in is flagged (the clean result above is not
    because its configurations escape the rules)."""
    params = load_params("ci")
    configs = workbook_configs(params)
    pg = next(c for c in configs if c.engine == "postgresql")
    risky = dict((k, s.value) for k, s in pg.settings.items() if k != "heartbeat.interval.ms")
    risky["decimal.handling.mode"] = "double"
    risky["transforms.unwrap.delete.tombstone.handling.mode"] = "drop"
    silver = [c for c in configs if c.kind == "hudi"]
    rules = {f.rule for f in lint_configs([config_from_mapping(pg.name, risky), *silver])}
    assert rules == {"postgres-heartbeat", "decimal-double", "deletes-dropped"}


# --- parsing -------------------------------------------------------------------------------------


def test_properties_syntax_and_lines() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "a=1\n"
        "b: two words\n"
        "c three\n"
        "  d = spaced  \n"
        "e=first \\\n    second \\\n    third\n"
        "f=back\\\\\n"
        "g\\:h=colon\\u0041\n"
        "empty=\n"
    )
    got = {s.key: (s.value, s.line) for s in parse_properties(text, "t.properties")}
    assert got == {
        "a": ("1", 4),
        "b": ("two words", 5),
        "c": ("three", 6),
        "d": ("spaced  ", 7),
        "e": ("first second third", 8),
        "f": ("back\\", 11),
        "g:h": ("colonA", 12),
        "empty": ("", 13),
    }


def test_continued_registry_url_is_read_whole() -> None:
    base = read_config_file(FIXTURES / BASE)[0]
    assert base.get("hoodie.deltastreamer.schemaprovider.registry.baseUrl") == (
        "http://schema-registry.tickit.internal:8081/subjects/"
    )
    assert base.line("hoodie.deltastreamer.schemaprovider.registry.baseUrl") == _line_of(BASE, "baseUrl")


def test_json_shapes_and_lines(tmp_path: Path) -> None:
    msk = read_config_file(FIXTURES / MYSQL)[0]
    assert msk.name == f"{MYSQL} (tickit-ecomm-mysql-source)" and msk.kind == "debezium"
    assert "connectorName" not in msk.settings and msk.engine == "mysql"
    rest = read_config_file(FIXTURES / SINK)[0]
    assert rest.kind == "s3-sink" and "name" not in rest.settings
    bare = tmp_path / "bare.json"
    bare.write_text(
        json.dumps(
            {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "tasks.max": 1,
                "heartbeat.interval.ms": 5000,
                "x": True,
            },
            indent=1,
        )
    )
    config = read_config_file(bare)[0]
    assert config.get("tasks.max") == "1" and config.get("x") == "true" and config.line("x") == 5
    assert lint_files([bare]) == []


def test_include_files_are_merged_underneath(tmp_path: Path) -> None:
    (tmp_path / "base.properties").write_text("hoodie.datasource.hive_sync.enable=true\n")
    (tmp_path / "t.properties").write_text(
        "include=base.properties\nhoodie.datasource.write.partitionpath.field=a,b:SIMPLE\n"
        "hoodie.datasource.hive_sync.partition_fields=b,a\n"
    )
    [found] = lint_files([tmp_path / "t.properties"])
    assert (found.rule, found.line, found.fix) == (
        "partition-sync-mismatch",
        3,
        "hoodie.datasource.hive_sync.partition_fields=a,b",
    )
    (tmp_path / "t.properties").write_text(
        "include=base.properties\nhoodie.datasource.write.partitionpath.field=a\n"
    )
    [found] = lint_files([tmp_path / "t.properties"])  # sync on, partitioned, no sync fields
    assert found.rule == "partition-sync-mismatch" and found.line is None


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("bad.json", '{\n  "a": "1",\n  "b": \n}', "bad.json line 4"),
        ("list.json", "[1, 2]", "list.json line 1"),
        ("nested.json", '{\n  "a": {"b": 1}\n}', "nested.json line 2"),
        ("bad.properties", "a=1\n\ndatabase.password=\\u12G4\n", "bad.properties line 3"),
        ("missing.properties", "a=1\ninclude=nowhere.properties\n", "missing.properties line 2"),
    ],
)
def test_parse_errors_name_file_and_line(tmp_path: Path, name: str, text: str, where: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigLintError, match="^Failed to ") as err:
        lint_files([tmp_path / name])
    assert where in str(err.value)
    assert "12G4" not in str(err.value)  # a broken escape may sit in a password: not echoed


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.properties").write_text("include=b.properties\n")
    (tmp_path / "b.properties").write_text("include=a.properties\n")
    with pytest.raises(ConfigLintError, match="cycle"):
        read_config_file(tmp_path / "a.properties")


# --- single rules in detail ----------------------------------------------------------------------

PG = "io.debezium.connector.postgresql.PostgresConnector"


@pytest.mark.parametrize(
    ("url", "flagged"),
    [
        ("http://registry:8080/apis/registry/v2", False),
        ("https://a:8081,https://b:8081", False),
        ("${env:REGISTRY_URL}", False),
        ("http://http://registry:8080", True),
        ("https://https//registry:8080", True),
        ("registry:8081", True),
        ("http//registry:8081", True),
        ("http://registry :8081", True),
        ("http://registry:80a1", True),
        ("ftp://registry", True),
        ("https://a:8081,https//b:8081", True),
    ],
)
def test_registry_urls(url: str, flagged: bool) -> None:
    config = config_from_mapping("c", {"value.converter.schema.registry.url": url})
    assert bool(lint_configs([config])) is flagged


@pytest.mark.parametrize(
    ("settings", "fix"),
    [
        ({"delete.handling.mode": "drop"}, "drop"),
        ({"drop.tombstones": "false"}, "tombstone"),
        ({"delete.handling.mode": "rewrite"}, "rewrite"),
        ({"delete.handling.mode": "none", "drop.tombstones": "true"}, "tombstone"),
    ],
)
def test_old_delete_options_map_to_the_3x_mode(settings: dict[str, str], fix: str) -> None:
    config = {
        "connector.class": PG,
        "heartbeat.interval.ms": "1000",
        "transforms": "u",
        "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    config.update({f"transforms.u.{k}": v for k, v in settings.items()})
    found = lint_configs([config_from_mapping("c", config)])
    assert {f.fix for f in found} == {f"transforms.u.delete.tombstone.handling.mode={fix}"}


def test_legacy_names_apply_per_engine() -> None:
    """database.dbname is the PostgreSQL name still, and the old SQL Server one."""
    pg = config_from_mapping(
        "pg", {"connector.class": PG, "database.dbname": "ems", "heartbeat.interval.ms": "1"}
    )
    assert lint_configs([pg]) == []
    mssql = config_from_mapping(
        "ms",
        {"connector.class": "io.debezium.connector.sqlserver.SqlServerConnector", "database.dbname": "crm"},
    )
    assert [(f.rule, f.fix) for f in lint_configs([mssql])] == [
        ("legacy-option", "rename database.dbname to database.names")
    ]
    values = config_from_mapping(
        "v",
        {
            "connector.class": PG,
            "heartbeat.interval.ms": "1",
            "snapshot.mode": "schema_only",
            "plugin.name": "wal2json_rds",
        },
    )
    assert sorted(f.fix for f in lint_configs([values])) == ["plugin.name=pgoutput", "snapshot.mode=no_data"]
    recovery = config_from_mapping(
        "r", {"connector.class": PG, "heartbeat.interval.ms": "1", "snapshot.mode": "schema_only_recovery"}
    )
    assert [f.fix for f in lint_configs([recovery])] == ["snapshot.mode=recovery"]
    jdbc_sink = config_from_mapping(
        "j",
        {
            "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
            "decimal.handling.mode": "double",
        },
    )
    assert jdbc_sink.kind == "connect" and lint_configs([jdbc_sink]) == []
    assert all(o.new and o.effect for o in LEGACY_OPTIONS)


def test_hard_deletes_not_expected_from_a_soft_silver_table() -> None:
    """deletes-dropped needs a Silver config that expects hard deletes: the workbook's soft-delete
    table does not; the same flattening against a hard one is flagged."""
    connector = config_from_mapping(
        "c",
        {
            "connector.class": PG,
            "heartbeat.interval.ms": "1",
            "transforms": "u",
            "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.u.delete.tombstone.handling.mode": "drop",
        },
    )
    soft = config_from_mapping("s", {"workbook.silver.delete_mode": "soft"}, kind="hudi")
    hard = config_from_mapping("h", {"workbook.silver.delete_mode": "hard"}, kind="hudi")
    assert lint_configs([connector, soft]) == []
    [found] = lint_configs([connector, hard])
    assert (found.rule, found.key) == ("deletes-dropped", "transforms.u.delete.tombstone.handling.mode")


def test_fixture_folder_is_complete() -> None:
    assert sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*.*")) == sorted(ALL)


# --- HoodieStreamer 0.14.0's traps ---------------------------------------------------------------

_DECIMAL_BYTES = {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}
_DECIMAL_FIXED = {
    "type": "fixed",
    "name": "fixed",
    "size": 4,
    "logicalType": "decimal",
    "precision": 8,
    "scale": 2,
}


def _schema(path: Path, decimal: dict[str, object]) -> Path:
    fields = [{"name": "salesid", "type": "int"}, {"name": "pricepaid", "type": ["null", decimal]}]
    path.write_text(json.dumps({"type": "record", "name": "sale", "fields": fields}))
    return path


def _rules(tmp_path: Path, text: str) -> list[str]:
    props = tmp_path / "sale.properties"
    props.write_text(text)
    return sorted(f.rule for f in lint_files([props]) if f.rule.startswith("streamer-"))


def test_a_bytes_decimal_in_the_schema_the_streamer_writes_with_is_an_error(tmp_path: Path) -> None:
    source = _schema(tmp_path / "s.avsc", _DECIMAL_BYTES)
    target = _schema(tmp_path / "t.avsc", _DECIMAL_FIXED)
    base = "hoodie.table.name=sale\nhoodie.datasource.write.recordkey.field=salesid\n"
    off = "hoodie.streamer.schemaprovider.spark_avro_post_processor.enable=false\n"
    only_source = f"{base}{off}hoodie.streamer.schemaprovider.source.schema.file=file://{source}\n"
    assert _rules(tmp_path, only_source) == ["streamer-bytes-decimal"]  # the source schema is the target
    both = f"{only_source}hoodie.deltastreamer.schemaprovider.target.schema.file={target}\n"
    assert _rules(tmp_path, both) == []  # the workbook's shape: fixed decimals in the target
    bytes_target = f"{only_source}hoodie.streamer.schemaprovider.target.schema.file={source}\n"
    assert _rules(tmp_path, bytes_target) == ["streamer-bytes-decimal"]
    found = next(f for f in lint_files([tmp_path / "sale.properties"]) if f.rule == "streamer-bytes-decimal")
    assert found.key == "hoodie.streamer.schemaprovider.target.schema.file"
    assert found.problem.startswith("pricepaid: ")


def test_the_spark_avro_post_processor_on_a_bytes_decimal_source_is_an_error(tmp_path: Path) -> None:
    source = _schema(tmp_path / "s.avsc", _DECIMAL_BYTES)
    target = _schema(tmp_path / "t.avsc", _DECIMAL_FIXED)
    files = (
        f"hoodie.streamer.schemaprovider.source.schema.file={source}\n"
        f"hoodie.streamer.schemaprovider.target.schema.file={target}\n"
    )
    assert _rules(tmp_path, files) == ["streamer-avro-post-processor"]  # on by default in 0.14.0
    assert (
        _rules(tmp_path, files + "hoodie.streamer.schemaprovider.spark_avro_post_processor.enable=false\n")
        == []
    )
    fixed_source = _schema(tmp_path / "f.avsc", _DECIMAL_FIXED)
    assert _rules(tmp_path, files.replace(str(source), str(fixed_source))) == []


def test_the_registry_provider_needs_its_converter_key_on_0_14(tmp_path: Path) -> None:
    url = "hoodie.streamer.schemaprovider.registry.url=http://127.0.0.1:18101/apis/ccompat/v7/subjects/t-value/versions/latest\n"
    assert _rules(tmp_path, url) == ["streamer-registry-converter"]
    assert _rules(tmp_path, url + "hoodie.streamer.schemaprovider.registry.schemaconverter=\n") == []


def test_a_kafka_source_without_a_deserializer_maven_central_serves_is_flagged(tmp_path: Path) -> None:
    base = (
        "hoodie.deltastreamer.schemaprovider.registry.url=http://127.0.0.1:1/apis/ccompat/v7/subjects/t-value/versions/latest\n"
        "hoodie.streamer.schemaprovider.registry.schemaconverter=\n"
        "hoodie.deltastreamer.source.kafka.topic=tickit_raw.ems.event\n"
    )
    assert _rules(tmp_path, base) == ["streamer-kafka-deserializer"]
    key = "hoodie.deltastreamer.source.kafka.value.deserializer.class="
    confluent = f"{key}io.confluent.kafka.serializers.KafkaAvroDeserializer\n"
    assert _rules(tmp_path, base + confluent) == ["streamer-kafka-deserializer"]
    apicurio = f"{key}io.apicurio.registry.serde.avro.AvroKafkaDeserializer\n"
    assert _rules(tmp_path, base + apicurio) == []
