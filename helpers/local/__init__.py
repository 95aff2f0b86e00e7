"""The workbook's local servers, in one room.

Every server the local profiles start on 127.0.0.1 lives here, each on the one start/stop/status
code path of :class:`helpers.local.server.LocalServer` (a pid file, a log, loopback ports checked
before the start, a bounded heap or buffer pool, readiness with a time limit, one status row):

- :mod:`~helpers.local.postgres` and :mod:`~helpers.local.mariadb`: the source databases, and
  :mod:`~helpers.local.stack` (``./workbook stack``), which starts and stops the whole set;
- :mod:`~helpers.local.metastore`: the Hive Metastore service (the local Glue), and
  :mod:`~helpers.local.trino`: Trino over it (the local Athena), on :mod:`~helpers.local.java`'s Java;
- :mod:`~helpers.local.s3`: the lake's S3 server (S3Proxy);
- :mod:`~helpers.local.spark_cluster`: the Spark standalone master and worker;
- :mod:`~helpers.local.kafka` and :mod:`~helpers.local.registry`: the local-kafka profile's
  broker, Connect worker and schema registry;
- :mod:`~helpers.local.lab`: JupyterLab.

The room sits below every pipeline stage: stages import it, it imports only the foundation.
"""
