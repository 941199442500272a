"""Broker configuration: Kafka-style ``server.properties`` read into typed, validated values.

Keys are declared as :class:`ConfigKey` entries grouped in sections; each subsystem owns the
section with its keys, and :data:`SECTIONS` lists them. A bad value raises one
:class:`~kafka_tiers.api.ConfigError` naming the key, the value (never a secret's) and what was
expected. Aliases (Kafka's name beside ours, such as ``node.id`` for ``broker.id``, or a
design document's name beside Kafka's shipped name) are accepted; giving both with different
values is an error.

Nothing is accepted silently (:attr:`BrokerConfig.warnings`, shown by ``config show``,
``broker start`` and ``cluster start``):

- a key given twice in a file is an error (:func:`read_properties`);
- contradictions are errors: a key and its alias with different values, ``log.dir`` beside
  ``log.dirs``, the same directory twice in ``log.dirs``, and the :data:`CROSS_CHECKS`
  (``listeners`` and ``port`` naming different ports, a default above its bound,
  ``message.max.bytes`` above ``socket.request.max.bytes``);
- keys under a plugin prefix (:data:`PLUGIN_KEY_PREFIXES`: ``placer.*``, ``rsm.config.*``,
  ``rlmm.config.*``, ``remote.log.metadata.*``) are the plugins' and are kept as given;
- a Kafka broker key kafka-tiers does not implement
  (:data:`KAFKA_BROKER_KEYS`) is reported as ignored, by name;
- any other key is unknown: a warning naming the closest known key ("did you mean ...").

Plugin names (``broker.replica.placer``, ``remote.storage.manager.class``) are checked against
the installed plugins by :meth:`BrokerConfig.check_plugins`.
"""

from __future__ import annotations

import difflib
import importlib
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.api.secret import Secret

_REQUIRED = object()


class ValueType:
    """How a raw string becomes a typed value. ``parse`` raises ``ValueError`` on bad input."""

    expected: str = "a value"

    def parse(self, raw: str) -> Any:
        return raw


class String(ValueType):
    def __init__(self, *, allow_empty: bool = False, pattern: str | None = None,
                 expected: str | None = None) -> None:
        self.allow_empty = allow_empty
        self.pattern = re.compile(pattern) if pattern else None
        self.expected = expected or ("a string" if allow_empty else "a non-empty string")

    def parse(self, raw: str) -> str:
        value = raw.strip()
        if not value and not self.allow_empty:
            raise ValueError(self.expected)
        if self.pattern and not self.pattern.fullmatch(value):
            raise ValueError(self.expected)
        return value


#: The largest value of a Kafka ``int`` key (32-bit signed), and of a ``long`` key (64-bit).
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class Int(ValueType):
    """An integer from ``min`` to ``max``; without ``max``, at most the largest value of a
    ``bits``-bit signed integer (Kafka's ``int`` keys: ``bits=32``, :data:`INT_MAX`; its
    ``long`` keys: 64, :data:`LONG_MAX`, the default), so no key takes a value Kafka could not
    hold."""

    def __init__(self, min: int | None = None, max: int | None = None, *,
                 bits: int = 64) -> None:
        self.min, self.max = min, max
        self.limit = max if max is not None else 2 ** (bits - 1) - 1
        self.too_large = (f"an integer from {min if min is not None else -self.limit - 1} to "
                          f"{self.limit}" + ("" if max is not None else
                                             f" (a {bits}-bit Kafka "
                                             f"{'int' if bits == 32 else 'long'})"))
        if min is not None and max is not None:
            self.expected = f"an integer from {min} to {max}"
        elif min is not None:
            self.expected = f"an integer >= {min}"
        elif max is not None:
            self.expected = f"an integer <= {max}"
        else:
            self.expected = "an integer"

    def parse(self, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(self.expected) from None
        if value > self.limit:
            raise ValueError(self.too_large)
        if (self.min is not None and value < self.min) or value < -self.limit - 1:
            raise ValueError(self.expected)
        return value


class Bool(ValueType):
    expected = "true or false"

    def parse(self, raw: str) -> bool:
        value = raw.strip().lower()
        if value == "true":
            return True
        if value == "false":
            return False
        raise ValueError(self.expected)


class Choice(ValueType):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.expected = "one of " + ", ".join(choices)

    def parse(self, raw: str) -> str:
        value = raw.strip()
        if value not in self.choices:
            raise ValueError(self.expected)
        return value


class List(ValueType):
    """A comma-separated list; empty items are dropped."""

    def __init__(self, item: ValueType | None = None, *, min_items: int = 0) -> None:
        self.item = item or String()
        self.min_items = min_items
        self.expected = f"a comma-separated list of {self.item.expected}" + (
            f" (at least {min_items})" if min_items else ""
        )

    def parse(self, raw: str) -> list[Any]:
        items = [p for p in (s.strip() for s in raw.split(",")) if p]
        if len(items) < self.min_items:
            raise ValueError(self.expected)
        try:
            return [self.item.parse(p) for p in items]
        except ValueError:
            raise ValueError(self.expected) from None


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key.

    Attributes:
        name: the canonical key.
        type: how its value is parsed and checked.
        default: the value when absent (already typed); ``None`` allowed; omit for required.
        doc: one sentence for people.
        aliases: other names accepted for the same key.
        secret: its value is a credential: the config holds it (and its raw text) as a
            :class:`~kafka_tiers.api.Secret` of the stripped text, never repeated in errors or
            output.
        check: an extra check on the typed value returning a problem in words, or None.
    """

    name: str
    type: ValueType
    default: Any = _REQUIRED
    doc: str = ""
    aliases: tuple[str, ...] = ()
    secret: bool = False
    check: Callable[[Any], str | None] | None = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def _placer_name(value: str) -> str | None:
    if re.fullmatch(r"[A-Za-z0-9_.-]+(:[A-Za-z_][A-Za-z0-9_.]*)?", value):
        return None
    return "an entry-point name (rack-aware) or an import path (pkg.module:Class)"


CORE_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("broker.id", Int(min=0, bits=32), 0, "This broker's id.", aliases=("node.id",)),
    ConfigKey("broker.rack", String(), None,
              "This broker's rack: a name, or a path such as /dc1/rack2 for multi-level racks."),
    ConfigKey("broker.replica.placer", String(), "rack-aware",
              "The ReplicaPlacer: an entry-point name or pkg.module:Class.",
              aliases=("replica.placer.class.name",), check=_placer_name),
    ConfigKey("hook.plugins.blocked", List(), [],
              "Hook plugins (entry-point names in group kafka_tiers) not to load; "
              "KAFKA_TIERS_BLOCK_HOOK_PLUGINS adds more."),
    ConfigKey("broker.shutdown.timeout.ms", Int(min=1, bits=32), 25000,
              "How long a broker process (broker start, cluster start) may take to shut down "
              "after SIGTERM or SIGINT before it exits anyway, logs flushed, with exit code 1 "
              "(Kafka has no such key; the default fits Kubernetes' 30 s grace period)."),
)

#: Where the key sections live, as ``module:attribute``; each subsystem adds its own.
SECTIONS: tuple[str, ...] = ("kafka_tiers.config:CORE_KEYS", "kafka_tiers.log.config:LOG_KEYS",
                             "kafka_tiers.remote.config:REMOTE_KEYS",
                             "kafka_tiers.cluster.config:CLUSTER_KEYS",
                             "kafka_tiers.kafka.config:KAFKA_LISTENER_KEYS",
                             "kafka_tiers.placement.limits:LIMIT_KEYS",
                             "kafka_tiers.kafka.groups.config:GROUP_KEYS",
                             "kafka_tiers.kafka.security.config:SECURITY_KEYS")


#: Prefixes of the keys plugins read (the prefix stripped): never unknown, never validated here.
PLUGIN_KEY_PREFIXES: tuple[str, ...] = ("placer.", "rsm.config.", "rlmm.config.",
                                        "remote.log.metadata.")

#: Keys none of whose aliases may be given beside them, even with the same value (Kafka
#: reads ``log.dirs`` and ignores ``log.dir`` when both are set: giving both is a mistake).
ONE_NAME_ONLY: frozenset[str] = frozenset({"log.dirs"})

#: List keys naming directories: each directory once (compared normalised).
DISTINCT_DIRS: frozenset[str] = frozenset({"log.dirs"})


def _listeners_and_port(values: Mapping[str, Any], given: set[str]) -> tuple[str, str] | None:
    """The internal transport's ``port`` must not be one of the Kafka ``listeners``' ports."""
    listeners, port = values.get("listeners"), values.get("port")
    if not listeners or "port" not in given or not port:
        return None
    ports = {item.strip().rpartition(":")[2] for item in str(listeners).split(",")}
    if str(port) in ports:
        return "port", (f"port ({port}) is the brokers' internal transport and cannot be a "
                        f"Kafka listener's port too (listeners={listeners}); give another "
                        "port, or 0 for any free one")
    return None


def _default_within(key: str, bound: str) -> Callable[[Mapping[str, Any], set[str]],
                                                     tuple[str, str] | None]:
    def check(values: Mapping[str, Any], given: set[str]) -> tuple[str, str] | None:
        value, limit = values.get(key), values.get(bound)
        if value is None or limit is None or value <= limit:
            return None
        return key, (f"{key} {value} exceeds {bound} {limit}: every topic created with the "
                     f"default would be refused; lower {key} or raise {bound}")
    return check


def _record_fits_request(values: Mapping[str, Any], given: set[str]) -> tuple[str, str] | None:
    """``message.max.bytes``, when given, above ``socket.request.max.bytes`` (a lowered
    request limit alone leaves the default record limit to the transport's check)."""
    size, limit = values.get("message.max.bytes"), values.get("socket.request.max.bytes")
    if "message.max.bytes" not in given or size is None or limit is None or size <= limit:
        return None
    return "message.max.bytes", (f"message.max.bytes {size} exceeds socket.request.max.bytes "
                                 f"{limit}: a batch that large could never arrive in a request; "
                                 "lower message.max.bytes or raise socket.request.max.bytes")


#: Checks across keys (contradictions): each takes the typed values and the names given, and
#: returns ``(key, problem)`` or None.
CROSS_CHECKS: tuple[Callable[[Mapping[str, Any], set[str]], tuple[str, str] | None], ...] = (
    _listeners_and_port,
    _record_fits_request,
    _default_within("default.replication.factor", "max.replication.factor"),
    _default_within("num.partitions", "max.topic.partitions"),
    _default_within("num.partitions", "max.request.partitions"),
)


# ---------------------------------------------------------------------- Kafka's broker keys
# The names of Apache Kafka's broker configuration keys (Kafka 3.x, ZooKeeper and KRaft modes),
# so a server.properties written for Kafka is read knowingly: a Kafka key kafka-tiers declares
# (aliases included) is used, any other Kafka key is reported as ignored, by name, and only a
# key that is neither is unknown. Names only, written for this project from Kafka's documented
# broker configs; security, quota, coordinator and metrics keys are ignored as families
# (KAFKA_BROKER_KEY_PREFIXES).

_KAFKA_NAMES = """
advertised.host.name advertised.listeners advertised.port alter.config.policy.class.name
alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
authorizer.class.name auto.create.topics.enable auto.include.jmx.reporter
auto.leader.rebalance.enable background.threads broker.heartbeat.interval.ms broker.id
broker.id.generation.enable broker.rack broker.session.timeout.ms
client.quota.callback.class client.telemetry.max.bytes compression.type
compression.gzip.level compression.lz4.level compression.zstd.level
connection.failed.authentication.delay.ms connections.max.idle.ms
connections.max.reauth.ms control.plane.listener.name controlled.shutdown.enable
controlled.shutdown.max.retries controlled.shutdown.retry.backoff.ms
controller.listener.names controller.quorum.append.linger.ms
controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms
controller.quorum.voters controller.quota.window.num controller.quota.window.size.seconds
controller.socket.timeout.ms create.topic.policy.class.name default.replication.factor
delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
delegation.token.master.key delegation.token.max.lifetime.ms delegation.token.secret.key
delete.records.purgatory.purge.interval.requests delete.topic.enable
early.start.listeners eligible.leader.replicas.enable fetch.max.bytes
fetch.purgatory.purge.interval.requests group.consumer.assignors
group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
group.consumer.max.session.timeout.ms group.consumer.max.size
group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
group.consumer.session.timeout.ms group.coordinator.new.enable
group.coordinator.rebalance.protocols group.coordinator.threads
group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size
group.min.session.timeout.ms host.name initial.broker.registration.timeout.ms
inter.broker.listener.name inter.broker.protocol.version kafka.metrics.polling.interval.secs
kafka.metrics.reporters leader.imbalance.check.interval.seconds
leader.imbalance.per.broker.percentage listener.security.protocol.map listeners
log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms
log.cleaner.enable log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads
log.cleanup.policy log.dir log.dir.failure.timeout.ms log.dirs
log.flush.interval.messages log.flush.interval.ms log.flush.offset.checkpoint.interval.ms
log.flush.scheduler.interval.ms log.flush.start.offset.checkpoint.interval.ms
log.index.interval.bytes log.index.size.max.bytes log.initial.task.delay.ms
log.local.retention.bytes log.local.retention.ms log.message.downconversion.enable
log.message.format.version log.message.timestamp.after.max.ms
log.message.timestamp.before.max.ms log.message.timestamp.difference.max.ms
log.message.timestamp.type log.preallocate log.retention.bytes
log.retention.check.interval.ms log.retention.hours log.retention.minutes log.retention.ms
log.roll.hours log.roll.jitter.hours log.roll.jitter.ms log.roll.ms log.segment.bytes
log.segment.delete.delay.ms max.connection.creation.rate max.connections
max.connections.per.ip max.connections.per.ip.overrides max.incremental.fetch.session.cache.slots
max.request.partition.size.limit message.max.bytes metadata.log.dir
metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
metadata.log.segment.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
metadata.max.retention.bytes metadata.max.retention.ms metric.reporters metrics.num.samples
metrics.recording.level metrics.sample.window.ms min.insync.replicas node.id
num.io.threads num.network.threads num.partitions num.recovery.threads.per.data.dir
num.replica.alter.log.dirs.threads num.replica.fetchers offset.metadata.max.bytes
offsets.commit.required.acks offsets.commit.timeout.ms offsets.load.buffer.size
offsets.retention.check.interval.ms offsets.retention.minutes offsets.topic.compression.codec
offsets.topic.num.partitions offsets.topic.replication.factor offsets.topic.segment.bytes
password.encoder.cipher.algorithm password.encoder.iterations password.encoder.key.length
password.encoder.keyfactory.algorithm password.encoder.old.secret password.encoder.secret
port principal.builder.class process.roles producer.id.expiration.check.interval.ms
producer.id.expiration.ms producer.purgatory.purge.interval.requests queued.max.request.bytes
queued.max.requests quota.window.num quota.window.size.seconds
remote.fetch.max.wait.ms remote.log.index.file.cache.total.size.bytes
remote.log.manager.copier.thread.pool.size remote.log.manager.copy.max.bytes.per.second
remote.log.manager.copy.quota.window.num remote.log.manager.copy.quota.window.size.seconds
remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.max.bytes.per.second
remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds
remote.log.manager.task.interval.ms remote.log.manager.task.retry.backoff.max.ms
remote.log.manager.task.retry.backoff.ms remote.log.manager.task.retry.jitter
remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes
remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
remote.log.reader.max.pending.tasks remote.log.reader.threads
remote.log.storage.manager.class.name remote.log.storage.manager.class.path
remote.log.storage.manager.impl.prefix remote.log.storage.system.enable
replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms
replica.selector.class replica.socket.receive.buffer.bytes replica.socket.timeout.ms
replication.quota.window.num replication.quota.window.size.seconds request.timeout.ms
reserved.broker.max.id sasl.enabled.mechanisms sasl.mechanism.controller.protocol
sasl.mechanism.inter.broker.protocol sasl.server.callback.handler.class
sasl.server.max.receive.size security.inter.broker.protocol security.providers
server.max.startup.time.ms socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.listen.backlog.size socket.receive.buffer.bytes
socket.request.max.bytes socket.send.buffer.bytes telemetry.max.bytes
transaction.abort.timed.out.transaction.cleanup.interval.ms
transaction.max.timeout.ms transaction.partition.verification.enable
transaction.remove.expired.transaction.cleanup.interval.ms
transaction.state.log.load.buffer.size transaction.state.log.min.isr
transaction.state.log.num.partitions transaction.state.log.replication.factor
transaction.state.log.segment.bytes transactional.id.expiration.ms
unclean.leader.election.enable unstable.api.versions.enable unstable.feature.versions.enable
zookeeper.clientCnxnSocket zookeeper.connect zookeeper.connection.timeout.ms
zookeeper.max.in.flight.requests zookeeper.metadata.migration.enable
zookeeper.session.timeout.ms zookeeper.set.acl zookeeper.ssl.cipher.suites
zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols
zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type zookeeper.ssl.ocsp.enable
zookeeper.ssl.protocol zookeeper.ssl.truststore.location zookeeper.ssl.truststore.password
zookeeper.ssl.truststore.type zookeeper.sync.time.ms
"""

#: Kafka's broker keys by name.
KAFKA_BROKER_KEYS: frozenset[str] = frozenset(_KAFKA_NAMES.split())

#: Families of Kafka broker keys, ignored as a whole (security, per-listener overrides,
#: quotas, the group and transaction coordinators, the KRaft metadata log, metrics).
KAFKA_BROKER_KEY_PREFIXES: tuple[str, ...] = (
    "ssl.", "sasl.", "listener.name.", "security.", "quota.", "group.", "offsets.",
    "transaction.", "metadata.log.", "metrics.", "kafka.metrics.", "replication.quota.",
    "sasl.oauthbearer.", "sasl.kerberos.", "sasl.login.",
)


def is_kafka_broker_key(name: str) -> bool:
    """Whether ``name`` is one of Kafka's broker keys (or of its ignored families)."""
    return name in KAFKA_BROKER_KEYS or name.startswith(KAFKA_BROKER_KEY_PREFIXES)


def all_keys() -> dict[str, ConfigKey]:
    """Every declared key by canonical name."""
    keys: dict[str, ConfigKey] = {}
    for ref in SECTIONS:
        module, _, attr = ref.partition(":")
        for key in getattr(importlib.import_module(module), attr):
            if key.name in keys:
                raise RuntimeError(f"config key {key.name} declared twice")
            keys[key.name] = key
    return keys


class _Once(dict[str, Any]):
    """A properties parser's key table that remembers keys set twice."""

    def __init__(self, props: Any) -> None:
        super().__init__()
        self.props = props
        self.lines: dict[str, int] = {}
        self.twice: list[tuple[str, int, int]] = []
        self.line = 0
        parse_key = props._parse_key

        def parse_key_at_line(*args: Any, **kwargs: Any) -> Any:
            self.line = int(getattr(props, "_line_number", 0))  # where the entry starts
            return parse_key(*args, **kwargs)

        props._parse_key = parse_key_at_line

    def __setitem__(self, key: str, value: Any) -> None:
        line = self.line
        if key in self:
            self.twice.append((key, self.lines[key], line))
        else:
            self.lines[key] = line
        super().__setitem__(key, value)


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file (comments, continuations, escapes as Java reads them).

    Unlike Java, a key given twice is refused: which value was meant cannot be known. The
    file must be a regular file of at most 1 MiB
    (:data:`kafka_tiers.log.input_file.MAX_PROPERTIES_FILE_BYTES`).

    Raises:
        ConfigError: the file cannot be read or parsed, is not a regular file, is larger
            than the limit, or gives a key twice (the message
            names the key and both lines).
    """
    from jproperties import Properties

    from kafka_tiers.log.input_file import (
        MAX_PROPERTIES_FILE_BYTES,
        InputFileError,
        read_input_file,
    )

    props = Properties()
    seen = _Once(props)
    props._properties = seen
    try:
        raw = read_input_file(path, MAX_PROPERTIES_FILE_BYTES, "config file")
    except InputFileError as exc:
        raise ConfigError(str(exc)) from None
    try:
        props.load(io.BytesIO(raw), "utf-8")
    except Exception as exc:  # jproperties raises its own parse errors
        raise ConfigError(f"cannot parse config file {path}: {exc}") from None
    if seen.twice:
        key, first, again = seen.twice[0]
        raise ConfigError(f"{path}: key {key} is given twice (lines {first} and {again}); "
                          f"keep one", key=key)
    return {str(k): str(v.data) for k, v in props.items()}


class BrokerConfig(Mapping[str, Any]):
    """A validated broker configuration.

    Indexing by a declared key gives its typed value (the default when absent); the raw
    strings of every key, declared or not, stay available through :attr:`originals` and
    :meth:`prefixed`. The value of a secret key (``ConfigKey.secret``) is held as a
    :class:`~kafka_tiers.api.Secret`, typed value and raw text alike (its type still checks
    it); ``repr`` shows the given declared keys with secrets as ``<hidden>`` and no plugin key.
    Values given may be ``str`` or :class:`~kafka_tiers.api.Secret`.

    Raises:
        ConfigError: on construction, for the first bad, missing or conflicting value.
    """

    def __init__(self, values: Mapping[str, str | Secret] | None = None) -> None:
        raw = {str(k).strip(): v if isinstance(v, Secret) else str(v)
               for k, v in (values or {}).items()}
        keys = all_keys()
        resolved: dict[str, Any] = {}
        originals = dict(raw)
        for key in keys.values():
            given = [(n, _text(raw[n])) for n in (key.name, *key.aliases) if n in raw]
            if key.secret:
                for n, _ in given:
                    v = raw[n]
                    originals[n] = v if isinstance(v, Secret) else Secret(v)
            if len({v.strip() for _, v in given}) > 1:
                names = " and ".join(n for n, _ in given)
                raise ConfigError(f"{names} are the same setting and disagree; give one",
                                  key=key.name)
            if len(given) > 1 and key.name in ONE_NAME_ONLY:
                names = " and ".join(n for n, _ in given)
                raise ConfigError(f"{names} are both given; Kafka reads {key.name} and ignores "
                                  f"the other: give only {key.name}", key=key.name)
            if not given:
                if key.required:
                    raise ConfigError(f"{key.name} is required", key=key.name)
                resolved[key.name] = key.default
                continue
            name, text = given[0]
            originals[key.name] = Secret(text) if key.secret else text
            try:
                value = key.type.parse(text)
                problem = key.check(value) if key.check else None
            except ValueError as exc:
                problem = str(exc) or key.type.expected
            if problem:
                shown = "<hidden>" if key.secret else repr(text)
                raise ConfigError(
                    f"invalid value {shown} for {name}: expected {problem}",
                    key=name, value=None if key.secret else text, expected=problem,
                )
            if key.name in DISTINCT_DIRS:
                _check_distinct_dirs(name, value)
            resolved[key.name] = Secret(text.strip()) if key.secret else value
        given_names = {k.name for k in keys.values()
                       if any(n in raw for n in (k.name, *k.aliases))}
        for cross in CROSS_CHECKS:
            found = cross(resolved, given_names)
            if found is not None:
                raise ConfigError(found[1], key=found[0])
        self._values = resolved
        self._originals = originals
        self._keys = keys
        self._warnings = _warnings(raw, keys)

    @property
    def warnings(self) -> list[str]:
        """What this config accepts without using, one line each: unknown keys with the
        closest known key, then the Kafka broker keys kafka-tiers ignores."""
        return list(self._warnings)

    def check_plugins(self) -> None:
        """Check that the plugins named by entry-point name (``broker.replica.placer``,
        ``remote.storage.manager.class`` when ``remote.log.storage.enable``,
        ``authorizer.class.name`` but for Kafka's class names) are installed;
        import paths (``pkg.module:Class``) are checked when loaded.

        Raises:
            ConfigError: a name no installed plugin has; the message names the installed ones.
        """
        from kafka_tiers.kafka.security.acl_authorizer import KAFKA_CLASS_NAMES
        from kafka_tiers.plugins.loader import (
            AUTHORIZER_GROUP,
            OBJECT_STORE_GROUP,
            PLACER_GROUP,
            STORAGE_GROUP,
            installed_names,
        )

        wanted = [("broker.replica.placer", PLACER_GROUP, "replica placer")]
        if self._values.get("remote.log.storage.enable"):
            wanted.append(("remote.storage.manager.class", STORAGE_GROUP,
                           "remote storage manager"))
        if self._values.get("authorizer.class.name") not in (None, "", *KAFKA_CLASS_NAMES):
            wanted.append(("authorizer.class.name", AUTHORIZER_GROUP, "authorizer"))
        for key, group, kind in wanted:
            name = str(self._values.get(key) or "")
            if not name or ":" in name:
                continue
            installed = installed_names(group)
            if group == STORAGE_GROUP:  # an object store plugin serves as one too (local, s3)
                installed = sorted({*installed, *installed_names(OBJECT_STORE_GROUP)})
            if name not in installed:
                close = difflib.get_close_matches(name, installed, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise ConfigError(
                    f"unknown {kind} {name!r} for {key}; {hint}installed: "
                    f"{', '.join(installed) or 'none'} (or give pkg.module:Class)",
                    key=key, value=name, expected="an installed " + kind)

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={shown}" for name, shown, default in self.describe()
                          if not default)
        return f"BrokerConfig({given})"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str],
                  overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """Read ``server.properties`` (plus overrides, each replacing its key under every name)
        into a validated config.

        Raises:
            ConfigError: as :func:`read_properties` and the constructor.
        """
        return cls(_overridden(read_properties(path), overrides or {}, all_keys()))

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        for key in self._keys.values():
            if name in key.aliases:
                return self._values[key.name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def originals(self) -> Mapping[str, str | Secret]:
        """Every raw value as given, declared keys under their canonical name (the values of
        secret keys as :class:`~kafka_tiers.api.Secret`)."""
        return dict(self._originals)

    def prefixed(self, prefix: str) -> dict[str, str | Secret]:
        """Raw values of keys starting with ``prefix``, the prefix stripped
        (``placer.seed=7`` -> ``{"seed": "7"}`` for ``prefix="placer."``)."""
        return {k[len(prefix):]: v for k, v in self._originals.items()
                if k.startswith(prefix) and len(k) > len(prefix)}

    def with_overrides(self, overrides: Mapping[str, str | Secret]) -> BrokerConfig:
        """A new config with these raw values replacing the given ones (an override replaces
        the key under every name: ``broker.id`` replaces a given ``node.id``)."""
        return BrokerConfig(_overridden(self._originals, overrides, self._keys))

    def describe(self) -> Iterable[tuple[str, str, bool]]:
        """(key, shown value, is default) for every declared key; secrets shown as <hidden>."""
        for name, key in sorted(self._keys.items()):
            is_default = name not in self._originals
            value = self._values[name]
            shown = "<hidden>" if key.secret and value is not None else _show(value)
            yield name, shown, is_default


def _overridden(values: Mapping[str, Any], overrides: Mapping[str, Any],
                keys: Mapping[str, ConfigKey]) -> dict[str, Any]:
    """``values`` with ``overrides`` applied, an overridden key dropped under all its names."""
    out = dict(values)
    names_of = {n: (k.name, *k.aliases) for k in keys.values() for n in (k.name, *k.aliases)}
    for name in overrides:
        for n in names_of.get(name, ()):
            out.pop(n, None)
    out.update(overrides)
    return out


def _check_distinct_dirs(name: str, dirs: list[Any]) -> None:
    seen: dict[str, str] = {}
    for d in dirs:
        norm = os.path.normpath(str(d))
        if norm in seen:
            same = repr(d) if seen[norm] == str(d) else f"{seen[norm]!r} and {str(d)!r}"
            raise ConfigError(f"{name} names the directory {same} twice; give each "
                              f"directory once", key=name, value=",".join(map(str, dirs)),
                              expected="distinct directories")
        seen[norm] = str(d)


#: Kafka's per-listener override of a key: ``listener.name.<listener>.<key>``
_LISTENER_OVERRIDE = re.compile(r"listener\.name\.[A-Za-z0-9_]+\.(?P<key>.+)")
#: per-listener keys read without a broker-wide key of the same name (PLAIN's users:
#: ``listener.name.<listener>.plain.sasl.jaas.config``): never listed as ignored
LISTENER_ONLY_KEYS: frozenset[str] = frozenset({"plain.sasl.jaas.config"})


def _warnings(raw: Mapping[str, Any], keys: Mapping[str, ConfigKey]) -> list[str]:
    """Unknown keys (with the closest known key), then the ignored Kafka keys. A per-listener
    override of a declared key (``listener.name.ssl.ssl.client.auth``) is neither."""
    known = set(keys) | {a for k in keys.values() for a in k.aliases}
    unknown: list[str] = []
    ignored: list[str] = []
    for name in sorted(raw):
        if name in known or name.startswith(PLUGIN_KEY_PREFIXES):
            continue
        override = _LISTENER_OVERRIDE.fullmatch(name)
        if override is not None and (override["key"] in known
                                     or override["key"] in LISTENER_ONLY_KEYS):
            continue
        (ignored if is_kafka_broker_key(name) else unknown).append(name)
    out = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(f"unknown key {name}{hint}: it is ignored")
    if ignored:
        out.append("Kafka broker keys kafka-tiers does not implement, ignored: "
                   + ", ".join(ignored))
    return out


def _text(value: str | Secret) -> str:
    return value.reveal() if isinstance(value, Secret) else value


def _show(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_show(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


__all__ = [
    "CORE_KEYS",
    "CROSS_CHECKS",
    "DISTINCT_DIRS",
    "KAFKA_BROKER_KEYS",
    "KAFKA_BROKER_KEY_PREFIXES",
    "ONE_NAME_ONLY",
    "PLUGIN_KEY_PREFIXES",
    "SECTIONS",
    "Bool",
    "BrokerConfig",
    "Choice",
    "ConfigKey",
    "Int",
    "List",
    "String",
    "ValueType",
    "all_keys",
    "is_kafka_broker_key",
    "read_properties",
]
