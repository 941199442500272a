"""Kafka's JAAS configuration syntax, as given in ``sasl.jaas.config`` and
``listener.name.<listener>.<mechanism>.sasl.jaas.config``::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

One login module (a dotted class name), a control flag (``required``, ``requisite``,
``sufficient``, ``optional``), options ``name=value`` (a value is a double-quoted string, in
which a backslash escapes the next character -- ``\\n``, ``\\t``, ``\\r`` mean their control
characters -- or a bare word), and the closing ``;``. ``//`` and ``/* */`` comments are
skipped, as Kafka's tokenizer does. Kafka's ``sasl.jaas.config`` holds exactly one module.

The values of credential options (``password``, ``user_<name>``, see
:func:`is_secret_option`) are kept as :class:`~kafka_tiers.api.Secret`. A parse error is one
:class:`~kafka_tiers.api.ConfigError` naming the key and the character position, never the
text (it holds passwords).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.api.secret import Secret

#: the control flags of a JAAS login module entry
CONTROL_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})
#: the option prefix of the PLAIN users (``user_alice="alice-secret"``)
USER_PREFIX = "user_"
#: words that make an option's value a credential (with ``user_<name>`` options)
SECRET_WORDS = ("password", "secret", "token", "key")

_WORD = re.compile(r"[A-Za-z0-9_.$\-]+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class JaasModule:
    """One login module entry.

    Attributes:
        login_module: the login module's class name.
        control_flag: ``required``, ``requisite``, ``sufficient`` or ``optional``.
        options: option name -> value (a :class:`Secret` for a credential option), in the
            order given.
    """

    login_module: str
    control_flag: str
    options: Mapping[str, str | Secret] = field(default_factory=dict)

    def users(self) -> dict[str, Secret]:
        """The ``user_<name>="<password>"`` options: user name -> password (PLAIN's users)."""
        out: dict[str, Secret] = {}
        for name, value in self.options.items():
            if name.startswith(USER_PREFIX) and len(name) > len(USER_PREFIX):
                out[name[len(USER_PREFIX):]] = value if isinstance(value, Secret) \
                    else Secret(value)
        return out


def is_secret_option(name: str) -> bool:
    """Whether option ``name`` holds a credential (``password``, ``user_<name>``, anything
    naming a secret, token or key): its value is kept as a :class:`Secret`. Other values
    (``username``, ``serviceName``) stay text, so the log's secret hiding leaves them be."""
    lower = name.lower()
    return lower.startswith(USER_PREFIX) or any(w in lower for w in SECRET_WORDS)


class _Parser:
    def __init__(self, text: str, key: str) -> None:
        self.text = text
        self.key = key
        self.pos = 0

    def fail(self, what: str, pos: int | None = None) -> ConfigError:
        at = self.pos if pos is None else pos
        return ConfigError(f"{self.key}: JAAS syntax error at character {at + 1}: {what} "
                           "(expected: <LoginModule class> <required|requisite|sufficient|"
                           "optional> name=\"value\" ... ;)", key=self.key,
                           expected="a JAAS login module entry")

    def skip(self) -> None:
        t = self.text
        while self.pos < len(t):
            if t[self.pos].isspace():
                self.pos += 1
            elif t.startswith("//", self.pos):
                end = t.find("\n", self.pos)
                self.pos = len(t) if end < 0 else end + 1
            elif t.startswith("/*", self.pos):
                end = t.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("a /* comment is not closed")
                self.pos = end + 2
            else:
                return

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, char: str) -> bool:
        self.skip()
        return self.text.startswith(char, self.pos)

    def word(self, what: str) -> str:
        self.skip()
        m = _WORD.match(self.text, self.pos)
        if m is None:
            raise self.fail(f"{what} expected")
        self.pos = m.end()
        return m.group()

    def value(self) -> str:
        self.skip()
        t = self.text
        if not t.startswith('"', self.pos):
            return self.word("an option value (a quoted string or a word)")
        start = self.pos
        self.pos += 1
        out: list[str] = []
        while self.pos < len(t):
            ch = t[self.pos]
            if ch == "\\":
                if self.pos + 1 >= len(t):
                    break
                nxt = t[self.pos + 1]
                out.append(_ESCAPES.get(nxt, nxt))
                self.pos += 2
            elif ch == '"':
                self.pos += 1
                return "".join(out)
            else:
                out.append(ch)
                self.pos += 1
        raise self.fail("a quoted value is not closed", start)

    def module(self) -> JaasModule:
        name = self.word("a login module class name")
        self.skip()
        flag_pos = self.pos
        flag = self.word("a control flag")
        if flag.lower() not in CONTROL_FLAGS:
            raise self.fail("the control flag must be required, requisite, sufficient or "
                            "optional", flag_pos)
        options: dict[str, str | Secret] = {}
        while not self.peek(";"):
            if self.at_end():
                raise self.fail("the entry does not end with ';'")
            self.skip()
            opt_pos = self.pos
            opt = self.word("an option name or ';'")
            if not self.peek("="):
                raise self.fail("'=' expected after an option name")
            self.pos += 1
            value = self.value()
            if opt in options:
                raise self.fail("an option is given twice", opt_pos)
            options[opt] = Secret(value) if is_secret_option(opt) else value
        self.pos += 1
        return JaasModule(name, flag.lower(), options)


def parse_jaas(text: str | Secret, key: str) -> list[JaasModule]:
    """Every login module entry of a JAAS configuration text.

    Args:
        text: the configuration (a :class:`Secret` as the config holds it, or a ``str``).
        key: the configuration key it came from (named in errors).

    Raises:
        ConfigError: a syntax error (the key and the character position, never the text),
            or no entry at all.
    """
    raw = text.reveal() if isinstance(text, Secret) else str(text)
    parser = _Parser(raw, key)
    modules = []
    while not parser.at_end():
        modules.append(parser.module())
    if not modules:
        raise parser.fail("no login module entry")
    return modules


def parse_jaas_config(text: str | Secret, key: str) -> JaasModule:
    """The one login module of a ``sasl.jaas.config`` value (Kafka's rule: exactly one).

    Raises:
        ConfigError: as :func:`parse_jaas`, or more than one entry.
    """
    modules = parse_jaas(text, key)
    if len(modules) != 1:
        raise ConfigError(f"{key}: {len(modules)} login modules; a sasl.jaas.config value "
                          "holds exactly one", key=key, expected="one JAAS login module")
    return modules[0]


__all__ = ["CONTROL_FLAGS", "JaasModule", "is_secret_option", "parse_jaas", "parse_jaas_config"]
