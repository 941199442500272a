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
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafka_tiers.config import BrokerConfig, read_properties
from tests.docs_pages import checked_page_text
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
    text = checked_page_text(PAGE)
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
#: a walkthrough block: its marker (``<!-- walkthrough -->``, ``<!-- walkthrough: save as
#: NAME -->``, ``<!-- walkthrough: own terminal -->``), then the fenced block
_STEP = re.compile(r"^<!-- walkthrough(?:: (.*?))? -->\n```(\w+)\n(.*?)^```", re.M | re.S)
#: the passwords the walkthrough chooses (its client settings must say the same)
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


@dataclass(frozen=True)
class Step:
    """One block of the walkthrough: ``kind`` (sh, python, properties), ``how`` (the
    marker's words: ``""``, ``save as NAME`` or ``own terminal``) and its text."""

    kind: str
    how: str
    text: str


def walkthrough_section(port: int | None = None) -> str:
    """The walkthrough's section of the page; with ``port``, its port 9093 made this test's
    (the only change: a test listens on a free port)."""
    text = PAGE.read_text()
    start = text.index("## Step by step: a broker with TLS, SCRAM and ACLs")
    end = text.find("\n## ", start + 3)
    section = text[start:end if end >= 0 else None]
    return section if port is None else section.replace("127.0.0.1:9093", f"127.0.0.1:{port}")


def walkthrough_steps(section: str) -> list[Step]:
    """Every block of the walkthrough, in order; each one is marked (an unmarked block
    would not be run, so it is refused)."""
    steps = [Step(kind, how or "", body) for how, kind, body in _STEP.findall(section)]
    assert len(steps) == len(_BLOCK.findall(section)), "a walkthrough block has no marker"
    return steps


def test_the_walkthrough_is_marked_relative_and_consistent() -> None:
    """Every block is run by the test below; no path outside the reader's directory; the
    password files are made before they are read; the client settings say the passwords the
    password files hold."""
    section = walkthrough_section()
    steps = walkthrough_steps(section)
    assert [s.how for s in steps if s.how] == [
        "save as server.properties", "own terminal", "save as admin.properties",
        "save as alice.properties"]
    assert steps[0] == Step("sh", "", "umask 077\n")
    assert not re.search(r"(?<![\w.])/(etc|var|opt|home|root|usr)/", section), \
        "the walkthrough names an absolute path: it runs in the reader's directory"
    shell = "".join(s.text for s in steps if s.kind == "sh")
    for user, password in PASSWORDS.items():
        made = shell.index(f"'{password}' > {user}.password")
        assert made < shell.index(f"--password-file {user}.password")
    saved = [s for s in steps if s.how.startswith("save as ")]
    for step in saved:
        name = step.how.removeprefix("save as ")
        props = properties(step.text)
        if is_client_block(props):
            assert props["sasl.password"] == PASSWORDS[props["sasl.username"]], name
            assert f"chmod 600 {name}" in shell, f"{name} holds a password: chmod 600 it"
    for step in steps:
        if step.kind == "python":
            assert 'ALICE_PASSWORD = Path("alice.password")' in step.text  # stands alone


def bash(script: str, cwd: Path, env: dict[str, str], timeout: float = 120.0
         ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, (script, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path: Path, kcat: str) -> None:
    """Every marked block of the walkthrough, in order, in an empty directory, as a
    non-root user would: step 0 sets the shell every later ``sh`` block runs in (the
    reader's one shell), a ``save as`` block is saved under its name, the ``own terminal``
    block (the broker) runs in the background until the end, each ``python`` block runs
    alone. Only the port changes (a free one, on loopback)."""
    import os
    import signal
    import sys

    from tests.cluster.processes import watch_stdout
    from tests.servers.base import free_port

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    port = free_port()
    steps = walkthrough_steps(walkthrough_section(port))
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                  str(Path(kcat).parent),
                                                  os.environ.get("PATH", "")])}
    env.pop("KAFKA_TIERS_BOOTSTRAP", None)
    shell_state = steps[0].text  # umask 077
    broker: subprocess.Popen[bytes] | None = None
    log = tmp_path / "broker.log"
    outputs: list[str] = []
    try:
        for step in steps[1:]:
            if step.how.startswith("save as "):
                (tmp_path / step.how.removeprefix("save as ")).write_text(step.text)
            elif step.how == "own terminal":
                with open(log, "wb") as err:
                    broker = subprocess.Popen(
                        ["bash", "-euo", "pipefail", "-c",
                         f"{shell_state}exec {step.text.strip()}"],
                        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=err,
                        start_new_session=True)
                ready = watch_stdout(broker, "ready on")
                assert ready.wait(60), log.read_text()[-3000:]
            elif step.kind == "sh":
                outputs.append(bash(shell_state + step.text, tmp_path, env).stdout)
            else:
                assert step.kind == "python", step
                run = subprocess.run([sys.executable, "-c", step.text], cwd=tmp_path, env=env,
                                     capture_output=True, text=True, timeout=120, check=False)
                assert run.returncode == 0, (run.stderr[-3000:], log.read_text()[-3000:])
                assert "b'order " in run.stdout, run.stdout
                outputs.append(run.stdout)
        listed = next(o for o in outputs if "User:alice" in o)
        assert "orders-readers" in listed
        read = outputs[-1].split()  # kcat's consumer: the three clients' records
        assert {"order", "1", "2", "3"} <= set(read), read
        for name in ("ca.key", "broker.key", "broker-keystore.pem", "admin.password",
                     "alice.password", "admin.properties", "alice.properties"):
            assert (tmp_path / name).stat().st_mode & 0o077 == 0, name
    finally:
        if broker is not None:
            os.killpg(broker.pid, signal.SIGINT)
            try:
                broker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(broker.pid, signal.SIGKILL)
                broker.wait(10)
