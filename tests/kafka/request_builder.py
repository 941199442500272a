"""Requests of any API at any version built from its own message schema (kafka-python's
classes): every topic-name field gets the topic asked for, every partition-index field the
partition asked for, every array of structs one entry; the rest keeps its defaults (``acks``
1, ``timeout_ms`` 1000, a config resource is a topic)."""

from __future__ import annotations

from typing import Any

from kafka_tiers.kafka.codec import REQUESTS

#: schema field names (lower case) that hold partition indexes
PARTITION_FIELDS = frozenset({"partition", "partitionindex", "partitionid", "index",
                              "partitions", "partitionindexes"})
TOPIC_RESOURCE = 2


def _value(field: Any, version: int, topic: str, partition: int) -> Any:
    name = field._json["name"].lower()
    kind = field.type_str
    if field.is_struct_array():
        return [field.data_class(**_fields(field.fields, version, topic, partition))]
    if getattr(field, "is_struct", lambda: False)():
        return field.data_class(**_fields(field.fields, version, topic, partition))
    if field.is_array():
        if kind == "[]int32" and name in PARTITION_FIELDS:
            return [partition]
        if kind == "[]string" and field._entity_type == "topicName":
            return [topic]
        return None
    if kind == "string" and field._entity_type == "topicName":
        return topic
    if kind == "string" and name == "resourcename":
        return topic
    if kind in ("int8", "int32") and name == "resourcetype":
        return TOPIC_RESOURCE
    if kind == "int32" and name in PARTITION_FIELDS:
        return partition
    if name == "acks":
        return 1
    if name == "timeoutms":
        return 1000
    return None


def _fields(fields: dict[str, Any], version: int, topic: str, partition: int
            ) -> dict[str, Any]:
    out = {}
    for key, field in fields.items():
        if field.for_version_q(version):
            value = _value(field, version, topic, partition)
            if value is not None:
                out[key] = value
    return out


def request_fields(api_key: int, version: int, topic: str, partition: int) -> dict[str, Any]:
    """The fields of a request of ``api_key`` at ``version`` naming ``topic`` / ``partition``
    wherever its schema names a topic or a partition."""
    cls = REQUESTS[api_key][version]
    return _fields(cls.fields, version, topic, partition)



def error_codes(message: Any) -> list[int]:
    """Every ``error_code`` of a decoded response, nested ones included, in order."""
    out: list[int] = []
    fields = getattr(message, "fields", None)
    if not isinstance(fields, dict):
        return out
    for name in fields:
        value = getattr(message, name, None)
        if name == "error_code" and isinstance(value, int):
            out.append(value)
        elif isinstance(value, list):
            for item in value:
                out += error_codes(item)
        elif hasattr(value, "fields"):
            out += error_codes(value)
    return out


__all__ = ["error_codes", "request_fields"]
