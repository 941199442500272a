"""Protocol fuzzing of the Kafka listener: random and truncated frames, wrong API versions,
huge and negative lengths, garbage after a valid header, mutated requests of every served API
and version, and hundreds of connections at once. The broker keeps serving other connections
(a real client works during and after), a bad connection gets one WARN line naming its peer
(never more), and nothing logs a traceback.

The frames are drawn from a seeded generator: a failure names the case and replays.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kafka_tiers.broker.broker import Broker
from kafka_tiers.kafka import codec
from kafka_tiers.kafka.registry import apis
from tests.kafka.clients import confluent_consumer, confluent_producer

SEED = 1405
API_VERSIONS = codec.API_VERSIONS_KEY


@dataclass
class Case:
    """One connection's bytes: ``must_warn`` when the broker must close it with one WARN
    (a frame it can never serve); otherwise it may answer, wait or close (at most one WARN).
    ``hang_up``: the client closes right after sending (a truncated frame)."""

    name: str
    data: bytes
    must_warn: bool = False
    answered: bool = False
    hang_up: bool = False


@pytest.fixture
def broker(make_kafka_broker) -> Broker:  # type: ignore[no-untyped-def]
    b: Broker = make_kafka_broker(**{"socket.request.max.bytes": str(1 << 20)})
    b.create_topic("fuzz-live", 1)
    return b


def _address(broker: Broker) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _header(key: int, version: int, corr: int = 7, client: bytes = b"fuzz") -> bytes:
    head = struct.pack(">hhih", key, version, corr, len(client)) + client
    served = apis().get(key)
    if served is not None and served.min_version <= version <= served.max_version \
            and codec.flexible(key, version):
        head += b"\x00"  # request header v2: no tagged fields
    return head


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _valid_request(key: int, version: int) -> bytes:
    """A default-valued request of ``key`` at ``version`` (header and body, no size)."""
    req = codec.REQUESTS[key][version]()
    req.with_header(correlation_id=11, client_id="fuzz")
    return bytes(req.encode(header=True))


def fixed_cases(max_bytes: int) -> list[Case]:
    served = apis()
    cases = [
        Case("size above socket.request.max.bytes", struct.pack(">i", max_bytes + 1), True),
        Case("size 1 GiB", struct.pack(">i", 1 << 30) + b"\x00" * 64, True),
        Case("size -1", struct.pack(">i", -1), True),
        Case("size int32 min", struct.pack(">i", -(1 << 31)), True),
        Case("frame of 3 bytes", _frame(b"\x00\x12\x00"), True),
        Case("empty frame", _frame(b""), True),
        Case("API key 9999", _frame(_header(9999, 0)), True),
        Case("API key -1", _frame(_header(-1, 0)), True),
        Case("truncated size", b"\x00\x00", hang_up=True),
        Case("truncated frame", struct.pack(">i", 100) + b"\x00\x03" * 5, hang_up=True),
    ]
    for key, api in sorted(served.items()):
        if key == API_VERSIONS:
            cases.append(Case("ApiVersions v99", _frame(_header(key, 99)), answered=True))
            continue
        cases.append(Case(f"{api.name} v{api.max_version + 1}",
                          _frame(_header(key, api.max_version + 1)), True))
        cases.append(Case(f"{api.name} v-1", _frame(_header(key, -1)), True))
        if api.min_version > 0:
            cases.append(Case(f"{api.name} v{api.min_version - 1}",
                              _frame(_header(key, api.min_version - 1)), True))
    return cases


def random_cases(rng: random.Random) -> list[Case]:
    """Garbage after valid headers, mutated and truncated valid requests, random frames."""
    cases: list[Case] = []
    for key, api in sorted(apis().items()):
        versions = sorted({api.min_version, api.max_version,
                           rng.randint(api.min_version, api.max_version)})
        for v in versions:
            valid = _valid_request(key, v)
            head = len(_header(key, v))
            garbage = rng.randbytes(rng.randint(1, 64))
            cases.append(Case(f"{api.name} v{v}: garbage after the header",
                              _frame(_header(key, v) + garbage)))
            cases.append(Case(f"{api.name} v{v}: garbage after a valid request",
                              _frame(valid + rng.randbytes(rng.randint(1, 16)))))
            mutated = bytearray(valid)
            for _ in range(rng.randint(1, 4)):
                if len(mutated) > head:
                    mutated[rng.randrange(head, len(mutated))] = rng.randrange(256)
            cases.append(Case(f"{api.name} v{v}: mutated body", _frame(bytes(mutated))))
            cut = rng.randint(head, max(head, len(valid) - 1))
            cases.append(Case(f"{api.name} v{v}: body cut at {cut}", _frame(valid[:cut])))
            cases.append(Case(f"{api.name} v{v}: frame cut, client hangs up",
                              _frame(valid)[:rng.randint(4, len(valid) + 3)], hang_up=True))
    for i in range(60):
        size = rng.randint(0, 300)
        cases.append(Case(f"random frame {i} ({size} bytes)", _frame(rng.randbytes(size))))
    for i in range(20):
        cases.append(Case(f"random bytes {i}", rng.randbytes(rng.randint(1, 40))))
    return cases


def run_case(addr: tuple[str, int], case: Case) -> tuple[int, str]:
    """Send one case on its own connection; returns (local port, outcome): ``closed``,
    ``answered`` or ``open`` (neither within a short wait, e.g. a long-polling fetch)."""
    with socket.create_connection(addr, timeout=5) as s:
        port = s.getsockname()[1]
        with contextlib.suppress(OSError):
            s.sendall(case.data)
        if case.hang_up:
            return port, "hung up"
        s.settimeout(1.0)
        try:
            head = s.recv(4)
        except TimeoutError:
            return port, "open"
        except OSError:
            return port, "closed"
        return port, "answered" if head else "closed"


def kafka_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("kafka_tiers")]


def check_log(caplog: pytest.LogCaptureFixture, outcomes: dict[str, tuple[int, str]],
              cases: list[Case]) -> None:
    records = kafka_records(caplog)
    tracebacks = [r for r in records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, "a bad frame logged an error or a traceback: " + "; ".join(
        f"{r.levelname} {r.getMessage()[:200]}" for r in tracebacks[:5])
    warns = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    for case in cases:
        port, outcome = outcomes[case.name]
        mine = [w for w in warns if f"127.0.0.1:{port}" in w]
        assert len(mine) <= 1, f"{case.name}: {len(mine)} WARN lines: {mine}"
        if case.must_warn:
            assert outcome == "closed", f"{case.name}: the broker left it {outcome}"
            assert len(mine) == 1, f"{case.name}: no WARN line names 127.0.0.1:{port}"
            assert "\n" not in mine[0] and len(mine[0]) < 500, mine[0]
        if case.answered:
            assert outcome == "answered", f"{case.name}: {outcome}"


@contextlib.contextmanager
def client_traffic(bootstrap: str) -> Iterator[list[str]]:
    """A real client (librdkafka) asking for metadata in a loop while the block runs; the
    yielded list collects its failures."""
    from confluent_kafka.admin import AdminClient

    failures: list[str] = []
    stop = threading.Event()
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    rounds = [0]

    def loop() -> None:
        while not stop.is_set():
            try:
                md = admin.list_topics(timeout=5)
                if "fuzz-live" not in md.topics:
                    failures.append(f"metadata without the topic: {sorted(md.topics)}")
                rounds[0] += 1
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.02)

    t = threading.Thread(target=loop, name="fuzz-client", daemon=True)
    t.start()
    try:
        yield failures
    finally:
        stop.set()
        t.join(15)
    assert rounds[0] > 0, "the real client never completed a metadata round"


def run_all(addr: tuple[str, int], cases: list[Case]) -> dict[str, tuple[int, str]]:
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    with concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="fuzz") as pool:
        results = list(pool.map(lambda c: run_case(addr, c), cases))
    return dict(zip(names, results, strict=True))


def test_fixed_bad_frames_close_one_connection_each_with_one_warn(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_tiers")
    cases = fixed_cases(1 << 20)
    with client_traffic(broker.bootstrap_servers) as failures:
        outcomes = run_all(_address(broker), cases)
    assert not failures, failures[:3]
    time.sleep(0.2)  # the last connections' WARN lines
    check_log(caplog, outcomes, cases)


def test_random_frames_never_disturb_other_connections(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_tiers")
    cases = random_cases(random.Random(SEED))
    with client_traffic(broker.bootstrap_servers) as failures:
        outcomes = run_all(_address(broker), cases)
    assert not failures, failures[:3]
    time.sleep(0.2)
    check_log(caplog, outcomes, cases)
    produce_and_consume(broker.bootstrap_servers)


def test_hundreds_of_connections_while_a_client_produces(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """300 connections at once, each holding a frame half sent (as a slow or dead client
    would): a real producer and consumer still work, and closing them logs nothing above
    DEBUG."""
    caplog.set_level(logging.WARNING, logger="kafka_tiers")
    addr = _address(broker)
    held: list[socket.socket] = []
    try:
        for i in range(300):
            s = socket.create_connection(addr, timeout=5)
            s.sendall(struct.pack(">i", 200) + b"\x00\x03" * (i % 20))
            held.append(s)
        with client_traffic(broker.bootstrap_servers) as failures:
            produce_and_consume(broker.bootstrap_servers)
        assert not failures, failures[:3]
    finally:
        for s in held:
            s.close()
    time.sleep(0.2)
    assert not [r for r in kafka_records(caplog) if r.levelno >= logging.WARNING]
    produce_and_consume(broker.bootstrap_servers)


def produce_and_consume(bootstrap: str, n: int = 50) -> None:
    """A real client produces ``n`` records to ``fuzz-live`` and reads them back."""
    from confluent_kafka import TopicPartition

    with confluent_consumer(bootstrap) as consumer:
        lo, hi = consumer.get_watermark_offsets(TopicPartition("fuzz-live", 0), timeout=10)
    with confluent_producer(bootstrap, acks="all") as producer:
        for i in range(n):
            producer.produce("fuzz-live", value=f"v{hi + i}".encode(), partition=0)
        assert producer.flush(10) == 0
    with confluent_consumer(bootstrap) as consumer:
        consumer.assign([TopicPartition("fuzz-live", 0, hi)])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 15
        while len(got) < n and time.monotonic() < deadline:
            got.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
    assert got == [f"v{hi + i}".encode() for i in range(n)]
    assert lo == 0
