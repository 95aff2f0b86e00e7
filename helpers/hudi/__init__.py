"""Apache Hudi v6 tables from Python: a Copy-on-Write / Merge-on-Read writer (pyarrow core,
distributed by PySpark) validated against the official reader (PyPI ``hudi``).

Writer-side public API (the read side appends its own exports below).
"""

from helpers.hudi.config import COPY_ON_WRITE, MERGE_ON_READ, HudiTableConfig
from helpers.hudi.inspect import table_file_groups, table_size, table_timeline
from helpers.hudi.spark_writer import write_dataframe
from helpers.hudi.writer import CommitResult, clean, compact, write_arrow

__all__ = [
    "COPY_ON_WRITE",
    "MERGE_ON_READ",
    "HudiTableConfig",
    "CommitResult",
    "write_arrow",
    "write_dataframe",
    "compact",
    "clean",
    "table_timeline",
    "table_file_groups",
    "table_size",
]

# --- Read side and the engine-choosing front-ends (helpers.hudi.read / api / spark_source) ----
from helpers.hudi.api import HudiWriteResult, parse_write_options, write_hudi  # noqa: E402
from helpers.hudi.read import (  # noqa: E402
    parse_read_options,
    read_hudi,
    read_hudi_pandas,
    read_incremental,
    read_snapshot,
)
from helpers.hudi.spark_source import HudiRsDataSource, read_hudi_df  # noqa: E402

__all__ += [
    "HudiRsDataSource",
    "HudiWriteResult",
    "parse_read_options",
    "parse_write_options",
    "read_hudi",
    "read_hudi_df",
    "read_hudi_pandas",
    "read_incremental",
    "read_snapshot",
    "write_hudi",
]
