"""Every ```python snippet of the storage docs runs, in order, one namespace per page (a later
snippet may use what an earlier one defined); the migration note shows the new entry-point
group and the old one."""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("storage-plugins.md", "migrating-to-spi-2.md", "tiered-storage.md")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def snippets(page: str) -> list[str]:
    """The ```python blocks of a docs page, in order."""
    return _BLOCK.findall((DOCS / page).read_text())


@pytest.mark.parametrize("page", PAGES)
def test_every_python_snippet_runs(page: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = snippets(page)
    assert blocks, f"{page} has no python snippet"
    # tiered-storage.md starts a broker from ./server.properties
    (tmp_path / "server.properties").write_text(
        f"log.dirs={tmp_path / 'data'}\nremote.log.storage.enable=true\n"
        f"remote.storage.manager.class=local\nrsm.config.dir={tmp_path / 'remote'}\n")
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType(f"docs_{page.replace('-', '_').removesuffix('.md')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look it up
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"docs/{page} snippet {number}", "exec"), module.__dict__)
    assert os.getcwd() == str(tmp_path)


def test_the_migration_note_shows_both_entry_point_groups_and_spi_2() -> None:
    text = (DOCS / "migrating-to-spi-2.md").read_text()
    before, _, after = text.partition("After (SPI 2)")
    assert '[project.entry-points."kafka_tiers.remote_storage"]' in before
    assert '[project.entry-points."kafka_tiers.object_store"]' in after
    assert "ObjectStoreRemoteStorageManager" in before and "from_config" in after
    from kafka_tiers.api import SPI_VERSION

    assert SPI_VERSION == "2.0.0" and '">=2.0,<3"' in after


def test_the_storage_guide_names_the_object_store_group_and_the_clash_rule() -> None:
    text = (DOCS / "storage-plugins.md").read_text()
    assert "`kafka_tiers.object_store`" in text
    assert "the `kafka_tiers.remote_storage` one wins" in text
    assert "migrating-to-spi-2.md" in text
