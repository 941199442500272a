"""Every ```python snippet of the storage docs runs, in order, one namespace per page (a later
snippet may use what an earlier one defined); the migration note shows the new entry-point
group and the old one."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def snippets(page: str) -> list[str]:
    """The ```python blocks of a docs page, in order."""
    return _BLOCK.findall((DOCS / page).read_text())


@pytest.mark.parametrize("page", ["storage-plugins.md", "migrating-to-spi-2.md"])
def test_every_python_snippet_runs(page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = snippets(page)
    assert blocks, f"{page} has no python snippet"
    module = types.ModuleType(f"docs_{page.replace('-', '_').removesuffix('.md')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look it up
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"docs/{page} snippet {number}", "exec"), module.__dict__)


def test_the_tiered_storage_snippet_runs_a_broker(tmp_path: Path) -> None:
    """In a process of its own with a time limit: it starts and stops a broker, and a stop
    that hangs fails here instead of hanging the run."""
    blocks = snippets("tiered-storage.md")
    assert blocks, "tiered-storage.md has no python snippet"
    (tmp_path / "server.properties").write_text(
        f"log.dirs={tmp_path / 'data'}\nremote.log.storage.enable=true\n"
        f"remote.storage.manager.class=local\nrsm.config.dir={tmp_path / 'remote'}\n")
    code = "\n".join(blocks)
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("the tiered-storage.md snippet did not finish within 120 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "data").is_dir()


def test_the_migration_note_shows_both_entry_point_groups_and_spi_2() -> None:
    text = (DOCS / "migrating-to-spi-2.md").read_text()
    before, _, after = text.partition("After (SPI 2)")
    assert '[project.entry-points."kafka_tiers.remote_storage"]' in before
    assert '[project.entry-points."kafka_tiers.object_store"]' in after
    assert "ObjectStoreRemoteStorageManager" in before and "from_config" in after
    from kafka_tiers.api import SPI_VERSION

    assert SPI_VERSION.startswith("2.") and '">=2.0,<3"' in after


def test_the_storage_guide_names_the_object_store_group_and_the_clash_rule() -> None:
    text = (DOCS / "storage-plugins.md").read_text()
    assert "`kafka_tiers.object_store`" in text
    assert "the `kafka_tiers.remote_storage` one wins" in text
    assert "migrating-to-spi-2.md" in text
