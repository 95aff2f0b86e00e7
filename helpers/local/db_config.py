"""Pure configuration of the local servers: constants, paths, and the rendered config files."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from helpers.params import WorkbookParams

__all__ = [
    "APP_USER",
    "ConnInfo",
    "DEBEZIUM_VERSION_FALLBACK",
    "LOOPBACK",
    "MARIADB_BIN",
    "MARIADB_GLOBAL_PRIVILEGES",
    "MARIADB_INSTALL",
    "PG_IDENT_MAP",
    "PG_SUPERUSER",
    "SOCKET_PATH_MAX",
    "ServerName",
    "StackPaths",
    "render_mariadb_cnf",
    "render_pg_hba",
    "render_pg_ident",
    "render_postgres_conf",
]


APP_USER = "workbook"
"""Name of the application role (PostgreSQL) and user (MariaDB, at host 127.0.0.1)."""

LOOPBACK = "127.0.0.1"
"""The only address the servers listen on."""
PG_SUPERUSER = "postgres"
PG_IDENT_MAP = "workbook_admin"
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
MARIADB_BIN = "mariadbd"
MARIADB_INSTALL = "mariadb-install-db"
DEBEZIUM_VERSION_FALLBACK = "5.5.5-10.11.19-log"
MARIADB_GLOBAL_PRIVILEGES = (
    "SELECT",
    "RELOAD",
    "SHOW DATABASES",
    "REPLICATION SLAVE",
    "REPLICATION CLIENT",  # MariaDB >= 10.5 stores it as BINLOG MONITOR
    "LOCK TABLES",
    "FILE",
)

ServerName = Literal["postgres", "mariadb"]


# --------------------------------------------------------------------------------------------
# small value types


class ConnInfo(dict[str, Any]):
    """Connection keyword arguments; ``repr``/``str`` hide the password.

    It is a plain ``dict`` otherwise: ``psycopg.connect(**info)`` / ``pymysql.connect(**info)``.
    """

    def __repr__(self) -> str:
        shown = {k: ("**********" if k == "password" else v) for k, v in self.items()}
        return f"ConnInfo({shown!r})"

    __str__ = __repr__

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython display
        printer.text(repr(self))


@dataclasses.dataclass(frozen=True)
class StackPaths:
    """Where each file of the local stack lives, derived from the state directory."""

    root: Path

    @property
    def credentials(self) -> Path:
        """``credentials.json`` (mode 0600)."""
        return self.root / "credentials.json"

    @property
    def lock(self) -> Path:
        """Lock file serialising start/stop."""
        return self.root / "stack.lock"

    @property
    def pg_home(self) -> Path:
        """PostgreSQL's folder (owned by ``postgres``)."""
        return self.root / "postgres"

    @property
    def pg_data(self) -> Path:
        """PostgreSQL data directory."""
        return self.pg_home / "data"

    @property
    def pg_socket_dir(self) -> Path:
        """Folder of PostgreSQL's unix socket."""
        return self.pg_home / "run"

    @property
    def pg_log(self) -> Path:
        """PostgreSQL server log."""
        return self.pg_home / "postgresql.log"

    @property
    def pg_pid(self) -> Path:
        """PostgreSQL's own pid file."""
        return self.pg_data / "postmaster.pid"

    @property
    def maria_home(self) -> Path:
        """MariaDB's folder (owned by the server user)."""
        return self.root / "mariadb"

    @property
    def maria_cnf(self) -> Path:
        """Generated defaults file."""
        return self.maria_home / "my.cnf"

    @property
    def maria_data(self) -> Path:
        """MariaDB datadir (binlog included)."""
        return self.maria_home / "data"

    @property
    def maria_run(self) -> Path:
        """Folder of MariaDB's socket and pid file."""
        return self.maria_home / "run"

    @property
    def maria_socket(self) -> Path:
        """MariaDB unix socket."""
        return self.maria_run / "mariadb.sock"

    @property
    def maria_pid(self) -> Path:
        """MariaDB pid file."""
        return self.maria_run / "mariadb.pid"

    @property
    def maria_files(self) -> Path:
        """``secure_file_priv``: server-side ``LOAD DATA INFILE`` reads only from here."""
        return self.maria_home / "files"

    @property
    def maria_tmp(self) -> Path:
        """MariaDB's temporary files (``tmpdir``: internal temporary tables, the install's too), its
        own rather than the machine's ``/tmp``, which other processes share and may clean."""
        return self.maria_home / "tmp"

    @property
    def maria_log(self) -> Path:
        """MariaDB error log."""
        return self.maria_home / "mariadb.log"


def _pg_conf_value(value: str | int) -> str:
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def render_postgres_conf(params: WorkbookParams, paths: StackPaths) -> str:
    """Render ``workbook.conf``, included from the cluster's ``postgresql.conf``.

    ``ALTER SYSTEM`` (``postgresql.auto.conf``) still wins over these settings, which is how a
    deliberate misconfiguration is detected by :func:`helpers.sources.cdc.preflight`.

    Args:
        params: workbook parameters (``local.postgres``).
        paths: the stack's paths.

    Returns:
        The file's text.
    """
    pg = params.local.postgres
    settings: list[tuple[str, str | int]] = [
        ("listen_addresses", LOOPBACK),
        ("port", pg.port),
        ("unix_socket_directories", str(paths.pg_socket_dir)),
        ("unix_socket_permissions", "0700"),
        ("password_encryption", "scram-sha-256"),
        ("wal_level", "logical"),
        ("max_replication_slots", pg.max_replication_slots),
        ("max_wal_senders", pg.max_wal_senders),
        ("hba_file", str(paths.pg_data / "pg_hba.conf")),
        ("ident_file", str(paths.pg_data / "pg_ident.conf")),
        ("logging_collector", "off"),
        ("log_line_prefix", "%m [%p] %q%u@%d "),
    ]
    lines = ["# Generated by helpers.local.stack on every start; edits are overwritten.", ""]
    lines += [f"{key} = {_pg_conf_value(value)}" for key, value in settings]
    return "\n".join(lines) + "\n"


def render_pg_hba() -> str:
    """Render ``pg_hba.conf``: superuser over the socket by peer map, everyone else TCP+SCRAM.

    Returns:
        The file's text.
    """
    return (
        "# Generated by helpers.local.stack. TYPE DATABASE USER ADDRESS METHOD\n"
        f"local   all          {PG_SUPERUSER:<10} peer map={PG_IDENT_MAP}\n"
        "local   all          all        reject\n"
        f"host    all          all        {LOOPBACK}/32 scram-sha-256\n"
        f"host    replication  all        {LOOPBACK}/32 scram-sha-256\n"
    )


def render_pg_ident(os_users: Sequence[str]) -> str:
    """Render ``pg_ident.conf``: which OS users may act as the superuser over the socket.

    Args:
        os_users: OS user names (root and postgres when run as root).

    Returns:
        The file's text.
    """
    lines = ["# Generated by helpers.local.stack. MAPNAME SYSTEM-USERNAME PG-USERNAME"]
    lines += [f"{PG_IDENT_MAP} {user} {PG_SUPERUSER}" for user in dict.fromkeys(os_users)]
    return "\n".join(lines) + "\n"


def render_mariadb_cnf(
    params: WorkbookParams,
    paths: StackPaths,
    *,
    run_as: str | None,
    version_string: str = DEBEZIUM_VERSION_FALLBACK,
) -> str:
    """Render the MariaDB defaults file passed as ``--defaults-file``.

    Args:
        params: workbook parameters (``local.mariadb``).
        paths: the stack's paths.
        run_as: OS user the server switches to (``None``: the current user).
        version_string: the version the server reports to clients (see the comment in the file).

    Returns:
        The file's text.
    """
    maria = params.local.mariadb
    user_line = f"user = {run_as}\n" if run_as else ""
    return f"""# Generated by helpers.local.stack on every start; edits are overwritten.
[mariadbd]
{user_line}datadir = {paths.maria_data}
socket = {paths.maria_socket}
pid-file = {paths.maria_pid}
log-error = {paths.maria_log}
port = {maria.port}
bind-address = {LOOPBACK}
skip-name-resolve
secure-file-priv = {paths.maria_files}
tmpdir = {paths.maria_tmp}
local_infile = 1
character-set-server = utf8mb4
collation-server = utf8mb4_unicode_ci
default-time-zone = '+00:00'
innodb_buffer_pool_size = 256M

# Change data capture (Debezium MySQL connector reading the binlog)
log_bin = mariadb-bin
server_id = {maria.server_id}
binlog_format = ROW
binlog_row_image = FULL
expire_logs_days = {maria.binlog_expire_days}
# Debezium 3.x has no MariaDB connector in the embedded wheel, so its MySQL connector reads
# MariaDB. It picks its SQL dialect from the server version string: the stock
# "10.11.x-MariaDB-log" makes it send MySQL 8.4 statements (SHOW BINARY LOG STATUS, ...) that
# MariaDB rejects. Reporting the classic "5.5.5-<version>-log" form (the prefix MariaDB itself
# used for old clients) selects the MySQL 5.x code path, and together with binlog_checksum=NONE
# it streamed with 0 lost and 0 duplicated events across restarts (offline-stack-facts.md);
# other variants failed or lost the first change after each restart.
binlog_checksum = NONE
version = {version_string}
"""
