"""The SDK's own plain transfer, as the baseline of ``benchmarks/remote_backends.py``: one
``upload_blob`` / ``download_blob`` with the SDK's defaults, no kafka-tiers in between.

Both take an Azurite handle (``tests.servers.azurite.AzuriteServer``: ``connection_string``)
and use the container :data:`CONTAINER`, created on first use.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient, ContainerClient

#: The container the plain transfers use.
CONTAINER = "kt-plain-transfer"


def _container(server_handle: Any) -> ContainerClient:
    service = BlobServiceClient.from_connection_string(server_handle.connection_string)
    container = service.get_container_client(CONTAINER)
    with contextlib.suppress(ResourceExistsError):
        container.create_container()
    return container


def plain_upload(server_handle: Any, path: str | Path) -> float:
    """Upload the file at ``path`` as blob ``<file name>`` with ``upload_blob`` (overwrite);
    returns the seconds the upload took (client set-up excluded)."""
    path = Path(path)
    with _container(server_handle) as container, open(path, "rb") as fh:
        start = time.perf_counter()
        container.upload_blob(path.name, fh, length=path.stat().st_size, overwrite=True)
        return time.perf_counter() - start


def plain_download(server_handle: Any, key: str) -> tuple[bytes, float]:
    """Download blob ``key`` whole with ``download_blob().readall()``; returns its bytes and
    the seconds it took (client set-up excluded)."""
    with _container(server_handle) as container:
        start = time.perf_counter()
        data = container.download_blob(key).readall()
        return data, time.perf_counter() - start


__all__ = ["CONTAINER", "plain_download", "plain_upload"]
