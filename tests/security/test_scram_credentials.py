"""Part 3 of issue 15: the security state store, SCRAM credentials, the
Describe/AlterUserScramCredentials APIs and ``kafka-tiers scram``."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.kafka.security.state_store import (
    FileStateStore,
    MetadataStoreStateStore,
    SecurityStateError,
    state_store_of,
)


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition"
             ) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def add_key(key: str, value: Any) -> Callable[[Any], Any]:
    def fn(doc: Any) -> Any:
        doc = doc or {}
        doc[key] = value
        return doc
    return fn


# ---------------------------------------------------------------------- the file backend

def test_file_store_writes_0600_with_a_format_version(tmp_path: Path) -> None:
    with FileStateStore(tmp_path, poll_s=0) as store:
        assert store.read("acls") == (None, -1)
        assert store.update("acls", add_key("a", 1)) == {"a": 1}
        path = tmp_path / "kafka-tiers-security-acls.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        stored = json.loads(path.read_bytes())
        assert stored["version"] == 1 and stored["data"] == {"a": 1}
        doc, v0 = store.read("acls")
        store.update("acls", add_key("b", 2))
        doc, v1 = store.read("acls")
        assert doc == {"a": 1, "b": 2} and v1 == v0 + 1
        assert store.update("acls", lambda _d: None) is None  # None deletes
        assert not path.exists() and store.read("acls") == (None, -1)


def test_file_store_is_crash_safe_a_leftover_temp_file_changes_nothing(tmp_path: Path) -> None:
    with FileStateStore(tmp_path, poll_s=0) as store:
        store.update("scram-credentials", add_key("alice", 1))
        path = tmp_path / "kafka-tiers-security-scram-credentials.json"
        # a crash between writing the temporary file and the rename leaves it behind, with
        # another mode: the document read is the old one, the next write replaces the file
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(b'{"version": 1, "data": {"torn')
        os.chmod(tmp, 0o644)
        assert store.read("scram-credentials")[0] == {"alice": 1}
        store.update("scram-credentials", add_key("bob", 2))
        assert store.read("scram-credentials")[0] == {"alice": 1, "bob": 2}
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not tmp.exists()


def test_file_store_refuses_a_newer_format_version(tmp_path: Path) -> None:
    path = tmp_path / "kafka-tiers-security-acls.json"
    path.write_text(json.dumps({"version": 2, "data": {"x": "secret-ish"}}))
    with FileStateStore(tmp_path, poll_s=0) as store:
        with pytest.raises(SecurityStateError, match="format version 2, newer") as err:
            store.read("acls")
        assert str(path) in str(err.value) and "secret-ish" not in str(err.value)
        with pytest.raises(SecurityStateError):  # and never overwrites it
            store.update("acls", add_key("a", 1))
    assert json.loads(path.read_text())["version"] == 2


def test_file_store_concurrent_updates_lose_nothing(tmp_path: Path) -> None:
    # two stores on one directory: two processes (the broker and `scram add --dir`)
    stores = [FileStateStore(tmp_path, poll_s=0) for _ in range(2)]
    try:
        def work(i: int) -> None:
            for j in range(15):
                stores[i].update("acls", add_key(f"{i}-{j}", j))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(stores[0].read("acls")[0]) == 30
    finally:
        for s in stores:
            s.close()


def test_file_store_watch_sees_local_and_other_process_changes(tmp_path: Path) -> None:
    seen: list[Any] = []
    with FileStateStore(tmp_path, poll_s=0.05) as store, \
            FileStateStore(tmp_path, poll_s=0) as other:
        store.watch("acls", seen.append)
        assert seen == [None]  # once at registration
        store.update("acls", add_key("a", 1))
        assert seen[-1] == {"a": 1}  # at once
        other.update("acls", add_key("b", 2))  # another process's write: noticed by polling
        wait_for(lambda: seen[-1] == {"a": 1, "b": 2}, what="the poll to see the change")


def test_names_are_checked(tmp_path: Path) -> None:
    with FileStateStore(tmp_path, poll_s=0) as store, pytest.raises(ValueError):
        store.read("../etc/passwd")


# ---------------------------------------------------------------------- the metadata store

def test_cluster_brokers_share_the_store_concurrent_updates_lose_nothing(
        make_kafka_cluster: Callable[..., Any]) -> None:
    cluster = make_kafka_cluster(brokers=2)
    a = state_store_of(cluster.broker(1).kafka_server)
    b = state_store_of(cluster.broker(2).kafka_server)
    assert isinstance(a, MetadataStoreStateStore) and a is not b
    assert state_store_of(cluster.broker(1).kafka_server) is a  # one per server
    seen_on_b: list[Any] = []
    b.watch("acls", seen_on_b.append)

    def work(store: Any, tag: str) -> None:
        for j in range(20):
            store.update("acls", add_key(f"{tag}-{j}", j))
    threads = [threading.Thread(target=work, args=(s, t)) for s, t in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc, _ = a.read("acls")
    assert len(doc) == 40
    wait_for(lambda: seen_on_b and seen_on_b[-1] == doc, what="broker 2's watch")
    a.update("acls", add_key("late", 1))
    wait_for(lambda: seen_on_b[-1].get("late") == 1, what="broker 2's watch of a change on 1")
    stored = cluster.broker(1).member.store.get("/security/acls")[0]
    assert stored["version"] == 1


def test_metadata_backend_refuses_a_newer_format_version(
        make_kafka_cluster: Callable[..., Any]) -> None:
    cluster = make_kafka_cluster(brokers=1)
    store = cluster.broker(1).member.store
    store.create("/security/acls", {"version": 7, "data": {}}, make_parents=True)
    with pytest.raises(SecurityStateError, match="format version 7"):
        state_store_of(cluster.broker(1).kafka_server).read("acls")
