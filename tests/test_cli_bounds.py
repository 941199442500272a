"""Rules at the CLI's edges: every interval option has a sensible floor (0.1 s), config
integers fit Kafka's 32-bit int / 64-bit long keys and do not contradict each other,
``cluster start`` says which per-broker keys it ignores, ``--broker-ids`` names duplicates and
unknown brokers, and output that cannot be written is an error (exit 2), never a silent 0."""

from __future__ import annotations

import errno
import io
import json
import os
import sys
from pathlib import Path

import click
import pytest

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.cli.boundary import EXIT_ERROR, EXIT_OK, run
from kafka_tiers.cli.output import MIN_SECONDS, Seconds, emit_json
from kafka_tiers.config import INT_MAX, LONG_MAX, SECTIONS, BrokerConfig, Int, all_keys
from tests.cli_run import kt
from tests.test_cli_errors import one_error

# ------------------------------------------------------------------------------ intervals


@pytest.mark.parametrize("value", ["1e-300", "1e-9", "0.05", "0.099"])
def test_every_interval_option_has_a_floor(tmp_path: Path, value: str) -> None:
    one_error(kt("cluster", "start", "--dir", str(tmp_path / "c"), "--status-interval", value),
              "error: Invalid value for '--status-interval'")
    assert not (tmp_path / "c").exists()
    one_error(kt("cluster", "reassign", "--bootstrap-server", "127.0.0.1:1",
                 "--reassignment-json-file", __file__, "--verify", "--timeout", value),
              "error: Invalid value for '--timeout'")
    ms = f"{float(value) * 1000:f}ms"
    one_error(kt("reassign", "--config", __file__, "--reassignment-json-file", __file__,
                 "--execute", "--timeout", ms), "error: Invalid value for '--timeout'")


def test_the_floor_itself_is_accepted() -> None:
    assert MIN_SECONDS == 0.1
    assert Seconds().convert("0.1", None, None) == 0.1
    with pytest.raises(click.BadParameter, match=r"from 0\.1 to"):
        Seconds().convert("1e-300", None, None)


# ------------------------------------------------------------------------------ config ints


@pytest.mark.parametrize(("key", "value"), [
    ("broker.id", "99999999999999999999"), ("broker.id", str(INT_MAX + 1)),
    ("message.max.bytes", "99999999999999999999"), ("num.partitions", str(INT_MAX + 1)),
    ("socket.request.max.bytes", str(2**32)), ("log.segment.bytes", str(2**31)),
    ("log.retention.ms", str(LONG_MAX + 1)), ("log.retention.bytes", "1" + "0" * 30),
])
def test_integers_beyond_kafkas_int_and_long_are_refused(tmp_path: Path, key: str,
                                                         value: str) -> None:
    with pytest.raises(ConfigError, match=f"{key}: expected an integer from .* to "):
        BrokerConfig({key: value})
    props = tmp_path / "server.properties"
    props.write_text(f"{key}={value}\n")
    line = one_error(kt("config", "show", "--config", str(props)), "error: invalid value")
    assert key in line and value in line


def test_every_declared_integer_key_has_a_maximum() -> None:
    assert len(SECTIONS) >= 5
    ints = {k.name: k.type for k in all_keys().values() if isinstance(k.type, Int)}
    assert len(ints) > 30
    for name, kind in ints.items():
        assert kind.limit in (INT_MAX, LONG_MAX) or kind.max is not None, name
        with pytest.raises(ValueError):
            kind.parse(str(kind.limit + 1))
    assert BrokerConfig({"broker.id": str(INT_MAX)})["broker.id"] == INT_MAX
    assert BrokerConfig({"log.retention.ms": str(LONG_MAX)})["log.retention.ms"] == LONG_MAX


def test_message_max_bytes_above_socket_request_max_bytes_is_a_contradiction() -> None:
    with pytest.raises(ConfigError, match=r"message\.max\.bytes 2000000 exceeds "
                                          r"socket\.request\.max\.bytes 1048576"):
        BrokerConfig({"message.max.bytes": "2000000", "socket.request.max.bytes": "1048576"})
    with pytest.raises(ConfigError, match=r"exceeds socket\.request\.max\.bytes"):
        BrokerConfig({"message.max.bytes": str(INT_MAX)})
    BrokerConfig({"message.max.bytes": "1048576", "socket.request.max.bytes": "1048576"})


def test_cluster_start_says_which_per_broker_keys_it_ignores(tmp_path: Path) -> None:
    # --racks "," fails after the configuration was read: no cluster is started
    ran = kt("cluster", "start", "--dir", str(tmp_path / "c"), "--set", "broker.id=7",
             "--set", "port=1234", "--racks", ",")
    assert ran.code == 2
    warning, error = ran.err_lines
    assert warning.startswith("warning: broker.id=7, port=1234 ignored: cluster start gives "
                              "each broker its own id"), warning
    assert error.startswith("error: ")


# ------------------------------------------------------------------------------ --broker-ids


@pytest.fixture
def cluster_json(tmp_path: Path) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"brokers": [{"id": 1}, {"id": 2}, {"id": 3}]}))
    return str(path)


def test_broker_ids_given_twice_are_refused(cluster_json: str) -> None:
    line = one_error(kt("place", "--cluster", cluster_json, "--partitions", "3",
                        "--replication-factor", "1", "--broker-ids", "1,1,1"),
                     "error: Invalid value for '--broker-ids'")
    assert "broker 1 is given more than once" in line


def test_unknown_broker_ids_are_named(cluster_json: str) -> None:
    line = one_error(kt("place", "--cluster", cluster_json, "--partitions", "3",
                        "--replication-factor", "1", "--broker-ids", "7,2,9"),
                     "error: Invalid value for --broker-ids")
    assert "broker 7, 9 are not in the cluster" in line and "[1, 2, 3]" in line
    ran = kt("place", "--cluster", cluster_json, "--partitions", "3", "--replication-factor",
             "1", "--broker-ids", "2,3", "--format", "json")
    assert ran.code == 0 and {r for p in json.loads(ran.out)["partitions"]
                              for r in p["replicas"]} <= {2, 3}


# ------------------------------------------------------------------------------ output errors


class _FullDisk(io.StringIO):
    """A stdout whose buffered writes succeed and whose flush fails, as a full disk does."""

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_failed_flush_of_stdout_is_an_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdout", _FullDisk())
    monkeypatch.setattr("kafka_tiers.cli.boundary._quiet_broken_pipe", lambda: None)

    def command() -> int:
        sys.stdout.write("buffered output\n")
        return EXIT_OK

    assert run(command, lambda: False) == EXIT_ERROR

    def exits() -> int:
        sys.stdout.write("buffered output\n")
        raise SystemExit(0)

    assert run(exits, lambda: False) == EXIT_ERROR
    monkeypatch.undo()
    err = capsys.readouterr().err.splitlines()
    assert err == ["error: cannot write the output to stdout: No space left on device"] * 2


def test_a_failed_json_write_names_stdout(monkeypatch) -> None:
    class _Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sys, "stdout", _Full())
    with pytest.raises(OSError, match="cannot write the output to stdout"):
        emit_json({"a": 1})


@pytest.mark.skipif(not os.path.exists("/dev/full") or not Path("/dev/full").is_char_device(),
                    reason="needs the /dev/full device")
def test_place_into_dev_full_exits_2(cluster_json: str, tmp_path: Path) -> None:
    import subprocess

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "kafka_tiers", "place", "--cluster",
                               cluster_json, "--partitions", "3", "--replication-factor", "1",
                               "--format", "json"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: cannot write the output")


def test_log_dirs_plan_never_replaces_a_device_or_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}\n")
    line = one_error(kt("log-dirs", "plan", "--config", str(props), "--output", str(fifo)),
                     "error: cannot write --output")
    assert "not a regular file" in line
    assert fifo.is_fifo()
