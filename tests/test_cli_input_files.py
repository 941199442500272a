"""Rule: every input file the CLI reads (cluster.json, reassignment JSON, log-dirs plans,
``.properties`` config files) must be a regular file and is read with a size limit
(:mod:`kafka_tiers.log.input_file`): ``/dev/zero`` cannot eat memory, a fifo cannot hang the
command, an oversized file is refused after reading at most the limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_tiers.api.errors import ConfigError, InvalidClusterError
from kafka_tiers.config import read_properties
from kafka_tiers.log.input_file import (
    MAX_JSON_FILE_BYTES,
    MAX_PROPERTIES_FILE_BYTES,
    InputFileError,
    read_input_file,
)
from kafka_tiers.placement.cluster_file import read_cluster_file
from tests.cli_run import kt


def _commands(path: str, props: str, cluster: str) -> list[list[str]]:
    """Every command line reading ``path`` as its input file."""
    return [
        ["place", "--cluster", path, "--partitions", "3", "--replication-factor", "1"],
        ["config", "show", "--config", path],
        ["reassign", "--config", props, "--reassignment-json-file", path, "--verify"],
        ["cluster", "reassign", "--bootstrap-server", "127.0.0.1:1",
         "--reassignment-json-file", path, "--verify"],
        ["remote", "ls", "--storage", "local", "--config", path, "--topic", "t"],
    ]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'logs'}\n")
    cluster = tmp_path / "cluster.json"
    cluster.write_text('{"brokers": [{"id": 1, "address": "127.0.0.1:1"}]}')
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: costs no disk
        fh.truncate(MAX_JSON_FILE_BYTES + 1)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return {"props": str(props), "cluster": str(cluster), "big": str(big), "fifo": str(fifo)}


@pytest.mark.parametrize("path", ["/dev/zero", "big"])
def test_devices_and_oversized_files_are_one_error(files, path):
    path = files.get(path, path)
    for args in _commands(path, files["props"], files["cluster"]):
        ran = kt(*args)
        assert ran.code == 2, (args, ran)
        (line,) = ran.err_lines
        assert line.startswith("error: ") and path in line, (args, line)
        assert "regular file" in line or "larger than" in line, (args, line)


def test_a_fifo_is_refused_without_blocking(files):
    for args in _commands(files["fifo"], files["props"], files["cluster"]):
        ran = subprocess.run([sys.executable, "-m", "kafka_tiers", *args], capture_output=True,
                             text=True, timeout=30)
        assert ran.returncode == 2, (args, ran.stderr)
        assert "is a fifo, not a regular file" in ran.stderr, (args, ran.stderr)


def test_the_readers_refuse_and_bound(files, tmp_path: Path):
    with pytest.raises(InputFileError, match="larger than 10 bytes"):
        read_input_file(files["props"], 10, "config file")
    assert read_input_file(files["props"], 1000) == Path(files["props"]).read_bytes()
    with pytest.raises(InputFileError, match="a directory"):
        read_input_file(tmp_path, 1000)
    with pytest.raises(InvalidClusterError, match="a device, not a regular file"):
        read_cluster_file("/dev/zero")
    with pytest.raises(ConfigError, match="a fifo, not a regular file"):
        read_properties(files["fifo"])
    big = tmp_path / "big.properties"
    with open(big, "wb") as fh:
        fh.truncate(MAX_PROPERTIES_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match=f"larger than {MAX_PROPERTIES_FILE_BYTES} bytes"):
        read_properties(big)
