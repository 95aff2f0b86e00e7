"""Deploying the workbook to AWS: the package, the EMR cluster, notebook executions."""
