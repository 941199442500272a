"""The local backend's object store: key safety, crash-safe writes, ranged reads, listing by
prefix, deletes; and the plugin's entry point and config."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_tiers.api import (
    ByteRange,
    ConfigError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)
from kafka_tiers.plugins import load_remote_storage
from kafka_tiers.remote.local import TMP_DIR, LocalObjectStore, LocalRemoteStorageManager


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "root")


def put(store: LocalObjectStore, key: str, data: bytes) -> int:
    return store.put(key, io.BytesIO(data), len(data))


def get(store: LocalObjectStore, key: str, byte_range: ByteRange | None = None) -> bytes:
    with store.get(key, byte_range) as stream:
        return stream.read()


@pytest.mark.parametrize("key", [
    "../escape", "a/../../b", "/abs/key", "a//b", "a/./b", "a/", "", "a\\b", "a/\x00b",
    ".kt-tmp/x", "a/.hidden", "a b",
])
def test_unsafe_keys_are_refused(store, key):
    with pytest.raises(RemoteStorageError):
        store.path_of(key)
    with pytest.raises(RemoteStorageError):
        put(store, key, b"x")


def test_symlinks_out_of_the_root_are_refused(store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.root / "link").symlink_to(outside)
    with pytest.raises(RemoteStorageError, match="leaves the root"):
        put(store, "link/file", b"x")
    assert not any(outside.iterdir())


def test_put_get_ranges_and_overwrite(store):
    data = bytes(range(256)) * 10
    assert put(store, "p/t-0/obj.log", data) == len(data)
    assert get(store, "p/t-0/obj.log") == data
    assert get(store, "p/t-0/obj.log", ByteRange(0, 0)) == data[:1]
    assert get(store, "p/t-0/obj.log", ByteRange(100, 2559)) == data[100:]
    assert get(store, "p/t-0/obj.log", ByteRange(7, 19)) == data[7:20]
    put(store, "p/t-0/obj.log", b"new")
    assert get(store, "p/t-0/obj.log") == b"new"


def test_writes_go_through_a_temp_file_and_leave_none(store, monkeypatch):
    fsynced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsynced.append(fd) or real_fsync(fd))
    put(store, "a/b/c", b"hello")
    assert len(fsynced) >= 2  # the file, then its directory
    assert list((store.root / TMP_DIR).iterdir()) == []


def test_a_failed_write_keeps_the_old_object_and_no_temp_file(store):
    put(store, "a/obj", b"old")

    class Exploding(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            raise ConnectionResetError("gone")

    with pytest.raises(ConnectionResetError):
        store.put("a/obj", Exploding(), None)  # type: ignore[arg-type]
    assert get(store, "a/obj") == b"old"
    assert list((store.root / TMP_DIR).iterdir()) == []


CRASHING_WRITER = """
import io, sys, time
from kafka_tiers.remote.local import LocalObjectStore

class Slow(io.RawIOBase):
    def readable(self):
        return True

    def readinto(self, b):
        b[:1] = b"n"
        sys.stdout.write("x")
        sys.stdout.flush()
        time.sleep(0.01)
        return 1

LocalObjectStore(sys.argv[1]).put("a/obj", Slow(), None)
"""


def test_a_crash_mid_write_leaves_the_old_object(store):
    put(store, "a/obj", b"old")
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_WRITER, str(store.root)],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        assert proc.stdout.read(20) == b"x" * 20  # it is in the middle of writing
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
    assert get(store, "a/obj") == b"old"
    leftovers = list((store.root / TMP_DIR).iterdir())
    assert len(leftovers) == 1
    assert [i.key for i in store.list("")] == ["a/obj"]
    os.utime(leftovers[0], (1, 1))
    assert store.collect_temp_files(60_000) == [leftovers[0].name]


def test_missing_objects_are_not_found(store):
    with pytest.raises(RemoteResourceNotFoundError):
        store.get("no/such/key")
    put(store, "file", b"x")
    with pytest.raises(RemoteResourceNotFoundError):
        store.get("file/under/a/file")


def test_list_by_string_prefix(store):
    for key in ("p/t-1/a", "p/t-1/b", "p/t-10/a", "p/u-1/a", "q/t-1/a"):
        put(store, key, b"12345")
    keys = lambda prefix: sorted(i.key for i in store.list(prefix))  # noqa: E731
    assert keys("p/t-1/") == ["p/t-1/a", "p/t-1/b"]
    assert keys("p/t-1") == ["p/t-1/a", "p/t-1/b", "p/t-10/a"]
    assert keys("p/") == ["p/t-1/a", "p/t-1/b", "p/t-10/a", "p/u-1/a"]
    assert keys("") == ["p/t-1/a", "p/t-1/b", "p/t-10/a", "p/u-1/a", "q/t-1/a"]
    assert keys("nothing/") == []
    info = next(iter(store.list("q/")))
    assert info.size == 5 and info.last_modified_ms > 0


def test_delete_many_ignores_missing_and_prunes_directories(store):
    put(store, "p/t-1/a", b"1")
    put(store, "p/t-1/b", b"2")
    store.delete_many(["p/t-1/a", "p/t-1/a", "never/there"])
    assert [i.key for i in store.list("")] == ["p/t-1/b"]
    store.delete_many(["p/t-1/b"])
    assert not (store.root / "p").exists()
    assert store.root.exists()


def test_stale_temp_files_are_collected(store):
    stale = store.root / TMP_DIR / "crashed.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (1, 1))
    fresh = store.root / TMP_DIR / "writing.tmp"
    fresh.write_bytes(b"now")
    assert store.collect_temp_files(60_000) == ["crashed.tmp"]
    assert fresh.exists()


def test_entry_point_and_config(tmp_path):
    rsm = load_remote_storage("local", {"dir": str(tmp_path / "tier"), "key.prefix": "/a/b/"})
    with rsm:
        assert isinstance(rsm, LocalRemoteStorageManager)
        assert rsm.key_prefix == "a/b"
        assert (tmp_path / "tier").is_dir()
    with pytest.raises(ConfigError, match="dir is required"):
        load_remote_storage("local", {})
    with pytest.raises(ConfigError) as info:
        load_remote_storage("local", {"dir": str(tmp_path), "key.prefix": "a/../b"})
    assert info.value.key == "key.prefix"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot create directory"):
        load_remote_storage("local", {"dir": str(blocker / "sub")})
