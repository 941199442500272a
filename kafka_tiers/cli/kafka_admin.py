"""The command line's access to a cluster through the Kafka protocol only.

``kafka-tiers topics``, ``cluster``, ``reassign``, ``log-dirs`` and ``place`` given
``--bootstrap-server HOST:PORT`` (or ``$KAFKA_TIERS_BOOTSTRAP``) talk to the brokers' Kafka
listeners through kafka-python's :class:`~kafka.admin.KafkaAdminClient` (and its producer and
consumer for ``topics produce`` / ``consume``), so the same commands work against an Apache
Kafka cluster. :class:`KafkaAdmin` offers the methods of
:class:`~kafka_tiers.cluster.client.ClusterClient` the commands use, with the same result
shapes, so a command does not care which way it reached the cluster.

Requests used: Metadata, DescribeCluster (via kafka-python's admin client), CreateTopics,
CreatePartitions, DeleteTopics, AlterPartitionReassignments, ListPartitionReassignments,
DescribeLogDirs, AlterReplicaLogDirs, ElectLeaders, Produce, ListOffsets and Fetch.

Errors: every failure is a :class:`~kafka_tiers.api.errors.KafkaTiersError` of one line naming
the operation, Kafka's error name and the broker's message; a bootstrap list of which no
address accepts a TCP connection fails at once ("cannot reach ..."), not after a timeout.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import kafka_tiers.kafka  # noqa: F401 - imports kafka-python quietly (see that package)
from kafka_tiers.api.errors import KafkaTiersError

#: seconds a command waits for the cluster (bootstrap, one request) by default
DEFAULT_TIMEOUT = 15.0


class KafkaAdminError(KafkaTiersError):
    """A Kafka-protocol request failed; ``error`` is Kafka's error name (e.g.
    ``TOPIC_ALREADY_EXISTS``) when the broker gave one, else ``""``."""

    def __init__(self, message: str, error: str = "") -> None:
        super().__init__(message)
        self.error = error


def _error_name(exc: BaseException) -> str:
    """Kafka's error name of a kafka-python error (``UNKNOWN_TOPIC_OR_PARTITION``)."""
    name = getattr(exc, "message", None)
    return name if isinstance(name, str) and name.isupper() else ""


@contextlib.contextmanager
def _errors(what: str) -> Iterator[None]:
    """kafka-python's errors as one-line :class:`KafkaAdminError` naming ``what``."""
    import kafka.errors as kerr

    try:
        yield
    except KafkaTiersError:
        raise
    except kerr.KafkaError as exc:
        name = _error_name(exc)
        detail = " ".join(str(a) for a in exc.args if a).strip()
        text = f"{name}: {detail}" if name and detail else name or detail
        raise KafkaAdminError(f"{what}: {text or type(exc).__name__}", name) from None
    except (OSError, ValueError) as exc:
        raise KafkaAdminError(f"{what}: {exc}") from None


def _raise_code(what: str, code: int, message: str | None = None) -> None:
    """Raise :class:`KafkaAdminError` for a non-zero Kafka error code."""
    if not code:
        return
    import kafka.errors as kerr

    cls = kerr.for_code(code)
    name = getattr(cls, "message", "") or cls.__name__
    raise KafkaAdminError(f"{what}: {name}" + (f": {message}" if message else ""), name)


def reachable(bootstrap: Sequence[str], timeout: float) -> None:
    """Check that at least one bootstrap address accepts a TCP connection.

    Raises:
        KafkaAdminError: none does (each address and its error named).
    """
    problems = []
    for server in bootstrap:
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            problems.append(f"{server}: {exc.strerror or exc}")
    raise KafkaAdminError(f"cannot reach a Kafka listener at {', '.join(problems)} (is the "
                          "cluster running, and is HOST:PORT its listeners address?)")


class KafkaAdmin:
    """A cluster reached at ``bootstrap`` (``host:port`` of Kafka listeners) through the Kafka
    protocol. Use as a context manager; :meth:`close` closes every connection.

    ``settings`` are kafka-python client arguments (``security_protocol``, ``ssl_cafile``,
    ``sasl_mechanism``, ...: a ``--command-config`` file's) given to every client it makes.

    Raises (constructor):
        KafkaAdminError: no bootstrap address answers within ``timeout`` seconds.
    """

    def __init__(self, bootstrap: Sequence[str], timeout: float = DEFAULT_TIMEOUT, *,
                 settings: Mapping[str, Any] | None = None) -> None:
        from kafka.admin import KafkaAdminClient

        self.bootstrap = list(bootstrap)
        self.timeout = timeout
        #: the client arguments of every kafka-python client (client id, security)
        self.settings: dict[str, Any] = {"client_id": "kafka-tiers-cli", **(settings or {})}
        reachable(self.bootstrap, min(timeout, 5.0))
        ms = int(timeout * 1000)
        import kafka.errors as kerr

        try:
            with _errors(f"connecting to {','.join(self.bootstrap)}"):
                self.admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                              request_timeout_ms=ms, bootstrap_timeout_ms=ms,
                                              **self.settings)
        except TypeError as exc:  # kafka-python without one of the --command-config settings
            raise KafkaAdminError(f"the client does not take a setting of the "
                                  f"--command-config file: {exc}") from None
        except KafkaAdminError as exc:
            if not isinstance(exc.__context__, kerr.KafkaTimeoutError):
                raise
            raise KafkaAdminError(f"{','.join(self.bootstrap)} accepted a connection but no "
                                  f"Kafka listener answered within {timeout:g}s (give the "
                                  "address of a broker's listeners, not its internal port)"
                                  ) from None

    def close(self) -> None:
        """Close the admin client's connections."""
        with contextlib.suppress(Exception):
            self.admin.close()

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata
    def metadata(self, topics: Sequence[str] | None = None) -> dict[str, Any]:
        """Brokers (``broker_id, host, port, rack, fenced``), the controller and, per topic
        (``topic, error, internal, partitions``), each partition's ``partition, replicas,
        leader, leader_epoch, isr, offline``: the shape of ``ClusterClient.metadata``
        (DescribeCluster, and Metadata for the topics: all when ``topics`` is None, none when
        it is empty)."""
        out = self.describe_cluster()
        md_topics: list[dict[str, Any]] = []
        if topics is None or list(topics):
            with _errors("Metadata"):
                md_topics = self.admin.describe_topics(None if topics is None
                                                       else list(topics))
        out["topics"] = []
        for t in md_topics:
            parts = [{"partition": p["partition_index"], "replicas": list(p["replica_nodes"]),
                      "leader": p["leader_id"], "leader_epoch": p.get("leader_epoch", -1),
                      "isr": list(p["isr_nodes"]),
                      "offline": list(p.get("offline_replicas") or [])}
                     for p in sorted(t["partitions"], key=lambda p: p["partition_index"])]
            out["topics"].append({"topic": t["name"], "error": t["error_code"],
                                  "internal": bool(t.get("is_internal")), "partitions": parts})
        return out

    def describe_cluster(self) -> dict[str, Any]:
        """DescribeCluster (kafka-python falls back to Metadata on a broker without it):
        ``cluster_id``, ``controller`` and the brokers (``broker_id, host, port, rack,
        fenced``)."""
        with _errors("DescribeCluster"):
            doc = self.admin.describe_cluster()
        return {"cluster_id": doc.get("cluster_id"), "controller": doc.get("controller_id", -1),
                "brokers": [{"broker_id": b["broker_id"], "host": b["host"], "port": b["port"],
                             "rack": b.get("rack"), "fenced": bool(b.get("is_fenced"))}
                            for b in sorted(doc["brokers"], key=lambda b: b["broker_id"])]}

    def cluster_view(self) -> Any:
        """The live cluster as the placer sees it: a
        :class:`~kafka_tiers.api.cluster.ClusterView` of the brokers (racks, fenced ones) and
        the current assignment of every topic (DescribeCluster and Metadata)."""
        from kafka_tiers.api import BrokerInfo, ClusterView, TopicPartition

        md = self.metadata()
        brokers = [BrokerInfo(b["broker_id"], b["rack"] or None, b["fenced"])
                   for b in md["brokers"]]
        assignments = {TopicPartition(t["topic"], p["partition"]): list(p["replicas"])
                       for t in md["topics"] if not t["error"] for p in t["partitions"]}
        return ClusterView(brokers, assignments)

    def list_topics(self) -> list[str]:
        """Every topic's name, sorted."""
        return sorted(t["topic"] for t in self.metadata()["topics"] if not t["error"])

    def describe_topic(self, topic: str) -> list[dict[str, Any]]:
        """Per partition: replicas, leader, leader epoch, ISR.

        Raises:
            KafkaAdminError: ``unknown topic 'name'``.
        """
        t = self.metadata([topic])["topics"][0]
        if t["error"]:
            raise KafkaAdminError(f"unknown topic {topic!r}", "UNKNOWN_TOPIC_OR_PARTITION")
        return list(t["partitions"])

    # ------------------------------------------------------------------ topics
    def create_topic(self, topic: str, partitions: int | None = None,
                     replication_factor: int | None = None,
                     config: Mapping[str, str] | None = None, *,
                     broker_ids: Sequence[int] | None = None, force_simple: bool = False,
                     assignment: Mapping[int, Sequence[int]] | None = None,
                     wait: bool = True, timeout: float | None = None) -> dict[int, list[int]]:
        """Create a topic (CreateTopics), or add ``partitions`` partitions to an existing one
        (CreatePartitions); returns the new partitions' replicas (read back from Metadata).

        The brokers place the replicas through their placer. ``broker_ids`` and
        ``force_simple`` are not in Kafka's requests: with either, the replicas are placed
        here (kafka-tiers' default placer, or the simple one, over the live cluster read
        through Metadata) and sent as an explicit assignment, which the brokers validate.

        Raises:
            KafkaAdminError: Kafka's error (``TOPIC_ALREADY_EXISTS`` when no partition count
                is given, ``INVALID_REPLICATION_FACTOR``, ``POLICY_VIOLATION``, ...).
        """
        ms = int((self.timeout if timeout is None else timeout) * 1000)
        existing = self._partition_count(topic)
        if assignment is None and (broker_ids is not None or force_simple):
            assignment = self._place_here(topic, partitions, replication_factor, existing,
                                          broker_ids, force_simple)
        if existing:
            if assignment is None and not partitions:
                raise KafkaAdminError(f"CreateTopics {topic}: TOPIC_ALREADY_EXISTS (give "
                                      "--partitions to add partitions)", "TOPIC_ALREADY_EXISTS")
            count = existing + (len(assignment) if assignment is not None else
                                int(partitions or 0))
            spec: int | dict[str, Any] = count
            if assignment is not None:
                spec = {"count": count,
                        "assignments": [list(r) for _, r in sorted(assignment.items())]}
            with _errors(f"CreatePartitions {topic}"):
                resp = self.admin.create_partitions({topic: spec}, timeout_ms=ms,
                                                    raise_errors=False)
            for r in resp.results:
                _raise_code(f"CreatePartitions {topic}", r.error_code, r.error_message)
        else:
            data: dict[str, Any] = {"configs": dict(config or {})}
            if assignment is not None:
                data["assignments"] = {int(p): list(r) for p, r in assignment.items()}
            else:
                data["num_partitions"] = -1 if partitions is None else int(partitions)
                data["replication_factor"] = (-1 if replication_factor is None
                                              else int(replication_factor))
            with _errors(f"CreateTopics {topic}"):
                resp = self.admin.create_topics({topic: data}, timeout_ms=ms,
                                                raise_errors=False)
            for t in resp.get("topics", []):
                _raise_code(f"CreateTopics {topic}", t.get("error_code", 0),
                            t.get("error_message"))
        if wait:
            self.wait_for_leaders(topic, timeout)
        parts = self.describe_topic(topic)
        return {p["partition"]: list(p["replicas"]) for p in parts
                if p["partition"] >= existing}

    def _partition_count(self, topic: str) -> int:
        t = self.metadata([topic])["topics"][0]
        return 0 if t["error"] else len(t["partitions"])

    def _place_here(self, topic: str, partitions: int | None, replication_factor: int | None,
                    existing: int, broker_ids: Sequence[int] | None, force_simple: bool
                    ) -> dict[int, list[int]]:
        from kafka_tiers.config import BrokerConfig
        from kafka_tiers.placement.service import PlacementService

        if not partitions or not replication_factor:
            raise KafkaAdminError("--broker-ids and --force-simple through the Kafka protocol "
                                  "need --partitions and --replication-factor (the replicas "
                                  "are placed here and sent as an explicit assignment)")
        view = self.cluster_view()
        with PlacementService(BrokerConfig({})) as core:
            plan = core.plan_topic(view, topic, partitions, replication_factor,
                                   broker_ids=list(broker_ids) if broker_ids else None,
                                   force_simple=force_simple)
        out = {tp.partition: list(r) for tp, r in plan.items()}
        if existing and min(out) != existing:  # continue the topic's partitions
            out = {existing + i: r for i, (_, r) in enumerate(sorted(out.items()))}
        return out

    def wait_for_leaders(self, topic: str, timeout: float | None = None) -> None:
        """Wait until Metadata shows a leader for every partition of ``topic``.

        Raises:
            KafkaAdminError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            t = self.metadata([topic])["topics"][0]
            if not t["error"] and t["partitions"] and all(p["leader"] >= 0
                                                          for p in t["partitions"]):
                return
            if time.monotonic() > deadline:
                raise KafkaAdminError(f"{topic}: not every partition has a leader after "
                                      f"{self.timeout:g}s", "LEADER_NOT_AVAILABLE")
            time.sleep(0.1)

    def delete_topic(self, topic: str, timeout: float | None = None) -> None:
        """DeleteTopics (every replica's data, local and remote, goes)."""
        ms = int((self.timeout if timeout is None else timeout) * 1000)
        with _errors(f"DeleteTopics {topic}"):
            resp = self.admin.delete_topics([topic], timeout_ms=ms, raise_errors=False)
        for r in resp.get("responses", []):
            _raise_code(f"DeleteTopics {topic}", r.get("error_code", 0), r.get("error_message"))

    # ------------------------------------------------------------------ reassignments
    def reassign(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Kafka's reassignment entries (``topic, partition, replicas, log_dirs?``): the log
        dirs first (AlterReplicaLogDirs to each replica's broker; a replica not there yet is
        placed in that dir when it is created, as Kafka's tool relies on), then
        AlterPartitionReassignments.

        Raises:
            KafkaAdminError: the request, or a partition, was refused.
        """
        from kafka import TopicPartition

        self.alter_log_dirs(entries)
        wanted = {TopicPartition(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]]
                  for e in entries}
        with _errors("AlterPartitionReassignments"):
            results = self.admin.alter_partition_reassignments(
                wanted, timeout_ms=int(self.timeout * 1000))
        refused = [f"{tp.topic}-{tp.partition}: {getattr(err, 'message', err)}"
                   for tp, err in sorted(results.items()) if err is not None]
        if refused:
            raise KafkaAdminError(f"AlterPartitionReassignments: {'; '.join(refused)}")

    def alter_log_dirs(self, entries: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int, int],
                                                                           str]:
        """AlterReplicaLogDirs for every replica with a log dir other than ``any``; returns
        the error name per ``(topic, partition, broker)`` (``NO_ERROR``: accepted;
        ``REPLICA_NOT_AVAILABLE`` / ``NOT_LEADER_OR_FOLLOWER``: the replica is not there yet).
        """
        moves = {(e["topic"], int(e["partition"]), int(b)): d
                 for e in entries
                 for b, d in zip(e["replicas"], e.get("log_dirs") or [], strict=False)
                 if d != "any"}
        if not moves:
            return {}
        with _errors("AlterReplicaLogDirs"):
            results = self.admin.alter_replica_log_dirs(moves)
        out = {}
        for tpr, err in results.items():
            name = getattr(err, "message", "NO_ERROR")
            key = (tpr.topic, tpr.partition, tpr.broker_id)
            out[key] = name
            if name not in ("NO_ERROR", "REPLICA_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER"):
                raise KafkaAdminError(f"AlterReplicaLogDirs {tpr.topic}-{tpr.partition} on "
                                      f"broker {tpr.broker_id} -> {moves[key]}: {name}", name)
        return out

    def reassignments(self) -> list[dict[str, Any]]:
        """ListPartitionReassignments: ``topic, partition, replicas, adding, removing``."""
        with _errors("ListPartitionReassignments"):
            got = self.admin.list_partition_reassignments(timeout_ms=int(self.timeout * 1000))
        return [{"topic": tp.topic, "partition": tp.partition, "replicas": v["replicas"],
                 "adding": v["adding_replicas"], "removing": v["removing_replicas"]}
                for tp, v in sorted(got.items())]

    def describe_log_dirs(self, broker_id: int, topics: Sequence[str] | None = None
                          ) -> list[dict[str, Any]]:
        """DescribeLogDirs of one broker: per dir ``path, error, total_bytes, usable_bytes,
        partitions`` (``topic, partition, size, offset_lag, is_future``)."""
        with _errors(f"DescribeLogDirs of broker {broker_id}"):
            got = self.admin.describe_log_dirs(list(topics) if topics else None,
                                               brokers=[broker_id])
        out = []
        for d in got[0]["log_dirs"] if got else []:
            import kafka.errors as kerr

            code = d.get("error_code", 0)
            out.append({
                "path": d["log_dir"],
                "error": kerr.for_code(code).message if code else None,
                "total_bytes": d.get("total_bytes", -1), "usable_bytes": d.get("usable_bytes", -1),
                "partitions": [{"topic": t["name"], "partition": p["partition_index"],
                                "size": p["partition_size"], "offset_lag": p["offset_lag"],
                                "is_future": bool(p["is_future_key"])}
                               for t in d["topics"] for p in t["partitions"]]})
        return out

    def elect_preferred_leaders(self, partitions: Sequence[tuple[str, int]] | None = None
                                ) -> dict[str, str]:
        """ElectLeaders (preferred): ``topic-partition`` -> ``elected``, ``already leader``
        (Kafka's ELECTION_NOT_NEEDED) or the error name."""
        import kafka.errors as kerr

        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = {}
            for t, p in partitions:
                wanted.setdefault(t, []).append(p)
        with _errors("ElectLeaders"):
            resp = self.admin.elect_leaders(0, wanted, timeout_ms=int(self.timeout * 1000),
                                            raise_errors=False)
        if getattr(resp, "error_code", 0):
            _raise_code("ElectLeaders", resp.error_code)
        out = {}
        for result in resp.replica_election_results:
            for p in result.partition_result:
                code = p.error_code
                outcome = ("elected" if code == 0 else "already leader"
                           if kerr.for_code(code) is kerr.ElectionNotNeededError
                           else kerr.for_code(code).message)
                out[f"{result.topic}-{p.partition_id}"] = outcome
        return out

    # ------------------------------------------------------------------ data
    def produce(self, topic: str, partition: int, records: Sequence[Any], *, acks: int = -1,
                timeout: float | None = None) -> int:
        """Produce ``records`` (values, or ``(key, value)`` pairs) to one partition with a
        kafka-python producer; returns the offset of the first.

        Raises:
            KafkaAdminError: the produce failed (Kafka's error name).
        """
        from kafka import KafkaProducer

        ms = int((self.timeout if timeout is None else timeout) * 1000)
        with _errors(f"Produce {topic}-{partition}"):
            producer = KafkaProducer(bootstrap_servers=self.bootstrap,
                                     acks="all" if acks == -1 else acks,
                                     enable_idempotence=False,
                                     max_in_flight_requests_per_connection=1, retries=0,
                                     request_timeout_ms=ms, delivery_timeout_ms=ms + 100,
                                     max_block_ms=ms,
                                     bootstrap_timeout_ms=ms, **self.settings)
            try:
                futures = []
                for r in records:
                    key, value = r if isinstance(r, tuple) else (None, r)
                    futures.append(producer.send(topic, value=value, key=key,
                                                 partition=partition))
                producer.flush(timeout=ms / 1000)
                offsets = [f.get(timeout=ms / 1000).offset for f in futures]
            finally:
                producer.close(timeout=5)
        return min(offsets) if offsets and min(offsets) >= 0 else -1

    def fetch_all(self, topic: str, partition: int, offset: int = 0,
                  timeout: float | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
        """Every committed record of a partition from ``offset`` up to its high watermark
        (ListOffsets, then Fetch), as ``(offset, key, value)``, with a kafka-python
        consumer (no group).

        Raises:
            KafkaAdminError: the fetch failed, or the records did not all arrive in time.
        """
        from kafka import KafkaConsumer, TopicPartition

        ms = int((self.timeout if timeout is None else timeout) * 1000)
        tp = TopicPartition(topic, partition)
        out: list[tuple[int, bytes | None, bytes | None]] = []
        with _errors(f"Fetch {topic}-{partition}@{offset}"):
            consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                     enable_auto_commit=False, request_timeout_ms=ms,
                                     **self.settings)
            try:
                consumer.assign([tp])
                end = consumer.end_offsets([tp])[tp]
                consumer.seek(tp, offset)
                deadline = time.monotonic() + ms / 1000
                while consumer.position(tp) < end:
                    if time.monotonic() > deadline:
                        raise KafkaAdminError(f"Fetch {topic}-{partition}: offsets up to "
                                              f"{end} not read within {ms / 1000:g}s")
                    for recs in consumer.poll(timeout_ms=200).values():
                        out.extend((r.offset, r.key, r.value) for r in recs if r.offset < end)
            finally:
                consumer.close()
        return out


__all__ = ["DEFAULT_TIMEOUT", "KafkaAdmin", "KafkaAdminError", "reachable"]
