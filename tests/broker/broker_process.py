"""``kafka-tiers broker start`` as an OS process with the embedded metadata store, for the tests
that need a real process: signals, exit codes, what reaches stderr. The process is killed at
teardown if a test left it running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.cluster.processes import watch_stdout
from tests.servers.base import free_port

#: the repository root: the processes run there so ``tests.*`` plugin classes import.
ROOT = Path(__file__).resolve().parents[2]


class BrokerProcess:
    """One ``kafka-tiers broker start`` process (broker id 1) over ``workdir``.

    Attributes:
        data: its log dir.
        stderr_path: where its stderr goes (read it with :meth:`stderr`).
        address: ``127.0.0.1:<port>`` once :meth:`start` returned.
    """

    def __init__(self, workdir: Path, extra: Mapping[str, str] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.data = workdir / "data"
        self.config = workdir / "server.properties"
        props = {"broker.id": "1", "log.dirs": str(self.data), "port": str(self.port),
                 "metadata.store": "embedded", "metadata.dir": str(workdir / "metadata")}
        props.update(extra or {})
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.stderr_path = workdir / "stderr.txt"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *args: str, timeout: float = 30.0) -> BrokerProcess:
        """Start it and return once it printed its "ready" line.

        Raises:
            RuntimeError: it exited or was not ready within ``timeout`` (stderr quoted).
        """
        err = open(self.stderr_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_tiers", "broker", "start", "--config",
             str(self.config), *args], stdout=subprocess.PIPE, stderr=err, cwd=str(ROOT),
            start_new_session=True)
        err.close()
        proc = self.proc
        ready = watch_stdout(proc, "ready on")
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the broker did not start:\n{self.stderr()[-3000:]}")
        return self

    def signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if still running after ``timeout`` seconds."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[type[BrokerProcess]]:
    """:class:`BrokerProcess`; every process made through it is killed at teardown."""
    made: list[BrokerProcess] = []

    class Tracked(BrokerProcess):
        def __init__(self, workdir: Path, extra: Mapping[str, str] | None = None) -> None:
            super().__init__(workdir, extra)
            made.append(self)

    yield Tracked
    for p in made:
        p.kill()


__all__ = ["ROOT", "BrokerProcess", "broker_process"]
