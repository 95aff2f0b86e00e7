"""How the lake's clients reach the local S3 server, without the server: the connection exists
only when ``local.s3.enabled``; boto3, s3a and the Rust reader get its endpoint; no secret shows
in a ``repr`` or in the settings that PySpark passes on the ``spark-submit`` command line."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from helpers.errors import ParamsError
from helpers.lake_store import hudi_storage_options, lake_s3, s3_client, use_lake_s3
from helpers.local.s3 import LocalS3Server, local_s3_connection
from helpers.params import load_params
from helpers.spark import s3a_conf


def test_no_local_s3_unless_enabled(tmp_path: Path) -> None:
    """The default profile keeps the lake on the file system: no connection, no keys file, and the
    Rust reader gets no storage options."""
    params = load_params("local", {"state_dir": str(tmp_path)})
    assert params.local.s3.enabled is False
    assert local_s3_connection(params) is None
    assert use_lake_s3(params) is None and lake_s3() is None
    assert hudi_storage_options("s3://bucket/silver/t") == {}
    assert not (tmp_path / "s3").exists()


def test_enabled_local_s3_reaches_boto3_s3a_and_the_rust_reader(tmp_path: Path) -> None:
    """Enabled: keys generated once into a 0600 file; boto3's client, the s3a settings and the Rust
    reader's options name the endpoint on 127.0.0.1; the secret is in no repr and not among the
    builder settings (they go to spark-submit's argv)."""
    params = load_params("ci", {"state_dir": str(tmp_path), "local.s3.enabled": True, "local.s3.port": 18999})
    try:
        connection = use_lake_s3(params)
        assert connection is not None and connection == LocalS3Server(params).connection()
        keys = tmp_path / "s3" / "keys.json"
        assert stat.S_IMODE(keys.stat().st_mode) == 0o600
        assert connection.endpoint_url == "http://127.0.0.1:18999"
        assert connection.secret_key not in repr(connection)
        client = s3_client()
        assert client.meta.endpoint_url == "http://127.0.0.1:18999"
        assert client.meta.config.s3 == {"addressing_style": "path"}
        conf = s3a_conf(connection)
        assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:18999"
        assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
        assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
        assert not [v for v in conf.values() if connection.secret_key in v or connection.access_key in v]
        options = hudi_storage_options("s3://workbook-lake/silver/sale")
        assert options["aws_endpoint_url"] == "http://127.0.0.1:18999"
        assert options["aws_allow_http"] == "true"
        assert options["aws_secret_access_key"] == connection.secret_key
        assert hudi_storage_options(str(tmp_path / "silver")) == {}
    finally:
        use_lake_s3(load_params("local", {"state_dir": str(tmp_path)}))


def test_local_s3_params_are_checked() -> None:
    """A bucket name S3 would refuse and an unknown key fail at load time, naming the key."""
    with pytest.raises(ParamsError, match="local.s3.bucket"):
        load_params("local", {"local.s3.bucket": "Bad_Bucket"})
    with pytest.raises(ParamsError, match="local.s3.memory"):
        load_params("local", {"local.s3.memory": "1g"})
