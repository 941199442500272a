"""Codec benchmark: the Kafka message library the listener decodes requests and encodes
responses with, measured on our request mix: kafka-python 3.x's schema-generated protocol
classes (the one the broker uses) against Aiven's ``kio`` (Kafka 4.x schemas, native readers).

The mix is what a busy broker serves: Produce v9 (one partition, a 16 KiB record batch),
Fetch v12 (a consumer's fetch of 6 partitions; the response carries 1 KiB of records per
partition: the bulk of a fetch's records is sent from the segment files with os.sendfile,
outside the codec),
Metadata v12 (3 topics of a 3-broker cluster, 6 partitions each) and OffsetCommit v8 (a group
committing 6 partitions), weighted 45 : 45 : 2 : 8. Each library decodes every request
(header and body, from the bytes a client sends) and encodes every response (body, from a
message object built once), the work the listener does per request. Both libraries read and
write the same bytes: the request each decodes comes from kafka-python's client side, and
every response each encodes is checked to be byte-identical to the other's before timing.

Record batches are opaque bytes to both (the broker never decodes records on these paths), so
the figures are the cost of the message structure alone.

Goal: the codec kafka-tiers uses (kafka-python) serves the mix at >= 10,000 requests/s on one
core (decode + encode, under 100 us per request), so that it is not what limits the listener.
Reported beside it: the same for kio, and kio's speed-up per API.

Usage: ``python benchmarks/codec.py [--quick] [--seconds S]``; kio comes with the ``bench``
extra (``pip install 'kafka-tiers[bench]'``); without it, kio's figures are null. The last
line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka_tiers.kafka.codec import REQUESTS, RESPONSES

#: (name, api key, version, weight in the mix)
MIX = (("produce", 0, 9, 45), ("fetch", 0 + 1, 12, 45), ("metadata", 3, 12, 2),
       ("offset_commit", 8, 8, 8))
GOAL_REQUESTS_PER_S = 10_000
TOPICS = ("orders", "payments", "clicks")


def _records(size: int) -> bytes:
    """Opaque record-batch bytes of ``size`` (neither library looks inside)."""
    return bytes(range(256)) * (size // 256) + b"\x00" * (size % 256)


# ------------------------------------------------------------------ kafka-python messages

def request_fields(name: str) -> dict[str, Any]:
    """The request of each API, as kafka-python fields."""
    if name == "produce":
        return {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [("orders", [(3, _records(16 * 1024))])]}
    if name == "fetch":
        return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [(t, [(p, 7, 1000 + p, -1, 0, 1048576) for p in range(2)])
                           for t in TOPICS],
                "forgotten_topics_data": [], "rack_id": ""}
    if name == "metadata":
        return {"topics": [(uuid.UUID(int=0), t) for t in TOPICS],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
    return {"group_id": "billing", "generation_id_or_member_epoch": 5,
            "member_id": "consumer-1-3f1a", "group_instance_id": None,
            "topics": [(t, [(p, 1234 + p, 7, None) for p in range(2)]) for t in TOPICS]}


def response_fields(name: str) -> dict[str, Any]:
    """The response of each API, as kafka-python fields."""
    if name == "produce":
        return {"responses": [("orders", [(3, 0, 123456, -1, 0, [], None)])],
                "throttle_time_ms": 0}
    if name == "fetch":
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                "responses": [(t, [(p, 0, 2000, 2000, 0, None, -1, _records(1024))
                                   for p in range(2)]) for t in TOPICS]}
    if name == "metadata":
        return {"throttle_time_ms": 0,
                "brokers": [(b, "127.0.0.1", 9091 + b, f"/dc{b}/r1") for b in (1, 2, 3)],
                "cluster_id": "kafka-tiers-cluster", "controller_id": 1,
                "topics": [(0, t, uuid.UUID(int=i + 1), False,
                            [(0, p, 1 + p % 3, 4, [1 + (p + i) % 3 for i in range(3)],
                              [1 + (p + i) % 3 for i in range(3)], []) for p in range(6)],
                            None) for i, t in enumerate(TOPICS)]}
    return {"throttle_time_ms": 0,
            "topics": [(t, [(p, 0) for p in range(2)]) for t in TOPICS]}


def _build(cls: Any, version: int, fields: dict[str, Any]) -> Any:
    """A kafka-python message at ``version`` from fields in which nested structs are tuples
    (in field order), as the broker's handlers build them."""
    return cls[version](**fields)


def kafka_python_case(name: str, key: int, version: int) -> dict[str, Any]:
    req = _build(REQUESTS[key], version, request_fields(name))
    req.with_header(correlation_id=17, client_id="rdkafka")
    frame = bytes(req.encode(header=True))
    resp = _build(RESPONSES[key], version, response_fields(name))
    body = bytes(resp.encode(version=version))
    req_cls, resp_cls = REQUESTS[key], RESPONSES[key]

    def decode() -> Any:
        return req_cls.decode(frame, version=version, header=True)

    def encode() -> bytes:
        return bytes(resp.encode(version=version))

    return {"frame": frame, "response": body, "decode": decode, "encode": encode,
            "response_class": resp_cls}


# ------------------------------------------------------------------ kio

def kio_case(key: int, version: int, frame: bytes, response: bytes) -> dict[str, Any] | None:
    """kio's reader of the request (header and body) and writer of the response; the
    response entity is read once from kafka-python's bytes (kio then writes it back)."""
    try:
        from kio.index import load_request_schema, load_response_schema
        from kio.serial import entity_reader, entity_writer
    except ImportError:
        return None
    req_type: Any = load_request_schema(key, version)
    resp_type: Any = load_response_schema(key, version)
    header_reader = entity_reader(req_type.__header_schema__)
    body_reader = entity_reader(req_type)
    resp_reader = entity_reader(resp_type)
    resp_writer = entity_writer(resp_type)
    entity, size = resp_reader(memoryview(response), 0)
    if size != len(response):
        raise RuntimeError(f"kio read {size} of {len(response)} response bytes")
    view = memoryview(frame)

    def decode() -> Any:
        _hdr, n = header_reader(view, 0)
        return body_reader(view, n)[0]

    def encode() -> bytes:
        buf = io.BytesIO()
        resp_writer(buf, entity)
        return buf.getvalue()

    return {"decode": decode, "encode": encode}


def _rate(fn: Callable[[], Any], seconds: float) -> float:
    """Calls per second of ``fn`` over about ``seconds`` (best of 3 rounds)."""
    fn()
    n = 1
    while True:  # calibrate: a round of about seconds / 3
        start = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - start
        if took > seconds / 30:
            break
        n *= 4
    rounds = max(1, int(n * (seconds / 3) / took))
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = max(best, rounds / (time.perf_counter() - start))
    return best


def measure(seconds: float) -> dict[str, Any]:
    per_api: dict[str, Any] = {}
    total_weight = sum(w for *_, w in MIX)
    mix_us = {"kafka_python": 0.0, "kio": 0.0}
    kio_ok = True
    for name, key, version, weight in MIX:
        kp = kafka_python_case(name, key, version)
        kc = kio_case(key, version, kp["frame"], kp["response"])
        row: dict[str, Any] = {"version": version, "weight": weight,
                               "request_bytes": len(kp["frame"]),
                               "response_bytes": len(kp["response"])}
        for lib, case in (("kafka_python", kp), ("kio", kc)):
            if case is None:
                row[lib] = None
                kio_ok = False
                continue
            if lib == "kio" and case["encode"]() != kp["response"]:
                raise RuntimeError(f"{name}: kio's response bytes differ from kafka-python's")
            dec, enc = _rate(case["decode"], seconds), _rate(case["encode"], seconds)
            us = 1e6 / dec + 1e6 / enc
            row[lib] = {"decode_per_s": round(dec), "encode_per_s": round(enc),
                        "us_per_request": round(us, 2)}
            mix_us[lib] += us * weight / total_weight
        if row["kio"] and row["kafka_python"]:
            row["kio_speedup"] = round(row["kafka_python"]["us_per_request"]
                                       / row["kio"]["us_per_request"], 2)
        per_api[name] = row
    kp_rate = 1e6 / mix_us["kafka_python"]
    out: dict[str, Any] = {
        "mix_requests_per_s": {"kafka_python": round(kp_rate),
                               "kio": round(1e6 / mix_us["kio"]) if kio_ok else None},
        "mix_us_per_request": {"kafka_python": round(mix_us["kafka_python"], 2),
                               "kio": round(mix_us["kio"], 2) if kio_ok else None},
        "per_api": per_api,
    }
    if kio_ok:
        out["kio_speedup_on_mix"] = round(mix_us["kafka_python"] / mix_us["kio"], 2)
    else:
        out["kio_missing"] = "pip install kio (the bench extra) to measure it"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short rounds, for a smoke run")
    parser.add_argument("--seconds", type=float, default=1.5,
                        help="seconds per measured operation (default 1.5)")
    args = parser.parse_args(argv)
    seconds = 0.08 if args.quick else args.seconds
    import kafka

    figures = measure(seconds)
    try:
        from importlib.metadata import version as dist_version
        kio_version: str | None = dist_version("kio")
    except Exception:
        kio_version = None
    rate = figures["mix_requests_per_s"]["kafka_python"]
    print(json.dumps({
        "benchmark": "codec",
        "goal": f"kafka-python (the codec in use) serves the request mix at >= "
                f"{GOAL_REQUESTS_PER_S} requests/s on one core (decode + encode)",
        "goal_met": rate >= GOAL_REQUESTS_PER_S,
        "kafka_python_version": kafka.__version__, "kio_version": kio_version,
        "mix": {name: weight for name, _k, _v, weight in MIX},
        **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
