"""The metastore client's ``hive-site.xml`` (it holds the password) is replaced whole, 0600, also
when sessions are built at the same time: parity's checks build one from several threads."""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers.local.metastore import LocalMetastore
from helpers.params import load_params


def test_concurrent_writers_each_replace_the_file_whole_and_leave_no_temporary(tmp_path: Path) -> None:
    metastore = LocalMetastore(load_params("ci", {"state_dir": str(tmp_path / "st")}))
    first = metastore.write_client_conf() / "hive-site.xml"
    wanted = first.read_text()
    assert "javax.jdo.option.ConnectionPassword" in wanted

    with ThreadPoolExecutor(max_workers=8) as pool:
        folders = list(pool.map(lambda _: metastore.write_client_conf(), range(400)))

    assert set(folders) == {metastore.client_conf_dir}
    target = metastore.client_conf_dir / "hive-site.xml"
    assert target.read_text() == wanted
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in metastore.client_conf_dir.iterdir()) == ["hive-site.xml"]
