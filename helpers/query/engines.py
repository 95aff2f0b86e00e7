"""Athena SQL over the Silver tables: the same ``sql/`` files on Amazon Athena, or here on Trino.

A cohesive module: the engines of notebook 05 behind one interface. :func:`open_engine` returns
the environment's :class:`QueryEngine`: :class:`AthenaEngine` on AWS, :class:`TrinoEngine` here
(Athena's engine over the local Hive Metastore, the files unchanged), or :class:`DuckDBEngine`
when ``local.query_engine`` is ``duckdb`` (in-process, the files translated by sqlglot). All
return the same pandas values. :func:`run_sql` and :func:`show_sql` are what notebook 05 calls.
How each engine works: ``docs/architecture.md``, "Reading Silver".

Example:
    >>> engine = open_engine(load_params("ci"))                          # doctest: +SKIP
    >>> engine.prepare("sales_by_seller", "sales_by_seller")              # doctest: +SKIP
    >>> engine.execute("sales_by_seller", [42])                           # doctest: +SKIP
"""

from __future__ import annotations

import getpass
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyathena
import requests
import trino
from IPython.display import Markdown, display
from tqdm.auto import tqdm

from helpers.artefacts import save
from helpers.environments import implementations
from helpers.errors import QueryError, WorkbookError
from helpers.hudi.read import read_snapshot, retry_transient
from helpers.hudi.timeline import completed_instants
from helpers.local.server import LOOPBACK
from helpers.local.trino import HIVE_CATALOG, LocalTrino
from helpers.naming import silver_database
from helpers.params import WorkbookParams
from helpers.query.sql_files import (
    ParameterValue,
    SqlFile,
    athena_literal,
    bind_parameters,
    is_sql_name,
    load_sql,
    referenced_tables,
    sql_dir,
    sql_files,
    sql_markdown,
    to_duckdb,
)
from helpers.silver.catalog import catalog_names, catalog_tables

__all__ = [
    "QueryEngine",
    "AthenaEngine",
    "DuckDBEngine",
    "TrinoEngine",
    "athena_database",
    "open_engine",
    "refusal",
    "run_sql",
    "show_sql",
]


class QueryEngine(ABC):
    """Runs the workbook's SQL files; :class:`AthenaEngine`, :class:`TrinoEngine` and
    :class:`DuckDBEngine` implement it."""

    #: Engine name used in messages (``athena``, ``trino`` or ``duckdb``).
    name: str = "engine"

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or sql_dir()
        self._prepared: dict[str, SqlFile] = {}
        self._views_created: set[str] = set()

    # -- public API ---------------------------------------------------------------------------

    def load(self, sql: str) -> SqlFile:
        """The :class:`SqlFile` for a file name or SQL text (see :func:`load_sql`)."""
        return load_sql(sql, self.folder)

    def query(self, sql: str, parameters: Sequence[ParameterValue] = ()) -> pd.DataFrame:
        """Run one statement and return its rows.

        Args:
            sql: a file name of ``sql/`` (``"top_events"``) or Trino SQL text.
            parameters: values for the ``?`` placeholders, in order (bound, never pasted).

        Returns:
            The result (empty with no columns for statements without rows).

        Raises:
            QueryError: naming the file and the engine, for a wrong parameter count or type, or
                when the engine fails.
        """
        sql_file = self.load(sql)
        values = bind_parameters(sql_file, parameters, self.name)
        self._ensure_views(sql_file)
        return self._run(sql_file, values)

    def prepare(self, name: str, sql: str) -> None:
        """Create (or replace) the prepared statement ``name`` from a file or SQL text.

        Raises:
            QueryError: for an invalid name, a statement that is not a query, or an engine failure.
        """
        if not is_sql_name(name):
            raise QueryError(f"Failed to prepare {name!r}: a statement name is letters, digits and _")
        sql_file = self.load(sql)
        if sql_file.view is not None:
            raise QueryError(f"Failed to prepare {sql_file.label}: only queries can be prepared")
        self._ensure_views(sql_file)
        self._prepare(name, sql_file)
        self._prepared[name] = sql_file

    def execute(self, name: str, parameters: Sequence[ParameterValue] = ()) -> pd.DataFrame:
        """Execute the prepared statement ``name`` with ``parameters`` bound to its ``?``.

        Raises:
            QueryError: if ``name`` was not prepared by this engine, for a wrong parameter count
                or type, or when the engine fails.
        """
        sql_file = self._prepared.get(name)
        if sql_file is None:
            raise QueryError(
                f"Failed to execute prepared statement {name!r} on {self.name}: prepare it first "
                f"(prepared: {sorted(self._prepared)})"
            )
        values = bind_parameters(sql_file, parameters, self.name)
        return self._execute(name, sql_file, values)

    def views(self) -> dict[str, str]:
        """View name -> SQL file name, for every file of the folder that creates a view."""
        out = {}
        for stem in sql_files(self.folder):
            sql_file = self.load(stem)
            if sql_file.view is not None:
                out[sql_file.view] = stem
        return out

    def create_views(self) -> list[str]:
        """Create (or replace) every view defined in the SQL folder; their names."""
        created = []
        for view, stem in sorted(self.views().items()):
            self._run(self.load(stem), [])
            self._views_created.add(view)
            created.append(view)
        return created

    @abstractmethod
    def close(self) -> None:
        """Release the engine's connection."""

    def __enter__(self) -> QueryEngine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- engine specifics ---------------------------------------------------------------------

    def _ensure_views(self, sql_file: SqlFile) -> None:
        views = self.views()
        for name in sorted(referenced_tables(sql_file.statement)):
            if name in views and name not in self._views_created and name != sql_file.view:
                view_file = self.load(views[name])
                self._ensure_views(view_file)
                self._run(view_file, [])
                self._views_created.add(name)

    @abstractmethod
    def _run(self, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame: ...

    @abstractmethod
    def _prepare(self, name: str, sql_file: SqlFile) -> None: ...

    @abstractmethod
    def _execute(self, name: str, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame: ...


# --------------------------------------------------------------------------------------------
# Athena


def _with_elapsed(run: Callable[[], pd.DataFrame], label: str) -> pd.DataFrame:
    """Run ``run`` in a worker thread; a progress line with the elapsed time appears if it takes
    longer than a second (pyathena waits for Athena by polling GetQueryExecution)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(run)
        with tqdm(desc=label, bar_format="{desc}: running {elapsed}", delay=1.0, leave=False) as bar:
            while True:
                try:
                    return future.result(timeout=0.5)
                except FutureTimeout:
                    bar.refresh()


class AthenaEngine(QueryEngine):
    """Amazon Athena through a pyathena connection (the default cursor: results through
    ``GetQueryResults``, no S3 read by the client)."""

    name = "athena"

    def __init__(self, connection: Any, folder: Path | None = None, *, progress: bool = True) -> None:
        """Args:
        connection: ``pyathena.connect(...)`` with the Glue database as ``schema_name``.
        folder: where SQL files live (default :func:`sql_dir`).
        progress: show the elapsed time of a query still running after a second.
        """
        super().__init__(folder)
        self.connection = connection
        self.progress = progress

    def _fetch(self, text: str, literals: list[str]) -> pd.DataFrame:
        cursor = self.connection.cursor()
        try:
            # qmark: pyathena sends the text unchanged and the literals as ExecutionParameters
            cursor.execute(text, literals or None, paramstyle="qmark")
            if cursor.description is None:
                return pd.DataFrame()
            columns = [d[0] for d in cursor.description]
            return pd.DataFrame.from_records(list(cursor.fetchall()), columns=columns)
        finally:
            cursor.close()

    def _send(self, text: str, values: Sequence[ParameterValue], label: str) -> pd.DataFrame:
        literals = [athena_literal(v) for v in values]
        try:
            if not self.progress:
                return self._fetch(text, literals)
            return _with_elapsed(lambda: self._fetch(text, literals), f"Athena: {label}")
        except WorkbookError:
            raise
        except Exception as exc:  # noqa: BLE001 - pyathena/botocore raise many types
            raise QueryError(f"Failed to run {label} on Athena: {exc}") from exc

    def _run(self, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame:
        return self._send(sql_file.statement, values, sql_file.label)

    def _prepare(self, name: str, sql_file: SqlFile) -> None:
        self._send(f"PREPARE {name} FROM\n{sql_file.statement}", [], f"PREPARE {name} ({sql_file.label})")

    def _execute(self, name: str, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame:
        return self._send(f"EXECUTE {name}", values, f"EXECUTE {name} ({sql_file.label})")

    def close(self) -> None:
        """Close the pyathena connection."""
        self.connection.close()


# --------------------------------------------------------------------------------------------
# local: Trino over the local metastore, as Athena over Glue


#: How long a query waits for a just-started Trino to schedule it (``NO_NODES_AVAILABLE``).
_SCHEDULE_WAIT_S = 60.0


class TrinoEngine(QueryEngine):
    """Trino, Athena's engine, through the ``trino`` client: the SQL files run unchanged against
    the local Hive Metastore that Hudi's sync fills (:mod:`helpers.local.trino`). The session's
    catalog is ``hive``, which keeps the views and hands Hudi tables to Trino's Hudi connector.

    Where Trino's Hudi connector and Athena differ, the engine says so instead of answering: the
    real-time view (``_rt``) of a Merge-on-Read table. Athena (engine v3) reads it as a snapshot
    query; Trino 476's connector would answer from the base files alone, without the changes in
    the log files and without an error. The engine refuses it before sending, naming Spark.
    """

    name = "trino"

    def __init__(
        self,
        connection: Any,
        database: str,
        realtime_tables: Mapping[str, str],
        folder: Path | None = None,
        *,
        progress: bool = True,
        on_close: Callable[[], object] | None = None,
    ) -> None:
        """Args:
        connection: ``trino.dbapi.connect(...)`` with catalog ``hive`` and the Silver database as schema.
        database: the Silver database (for messages).
        realtime_tables: catalog name of each ``_rt`` table -> its Merge-on-Read Silver table.
        folder: where SQL files live (default :func:`sql_dir`).
        progress: show the elapsed time of a query still running after a second.
        on_close: called once by :meth:`close` after the connection (the local server's release).
        """
        super().__init__(folder)
        self.on_close = on_close
        self.connection = connection
        self.database = database
        self.realtime_tables = dict(realtime_tables)
        self.progress = progress

    def _refuse_realtime(self, sql_file: SqlFile) -> None:
        # a view the statement reads is created before it runs (_ensure_views), and refused then
        refused = sorted(referenced_tables(sql_file.statement) & set(self.realtime_tables))
        if refused:
            name = refused[0]
            table = self.realtime_tables[name]
            raise QueryError(
                f"Failed to run {sql_file.label} on trino: {name} is the real-time (snapshot) view of the "
                f"Merge-on-Read table {table}, which Trino's Hudi connector does not read: it would answer "
                f"from the base files alone, without the changes in the log files and without an error. "
                f"Read it with Spark, e.g. build_spark_session(params).table('{self.database}.{name}') "
                f"(helpers.spark); Athena reads it on AWS. Here, {table}_ro is readable (read-optimized: "
                f"base files only)"
            )

    def _fetch(self, text: str, values: Sequence[ParameterValue]) -> pd.DataFrame:
        cursor = self.connection.cursor()
        try:
            # qmark: the client sends EXECUTE IMMEDIATE ... USING, the values as typed literals
            cursor.execute(text, list(values) or None)
            rows = cursor.fetchall()
            if not cursor.description:
                return pd.DataFrame()
            columns = [d[0] for d in cursor.description]
            return pd.DataFrame.from_records(rows, columns=columns)
        finally:
            cursor.close()

    def _fetch_when_scheduled(self, text: str, values: Sequence[ParameterValue]) -> pd.DataFrame:
        """:meth:`_fetch`, again while Trino says ``NO_NODES_AVAILABLE``: just after its start, the
        node announces its catalogs to the coordinator within seconds, and a query that scans a
        table fails until then (nothing ran: trying again is safe). Also again when Hudi's library
        inside Trino met a file a writer was half-way through
        (:func:`helpers.hudi.read.retry_transient`: Hudi 0.14's streamer leaves
        ``hoodie.properties`` empty for a few milliseconds every commit); a statement that failed
        returned no rows."""
        deadline = time.monotonic() + _SCHEDULE_WAIT_S
        while True:
            try:
                return retry_transient(lambda: self._fetch(text, values), "")
            except trino.exceptions.TrinoQueryError as exc:
                if exc.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def _send(self, text: str, values: Sequence[ParameterValue], label: str) -> pd.DataFrame:
        try:
            if not self.progress:
                return self._fetch_when_scheduled(text, values)
            return _with_elapsed(lambda: self._fetch_when_scheduled(text, values), f"Trino: {label}")
        except trino.exceptions.TrinoQueryError as exc:
            where = (
                f" at line {exc.error_location[0]}, column {exc.error_location[1]} of the statement"
                if exc.error_location
                else ""
            )
            raise QueryError(
                f"Failed to run {label} on trino{where}: {exc.error_name}: {exc.message}"
            ) from exc
        except (trino.exceptions.Error, requests.RequestException) as exc:
            raise QueryError(
                f"Failed to run {label} on trino: {exc} (is the local Trino server running? "
                "./workbook stack status)"
            ) from exc

    def _run(self, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame:
        self._refuse_realtime(sql_file)
        result = self._send(sql_file.statement, values, sql_file.label)
        return pd.DataFrame() if sql_file.view is not None else result

    def _prepare(self, name: str, sql_file: SqlFile) -> None:
        self._refuse_realtime(sql_file)
        self._send(f"PREPARE {name} FROM\n{sql_file.statement}", [], f"PREPARE {name} ({sql_file.label})")

    def _execute(self, name: str, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame:
        # EXECUTE of a statement the session prepared: the values as literals, as Athena's
        # execution parameters (the client cannot prepare an EXECUTE in turn)
        using = f" USING {', '.join(athena_literal(v) for v in values)}" if values else ""
        return self._send(f"EXECUTE {name}{using}", [], f"EXECUTE {name} ({sql_file.label})")

    def close(self) -> None:
        """Close the client's connection, then release the local server (Trino stops when no other
        engine uses it). A second call does nothing more."""
        self.connection.close()
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            on_close()


# --------------------------------------------------------------------------------------------
# local: DuckDB over the Silver tables


@dataclass
class _Loaded:
    instant: str
    rows: int


class DuckDBEngine(QueryEngine):
    """DuckDB in the process over the Silver tables of the local catalog (the metastore Hudi's
    Hive sync writes), each read by the official Rust reader."""

    name = "duckdb"

    def __init__(
        self,
        catalog: Callable[[], Mapping[str, Mapping[str, Any]]],
        database: str,
        *,
        folder: Path | None = None,
        progress: bool = True,
    ) -> None:
        """Args:
        catalog: returns the catalog tables (:func:`helpers.silver.catalog.catalog_tables`): name ->
            ``location``, ``query_type``.
        database: catalog database (``<project>_cdc_hudi``).
        folder: where SQL files live (default :func:`sql_dir`).
        progress: show a progress bar while tables are read.
        """
        super().__init__(folder)
        self._catalog = catalog
        self._catalog_cache: dict[str, dict[str, Any]] | None = None
        self.database = database
        self.progress = progress
        self.connection: duckdb.DuckDBPyConnection = duckdb.connect()
        self.connection.execute("SET TimeZone = 'UTC'")
        self._loaded: dict[str, _Loaded] = {}
        self._view_tables: dict[str, set[str]] = {}
        self._transpiled: dict[str, str] = {}

    def catalog(self) -> dict[str, dict[str, Any]]:
        """The catalog tables (name -> entry with ``location``, ``query_type``...), read once.

        Raises:
            QueryError: when the catalog database holds no table.
        """
        if not self._catalog_cache:
            tables = {k: dict(v) for k, v in self._catalog().items()}
            if not tables:
                raise QueryError(
                    f"Failed to read the catalog database {self.database!r}: it holds no Silver table; "
                    "run notebook 03 (its commits register the tables through Hudi's Hive sync) first"
                )
            self._catalog_cache = tables
        return self._catalog_cache

    def loaded_tables(self) -> pd.DataFrame:
        """The tables read so far: ``table``, ``instant`` (the Silver commit read), ``rows``."""
        return pd.DataFrame(
            [{"table": k, "instant": v.instant, "rows": v.rows} for k, v in sorted(self._loaded.items())],
            columns=["table", "instant", "rows"],
        )

    def _needed(self, sql_file: SqlFile) -> set[str]:
        out: set[str] = set()
        for name in referenced_tables(sql_file.statement):
            out |= self._view_tables.get(name, {name})
        return out

    def _refresh(self, tables: Iterable[str], label: str) -> None:
        catalog = self.catalog()
        unknown = sorted(t for t in tables if t not in catalog)
        if unknown:
            raise QueryError(
                f"Failed to run {label} on duckdb: unknown table(s) {unknown}; the catalog database "
                f"{self.database} has {sorted(catalog)}"
            )
        stale: list[tuple[str, str]] = []
        for name in sorted(tables):
            instants = completed_instants(catalog[name]["location"])
            if not instants:
                raise QueryError(f"Failed to run {label} on duckdb: table {name} has no completed commit")
            latest = instants[-1].timestamp
            if name not in self._loaded or self._loaded[name].instant != latest:
                stale.append((name, latest))
        if not stale:
            return
        bar = tqdm(stale, desc="reading Silver tables", unit="table", disable=not self.progress, leave=False)
        for name, instant in bar:
            bar.set_postfix_str(name)
            entry = catalog[name]
            table = read_snapshot(
                entry["location"], as_of=instant, read_optimized=entry["query_type"] == "read_optimized"
            )
            self.connection.register(name, table)
            self._loaded[name] = _Loaded(instant, table.num_rows)

    def _duckdb_sql(self, sql_file: SqlFile) -> str:
        key = sql_file.statement
        if key not in self._transpiled:
            self._transpiled[key] = to_duckdb(sql_file.statement, sql_file.label)
        return self._transpiled[key]

    def _run(self, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame:
        needed = self._needed(sql_file)
        self._refresh(needed, sql_file.label)
        statement = self._duckdb_sql(sql_file)
        try:
            relation = self.connection.sql(statement, params=values or None)
        except duckdb.Error as exc:
            raise QueryError(f"Failed to run {sql_file.label} on duckdb: {exc}") from exc
        if sql_file.view is not None:
            self._view_tables[sql_file.view] = needed
            return pd.DataFrame()  # as Athena: a DDL statement has no rows
        if relation is None:
            return pd.DataFrame()
        try:
            table = relation.to_arrow_table()
        except duckdb.Error as exc:
            raise QueryError(f"Failed to run {sql_file.label} on duckdb: {exc}") from exc
        return _to_pandas(table, [str(t) for t in relation.types])

    def _prepare(self, name: str, sql_file: SqlFile) -> None:
        self._duckdb_sql(sql_file)  # transpile errors surface at prepare time, as on Athena

    def _execute(self, name: str, sql_file: SqlFile, values: list[ParameterValue]) -> pd.DataFrame:
        return self._run(sql_file, values)

    def close(self) -> None:
        """Close the DuckDB connection."""
        self.connection.close()


def _to_pandas(table: pa.Table, duckdb_types: Sequence[str]) -> pd.DataFrame:
    """Arrow to pandas as pyathena returns Athena's rows: integers (and DuckDB's HUGEINT sums,
    Arrow decimal(38,0), which are Trino's bigint sums) as 64-bit integers; decimals stay exact
    (Decimal objects); dates as ``datetime.date``."""
    columns = []
    for column, kind in zip(table.columns, duckdb_types, strict=True):
        wide = (
            kind == "HUGEINT"
            or pa.types.is_signed_integer(column.type)
            or pa.types.is_unsigned_integer(column.type)
        )
        columns.append(pc.cast(column, pa.int64()) if wide else column)
    fixed = pa.table(columns, names=table.column_names)
    return fixed.to_pandas()


# --------------------------------------------------------------------------------------------
# entry points


def athena_database(params: WorkbookParams) -> str:
    """The catalog database the SQL runs against: ``aws.athena.database`` or the Silver database
    (:func:`helpers.naming.silver_database`, where Hudi's Hive sync registers the tables)."""
    if params.aws is not None and params.aws.athena.database:
        return params.aws.athena.database

    return silver_database(params)


def open_engine(
    params: WorkbookParams,
    *,
    athena_connection: Any = None,
    folder: Path | None = None,
    progress: bool = True,
) -> QueryEngine:
    """The query engine of the environment: Athena on AWS; here Trino over the local metastore
    (started if it is not running, and stopped when the last engine using it closes), or
    DuckDB over the Silver tables when ``local.query_engine`` is ``duckdb``.

    Args:
        params: workbook parameters.
        athena_connection: a pyathena connection to use on AWS (tests pass one whose client is
            stubbed); default: ``pyathena.connect`` with ``aws.region``, ``aws.athena.workgroup``,
            ``aws.athena.output_location`` (default ``s3://<s3_bucket>/athena-results/``) and the
            database of :func:`athena_database`.
        folder: where SQL files live (default :func:`sql_dir`).
        progress: show progress: tables being read (local), a query's elapsed time (Athena).

    Returns:
        The engine.

    Raises:
        QueryError: when AWS settings are missing.
    """
    query = implementations(params).query
    if query == "athena" or athena_connection is not None:
        if athena_connection is None:
            if params.aws is None:
                raise QueryError("Failed to open Athena: the 'aws' parameters are missing")
            athena = params.aws.athena
            athena_connection = pyathena.connect(
                region_name=params.aws.region,
                work_group=athena.workgroup,
                s3_staging_dir=athena.output_location or f"s3://{params.aws.s3_bucket}/athena-results/",
                schema_name=athena_database(params),
            )
        return AthenaEngine(athena_connection, folder, progress=progress)
    if query == "trino":
        database = athena_database(params)
        server = LocalTrino(params)
        claim = server.acquire()  # started on demand (about 13 s), stopped after the last close
        realtime = {
            name: table.name
            for table in params.silver.tables
            for name in catalog_names(table)
            if name.endswith("_rt")
        }
        connection = trino.dbapi.connect(  # type: ignore[no-untyped-call]
            host=LOOPBACK,
            port=params.local.trino.port,
            user=getpass.getuser(),
            catalog=HIVE_CATALOG,
            schema=database,
            source="workbook",
        )
        return TrinoEngine(
            connection, database, realtime, folder, progress=progress, on_close=lambda: server.release(claim)
        )
    return DuckDBEngine(
        lambda: catalog_tables(params), athena_database(params), folder=folder, progress=progress
    )


def refusal(engine: QueryEngine, sql: str) -> pd.DataFrame | str:
    """Run ``sql`` where the engine may refuse it (notebook 05 shows where the local Trino and
    Athena differ):
    its rows, or the refusal's message, also displayed.

    Raises:
        QueryError: never for the statement itself (its failure is the answer); only a wrong call.
    """
    try:
        return engine.query(sql)
    except QueryError as exc:
        display(Markdown(f"> **{engine.name} refuses it:** {exc}"))  # type: ignore[no-untyped-call]
        return str(exc)


def show_sql(engine: QueryEngine, name: str) -> SqlFile:
    """Display a SQL file's label and text (Markdown in a notebook) and return it."""
    sql_file = engine.load(name)
    display(Markdown(sql_markdown(sql_file)))  # type: ignore[no-untyped-call]
    return sql_file


def run_sql(
    engine: QueryEngine,
    name: str,
    parameters: Sequence[ParameterValue] = (),
    *,
    folder: Path,
    prefix: str = "",
    prepared: bool = False,
    show: bool = True,
) -> pd.DataFrame:
    """Show a SQL file, run it with bound parameters and save its rows as ``<prefix><name>.csv``.

    Args:
        engine: the engine (:func:`open_engine`).
        name: a file name of ``sql/``.
        parameters: values for its ``?`` placeholders.
        folder: where the CSV goes (:func:`helpers.artefacts.artefact_dir`).
        prefix: file name prefix (``"05_"``).
        prepared: prepare the statement as ``name``, then execute it with ``parameters``.
        show: display the SQL text first (:func:`show_sql`).

    Returns:
        The rows (as saved).

    Raises:
        QueryError: as :meth:`QueryEngine.query`.
    """
    if show:
        show_sql(engine, name)
    if prepared:
        engine.prepare(name, name)
        result = engine.execute(name, parameters)
    else:
        result = engine.query(name, parameters)
    return save(result, folder, f"{prefix}{name}")
