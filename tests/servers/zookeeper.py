"""A real ZooKeeper, from Debian's ``zookeeper`` package, for the cluster coordination tests.

On first use, when ``/usr/share/java/zookeeper.jar`` is missing and we are root, ``apt-get
update`` and ``apt-get install -y --no-install-recommends zookeeper`` run under a file lock
(once per machine). The server runs standalone the way the package's ``zkServer.sh`` runs it:
``java -cp <conf dir>:/usr/share/java/zookeeper.jar ... <main class> zoo.cfg`` (the jar's
manifest carries the rest of the classpath; slf4j's log4j binding is added so it logs), with
``ZooKeeperServerMain``, its own ``zoo.cfg`` and log4j configuration in a temporary directory,
the client port on 127.0.0.1, the admin server disabled and the ``ruok``/``srvr``/``stat``/
``mntr`` four-letter words allowed. The data directory survives
:meth:`ZooKeeperServer.stop` / :meth:`ZooKeeperServer.start`.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.servers.base import (
    LOOPBACK,
    ServerProcess,
    ServerUnavailable,
    cache_dir,
    free_port,
    install_lock,
    run_install,
)

if TYPE_CHECKING:
    from kazoo.client import KazooClient

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_HOME = Path("/usr/share/zookeeper")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = (
    "ZooKeeper is not installed. As root: apt-get update && "
    "apt-get install -y --no-install-recommends zookeeper (the fixture does this itself when "
    "run as root)."
)

_LOG4J = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Threshold=INFO
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
"""


_LOGGING_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))
"""slf4j's log4j binding and log4j 1.2 (Debian dependencies of the package), so the server's log
goes to its log file (without them slf4j falls back to logging nothing)."""


def _installed() -> bool:
    return ZOOKEEPER_JAR.exists() and ZOOKEEPER_HOME.exists()


def ensure_zookeeper_installed() -> None:
    """Install Debian's ``zookeeper`` package if it is missing (root only, under a lock).

    Raises :class:`ServerUnavailable` with the install command when it cannot.
    """
    if _installed():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ServerUnavailable(INSTALL_HINT)
    with install_lock("apt-zookeeper", timeout=1800):
        if _installed():
            return
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        log = cache_dir() / "apt-zookeeper.log"
        wait_dpkg = ["-o", "DPkg::Lock::Timeout=600"]
        run_install(["apt-get", *wait_dpkg, "update", "-q"], log, env=env)
        run_install(
            ["apt-get", *wait_dpkg, "install", "-y", "-q", "--no-install-recommends",
             "zookeeper"],
            log, env=env,
        )
    if not _installed():
        raise ServerUnavailable(f"apt-get installed zookeeper but {ZOOKEEPER_JAR} is missing")


def java_binary() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ServerUnavailable("ZooKeeper needs Java (Debian: apt-get install -y default-jre)")
    return java


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter command (``ruok``, ``srvr``...) and return the answer."""
    with socket.create_connection((LOOPBACK, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer(ServerProcess):
    """A standalone ZooKeeper on 127.0.0.1:``port`` with its data in :attr:`data_dir`.

    :attr:`connection_string` (``127.0.0.1:<port>``) is what kazoo and the cluster code take;
    :meth:`client` gives a started ``KazooClient``.
    """

    name = "zookeeper"
    startup_timeout = 60.0
    stop_timeout = 10.0

    def __init__(self, workdir: Path | None = None, *, startup_timeout: float | None = None,
                 tick_time_ms: int = 500):
        ensure_zookeeper_installed()
        self.java = java_binary()
        super().__init__(workdir, startup_timeout=startup_timeout)
        self.port: int = free_port()
        """The client port (kept across restarts)."""
        self.tick_time_ms = tick_time_ms
        self.conf_dir: Path = self.workdir / "conf"
        self.conf_dir.mkdir(exist_ok=True)
        self.config_path: Path = self.conf_dir / "zoo.cfg"
        self._write_config()

    def _write_config(self) -> None:
        self.config_path.write_text(
            "\n".join([
                f"tickTime={self.tick_time_ms}",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={self.data_dir}",
                f"clientPort={self.port}",
                f"clientPortAddress={LOOPBACK}",
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf",
                "autopurge.purgeInterval=0",
                "",
            ])
        )
        (self.conf_dir / "log4j.properties").write_text(_LOG4J)

    def command(self) -> list[str]:
        """``java -cp <conf>:zookeeper.jar ZooKeeperServerMain zoo.cfg``, as zkServer.sh does."""
        logging_jars = [str(jar) for jar in _LOGGING_JARS if jar.exists()]
        return [
            self.java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat,mntr,conf",
            "-Dzookeeper.jmx.log4j.disable=true",
            f"-Dzookeeper.log.dir={self.workdir}",
            "-Dzookeeper.root.logger=INFO,CONSOLE",
            f"-Dlog4j.configuration=file:{self.conf_dir / 'log4j.properties'}",
            "-cp", ":".join([str(self.conf_dir), str(ZOOKEEPER_JAR), *logging_jars]),
            MAIN_CLASS, str(self.config_path),
        ]

    def ports(self) -> list[int]:
        """The client port."""
        return [self.port]

    def probe(self) -> bool:
        """``srvr`` answers with a standalone mode, then a kazoo session can be opened."""
        try:
            answer = four_letter_word(self.port, "srvr", timeout=1.0)
        except OSError:
            return False
        if "Mode: standalone" not in answer:
            return False
        try:
            client = self.client(timeout=5.0)
        except Exception:
            return False
        client.stop()
        client.close()
        return True

    @property
    def connection_string(self) -> str:
        """``127.0.0.1:<port>``: the kazoo ``hosts`` / cluster ``zookeeper.connect`` value."""
        return f"{LOOPBACK}:{self.port}"

    hosts = connection_string

    @property
    def url(self) -> str:
        """Same as :attr:`connection_string`."""
        return self.connection_string

    endpoint = url

    def client(self, timeout: float = 10.0, chroot: str = "", **kwargs: Any) -> KazooClient:
        """A started ``KazooClient`` (call ``stop()`` and ``close()`` when done)."""
        from kazoo.client import KazooClient

        kwargs.setdefault("timeout", 10.0)
        kwargs.setdefault("connection_retry", {"max_tries": 3, "delay": 0.2, "max_delay": 1})
        client = KazooClient(hosts=self.connection_string + chroot, **kwargs)
        try:
            client.start(timeout=timeout)
        except Exception:
            client.stop()
            client.close()
            raise
        return client
