"""The shape of the package: what the stable surface may hold and where things live.

These rules keep the layers apart (``kafka_tiers.api`` at the bottom, the CLI at the top) and
keep machinery out of the surface plugins depend on: any change of ``kafka_tiers.api`` is an
SPI change, so it holds contracts only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kafka_tiers

PACKAGE = Path(kafka_tiers.__file__).parent
API = PACKAGE / "api"

#: the most lines the stable surface may hold (contracts, value types, errors): 1600 for the
#: placer and storage interfaces, plus 350 for the authorizer interface SPI 2.1 added
API_MAX_LINES = 1950

#: modules allowed at the package root: the package itself, ``python -m kafka_tiers``, and
#: the configuration layer's entry point; everything else lives in a package of its layer
ROOT_MODULES = {"__init__.py", "__main__.py", "config.py"}


def _classes(path: Path) -> list[ast.ClassDef]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def _base_names(cls: ast.ClassDef) -> set[str]:
    names = set()
    for base in cls.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def test_the_stable_surface_is_small() -> None:
    lines = sum(len(p.read_text().splitlines()) for p in API.rglob("*.py"))
    assert lines < API_MAX_LINES, (
        f"kafka_tiers/api holds {lines} lines (limit {API_MAX_LINES}): machinery belongs in the "
        "core")


def test_the_stable_surface_holds_no_storage_manager_implementation() -> None:
    for path in sorted(API.rglob("*.py")):
        for cls in _classes(path):
            assert "RemoteStorageManager" not in _base_names(cls), (
                f"{path.relative_to(PACKAGE.parent)}: class {cls.name} implements "
                "RemoteStorageManager inside kafka_tiers.api")


def test_no_loose_modules_at_the_package_root() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ROOT_MODULES)
    assert loose == [], f"modules at the package root outside a layer's package: {loose}"


def test_the_package_ships_its_type_information() -> None:
    assert (PACKAGE / "py.typed").is_file()


def test_the_log_engine_imports_neither_the_broker_nor_the_cluster() -> None:
    """The log engine is below the broker: the admin channel and the broker assembly import
    it, never the other way round."""
    for path in sorted((PACKAGE / "log").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            else:
                continue
            assert not module.startswith(("kafka_tiers.broker", "kafka_tiers.cluster",
                                          "kafka_tiers.cli")), (
                f"{path.relative_to(PACKAGE.parent)} imports {module}")
