"""Unit tests of generated credentials: file mode, atomic creation, overrides, no leaks."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from helpers.errors import StackError
from helpers.local import credentials as creds_mod
from helpers.local.credentials import (
    CREDENTIALS_FILE,
    ENV_MARIADB_PASSWORD,
    ENV_PG_PASSWORD,
    load_credentials,
)
from helpers.local.stack import LocalStack
from helpers.params import load_params


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_PG_PASSWORD, raising=False)
    monkeypatch.delenv(ENV_MARIADB_PASSWORD, raising=False)


def test_file_is_0600_even_with_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        load_credentials(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / CREDENTIALS_FILE).stat().st_mode) == 0o600


def test_file_is_never_readable_by_others_while_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write goes to a descriptor whose file already has mode 0600 (no chmod-after-write)."""
    seen: list[int] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    monkeypatch.setattr(creds_mod.os, "write", spy)
    old = os.umask(0)
    try:
        load_credentials(tmp_path)
    finally:
        os.umask(old)
    assert seen and all(mode == 0o600 for mode in seen)
    assert [p.name for p in tmp_path.iterdir()] == [CREDENTIALS_FILE]  # no temp file left


def test_passwords_are_stable_and_distinct(tmp_path: Path) -> None:
    first = load_credentials(tmp_path)
    second = load_credentials(tmp_path)
    assert first == second
    pg, maria = first.postgres_password.get_secret_value(), first.mariadb_password.get_secret_value()
    assert pg != maria and len(pg) >= 32 and len(maria) >= 32
    other = load_credentials(tmp_path / "elsewhere")
    assert other.postgres_password.get_secret_value() != pg


def test_lost_creation_race_uses_the_winner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    winner = load_credentials(tmp_path / "a")
    (tmp_path / "b").mkdir()
    real_link = os.link

    def racing_link(src: str, dst: str) -> None:
        real_link(tmp_path / "a" / CREDENTIALS_FILE, dst)  # another process got there first
        raise FileExistsError(dst)

    monkeypatch.setattr(creds_mod.os, "link", racing_link)
    assert load_credentials(tmp_path / "b") == winner


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    load_credentials(tmp_path)
    path = tmp_path / CREDENTIALS_FILE
    os.chmod(path, 0o644)
    load_credentials(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_environment_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = load_credentials(tmp_path)
    monkeypatch.setenv(ENV_PG_PASSWORD, "from-env-pg")
    monkeypatch.setenv(ENV_MARIADB_PASSWORD, "from-env-maria")
    effective = load_credentials(tmp_path)
    assert effective.postgres_password.get_secret_value() == "from-env-pg"
    assert effective.mariadb_password.get_secret_value() == "from-env-maria"
    on_disk = json.loads((tmp_path / CREDENTIALS_FILE).read_text())
    assert on_disk["postgres_password"] == stored.postgres_password.get_secret_value()


def test_missing_file_without_create(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="does not exist; start the stack first"):
        load_credentials(tmp_path, create=False)


def test_corrupt_file_error_does_not_echo_content(tmp_path: Path) -> None:
    path = tmp_path / CREDENTIALS_FILE
    path.write_text('{"postgres_password": "leaky-secret-123"')
    os.chmod(path, 0o600)
    with pytest.raises(StackError) as info:
        load_credentials(tmp_path)
    assert "leaky-secret-123" not in str(info.value)


def test_no_password_in_repr_str_or_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    creds = load_credentials(tmp_path)
    stack = LocalStack(load_params("ci", overrides={"state_dir": str(tmp_path)}))
    secrets = [creds.postgres_password.get_secret_value(), creds.mariadb_password.get_secret_value()]
    shown = [
        repr(creds),
        str(creds),
        repr(stack.credentials),
        repr(stack),
        repr(stack.postgres_conninfo("ems")),
        str(stack.mariadb_conninfo("ecomm")),
        caplog.text,
    ]
    for text in shown:
        for secret in secrets:
            assert secret not in text
    assert "**********" in repr(creds)
    # but the connection arguments do carry it
    assert stack.postgres_conninfo("ems")["password"] == secrets[0]
    assert stack.mariadb_conninfo("ecomm")["password"] == secrets[1]
