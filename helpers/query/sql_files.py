"""The workbook's SQL files (``sql/``): loading, the tables a statement reads, Trino-to-DuckDB
transpiling and parameter values.

Queries are written once, in Athena's dialect (Trino), one statement per file. Each file starts
with a comment header saying what it returns (or creates) and its parameters; parameters are ``?``
placeholders, bound by position, never pasted into the SQL text. Table names are the catalog
names Hudi's Hive sync registers (``sale``, ``sale_mor_ro``, ``sale_mor_rt``...), unqualified. A
file whose statement is ``CREATE OR REPLACE VIEW`` defines a view.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import sqlglot
from sqlglot import exp

from helpers.errors import QueryError
from helpers.params import data_dir

__all__ = [
    "ParameterValue",
    "SqlFile",
    "athena_literal",
    "bind_parameters",
    "is_sql_name",
    "load_sql",
    "referenced_tables",
    "sql_dir",
    "sql_files",
    "sql_markdown",
    "to_duckdb",
]

ParameterValue = int | str | Decimal | dt.date
"""Types a ``?`` parameter may take: integers, strings, decimals and dates (not datetimes)."""

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VIEW_RE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def sql_dir() -> Path:
    """The folder of the workbook's SQL files (``sql/``; in an installed wheel, the copy it ships)."""
    return data_dir("sql")


@dataclass(frozen=True)
class SqlFile:
    """One SQL statement, from a file of ``sql/`` or given inline.

    Attributes:
        name: file name without ``.sql`` (``"<inline>"`` for inline SQL).
        text: the whole text, header comment included.
        header: the header comment (what the statement returns, its parameters), without ``--``.
        statement: the statement alone (header and trailing ``;`` removed): what is sent.
        placeholders: number of ``?`` parameters.
        view: name of the view the statement creates, or None.
    """

    name: str
    text: str
    header: str
    statement: str
    placeholders: int
    view: str | None

    @property
    def label(self) -> str:
        """How errors name it: ``sql/<name>.sql`` or ``inline SQL``."""
        return "inline SQL" if self.name == "<inline>" else f"sql/{self.name}.sql"


def is_sql_name(name: str) -> bool:
    """Whether ``name`` can name a SQL file or a prepared statement (letters, digits and ``_``)."""
    return bool(_NAME_RE.match(name))


def sql_files(folder: Path | None = None) -> list[str]:
    """Names (without ``.sql``) of the SQL files in ``folder`` (default :func:`sql_dir`), sorted."""
    return sorted(p.stem for p in (folder or sql_dir()).glob("*.sql"))


def _split_header(text: str) -> tuple[str, str]:
    lines = text.strip().splitlines()
    header: list[str] = []
    while lines and (lines[0].lstrip().startswith("--") or not lines[0].strip()):
        line = lines.pop(0).strip()
        if line:
            header.append(line[2:].strip())
    return "\n".join(header), "\n".join(lines).strip().rstrip(";").strip()


def _count_placeholders(statement: str, label: str) -> int:
    try:
        tree = sqlglot.parse_one(statement, read="trino")
    except sqlglot.errors.ParseError as exc:
        raise QueryError(f"Failed to parse {label} as Trino SQL: {exc}") from None
    return sum(1 for _ in tree.find_all(exp.Placeholder))


def load_sql(sql: str, folder: Path | None = None) -> SqlFile:
    """Load a statement: a file name of ``sql/`` (with or without ``.sql``), or SQL text.

    Args:
        sql: ``"top_events"``, ``"top_events.sql"``, or a statement such as ``"SELECT 1"``.
        folder: where SQL files live (default :func:`sql_dir`).

    Returns:
        The parsed file.

    Raises:
        QueryError: for a missing file, more than one statement, or SQL sqlglot cannot parse.
    """
    folder = folder or sql_dir()
    stem = sql.removesuffix(".sql")
    if _NAME_RE.match(stem):
        path = folder / f"{stem}.sql"
        if not path.exists():
            files = ", ".join(sql_files(folder))
            raise QueryError(f"Failed to load sql/{stem}.sql: no such file in {folder} (files: {files})")
        name, text = stem, path.read_text(encoding="utf-8")
    else:
        name, text = "<inline>", sql
    header, statement = _split_header(text)
    label = "inline SQL" if name == "<inline>" else f"sql/{name}.sql"
    if not statement:
        raise QueryError(f"Failed to load {label}: it holds no statement")
    try:
        statements = [s for s in sqlglot.parse(statement, read="trino") if s is not None]
    except sqlglot.errors.ParseError as exc:
        raise QueryError(f"Failed to parse {label} as Trino SQL: {exc}") from None
    if len(statements) != 1:
        raise QueryError(f"Failed to load {label}: one statement per file, found {len(statements)}")
    view = _VIEW_RE.match(statement)
    return SqlFile(
        name=name,
        text=text,
        header=header,
        statement=statement,
        placeholders=_count_placeholders(statement, label),
        view=view.group(1).lower() if view else None,
    )


def referenced_tables(statement: str) -> set[str]:
    """Names of the tables and views a Trino statement reads (CTE names excluded), lower case.

    Raises:
        QueryError: if the statement cannot be parsed.
    """
    try:
        tree = sqlglot.parse_one(statement, read="trino")
    except sqlglot.errors.ParseError as exc:
        raise QueryError(f"Failed to parse SQL: {exc}") from None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    created = _VIEW_RE.match(statement)
    names = {t.name.lower() for t in tree.find_all(exp.Table) if t.name}
    if created:
        names.discard(created.group(1).lower())
    return names - ctes


def to_duckdb(statement: str, label: str = "inline SQL") -> str:
    """Transpile one Trino (Athena) statement to DuckDB's dialect with sqlglot.

    Args:
        statement: the statement.
        label: how errors name it.

    Returns:
        The DuckDB statement (``?`` placeholders kept, bound by DuckDB).

    Raises:
        QueryError: naming ``label`` when sqlglot cannot parse or translate it.
    """
    try:
        out = sqlglot.transpile(
            statement, read="trino", write="duckdb", unsupported_level=sqlglot.ErrorLevel.RAISE
        )
    except (sqlglot.errors.ParseError, sqlglot.errors.UnsupportedError) as exc:
        raise QueryError(f"Failed to transpile {label} from Trino to DuckDB: {exc}") from None
    if len(out) != 1:
        raise QueryError(f"Failed to transpile {label}: one statement expected, got {len(out)}")
    return out[0]


def _check_value(value: object, position: int, label: str) -> ParameterValue:
    if isinstance(value, bool) or not isinstance(value, int | str | Decimal | dt.date):
        raise QueryError(
            f"Failed to bind parameter {position} of {label}: {type(value).__name__} values are not "
            "supported; use int, str, decimal.Decimal or datetime.date"
        )
    if isinstance(value, dt.datetime):
        raise QueryError(
            f"Failed to bind parameter {position} of {label}: datetime values are not supported; "
            "pass a datetime.date, or compare with a date column"
        )
    if isinstance(value, Decimal) and not value.is_finite():
        raise QueryError(f"Failed to bind parameter {position} of {label}: {value} is not a finite decimal")
    return value


def athena_literal(value: ParameterValue) -> str:
    """The SQL literal text Athena's ``ExecutionParameters`` take for one value.

    Integers become digits, strings a quoted literal with every ``'`` doubled (so a value can never
    end the literal), decimals ``DECIMAL '12.50'``, dates ``DATE '2008-01-05'``.

    Args:
        value: int, str, Decimal or date.

    Returns:
        The literal, e.g. ``"'O''Brien'"`` for ``"O'Brien"``.

    Raises:
        QueryError: for any other type (bool, float, datetime, None...), a non-finite decimal, or
            a string holding a NUL character.

    Example:
        >>> athena_literal("x' OR '1'='1")
        "'x'' OR ''1''=''1'"
    """
    checked = _check_value(value, 1, "a parameter")
    if isinstance(checked, int):
        return str(int(checked))
    if isinstance(checked, str):
        if "\x00" in checked:
            raise QueryError("Failed to bind a parameter: strings may not contain NUL characters")
        return "'" + checked.replace("'", "''") + "'"
    if isinstance(checked, Decimal):
        return f"DECIMAL '{checked:f}'"
    return f"DATE '{checked.isoformat()}'"


def bind_parameters(sql_file: SqlFile, parameters: Sequence[object], engine: str) -> list[ParameterValue]:
    """The values for ``sql_file``'s ``?`` placeholders, checked.

    Raises:
        QueryError: naming the file and ``engine``, for a wrong count or an unsupported type.
    """
    if isinstance(parameters, str | bytes):
        raise QueryError(
            f"Failed to run {sql_file.label} on {engine}: parameters must be a sequence of values"
        )
    values = [_check_value(v, i + 1, sql_file.label) for i, v in enumerate(parameters)]
    if len(values) != sql_file.placeholders:
        raise QueryError(
            f"Failed to run {sql_file.label} on {engine}: it has {sql_file.placeholders} parameter(s) (?), "
            f"got {len(values)} value(s)"
        )
    return values


def sql_markdown(sql_file: SqlFile) -> str:
    """Markdown showing a statement: its label, then its whole text in a ``sql`` code block."""
    return f"`{sql_file.label}`\n```sql\n{sql_file.text.strip()}\n```"
