"""The benchmark baselines in ``plain_transfer.py`` move the bytes they claim to."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kt_hdfs_plain_transfer", Path(__file__).with_name("plain_transfer.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.servers
def test_plain_upload_and_download_round_trip(webhdfs_server: Any, tmp_path: Path) -> None:
    plain = _load()
    data = os.urandom(3 * 1024 * 1024 + 17)
    local = tmp_path / f"seg-{os.getpid()}.log"
    local.write_bytes(data)
    try:
        seconds = plain.plain_upload(webhdfs_server, local)
        assert seconds > 0
        back, read_seconds = plain.plain_download(webhdfs_server,
                                                  f"{plain.PLAIN_DIR}/{local.name}")
        assert back == data and read_seconds > 0
        local.write_bytes(data[:100])  # overwriting works (benchmarks repeat)
        plain.plain_upload(webhdfs_server, local)
        assert plain.plain_download(webhdfs_server, f"{plain.PLAIN_DIR}/{local.name}")[0] \
            == data[:100]
    finally:
        webhdfs_server.client().delete(f"{webhdfs_server.base_path}/{plain.PLAIN_DIR}",
                                       recursive=True)
