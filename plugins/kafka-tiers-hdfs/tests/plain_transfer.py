"""Baselines for the lead's benchmark (``benchmarks/remote_backends.py``): the ``hdfs``
package's own plain transfers, to compare the plugin's copy and fetch against.

``server_handle`` is a WebHDFS handle of ``tests/servers/webhdfs`` (the emulator's
``WebHdfsServer`` or ``RealWebHdfs``): ``client()`` and ``base_path``. Load this file by path
(``importlib.util.spec_from_file_location``); it is not a package module.
"""

from __future__ import annotations

import os
import time
from typing import Any

#: Where the plain uploads go, under the handle's ``base_path``.
PLAIN_DIR = "kt-plain-transfer"


def plain_upload(server_handle: Any, path: str | os.PathLike[str]) -> float:
    """Upload the local file ``path`` with ``client.upload`` (overwriting) to
    ``<base_path>/kt-plain-transfer/<file name>``; returns the seconds it took."""
    client = server_handle.client()
    target = f"{server_handle.base_path}/{PLAIN_DIR}/{os.path.basename(path)}"
    start = time.perf_counter()
    client.upload(target, str(path), overwrite=True)
    return time.perf_counter() - start


def plain_download(server_handle: Any, key: str) -> tuple[bytes, float]:
    """Read ``key`` (a path relative to the handle's ``base_path``, e.g.
    ``kt-plain-transfer/seg.log``, or an absolute HDFS path) whole with ``client.read``;
    returns its bytes and the seconds it took."""
    client = server_handle.client()
    path = key if key.startswith("/") else f"{server_handle.base_path}/{key}"
    start = time.perf_counter()
    with client.read(path) as reader:
        data = reader.read()
    return data, time.perf_counter() - start


__all__ = ["PLAIN_DIR", "plain_download", "plain_upload"]
