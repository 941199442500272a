"""Incremental fetch sessions (KIP-227) belong to whoever opened them: the principal and the
listener of the request that created the session. Another principal, or the same one on
another listener, naming its id is answered as for an unknown id and cannot close it; ids
come from :mod:`secrets`. Raw Fetch requests (v12, topics by name) on SASL listeners."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka.fetch_sessions import FETCH_SESSION_ID_NOT_FOUND, FetchSessionCache
from tests.kafka.raw_requests import RawConnection, request_class

FETCH, VERSION = 1, 12
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_mallory="mallory-secret";')
PASSWORDS = {"alice": "alice-secret", "mallory": "mallory-secret"}


def login(address: str, user: str) -> RawConnection:
    """A raw connection to ``address`` authenticated with SASL/PLAIN as ``user``."""
    conn = RawConnection(address, timeout=5.0)
    assert conn.call(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == 0
    auth = conn.call(SASL_AUTHENTICATE, 1,
                     auth_bytes=f"\0{user}\0{PASSWORDS[user]}".encode())
    assert auth.error_code == 0, auth
    return conn


def fetch(conn: RawConnection, session_id: int, session_epoch: int,
          partitions: tuple[int, ...] = ()) -> Any:
    """One Fetch v12 of topic ``t`` (``partitions`` from offset 0)."""
    req = request_class(FETCH, VERSION)
    parts = [req.FetchTopic.FetchPartition(
        version=VERSION, partition=p, current_leader_epoch=-1, fetch_offset=0,
        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
        for p in partitions]
    topics = [req.FetchTopic(version=VERSION, topic="t", partitions=parts)] if parts else []
    return conn.call(FETCH, VERSION, replica_id=-1, max_wait_ms=0, min_bytes=1,
                     max_bytes=1 << 20, isolation_level=0, session_id=session_id,
                     session_epoch=session_epoch, topics=topics, forgotten_topics_data=[],
                     rack_id="")


def test_a_fetch_session_is_unknown_to_another_principal_and_listener(
        make_kafka_broker: Callable[..., Broker]) -> None:
    broker = make_kafka_broker(**{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS})
    broker.create_topic("t", 2)
    assert broker.kafka_server is not None
    address = {n: f"{h}:{p}" for n, (h, p) in broker.kafka_server.advertised().items()}
    alice = login(address["SASL_PLAINTEXT"], "alice")
    mallory = login(address["SASL_PLAINTEXT"], "mallory")
    alice_elsewhere = login(address["OTHER"], "alice")
    try:
        opened = fetch(alice, 0, 0, (0, 1))
        sid = opened.session_id
        assert opened.error_code == 0 and sid > 0
        # another principal naming alice's id: as if unknown, for an incremental fetch...
        assert fetch(mallory, sid, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
        # ...and the same user on another listener too
        assert fetch(alice_elsewhere, sid, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
        # neither can close it (epoch -1) nor replace it (epoch 0 opens one of their own)
        assert fetch(mallory, sid, -1).session_id == 0
        theirs = fetch(mallory, sid, 0, (0,))
        assert theirs.error_code == 0 and theirs.session_id not in (0, sid)
        assert fetch(alice_elsewhere, sid, -1).error_code == 0
        # alice's session is still hers, at the epoch she expects
        mine = fetch(alice, sid, 1)
        assert (mine.error_code, mine.session_id) == (0, sid)
        # and mallory's is unknown to alice
        assert fetch(alice, theirs.session_id, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
        # alice on her listener closes her own session
        assert fetch(alice, sid, -1).session_id == 0
        assert fetch(alice, sid, 2).error_code == FETCH_SESSION_ID_NOT_FOUND
    finally:
        for conn in (alice, mallory, alice_elsewhere):
            conn.close()


def test_session_ids_do_not_follow_from_the_random_modules_state() -> None:
    # with ids from `random`, seeding it gave the same ids again (predictable)
    owner = ("User:alice", "SASL_SSL")
    ids = []
    for _ in range(2):
        random.seed(1234)
        session = FetchSessionCache(slots=10).create(owner)
        assert session is not None and 1 <= session.id <= 2**31 - 1
        ids.append(session.id)
    assert ids[0] != ids[1]
