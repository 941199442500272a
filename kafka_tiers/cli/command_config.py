"""``--command-config FILE``: the client security settings of a command that reaches a
cluster through its Kafka listeners (``kafka-tiers acls``, ``scram``, ``topics`` and the other
admin commands given ``--bootstrap-server``), in Kafka's client property names, so an admin
reaches a SASL_SSL listener:

- ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism``
  (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.jaas.config`` (a PlainLoginModule or
  ScramLoginModule line with ``username`` and ``password``) or librdkafka's
  ``sasl.username`` / ``sasl.password``;
- ``ssl.truststore.location`` (PEM, ``ssl.truststore.type=PEM``) or librdkafka's
  ``ssl.ca.location``; ``ssl.keystore.location`` (PEM: key and certificate) or
  ``ssl.certificate.location`` with ``ssl.key.location``; ``ssl.key.password``;
  ``ssl.endpoint.identification.algorithm`` (empty: no host name check); ``client.id``.

Any other key is refused (one line naming it and the keys understood). Values are never
printed; an error names the key only.
"""

from __future__ import annotations

import re
from typing import Any

import click

#: Kafka client property -> kafka-python client argument
_CLIENT_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}
#: properties understood without an argument of their own
_OTHER_KEYS = ("sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type",
               "ssl.endpoint.identification.algorithm", "client.id")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def client_settings(path: str | None) -> dict[str, Any]:
    """The kafka-python client arguments of a ``--command-config`` file (the keys of the
    module docstring); ``{}`` without one.

    Raises:
        click.UsageError: an unknown key, a keystore or truststore type other than PEM, or
            a ``sasl.jaas.config`` without username and password (the value never shown).
    """
    if not path:
        return {}
    from kafka_tiers.config import read_properties

    props = read_properties(path)
    out: dict[str, Any] = {}
    for key, value in props.items():
        value = value.strip()
        if key in _CLIENT_KEYS:
            out[_CLIENT_KEYS[key]] = value.upper() if key == "security.protocol" else value
        elif key in ("ssl.truststore.type", "ssl.keystore.type"):
            if value.upper() != "PEM":
                raise click.UsageError(f"{path}: {key} must be PEM (Java keystores are not "
                                       "read); convert the store to PEM files")
        elif key == "sasl.jaas.config":
            options = {k: bytes(v, "utf-8").decode("unicode_escape")
                       for k, v in _JAAS_OPTION.findall(value)}
            if "username" not in options or "password" not in options:
                raise click.UsageError(f"{path}: sasl.jaas.config needs username=\"...\" "
                                       "and password=\"...\"")
            out["sasl_plain_username"] = options["username"]
            out["sasl_plain_password"] = options["password"]
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = bool(value)
        elif key == "client.id":
            out["client_id"] = value
        else:
            known = ", ".join(sorted([*_CLIENT_KEYS, *_OTHER_KEYS]))
            raise click.UsageError(f"{path}: unknown client property {key!r}; understood: "
                                   f"{known}")
    if "ssl_certfile" in out and "ssl_keyfile" not in out:
        out["ssl_keyfile"] = out["ssl_certfile"]  # a PEM keystore: the key and the chain
    return out


__all__ = ["client_settings"]
