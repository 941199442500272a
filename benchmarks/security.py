"""Security benchmark: what TLS and SASL cost, and what a password-guessing client costs the
others, with real clients (confluent-kafka / librdkafka) against a broker process on loopback,
each figure next to a baseline measured in the same run on the same broker.

* ``brute_force``: while one client produces 1 KiB records with ``acks=1`` at a steady rate
  (500 records/s, ``linger.ms=0``: one request a record; a rate this machine serves without
  queueing) over ``SASL_SSL`` with ``SCRAM-SHA-512``, recording librdkafka's per-record
  latency (produce() to acknowledgement), another client makes 1,000 wrong SCRAM attempts (a
  bounded loop, loopback only), 10 at a time (one process, 10 threads, each one connection
  after the other: one client guessing as fast as the broker answers). Each attempt, exactly:
  a new TCP connection to the ``SASL_SSL`` listener; a full TLS handshake (no session
  resumption; the broker's certificate verified against the test CA); SaslHandshake v1
  (``SCRAM-SHA-512``); SaslAuthenticate v1 with the client-first message (the benchmark's
  user, a fresh nonce); SaslAuthenticate v1 with the client-final message whose proof is 64
  random bytes (as wrong as a guessed password's and the broker's work the same: it checks a
  proof, whatever made it; the client computes no PBKDF2, which a guesser need not do to be
  refused and which on one machine would take CPU from the broker and measure the machine);
  then it waits for the refusal (held ``connection.failed.authentication.delay.ms``, 100 ms,
  Kafka's default) and the close. The broker runs with Kafka's defaults otherwise
  (``max.connection.creation.rate`` unbounded). The producer runs until a second after the
  attack. Figure: the producer's p99 over the records sent while the attack ran; baseline:
  the p99 of the same producer over a window as long, at the same point of a run without the
  attack. Goal: at most 1.2x the baseline (the attack slows other clients' p99 by no more
  than 20%). Also reported, for where the time goes: the CPU milliseconds per attempt of the
  broker process, of its busiest thread (the network thread: accepts, TLS handshakes, reads)
  and of the attacking process.
* ``tls``: produce and consume throughput over ``SASL_SSL`` (SCRAM-SHA-512, TLS 1.2+) as a
  ratio to ``PLAINTEXT``, both listeners of the same broker. Produce: 1 KiB records in 1 MiB
  batches (``batch.size``, ``linger.ms=50``), ``acks=1``, MB/s of record values. Consume: a
  partition of 64 KiB records in ~1 MiB batches read from offset 0, MB/s of record values
  (larger records, so the figure is the bytes' path, TLS included, rather than the client's
  per-record cost). Goal: at least 0.5x each (the cost should be the cipher, not our code).
  ``benchmarks/wire.py``'s TLS row is this measurement (:func:`measure_tls`).

Every client runs in a process of its own (this script with a ``--*-child`` argument), as a
real client never shares the broker's interpreter, nor the benchmark's; the broker is a
``kafka-tiers broker start`` process. Each figure is the median of 3 rounds interleaved with
its baseline's 3 rounds (a busy spell of the machine hits both); every round is reported.
The certificates are made for the run (``tests.security.certs``); the SCRAM user is added
through the broker's PLAINTEXT listener with Kafka's AlterUserScramCredentials (no authorizer
on this broker: the benchmark measures authentication and encryption, not ACLs).

Usage: ``python benchmarks/security.py [--quick] [--only brute_force|tls]
[--creation-rate N]`` (``--creation-rate``: the brute-force broker's ``SASL_SSL`` listener
gets ``max.connection.creation.rate`` N, KIP-612's bound; the attack then takes at least
1,000 / N seconds). The last line
printed is one JSON object ``{"benchmark": "security", "goal": ..., "goal_met": ..., ...}``
with the figures; ``goals`` says which goal was met.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test certificates and free ports live in tests/

MIB = 1 << 20
RECORD = 1024
CONSUME_RECORD = 64 * 1024
BATCH_BYTES = MIB
ROUNDS = 3
MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "bench", "bench-password-7f3a"
ATTEMPTS = 1000
ATTACK_THREADS = 10
RATE = 500
GOALS = {"brute_force_p99_ratio": 1.2, "tls_ratio": 0.5}
GOAL_WORDS = {"brute_force": "1,000 wrong SCRAM attempts raise another client's acks=1 produce "
                             "p99 by at most 20% over the same run's baseline",
              "tls": "SASL_SSL produce and consume throughput >= 0.5x PLAINTEXT, 1 MiB "
                     "batches"}


def wire() -> Any:
    """benchmarks/wire.py as a module: its broker process runner, producer settings and
    consumer are this benchmark's too (one copy of each)."""
    import importlib.util

    name = "kafka_tiers_wire_benchmark"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("wire.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ------------------------------------------------------------------ the broker

@dataclass(frozen=True)
class SecureBroker:
    """A broker process with a ``PLAINTEXT`` and a ``SASL_SSL`` listener (127.0.0.1)."""

    plaintext: str
    sasl_ssl: str
    ca_file: str
    pid: int = 0  # the broker process (its CPU time is read from /proc)

    def client_config(self, protocol: str, password: str = PASSWORD) -> dict[str, Any]:
        """confluent-kafka settings for ``protocol`` (Kafka's client property names)."""
        if protocol == "PLAINTEXT":
            return {"bootstrap.servers": self.plaintext}
        return {"bootstrap.servers": self.sasl_ssl, "security.protocol": "SASL_SSL",
                "sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": password,
                "ssl.ca.location": self.ca_file}


def broker_properties(directory: Path, plaintext_port: int, sasl_port: int,
                      certs: Any) -> dict[str, str]:
    """The benchmark broker's server.properties: two listeners, SCRAM-SHA-512 on SASL_SSL."""
    return {"broker.id": "1", "log.dirs": str(directory / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{plaintext_port},"
                         f"SASL_SSL://127.0.0.1:{sasl_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISM,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_cert),
            "message.max.bytes": str(BATCH_BYTES + 4096),
            "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "1"}


@contextlib.contextmanager
def secure_broker(directory: Path, timeout: float = 60.0,
                  extra: dict[str, str] | None = None) -> Iterator[SecureBroker]:
    """A ``kafka-tiers broker start`` process with both listeners, ``extra`` properties and
    the SCRAM user :data:`USER`; stopped with SIGINT (SIGKILL after a minute) on exit
    (``benchmarks/wire.py``'s :func:`kafka_tiers_process`)."""
    from tests.security.certs import write_test_certs
    from tests.servers.base import free_port

    directory.mkdir(parents=True, exist_ok=True)
    certs = write_test_certs(directory / "certs")
    plain_port, sasl_port = free_port(), free_port()
    props = directory / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in {
        **broker_properties(directory, plain_port, sasl_port, certs), **(extra or {})}.items()))
    args = ["broker", "start", "--config", str(props), "--format", "json", "--log-level",
            "WARNING"]
    with wire().kafka_tiers_process(args, directory / "broker.log", "ready", "broker start",
                                    timeout):
        broker = SecureBroker(f"127.0.0.1:{plain_port}", f"127.0.0.1:{sasl_port}",
                              str(certs.ca_cert), _pid_of(str(props)))
        add_scram_user(broker.plaintext, USER, PASSWORD)
        yield broker


def _pid_of(argument: str) -> int:
    """The process whose command line has ``argument`` (0: none, or no /proc)."""
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                    if argument.encode() in cmdline and b"broker" in cmdline:
                        return int(entry)
    return 0


def thread_cpu_ms(pid: int) -> dict[str, float]:
    """CPU milliseconds (user + system) each thread of ``pid`` used so far, by thread id
    (empty without /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                fields = stat[stat.rfind(")") + 2:].split()
                out[tid] = (int(fields[11]) + int(fields[12])) * 1000.0 / ticks
    return out


def add_scram_user(bootstrap: str, user: str, password: str) -> None:
    """AlterUserScramCredentials (KIP-554) through confluent-kafka's admin client."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def create_topic(bootstrap: str, topic: str) -> None:
    """One partition, one replica, 1 GiB segments (CreateTopics through the PLAINTEXT
    listener)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={
            "segment.bytes": str(1 << 30)})], operation_timeout=30).values():
        future.result(60)


# ------------------------------------------------------------------ child processes

def run_child(kind: str, args: dict[str, Any], timeout: float = 900.0) -> dict[str, Any]:
    """This script as ``--<kind>-child -`` with ``args`` as JSON on its stdin (a password
    never on a command line); its last stdout line as JSON."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), f"--{kind}-child",
                           "-"], input=json.dumps(args), capture_output=True, text=True,
                          timeout=timeout, cwd=str(ROOT))
    if proc.returncode != 0:
        raise RuntimeError(f"the {kind} client process failed (exit {proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def produce_child(config: dict[str, Any], topic: str, total: int, record: int) -> dict[str, Any]:
    """Seconds to produce ``total`` bytes of ``record``-byte values (``produce_batch`` of
    1,024 records a call, 1 MiB batches, ``acks=1``) and have every record acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({**config, **wire().THROUGHPUT_PRODUCER})
    vals = [os.urandom(record // 2).hex().encode() for _ in range(64)]
    per_call = max(1, min(1024, (8 * MIB) // record))
    msgs = [{"value": vals[i & 63]} for i in range(per_call)]
    calls = max(1, total // record // per_call)
    failed: list[str] = []
    try:
        producer.list_topics(topic, timeout=30)  # connected and authenticated before timing
        start = time.perf_counter()
        for _ in range(calls):
            queued = producer.produce_batch(topic, msgs, partition=0)
            if queued != len(msgs):
                failed.append(f"{len(msgs) - queued} records not queued")
                break
            producer.poll(0)
        left = producer.flush(300)
        seconds = time.perf_counter() - start
    finally:
        producer.close()
    if failed or left:
        raise RuntimeError(f"produce {topic}: {failed or [f'{left} records undelivered']}")
    return {"seconds": seconds, "records": calls * per_call, "bytes": calls * per_call * record}


def consume_child(config: dict[str, Any], topic: str, last_offset: int) -> dict[str, Any]:
    """Seconds to read offsets 0..``last_offset`` (``benchmarks/wire.py``'s consumer with
    these client settings)."""
    security = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    return {"seconds": wire().consume_child(config["bootstrap.servers"], topic, last_offset,
                                            600.0, security)}


def latency_child(config: dict[str, Any], topic: str, seconds: float, rate: int,
                  stop_file: str) -> dict[str, Any]:
    """Produce 1 KiB records with ``acks=1`` at ``rate`` records/s for at most ``seconds``,
    until ``stop_file`` exists; prints ``{"ready": <wall time>}`` once connected (the timed
    loop starts then), and returns every record's (wall time sent, latency in ms)."""
    from confluent_kafka import Producer

    producer = Producer({**config, "acks": 1, "linger.ms": 0, "enable.idempotence": False,
                         "socket.timeout.ms": 10000})
    vals = [os.urandom(RECORD // 2).hex().encode() for _ in range(64)]
    sent: list[float] = [0.0] * int(seconds * rate)
    lat: dict[int, float] = {}
    failed: list[str] = []

    def report(i: int) -> Any:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                lat[i] = msg.latency() * 1000
        return done

    producer.produce(topic, value=vals[0], partition=0)  # warm-up: connection, metadata
    producer.flush(30)
    print(json.dumps({"ready": time.time()}), flush=True)
    start = time.perf_counter()
    wall0 = time.time()
    for i in range(len(sent)):
        if i % 100 == 0 and os.path.exists(stop_file):
            del sent[i:]
            break
        due = start + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            producer.poll(min(0.001, due - now))
        sent[i] = wall0 + (time.perf_counter() - start)
        producer.produce(topic, value=vals[i & 63], partition=0, on_delivery=report(i))
    producer.flush(60)
    if failed or len(lat) != len(sent):
        raise RuntimeError(f"latency: {len(lat)} of {len(sent)} acknowledged; errors "
                           f"{failed[:3]}")
    return {"samples": [[sent[i], round(lat[i], 3)] for i in range(len(sent))]}


# ------------------------------------------------------------------ wrong SCRAM attempts

def _frame(request: Any, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="security-bench-attack")
    return bytes(request.encode(header=True, framed=True))


def _exchange(sock: socket.socket, request: Any, key: int, version: int, corr: int) -> Any:
    from kafka_tiers.kafka import codec
    from tests.kafka.admin_helpers import recv_exact

    sock.sendall(_frame(request, corr))
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return codec.RESPONSES[key].decode(recv_exact(sock, size), version=version, header=True)


def _scram_proof(password: str, server_first: str, client_first_bare: str,
                 final_without_proof: str) -> str:
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha512).digest()
    stored = hashlib.sha512(client_key).digest()
    auth = f"{client_first_bare},{server_first},{final_without_proof}".encode()
    signature = hmac.new(stored, auth, hashlib.sha512).digest()
    return base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature,
                                                          strict=True))).decode()


def wrong_scram_attempt(host: str, port: int, context: ssl.SSLContext | None, user: str,
                        password: str, compute_proof: bool = True) -> str:
    """One SCRAM-SHA-512 authentication with ``password`` on a new connection (TLS when
    ``context``): SaslHandshake v1, then SaslAuthenticate v1 with the client-first and the
    client-final message (its proof computed from ``password``; random bytes of the proof's
    size without ``compute_proof``: as wrong, and the broker's work the same, without the
    client's PBKDF2). Returns ``refused`` (an error answered, or the connection closed, at
    any step) or ``accepted``."""
    from kafka_tiers.kafka import codec

    try:
        with socket.create_connection((host, port), timeout=10) as raw:
            sock = context.wrap_socket(raw, server_hostname=host) if context else raw
            with sock:
                hs = _exchange(sock, codec.REQUESTS[17][1](mechanism=MECHANISM), 17, 1, 1)
                if hs.error_code:
                    return "refused"
                bare = f"n={user},r={secrets.token_urlsafe(18)}"
                first = _exchange(sock, codec.REQUESTS[36][1](
                    auth_bytes=f"n,,{bare}".encode()), 36, 1, 2)
                if first.error_code:
                    return "refused"
                server_first = bytes(first.auth_bytes).decode()
                nonce = dict(i.split("=", 1) for i in server_first.split(","))["r"]
                without_proof = f"c=biws,r={nonce}"
                proof = (_scram_proof(password, server_first, bare, without_proof)
                         if compute_proof else base64.b64encode(os.urandom(64)).decode())
                final = _exchange(sock, codec.REQUESTS[36][1](
                    auth_bytes=f"{without_proof},p={proof}".encode()), 36, 1, 3)
                return "refused" if final.error_code else "accepted"
    except (OSError, ConnectionError, ssl.SSLError):
        return "refused"


def attack_child(bootstrap: str, ca_file: str | None, user: str, attempts: int,
                 threads: int) -> dict[str, Any]:
    """``attempts`` wrong-password SCRAM authentications against ``bootstrap`` (loopback
    only), ``threads`` at a time; counts and the wall time of the first start and last end.
    The proofs are random bytes (as wrong as a guessed password's, the broker's work the
    same): on one machine the attacker's own PBKDF2 would take CPU from the broker and
    measure the machine, not the broker."""
    host, port = bootstrap.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the attack runs against loopback only, not {host}")
    context = None
    if ca_file:
        context = ssl.create_default_context(cafile=ca_file)
    start = time.time()
    cpu = time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        outcomes = list(pool.map(lambda i: wrong_scram_attempt(
            host, int(port), context, user, f"wrong-{i}", False), range(attempts)))
    return {"start": start, "end": time.time(), "attempts": attempts,
            "refused": outcomes.count("refused"), "accepted": outcomes.count("accepted"),
            "cpu_ms": (time.process_time() - cpu) * 1000.0}


# ------------------------------------------------------------------ the measurements

def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)]


def _latency_run(broker: SecureBroker, topic: str, seconds: float, rate: int,
                 attack: dict[str, Any] | None, stop_file: Path) -> tuple[
                     list[list[float]], float, dict[str, Any] | None]:
    """A latency child (and, with ``attack`` args, an attack child once the producer is
    connected), stopped a second after the attack, or after ``seconds`` without one; returns
    the samples, the producer's ready time and the attack's result."""
    stop_file.unlink(missing_ok=True)
    args = {"config": broker.client_config("SASL_SSL"), "topic": topic, "seconds": 600.0,
            "rate": rate, "stop_file": str(stop_file)}
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--latency-child",
                             "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(json.dumps(args))
        proc.stdin.close()
        proc.stdin = None  # given whole: communicate() below reads only the outputs
        ready_line = proc.stdout.readline()
        if not ready_line:
            raise RuntimeError(f"the latency client failed: {proc.stderr.read()[-2000:]}")
        ready = float(json.loads(ready_line)["ready"])
        before = thread_cpu_ms(broker.pid) if broker.pid else {}
        result = run_child("attack", attack) if attack is not None else None
        if result is not None and before:
            after = thread_cpu_ms(broker.pid)
            used = [after[t] - before.get(t, 0.0) for t in after]
            result["broker_cpu_ms"] = sum(used)
            result["broker_busiest_thread_cpu_ms"] = max(used, default=0.0)
        time.sleep(1.0 if result is not None else max(0.0, ready + seconds - time.time()))
        stop_file.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"the latency client failed (exit {proc.returncode}): {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])["samples"], ready, result


def measure_brute_force(work: Path, rounds: int = ROUNDS, attempts: int = ATTEMPTS,
                        rate: int = RATE, creation_rate: int | None = None) -> dict[str, Any]:
    """The producer's p99 while ``attempts`` wrong SCRAM attempts run, against the same
    producer's p99 over as long a window at the same point of a run without them; medians
    of ``rounds`` interleaved rounds (attack, then baseline). ``creation_rate``: the
    ``SASL_SSL`` listener's ``max.connection.creation.rate`` (None: Kafka's default,
    unbounded)."""
    extra = ({"listener.name.sasl_ssl.max.connection.creation.rate": str(creation_rate)}
             if creation_rate else {})
    with secure_broker(work / "brute-force", extra=extra) as broker:
        create_topic(broker.plaintext, "latency")
        attacked, baseline, durations, refused, accepted = [], [], [], 0, 0
        medians: list[float] = []
        cpu: dict[str, list[float]] = {"broker": [], "network": [], "attacker": []}
        base_medians: list[float] = []
        for _ in range(rounds):
            attack_args = {"bootstrap": broker.sasl_ssl, "ca_file": broker.ca_file,
                           "user": USER, "attempts": attempts, "threads": ATTACK_THREADS}
            samples, ready, result = _latency_run(broker, "latency", 0.0, rate,
                                                  attack_args, work / "stop")
            assert result is not None
            refused += result["refused"]
            accepted += result["accepted"]
            cpu["attacker"].append(result["cpu_ms"] / attempts)
            if "broker_cpu_ms" in result:
                cpu["broker"].append(result["broker_cpu_ms"] / attempts)
                cpu["network"].append(result["broker_busiest_thread_cpu_ms"] / attempts)
            offset, length = result["start"] - ready, result["end"] - result["start"]
            durations.append(length)
            during = [lat for t, lat in samples if result["start"] <= t <= result["end"]]
            if not during:
                raise RuntimeError("no record was produced while the attack ran")
            attacked.append(_p99(during))
            medians.append(statistics.median(during))
            samples, ready, _ = _latency_run(broker, "latency", offset + length + 1.0, rate,
                                             None, work / "stop")
            window = [lat for t, lat in samples
                      if ready + offset <= t <= ready + offset + length]
            if not window:
                raise RuntimeError("no record in the baseline's window")
            baseline.append(_p99(window))
            base_medians.append(statistics.median(window))
    p99, base = statistics.median(attacked), statistics.median(baseline)
    return {"brute_force_attempts": attempts * rounds, "brute_force_refused": refused,
            "brute_force_accepted": accepted, "brute_force_rate": rate,
            "brute_force_creation_rate": creation_rate,
            "brute_force_attack_seconds": [round(x, 2) for x in durations],
            "brute_force_p99_ms": round(p99, 2), "baseline_p99_ms": round(base, 2),
            "brute_force_p99_ratio": round(p99 / base, 3),
            "brute_force_p50_ms": round(statistics.median(medians), 2),
            "baseline_p50_ms": round(statistics.median(base_medians), 2),
            "brute_force_runs_p99_ms": [round(x, 2) for x in attacked],
            "baseline_runs_p99_ms": [round(x, 2) for x in baseline],
            **{f"brute_force_{who}_cpu_ms_per_attempt": round(statistics.median(v), 2)
               for who, v in (("broker", cpu["broker"]), ("broker_network_thread",
                                                            cpu["network"]),
                              ("attacker", cpu["attacker"])) if v}}


def measure_tls(work: Path, total: int = 256 * MIB, rounds: int = ROUNDS) -> dict[str, Any]:
    """Produce and consume MB/s over SASL_SSL and over PLAINTEXT on one broker, rounds
    interleaved; medians and their ratios (``tls_produce_ratio``, ``tls_consume_ratio``).
    The figure ``benchmarks/wire.py`` reports as its TLS row."""
    runs: dict[str, dict[str, list[float]]] = {
        p: {"produce": [], "consume": []} for p in ("PLAINTEXT", "SASL_SSL")}
    with secure_broker(work / "tls") as broker:
        for r in range(rounds):
            for protocol in ("PLAINTEXT", "SASL_SSL"):
                config = broker.client_config(protocol)
                topic = f"tls-{protocol.lower()}-{r}"
                create_topic(broker.plaintext, topic)
                done = run_child("produce", {"config": config, "topic": topic,
                                             "total": total, "record": RECORD})
                runs[protocol]["produce"].append(done["bytes"] / MIB / done["seconds"])
                big = topic + "-read"
                create_topic(broker.plaintext, big)
                wrote = run_child("produce", {"config": config, "topic": big,
                                              "total": total, "record": CONSUME_RECORD})
                read = run_child("consume", {"config": config, "topic": big,
                                             "last_offset": wrote["records"] - 1})
                runs[protocol]["consume"].append(wrote["bytes"] / MIB / read["seconds"])
    out: dict[str, Any] = {"tls_mb": round(total / MIB, 1), "tls_record_bytes": RECORD,
                           "tls_consume_record_bytes": CONSUME_RECORD}
    for kind in ("produce", "consume"):
        plain = statistics.median(runs["PLAINTEXT"][kind])
        sasl = statistics.median(runs["SASL_SSL"][kind])
        out.update({f"tls_{kind}_sasl_ssl_mb_s": round(sasl, 1),
                    f"tls_{kind}_plaintext_mb_s": round(plain, 1),
                    f"tls_{kind}_ratio": round(sasl / plain, 3),
                    f"tls_{kind}_sasl_ssl_runs_mb_s": [round(x, 1)
                                                       for x in runs["SASL_SSL"][kind]],
                    f"tls_{kind}_plaintext_runs_mb_s": [round(x, 1)
                                                        for x in runs["PLAINTEXT"][kind]]})
    return out


def tls_goal_met(figures: dict[str, Any]) -> bool:
    """Both TLS ratios at least :data:`GOALS` ``tls_ratio``."""
    return (figures["tls_produce_ratio"] >= GOALS["tls_ratio"]
            and figures["tls_consume_ratio"] >= GOALS["tls_ratio"])


# ------------------------------------------------------------------ main

CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "produce": produce_child, "consume": consume_child, "latency": latency_child,
    "attack": attack_child}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", choices=["brute_force", "tls"], help="one of the two")
    parser.add_argument("--rate", type=int, default=RATE,
                        help="records/s of the brute-force figure's producer")
    parser.add_argument("--creation-rate", type=int, default=None,
                        help="the SASL_SSL listener's max.connection.creation.rate for the "
                             "brute-force figure (default: unset, Kafka's unbounded)")
    for kind in CHILDREN:
        parser.add_argument(f"--{kind}-child", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for kind, child in CHILDREN.items():
        given = getattr(args, f"{kind}_child")
        if given:  # the arguments as JSON, or "-": read them from stdin
            text = sys.stdin.read() if given == "-" else given
            print(json.dumps(child(**json.loads(text))), flush=True)
            return 0
    q = args.quick
    result: dict[str, Any] = {"benchmark": "security", "quick": q}
    goals: dict[str, bool] = {}
    work = Path(tempfile.mkdtemp(prefix="kt-security-"))
    try:
        if args.only in (None, "brute_force"):
            result.update(measure_brute_force(work, rounds=1 if q else ROUNDS,
                                              rate=args.rate,
                                              creation_rate=args.creation_rate))
            goals["brute_force"] = (result["brute_force_accepted"] == 0 and
                                    result["brute_force_p99_ratio"]
                                    <= GOALS["brute_force_p99_ratio"])
        if args.only in (None, "tls"):
            result.update(measure_tls(work, (16 if q else 256) * MIB))
            goals["tls"] = tls_goal_met(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["goal"] = "; ".join(GOAL_WORDS[name] for name in goals)
    result["goals"] = goals
    result["goal_met"] = all(goals.values())
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
