"""Brokers as OS processes (``python -m kafka_tiers broker start``) on loopback, for the
multi-process tests with a real ZooKeeper. Every process is killed at teardown."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.servers.base import free_port


def watch_stdout(proc: subprocess.Popen[bytes], marker: str,
                 lines: list[str] | None = None) -> threading.Event:
    """An event set once ``proc`` prints a line containing ``marker`` on its stdout (a pipe).
    A daemon thread reads every line to the end, so the pipe never fills; each line is also
    appended, decoded, to ``lines`` when given."""
    seen = threading.Event()

    def watch() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            if lines is not None:
                lines.append(line)
            if marker in line:
                seen.set()

    threading.Thread(target=watch, daemon=True).start()
    return seen


class BrokerProcess:
    """One broker process with its own server.properties."""

    def __init__(self, broker_id: int, workdir: Path, zk_connect: str,
                 extra: dict[str, str] | None = None) -> None:
        self.broker_id = broker_id
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dir = workdir / f"broker-{broker_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "server.properties"
        props = {
            "broker.id": str(broker_id), "log.dirs": str(self.dir / "data"),
            "port": str(self.port), "metadata.store": "zookeeper",
            "zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": "2000",
            "replica.lag.time.max.ms": "2000", "replica.fetch.wait.max.ms": "100",
            "request.timeout.ms": "5000", "controlled.shutdown.max.retries": "1",
        }
        props.update(extra or {})
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "broker.log"
        self.stopped = False

    def start(self, timeout: float = 30.0) -> None:
        out = open(self.log, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_tiers", "broker", "start", "--config",
             str(self.config), "--log-level", "INFO"],
            stdout=subprocess.PIPE, stderr=out, start_new_session=True,
            cwd=str(Path(__file__).resolve().parents[2]))
        out.close()
        proc = self.proc
        ready = watch_stdout(proc, "ready on")
        deadline = time.monotonic() + timeout
        while not ready.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"broker {self.broker_id} did not start:\n"
                                   + self.log.read_text()[-3000:])
        self.stopped = False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False

    def kill(self) -> None:
        """SIGKILL (after SIGCONT when stopped) and reap."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if self.stopped:
            os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM (a controlled shutdown) and wait; SIGKILL when it hangs."""
        proc = self.proc
        assert proc is not None
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9



@contextlib.contextmanager
def cluster_start(directory: Path, *, racks: str | None = "/dc1/r1,/dc1/r2,/dc2/r1",
                  status_interval: float = 5.0, timeout: float = 60.0, brokers: int = 3,
                  extra_args: Sequence[str] = ()) -> Iterator[list[str]]:
    """``kafka-tiers cluster start --brokers 3`` (``brokers``; ``--racks racks`` unless None,
    then ``extra_args``) in its own process on free ports, yielded once it prints that it
    runs; the lines it printed so far (and later) are the yielded list. On exit it is
    stopped with SIGINT (Ctrl-C) and must exit 0."""
    rack_args = ["--racks", racks] if racks is not None else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_tiers", "cluster", "start", "--brokers", str(brokers),
         *rack_args, "--dir", str(directory), "--base-port", "0",
         "--status-interval", str(status_interval), *extra_args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        cwd=str(Path(__file__).resolve().parents[2]))
    lines: list[str] = []
    running = watch_stdout(proc, "running; bootstrap", lines)
    try:
        assert running.wait(timeout), "".join(lines)
        yield lines
    finally:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, "".join(lines)

__all__ = ["BrokerProcess"]
