"""Azurite stops while a segment's blocks are being staged: the copy fails cleanly with a
retriable error, nothing of it is visible (no listed segment, no readable data, no committed
blob) once the server is back, and a retry with a new segment id succeeds."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafka_tiers.api import (
    RemoteLogSegmentId,
    RemoteResourceNotFoundError,
    RetriableRemoteStorageError,
)
from kafka_tiers.conformance.storage import SegmentBuilder
from kafka_tiers.objectstore import ObjectKind, segment_key
from kafka_tiers.plugins import load_remote_storage

pytestmark = pytest.mark.servers

MIB = 1 << 20


def test_server_stops_mid_copy(server_factory: Callable[..., Any], tmp_path: Any,
                               config_for: Callable[..., dict[str, str]]) -> None:
    from tests.servers.azurite import AzuriteServer

    server = server_factory(AzuriteServer)
    container = server.create_container().container_name
    config = config_for(server, container, azure_upload_block_size=str(MIB),
                        azure_upload_concurrency="2")
    segment = SegmentBuilder(tmp_path / "local", "faults").make(0, log_size=8 * MIB + 17)
    tp = segment.tp
    with load_remote_storage("azure", config) as rsm:
        store = rsm.object_store
        original = store.upload_part
        stopper: list[threading.Thread] = []

        def upload_part(key: str, upload_id: str, part: int, data: bytes) -> str:
            if key.endswith(".log") and part == 3 and not stopper:
                # stop the server while this block (and the one beside it) is on the wire
                stopper.append(threading.Thread(target=server.stop))
                stopper[0].start()
            return original(key, upload_id, part, data)

        store.upload_part = upload_part  # type: ignore[method-assign]
        started = time.monotonic()
        with pytest.raises(RetriableRemoteStorageError) as info:
            rsm.copy_log_segment_data(segment.metadata, segment.data)
        failed_after = time.monotonic() - started
        stopper[0].join()
        assert info.value.retriable and failed_after < 15, failed_after
        assert server.account_key not in str(info.value)

        server.start()  # same port, same data
        assert rsm.list_remote_segments(tp) == []
        with pytest.raises(RemoteResourceNotFoundError):
            rsm.fetch_log_segment(segment.metadata, 0)
        leftovers = [i.key for i in store.list("") if segment.metadata.segment_id in i.key]
        assert leftovers == [], "a failed copy left committed blobs"
        log_key = segment_key(rsm.key_prefix, segment.metadata.remote_log_segment_id, 0,
                              ObjectKind.LOG)
        with pytest.raises(RemoteResourceNotFoundError):  # staged blocks are not a blob
            store.get(log_key)
        blocks = server.service_client().get_blob_client(container, log_key)
        assert blocks.get_block_list("uncommitted")[1], "no block was staged before the stop"

        retry = dataclasses.replace(segment.metadata,
                                    remote_log_segment_id=RemoteLogSegmentId.generate(tp))
        rsm.copy_log_segment_data(retry, segment.data)
        assert [m.segment_id for m in rsm.list_remote_segments(tp)] == [retry.segment_id]
        with rsm.fetch_log_segment(retry, 0) as stream:
            assert stream.read() == segment.log
