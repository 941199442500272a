"""The benchmark's boto3 baseline (``plain_transfer.py``) moves bytes intact."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = pytest.mark.servers


def _module() -> Any:
    path = Path(__file__).with_name("plain_transfer.py")
    spec = importlib.util.spec_from_file_location("kt_s3_plain_transfer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plain_upload_and_download_round_trip(s3_server: Any, bucket: str,
                                              tmp_path: Path) -> None:
    plain = _module()
    data = os.urandom(9 * 1024 * 1024)  # above boto3's 8 MiB multipart threshold
    (tmp_path / "segment.log").write_bytes(data)
    handle = SimpleNamespace(client=s3_server.client, bucket=bucket)
    seconds = plain.plain_upload(handle, tmp_path / "segment.log")
    got, read_seconds = plain.plain_download(handle, "segment.log")
    assert got == data and seconds > 0 and read_seconds > 0
