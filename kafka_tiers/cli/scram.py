"""``kafka-tiers scram add|delete|list``: the SCRAM users of a broker or cluster (what
Kafka's ``kafka-configs --alter --add-config 'SCRAM-SHA-512=[...]' --entity-type users``
does).

Two ways to reach the credentials:

- ``--bootstrap-server HOST:PORT`` (or ``$KAFKA_TIERS_BOOTSTRAP``): the Kafka protocol,
  AlterUserScramCredentials and DescribeUserScramCredentials (the broker checks ALTER /
  DESCRIBE on the cluster); ``--command-config FILE`` gives the client's security settings
  (Kafka's client properties, :mod:`kafka_tiers.cli.command_config`). The password is
  salted and iterated here; only the salted password travels.
- ``--dir DIR``: the security state written directly, for the first admin user before anyone
  can log in: a stopped cluster's directory (``kafka-tiers cluster start --dir``), or a
  standalone broker's first log dir; ``--config server.properties``: the metadata store of
  that broker; ``--zookeeper-connect``: a cluster's ZooKeeper. Only for the user owning those
  files.

A password is never a plain argument (it would land in the shell history and in ``ps``):
``--password-file FILE`` (its first line), ``--password-stdin`` (one line), or, on a
terminal, a prompt asked twice. It is held as a :class:`~kafka_tiers.api.Secret`: no error
line shows it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from kafka_tiers.cli.output import FORMAT_OPTION
from kafka_tiers.cli.security_store_options import SecurityTarget, security_store_options

MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: the longest password file read (a password is a line, not a file)
MAX_PASSWORD_BYTES = 4096

def _where_options(fn: Any) -> Any:
    fn = click.option("--timeout", type=click.FloatRange(0.1, 600), default=15.0,
                      show_default=True, help="Seconds to wait for the cluster.")(fn)
    return security_store_options(fn)


_MECHANISM = click.Choice(MECHANISM_NAMES, case_sensitive=False)


@click.group()
def scram() -> None:
    """Add, delete and list SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512).

    \b
    Examples:
      kafka-tiers scram add admin --dir kafka-tiers-cluster --password-file pw.txt
      kafka-tiers scram add alice --bootstrap-server 127.0.0.1:9092 --password-stdin < pw
      kafka-tiers scram delete alice --mechanism SCRAM-SHA-512 --bootstrap-server ...
      kafka-tiers scram list --bootstrap-server 127.0.0.1:9092 --format json
    """


def read_password(password_file: str | None, password_stdin: bool) -> Any:
    """The password as a :class:`~kafka_tiers.api.Secret`: the first line of
    ``password_file``, one line of stdin, or asked twice on a terminal.

    Raises:
        click.UsageError: both sources, none on a non-terminal, an empty password, or the
            two prompts differ.
    """
    from kafka_tiers.api import Secret

    if password_file and password_stdin:
        raise click.UsageError("give --password-file or --password-stdin, not both")
    if password_file:
        from kafka_tiers.log.input_file import read_input_file

        raw = read_input_file(password_file, MAX_PASSWORD_BYTES, "password file")
        try:
            text = raw.decode("utf-8").split("\n", 1)[0].rstrip("\r")
        except UnicodeDecodeError:  # the message would show the password's bytes
            raise click.UsageError(f"password file {password_file} is not UTF-8") from None
    elif password_stdin:
        text = sys.stdin.readline(MAX_PASSWORD_BYTES).rstrip("\r\n")
    elif sys.stdin.isatty():
        text = click.prompt("Password", hide_input=True, confirmation_prompt=True,
                            err=True)
    else:
        raise click.UsageError("no password: give --password-file FILE or --password-stdin "
                               "(a password is never an argument), or run on a terminal to be "
                               "asked")
    if not text:
        raise click.UsageError("the password is empty")
    return Secret(text)


class Where(SecurityTarget):
    """Where a command finds the credentials: the Kafka protocol (``bootstrap``), or directly
    a directory, a broker's config file or a ZooKeeper (:class:`SecurityTarget`)."""

    @contextmanager
    def credentials(self) -> Iterator[Any]:
        """The :class:`~kafka_tiers.kafka.security.scram_credentials.ScramCredentials` of
        the store (direct ways only)."""
        from kafka_tiers.kafka.security.scram_credentials import ScramCredentials

        with self.open_store() as store:
            yield ScramCredentials(store)


def _user(user: str | None, user_option: str | None) -> str:
    if user and user_option and user != user_option:
        raise click.UsageError(f"USER {user!r} and --user {user_option!r} differ: give one")
    name = user or user_option
    if not name:
        raise click.UsageError("give the user name (USER or --user)")
    return name


def _admin(at: Where) -> Any:
    from kafka_tiers.cli.kafka_admin import KafkaAdmin

    return KafkaAdmin(at.bootstrap_servers(), timeout=at.timeout,
                      settings=at.client_settings())


def _alter(at: Where, alteration: Any, user: str, what: str) -> None:
    from kafka_tiers.cli.kafka_admin import KafkaAdminError, _errors

    with _admin(at) as admin, _errors(what):
        result = admin.admin.alter_user_scram_credentials([alteration])
    problem = result.get(user)
    if problem:
        raise KafkaAdminError(f"{what}: {problem}")


@scram.command("add")
@click.argument("user", required=False)
@click.option("--user", "user_option", metavar="USER", help="The user (instead of USER).")
@click.option("--mechanism", type=_MECHANISM, default="SCRAM-SHA-512", show_default=True)
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096,
              show_default=True, help="PBKDF2 iterations (Kafka's bounds).")
@click.option("--password-file", type=click.Path(dir_okay=False),
              help="Read the password from the first line of this file.")
@click.option("--password-stdin", is_flag=True, help="Read the password from one stdin line.")
@_where_options
def add(user: str | None, user_option: str | None, mechanism: str, iterations: int,
        password_file: str | None, password_stdin: bool, **where: Any) -> None:
    """Add USER's credential for a mechanism, or replace it (a new password).

    The password is salted (a random salt) and iterated here; the broker keeps only the keys
    derived from it, never the password.
    """
    from kafka_tiers.kafka.security.scram_credentials import SALT_BYTES, salted_password

    name = _user(user, user_option)
    at = Where(**where)
    mechanism = mechanism.upper()
    password = read_password(password_file, password_stdin)
    salt = os.urandom(SALT_BYTES)
    salted = salted_password(password, mechanism, salt, iterations)
    if at.direct:
        with at.credentials() as creds:
            creds.upsert(name, mechanism, iterations, salt, salted)
    else:
        from kafka.admin import UserScramCredentialUpsertion

        up = UserScramCredentialUpsertion(name, mechanism, b"", iterations=iterations,
                                          salt=salt)
        up.salted_password = salted  # derived here from the Secret, not from a plain str
        _alter(at, up, name, f"adding {mechanism} for {name!r}")
    click.echo(f"{name}: {mechanism} credential set ({iterations} iterations)")


@scram.command("delete")
@click.argument("user", required=False)
@click.option("--user", "user_option", metavar="USER", help="The user (instead of USER).")
@click.option("--mechanism", type=_MECHANISM, required=True)
@_where_options
def delete(user: str | None, user_option: str | None, mechanism: str, **where: Any) -> None:
    """Delete USER's credential for a mechanism (an error when there is none)."""
    name = _user(user, user_option)
    at = Where(**where)
    mechanism = mechanism.upper()
    what = f"deleting {mechanism} of {name!r}"
    if at.direct:
        from kafka_tiers.api.errors import KafkaTiersError

        with at.credentials() as creds:
            if not creds.delete(name, mechanism):
                raise KafkaTiersError(f"{what}: {name!r} has no {mechanism} credential")
    else:
        from kafka.admin import UserScramCredentialDeletion

        _alter(at, UserScramCredentialDeletion(name, mechanism), name, what)
    click.echo(f"{name}: {mechanism} credential deleted")


@scram.command("list")
@click.argument("users", nargs=-1)
@FORMAT_OPTION
@_where_options
def list_users(users: tuple[str, ...], fmt: str, **where: Any) -> None:
    """List the SCRAM users (or USERS) with their mechanisms and iterations; never a key.

    JSON: ``{"users": [{"user", "credentials": [{"mechanism", "iterations"}]}]}``.
    """
    at = Where(**where)
    rows: dict[str, list[tuple[str, int]]] = {}
    if at.direct:
        with at.credentials() as creds:
            for user, infos in creds.describe(list(users) or None).items():
                rows[user] = [(m.mechanism_name, i) for m, i in infos]
    else:
        from kafka_tiers.cli.kafka_admin import _errors

        with _admin(at) as admin, _errors("listing SCRAM users"):
            got = admin.admin.describe_user_scram_credentials(list(users) or None)
        for user, desc in sorted(got.items()):
            if desc["error"] is None:
                rows[user] = [(c["mechanism"].name.replace("_", "-"), c["iterations"])
                              for c in desc["credential_infos"]]
    missing = [u for u in users if u not in rows]
    if fmt == "json":
        from kafka_tiers.cli.output import emit_json

        emit_json({"users": [{"user": u, "credentials": [
            {"mechanism": m, "iterations": i} for m, i in creds_]}
            for u, creds_ in sorted(rows.items())]})
    else:
        from kafka_tiers.cli.output import console

        if not rows:
            click.echo("no SCRAM users")
        else:
            from rich.table import Table

            table = Table("user", "mechanism", "iterations")
            for u, creds_ in sorted(rows.items()):
                for m, i in creds_:
                    table.add_row(u, m, str(i))
            console().print(table)
    if missing:
        from kafka_tiers.api.errors import KafkaTiersError

        raise KafkaTiersError(f"no SCRAM credential for {', '.join(map(repr, missing))}")


__all__ = ["read_password", "scram"]
