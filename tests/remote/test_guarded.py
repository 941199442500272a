"""The core's wrapper around storage plugins: argument checks, result validation, error
translation naming the plugin, and no secrets in errors or logs."""

from __future__ import annotations

import io
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kafka_tiers.api import (
    IndexType,
    InvalidRangeError,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    TopicPartition,
)
from kafka_tiers.remote.guarded import GuardedRemoteStorage, secret_values
from tests.remote.backends import MemoryStorage

TP = TopicPartition("orders", 3)
SECRET = "s3cr3t-Valu3-Zz"


def metadata(start: int = 0, tp: TopicPartition = TP) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(tp), start, start + 9, 5, 1,
                                    7, 100, {0: start})


def segment_data(tmp_path: Path) -> LogSegmentData:
    for name in ("log", "index", "timeindex", "snapshot"):
        (tmp_path / name).write_bytes(name.encode() * 25)
    return LogSegmentData(tmp_path / "log", tmp_path / "index", tmp_path / "timeindex", None,
                          tmp_path / "snapshot", b"epochs")


class Misbehaving(MemoryStorage):
    """A plugin whose methods misbehave as ``mode`` says."""

    mode = ""

    def copy_log_segment_data(self, md, data):
        if self.mode == "copy-str":
            super().copy_log_segment_data(md, data)
            return "not bytes"
        if self.mode == "copy-huge":
            return b"x" * 129
        if self.mode == "copy-keyerror":
            raise KeyError(f"credentials {SECRET} rejected")
        if self.mode == "copy-timeout":
            raise TimeoutError("slow")
        return super().copy_log_segment_data(md, data)

    def fetch_log_segment(self, md, start, end=None):
        if self.mode == "fetch-str":
            return "text"
        if self.mode == "fetch-buffered":
            with super().fetch_log_segment(md, start, end) as inner:
                return self.buffered(inner.read())
        if self.mode == "fetch-broken-stream":
            class Broken(io.RawIOBase):
                def readable(self):
                    return True

                def readinto(self, b):
                    raise OSError(f"connection to bucket with key {SECRET} dropped")
            return Broken()
        return super().fetch_log_segment(md, start, end)

    def fetch_index(self, md, index_type):
        if self.mode == "index-none":
            return None
        return super().fetch_index(md, index_type)

    def list_remote_segments(self, tp, min_base_offset=0):
        items = super().list_remote_segments(tp, min_base_offset)
        if self.mode == "list-unsorted":
            return list(reversed(items))
        if self.mode == "list-foreign":
            return [*items, metadata(500, TopicPartition("other", 0))]
        if self.mode == "list-below-min":
            return super().list_remote_segments(tp, 0)
        return items


@pytest.fixture
def plugin():
    p = Misbehaving()
    p.configure({"name": str(id(p)), "secret.access.key": SECRET})
    return p


@pytest.fixture
def guarded(plugin):
    return GuardedRemoteStorage(plugin, "misbehaving",
                                secrets=secret_values({"secret.access.key": SECRET},
                                                      {"secret.access.key"}))


def test_well_behaved_calls_pass_through(guarded, tmp_path):
    md = metadata()
    assert guarded.copy_log_segment_data(md, segment_data(tmp_path)) is None
    with guarded.fetch_log_segment(md, 2, 5) as stream:
        assert stream.read() == b"glog"
    assert [m.segment_id for m in guarded.list_remote_segments(TP)] == [md.segment_id]
    with pytest.raises(RemoteResourceNotFoundError) as info:
        guarded.fetch_index(md, IndexType.TRANSACTION)
    assert info.value.plugin == "misbehaving"
    assert "storage plugin 'misbehaving'" in str(info.value)


@pytest.mark.parametrize(("mode", "words"), [
    ("copy-str", "not bytes or None"),
    ("copy-huge", "129 bytes of custom metadata, more than the limit of 128"),
])
def test_copy_results_are_validated(plugin, guarded, tmp_path, mode, words):
    plugin.mode = mode
    with pytest.raises(RemoteStorageError, match=words) as info:
        guarded.copy_log_segment_data(metadata(), segment_data(tmp_path))
    assert info.value.plugin == "misbehaving" and not info.value.retriable


@pytest.mark.parametrize(("mode", "words"), [
    ("list-unsorted", "not sorted"),
    ("list-foreign", "another partition"),
    ("list-below-min", "below min_base_offset"),
])
def test_listings_are_validated(plugin, guarded, tmp_path, mode, words):
    for start in (0, 10, 20):
        guarded.copy_log_segment_data(metadata(start), segment_data(tmp_path))
    plugin.mode = mode
    with pytest.raises(RemoteStorageError, match=words):
        guarded.list_remote_segments(TP, 5)


def test_fetch_must_return_a_stream_and_index_never_none(plugin, guarded, tmp_path):
    md = metadata()
    guarded.copy_log_segment_data(md, segment_data(tmp_path))
    plugin.mode = "fetch-str"
    with pytest.raises(RemoteStorageError, match="not a readable stream"):
        guarded.fetch_log_segment(md, 0)
    plugin.mode = "index-none"
    with pytest.raises(RemoteStorageError, match="must raise RemoteResourceNotFoundError"):
        guarded.fetch_index(md, IndexType.OFFSET)


def test_foreign_errors_are_translated_without_secrets(plugin, guarded, tmp_path, caplog):
    plugin.mode = "copy-keyerror"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(RemoteStorageError) as info:
        guarded.copy_log_segment_data(metadata(), segment_data(tmp_path))
    err = info.value
    assert type(err) is RemoteStorageError
    assert "storage plugin 'misbehaving' failed in copy_log_segment_data" in str(err)
    assert "KeyError" in str(err) and "<hidden>" in str(err)
    assert SECRET not in str(err) and SECRET not in caplog.text
    assert err.__cause__ is None and err.__suppress_context__
    assert err.plugin == "misbehaving" and err.segment_id is not None


def test_a_failed_call_is_raised_not_also_logged_as_a_warning(plugin, guarded, tmp_path,
                                                             caplog):
    """The caller reports a raised error once (the CLI's error line, the remote log manager's
    task line): the guard itself logs it only at DEBUG."""
    plugin.mode = "copy-keyerror"
    caplog.set_level(logging.DEBUG, logger="kafka_tiers.remote.guarded")
    with pytest.raises(RemoteStorageError):
        guarded.copy_log_segment_data(metadata(), segment_data(tmp_path))
    records = [r for r in caplog.records if r.name == "kafka_tiers.remote.guarded"]
    assert records and all(r.levelno < logging.WARNING for r in records), [
        (r.levelname, r.getMessage()) for r in records]


def test_timeouts_become_retriable(plugin, guarded, tmp_path):
    plugin.mode = "copy-timeout"
    with pytest.raises(RemoteStorageError) as info:
        guarded.copy_log_segment_data(metadata(), segment_data(tmp_path))
    assert info.value.retriable
    assert "TimeoutError" in str(info.value)


def test_stream_read_errors_are_translated(plugin, guarded, tmp_path, caplog):
    md = metadata()
    guarded.copy_log_segment_data(md, segment_data(tmp_path))
    plugin.mode = "fetch-broken-stream"
    stream = guarded.fetch_log_segment(md, 0)
    with pytest.raises(RemoteStorageError, match="fetch_log_segment \\(reading\\)") as info:
        stream.read()
    stream.close()
    assert SECRET not in str(info.value) and SECRET not in caplog.text


def test_a_buffered_stream_is_read_straight_into_the_callers_buffer(plugin, guarded,
                                                                   tmp_path):
    """A plugin's buffered stream (the core's chunked stream is one) is read with readinto:
    no intermediate bytes object, one copy less per read of a fetch."""
    md = metadata()
    guarded.copy_log_segment_data(md, segment_data(tmp_path))
    calls: list[str] = []

    class Buffered(io.BytesIO):
        def read(self, n=-1):
            calls.append("read")
            return super().read(n)

        def readinto(self, b):
            calls.append("readinto")
            return super().readinto(b)

    plugin.mode = "fetch-buffered"
    plugin.buffered = Buffered
    stream = guarded.fetch_log_segment(md, 0)
    buf = bytearray(7)
    assert stream.readinto(buf) == 7 and bytes(buf) == b"logl" + b"ogl"
    stream.close()
    assert calls == ["readinto"]


def test_ranges_are_checked_before_the_plugin_is_called(plugin, guarded):
    md = metadata()  # never copied: a call reaching the plugin would raise not-found
    for start, end in ((-1, None), (5, 4), (True, None), (0, 2**64)):
        with pytest.raises(InvalidRangeError):
            guarded.fetch_log_segment(md, start, end)


def test_secret_values_pick_secret_keys_only():
    config = {"dir": "/data", "s3.secret.access.key": "abcd1234", "azure.sas.token": "sv=x&sig=y",
              "password": "pw12", "bucket": "b", "key.prefix": "p"}
    declared = {"s3.secret.access.key", "azure.sas.token", "password"}  # the plugin's SECRET_KEYS
    assert {s.reveal() for s in secret_values(config, declared)} == {"abcd1234", "sv=x&sig=y",
                                                                     "pw12"}


def test_load_wraps_an_installed_plugin(tmp_path):
    with GuardedRemoteStorage.load("local", {"dir": str(tmp_path)}) as guarded:
        assert guarded.name == "local"
        assert "concurrent_access" in guarded.CAPABILITIES
        assert guarded.list_remote_segments(TP) == []


class OneAtATime(MemoryStorage):
    """Records how many calls were inside it at once."""

    CAPABILITIES = frozenset()
    inside = 0
    most = 0

    def list_remote_segments(self, tp, min_base_offset=0):
        type(self).inside += 1
        type(self).most = max(type(self).most, type(self).inside)
        time.sleep(0.002)
        type(self).inside -= 1
        return super().list_remote_segments(tp, min_base_offset)


@pytest.mark.parametrize(("capabilities", "overlap"), [
    (frozenset(), False), (frozenset({"concurrent_access"}), True)])
def test_calls_are_serialised_unless_the_plugin_is_concurrent(capabilities, overlap):
    cls = type("Probe", (OneAtATime,), {"CAPABILITIES": capabilities, "inside": 0, "most": 0})
    plugin = cls()
    plugin.configure({"name": f"probe-{overlap}"})
    guarded = GuardedRemoteStorage(plugin, "probe")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: guarded.list_remote_segments(TP), range(64)))
    assert (cls.most > 1) is overlap


def test_connection_strings_count_as_secrets():
    from kafka_tiers.remote.guarded import secret_values

    config = {"azure.connection.string": "AccountKey=abc123==;EndpointSuffix=x",
              "azure.container.name": "logs"}
    found = secret_values(config, {"azure.connection.string"})  # declared by the plugin
    assert [s.reveal() for s in found] == ["AccountKey=abc123==;EndpointSuffix=x"]
