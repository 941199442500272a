"""The CLI's error boundary and the inputs that used to end in a traceback.

Rules: an expected error is one ``error:`` line with exit status 2; a bug is one ``internal
error:`` line with exit status 3; a traceback only with ``--debug`` (or KAFKA_TIERS_DEBUG=1);
Ctrl-C is 130; no secret in any of it. Read-only commands create nothing; intervals and
timeouts are positive; a cluster.json's assignments name only its brokers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from kafka_tiers import cli as cli_package
from kafka_tiers.api import KafkaTiersError, Secret
from tests.cli_run import Ran, kt

ROOT = Path(__file__).resolve().parents[1]
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than Python's JSON parser recurses


def one_error(ran: Ran, start: str) -> str:
    """The run failed with exit 2 and exactly one stderr line, an ``error:`` starting so."""
    assert ran.code == 2, (ran.code, ran.err)
    assert "Traceback" not in ran.err + ran.out
    assert len(ran.err_lines) == 1 and ran.err_lines[0].startswith(start), ran.err
    return ran.err_lines[0]


# ------------------------------------------------------------------------------ the boundary

@click.command()
@click.option("--what", default="expected")
def boom(what: str) -> None:
    """A command failing in the ways the boundary tells apart."""
    secret = Secret("s3cr3t-t0ken")
    if what == "expected":
        raise KafkaTiersError(f"bad thing with {secret.reveal()}\nsecond line \udcff")
    if what == "bug":
        raise RuntimeError(f"kaboom {secret.reveal()}")
    if what == "interrupt":
        raise KeyboardInterrupt
    if what == "negative":
        raise SystemExit(1)
    if what == "oserror":
        raise PermissionError(13, "Permission denied", "/root/x")
    if what == "socket":
        raise BrokenPipeError(32, "Broken pipe")  # a broker's socket, not stdout


@pytest.fixture
def with_boom(monkeypatch: pytest.MonkeyPatch) -> None:
    module = sys.modules[__name__]
    monkeypatch.setattr(cli_package.LazyGroup, "get_command",
                        lambda self, ctx, name: module.boom if name == "boom" else None)


def test_an_expected_error_is_one_line_exit_2_without_secrets(with_boom: None) -> None:
    line = one_error(kt("boom"), "error: bad thing with <hidden>")
    assert line == "error: bad thing with <hidden>\\nsecond line \\xff"
    assert "s3cr3t" not in line
    assert one_error(kt("boom", "--what", "oserror"), "error:") == (
        "error: /root/x: Permission denied")
    assert one_error(kt("boom", "--what", "socket"), "error:") == "error: Broken pipe"


def test_a_bug_is_one_internal_error_line_exit_3(with_boom: None) -> None:
    ran = kt("boom", "--what", "bug")
    assert ran.code == 3 and "Traceback" not in ran.err
    assert ran.err_lines == ["internal error: RuntimeError: kaboom <hidden>; run with --debug "
                             "for the traceback"]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_prints_the_whole_traceback_with_secrets_hidden(with_boom: None, how: str) -> None:
    args = ("--debug", "boom", "--what", "bug") if how == "flag" else ("boom", "--what", "bug")
    ran = kt(*args, env={"KAFKA_TIERS_DEBUG": "1"} if how == "env" else None)
    assert ran.code == 3
    assert ran.err.startswith("Traceback (most recent call last):")
    assert 'raise RuntimeError(f"kaboom {secret.reveal()}")' in ran.err  # the whole traceback
    assert "s3cr3t" not in ran.err
    assert ran.err_lines[-1] == "internal error: RuntimeError: kaboom <hidden>"
    ran = kt("--debug", "boom")
    assert ran.code == 2 and "Traceback" in ran.err and "s3cr3t" not in ran.err
    assert ran.err_lines[-1].startswith("error: bad thing with <hidden>")


def test_interrupt_negative_answer_and_usage(with_boom: None) -> None:
    ran = kt("boom", "--what", "interrupt")
    assert ran.code == 130 and "Traceback" not in ran.err and "error" not in ran.err
    assert kt("boom", "--what", "negative").code == 1
    line = one_error(kt("boom", "--nope"), "error: No such option '--nope'")
    assert line.endswith("(see 'kafka-tiers boom --help')")
    one_error(kt("no-such-command"), "error: No such command")
    assert kt("--help").code == 0 and kt("--version").code == 0


@pytest.mark.parametrize("group", [(), ("remote",)])
def test_a_group_without_its_subcommand_shows_its_help(group: tuple[str, ...]) -> None:
    ran = kt(*group)
    assert ran.code == 2 and ran.err.startswith("Usage: kafka-tiers") and "\\n" not in ran.err
    assert "Commands:" in ran.err and "error:" not in ran.err


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_reader_that_goes_away_is_not_an_error(fmt: str) -> None:
    """``kafka-tiers ... | head -1``: exit 0, nothing on stderr (rich would exit 1)."""
    sample = ROOT / "kafka_tiers" / "samples" / "multi-level-cluster.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_tiers", "place", "--cluster", str(sample), "--partitions",
         "3000", "--replication-factor", "3", "--max-rows", "3000", "--format", fmt],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == ""


# ------------------------------------------------------------- the inputs of the issue, fixed

@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    logs = tmp_path / "logs"
    logs.mkdir()
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=1\nlog.dirs={logs}\n")
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"brokers": [{"id": 1}, {"id": 2}, {"id": 3}]}))
    return {"deep": deep, "props": props, "cluster": cluster, "dir": tmp_path}


def test_deeply_nested_json(files: dict[str, Path]) -> None:
    deep = files["deep"]
    one_error(kt("place", "--cluster", str(deep), "--partitions", "1",
                 "--replication-factor", "1"), f"error: {deep}: not usable JSON: nested too deeply")
    for extra in (("--config", str(files["props"])), ("--bootstrap-server", "127.0.0.1:1")):
        one_error(kt("reassign", *extra, "--reassignment-json-file", str(deep), "--verify"),
                  f"error: {deep} is not usable JSON: nested too deeply")
    one_error(kt("cluster", "reassign", "--bootstrap-server", "127.0.0.1:1",
                 "--reassignment-json-file", str(deep), "--verify"),
              f"error: {deep} is not usable JSON: nested too deeply")


def test_plan_output_in_a_missing_directory(files: dict[str, Path]) -> None:
    one_error(kt("log-dirs", "plan", "--config", str(files["props"]), "--output",
                 "/nonexistent/x"),
              "error: cannot write --output /nonexistent/x: No such file or directory")
    assert not Path("/nonexistent").exists()


@pytest.mark.parametrize("command", [
    ("cluster", "describe"), ("topics", "describe"), ("topics", "create", "t"),
    ("topics", "produce", "t", "v"), ("cluster", "elect-leaders")])
def test_bad_bootstrap_addresses(command: tuple[str, ...]) -> None:
    one_error(kt(*command, "--bootstrap-server", "nohost:notaport"),
              "error: --bootstrap-server: 'nohost:notaport' is not host:port (a port from 1")
    one_error(kt(*command, env={"KAFKA_TIERS_BOOTSTRAP": "garbage"}),
              "error: $KAFKA_TIERS_BOOTSTRAP: 'garbage' is not host:port")
    one_error(kt(*command, "--bootstrap-server", "h:70000"), "error: --bootstrap-server: 'h:70000'")


def test_bad_bootstrap_of_reassign(files: dict[str, Path]) -> None:
    one_error(kt("reassign", "--bootstrap-server", "nohost:notaport",
                 "--reassignment-json-file", str(files["deep"]), "--execute"),
              "error: --bootstrap-server: 'nohost:notaport' is not host:port")


def test_bad_broker_ids(files: dict[str, Path]) -> None:
    for args in (("topics", "create", "t", "--bootstrap-server", "127.0.0.1:1"),
                 ("place", "--cluster", str(files["cluster"]), "--partitions", "1",
                  "--replication-factor", "1")):
        for ids in ("abc", "1,-2", "99999999999", ","):
            line = one_error(kt(*args, "--broker-ids", ids),
                             "error: Invalid value for '--broker-ids'")
            assert "broker id" in line


@pytest.mark.parametrize(("doc", "fragment"), [
    ('{"brokers": [{"id": 1, "address": "h:p"}]}', 'brokers[0].address: expected "host:port"'),
    ('{"brokers": [{"id": "1"}]}', "brokers[0].id: expected an integer"),
    ('{"brokers": [', "not valid JSON"),
    (DEEP, "not usable JSON: nested too deeply"),
])
def test_a_corrupt_cluster_json_of_a_cluster_dir(tmp_path: Path, doc: str, fragment: str) -> None:
    (tmp_path / "cluster.json").write_text(doc)
    line = one_error(kt("cluster", "describe", "--dir", str(tmp_path)), "error: ")
    assert fragment in line and str(tmp_path / "cluster.json") in line


def test_place_refuses_assignments_of_unknown_brokers_and_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    base: dict[str, Any] = {"brokers": [{"id": 1}, {"id": 2}]}
    args = ("place", "--cluster", str(f), "--partitions", "1", "--replication-factor", "1")
    f.write_text(json.dumps({**base, "assignments": [
        {"topic": "orders", "partition": 4, "replicas": [1, 9]}]}))
    one_error(kt(*args), f"error: {f}: assignments[0]: partition 4 of topic 'orders' names "
                         "broker 9, which is not among the brokers [1, 2]")
    f.write_text(json.dumps({**base, "assignments": [
        {"topic": "orders", "partition": 2, "replicas": [2, 2]}]}))
    one_error(kt(*args), f"error: {f}: assignments[0].replicas: broker 2 is listed twice in "
                         "partition 2 of topic 'orders'")


def test_non_utf8_arguments_of_topics_produce(tmp_path: Path) -> None:
    from kafka_tiers.cluster.local_cluster import LocalCluster

    raw = os.fsdecode(b"caf\xe9 \xff")  # what Python makes of bytes that are not UTF-8
    one_error(kt("topics", "produce", raw, "v", "--bootstrap-server", "127.0.0.1:1"),
              "error: Invalid value for 'NAME': topic name 'caf")
    c = LocalCluster(tmp_path / "c", 1, transport="tcp",
                     overrides={"listeners": "PLAINTEXT://127.0.0.1:0"}).start()
    try:
        boot = c.bootstrap_servers  # Kafka listeners: the Kafka protocol
        assert kt("topics", "create", "t", "--partitions", "1", "--replication-factor", "1",
                  "--bootstrap-server", boot).code == 0
        ran = kt("topics", "produce", "t", raw, "plain", "--bootstrap-server", boot)
        assert ran.code == 0, ran.err
        with c.client() as client:
            records, _ = client.fetch("t", 0, 0)
        assert [r.value for r in records] == [b"caf\xe9 \xff", b"plain"]  # the bytes given
    finally:
        c.close()


def test_undecodable_arguments_are_echoed_as_their_bytes(files: dict[str, Path]) -> None:
    raw = os.fsdecode(b"/data/d\xe4")  # a log dir named in Latin-1
    ran = kt("log-dirs", "describe", "--config", str(files["props"]), "--log-dirs", raw)
    assert ran.code == 0 and "Traceback" not in ran.err and not ran.err_lines, ran.err


def _subprocess(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_zookeeper_without_kazoo_is_an_install_hint(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=1\nlog.dirs={tmp_path / 'logs'}\nport=0\n"
                     "metadata.store=zookeeper\nzookeeper.connect=127.0.0.1:1\n")
    done = _subprocess("import sys; sys.modules['kazoo'] = None\n"
                       "from kafka_tiers.cli import main; main(sys.argv[1:])",
                       "broker", "start", "--config", str(props))
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["error: metadata.store=zookeeper needs the kazoo package, which is not "
                     "installed: pip install kazoo (or use metadata.store=embedded)"]


def test_conformance_without_pytest_is_an_install_hint_and_pytest_is_a_dependency() -> None:
    import importlib.metadata

    requires = importlib.metadata.requires("kafka-tiers") or []
    assert any(r.startswith("pytest") and "extra ==" not in r for r in requires), requires
    done = _subprocess("import sys; sys.modules['pytest'] = None\n"
                       "from kafka_tiers.cli import main; main(sys.argv[1:])",
                       "conformance", "placer", "rack-aware")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: the conformance suites run on pytest")
    assert done.stderr.strip().endswith("pip install 'pytest>=8'")
    assert done.stderr.count("\n") == 1


def test_cluster_start_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "kafka_tiers", "cluster", "start", "--brokers", "1",
             "--dir", str(tmp_path / "c"), "--base-port", str(port)],
            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    # --base-port is the first broker's Kafka listener
    assert lines == [f"error: listener PLAINTEXT cannot bind 127.0.0.1:{port}: Address already "
                     "in use"]


@pytest.mark.parametrize(("args", "start"), [
    (("cluster", "start", "--racks", "/r1,,/r2"), "error: Invalid value for --racks: expected "
     "comma-separated non-empty racks, got '/r1,,/r2'"),
    (("cluster", "start", "--config", "/nonexistent"), "error: cannot read config file"),
    (("cluster", "start", "--set", "garbage"), "error: --set takes key=value, got 'garbage'"),
    (("cluster", "start", "--placer", "nope"), "error: unknown replica placer 'nope'"),
    (("cluster", "start", "--set", "num.partitions=-1"), "error: invalid value '-1' for num"),
    (("broker", "start", "--config", "/nonexistent"), "error: cannot read config file"),
    (("broker", "start", "--override", "x"), "error: --override takes key=value, got 'x'"),
    (("broker", "start", "--override", "port=99999"), "error: invalid value '99999' for port"),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else None)
def test_bad_input_of_the_long_running_commands(tmp_path: Path, args: tuple[str, ...],
                                                start: str) -> None:
    """broker start and cluster start serve until stopped, so the fuzz test leaves them out:
    their bad input is here, each ending before anything serves."""
    props = tmp_path / "server.properties"
    props.write_text(f"broker.id=1\nlog.dirs={tmp_path / 'logs'}\nport=0\n")
    extra = (["--dir", str(tmp_path / "c"), "--base-port", "0"] if args[0] == "cluster" else
             [] if "--config" in args else ["--config", str(props)])
    done = subprocess.run([sys.executable, "-m", "kafka_tiers", *args, *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(start), done.stderr


# ------------------------------------------------------------------------------ silent acceptance

@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9", "soon"])
def test_intervals_and_timeouts_must_be_positive(tmp_path: Path, value: str) -> None:
    one_error(kt("cluster", "start", "--dir", str(tmp_path / "c"), "--status-interval", value),
              "error: Invalid value for '--status-interval'")
    assert not (tmp_path / "c").exists()
    one_error(kt("cluster", "reassign", "--bootstrap-server", "127.0.0.1:1",
                 "--reassignment-json-file", __file__, "--verify", "--timeout", value),
              "error: Invalid value for '--timeout'")
    if value not in ("nan", "inf", "1e9"):  # not durations at all: refused by their syntax
        one_error(kt("reassign", "--bootstrap-server", "127.0.0.1:1",
                     "--reassignment-json-file", __file__, "--verify", "--timeout", value),
                  "error: Invalid value for '--timeout'")


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_read_only_commands_create_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tier").mkdir()
    (tmp_path / "server.properties").write_text(
        f"broker.id=1\nlog.dirs={tmp_path}/missing/a,{tmp_path}/missing/b\n"
        f"remote.storage.manager.class=local\nrsm.config.dir={tmp_path}/missing/tier\n")
    (tmp_path / "c.json").write_text(json.dumps({"brokers": [{"id": 1}]}))
    (tmp_path / "r.json").write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1]}]}))
    before = _tree(tmp_path)
    remote_missing = ("--storage", "local", "--set", "dir=typo/x", "--topic", "t")
    for args in [
        ("remote", "ls", *remote_missing),
        ("remote", "describe", *remote_missing, "--segment", "s"),
        ("remote", "cat", *remote_missing, "--segment", "s"),
        ("remote", "verify", *remote_missing),
        ("remote", "ls", "--config", "server.properties", "--topic", "t"),
    ]:
        line = one_error(kt(*args), "error: ")
        assert "no such directory" in line, line
    for args in [
        ("remote", "ls", "--storage", "local", "--set", "dir=tier", "--topic", "t"),
        ("remote", "verify", "--storage", "local", "--set", "dir=tier", "--topic", "t"),
        ("log-dirs", "describe", "--config", "server.properties"),
        ("log-dirs", "plan", "--config", "server.properties"),
        ("config", "show", "--config", "server.properties"),
        ("place", "--cluster", "c.json", "--partitions", "2", "--replication-factor", "1"),
        ("reassign", "--config", "server.properties", "--reassignment-json-file", "r.json",
         "--verify"),
        ("dump-log", "missing/00000000000000000000.log"),
        ("plugins", "list"),
    ]:
        ran = kt(*args)
        assert ran.code in (0, 1, 2) and "Traceback" not in ran.err, (args, ran.err)
    assert _tree(tmp_path) == before  # not even the local store's temporary-file directory


def test_the_local_store_opened_without_create(tmp_path: Path) -> None:
    from kafka_tiers.api import ConfigError
    from kafka_tiers.remote.local import TMP_DIR, LocalObjectStore

    with pytest.raises(ConfigError, match="no such directory"):
        LocalObjectStore.from_config({"dir": str(tmp_path / "a" / "b"), "dir.create": "false"})
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match=r"dir\.create must be true or false"):
        LocalObjectStore.from_config({"dir": str(tmp_path), "dir.create": "maybe"})
    store = LocalObjectStore.from_config({"dir": str(tmp_path), "dir.create": "false"})
    assert list(store.list("")) == [] and store.collect_temp_files(0) == []
    assert list(tmp_path.iterdir()) == []
    import io

    store.put("k/v", io.BytesIO(b"x"))  # the first write makes what it needs
    assert sorted(p.name for p in tmp_path.iterdir()) == [TMP_DIR, "k"]
    LocalObjectStore(tmp_path / "new")  # the default still creates the root
    assert (tmp_path / "new" / TMP_DIR).is_dir()
