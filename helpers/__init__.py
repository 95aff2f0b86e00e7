"""Typed helper package behind the change-data-capture lakehouse workbook.

Sub-modules:

* :mod:`helpers.params` - layered, validated parameters (``params/*.yaml``);
* :mod:`helpers.stack` - local PostgreSQL and MariaDB servers on 127.0.0.1;
* :mod:`helpers.tickit`, :mod:`helpers.outbox`, :mod:`helpers.loading` - sample data;
* :mod:`helpers.cdc` - enabling and checking change data capture (local and Amazon RDS);
* :mod:`helpers.hudi` - Apache Hudi v6 tables (writer, official reader, inspection);
* :mod:`helpers.runner` - papermill runner for the notebooks.
"""

from helpers.errors import WorkbookError

__all__ = ["WorkbookError", "__version__"]

__version__ = "0.1.0"
