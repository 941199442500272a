"""Baselines for the remote-backend benchmark: boto3's own high-level transfers, with its
defaults, to compare the plugin's copy and fetch against.

``server_handle`` is the ``s3_server`` fixture's handle (``tests/servers/moto_s3.py``) or
anything with ``client()`` (a boto3 S3 client) and a ``bucket`` attribute naming an existing
bucket (when it has none, ``plain_upload`` creates one and sets it).
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any


def _bucket(server_handle: Any) -> str:
    bucket = getattr(server_handle, "bucket", None)
    if not bucket:
        bucket = server_handle.create_bucket()
        server_handle.bucket = bucket
    return str(bucket)


def plain_upload(server_handle: Any, path: str | Path) -> float:
    """Upload the file at ``path`` with boto3's ``upload_file`` under the key of its file name;
    returns the seconds it took."""
    client = server_handle.client()
    bucket = _bucket(server_handle)
    started = time.perf_counter()
    client.upload_file(str(path), bucket, Path(path).name)
    return time.perf_counter() - started


def plain_download(server_handle: Any, key: str) -> tuple[bytes, float]:
    """Download ``key`` with boto3's ``download_fileobj``; returns its bytes and the seconds it
    took."""
    client = server_handle.client()
    buffer = io.BytesIO()
    started = time.perf_counter()
    client.download_fileobj(_bucket(server_handle), key, buffer)
    return buffer.getvalue(), time.perf_counter() - started


__all__ = ["plain_download", "plain_upload"]
