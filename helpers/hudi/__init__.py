"""Apache Hudi v6 tables from Python: a Copy-on-Write / Merge-on-Read writer (pyarrow core,
distributed by PySpark) validated against the official reader (PyPI ``hudi``).

Writer-side public API (the read side appends its own exports below).
"""

from helpers.hudi.config import COPY_ON_WRITE, MERGE_ON_READ, HudiTableConfig
from helpers.hudi.writer import CommitResult, clean, compact, write_arrow

__all__ = [
    "COPY_ON_WRITE",
    "MERGE_ON_READ",
    "HudiTableConfig",
    "CommitResult",
    "write_arrow",
    "compact",
    "clean",
]
