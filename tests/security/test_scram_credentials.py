"""Part 3 of issue 15: the security state store, SCRAM credentials, the
Describe/AlterUserScramCredentials APIs and ``kafka-tiers scram``."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.kafka.security.scram_credentials import (
    ScramCredentials,
    ScramMechanism,
    derive,
    salted_password,
)
from kafka_tiers.kafka.security.state_store import (
    FileStateStore,
    MetadataStoreStateStore,
    SecurityStateError,
    state_store_of,
)
from tests.cli_run import kt
from tests.kafka.admin_helpers import wait_for


def update_concurrently(stores: list[Any], name: str, each: int) -> None:
    """Every store adds ``each`` keys of its own to document ``name``, all stores at once
    (a thread each); returns when all are done."""
    def work(i: int) -> None:
        for j in range(each):
            stores[i].update(name, add_key(f"{i}-{j}", j))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


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
        update_concurrently(stores, "acls", 15)
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

    update_concurrently([a, b], "acls", 20)
    doc, _ = a.read("acls")
    assert len(doc) == 40
    wait_for(lambda: seen_on_b and seen_on_b[-1] == doc, what="broker 2's watch")
    a.update("acls", add_key("late", 1))
    wait_for(lambda: seen_on_b[-1].get("late") == 1, what="broker 2's watch of a change on 1")
    stored = cluster.broker(1).member.store.get("/security/acls")[0]
    assert stored["version"] == 1


@pytest.mark.servers
def test_zookeeper_backend_concurrent_updates_and_watches(
        zookeeper_state_stores: list[Any]) -> None:
    stores = zookeeper_state_stores
    seen: list[Any] = []
    stores[1].watch("scram-credentials", seen.append)
    assert seen[0] is None
    update_concurrently(stores, "scram-credentials", 10)
    assert len(stores[0].read("scram-credentials")[0]) == 20
    wait_for(lambda: seen[-1] is not None and len(seen[-1]) == 20, what="the ZK watch")


def test_metadata_backend_refuses_a_newer_format_version(
        make_kafka_cluster: Callable[..., Any]) -> None:
    cluster = make_kafka_cluster(brokers=1)
    store = cluster.broker(1).member.store
    store.create("/security/acls", {"version": 7, "data": {}}, make_parents=True)
    with pytest.raises(SecurityStateError, match="format version 7"):
        state_store_of(cluster.broker(1).kafka_server).read("acls")


# ---------------------------------------------------------------------- credentials

def _rfc7677_exchange() -> tuple[bytes, bytes, bytes]:
    """RFC 7677 section 3's SCRAM-SHA-256 example: the AuthMessage, the client's proof and
    the server's signature (user "user", password "pencil")."""
    import base64

    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final_without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = f"{client_first_bare},{server_first},{final_without_proof}".encode()
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    return auth, proof, signature


def test_derive_matches_rfc7677_test_vector() -> None:
    import base64
    import hashlib
    import hmac

    from kafka_tiers.api import Secret
    from kafka_tiers.kafka.security.scram_credentials import derive

    auth, proof, signature = _rfc7677_exchange()
    cred = derive(Secret("pencil"), "SCRAM-SHA-256", 4096,
                  base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    # the server's signature of the RFC's exchange is the RFC's
    assert hmac.new(cred.server_key, auth, "sha256").digest() == signature
    # the RFC's client proof verifies against StoredKey: H(proof XOR HMAC(StoredKey, auth))
    client_signature = hmac.new(cred.stored_key, auth, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    assert cred.iterations == 4096 and len(cred.salt) == 16
    # a wrong password derives other keys
    assert derive("pencil2", "SCRAM-SHA-256", 4096, cred.salt).stored_key != cred.stored_key


def test_credential_repr_hides_key_material_and_bounds_are_kafkas() -> None:
    from kafka_tiers.kafka.security.scram_credentials import (
        ScramMechanism,
        derive,
        from_salted_password,
        salted_password,
    )

    cred = derive("pw", "SCRAM-SHA-512", salt=b"0123456789")
    text = repr(cred)
    assert "iterations=4096" in text and "stored_key" not in text and "salt" not in text
    assert len(cred.stored_key) == len(cred.server_key) == 64
    assert len(derive("pw", "SCRAM-SHA-512").salt) == 24  # random salt
    assert derive("pw", 2, salt=b"s") == derive("pw", ScramMechanism.SCRAM_SHA_512, salt=b"s")
    salted = salted_password("pw", "SCRAM-SHA-512", b"0123456789", 4096)
    assert from_salted_password("SCRAM-SHA-512", b"0123456789", salted, 4096) == cred
    for bad in (4095, 16385):
        with pytest.raises(ValueError, match="4096 to 16384"):
            derive("pw", "SCRAM-SHA-256", bad)
    with pytest.raises(ValueError, match="supported: SCRAM-SHA-256, SCRAM-SHA-512"):
        derive("pw", "SCRAM-SHA-1")


@pytest.fixture
def file_credentials(tmp_path: Path) -> Iterator[tuple[FileStateStore, ScramCredentials]]:
    """A file store in ``tmp_path`` (no polling) and the SCRAM credentials over it."""
    with FileStateStore(tmp_path, poll_s=0) as store:
        yield store, ScramCredentials(store)


def test_credentials_lookup_upsert_delete_describe_stored_without_password(
        tmp_path: Path, file_credentials: tuple[FileStateStore, ScramCredentials]) -> None:
    store, creds = file_credentials
    assert creds.lookup("alice", "SCRAM-SHA-512") is None
    salted = salted_password("alice-secret", "SCRAM-SHA-512", b"salty", 8192)
    cred = creds.upsert("alice", "SCRAM-SHA-512", 8192, b"salty", salted)
    assert creds.lookup("alice", "SCRAM-SHA-512") == cred
    assert creds.lookup("alice", "SCRAM-SHA-256") is None
    assert creds.lookup("alice", "PLAIN") is None
    creds.upsert("alice", "SCRAM-SHA-256", 4096, b"s2",
                 salted_password("alice-secret", "SCRAM-SHA-256", b"s2", 4096))
    assert creds.describe() == {"alice": [(ScramMechanism.SCRAM_SHA_256, 4096),
                                          (ScramMechanism.SCRAM_SHA_512, 8192)]}
    assert creds.describe(["bob"]) == {}
    raw = (tmp_path / "kafka-tiers-security-scram-credentials.json").read_bytes()
    assert b"alice-secret" not in raw and salted not in raw
    # another broker's view (a second object over the same store) agrees
    assert ScramCredentials(store).lookup("alice", "SCRAM-SHA-512") == cred
    assert creds.delete("alice", "SCRAM-SHA-512") is True
    assert creds.delete("alice", "SCRAM-SHA-512") is False
    assert creds.lookup("alice", "SCRAM-SHA-512") is None
    with pytest.raises(ValueError, match="empty"):
        creds.upsert("", "SCRAM-SHA-512", 4096, b"s", salted)


def test_a_late_notification_of_an_older_document_never_undoes_a_newer_one(
        file_credentials: tuple[FileStateStore, ScramCredentials]) -> None:
    store, creds = file_credentials
    before, _ = store.read("scram-credentials")  # None: no document yet
    cred = derive("pw", "SCRAM-SHA-512", salt=b"s")
    creds.alter({("alice", ScramMechanism.SCRAM_SHA_512): cred})
    older, _ = store.read("scram-credentials")
    creds.delete("alice", "SCRAM-SHA-512")
    # the store's watch delivering the document of before the deletion, late
    creds._apply(older)
    assert creds.lookup("alice", "SCRAM-SHA-512") is None
    creds._apply(before)  # the document deleted: everything goes
    assert creds.describe() == {}


# ---------------------------------------------------------------------- the Kafka APIs

def _kp_admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    from tests.kafka.clients import kafka_python_common

    return KafkaAdminClient(**kafka_python_common(bootstrap))


def test_kafka_python_admin_alters_and_describes(make_kafka_broker: Callable[..., Any]
                                                 ) -> None:
    from kafka.admin import (
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    from kafka_tiers.kafka.security.scram_credentials import credentials_of, derive

    broker = make_kafka_broker()
    admin = _kp_admin(broker.bootstrap_servers)
    try:
        got = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-pw", iterations=8192,
                                         salt=b"alice-salt"),
            UserScramCredentialUpsertion("bob", "SCRAM-SHA-256", "bob-pw")])
        assert got == {"alice": None, "bob": None}
        cred = credentials_of(broker.kafka_server).lookup("alice", "SCRAM-SHA-512")
        assert cred == derive("alice-pw", "SCRAM-SHA-512", 8192, b"alice-salt")
        described = admin.describe_user_scram_credentials()
        assert described == {
            "alice": {"error": None, "credential_infos": [
                {"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 8192}]},
            "bob": {"error": None, "credential_infos": [
                {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 4096}]}}
        one = admin.describe_user_scram_credentials(["bob", "nobody"])
        assert one["bob"]["error"] is None
        assert "does not exist" in one["nobody"]["error"]
        got = admin.alter_user_scram_credentials([
            UserScramCredentialDeletion("bob", "SCRAM-SHA-256"),
            UserScramCredentialDeletion("carol", "SCRAM-SHA-256")])
        assert got["bob"] is None and "does not exist" in got["carol"]
        assert list(admin.describe_user_scram_credentials()) == ["alice"]
    finally:
        admin.close()


def test_alter_errors_per_user_as_kafka(make_kafka_broker: Callable[..., Any]) -> None:
    from tests.kafka.raw_requests import RawConnection

    broker = make_kafka_broker()
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(51, 0, deletions=[("gone", 2), ("twice", 2)], upsertions=[
            ("twice", 2, 4096, b"s", b"p" * 64),
            ("", 2, 4096, b"s", b"p" * 64),
            ("few", 2, 4095, b"s", b"p" * 64),
            ("many", 1, 16385, b"s", b"p" * 32),
            ("sha1", 0, 4096, b"s", b"p" * 20),
            ("nosalt", 2, 4096, b"", b"p" * 64),
            ("ok", 1, 16384, b"s", b"p" * 32)])
        codes = {r.user: (r.error_code, r.error_message) for r in resp.results}
        assert {u: c for u, (c, _m) in codes.items()} == {
            "gone": 91, "twice": 92, "": 93, "few": 93, "many": 93, "sha1": 33,
            "nosalt": 93, "ok": 0}
        assert "too few iterations" in codes["few"][1]
        assert "too many iterations" in codes["many"][1]
        assert codes["ok"][1] is None
        # Describe: a user asked twice, a user without credential
        resp = conn.call(50, 0, users=[("ok",), ("ok",), ("gone",)])
        assert resp.error_code == 0
        assert {r.user: r.error_code for r in resp.results} == {"ok": 92, "gone": 91}
        resp = conn.call(50, 0, users=None)
        assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in resp.results] == [("ok", [(1, 16384)])]


def test_alter_refuses_more_changes_than_max_request_partitions(
        make_kafka_broker: Callable[..., Any]) -> None:
    from tests.kafka.raw_requests import RawConnection

    broker = make_kafka_broker(**{"max.request.partitions": "3"})
    with RawConnection(broker.bootstrap_servers) as conn:
        ups = [(f"u{i}", 2, 4096, b"s", b"p" * 64) for i in range(4)]
        resp = conn.call(51, 0, deletions=[], upsertions=ups)
        assert {r.user: r.error_code for r in resp.results} == {f"u{i}": 42 for i in range(4)}
        assert "max.request.partitions 3" in resp.results[0].error_message
        resp = conn.call(51, 0, deletions=[], upsertions=ups[:3])
        assert [r.error_code for r in resp.results] == [0, 0, 0]


class _DenyCluster:
    """An authorizer denying every cluster action (and allowing the rest)."""

    def authorize(self, identity: Any, actions: Any) -> list[Any]:
        from kafka_tiers.api.authorizer import AuthorizationResult, ResourceType

        return [AuthorizationResult.DENIED if a.resource_type == ResourceType.CLUSTER
                else AuthorizationResult.ALLOWED for a in actions]


def test_cluster_authorization_is_checked(make_kafka_broker: Callable[..., Any]) -> None:
    from tests.kafka.raw_requests import RawConnection

    broker = make_kafka_broker()
    broker.kafka_server.authorizer = _DenyCluster()
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(51, 0, deletions=[("a", 2)],
                         upsertions=[("b", 2, 4096, b"s", b"p" * 64)])
        assert {r.user: r.error_code for r in resp.results} == {"a": 31, "b": 31}
        resp = conn.call(50, 0, users=[("b",)])
        assert resp.error_code == 31 and [r.error_code for r in resp.results] == [31]
    from kafka_tiers.kafka.security.scram_credentials import credentials_of
    assert credentials_of(broker.kafka_server).describe() == {}


def test_confluent_admin_on_a_cluster_serves_every_broker(
        make_kafka_cluster: Callable[..., Any]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    from kafka_tiers.kafka.security.scram_credentials import credentials_of, derive

    cluster = make_kafka_cluster(brokers=2)
    first = cluster.broker(1).bootstrap_servers
    admin = AdminClient({"bootstrap.servers": first, "socket.timeout.ms": 5000})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw",
        b"salt-of-alice")], request_timeout=10)
    futures["alice"].result(timeout=10)
    want = derive("alice-pw", "SCRAM-SHA-512", 4096, b"salt-of-alice")
    for b in (1, 2):  # written once, seen by every broker through the store's watch
        creds = credentials_of(cluster.broker(b).kafka_server)
        wait_for(lambda c=creds: c.lookup("alice", "SCRAM-SHA-512") == want,
                 what=f"broker {b} to see the credential")
    described = admin.describe_user_scram_credentials(request_timeout=10).result(timeout=10)
    infos = described["alice"].scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)], request_timeout=10)
    futures["alice"].result(timeout=10)
    creds2 = credentials_of(cluster.broker(2).kafka_server)
    wait_for(lambda: creds2.lookup("alice", "SCRAM-SHA-512") is None,
             what="broker 2 to see the deletion")


# ---------------------------------------------------------------------- kafka-tiers scram

def kt_stdin(text: str, *args: str) -> tuple[int, str]:
    """``kafka-tiers ARGS`` with ``text`` on stdin: exit status and stdout+stderr."""
    ran = kt(*args, input=text)
    return ran.code, ran.out + ran.err


def test_cli_round_trip_over_the_kafka_protocol(make_kafka_broker: Callable[..., Any],
                                                tmp_path: Path) -> None:
    from kafka_tiers.kafka.security.scram_credentials import credentials_of, derive
    from tests.cli_run import kt

    broker = make_kafka_broker()
    where = ("--bootstrap-server", broker.bootstrap_servers, "--timeout", "10")
    pw = tmp_path / "pw.txt"
    pw.write_text("s3cret-of-alice\n")
    ran = kt("scram", "add", "alice", "--password-file", str(pw), "--iterations", "8192",
             *where)
    assert ran.code == 0, ran.err
    assert "alice: SCRAM-SHA-512 credential set (8192 iterations)" in ran.out
    cred = credentials_of(broker.kafka_server).lookup("alice", "SCRAM-SHA-512")
    assert cred is not None and cred == derive("s3cret-of-alice", "SCRAM-SHA-512", 8192,
                                               cred.salt)
    code, out = kt_stdin("bob-pw\n", "scram", "add", "bob", "--mechanism", "scram-sha-256",
                         "--password-stdin", *where)
    assert code == 0 and "bob: SCRAM-SHA-256 credential set" in out, out
    cred = credentials_of(broker.kafka_server).lookup("bob", "SCRAM-SHA-256")
    assert cred == derive("bob-pw", "SCRAM-SHA-256", 4096, cred.salt)
    ran = kt("scram", "list", "--format", "json", *where)
    assert ran.code == 0, ran.err
    assert json.loads(ran.out) == {"users": [
        {"user": "alice", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]},
        {"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]}]}
    ran = kt("scram", "list", *where)
    assert "alice" in ran.out and "SCRAM-SHA-256" in ran.out and "s3cret" not in ran.out
    ran = kt("scram", "delete", "bob", "--mechanism", "SCRAM-SHA-256", *where)
    assert ran.code == 0, ran.err
    ran = kt("scram", "delete", "bob", "--mechanism", "SCRAM-SHA-256", *where)
    assert ran.code == 2 and len(ran.err_lines) == 1 and "does not exist" in ran.err
    ran = kt("scram", "list", "bob", *where)
    assert ran.code == 2 and "no SCRAM credential for 'bob'" in ran.err


def test_cli_never_takes_a_password_argument_nor_shows_one(tmp_path: Path) -> None:
    from tests.cli_run import kt

    ran = kt("scram", "add", "alice", "--password", "hunter2", "--dir", str(tmp_path))
    assert ran.code == 2 and "hunter2" not in ran.err + ran.out
    ran = kt("scram", "add", "alice", "--dir", str(tmp_path))  # stdin is no terminal here
    assert ran.code == 2 and "--password-file" in ran.err and len(ran.err_lines) == 1
    pw = tmp_path / "pw"
    pw.write_text("hunter2\n")
    # a directory that is neither a broker's nor a cluster's: one line, no password
    ran = kt("scram", "add", "alice", "--password-file", str(pw), "--dir", str(tmp_path))
    assert ran.code == 2 and "neither" in ran.err and "hunter2" not in ran.err
    assert len(ran.err_lines) == 1


def test_cli_dir_bootstraps_the_first_user_of_a_standalone_broker(
        make_kafka_broker: Callable[..., Any], tmp_path: Path) -> None:
    from kafka_tiers.kafka.security.scram_credentials import credentials_of
    from tests.cli_run import kt

    broker = make_kafka_broker()
    log_dir = broker.config["log.dirs"][0]
    pw = tmp_path / "pw"
    pw.write_text("admin-secret")
    ran = kt("scram", "add", "admin", "--password-file", str(pw), "--dir", str(log_dir))
    assert ran.code == 0, ran.err
    path = Path(log_dir) / "kafka-tiers-security-scram-credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and b"admin-secret" not in \
        path.read_bytes()
    # the running broker picks the change up (its watch polls the file)
    creds = credentials_of(broker.kafka_server)
    wait_for(lambda: creds.lookup("admin", "SCRAM-SHA-512") is not None, 5.0,
             "the broker to see the credential written with --dir")
    ran = kt("scram", "list", "--dir", str(log_dir), "--format", "json")
    assert json.loads(ran.out)["users"][0]["user"] == "admin"


def test_cli_dir_writes_a_stopped_clusters_store_and_refuses_a_running_one(
        tmp_path: Path) -> None:
    from kafka_tiers.cluster.local_cluster import LocalCluster
    from kafka_tiers.kafka.security.scram_credentials import credentials_of
    from tests.cli_run import kt
    from tests.kafka.targets import LISTENER

    pw = tmp_path / "pw"
    pw.write_text("admin-secret")
    cdir = tmp_path / "c"
    with LocalCluster(cdir, 2, overrides={"listeners": LISTENER}) as cluster:
        ran = kt("scram", "add", "admin", "--password-file", str(pw), "--dir", str(cdir))
        assert ran.code == 2 and "a broker is running" in ran.err, ran.err
    ran = kt("scram", "add", "admin", "--password-file", str(pw), "--dir", str(cdir))
    assert ran.code == 0, ran.err
    with LocalCluster(cdir, 2, overrides={"listeners": LISTENER}) as cluster:
        for b in (1, 2):
            assert credentials_of(cluster.broker(b).kafka_server).lookup(
                "admin", "SCRAM-SHA-512") is not None


# ---------------------------------------------------------------------- logins with them

SASL_LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                  "inter.broker.listener.name": "PLAINTEXT",
                  "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256"}


def _sasl_address(broker: Any) -> str:
    host, port = broker.kafka_server.advertised()["SASL_PLAINTEXT"]
    return f"{host}:{port}"


def _confluent_login(bootstrap: str, user: str, password: str, mechanism: str,
                     timeout: float = 5.0) -> Any:
    """Metadata through a librdkafka client logged in with SCRAM: the broker list, or the
    KafkaError the client reported (an authentication failure: ``_AUTHENTICATION``)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": password, "socket.timeout.ms": 5000,
                         "reconnect.backoff.max.ms": 500, "error_cb": errors.append})
    try:
        return sorted(b.id for b in admin.list_topics(timeout=timeout).brokers.values())
    except KafkaException:
        admin.poll(0.2)
        return errors[0] if errors else None


def test_a_credential_added_on_one_broker_serves_a_login_on_another(
        make_kafka_cluster: Callable[..., Any]) -> None:
    from confluent_kafka import KafkaError
    from kafka.admin import UserScramCredentialUpsertion

    cluster = make_kafka_cluster(brokers=2, overrides=SASL_LISTENERS)
    plain = cluster.broker(1).kafka_server.advertised()["PLAINTEXT"]
    admin = _kp_admin(f"{plain[0]}:{plain[1]}")
    try:
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-pw")]) == \
            {"alice": None}
    finally:
        admin.close()
    on_two = _sasl_address(cluster.broker(2))
    assert _confluent_login(on_two, "alice", "alice-pw", "SCRAM-SHA-512") == [1, 2]
    for password, mechanism in (("wrong-pw", "SCRAM-SHA-512"),
                                ("alice-pw", "SCRAM-SHA-256")):  # no SHA-256 credential
        error = _confluent_login(on_two, "alice", password, mechanism, timeout=1.0)
        assert error is not None and error.code() == KafkaError._AUTHENTICATION, error


def test_cli_config_writes_the_store_of_a_brokers_server_properties(tmp_path: Path) -> None:
    from kafka_tiers.broker.broker import Broker
    from kafka_tiers.config import BrokerConfig
    from kafka_tiers.kafka.security.scram_credentials import credentials_of
    from tests.cli_run import kt
    from tests.kafka.targets import LISTENER

    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=1\nlog.dirs={tmp_path / 'data'}\nlisteners={LISTENER}\n"
                     "offsets.topic.replication.factor=1\n")
    pw = tmp_path / "pw"
    pw.write_text("admin-secret\n")
    # before the broker's first start (its log dir does not exist yet), as --user
    ran = kt("scram", "add", "--user", "admin", "--password-file", str(pw), "--config",
             str(props))
    assert ran.code == 0, ran.err
    broker = Broker(BrokerConfig.from_file(props), cluster=True).start()
    try:
        assert credentials_of(broker.kafka_server).lookup("admin", "SCRAM-SHA-512")
        ran = kt("scram", "list", "--config", str(props))  # refused while it runs
        assert ran.code == 2 and "a broker is running" in ran.err
    finally:
        broker.shutdown()
    ran = kt("scram", "list", "--config", str(props), "--format", "json")
    assert ran.code == 0 and json.loads(ran.out)["users"][0]["user"] == "admin"
    ran = kt("scram", "add", "admin", "--user", "root", "--config", str(props))
    assert ran.code == 2 and "differ" in ran.err
    ran = kt("scram", "add", "admin", "--dir", str(tmp_path), "--config", str(props))
    assert ran.code == 2 and "give one of --dir, --config" in ran.err


def test_cli_over_an_authenticated_listener_with_command_config(
        make_kafka_broker: Callable[..., Any], tmp_path: Path) -> None:
    """The whole story: the first admin written with --dir, then users managed through the
    SCRAM listener as that admin (a super user); a user without ALTER on the cluster is
    refused."""
    from tests.cli_run import kt

    broker = make_kafka_broker(**{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "acl", "super.users": "User:admin"})
    log_dir = broker.config["log.dirs"][0]
    for user in ("admin", "alice"):
        (tmp_path / user).write_text(f"{user}-secret\n")
        ran = kt("scram", "add", user, "--password-file", str(tmp_path / user), "--dir",
                 str(log_dir))
        assert ran.code == 0, ran.err

    def props(user: str) -> str:
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram."
                        f'ScramLoginModule required username="{user}" '
                        f'password="{user}-secret";\n')
        return str(path)

    where = ("--bootstrap-server", broker.bootstrap_servers, "--timeout", "10")
    wait_for(lambda: kt("scram", "list", *where, "--command-config", props("admin")).code == 0,
             5.0, "the broker to see the admin written with --dir")
    code, out = kt_stdin("bob-pw\n", "scram", "add", "bob", "--password-stdin", *where,
                         "--command-config", props("admin"))
    assert code == 0, out
    code, out = kt_stdin("eve-pw\n", "scram", "add", "eve", "--password-stdin", *where,
                         "--command-config", props("alice"))
    assert code == 2 and "not authorized to alter" in out and "eve-pw" not in out, out
    ran = kt("scram", "list", "--format", "json", *where, "--command-config", props("admin"))
    assert [u["user"] for u in json.loads(ran.out)["users"]] == ["admin", "alice", "bob"]


def test_a_change_beyond_the_document_bound_is_refused_whole(
        make_kafka_broker: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_tiers.kafka.security import state_store
    from kafka_tiers.kafka.security.scram_credentials import credentials_of
    from tests.kafka.raw_requests import RawConnection

    broker = make_kafka_broker()
    monkeypatch.setattr(state_store, "MAX_DOCUMENT_BYTES", 1500)
    with RawConnection(broker.bootstrap_servers) as conn:
        resp = conn.call(51, 0, deletions=[], upsertions=[
            ("u1", 2, 4096, b"s", b"p" * 64), ("u2", 2, 4096, b"s", b"p" * 64)])
        assert [r.error_code for r in resp.results] == [0, 0]
        resp = conn.call(51, 0, deletions=[("u1", 2)], upsertions=[
            (f"v{i}", 2, 4096, b"s", b"p" * 64) for i in range(5)])
        assert {r.error_code for r in resp.results} == {-1}
        assert "above the limit of 1500" in resp.results[0].error_message
    assert sorted(credentials_of(broker.kafka_server).describe()) == ["u1", "u2"]
