"""``table_exists``: a Hudi table is where ``hoodie.properties`` or its rewrite backup is."""

from __future__ import annotations

from pathlib import Path

from helpers.hudi.timeline import table_exists


def test_a_table_is_there_while_its_properties_are_rewritten(tmp_path: Path) -> None:
    """No ``.hoodie``: no table. ``hoodie.properties``: a table. Only the backup, as Hudi 0.14's
    writer leaves the folder for a moment every commit: still a table. An empty ``.hoodie``: none."""
    base = tmp_path / "date"
    assert not table_exists(str(base))
    hoodie = base / ".hoodie"
    hoodie.mkdir(parents=True)
    assert not table_exists(str(base))
    (hoodie / "hoodie.properties").write_text("hoodie.table.name=date\n")
    assert table_exists(str(base))
    (hoodie / "hoodie.properties").rename(hoodie / "hoodie.properties.backup")
    assert table_exists(str(base))
    (hoodie / "hoodie.properties.backup").unlink()
    assert not table_exists(str(base))
