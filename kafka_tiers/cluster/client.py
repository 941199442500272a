"""A small client of a running cluster, for tests, the CLI and the quick start: metadata,
topics, produce, fetch, leader elections, reassignment and the admin placement operation.

Requests are routed as document 003 says: by the partition states in the metadata store (any
broker answers a Metadata request from it); a client retries routing errors after refreshing
(``NOT_LEADER_OR_FOLLOWER``, ``NOT_CONTROLLER``, a broker that does not answer).

Produce has no idempotence: a produce retried after a failure that happened after the append
(a timeout, a leader change while waiting for the ISR) may store the records twice. The
default is therefore no retry once a request may have been acted on (``retries=0``);
requests that certainly were not (no connection, no leader known, or refused by the broker
before appending, as a broker not yet told it leads does) are retried until the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka_tiers.cluster.transport import (
    ApiKey,
    ChannelSecurity,
    Client,
    ErrorCode,
    Response,
    TcpClient,
    TransportError,
)
from kafka_tiers.log.records import ProducerRecord, Record, build_batch, verified_batches

#: errors after which routing is refreshed and the request sent again
ROUTING = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                     ErrorCode.NOT_CONTROLLER, ErrorCode.NETWORK_EXCEPTION,
                     ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT,
                     ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


def encode_records(records: bytes | Sequence[Any]) -> bytes:
    """Record batch bytes from values (bytes/str), ``(key, value)`` tuples or
    ``ProducerRecord`` values; bytes pass through (already encoded batches)."""
    if isinstance(records, bytes | bytearray):
        return bytes(records)
    recs = []
    for r in records:
        if isinstance(r, ProducerRecord):
            recs.append(r)
        elif isinstance(r, tuple):
            key, value = r
            recs.append(ProducerRecord(_b(value), _b(key)))
        else:
            recs.append(ProducerRecord(_b(r)))
    if not recs:
        raise ValueError("nothing to produce")
    return build_batch(recs)


def _b(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def decode_records(payload: bytes, from_offset: int = 0) -> list[Record]:
    """The records of record batch bytes at or after ``from_offset``; every batch is verified
    first (CRC-32C, magic, offset order: Kafka's ``check.crcs``).

    Raises:
        CorruptRecordError: a batch fails its checks (no record is returned).
    """
    out: list[Record] = []
    for batch in verified_batches(payload):
        out.extend(r for r in batch.records() if r.offset >= from_offset)
    return out


class ClusterClient:
    """A client of a cluster reachable at ``bootstrap`` addresses (``127.0.0.1:9092``, or
    ``inproc:<port>`` with a loopback transport client).

    Args:
        bootstrap: broker addresses to ask for metadata.
        transport: the transport client (default: TCP).
        timeout: the default timeout of every call, seconds.
        security: the internal transport's TLS for the client it makes (brokers whose
            inter-broker listener is SSL or SASL_SSL); None: plaintext.
    """

    def __init__(self, bootstrap: Iterable[str], *, transport: Client | None = None,
                 timeout: float = 30.0, security: ChannelSecurity | None = None) -> None:
        self.bootstrap = list(bootstrap)
        if not self.bootstrap:
            raise ValueError("give at least one bootstrap address")
        self.transport = transport if transport is not None else TcpClient(security=security)
        self._owns = transport is None
        self.timeout = timeout
        self._brokers: dict[int, str] = {}
        self._leaders: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        """Close the connections (when the client made its own transport)."""
        if self._owns:
            self.transport.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata
    def metadata(self, topics: Sequence[str] | None = None, *, local: bool = False,
                 address: str | None = None) -> dict[str, Any]:
        """Brokers, controller and partition states (from the first broker that answers).

        Raises:
            TransportError: no broker answered.
        """
        body: dict[str, Any] = {"local": local}
        if topics is not None:
            body["topics"] = list(topics)
        last: TransportError | None = None
        candidates = [address] if address else [*self._brokers.values(), *self.bootstrap]
        for addr in dict.fromkeys(candidates):
            try:
                md = self.transport.send(addr, ApiKey.METADATA, body, timeout=5).body
            except TransportError as exc:
                last = exc
                continue
            self._learn(md)
            return md
        raise last or TransportError("no broker answered", ErrorCode.NETWORK_EXCEPTION)

    def _learn(self, md: Mapping[str, Any]) -> None:
        self._brokers = {b["broker_id"]: f"{b['host']}:{b['port']}" for b in md["brokers"]}
        for t in md["topics"]:
            for p in t["partitions"]:
                self._leaders[(t["topic"], p["partition"])] = p["leader"]

    def broker_address(self, broker_id: int) -> str:
        if broker_id not in self._brokers:
            self.metadata([])
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise TransportError(f"broker {broker_id} is not alive",
                                 ErrorCode.BROKER_NOT_AVAILABLE) from None

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> int:
        """The partition's leader (-1: offline)."""
        if refresh or (topic, partition) not in self._leaders:
            self.metadata([topic])
        return self._leaders.get((topic, partition), -1)

    def _retrying(self, fn: Any, timeout: float | None, retry_sent: bool = True,
                  final: frozenset[ErrorCode] = frozenset()) -> Any:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                return fn()
            except TransportError as exc:
                if exc.code not in ROUTING or exc.code in final or \
                        time.monotonic() > deadline or not retry_sent:
                    raise
                time.sleep(0.05)

    def _to_controller(self, api: ApiKey, body: Mapping[str, Any],
                       timeout: float | None = None,
                       final: frozenset[ErrorCode] = frozenset()) -> Response:
        """Send to the active controller, retrying routing errors (no controller yet, a
        moved one) until ``timeout``; codes in ``final`` are the controller's answer, never
        retried."""
        wait = self.timeout if timeout is None else timeout

        def once() -> Response:
            md = self.metadata([])
            if md["controller"] < 0:
                raise TransportError("no controller yet", ErrorCode.NOT_CONTROLLER)
            return self.transport.send(self.broker_address(md["controller"]), api, body,
                                       timeout=wait + 5)

        return self._retrying(once, timeout, final=final)

    # ------------------------------------------------------------------ topics
    def create_topic(self, topic: str, partitions: int | None = None,
                     replication_factor: int | None = None,
                     config: Mapping[str, str] | None = None, *,
                     broker_ids: Sequence[int] | None = None, force_simple: bool = False,
                     assignment: Mapping[int, Sequence[int]] | None = None,
                     wait: bool = True, timeout: float | None = None) -> dict[int, list[int]]:
        """Create a topic through the controller and its placer; returns its partitions'
        replicas. With ``wait``, returns once every leader is known to the metadata. A topic
        that exists is never changed (of two concurrent creations one wins, the other gets
        ``TOPIC_ALREADY_EXISTS``); :meth:`add_partitions` grows one.

        Raises:
            TransportError: ``TOPIC_ALREADY_EXISTS``, ``INVALID_REPLICATION_FACTOR``,
                ``INVALID_REPLICA_ASSIGNMENT``, ``INVALID_CONFIG``, or a timeout.
        """
        body: dict[str, Any] = {"topic": topic, "partitions": partitions,
                                "replication_factor": replication_factor,
                                "config": dict(config or {}), "force_simple": force_simple,
                                "timeout_ms": int((self.timeout if timeout is None
                                                   else timeout) * 1000)}
        if broker_ids is not None:
            body["broker_ids"] = list(broker_ids)
        if assignment is not None:
            body["assignment"] = {str(p): list(r) for p, r in assignment.items()}
        resp = self._to_controller(ApiKey.CREATE_TOPICS, body, timeout)
        result = {int(p): list(r) for p, r in resp.body["assignment"].items()}
        if wait:
            self.wait_for_leaders(topic, timeout=timeout)
        return result

    def add_partitions(self, topic: str, total: int, *,
                       broker_ids: Sequence[int] | None = None, force_simple: bool = False,
                       assignment: Sequence[Sequence[int]] | None = None,
                       wait: bool = True, timeout: float | None = None) -> dict[int, list[int]]:
        """Grow ``topic`` to ``total`` partitions through the controller (Kafka's
        CreatePartitions: the new count, so a repeated request never grows the topic twice);
        the new partitions keep the topic's replication factor and are placed by the placer,
        or by ``assignment`` (the replicas of each new partition, in order). Returns the new
        partitions' replicas; with ``wait``, once every leader is known.

        Raises:
            TransportError: ``UNKNOWN_TOPIC_OR_PARTITION``, ``INVALID_PARTITIONS`` (``total``
                not above the current count), ``INVALID_REPLICA_ASSIGNMENT``, or a timeout.
        """
        body: dict[str, Any] = {"topic": topic, "total": total, "force_simple": force_simple,
                                "timeout_ms": int((self.timeout if timeout is None
                                                   else timeout) * 1000)}
        if broker_ids is not None:
            body["broker_ids"] = list(broker_ids)
        if assignment is not None:
            body["assignment"] = [list(r) for r in assignment]
        # the controller knows every topic: its UNKNOWN_TOPIC_OR_PARTITION is the answer
        resp = self._to_controller(ApiKey.CREATE_PARTITIONS, body, timeout,
                                   final=frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}))
        result = {int(p): list(r) for p, r in resp.body["assignment"].items()}
        if wait:
            self.wait_for_leaders(topic, timeout=timeout)
        return result

    def wait_for_leaders(self, topic: str, timeout: float | None = None) -> None:
        """Wait until every partition of ``topic`` has a leader that serves it."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            md = self.metadata([topic])
            parts = md["topics"][0]["partitions"] if md["topics"] else []
            if parts and all(p["leader"] >= 0 for p in parts):
                return
            if time.monotonic() > deadline:
                raise TransportError(f"{topic}: not every partition has a leader",
                                     ErrorCode.LEADER_NOT_AVAILABLE)
            time.sleep(0.05)

    def delete_topic(self, topic: str, timeout: float | None = None) -> None:
        """Delete a topic: every replica's log, then its metadata."""
        self._to_controller(ApiKey.DELETE_TOPICS, {"topic": topic}, timeout)

    def describe_topic(self, topic: str) -> list[dict[str, Any]]:
        """Per partition: replicas, leader, leader epoch, ISR."""
        md = self.metadata([topic])
        t = md["topics"][0]
        if t["error"]:
            raise TransportError(f"unknown topic {topic!r}",
                                 ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return list(t["partitions"])

    def create_replica_placement(self, num_partitions: int, replication_factor: int, *,
                                 force_simple: bool = False,
                                 broker_ids: Sequence[int] | None = None,
                                 start_partition: int = 0) -> list[list[int]]:
        """Document 001's admin operation, served by the controller's placer."""
        body: dict[str, Any] = {"num_partitions": num_partitions,
                                "replication_factor": replication_factor,
                                "force_simple": force_simple, "start_partition": start_partition}
        if broker_ids is not None:
            body["broker_ids"] = list(broker_ids)
        return self._to_controller(ApiKey.CREATE_REPLICA_PLACEMENT, body).body["placement"]

    def elect_preferred_leaders(self, partitions: Sequence[tuple[str, int]] | None = None
                                ) -> dict[str, str]:
        """Preferred-leader election (all partitions when None)."""
        body: dict[str, Any] = {}
        if partitions is not None:
            body["partitions"] = [{"topic": t, "partition": p} for t, p in partitions]
        return self._to_controller(ApiKey.ELECT_LEADERS, body).body["results"]

    def reassign(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Request reassignments: ``{"topic", "partition", "replicas", "log_dirs"?}`` each
        (document 003 section F, document 000 section 2)."""
        self._retrying(lambda: self.transport.send(
            self._any(), ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            {"partitions": [dict(e) for e in entries]}, timeout=self.timeout), None)

    def reassignments(self) -> list[dict[str, Any]]:
        """The reassignments in progress."""
        return self.transport.send(self._any(), ApiKey.LIST_PARTITION_REASSIGNMENTS, {},
                                   timeout=self.timeout).body["partitions"]

    def describe_log_dirs(self, broker_id: int) -> list[dict[str, Any]]:
        """A broker's log dirs and the replicas in each (document 000's DescribeDirs)."""
        return self.transport.send(self.broker_address(broker_id), ApiKey.DESCRIBE_LOG_DIRS,
                                   {}, timeout=self.timeout).body["log_dirs"]

    def _any(self) -> str:
        md = self.metadata([])
        return self._brokers.get(md["broker_id"]) or self.bootstrap[0]

    # ------------------------------------------------------------------ data
    def produce(self, topic: str, partition: int, records: bytes | Sequence[Any], *,
                acks: int = -1, timeout: float | None = None, retries: int = 0) -> int:
        """Produce to the partition's leader; returns the base offset.

        Routing errors before anything was sent (no leader, leader not reachable) are
        retried until ``timeout``; after a request reached a broker, only ``retries`` times
        (see the module docstring).

        Raises:
            TransportError: ``NOT_ENOUGH_REPLICAS``, ``REQUEST_TIMED_OUT``,
                ``NOT_LEADER_OR_FOLLOWER``, ...
        """
        payload = encode_records(records)
        t = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        attempts = 0
        refresh = False
        while True:
            leader = self.leader(topic, partition, refresh=refresh)
            refresh = True
            if leader < 0:
                if time.monotonic() > deadline:
                    raise TransportError(f"{topic}-{partition} has no leader",
                                         ErrorCode.LEADER_NOT_AVAILABLE)
                time.sleep(0.05)
                continue
            try:
                address = self.broker_address(leader)
            except TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                continue
            try:
                resp = self.transport.send(
                    address, ApiKey.PRODUCE,
                    {"topic": topic, "partition": partition, "acks": acks,
                     "timeout_ms": int(max(0.1, deadline - time.monotonic()) * 1000)},
                    payload=payload, timeout=max(0.1, deadline - time.monotonic()) + 1)
                return int(resp.body["base_offset"])
            except TransportError as exc:
                self._leaders.pop((topic, partition), None)
                if not exc.nothing_done:  # it may have been appended: a retry could repeat it
                    attempts += 1
                if exc.code not in ROUTING or attempts > retries or \
                        time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
              timeout: float | None = None) -> tuple[list[Record], int]:
        """Records from ``offset`` (committed ones only: up to the high watermark) and the
        high watermark, from the leader."""

        def once() -> tuple[list[Record], int]:
            leader = self.leader(topic, partition, refresh=True)
            if leader < 0:
                raise TransportError("no leader", ErrorCode.LEADER_NOT_AVAILABLE)
            resp = self.transport.send(
                self.broker_address(leader), ApiKey.FETCH,
                {"replica_id": -1, "max_wait_ms": 0, "max_bytes": max_bytes,
                 "partitions": [{"topic": topic, "partition": partition, "offset": offset}]},
                timeout=self.timeout)
            entry = resp.body["partitions"][0]
            if entry["error"]:
                raise TransportError(f"fetch {topic}-{partition}@{offset}: "
                                     f"{ErrorCode(entry['error']).name}",
                                     ErrorCode(entry["error"]))
            return decode_records(resp.payload, offset), int(entry["hw"])

        return self._retrying(once, timeout)

    def read_all(self, topic: str, partition: int, *, timeout: float | None = None
                 ) -> list[Record]:
        """Every committed record of a partition (from offset 0)."""
        out: list[Record] = []
        offset = 0
        while True:
            recs, hw = self.fetch(topic, partition, offset, timeout=timeout)
            recs = [r for r in recs if r.offset < hw]
            out.extend(recs)
            if not recs or recs[-1].offset + 1 >= hw:
                return out
            offset = recs[-1].offset + 1


__all__ = ["ROUTING", "ClusterClient", "decode_records", "encode_records"]
