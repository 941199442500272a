"""The cluster description, ``cluster.json``: one schema, written by :func:`write_cluster_file`
and read by :func:`read_cluster_file` wherever the file is used (``kafka-tiers place
--cluster``, the quick start, and ``kafka-tiers cluster start``, which writes one for the
commands that talk to the cluster it runs).

The format::

    {
      "brokers": [
        {"id": 1, "rack": "/dc1/rack1", "fenced": false, "attributes": {"disk": "ssd"},
         "address": "127.0.0.1:9092"},
        ...
      ],
      "assignments": {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [1, 2, 3]}, ...
      ]},
      "metadata_store": "embedded"
    }

Only ``brokers`` and each broker's ``id`` are required. ``assignments`` is Kafka's reassignment
format (the output of ``kafka-tiers place --format json``), or just its ``partitions`` list.
``address`` is where a running broker answers (``host:port``) and ``metadata_store`` the kind of
metadata store of a running cluster (``embedded`` or ``zookeeper``); ``cluster start`` writes
both. An unknown field is refused (a misspelling would otherwise be ignored). Every problem is
one :class:`~kafka_tiers.api.InvalidClusterError` naming the file and the place in it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api.cluster import BrokerInfo, ClusterView, TopicPartition
from kafka_tiers.api.errors import InvalidClusterError
from kafka_tiers.log.errors import InvalidTopicError
from kafka_tiers.log.names import validate_topic
from kafka_tiers.placement.validation import check_assignments


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidClusterError(f"{where}: expected an integer, got {json.dumps(value)}")
    return value


#: the largest broker id (Kafka's broker ids are 32-bit signed integers)
MAX_BROKER_ID = 2**31 - 1


def is_host_port(text: str) -> bool:
    """Whether ``text`` is ``host:port``: a non-empty host without blanks and a decimal port
    from 1 to 65535 (the form of a broker address here and in ``--bootstrap-server``)."""
    host, sep, port = text.rpartition(":")
    return bool(sep and host and not any(c.isspace() for c in host) and port.isascii()
                and port.isdigit() and len(port) <= 5 and 0 < int(port) <= 65535)


_TOP_FIELDS = ("brokers", "assignments", "metadata_store")
_BROKER_FIELDS = ("id", "rack", "fenced", "attributes", "address")


@dataclass(frozen=True)
class ClusterFile:
    """What a ``cluster.json`` holds.

    Attributes:
        cluster: the brokers (id, rack, fenced, attributes) and the assignments.
        addresses: broker id -> ``host:port`` of the brokers whose address is known.
        metadata_store: ``embedded`` or ``zookeeper`` for a running cluster, else None.
    """

    cluster: ClusterView
    addresses: Mapping[int, str] = field(default_factory=dict)
    metadata_store: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.addresses) - {b.broker_id for b in self.cluster.brokers})
        if unknown:
            raise InvalidClusterError(f"an address is given for broker {unknown[0]}, which "
                                      "is not in the cluster")

    @property
    def bootstrap(self) -> list[str]:
        """The addresses of the brokers that are not fenced, in broker id order (empty when
        the file gives none)."""
        return [self.addresses[b.broker_id] for b in self.cluster.brokers
                if not b.fenced and b.broker_id in self.addresses]


def cluster_from_dict(data: Any, source: str = "cluster") -> ClusterView:
    """Build a :class:`ClusterView` from the parsed JSON document (see
    :func:`cluster_file_from_dict`, which also returns the addresses).

    Raises:
        InvalidClusterError: the document does not have the shape above.
    """
    return cluster_file_from_dict(data, source).cluster


def cluster_file_from_dict(data: Any, source: str = "cluster") -> ClusterFile:
    """Build a :class:`ClusterFile` from the parsed JSON document.

    Raises:
        InvalidClusterError: the document does not have the shape above.
    """
    if not isinstance(data, Mapping):
        raise InvalidClusterError(f"{source}: expected a JSON object with \"brokers\"")
    unknown_top = set(data) - set(_TOP_FIELDS)
    if unknown_top:
        raise InvalidClusterError(f"{source}: unknown field {sorted(unknown_top)[0]!r}")
    store = data.get("metadata_store")
    if store is not None and not isinstance(store, str):
        raise InvalidClusterError(f"{source}: \"metadata_store\": expected a string or null")
    addresses: dict[int, str] = {}
    brokers_raw = data.get("brokers")
    if not isinstance(brokers_raw, list) or not brokers_raw:
        raise InvalidClusterError(f"{source}: \"brokers\" must be a non-empty list")
    brokers = []
    for i, b in enumerate(brokers_raw):
        where = f"{source}: brokers[{i}]"
        if not isinstance(b, Mapping):
            raise InvalidClusterError(f"{where}: expected an object with \"id\"")
        unknown = set(b) - set(_BROKER_FIELDS)
        if unknown:
            raise InvalidClusterError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        if "id" not in b:
            raise InvalidClusterError(f"{where}: \"id\" is missing")
        rack = b.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise InvalidClusterError(f"{where}.rack: expected a string or null")
        fenced = b.get("fenced", False)
        if not isinstance(fenced, bool):
            raise InvalidClusterError(f"{where}.fenced: expected true or false")
        attrs = b.get("attributes", {})
        if not isinstance(attrs, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in attrs.items()):
            raise InvalidClusterError(f"{where}.attributes: expected an object of strings")
        address = b.get("address")
        if address is not None and (not isinstance(address, str) or not is_host_port(address)):
            raise InvalidClusterError(f"{where}.address: expected \"host:port\" (a port from 1 "
                                      f"to 65535) or null, got {json.dumps(address)}")
        broker_id = _int(b["id"], f"{where}.id")
        if broker_id > MAX_BROKER_ID:
            raise InvalidClusterError(f"{where}.id: {broker_id} is larger than the largest "
                                      f"broker id, {MAX_BROKER_ID}")
        try:
            brokers.append(BrokerInfo(broker_id, rack, fenced, attrs))
        except InvalidClusterError as exc:
            raise InvalidClusterError(f"{where}: {exc}") from None
        if address is not None:
            addresses[brokers[-1].broker_id] = address
    assignments: dict[TopicPartition, list[int]] = {}
    raw = data.get("assignments")
    if isinstance(raw, Mapping):
        raw = raw.get("partitions", [])
    if raw is not None:
        if not isinstance(raw, list):
            raise InvalidClusterError(f"{source}: \"assignments\" must be a list or "
                                      "a reassignment document")
        for i, p in enumerate(raw):
            where = f"{source}: assignments[{i}]"
            if not isinstance(p, Mapping) or not {"topic", "partition", "replicas"} <= set(p):
                raise InvalidClusterError(f"{where}: needs topic, partition and replicas")
            if not isinstance(p["topic"], str) or not p["topic"]:
                raise InvalidClusterError(f"{where}.topic: expected a non-empty string")
            part = _int(p["partition"], f"{where}.partition")
            if part < 0:
                raise InvalidClusterError(f"{where}.partition: must be >= 0")
            if not isinstance(p["replicas"], list):
                raise InvalidClusterError(f"{where}.replicas: expected a list of broker ids")
            try:
                validate_topic(p["topic"])
            except InvalidTopicError as exc:
                raise InvalidClusterError(f"{where}.topic: {exc}") from None
            reps = [_int(r, f"{where}.replicas") for r in p["replicas"]]
            tp = TopicPartition(p["topic"], part)
            twice = sorted({r for r in reps if reps.count(r) > 1})
            if twice:
                raise InvalidClusterError(f"{where}.replicas: broker {twice[0]} is listed twice "
                                          f"in partition {part} of topic {tp.topic!r}")
            try:
                check_assignments({tp: reps}, [b.broker_id for b in brokers])
            except InvalidClusterError as exc:
                raise InvalidClusterError(f"{where}: {exc}") from None
            if tp in assignments:
                raise InvalidClusterError(f"{where}: {tp} is listed twice")
            assignments[tp] = reps
    try:
        return ClusterFile(ClusterView(brokers, assignments), addresses, store)
    except InvalidClusterError as exc:
        raise InvalidClusterError(f"{source}: {exc}") from None


def load_cluster(path: str | os.PathLike[str]) -> ClusterView:
    """The cluster (brokers and assignments) of a ``cluster.json``: the ``cluster`` of
    :func:`read_cluster_file`.

    Raises:
        InvalidClusterError: as :func:`read_cluster_file`.
    """
    return read_cluster_file(path).cluster


def read_cluster_file(path: str | os.PathLike[str]) -> ClusterFile:
    """Read ``cluster.json``: the one reader of the format.

    The file must be a regular file of at most 16 MiB
    (:data:`kafka_tiers.log.input_file.MAX_JSON_FILE_BYTES`).

    Raises:
        InvalidClusterError: unreadable file, not a regular file, larger than the limit,
            invalid JSON (with line and column), or a document of the wrong shape.
    """
    from kafka_tiers.log.input_file import MAX_JSON_FILE_BYTES, InputFileError, read_input_file

    name = os.fspath(path)
    try:
        data = json.loads(read_input_file(name, MAX_JSON_FILE_BYTES).decode("utf-8"))
    except InputFileError as exc:
        raise InvalidClusterError(str(exc)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidClusterError(f"{name}: not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidClusterError(f"{name}: not usable JSON: nested too deeply") from None
    return cluster_file_from_dict(data, name)


def cluster_to_dict(cluster: ClusterView) -> dict[str, Any]:
    """The JSON document for a view (inverse of :func:`cluster_from_dict`)."""
    return cluster_file_to_dict(ClusterFile(cluster))


def cluster_file_to_dict(doc: ClusterFile) -> dict[str, Any]:
    """The JSON document for ``doc`` (inverse of :func:`cluster_file_from_dict`); fields
    without a value are left out."""
    out: dict[str, Any] = {"brokers": []}
    for b in doc.cluster.brokers:
        entry: dict[str, Any] = {"id": b.broker_id, "rack": b.rack}
        if b.fenced:
            entry["fenced"] = True
        if b.attributes:
            entry["attributes"] = dict(b.attributes)
        if b.broker_id in doc.addresses:
            entry["address"] = doc.addresses[b.broker_id]
        out["brokers"].append(entry)
    if doc.cluster.assignments:
        out["assignments"] = reassignment_json(
            {tp: list(r) for tp, r in sorted(doc.cluster.assignments.items())})
    if doc.metadata_store is not None:
        out["metadata_store"] = doc.metadata_store
    return out


def write_cluster_file(path: str | os.PathLike[str], doc: ClusterFile) -> None:
    """Write ``doc`` to ``path`` as ``cluster.json``: the one writer of the format. The file is
    replaced atomically (a reader sees the old document or the new one, never a part).

    Raises:
        OSError: the directory is not writable.
    """
    target = os.fspath(path)
    text = json.dumps(cluster_file_to_dict(doc), indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".cluster-", suffix=".json",
                               dir=os.path.dirname(os.path.abspath(target)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def reassignment_json(assignment: Mapping[TopicPartition, list[int]]) -> dict[str, Any]:
    """Kafka's reassignment document for ``assignment``."""
    return {"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(reps)}
        for tp, reps in assignment.items()]}


__all__ = ["ClusterFile", "cluster_file_from_dict", "cluster_file_to_dict", "cluster_from_dict",
           "cluster_to_dict", "is_host_port", "load_cluster", "read_cluster_file",
           "reassignment_json", "write_cluster_file"]
