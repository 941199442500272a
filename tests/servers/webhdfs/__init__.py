"""WebHDFS for the HDFS plugin's tests: the emulator of the public WebHDFS REST spec (NOT Hadoop;
see :mod:`tests.servers.webhdfs.emulator`) run as a child process, or a real cluster.

- :class:`WebHdfsServer` runs ``python -m tests.servers.webhdfs`` on two free 127.0.0.1 ports
  (namenode, datanode) with its storage in :attr:`WebHdfsServer.data_dir`, which survives
  :meth:`~WebHdfsServer.stop` / :meth:`~WebHdfsServer.start`. At first start it makes
  ``/user/<user>`` (owned by the test user, 755) and ``/tmp`` (1777); the superuser is ``hdfs``.
- :class:`RealWebHdfs` points at a real cluster (``KT_HDFS_URL``, ``KT_HDFS_USER``, optional
  ``KT_HDFS_BASE``); it cannot be stopped or restarted (``restartable`` is false) and removes its
  base directory at the end.

Both give ``url``, ``user``, ``base_path`` (a directory the user may write) and ``client()``
(an ``hdfs.InsecureClient``, the client the plugin uses).
"""

from __future__ import annotations

import getpass
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.servers.base import (
    LOOPBACK,
    REPO_ROOT,
    ServerProcess,
    ServerUnavailable,
    free_port,
    http_answers,
)

if TYPE_CHECKING:
    from hdfs import InsecureClient

DEFAULT_USER = "kt"
SUPERUSER = "hdfs"


class WebHdfsServer(ServerProcess):
    """The WebHDFS emulator on 127.0.0.1 (namenode :attr:`port`, datanode :attr:`data_port`)."""

    name = "webhdfs"
    startup_timeout = 30.0
    stop_timeout = 5.0
    restartable = True
    """This server can be stopped and restarted by fault tests."""

    def __init__(self, workdir: Path | None = None, *, user: str = DEFAULT_USER,
                 superuser: str = SUPERUSER, user_groups: str = "",
                 startup_timeout: float | None = None):
        super().__init__(workdir, startup_timeout=startup_timeout)
        self.port: int = free_port()
        """The namenode port (kept across restarts)."""
        self.data_port: int = free_port()
        """The datanode port, target of the 307 redirects (kept across restarts)."""
        self.user = user
        """The user the tests act as (``user.name``)."""
        self.superuser: str | None = superuser
        """The emulated namenode's superuser (bypasses permissions)."""
        self.user_groups = user_groups
        self.base_path = f"/user/{user}"
        """A directory owned by :attr:`user` (made at first start)."""

    @property
    def namespace_dir(self) -> Path:
        """Where the emulated file system's files are on the local disk."""
        return self.data_dir / "namespace"

    def command(self) -> list[str]:
        """``python -m tests.servers.webhdfs`` with this handle's ports and directories."""
        cmd = [
            sys.executable, "-m", "tests.servers.webhdfs", "--host", LOOPBACK,
            "--port", str(self.port), "--data-port", str(self.data_port),
            "--data-dir", str(self.data_dir), "--superuser", self.superuser or SUPERUSER,
            "--mkdir", f"/tmp:{self.superuser}:1777",
            "--mkdir", f"{self.base_path}:{self.user}:755",
        ]
        if self.user_groups:
            cmd += ["--user-groups", self.user_groups]
        return cmd

    def cwd(self) -> Path:
        """The checkout's root, so ``tests.servers.webhdfs`` imports."""
        return REPO_ROOT

    def environment(self) -> dict[str, str]:
        """Ours, with the checkout on ``PYTHONPATH``."""
        env = super().environment()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                          env.get("PYTHONPATH")]))
        return env

    def ports(self) -> list[int]:
        """Namenode and datanode ports."""
        return [self.port, self.data_port]

    def probe(self) -> bool:
        """Both listeners answer HTTP."""
        return (http_answers(self.port, "/webhdfs/v1/?op=GETFILESTATUS&user.name=" + self.user)
                and http_answers(self.data_port, "/"))

    @property
    def url(self) -> str:
        """The namenode's URL, ``http://127.0.0.1:<port>`` (what ``InsecureClient`` takes)."""
        return f"http://{LOOPBACK}:{self.port}"

    endpoint = url

    def client(self, user: str | None = None, **kwargs: Any) -> InsecureClient:
        """An ``hdfs.InsecureClient`` acting as ``user`` (default :attr:`user`)."""
        from hdfs import InsecureClient

        kwargs.setdefault("timeout", 30)
        return InsecureClient(self.url, user=user or self.user, **kwargs)


class RealWebHdfs:
    """A real cluster's WebHDFS (``KT_HDFS_URL``), with the same surface as the emulator's
    handle; it cannot be stopped, so fault tests skip (``restartable`` is false)."""

    restartable = False
    running = True
    data_dir: Path | None = None
    superuser: str | None = None

    def __init__(self, url: str, user: str | None = None, base_path: str | None = None):
        self.url = url.rstrip("/")
        self.endpoint = self.url
        self.user = user or getpass.getuser()
        self.base_path = (base_path or "/tmp/kafka-tiers-tests").rstrip("/") + \
            f"/{uuid.uuid4().hex[:12]}"
        """A fresh directory for this session, removed by :meth:`close`."""

    @classmethod
    def from_environment(cls) -> RealWebHdfs | None:
        """The cluster named by ``KT_HDFS_URL`` / ``KT_HDFS_USER`` / ``KT_HDFS_BASE``, if set."""
        url = os.environ.get("KT_HDFS_URL")
        if not url:
            return None
        return cls(url, os.environ.get("KT_HDFS_USER"), os.environ.get("KT_HDFS_BASE"))

    def client(self, user: str | None = None, **kwargs: Any) -> InsecureClient:
        """An ``hdfs.InsecureClient`` acting as ``user`` (default :attr:`user`)."""
        from hdfs import InsecureClient

        kwargs.setdefault("timeout", 60)
        return InsecureClient(self.url, user=user or self.user, **kwargs)

    def start(self) -> None:
        """Make the session's base directory."""
        self.client().makedirs(self.base_path)

    def close(self) -> None:
        """Remove the session's base directory."""
        self.client().delete(self.base_path, recursive=True)

    def _refuse(self) -> None:
        raise ServerUnavailable("a real HDFS cluster (KT_HDFS_URL) cannot be stopped by tests")

    def stop(self, timeout: float | None = None) -> None:
        """Refused: a real cluster is not ours to stop."""
        self._refuse()

    def kill(self) -> None:
        """Refused: a real cluster is not ours to stop."""
        self._refuse()

    def restart(self) -> None:
        """Refused: a real cluster is not ours to stop."""
        self._refuse()
