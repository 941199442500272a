"""SIGTERM always stops a broker process within its shutdown timeout
(``broker.shutdown.timeout.ms``): cleanly (exit 0, clean-shutdown marker) when the shutdown
finishes, and anyway (exit 1, one ERROR line, logs flushed) when it is stuck (issue 13: a broker
busy with a huge CreateTopics did not stop on SIGTERM)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from kafka_tiers.cli.stopping import EXIT_FORCED, TIMEOUT_KEY
from kafka_tiers.cluster.client import ClusterClient
from tests.broker.broker_process import BrokerProcess, broker_process

__all__ = ["broker_process"]

MARKER = ".kafka_cleanshutdown"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_broker_cleanly_within_the_timeout(
        tmp_path: Path, broker_process: type[BrokerProcess], sig: int) -> None:
    broker = broker_process(tmp_path / "b", {TIMEOUT_KEY: "10000"}).start()
    with ClusterClient([broker.address]) as client:
        client.create_topic("t", 2, 1)
        client.produce("t", 0, [(None, b"v")])
    sent = time.monotonic()
    broker.signal(sig)
    code = broker.wait(15)
    took = time.monotonic() - sent
    assert code == 0, broker.stderr()[-3000:]
    assert took < 10, took
    assert (broker.data / MARKER).exists(), "no clean-shutdown marker"
    err = broker.stderr()
    assert " ERROR " not in err and "Traceback" not in err, err[-3000:]


@pytest.mark.slow
def test_a_stuck_shutdown_still_ends_the_process_within_the_timeout(
        tmp_path: Path, broker_process: type[BrokerProcess]) -> None:
    """The storage plugin's close() never returns: the process exits anyway, in time, with
    one ERROR line naming the key, and without a clean-shutdown marker."""
    broker = broker_process(tmp_path / "b", {
        TIMEOUT_KEY: "3000", "remote.log.storage.enable": "true",
        "remote.storage.manager.class": "tests.broker.stuck_store:CloseHangsStore",
        "rsm.config.dir": str(tmp_path / "tier")}).start()
    with ClusterClient([broker.address]) as client:
        client.create_topic("t", 1, 1)
        client.produce("t", 0, [(None, b"v")])
    sent = time.monotonic()
    broker.signal(signal.SIGTERM)
    code = broker.wait(10)
    took = time.monotonic() - sent
    err = broker.stderr()
    assert code == EXIT_FORCED, err[-3000:]
    assert took < 3.0 + 1.0, took  # the timeout, plus slack for a loaded machine
    errors = [line for line in err.splitlines() if " ERROR " in line]
    assert len(errors) == 1, errors
    assert f"did not stop within {TIMEOUT_KEY}=3000 ms" in errors[0]
    assert not (broker.data / MARKER).exists()
    assert "Traceback" not in err, err[-3000:]


@pytest.mark.slow
def test_cluster_start_also_ends_within_the_timeout_when_a_broker_is_stuck(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.broker.broker_process import ROOT
    from tests.cluster.processes import watch_stdout

    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_tiers", "cluster", "start", "--brokers", "1",
         "--dir", str(tmp_path / "c"), "--base-port", "0", "--status-interval", "60",
         "--set", f"{TIMEOUT_KEY}=3000", "--set", "remote.log.storage.enable=true",
         "--set", "remote.storage.manager.class=tests.broker.stuck_store:CloseHangsStore",
         "--set", f"rsm.config.dir={tmp_path / 'tier'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(ROOT),
        start_new_session=True)
    lines: list[str] = []
    running = watch_stdout(proc, "running; bootstrap", lines)
    try:
        assert running.wait(60), "".join(lines)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    out = "".join(lines)
    assert code == EXIT_FORCED, out[-3000:]
    assert took < 3.0 + 1.0, took  # the timeout, plus slack for a loaded machine
    errors = [line for line in out.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "the cluster did not stop within" in errors[0], out[-3000:]
    assert "Traceback" not in out
