"""docs/security.md: its links are public, every broker ``properties`` block is a config the
broker accepts without a warning, every client ``properties`` block is one librdkafka accepts,
and the walkthrough's ``openssl`` commands make a CA and a broker certificate that TLS
accepts for 127.0.0.1."""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from kafka_tiers.config import BrokerConfig, read_properties
from tests.security.certs import TestCerts

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "security.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def blocks(kind: str, text: str | None = None) -> list[str]:
    """The page's fenced blocks of ``kind`` (``sh``, ``properties``, ``python``), in order."""
    return [body for k, body in _BLOCK.findall(PAGE.read_text() if text is None else text)
            if k == kind]


def properties(block: str) -> dict[str, str]:
    """A properties block read as the broker reads server.properties (Java's rules:
    comments, ``\\`` continuations, escapes; a key given twice is refused)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "block.properties"
        path.write_text(block)
        return read_properties(path)


def is_client_block(props: dict[str, str]) -> bool:
    """A client's properties (kcat -F): a security protocol and no broker listener."""
    return "security.protocol" in props and "listeners" not in props


def test_links_are_public_and_the_kips_are_named() -> None:
    text = PAGE.read_text()
    assert "../shared" not in text and "shared/" not in text
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if target.startswith(("https://", "#")):
            continue
        assert (PAGE.parent / target.split("#")[0]).exists(), target
    kips = re.findall(r"https://cwiki\.apache\.org/confluence/display/KAFKA/(KIP-\d+)\S*?\)",
                      text)
    assert {"KIP-152", "KIP-368", "KIP-554", "KIP-290"} <= set(kips), kips
    # the quick start's broker is said to be PLAINTEXT on loopback
    assert "runs its broker on a `PLAINTEXT` listener bound to 127.0.0.1 only" in text
    assert "(docs/security.md)" in (ROOT / "README.md").read_text()


def test_every_broker_properties_block_is_accepted_without_a_warning() -> None:
    broker_blocks = [p for p in map(properties, blocks("properties")) if not is_client_block(p)]
    assert len(broker_blocks) >= 2
    for props in broker_blocks:
        full = {"broker.id": "1", "log.dirs": "/tmp/kafka-tiers-docs", **props}
        config = BrokerConfig(full)
        assert config.warnings == [], (props, config.warnings)


def test_the_client_properties_block_is_librdkafkas(certs: TestCerts) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    client_blocks = [p for p in map(properties, blocks("properties")) if is_client_block(p)]
    assert client_blocks, "no client properties block (kcat -F) in docs/security.md"
    for props in client_blocks:
        assert props["ssl.ca.location"] == "ca.pem"
        # librdkafka refuses an unknown property or value, or an unreadable CA, when the
        # client is made (nothing listens at the address: it never connects)
        producer = confluent_kafka.Producer({**props, "ssl.ca.location": str(certs.ca_cert),
                                             "bootstrap.servers": "127.0.0.1:9"})
        producer.flush(0)


def openssl_block() -> str:
    found = [b for b in blocks("sh") if b.lstrip().startswith("# a certificate authority")]
    assert len(found) == 1, "the walkthrough's openssl block is missing"
    return found[0]


def run_openssl_block(directory: Path) -> None:
    """The walkthrough's openssl commands, run by bash in ``directory``."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", openssl_block()], cwd=directory,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_openssl_commands_make_a_certificate_tls_accepts(tmp_path: Path) -> None:
    run_openssl_block(tmp_path)
    for name in ("ca.pem", "ca.key", "broker.key", "broker.pem", "broker-keystore.pem"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "broker-keystore.pem").stat().st_mode & 0o077 == 0
    # a TLS server with the keystore, a client trusting ca.pem and checking 127.0.0.1
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "broker-keystore.pem")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        outcome: list[BaseException | None] = []

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.recv(2) == b"ok"
        thread.join(10)
    assert outcome == [None]


# ------------------------------------------------------------------ the walkthrough, run

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


def walkthrough(tmp_path: Path, port: int) -> str:
    """The walkthrough's section of the page, its paths and port made this test's."""
    text = PAGE.read_text()
    start = text.index("## Step by step: a broker with TLS, SCRAM and ACLs")
    end = text.find("\n## ", start + 3)
    return (text[start:end if end >= 0 else None].replace("/etc/kafka-tiers/", f"{tmp_path}/")
            .replace("/var/lib/kafka-tiers/data", str(tmp_path / "data"))
            .replace("127.0.0.1:9093", f"127.0.0.1:{port}"))


def bash(script: str, cwd: Path, env: dict[str, str], timeout: float = 120.0
         ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (script, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path: Path, kcat: str) -> None:
    """openssl, server.properties, the first user, the broker, the admin's users, topic and
    ACLs, then confluent-kafka, kafka-python and kcat as alice: every block of the
    walkthrough in order, only the paths and the port changed."""
    import os
    import signal
    import sys

    from tests.cluster.processes import watch_stdout
    from tests.servers.base import free_port

    run_openssl_block(tmp_path)
    port = free_port()
    text = walkthrough(tmp_path, port)
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                  str(Path(kcat).parent),
                                                  os.environ.get("PATH", "")])}
    env.pop("KAFKA_TIERS_BOOTSTRAP", None)
    server = [b for b in blocks("properties", text) if "listeners=" in b]
    assert len(server) == 1
    (tmp_path / "server.properties").write_text(server[0])
    for user, password in PASSWORDS.items():
        secret = tmp_path / f"{user}.password"
        secret.write_text(password + "\n")
        secret.chmod(0o600)
    for props in map(properties, blocks("properties", text)):
        if is_client_block(props):
            assert props["sasl.password"] == PASSWORDS[props["sasl.username"]]
            (tmp_path / f"{props['sasl.username']}.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in props.items()))
    shell = blocks("sh", text)
    first_user = next(b for b in shell if "--user admin" in b)
    setup, start_line = first_user.split("kafka-tiers broker start", 1)
    assert start_line.strip() == "--config server.properties"
    bash(setup, tmp_path, env)
    log = tmp_path / "broker.log"
    with open(log, "wb") as err:
        broker = subprocess.Popen(["kafka-tiers", "broker", "start", "--config",
                                   "server.properties", "--log-level", "INFO"], cwd=tmp_path,
                                  env=env, stdout=subprocess.PIPE, stderr=err,
                                  start_new_session=True)
    try:
        ready = watch_stdout(broker, "ready on")
        assert ready.wait(60), log.read_text()[-3000:]
        admin = next(b for b in shell if "--command-config admin.properties" in b)
        listed = bash(admin, tmp_path, env).stdout
        assert "User:alice" in listed and "orders-readers" in listed
        code = "\n".join(blocks("python", text))
        clients = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                                 capture_output=True, text=True, timeout=120, check=False)
        assert clients.returncode == 0, (clients.stderr[-3000:], log.read_text()[-3000:])
        assert "b'order " in clients.stdout, clients.stdout
        kcat_block = next(b for b in shell if b.lstrip().startswith("echo"))
        read = bash(kcat_block, tmp_path, env).stdout.split()
        assert {"order", "1", "2", "3"} <= set(read), read
    finally:
        os.killpg(broker.pid, signal.SIGINT)
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(broker.pid, signal.SIGKILL)
            broker.wait(10)
