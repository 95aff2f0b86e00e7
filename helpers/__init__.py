"""Typed helper package behind the change-data-capture lakehouse workbook.

A foundation and one folder per pipeline stage, in the order data flows; a stage imports only the
stages and the foundation below it (checked by ``lint-imports``). The layer map is in
``docs/architecture.md``. Only :class:`~helpers.errors.WorkbookError` and ``__version__`` are
exported here; import from the modules.
"""

from helpers.errors import WorkbookError

__all__ = ["WorkbookError", "__version__"]

__version__ = "0.1.0"
