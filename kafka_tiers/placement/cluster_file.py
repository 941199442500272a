"""Reading a cluster description (``cluster.json``) into a :class:`ClusterView`.

The format::

    {
      "brokers": [
        {"id": 1, "rack": "/dc1/rack1", "fenced": false, "attributes": {"disk": "ssd"}},
        ...
      ],
      "assignments": {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [1, 2, 3]}, ...
      ]}
    }

``assignments`` is optional and is Kafka's reassignment format (the output of
``kafka-tiers place --format json``), or just its ``partitions`` list. Every problem is one
:class:`~kafka_tiers.api.InvalidClusterError` naming the file and the place in it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from kafka_tiers.api.cluster import BrokerInfo, ClusterView, TopicPartition
from kafka_tiers.api.errors import InvalidClusterError


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidClusterError(f"{where}: expected an integer, got {json.dumps(value)}")
    return value


def cluster_from_dict(data: Any, source: str = "cluster") -> ClusterView:
    """Build a :class:`ClusterView` from the parsed JSON document.

    Raises:
        InvalidClusterError: the document does not have the shape above.
    """
    if not isinstance(data, Mapping):
        raise InvalidClusterError(f"{source}: expected a JSON object with \"brokers\"")
    brokers_raw = data.get("brokers")
    if not isinstance(brokers_raw, list) or not brokers_raw:
        raise InvalidClusterError(f"{source}: \"brokers\" must be a non-empty list")
    brokers = []
    for i, b in enumerate(brokers_raw):
        where = f"{source}: brokers[{i}]"
        if not isinstance(b, Mapping):
            raise InvalidClusterError(f"{where}: expected an object with \"id\"")
        unknown = set(b) - {"id", "rack", "fenced", "attributes"}
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
        try:
            brokers.append(BrokerInfo(_int(b["id"], f"{where}.id"), rack, fenced, attrs))
        except InvalidClusterError as exc:
            raise InvalidClusterError(f"{where}: {exc}") from None
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
            reps = [_int(r, f"{where}.replicas") for r in p["replicas"]]
            tp = TopicPartition(p["topic"], part)
            if tp in assignments:
                raise InvalidClusterError(f"{where}: {tp} is listed twice")
            assignments[tp] = reps
    try:
        return ClusterView(brokers, assignments)
    except InvalidClusterError as exc:
        raise InvalidClusterError(f"{source}: {exc}") from None


def load_cluster(path: str | os.PathLike[str]) -> ClusterView:
    """Read ``cluster.json``.

    Raises:
        InvalidClusterError: unreadable file, invalid JSON (with line and column), or a
            document of the wrong shape.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise InvalidClusterError(f"cannot read {name}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidClusterError(f"{name}: not valid JSON: {exc}") from None
    return cluster_from_dict(data, name)


def cluster_to_dict(cluster: ClusterView) -> dict[str, Any]:
    """The JSON document for a view (inverse of :func:`cluster_from_dict`)."""
    doc: dict[str, Any] = {"brokers": []}
    for b in cluster.brokers:
        entry: dict[str, Any] = {"id": b.broker_id, "rack": b.rack}
        if b.fenced:
            entry["fenced"] = True
        if b.attributes:
            entry["attributes"] = dict(b.attributes)
        doc["brokers"].append(entry)
    if cluster.assignments:
        doc["assignments"] = reassignment_json(
            {tp: list(r) for tp, r in sorted(cluster.assignments.items())})
    return doc


def reassignment_json(assignment: Mapping[TopicPartition, list[int]]) -> dict[str, Any]:
    """Kafka's reassignment document for ``assignment``."""
    return {"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(reps)}
        for tp, reps in assignment.items()]}


__all__ = ["cluster_from_dict", "cluster_to_dict", "load_cluster", "reassignment_json"]
