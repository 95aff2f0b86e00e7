"""Generated passwords of the local stack, kept in a 0600 file in the state directory.

:func:`load_credentials` generates one password per server on its first call and returns them as
:class:`Credentials` (:class:`pydantic.SecretStr`, never printed); ``WORKBOOK_PG_PASSWORD`` and
``WORKBOOK_MARIADB_PASSWORD`` override them. How the file is created: ``docs/architecture.md``,
"Security".

Example:
    >>> load_credentials(params.state_path)              # doctest: +SKIP
    Credentials(postgres_password=SecretStr('**********'), mariadb_password=SecretStr('**********'))
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from helpers.errors import StackError

__all__ = [
    "CREDENTIALS_FILE",
    "ENV_MARIADB_PASSWORD",
    "ENV_PG_PASSWORD",
    "Credentials",
    "generate_password",
    "load_credentials",
    "load_secret",
    "write_private",
]

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "credentials.json"
"""Name of the credentials file inside the state directory."""

ENV_PG_PASSWORD = "WORKBOOK_PG_PASSWORD"
"""Environment variable overriding the PostgreSQL ``workbook`` role's password."""

ENV_MARIADB_PASSWORD = "WORKBOOK_MARIADB_PASSWORD"
"""Environment variable overriding the MariaDB ``workbook`` user's password."""

_PASSWORD_BYTES = 24  # 32 URL-safe characters, ~192 bits


class Credentials(BaseModel):
    """Passwords of the local stack's application accounts (both named ``workbook``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    postgres_password: SecretStr
    mariadb_password: SecretStr


def generate_password() -> str:
    """Return a new random password (URL-safe, 32 characters, from :mod:`secrets`).

    Returns:
        The password; URL-safe characters only, so it needs no quoting in connection strings.
    """
    return secrets.token_urlsafe(_PASSWORD_BYTES)


def write_private(path: Path, text: str, *, replace: bool = False) -> bool:
    """Write ``text`` to ``path`` with mode 0600 from the start: a temporary file of its own
    (``O_EXCL``, no symlink followed, synced), then a rename (``replace``) or a hard link, so a
    reader never sees a partial file and, without ``replace``, a concurrent first writer keeps
    its own file. Every secret and settings file of the local servers is written this way.

    Returns:
        True when ``path`` now holds ``text``; False when it existed already (not ``replace``).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask was
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    if replace:
        os.replace(tmp, path)
        return True
    try:
        os.link(tmp, path)  # atomic, fails if another writer won the race
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _read_private(path: Path, not_regular: str) -> str:
    """The text of a secret file: refused (``not_regular``) unless a regular file, its mode
    tightened to 0600 when others could read it."""
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise StackError(not_regular)
    if st.st_mode & 0o077:
        os.chmod(path, 0o600)
        log.warning("Tightened the permissions of %s to 0600 (they were %o)", path, st.st_mode & 0o777)
    return path.read_text(encoding="utf-8")


def _read(path: Path) -> Credentials:
    text = _read_private(path, f"Failed to read credentials: {path} is not a regular file; remove it")
    try:
        return Credentials.model_validate(json.loads(text))
    except (ValueError, ValidationError):
        # the message must not echo the file's content
        raise StackError(
            f"Failed to read credentials: {path} is not a valid credentials file; delete it and the "
            "state directory's servers (or restore it from a backup)"
        ) from None


def load_credentials(state_dir: str | Path, *, create: bool = True) -> Credentials:
    """Return the local stack's passwords, generating and storing them on first use.

    Environment variables :data:`ENV_PG_PASSWORD` and :data:`ENV_MARIADB_PASSWORD` override the
    stored values when set and non-empty.

    Args:
        state_dir: the stack's state directory (``params.state_path``); created if missing.
        create: generate the file when it does not exist (``False``: raise instead).

    Returns:
        The effective credentials.

    Raises:
        StackError: if the file is missing and ``create`` is false, or it is not valid.
    """
    folder = Path(state_dir)
    path = folder / CREDENTIALS_FILE
    if not path.exists():
        if not create:
            raise StackError(
                f"Failed to read credentials: {path} does not exist; start the stack first "
                "(./workbook stack start)"
            )
        folder.mkdir(parents=True, exist_ok=True)
        fresh = Credentials(
            postgres_password=SecretStr(generate_password()),
            mariadb_password=SecretStr(generate_password()),
        )
        payload = json.dumps(
            {
                "postgres_password": fresh.postgres_password.get_secret_value(),
                "mariadb_password": fresh.mariadb_password.get_secret_value(),
            },
            indent=2,
        )
        if write_private(path, payload):  # else a concurrent caller created it first: use theirs
            log.info("Generated passwords into %s (mode 0600)", path)
    stored = _read(path)
    pg = os.environ.get(ENV_PG_PASSWORD) or stored.postgres_password.get_secret_value()
    maria = os.environ.get(ENV_MARIADB_PASSWORD) or stored.mariadb_password.get_secret_value()
    return Credentials(postgres_password=SecretStr(pg), mariadb_password=SecretStr(maria))


def load_secret(path: str | Path) -> SecretStr:
    """Return the password kept in ``path`` (mode 0600), generating it on first use.

    For the accounts of servers beside the source databases (e.g. the schema registry's own
    PostgreSQL role); the file holds the password alone. Concurrent first callers agree on one.

    Args:
        path: the file; its folder is created if missing.

    Returns:
        The password, hidden in ``repr``.

    Raises:
        StackError: if the file is not a regular file or is empty.
    """
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, generate_password())  # False: a concurrent caller created it: use theirs
    value = _read_private(
        path, f"Failed to read the password file {path}: it is not a regular file; remove it"
    ).strip()
    if not value:
        raise StackError(f"Failed to read the password file {path}: it is empty; remove it")
    return SecretStr(value)
