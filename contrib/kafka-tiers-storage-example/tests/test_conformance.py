"""Run the whole kafka-tiers storage conformance suite against example-sqlite, selected by its
entry-point name (so this also proves the distribution is installed with its entry point),
plus the few checks only this backend has."""

import io

import pytest

from kafka_tiers.api import ConfigError
from kafka_tiers.conformance.storage import StorageSuite, StorageTarget
from kafka_tiers.plugins import load_remote_storage


class TestExampleSqliteConformance(StorageSuite):
    """Every rule; multi-part and concurrency too, since the backend declares them."""

    LARGE_SEGMENT_BYTES = 8 * 1024 * 1024

    @pytest.fixture
    def storage_target(self, tmp_path):
        # small parts so that the multi-part checks run on small segments
        return StorageTarget.from_plugin(
            "example-sqlite", {"path": str(tmp_path / "tier.db"), "part.size": "65536"})


def test_aborted_uploads_leave_no_parts(tmp_path):
    rsm = load_remote_storage("example-sqlite", {"path": str(tmp_path / "t.db"),
                                                 "part.size": "4"})
    with rsm:
        store = rsm.object_store

        class Failing(io.RawIOBase):
            def readable(self):
                return True

            def readinto(self, b):
                raise ConnectionResetError("lost")

        data = io.BufferedReader(io.BytesIO(b"0123456789"))
        assert store.put("k", data) == 10
        with store.get("k") as stream:
            assert stream.read() == b"0123456789"
        chained = io.BufferedReader(_Chain(b"abcdefghij", Failing()))
        with pytest.raises(ConnectionResetError):
            store.put("broken", chained)
        assert store.pending_uploads() == 0
        assert [i.key for i in store.list("")] == ["k"]


class _Chain(io.RawIOBase):
    def __init__(self, head, tail):
        self._head = io.BytesIO(head)
        self._tail = tail

    def readable(self):
        return True

    def readinto(self, b):
        n = self._head.readinto(b)
        return n if n else self._tail.readinto(b)


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="path is required"):
        load_remote_storage("example-sqlite", {})
    with pytest.raises(ConfigError, match=r"part\.size: expected an integer"):
        load_remote_storage("example-sqlite", {"path": str(tmp_path / "x.db"), "part.size": "0"})
