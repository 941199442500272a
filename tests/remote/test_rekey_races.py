"""``rekey`` against a concurrent delete of its segment: the manifest is rewritten with a plain
put (no precondition), so a delete that ran between rekey's read and its put must not leave a
manifest without data (a segment "resurrected" in listings whose reads fail). rekey checks
the log after its put and deletes its manifest again (the segment is reported deleted, not
failed); the deleter deletes the manifest once more after the data; the manifest cache is
never filled by rekey for a segment forgotten meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from kafka_tiers.api.errors import RemoteResourceNotFoundError
from kafka_tiers.cli.remote_rekey import DELETED, REKEYED, rekey_segments
from kafka_tiers.objectstore.keys import ObjectKind
from tests.remote.data_path_helpers import key_pair_files
from tests.remote.test_encryption_at_rest import (
    TP,
    key_settings,
    make_rsm,
    new_md,
    read,
    segment,
    stored_files,
)


@pytest.fixture(scope="module")
def key_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Key pairs k1 and k2: (public key file, private key file) each."""
    folder = tmp_path_factory.mktemp("keys")
    return {key_id: key_pair_files(folder, key_id) for key_id in ("k1", "k2")}


class HookedStore:
    """The store of a manager, with a hook run before each put of a manifest and one run after
    each delete_many holding a manifest; everything else is the store's."""

    def __init__(self, store: Any, before_put: Callable[[str], None] = lambda key: None,
                 after_delete: Callable[[Sequence[str]], None] = lambda names: None) -> None:
        self._store = store
        self.before_put = before_put
        self.after_delete = after_delete

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        if key.endswith(".manifest"):
            self.before_put(key)
        return self._store.put(key, data, length)

    def delete_many(self, names: Sequence[str]) -> None:
        self._store.delete_many(names)
        if any(k.endswith(".manifest") for k in names):
            self.after_delete(names)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def old_segment(tmp_path: Path, key_files: Any) -> tuple[Path, Any]:
    """A tier holding one segment on key pair k1."""
    root = tmp_path / "tier"
    writer = make_rsm(root, **{"chunk.size": "1000", **key_settings(key_files, "k1", "k1")})
    md = new_md()
    writer.copy_log_segment_data(md, segment(tmp_path / "seg"))
    writer.close()
    return root, md


def test_a_segment_deleted_between_rekeys_read_and_put_stays_deleted(tmp_path, key_files):
    root, md = old_segment(tmp_path, key_files)
    rsm = make_rsm(root, **key_settings(key_files, "k2", "k1", "k2"))  # a broker deleting and
    read(rsm, md)  # rekeying; the segment's manifest is in its cache
    mkey = rsm._key(md.remote_log_segment_id, md.start_offset, ObjectKind.MANIFEST)
    assert rsm._segment_cache.get(mkey) is not None
    deleted = []

    def retention_deletes(key: str) -> None:
        if not deleted:
            deleted.append(key)
            rsm.delete_log_segment_data(md)

    rsm._store = HookedStore(rsm._store, before_put=retention_deletes)
    with pytest.raises(RemoteResourceNotFoundError, match="was deleted while it was rekeyed"):
        rsm.rekey(md)
    assert deleted and stored_files(root) == []
    assert rsm.list_remote_segments(TP) == []
    assert rsm._segment_cache.get(mkey) is None  # not filled again after the delete's forget
    with pytest.raises(RemoteResourceNotFoundError):
        read(rsm, md)
    rsm.close()


def test_a_delete_of_the_manifest_before_rekeys_put_and_of_the_data_after_it(tmp_path, key_files):
    """The other order: the deleter removes the manifest, rekey puts its rewritten one and
    finds the log still there, then the deleter removes the data: its last delete of the
    manifest removes rekey's."""
    root, md = old_segment(tmp_path, key_files)
    cli = make_rsm(root, **key_settings(key_files, "k2", "k1", "k2"))
    broker = make_rsm(root, **key_settings(key_files, "k1", "k1"))
    rekey_at_put, manifest_deleted, rekey_done = (threading.Event() for _ in range(3))

    def wait_for_the_manifest_delete(_key: str) -> None:
        rekey_at_put.set()
        assert manifest_deleted.wait(10)

    def let_rekey_run_once(_keys: Sequence[str]) -> None:
        if not manifest_deleted.is_set():
            manifest_deleted.set()
            assert rekey_done.wait(10)

    cli._store = HookedStore(cli._store, before_put=wait_for_the_manifest_delete)
    broker._store = HookedStore(broker._store, after_delete=let_rekey_run_once)
    outcome: list[Any] = []
    rekeyer = threading.Thread(target=lambda: outcome.append(cli.rekey(md)))
    rekeyer.start()
    assert rekey_at_put.wait(10)
    deleter = threading.Thread(target=broker.delete_log_segment_data, args=(md,))
    deleter.start()
    rekeyer.join(10)
    assert outcome == [True]  # the log was still there when rekey looked
    rekey_done.set()
    deleter.join(10)
    assert stored_files(root) == []
    assert cli.list_remote_segments(TP) == []
    cli.close()
    broker.close()


def test_the_rekey_command_reports_a_segment_deleted_meanwhile_as_deleted(tmp_path, key_files):
    root, md = old_segment(tmp_path, key_files)
    gone = new_md(100)  # listed, then deleted before its manifest was read
    writer = make_rsm(root, **key_settings(key_files, "k1", "k1"))
    writer.copy_log_segment_data(gone, segment(tmp_path / "gone"))
    writer.close()
    rsm = make_rsm(root, **key_settings(key_files, "k2", "k1", "k2"))
    listed = rsm.list_remote_segments(TP)
    broker = make_rsm(root, **key_settings(key_files, "k1", "k1"))
    broker.delete_log_segment_data(gone)
    rsm._store = HookedStore(rsm._store,
                             before_put=lambda key: broker.delete_log_segment_data(md))
    rows = rekey_segments(rsm, "k2", listed, dry_run=False)
    assert [(r["segment_id"], r["status"], r["error"]) for r in rows] == [
        (md.segment_id, DELETED, None), (gone.segment_id, DELETED, None)]
    assert stored_files(root) == []
    rsm.close()
    broker.close()


def test_rekey_without_a_concurrent_delete_still_rewrites_and_reads(tmp_path, key_files):
    root, md = old_segment(tmp_path, key_files)
    rsm = make_rsm(root, **key_settings(key_files, "k2", "k1", "k2"))
    before = read(rsm, md)
    rows = rekey_segments(rsm, "k2", [md], dry_run=False)
    assert [r["status"] for r in rows] == [REKEYED]
    assert rsm.read_manifest(md).encryption.key_id == "k2"
    assert read(rsm, md) == before
    rsm.close()
