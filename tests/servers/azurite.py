"""Azurite (Microsoft's Azure Storage emulator, from npm) for the Azure Blob plugin's tests.

On first use ``npm install --prefix <cache>/npm azurite@3`` runs under a file lock (once per
machine and cache); then ``azurite-blob`` is started on 127.0.0.1 with the flags DECISIONS.md
gives (``--skipApiVersionCheck --disableTelemetry``: without them recent SDKs are refused and
SIGTERM hangs) and ``--location`` in the server's data directory, so blobs survive a restart.
Clients use the well-known development account (``devstoreaccount1``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.servers.base import (
    LOOPBACK,
    ServerProcess,
    ServerUnavailable,
    cache_dir,
    free_port,
    http_answers,
    install_lock,
    run_install,
)

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient, ContainerClient

AZURITE_PACKAGE = "azurite@3"
ACCOUNT_NAME = "devstoreaccount1"
"""Azurite's well-known development account."""
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
"""Azurite's well-known development account key (public, documented by Microsoft)."""


def azurite_blob_binary() -> Path:
    """The ``azurite-blob`` executable, installed into the cache on first use.

    ``$KT_AZURITE_BLOB`` names an existing executable instead. Raises
    :class:`ServerUnavailable` when npm is missing.
    """
    override = os.environ.get("KT_AZURITE_BLOB")
    if override:
        return Path(override)
    prefix = cache_dir() / "npm"
    binary = prefix / "node_modules" / ".bin" / "azurite-blob"
    marker = prefix / ".azurite-installed"
    if binary.exists() and marker.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise ServerUnavailable(
            "Azurite needs Node.js and npm (Debian: apt-get install -y nodejs npm); "
            f"it is then installed on first use with: npm install --prefix {prefix} "
            f"{AZURITE_PACKAGE}"
        )
    with install_lock("npm-azurite"):
        if binary.exists() and marker.exists():
            return binary
        prefix.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # tox does not pass NODE_EXTRA_CA_CERTS; without the system CA bundle npm cannot verify
        # the registry where TLS goes through a local CA, and retries for minutes
        system_ca = "/etc/ssl/certs/ca-certificates.crt"
        if "NODE_EXTRA_CA_CERTS" not in env and os.path.exists(system_ca):
            env["NODE_EXTRA_CA_CERTS"] = system_ca
        run_install(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--loglevel=warn", "--fetch-retries=2", "--fetch-timeout=60000",
             AZURITE_PACKAGE],
            cache_dir() / "npm-install.log", env=env, timeout=600,
        )
        if not binary.exists():
            raise ServerUnavailable(f"npm installed {AZURITE_PACKAGE} but {binary} is missing")
        marker.write_text(AZURITE_PACKAGE + "\n")
    return binary


class AzuriteServer(ServerProcess):
    """Azurite's blob service on 127.0.0.1 with its data in :attr:`data_dir`.

    ``connection_string`` (or :meth:`service_client`) reaches it; data survives
    :meth:`stop` / :meth:`start` because ``--location`` is the data directory.
    """

    name = "azurite"
    startup_timeout = 60.0
    stop_timeout = 10.0

    def __init__(self, workdir: Path | None = None, *, startup_timeout: float | None = None):
        self.binary = azurite_blob_binary()
        super().__init__(workdir, startup_timeout=startup_timeout)
        self.port: int = free_port()
        """The blob service's port (kept across restarts)."""

    def command(self) -> list[str]:
        """``azurite-blob`` with the flags of DECISIONS.md."""
        return [
            str(self.binary), "--blobHost", LOOPBACK, "--blobPort", str(self.port),
            "--location", str(self.data_dir), "--skipApiVersionCheck", "--disableTelemetry",
            "--silent",
        ]

    def ports(self) -> list[int]:
        """The blob port."""
        return [self.port]

    def probe(self) -> bool:
        """Azurite answers an HTTP request on its blob port."""
        return http_answers(self.port, f"/{ACCOUNT_NAME}?comp=list")

    @property
    def account_name(self) -> str:
        """The development account's name."""
        return ACCOUNT_NAME

    @property
    def account_key(self) -> str:
        """The development account's key."""
        return ACCOUNT_KEY

    @property
    def url(self) -> str:
        """The account's blob endpoint, ``http://127.0.0.1:<port>/devstoreaccount1``."""
        return f"http://{LOOPBACK}:{self.port}/{ACCOUNT_NAME}"

    endpoint = url

    @property
    def connection_string(self) -> str:
        """The development account's connection string pointing at this server."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT_NAME};"
            f"AccountKey={ACCOUNT_KEY};BlobEndpoint={self.url};"
        )

    def service_client(self, **kwargs: Any) -> BlobServiceClient:
        """A ``BlobServiceClient`` for this server.

        No retries by default (the SDK's default backs off for ~15 s per retry), so a fault
        surfaces at once; pass ``retry_total=...`` to test retrying.
        """
        from azure.storage.blob import BlobServiceClient

        kwargs.setdefault("retry_total", 0)
        kwargs.setdefault("connection_timeout", 5)
        return BlobServiceClient.from_connection_string(self.connection_string, **kwargs)

    def create_container(self, name: str | None = None, **kwargs: Any) -> ContainerClient:
        """Create a container (a fresh unique name by default) and return its client."""
        import uuid

        name = name or f"kt-{uuid.uuid4().hex[:16]}"
        return self.service_client(**kwargs).create_container(name)
