"""The embedded metadata store holds the SCRAM credentials and the ACLs: one writer only
(its owner's lock refuses a second opener, ``kafka-tiers scram --dir`` on a running broker
among them), private files (directory 0700, files 0600, older installs fixed at open), and no
rotated or deleted credential left in any file (a snapshot and a cut journal after every
change under ``/security``, crash-safely)."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.cluster.embedded_store import (
    JOURNAL,
    LOCK,
    SNAPSHOT,
    EmbeddedMetadataServer,
    EmbeddedStore,
    StoreInUseError,
)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The usual umask (022): files made with the defaults would be world-readable."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(directory: Path) -> dict[str, int]:
    """The permission bits of ``directory`` ("." ) and of every entry in it."""
    out = {".": stat.S_IMODE(directory.stat().st_mode)}
    for entry in directory.iterdir():
        out[entry.name] = stat.S_IMODE(entry.lstat().st_mode)
    return out


def _assert_private(directory: Path) -> None:
    modes = _modes(directory)
    assert modes.pop(".") == 0o700, f"{directory} is mode {oct(_modes(directory)['.'])}"
    assert modes and all(m == 0o600 for m in modes.values()), \
        {n: oct(m) for n, m in modes.items()}


def _in_any_file(directory: Path, needle: bytes) -> list[str]:
    """The files under ``directory`` holding ``needle`` raw or base64-encoded."""
    forms = (needle, base64.b64encode(needle))
    return sorted(p.name for p in directory.rglob("*") if p.is_file()
                  and any(f in p.read_bytes() for f in forms))


def _cluster_broker(tmp_path: Path) -> Any:
    from kafka_tiers.broker.broker import Broker
    from tests.kafka.targets import LISTENER

    return Broker({"broker.id": "1", "log.dirs": str(tmp_path / "data"), "listeners": LISTENER,
                   "offsets.topic.replication.factor": "1"}, cluster=True).start()


def _credential(creds: Any, user: str, password: str) -> bytes:
    """Set ``user``'s SCRAM-SHA-512 credential; its StoredKey."""
    from kafka_tiers.kafka.security.scram_credentials import salted_password

    salt = os.urandom(24)
    cred = creds.upsert(user, "SCRAM-SHA-512", 4096, salt,
                        salted_password(password, "SCRAM-SHA-512", salt, 4096))
    return bytes(cred.stored_key)


# ---------------------------------------------------------------------- private files

def test_a_brokers_store_is_private_and_keeps_no_rotated_or_deleted_key(
        tmp_path: Path, usual_umask: None) -> None:
    from kafka_tiers.kafka.security.scram_credentials import credentials_of

    meta = tmp_path / "data" / "metadata"
    broker = _cluster_broker(tmp_path)
    try:
        _assert_private(meta)
        assert {JOURNAL, LOCK} <= set(os.listdir(meta))
        creds = credentials_of(broker.kafka_server)
        old_alice = _credential(creds, "alice", "alice-1")
        bob = _credential(creds, "bob", "bob-pw")
        _assert_private(meta)
        assert _in_any_file(meta, bob) == [SNAPSHOT]  # folded at once, the journal cut
        new_alice = _credential(creds, "alice", "alice-2")  # rotated
        assert creds.delete("bob", "SCRAM-SHA-512")
        for gone in (old_alice, bob):
            assert _in_any_file(meta, gone) == []
        assert _in_any_file(meta, new_alice) == [SNAPSHOT]
        _assert_private(meta)
    finally:
        broker.shutdown()
    _assert_private(meta)
    server = EmbeddedMetadataServer(meta)  # the credentials survive the restart
    try:
        doc = json.loads(server.read("/security/scram-credentials")[0])
        assert sorted(doc["data"]["users"]) == ["alice"]
    finally:
        server.close()


def test_an_older_installs_files_are_made_private_at_open(tmp_path: Path,
                                                          usual_umask: None) -> None:
    meta = tmp_path / "metadata"
    server = EmbeddedMetadataServer(meta)
    client = EmbeddedStore(server)
    client.start()
    client.create("/brokers/ids/1", {"host": "h"})
    client.close()
    server.close()
    # as an older release left them: 0755 / 0644, and a half-written snapshot of a crash
    os.chmod(meta, 0o755)
    for f in meta.iterdir():
        os.chmod(f, 0o644)
    (meta / (SNAPSHOT + ".tmp")).write_bytes(b'{"stale": "keys"}')
    server = EmbeddedMetadataServer(meta)
    try:
        _assert_private(meta)
        assert not (meta / (SNAPSHOT + ".tmp")).exists()
        assert json.loads(server.read("/brokers/ids/1")[0]) == {"host": "h"}
    finally:
        server.close()


# ---------------------------------------------------------------------- one writer

def test_a_second_opener_of_a_running_brokers_store_is_refused_its_data_intact(
        tmp_path: Path) -> None:
    from kafka_tiers.kafka.security.scram_credentials import credentials_of
    from kafka_tiers.kafka.security.state_store import SecurityStateError, open_offline_store
    from tests.cli_run import kt

    data, meta = tmp_path / "data", tmp_path / "data" / "metadata"
    pw = tmp_path / "pw"
    pw.write_text("eve-secret")
    broker = _cluster_broker(tmp_path)
    try:
        creds = credentials_of(broker.kafka_server)
        _credential(creds, "admin", "admin-pw")
        refused = f"a broker is running on {meta} (pid {os.getpid()})"
        for where in (meta, data):  # the store itself, or the log dir holding it
            ran = kt("scram", "add", "--user", "eve", "--password-file", str(pw), "--dir",
                     str(where))
            assert ran.code == 2 and refused in ran.err and len(ran.err_lines) == 1, ran.err
            ran = kt("acls", "add", "--dir", str(where), "--allow-principal", "User:eve",
                     "--operation", "All", "--cluster")
            assert ran.code == 2 and refused in ran.err, ran.err
        with pytest.raises(SecurityStateError, match="a broker is running"), \
                open_offline_store(meta):
            pass
        with pytest.raises(StoreInUseError) as info:
            EmbeddedMetadataServer(meta)
        assert info.value.pid == os.getpid()
        # another process: refused by the same lock, naming this process
        probe = subprocess.run(
            [sys.executable, "-c", "import sys\n"
             "from kafka_tiers.cluster.embedded_store import EmbeddedMetadataServer as S\n"
             "try:\n    S(sys.argv[1])\nexcept Exception as exc:\n    print(exc)\n"
             "else:\n    print('opened')\n", str(meta)],
            capture_output=True, text=True, timeout=60, check=True)
        assert f"is open in another process (pid {os.getpid()})" in probe.stdout, probe
        # the broker still writes alone
        _credential(creds, "bob", "bob-pw")
        assert creds.lookup("admin", "SCRAM-SHA-512") is not None
    finally:
        broker.shutdown()
    with open_offline_store(data) as store:  # stopped: the CLI may write now
        doc, _ = store.read("scram-credentials")
    assert sorted(doc["users"]) == ["admin", "bob"]
    for line in (meta / JOURNAL).read_bytes().splitlines():  # journal cut: whole lines only
        json.loads(line)


def test_the_owning_server_is_shared_in_its_process_and_releases_the_lock_on_close(
        tmp_path: Path) -> None:
    meta = tmp_path / "metadata"
    owner = EmbeddedMetadataServer(meta)  # as LocalCluster holds it for its brokers
    try:
        assert EmbeddedMetadataServer.shared(meta) is owner
        clients = [EmbeddedStore(EmbeddedMetadataServer.shared(meta)) for _ in range(2)]
        for c in clients:
            c.start()
        clients[0].create("/a", 1)
        assert clients[1].get("/a") == (1, 0)
        for c in clients:
            c.close()
        late = EmbeddedStore(EmbeddedMetadataServer.shared(meta))  # the owner's, still open
        late.start()
        late.set("/a", 2)
        late.close()
        with pytest.raises(StoreInUseError):
            EmbeddedMetadataServer(meta)
        assert (meta / LOCK).read_text().strip() == str(os.getpid())
    finally:
        owner.close()
    again = EmbeddedMetadataServer(meta)
    try:
        assert again.read("/a") == (b"2", 1)
    finally:
        again.close()


# ---------------------------------------------------------------------- crash safety

_CRASHING_WRITER = r"""
import json, os, sys
from kafka_tiers.cluster.embedded_store import EmbeddedMetadataServer, EmbeddedStore

directory, expected = sys.argv[1], sys.argv[2]
server = EmbeddedMetadataServer(directory)
store = EmbeddedStore(server)
store.start()
store.create("/security/scram-credentials", {"users": {"alice": "OLD-STORED-KEY"}})
store.create("/brokers/topics/orders", {"partitions": 1})
for i in range(3):
    store.set("/brokers/topics/orders", {"partitions": i + 2})
store.create("/brokers/topics/gone/partitions/0", {"leader": 1})
store.delete("/brokers/topics/gone", recursive=True)
store.create("/brokers/topics/gone", {"partitions": 9})

def tree(path="/"):
    out = {}
    for name in store.children(path):
        child = f"{path.rstrip('/')}/{name}"
        out[child] = list(store.get(child))
        out.update(tree(child))
    return out

def crash(fd, length):  # the snapshot is in place; the journal is not cut yet
    with open(expected, "w") as fh:
        json.dump(tree(), fh)
    os._exit(9)

os.ftruncate = crash
store.set("/security/scram-credentials", {"users": {"alice": "NEW-STORED-KEY"}})
"""


def test_a_crash_between_the_snapshot_and_the_journals_cut_loses_nothing(
        tmp_path: Path) -> None:
    meta, expected = tmp_path / "metadata", tmp_path / "expected.json"
    writer = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(meta), str(expected)],
                            capture_output=True, text=True, timeout=60)
    assert writer.returncode == 9, writer.stderr  # killed at the cut, as asked
    assert (meta / SNAPSHOT).exists() and (meta / JOURNAL).stat().st_size > 0
    server = EmbeddedMetadataServer(meta)  # replays the old journal over the new snapshot
    client = EmbeddedStore(server)
    client.start()
    try:
        def tree(path: str = "/") -> dict[str, list[Any]]:
            out: dict[str, list[Any]] = {}
            for name in client.children(path):
                child = f"{path.rstrip('/')}/{name}"
                out[child] = list(client.get(child))
                out.update(tree(child))
            return out

        assert tree() == json.loads(expected.read_text())
        assert client.get("/security/scram-credentials")[0] == \
            {"users": {"alice": "NEW-STORED-KEY"}}
        # opened, the store folded the journal: the old key is on no file any more
        assert (meta / JOURNAL).stat().st_size == 0
        assert _in_any_file(meta, b"OLD-STORED-KEY") == []
        client.set("/brokers/topics/orders", {"partitions": 7})  # and it writes on
    finally:
        client.close()
        server.close()
    server = EmbeddedMetadataServer(meta)
    try:
        assert json.loads(server.read("/brokers/topics/orders")[0]) == {"partitions": 7}
    finally:
        server.close()
