"""Layered parameters: base + overlay + overrides, validated with errors naming key and file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers.errors import ParamsError
from helpers.params import ENVIRONMENTS, LEAN_JIT, WorkbookParams, load_params, project_root

PARAMS = project_root() / "params"


def _copy_params(tmp_path: Path) -> Path:
    for f in PARAMS.glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    return tmp_path


def test_every_committed_overlay_loads() -> None:
    for env in ("local", "ci"):
        params = load_params(env)
        assert isinstance(params, WorkbookParams) and params.environment == "local"
    assert set(ENVIRONMENTS) == {p.stem for p in PARAMS.glob("*.yaml")} - {"base"}


def test_overlay_and_override_order() -> None:
    assert load_params("local").tickit.scale == 1.0
    assert load_params("ci").tickit.scale == 0.01
    assert load_params("ci", {"tickit.scale": 0.5}).tickit.scale == 0.5
    # overrides merge, they do not replace a whole section
    params = load_params("ci", {"local.postgres.port": 50001})
    assert params.local.postgres.port == 50001 and params.local.mariadb.port == 33316


def test_params_are_frozen() -> None:
    params = load_params("local")
    with pytest.raises(ValidationError, match="frozen"):
        params.tickit.scale = 2.0  # type: ignore[misc]


def test_unknown_key_in_file_names_key_file_and_accepted(tmp_path: Path) -> None:
    folder = _copy_params(tmp_path)
    (folder / "local.yaml").write_text("environment: local\ntickit:\n  scael: 0.5\n")
    with pytest.raises(ParamsError) as info:
        load_params("local", params_dir=folder)
    msg = str(info.value)
    assert "'tickit.scael'" in msg and str(folder / "local.yaml") in msg and "scale" in msg


def test_unknown_key_in_base_names_base(tmp_path: Path) -> None:
    folder = _copy_params(tmp_path)
    (folder / "base.yaml").write_text((folder / "base.yaml").read_text() + "\nmystery: 1\n")
    with pytest.raises(ParamsError, match=r"unknown key 'mystery' in .*base\.yaml"):
        load_params("ci", params_dir=folder)


def test_wrong_type_names_key_and_value() -> None:
    with pytest.raises(ParamsError, match=r"'local.postgres.port' in overrides.*'abc'"):
        load_params("local", {"local.postgres.port": "abc"})
    with pytest.raises(ParamsError, match="tickit.reload"):
        load_params("local", {"tickit.reload": "yes"})


def test_out_of_range_value() -> None:
    with pytest.raises(ParamsError, match="tickit.scale"):
        load_params("local", {"tickit.scale": 0})


def test_unknown_source_key_lists_accepted_keys() -> None:
    with pytest.raises(
        ParamsError, match=r"'sources.ems.tabls'.*accepted keys here: database, engine, schema, tables"
    ):
        load_params("local", {"sources.ems.tabls": ["x"]})


def test_identifier_parameters_are_checked() -> None:
    with pytest.raises(ParamsError, match="sources.ems.database"):
        load_params("local", {"sources.ems.database": "ems; DROP DATABASE x"})


def test_aws_requires_real_settings() -> None:
    with pytest.raises(ParamsError) as info:
        load_params("aws")
    msg = str(info.value)
    assert "aws.s3_bucket" in msg and "aws.rds.postgres.instance_id" in msg and "aws.yaml" in msg


def test_aws_missing_required_setting_names_key_and_file(tmp_path: Path) -> None:
    folder = _copy_params(tmp_path)
    text = (folder / "aws.yaml").read_text().replace("  region: us-east-1\n", "")
    (folder / "aws.yaml").write_text(text)
    with pytest.raises(ParamsError, match=r"missing required key 'aws.region' \(expected in .*aws\.yaml\)"):
        load_params("aws", params_dir=folder)


def test_aws_section_required_for_aws_environment() -> None:
    with pytest.raises(ParamsError, match="'aws' section is required"):
        load_params("local", {"environment": "aws"})


def test_aws_with_overrides_loads() -> None:
    params = load_params(
        "aws",
        {
            "aws.s3_bucket": "b",
            "aws.rds.postgres.instance_id": "p",
            "aws.rds.mysql.instance_id": "m",
            "aws.rds.sqlserver.instance_id": "s",
            "lake.bronze": "s3://b/bronze",
            "lake.silver": "s3://b/silver",
        },
    )
    assert params.environment == "aws" and params.source("crm").engine == "sqlserver"


def test_unknown_environment_and_source() -> None:
    with pytest.raises(ParamsError, match="unknown environment 'prod'"):
        load_params("prod")
    with pytest.raises(ParamsError, match="configured sources are"):
        load_params("local").source("nope")


def test_malformed_yaml_names_file(tmp_path: Path) -> None:
    folder = _copy_params(tmp_path)
    (folder / "ci.yaml").write_text("tickit: [unclosed\n")
    with pytest.raises(ParamsError, match=r"parse parameters file .*ci\.yaml"):
        load_params("ci", params_dir=folder)


def test_parse_overrides_reads_yaml_values_and_names_a_bad_item() -> None:
    from helpers.params import parse_overrides

    assert parse_overrides(["tickit.scale=0.1", " project = x", "silver.reader=spark", "a.b="]) == {
        "tickit.scale": 0.1,
        "project": "x",
        "silver.reader": "spark",
        "a.b": None,
    }
    for bad in ("novalue", "=3"):
        with pytest.raises(ParamsError, match=f"{bad!r}: use KEY=VALUE"):
            parse_overrides([bad])


def test_local_jit_is_lean_by_default_and_quick_in_ci_for_the_local_jvms(tmp_path: Path) -> None:
    """``local.jit``: the tiered JIT with C2 for hot code only in the user's overlays (its fourth
    tier's thresholds ten times Java's defaults), Java's own when set to ``tiered``; the C1 compiler
    only in the ci overlay, handed to the Debezium workers next to their heap and collector options."""
    from helpers.capture.backends import EmbeddedBackend
    from helpers.capture.register import open_backend

    for name in ("local", "local-kafka"):
        assert load_params(name).local.jit_options == LEAN_JIT
    assert LEAN_JIT == (
        "-XX:Tier4InvocationThreshold=50000",
        "-XX:Tier4MinInvocationThreshold=6000",
        "-XX:Tier4CompileThreshold=150000",
        "-XX:Tier4BackEdgeThreshold=400000",
    )
    assert load_params("local", overrides={"local.jit": "tiered"}).local.jit_options == ()
    ci = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    assert ci.local.jit_options == ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=128m")
    backend = open_backend(ci)
    assert isinstance(backend, EmbeddedBackend)
    assert backend.jvm_opts == (*EmbeddedBackend.jvm_opts, "-Xmx512m", *ci.local.jit_options)
    smaller = ci.capture.model_copy(update={"worker_heap": "256m"})
    small = open_backend(ci.model_copy(update={"capture": smaller}))
    assert isinstance(small, EmbeddedBackend) and small.jvm_opts[-3:] == ("-Xmx256m", *ci.local.jit_options)
    with pytest.raises(
        ParamsError, match=r"key 'local.jit' in overrides: Input should be 'tiered', 'quick' or 'lean'"
    ):
        load_params("ci", overrides={"local.jit": "fast"})


def test_trino_has_a_jit_of_its_own_c1_only_unless_set() -> None:
    """``local.trino.jit``: Trino runs a run's notebooks 05-06 on small data, so C1 only in every
    overlay, whatever ``local.jit`` says; ``tiered`` when the user sets it."""
    quick = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=128m")
    for name in ("local", "local-kafka", "ci"):
        assert load_params(name).local.trino.jit_options == quick
    assert load_params("ci", overrides={"local.jit": "tiered"}).local.trino.jit_options == quick
    tiered = load_params("local", overrides={"local.trino.jit": "tiered"})
    assert tiered.local.trino.jit_options == ()
    assert tiered.local.jit_options == LEAN_JIT
    with pytest.raises(ParamsError, match=r"key 'local.trino.jit' in overrides: Input should be"):
        load_params("local", overrides={"local.trino.jit": "c2"})


def test_each_local_overlay_keeps_its_own_state_ports_and_lake() -> None:
    """``--env ci`` and ``--env local-kafka`` run beside the default profile (README.md, "Useful
    options"; ``params/local-kafka.yaml``): each has its own state directory, Bronze and Silver
    zones and server ports, so one overlay's small or differently captured sources never meet
    another's Bronze (a ``--env ci`` run after the default one failed notebook 02 on the default's
    full-scale Bronze), nor its servers another's port. The Kafka ports are the Kafka profile's
    alone: no other overlay starts a broker."""

    def ports(section: dict[str, object], prefix: str) -> dict[str, object]:
        found: dict[str, object] = {}
        for key, value in section.items():
            if isinstance(value, dict):
                found |= ports(value, f"{prefix}{key}.")
            elif key.endswith("port"):
                found[f"{prefix}{key}"] = value
        return found

    overlays = {env: load_params(env) for env in ("local", "ci", "local-kafka")}
    seen = {
        env: {
            "state_dir": p.state_path,
            "lake.bronze": p.path(p.lake.bronze),
            "lake.silver": p.path(p.lake.silver),
            **{k: v for k, v in ports(p.local.model_dump(), "local.").items() if ".kafka." not in k},
        }
        for env, p in overlays.items()
    }
    assert len({tuple(sorted(s)) for s in seen.values()}) == 1, seen
    assert len(seen["local"]) > 10, seen["local"]  # state, two zones, every server's ports
    for what in seen["local"]:
        values = {env: s[what] for env, s in seen.items()}
        assert len(set(values.values())) == len(values), (what, values)
