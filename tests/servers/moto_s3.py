"""moto's S3 server over HTTP for the S3 plugin's tests.

``python -m moto.server -H 127.0.0.1 -p <port>`` runs as a child process (from the ``test``
extra's ``moto[server]``), so a fault test can stop it in the middle of a transfer. Clients are
ordinary boto3 clients with ``endpoint_url``, fake credentials, a region and path-style
addressing.

moto keeps everything in memory: after :meth:`MotoS3Server.stop` / :meth:`MotoS3Server.start`
(or :meth:`MotoS3Server.restart`) the server is empty again: buckets and objects are gone.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from tests.servers.base import LOOPBACK, ServerProcess, free_port, http_answers

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


class MotoS3Server(ServerProcess):
    """moto's server on 127.0.0.1:``port``; data is in memory and lost on restart."""

    name = "moto-s3"
    startup_timeout = 60.0
    stop_timeout = 5.0

    def __init__(self, workdir: Path | None = None, *, startup_timeout: float | None = None,
                 region: str = REGION):
        super().__init__(workdir, startup_timeout=startup_timeout)
        self.port: int = free_port()
        """The server's port (kept across restarts)."""
        self.region = region
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY

    def command(self) -> list[str]:
        """``python -m moto.server`` on 127.0.0.1:port."""
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)]

    def environment(self) -> dict[str, str]:
        """Fake credentials and the region, nothing that could reach a real AWS account."""
        env = super().environment()
        env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_DEFAULT_REGION=self.region)
        env.pop("AWS_PROFILE", None)
        return env

    def ports(self) -> list[int]:
        """The server's port."""
        return [self.port]

    def probe(self) -> bool:
        """moto's own API answers."""
        return http_answers(self.port, "/moto-api/data.json")

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: boto3's ``endpoint_url``."""
        return f"http://{LOOPBACK}:{self.port}"

    endpoint = url
    endpoint_url = url

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3.client("s3", **kwargs)`` reaching this server."""
        from botocore.config import Config

        return {
            "endpoint_url": self.url,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "region_name": self.region,
            "config": Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 2, "mode": "standard"},
                connect_timeout=5,
                read_timeout=60,
            ),
        }

    def client(self, **overrides: Any) -> Any:
        """A boto3 S3 client for this server (``overrides`` replace the defaults)."""
        import boto3

        kwargs = self.client_kwargs()
        kwargs.update(overrides)
        return boto3.session.Session().client("s3", **kwargs)

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name by default) and return its name."""
        name = name or f"kt-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def reset(self) -> None:
        """Drop every bucket and object (moto's ``/moto-api/reset``)."""
        import urllib.request

        req = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
