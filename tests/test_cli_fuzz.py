"""Every ``kafka-tiers`` command fed garbage (hypothesis): never a traceback, exit status 0 or 2,
and a failure is exactly one ``error:`` line.

Arguments are drawn from each click command's own parameters: random text, text that is not
UTF-8 (as Python hands undecodable argv bytes over: surrogate-escaped), huge and negative
numbers, NaN and infinities, the values of a Choice, and for paths missing files, directories,
empty and binary files, wrong-typed and deeply nested JSON; ``$KAFKA_TIERS_BOOTSTRAP`` is
garbage too at times. The runs are in-process through the
real entry point (:func:`kafka_tiers.cli.main`) in a scratch directory; the network is cut off
(every connection is refused at once, cluster clients give up after 0.3 s) and each run has a
time limit, so nothing can hang.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_tiers.cli import cli
from kafka_tiers.cluster.client import ClusterClient
from tests.cli_run import kt

#: commands that run in the foreground until stopped: not fed at random (they would serve);
#: their bad input is tested on its own in tests/test_cli_errors.py (intervals, ports in use,
#: a missing kazoo) and tests/cluster/test_cli_cluster.py.
LONG_RUNNING = {
    ("broker", "start"): "serves until SIGTERM",
    ("cluster", "start"): "serves until Ctrl-C",
    ("quickstart",): "runs a broker and a 3-broker cluster for seconds (tests/test_cli_place.py)",
}
EXAMPLES_PER_COMMAND = 12
SECONDS_PER_RUN = 20.0


def leaf_commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(cli)

    def walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[Any]:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, (*path, name))
        else:
            yield path, cmd

    yield from walk(cli, ())


COMMANDS = [(path, cmd) for path, cmd in leaf_commands() if path not in LONG_RUNNING]

DEEP = "[" * 50_000 + "]" * 50_000

# --------------------------------------------------------------------------- the garbage

_no_nul = st.characters(blacklist_characters="\x00")  # a real argv cannot hold NUL
TEXT = st.one_of(
    st.text(_no_nul, max_size=24),
    st.binary(max_size=16).filter(lambda b: b"\x00" not in b).map(os.fsdecode),  # not UTF-8
    st.sampled_from(["", " ", "-", "--", "=", "k=v", "=v", "a,b", ",", "nohost:notaport",
                     "127.0.0.1:1", "../etc", "..", "null", "{}", "[[[[", "NaN", "-1",
                     "9" * 40, "local", "any"]),
    st.integers().map(str),
)
NUMBER = st.one_of(st.integers().map(str), st.sampled_from(["0", "-1", str(2**31), str(2**63),
                                                            "1e400"]), TEXT)
FLOAT = st.one_of(st.floats().map(str), st.sampled_from(["0", "-0.0", "nan", "inf", "-inf"]),
                  TEXT)


def _relative(text: str) -> str:
    """A drawn path kept inside the scratch directory (we run as root in CI containers)."""
    parts = [p for p in text.split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or "x"


FILES = ["missing/x.json", "deep.json", "garbage.bin", "empty", "wrong-types.json",
         "server.properties", "adir", "adir/", "reassign.json", "cluster.json"]


def path_values(scratch: Path) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from([str(scratch / n) for n in FILES]), TEXT.map(_relative))


def make_files(scratch: Path) -> None:
    (scratch / "deep.json").write_text(DEEP)
    (scratch / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    (scratch / "empty").write_bytes(b"")
    (scratch / "wrong-types.json").write_text(
        '{"brokers": [{"id": "x", "rack": 5}], "partitions": 7, "version": "one", '
        '"assignments": {"partitions": [{"topic": 1}]}}')
    (scratch / "server.properties").write_bytes(
        b"broker.id=minus one\nlog.dirs=\n\xff\xfe=\xfa\nport=99999999\nnum.partitions=-3\n"
        b"rsm.config.dir=\nremote.storage.manager.class=no.such:Thing\n")
    (scratch / "reassign.json").write_text(
        '{"version": 1, "partitions": [{"topic": "../x", "partition": -1, "replicas": [],'
        ' "log_dirs": ["relative"]}]}')
    (scratch / "cluster.json").write_text('{"brokers": [{"id": 1}, {"id": 2}]}')
    (scratch / "adir").mkdir()


def _mostly(good: st.SearchStrategy[str], bad: st.SearchStrategy[str]
            ) -> st.SearchStrategy[str]:
    """``good`` seven times in ten, else ``bad``: with garbage in every option the first one
    would stop each run at parsing; mostly plausible values let the garbage reach deeper."""
    return st.integers(0, 9).flatmap(lambda n: good if n < 7 else bad)


def plausible_text(param: click.Parameter, path: tuple[str, ...]) -> list[str]:
    """Values of the right shape for a text parameter (never a plugin that would run a
    conformance suite or a Spark job: those are other tests' business)."""
    values = ["t", "x", "k=v", "dir=adir", "dir=missing/x", "1,2", "127.0.0.1:1"]
    if param.name == "storage" and path[0] == "remote":
        values.append("local")
    return values


def value_strategy(param: click.Parameter, scratch: Path, path: tuple[str, ...]
                   ) -> st.SearchStrategy[str]:
    kind = param.type
    if isinstance(kind, click.Path):
        files = st.sampled_from([str(scratch / n) for n in FILES])
        return _mostly(files, path_values(scratch))
    if isinstance(kind, click.Choice):
        return _mostly(st.sampled_from([str(c) for c in kind.choices]), TEXT)
    if isinstance(kind, click.types.IntParamType | click.IntRange):
        return _mostly(st.integers(0, 4).map(str), NUMBER)
    if isinstance(kind, click.types.FloatParamType) or kind.name == "seconds":
        return _mostly(st.sampled_from(["0.1", "1"]), FLOAT)
    return _mostly(st.sampled_from(plausible_text(param, path)), TEXT)


@st.composite
def command_lines(draw: st.DrawFn, cmd: click.Command, scratch: Path,
                  path: tuple[str, ...]) -> list[str]:
    """Arguments for ``cmd``: each option given or not (required ones mostly given),
    repeatable ones up to three times, then the positional arguments."""
    options: list[str] = []
    positional: list[str] = []
    for param in cmd.params:
        if isinstance(param, click.Option):
            if param.name == "help":
                continue
            if not draw(st.booleans()) and not (param.required and draw(st.integers(0, 9)) > 0):
                continue
            names = [*param.opts, *param.secondary_opts]
            if param.is_flag and not param.count:
                options.append(draw(st.sampled_from(names)))
                continue
            times = draw(st.integers(1, 3)) if param.multiple else 1
            for _ in range(times):
                options += [draw(st.sampled_from(names)),
                            draw(value_strategy(param, scratch, path))]
        elif isinstance(param, click.Argument):
            if param.nargs == 1:
                if param.required or draw(st.booleans()):
                    positional.append(draw(value_strategy(param, scratch, path)))
            else:
                low = 1 if param.required else 0
                positional += draw(st.lists(value_strategy(param, scratch, path), min_size=low,
                                            max_size=3))
    return options + positional


class _Hung(BaseException):
    """A run over its time limit (a BaseException, so the CLI boundary does not report it)."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Hung


def _refused(*_args: Any, **_kwargs: Any) -> Any:
    raise ConnectionRefusedError(111, "Connection refused (network cut off by the fuzz test)")


def _no_dns(*_args: Any, **_kwargs: Any) -> Any:
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (cut off)")


_client_init = ClusterClient.__init__


def _impatient_client(self: ClusterClient, bootstrap: Any, **kwargs: Any) -> None:
    """A cluster client that gives up after 0.3 s instead of retrying for 15 s (the
    network is cut off; waiting longer would only make the test slow)."""
    kwargs["timeout"] = min(kwargs.get("timeout", 30.0), 0.3)
    _client_init(self, bootstrap, **kwargs)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli-fuzz")
    make_files(root)
    return root


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_garbage_never_ends_in_a_traceback(path: tuple[str, ...], cmd: click.Command,
                                           scratch: Path) -> None:
    @settings(max_examples=EXAMPLES_PER_COMMAND, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(args=command_lines(cmd, scratch, path),
           bootstrap=st.one_of(st.none(), st.none(), TEXT))  # $KAFKA_TIERS_BOOTSTRAP
    def check(args: list[str], bootstrap: str | None) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(scratch)
            mp.setattr(socket, "create_connection", _refused)
            mp.setattr(socket, "getaddrinfo", _no_dns)
            mp.setattr(ClusterClient, "__init__", _impatient_client)
            previous = signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_RUN)
            try:
                ran = kt(*path, *args, env={"KAFKA_TIERS_BOOTSTRAP": bootstrap,
                                            "KAFKA_TIERS_DEBUG": None})
            except _Hung:
                pytest.fail(f"kafka-tiers {' '.join(path)} {args!r} ran over "
                            f"{SECONDS_PER_RUN:g}s")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        shown = (f"KAFKA_TIERS_BOOTSTRAP={bootstrap!r} kafka-tiers {' '.join(path)} {args!r} -> "
                 f"{ran.code}\n{ran.err[-2000:]}")
        assert "Traceback" not in ran.err + ran.out, shown
        assert not any(line.startswith("internal error") for line in ran.err_lines), shown
        assert ran.code in (0, 2), shown
        if ran.code == 2:
            errors = [line for line in ran.err_lines if line.startswith("error: ")]
            assert len(errors) == 1, shown

    check()


def test_every_command_is_fed_or_skipped_with_a_reason() -> None:
    fed = {path for path, _ in COMMANDS}
    every = {path for path, _ in leaf_commands()}
    assert every == fed | set(LONG_RUNNING) and not fed & set(LONG_RUNNING)
    assert ("topics", "produce") in fed and ("remote", "ls") in fed and ("place",) in fed
