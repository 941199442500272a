"""Session-scoped pytest fixtures for the real test servers, registered for the whole repository
by the root ``conftest.py`` (``pytest_plugins = ["tests.servers.fixtures"]``).

- ``s3_server`` -> :class:`tests.servers.moto_s3.MotoS3Server`
- ``azurite_server`` -> :class:`tests.servers.azurite.AzuriteServer`
- ``webhdfs_server`` -> :class:`tests.servers.webhdfs.WebHdfsServer`, or
  :class:`tests.servers.webhdfs.RealWebHdfs` when ``KT_HDFS_URL`` is set
- ``zookeeper_server`` -> :class:`tests.servers.zookeeper.ZooKeeperServer`
- ``server_factory`` -> ``factory(ServerClass, **kwargs)``: a private, started instance for
  one test (closed after it), for fault tests that stop, kill or restart a server.

Each server is started once per session and always closed at its end (process group killed,
temporary directory removed), also when tests fail. A test that stops a shared server must
start it again (``try``/``finally``), or use ``server_factory``. Missing software that cannot be
installed here (no npm, not root for apt) skips the test, and fails it under ``CI``.

This module stays light: client libraries (boto3, azure, kazoo, hdfs) are imported only inside
the fixtures and the handles' methods.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import pytest

if TYPE_CHECKING:
    from tests.servers.azurite import AzuriteServer
    from tests.servers.base import ServerProcess
    from tests.servers.moto_s3 import MotoS3Server
    from tests.servers.webhdfs import RealWebHdfs, WebHdfsServer
    from tests.servers.zookeeper import ZooKeeperServer

S = TypeVar("S", bound="ServerProcess")


def unavailable(exc: Exception) -> NoReturn:
    """Skip (fail under CI) because a server's software cannot be had here."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"test server unavailable under CI: {exc}", pytrace=False)
    pytest.skip(f"test server unavailable: {exc}")


def _serve(factory: Callable[[], S]) -> Iterator[S]:
    from tests.servers.base import ServerUnavailable

    try:
        server = factory()
    except ServerUnavailable as exc:
        unavailable(exc)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3Server]:
    """moto's S3 server (in memory: a restart empties it)."""
    from tests.servers.moto_s3 import MotoS3Server

    yield from _serve(MotoS3Server)


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[AzuriteServer]:
    """Azurite's blob service (npm package installed into the cache on first use)."""
    from tests.servers.azurite import AzuriteServer

    yield from _serve(AzuriteServer)


@pytest.fixture(scope="session")
def webhdfs_server() -> Iterator[WebHdfsServer | RealWebHdfs]:
    """The WebHDFS emulator, or the real cluster of ``KT_HDFS_URL`` (not restartable)."""
    from tests.servers.webhdfs import RealWebHdfs, WebHdfsServer

    real = RealWebHdfs.from_environment()
    if real is None:
        yield from _serve(WebHdfsServer)
        return
    real.start()
    try:
        yield real
    finally:
        real.close()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper (Debian package installed on first use when root)."""
    from tests.servers.zookeeper import ZooKeeperServer

    yield from _serve(ZooKeeperServer)


@pytest.fixture
def server_factory() -> Iterator[Callable[..., Any]]:
    """``server_factory(ServerClass, **kwargs)``: a started private server, closed after the
    test (whatever it did to it)."""
    from tests.servers.base import ServerUnavailable

    started: list[ServerProcess] = []

    def make(cls: type[S], **kwargs: Any) -> S:
        try:
            server = cls(**kwargs)
        except ServerUnavailable as exc:
            unavailable(exc)
        started.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in reversed(started):
            server.close()
