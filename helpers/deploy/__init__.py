"""Deploying the workbook to AWS: the package for EMR, the EMR cluster, notebook executions."""
