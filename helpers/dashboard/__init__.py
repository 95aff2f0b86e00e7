"""Dashboard: :mod:`~helpers.dashboard.datasets` (SQL datasets, pipeline health) feed the plotly
builders of :mod:`~helpers.dashboard.figures`; :mod:`~helpers.dashboard.page` writes the standalone page."""
