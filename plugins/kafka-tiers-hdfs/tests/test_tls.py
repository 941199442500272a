"""TLS: an https namenode is verified against ``hdfs.tls.ca.file`` (or the system CAs), and a
failed verification is a non-retriable error that says which keys to check."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import RemoteStorageError


def _self_signed(directory: Path) -> tuple[Path, Path]:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kt-test-namenode")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "nn.pem", directory / "nn.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def https_namenode(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https namenode on 127.0.0.1 whose base directory is empty (LISTSTATUS answers no
    entries); yields its URL and the certificate to trust."""
    cert, key = _self_signed(tmp_path)
    body = json.dumps({"FileStatuses": {"FileStatus": []}}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_https_is_verified_with_the_configured_ca(
        https_namenode: tuple[str, Path], make_plugin: Callable[..., Any]) -> None:
    url, cert = https_namenode
    config = {"hdfs.namenode.url": url, "hdfs.user": "kt", "hdfs.base.dir": "/kt"}
    trusted = make_plugin({**config, "hdfs.tls.ca.file": str(cert)}).object_store
    assert list(trusted.list("")) == []
    # hdfs.tls.ca.file and hdfs.tls.verify=false win over REQUESTS_CA_BUNDLE when it is set
    unverified = make_plugin({**config, "hdfs.tls.verify": "false"}).object_store
    assert list(unverified.list("")) == []
    untrusted = make_plugin(config).object_store  # the system CAs do not know this one
    with pytest.raises(Exception) as info:
        list(untrusted.list(""))
    err = untrusted.translate_error(info.value, "")
    assert type(err) is RemoteStorageError and not err.retriable
    assert "TLS failure" in str(err) and "hdfs.tls.ca.file" in str(err)
