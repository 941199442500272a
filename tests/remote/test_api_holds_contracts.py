"""``kafka_tiers.api`` holds the storage contracts, not machinery: no storage manager is
implemented in it, the object-store tier lives in the core, and the package stays small."""

from __future__ import annotations

import inspect
from pathlib import Path

import kafka_tiers.api as api
from kafka_tiers.api import MultipartObjectStore, ObjectStore, RemoteStorageManager

API_DIR = Path(api.__file__).parent
#: issue 12: the whole public package under this many lines (issue 15: plus 350 for the
#: authorizer interface of SPI 2.1; tests/test_architecture.py holds the same budget)
MAX_API_LINES = 1950


def test_the_api_package_is_small() -> None:
    lines = sum(len(p.read_text().splitlines()) for p in API_DIR.glob("*.py"))
    assert 0 < lines < MAX_API_LINES, f"kafka_tiers/api holds {lines} lines"


def test_no_storage_manager_is_implemented_in_the_api() -> None:
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules([str(API_DIR)]):
        module = importlib.import_module(f"kafka_tiers.api.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, RemoteStorageManager):
                assert cls is RemoteStorageManager and inspect.isabstract(cls), cls
    assert not hasattr(api, "ObjectStoreRemoteStorageManager")


def test_the_object_store_contract_stays_abstract() -> None:
    assert {"put", "get", "delete_many", "list"} <= ObjectStore.__abstractmethods__
    assert {"put_object", "create_multipart_upload", "upload_part",
            "complete_multipart_upload", "abort_multipart_upload"} <= (
        MultipartObjectStore.__abstractmethods__)
    for optional in ("from_config", "translate_error", "collect_garbage", "close"):
        assert optional not in ObjectStore.__abstractmethods__
