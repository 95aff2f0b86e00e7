"""Apache Hudi tables: written and read by the official Hudi Spark datasource (:mod:`.api`), read
for pandas and DuckDB by the official Rust reader (PyPI ``hudi``, :mod:`.read`), the timeline
read for the workbook's own state (:mod:`.timeline`)."""

from helpers.hudi.api import HudiCommit, read_hudi_df, write_hudi, write_options
from helpers.hudi.config import COPY_ON_WRITE, MERGE_ON_READ, HudiTableConfig
from helpers.hudi.inspect import table_file_groups, table_size, table_timeline
from helpers.hudi.read import parse_read_options, read_hudi, read_hudi_pandas, read_incremental, read_snapshot

__all__ = [
    "COPY_ON_WRITE",
    "MERGE_ON_READ",
    "HudiCommit",
    "HudiTableConfig",
    "parse_read_options",
    "read_hudi",
    "read_hudi_df",
    "read_hudi_pandas",
    "read_incremental",
    "read_snapshot",
    "table_file_groups",
    "table_size",
    "table_timeline",
    "write_hudi",
    "write_options",
]
