"""Several brokers in one process: the quick start's cluster and most tests' cluster.

Each broker is the one :class:`~kafka_tiers.broker.Broker`, started as a cluster member.

``LocalCluster(directory, brokers=3, racks=[...])`` gives each broker ``<directory>/broker-<id>``
(its log dirs inside), and, with the embedded store, one
:class:`~kafka_tiers.cluster.embedded_store.EmbeddedMetadataServer` on
``<directory>/metadata`` shared by every broker. Brokers talk through a
:class:`~kafka_tiers.cluster.transport.LoopbackNetwork` (``transport="loopback"``) or TCP on
127.0.0.1 (``transport="tcp"``, reachable by other processes and the CLI).

Failure tools for tests: :meth:`LocalCluster.kill` (abrupt death), :meth:`pause` /
:meth:`resume` (SIGSTOP / SIGCONT), :meth:`restart`, :meth:`stop_broker` (controlled
shutdown).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_tiers.broker import Broker
from kafka_tiers.cluster.client import ClusterClient
from kafka_tiers.cluster.embedded_store import EmbeddedMetadataServer
from kafka_tiers.cluster.transport import LoopbackClient, LoopbackNetwork
from kafka_tiers.plugins.hooks import Hooks

#: settings that make failures visible in about a second (tests, the quick start).
FAST_FAILURE: dict[str, str] = {
    "zookeeper.session.timeout.ms": "1500",
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "100",
    "request.timeout.ms": "5000",
    "log.flush.scheduler.interval.ms": "60000",
}


class LocalCluster:
    """A cluster of ``brokers`` brokers (ids 1..n) in this process.

    Args:
        directory: where everything lives.
        brokers: how many.
        racks: one rack per broker (cycled when shorter), or None.
        overrides: extra broker config for every broker.
        transport: ``"loopback"`` or ``"tcp"``.
        metadata_store: ``"embedded"`` or ``"zookeeper"`` (then give ``zookeeper_connect``).
        log_dirs_per_broker: JBOD: log dirs per broker.
        hooks: one hook facade for every broker.
        fast_failure: use :data:`FAST_FAILURE` (failures noticed in about a second).
        base_port: with TCP, broker n listens on ``base_port + n - 1`` (0: any free port).
        background: run each broker's log maintenance and remote log manager schedulers
            (False: tiering runs only when called, e.g. ``broker.rlm.run_once(tp)``).
    """

    def __init__(self, directory: str | Path, brokers: int = 3, *,
                 racks: Sequence[str] | None = None,
                 overrides: Mapping[str, str] | None = None, transport: str = "loopback",
                 metadata_store: str = "embedded", zookeeper_connect: str | None = None,
                 log_dirs_per_broker: int = 1, hooks: Hooks | None = None,
                 fast_failure: bool = True, base_port: int = 0,
                 background: bool = True) -> None:
        if transport not in ("loopback", "tcp"):
            raise ValueError(f"transport must be loopback or tcp, got {transport!r}")
        self.directory = Path(directory)
        self.count = brokers
        self.racks = list(racks) if racks else None
        self.overrides = dict(FAST_FAILURE if fast_failure else {})
        self.overrides.update(overrides or {})
        self.transport = transport
        self.metadata_store = metadata_store
        self.zookeeper_connect = zookeeper_connect
        self.log_dirs_per_broker = log_dirs_per_broker
        self.hooks = hooks
        self.base_port = base_port
        self.background = background
        self.network = LoopbackNetwork() if transport == "loopback" else None
        self.embedded: EmbeddedMetadataServer | None = None
        self.brokers: dict[int, Broker] = {}
        self._clients: list[ClusterClient] = []

    def broker_config(self, broker_id: int) -> dict[str, str]:
        """The raw config of broker ``broker_id``."""
        base = self.directory / f"broker-{broker_id}"
        dirs = [str(base / f"data-{i}") for i in range(self.log_dirs_per_broker)]
        port = self.base_port + broker_id - 1 if self.base_port else 0
        cfg = {"broker.id": str(broker_id), "log.dirs": ",".join(dirs), "port": str(port),
               "metadata.store": self.metadata_store,
               "metadata.dir": str(self.directory / "metadata")}
        if self.racks:
            cfg["broker.rack"] = self.racks[(broker_id - 1) % len(self.racks)]
        if self.zookeeper_connect:
            cfg["zookeeper.connect"] = self.zookeeper_connect
        cfg.update(self.overrides)
        return cfg

    def start(self, timeout: float = 30.0) -> LocalCluster:
        """Start every broker and wait for a controller that knows every broker."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.metadata_store == "embedded" and self.embedded is None:
            self.embedded = EmbeddedMetadataServer(self.directory / "metadata")
        try:
            for b in range(1, self.count + 1):
                self.start_broker(b)
            self.wait_until(self._controller_sees_every_broker, timeout,
                            "no controller was elected, or it does not know every broker")
        except BaseException:
            self.close()
            raise
        return self

    def start_broker(self, broker_id: int) -> Broker:
        """Start (or restart) one broker."""
        broker = Broker(self.broker_config(broker_id), cluster=True, network=self.network,
                        embedded_server=self.embedded, hooks=self.hooks,
                        background=self.background)
        self.brokers[broker_id] = broker
        broker.start()
        return broker

    def _controller_sees_every_broker(self) -> bool:
        cid = self.controller_id()
        if cid is None:
            return False
        return set(self.live) <= set(self.brokers[cid].controller.live)

    def broker(self, broker_id: int) -> Broker:
        return self.brokers[broker_id]

    @property
    def live(self) -> list[int]:
        """The ids of running brokers."""
        return [b for b, br in sorted(self.brokers.items()) if br.started]

    def controller_id(self) -> int | None:
        """The active controller's broker id, or None."""
        for b, br in self.brokers.items():
            if br.started and br.controller is not None and br.controller.active:
                return b
        return None

    def controller(self) -> Any:
        """The active controller object."""
        cid = self.controller_id()
        if cid is None:
            raise RuntimeError("no active controller")
        return self.brokers[cid].controller

    def addresses(self) -> list[str]:
        return [br.address for br in self.brokers.values() if br.started]

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the live brokers' Kafka listeners (give ``listeners`` in
        ``overrides``, e.g. ``PLAINTEXT://127.0.0.1:0``; "" when none is configured)."""
        return ",".join(b.bootstrap_servers for b in self.brokers.values()
                        if b.started and b.bootstrap_servers)

    def client(self, timeout: float = 20.0) -> ClusterClient:
        """A client of this cluster (closed with the cluster); over TCP to brokers whose
        internal transport is TLS, it presents the brokers' own certificate."""
        transport = LoopbackClient(self.network) if self.network is not None else None
        secured = [b.member.security for b in self.brokers.values()
                   if b.started and b.member is not None and b.member.security is not None]
        # TLS between brokers: the client presents a broker's own certificate
        c = ClusterClient(self.addresses() or ["127.0.0.1:1"], transport=transport,
                          timeout=timeout, security=secured[0] if secured else None)
        self._clients.append(c)
        return c

    # ------------------------------------------------------------------ failures
    def kill(self, broker_id: int) -> None:
        """Abrupt death of a broker (no controlled shutdown; its session ends at once)."""
        self.brokers[broker_id].kill()

    def pause(self, broker_id: int) -> None:
        """Freeze a broker like SIGSTOP."""
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        """Wake a paused broker like SIGCONT."""
        self.brokers[broker_id].resume()

    def stop_broker(self, broker_id: int, controlled: bool = True) -> None:
        """Stop a broker (controlled shutdown first by default)."""
        self.brokers[broker_id].shutdown(controlled=controlled)

    def restart(self, broker_id: int) -> Broker:
        """Start a stopped or killed broker again on its data."""
        old = self.brokers.get(broker_id)
        if old is not None and old.started:
            old.kill()
        return self.start_broker(broker_id)

    @staticmethod
    def wait_until(predicate: Callable[[], bool], timeout: float, what: str = "condition"
                   ) -> None:
        """Poll ``predicate`` until true; ``TimeoutError`` naming ``what`` after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s: {what}")
            time.sleep(0.02)

    def close(self) -> None:
        """Stop every broker (no controlled shutdown) and the embedded store."""
        for c in self._clients:
            c.close()
        self._clients.clear()
        for br in self.brokers.values():
            if br.started:
                br.shutdown(controlled=False)
        if self.embedded is not None:
            self.embedded.close()
            self.embedded = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["FAST_FAILURE", "LocalCluster"]
