"""One config dialect: every command that takes storage settings reads a broker's
``server.properties`` (``remote.storage.manager.class`` + ``rsm.config.*``) as well as a file of
the plugin's own keys, through :func:`kafka_tiers.remote.storage_config.storage_settings`.

The Spark commands' test is in ``tests/spark/test_storage_dialects.py`` (it needs a session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafka_tiers.api import ConfigError
from kafka_tiers.cli import cli
from kafka_tiers.conformance.storage.harness import SegmentBuilder
from kafka_tiers.remote.storage_config import (
    BROKER_DIALECT,
    PLUGIN_DIALECT,
    is_broker_config,
    storage_settings,
)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


# -- the function ---------------------------------------------------------------------------


def test_plugin_keys_file(tmp_path: Path) -> None:
    f = write(tmp_path / "tier.properties", "dir=/data/tier\nfsync=false\n")
    s = storage_settings("local", f, {"fsync": "true"})
    assert (s.plugin, dict(s.config), s.dialect) == (
        "local", {"dir": "/data/tier", "fsync": "true"}, PLUGIN_DIALECT)


def test_server_properties_names_the_plugin_and_its_prefixed_keys(tmp_path: Path) -> None:
    f = write(tmp_path / "server.properties", "broker.id=3\nlog.dirs=/var/kafka\n"
              "remote.log.storage.enable=true\nremote.storage.manager.class=local\n"
              "rsm.config.dir=/data/tier\nrsm.config.=ignored\nplacer.seed=7\n")
    s = storage_settings(None, f)
    assert (s.plugin, dict(s.config), s.dialect) == ("local", {"dir": "/data/tier"},
                                                      BROKER_DIALECT)
    # the same plugin named on the command line is no conflict; overrides take both spellings
    s = storage_settings("local", f, {"rsm.config.dir": "/x", "extra": "1"})
    assert dict(s.config) == {"dir": "/x", "extra": "1"}


def test_kafka_alias_of_the_class_key(tmp_path: Path) -> None:
    f = write(tmp_path / "server.properties",
              "remote.log.storage.manager.class.name=pkg.mod:Storage\nrsm.config.a=1\n")
    assert storage_settings(None, f).plugin == "pkg.mod:Storage"
    f = write(tmp_path / "both.properties", "remote.log.storage.manager.class.name=s3\n"
              "remote.storage.manager.class=local\n")
    with pytest.raises(ConfigError, match="name different storage plugins"):
        storage_settings(None, f)


def test_storage_option_conflicting_with_the_file_is_one_clear_error(tmp_path: Path) -> None:
    f = write(tmp_path / "server.properties", "remote.storage.manager.class=local\n"
              "rsm.config.secret.key=hunter2\n")
    with pytest.raises(ConfigError) as err:
        storage_settings("s3", f)
    message = str(err.value)
    assert message == (f"--storage s3 and remote.storage.manager.class=local in {f} name "
                       f"different storage plugins; give one (or make them agree)")
    assert "hunter2" not in message


def test_no_plugin_named_anywhere(tmp_path: Path) -> None:
    f = write(tmp_path / "server.properties", "broker.id=1\nrsm.config.dir=/d\n")
    with pytest.raises(ConfigError, match=r"no storage plugin named: give --storage, or set "
                                          r"remote.storage.manager.class in "):
        storage_settings(None, f)
    assert storage_settings("local", f).config == {"dir": "/d"}  # the file names none: fine
    with pytest.raises(ConfigError, match="no storage plugin named"):
        storage_settings(None, None, {"dir": "/d"})


def test_which_files_are_a_brokers() -> None:
    assert is_broker_config({"log.dirs": "/x"})
    assert is_broker_config({"rsm.config.bucket": "b"})
    assert is_broker_config({"replica.placer.class.name": "simple"})  # an alias counts
    assert not is_broker_config({"bucket": "b", "endpoint.url": "http://x", "dir": "/d"})


# -- kafka-tiers remote ---------------------------------------------------------------------


@pytest.fixture
def tier(tmp_path: Path) -> dict[str, object]:
    """Two segments of topic t, partition 0, copied through the local backend."""
    from kafka_tiers.remote.guarded import GuardedRemoteStorage

    remote = tmp_path / "remote"
    builder = SegmentBuilder(tmp_path / "segments", "t")
    with GuardedRemoteStorage.load("local", {"dir": str(remote)}) as rsm:
        segments = [builder.make(0), builder.make(100)]
        for seg in segments:
            rsm.copy_log_segment_data(seg.metadata, seg.data)
    return {"remote": remote, "ids": [s.metadata.segment_id for s in segments]}


def remote_cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["remote", *args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.mark.parametrize("dialect", ["plugin keys", "server.properties"])
def test_remote_commands_read_both_dialects(dialect: str, tier: dict, tmp_path: Path) -> None:
    if dialect == "plugin keys":
        f = write(tmp_path / "tier.properties", f"dir={tier['remote']}\n")
        storage = ["--storage", "local"]
    else:
        f = write(tmp_path / "server.properties",
                  f"broker.id=0\nlog.dirs={tmp_path / 'logs'}\nremote.log.storage.enable=true\n"
                  f"remote.storage.manager.class=local\nrsm.config.dir={tier['remote']}\n")
        storage = []  # named by the file
    common = [*storage, "--config", f, "--topic", "t"]
    doc = json.loads(remote_cli("ls", *common, "--format", "json"))
    assert [s["segment_id"] for s in doc["segments"]] == tier["ids"]
    doc = json.loads(remote_cli("describe", *common, "--segment", tier["ids"][1],
                                "--format", "json"))
    assert doc["segment"]["start_offset"] == 100


def run_main(argv: list[str]) -> int:
    """The CLI in-process as the console script runs it (errors become one stderr line)."""
    from kafka_tiers.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return int(code or 0)


def test_remote_refuses_a_conflicting_storage(tier: dict, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path / "server.properties", "remote.storage.manager.class=local\n"
              f"rsm.config.dir={tier['remote']}\n")
    assert run_main(["remote", "ls", "--storage", "s3", "--config", f, "--topic", "t"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --storage s3 and remote.storage.manager.class=local in {f} name different "
        f"storage plugins; give one (or make them agree)"]
    assert run_main(["remote", "ls", "--set", f"dir={tier['remote']}", "--topic", "t"]) == 2
    assert "no storage plugin named: give --storage" in capsys.readouterr().err


# -- kafka-tiers conformance storage --------------------------------------------------------


@pytest.mark.parametrize("dialect", ["plugin keys", "server.properties"])
def test_conformance_storage_reads_both_dialects(dialect: str, tmp_path: Path) -> None:
    if dialect == "plugin keys":
        props = write(tmp_path / "local.properties", "dir={tmp}\n")
        name = ["local"]
    else:
        props = write(tmp_path / "server.properties",
                      "broker.id=0\nremote.storage.manager.class=local\nrsm.config.dir={tmp}\n")
        name = []  # named by the file; the pytest arguments follow directly
    result = CliRunner().invoke(cli, ["conformance", "storage", *name, "--config", props,
                                      "--", "-q", "-p", "no:cacheprovider", "-k", "ranges",
                                      "--rootdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "result: PASS" in result.output and "passed" in result.output


def test_conformance_storage_refuses_a_conflicting_name(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    props = write(tmp_path / "server.properties", "remote.storage.manager.class=local\n")
    assert run_main(["conformance", "storage", "s3", "--config", props]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: NAME_OR_PATH s3 and remote.storage.manager.class=local in {props} name "
        f"different storage plugins; give one (or make them agree)")


def test_storage_suite_option_reads_a_server_properties(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    props = write(tmp_path / "server.properties",
                  "log.dirs=/nowhere\nremote.storage.manager.class=local\nrsm.config.dir={tmp}\n")
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "--kt-storage", "local", "--kt-storage-config", props, "-k", "ranges"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "result: PASS" in out
