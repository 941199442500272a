"""The tools of the storage conformance suite: the plugin under test (also reconfigured with
data-path settings over the same root), segment builders, named checks, object-store wrappers
that inject faults, count open streams and record gets, RSA key pair files for encryption at
rest, and raw access to stored objects."""

from __future__ import annotations

import builtins
import functools
import io
import os
import random
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, cast

from kafka_tiers.api import (
    ByteRange,
    IndexType,
    LogSegmentData,
    ObjectInfo,
    ObjectStore,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteStorageError,
    RemoteStorageManager,
    TopicPartition,
)
from kafka_tiers.api.secret import Secret
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager, parse_segment_key
from kafka_tiers.plugins.secrets import secret_config, secret_keys_of

# --------------------------------------------------------------------------------------------
# Named checks


class ConformanceFailure(AssertionError):
    """A conformance check failed.

    Attributes:
        rule: the name of the rule the plugin broke (shown in the report).
    """

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"[{rule}] {message}")
        self.rule = rule


def check(rule: str, condition: object, message: str) -> None:
    """Fail the rule ``rule`` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConformanceFailure(rule, message)


def expect_raises(rule: str, expected: type[BaseException] | tuple[type[BaseException], ...],
                  fn: Callable[..., Any], *args: Any, **kwargs: Any) -> BaseException:
    """Call ``fn`` and require it to raise ``expected``; returns the exception.

    A return (the result is closed when it is a stream) or another exception fails ``rule``.
    """
    names = (expected.__name__ if isinstance(expected, type)
             else " or ".join(e.__name__ for e in expected))
    try:
        result = fn(*args, **kwargs)
    except expected as exc:
        return exc
    except Exception as exc:
        raise ConformanceFailure(
            rule, f"{getattr(fn, '__name__', fn)} raised {type(exc).__name__}: {exc}; "
            f"expected {names}") from exc
    close = getattr(result, "close", None)
    if callable(close):
        close()
    raise ConformanceFailure(rule, f"{getattr(fn, '__name__', fn)} returned "
                             f"{type(result).__name__}; expected it to raise {names}")


def read_all(stream: BinaryIO) -> bytes:
    """Read a stream to its end and close it."""
    with stream:
        chunks = []
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


_CURRENT = threading.local()

#: the attributes :func:`storage_test` sets on a test function: the rule it checks and the
#: capabilities it needs
RULE_ATTRIBUTE = "_kt_rule"
REQUIRES_ATTRIBUTE = "_kt_requires"


def _record_failed_rule(rule: str) -> None:
    node = getattr(_CURRENT, "node", None)
    if node is not None:
        node.user_properties.append(("kt_failed_rules", rule))


def storage_test(rule: str, *, requires: Sequence[str] = ()) -> Callable[[Any], Any]:
    """Mark a suite test: the rule it checks (named in the report when it fails) and the
    capabilities it needs (it is skipped, with the reason, when one is off)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except ConformanceFailure as exc:
                _record_failed_rule(exc.rule)
                raise
            except Exception:  # pytest's skip/xfail outcomes are BaseExceptions: not here
                _record_failed_rule(rule)
                raise

        setattr(wrapper, RULE_ATTRIBUTE, rule)
        setattr(wrapper, REQUIRES_ATTRIBUTE, tuple(requires))
        return wrapper

    return decorate


# --------------------------------------------------------------------------------------------
# The plugin under test


@dataclass
class StorageTarget:
    """How to make the storage plugin under test.

    Every :meth:`create` returns a new configured instance over the same remote root.
    :meth:`with_fresh_root` gives a target over a new, empty root: a random ``key.prefix``
    under the configured one for object-store plugins, and a new temporary directory for every
    config value containing ``{tmp}``.

    Attributes:
        plugin_class: the plugin's class.
        config: its configuration (the keys under ``rsm.config.``, prefix stripped); the
            values of the keys the plugin declares secret (``SECRET_KEYS``) are held as
            :class:`~kafka_tiers.api.Secret` from construction on.
        label: the plugin in words, for the report.
        name: the name it is loaded by (entry point or import path), for error messages.
    """

    plugin_class: type[RemoteStorageManager]
    config: Mapping[str, str | Secret]
    label: str
    name: str
    _cleanup: list[Path] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.config = secret_config(self.config, secret_keys_of(self.plugin_class))

    @classmethod
    def from_class(cls, plugin_class: type[RemoteStorageManager] | type[ObjectStore],
                   config: Mapping[str, str] | None = None,
                   label: str | None = None) -> StorageTarget:
        """A target for a class (the fsspec-style fixture of a third party's tests): a
        ``RemoteStorageManager``, or an ``ObjectStore`` (tested inside the storage manager the
        core builds around it)."""
        path = f"{plugin_class.__module__}:{plugin_class.__qualname__}"
        if issubclass(plugin_class, ObjectStore):
            plugin_class = ObjectStoreRemoteStorageManager.for_store(plugin_class)
        return cls(plugin_class, dict(config or {}), label or path, path)

    @classmethod
    def from_plugin(cls, name_or_path: str, config: Mapping[str, str] | None = None
                    ) -> StorageTarget:
        """A target for an installed plugin (entry-point name in ``kafka_tiers.remote_storage``
        or ``kafka_tiers.object_store``) or an import path of either kind.

        Raises:
            PluginError: unknown, broken or incompatible plugin.
        """
        from kafka_tiers.plugins import STORAGE_GROUP, resolve_class

        plugin_class, label = resolve_class(STORAGE_GROUP, name_or_path)
        # for STORAGE_GROUP, resolve_class returns a RemoteStorageManager class (an object
        # store comes back as the storage manager the core builds around it)
        return cls(cast("type[RemoteStorageManager]", plugin_class), dict(config or {}), label,
                   name_or_path)

    @property
    def object_store_level(self) -> bool:
        """Whether the plugin is built on the object-store level."""
        return issubclass(self.plugin_class, ObjectStoreRemoteStorageManager)

    def with_fresh_root(self) -> StorageTarget:
        """A target over a new, empty root (see the class docstring); :meth:`cleanup` removes
        the temporary directories it made."""
        config = dict(self.config)
        made: list[Path] = []
        for key, value in config.items():
            if isinstance(value, str) and "{tmp}" in value:
                tmp = Path(tempfile.mkdtemp(prefix="kt-storage-"))
                made.append(tmp)
                config[key] = value.replace("{tmp}", str(tmp))
        if self.object_store_level:
            base = str(config.get("key.prefix", "")).strip().strip("/")
            run = f"kt-conformance-{uuid.uuid4().hex[:12]}"
            config["key.prefix"] = f"{base}/{run}" if base else run
        return replace(self, config=config, _cleanup=made)

    def with_settings(self, settings: Mapping[str, str]) -> StorageTarget:
        """This target over the same root with ``settings`` on top of its config (the data-path
        keys such as ``chunk.size`` or ``encryption.*`` the suite adds per test). The
        ``key.prefix`` and the temporary directories stay this target's: :meth:`cleanup` of
        the result removes nothing."""
        config = dict(self.config)
        config.update(settings)
        return replace(self, config=config, _cleanup=[])

    def create(self) -> RemoteStorageManager:
        """A new instance, configured."""
        instance = self.plugin_class()
        try:
            # the declared SECRET_KEYS hold Secrets, as the core hands them over
            instance.configure(cast("Mapping[str, str]", dict(self.config)))
        except BaseException:
            instance.close()
            raise
        return instance

    def guarded(self) -> RemoteStorageManager:
        """A new instance behind the core's wrapper (:mod:`kafka_tiers.remote.guarded`)."""
        from kafka_tiers.remote.guarded import GuardedRemoteStorage, secret_values

        return GuardedRemoteStorage(self.create(), self.name,
                                    secrets=secret_values(self.config))

    def cleanup(self) -> None:
        """Remove the temporary directories :meth:`with_fresh_root` made."""
        for path in self._cleanup:
            shutil.rmtree(path, ignore_errors=True)
        self._cleanup.clear()


# --------------------------------------------------------------------------------------------
# Segments


@dataclass(frozen=True)
class Segment:
    """A segment made for the suite: its metadata, local files and expected contents.

    Attributes:
        metadata: the metadata to copy it with.
        data: its local files.
        log: the log file's bytes.
        indexes: each index type's bytes (TRANSACTION absent when the segment has none).
    """

    metadata: RemoteLogSegmentMetadata
    data: LogSegmentData
    log: bytes
    indexes: Mapping[IndexType, bytes]

    @property
    def tp(self) -> TopicPartition:
        return self.metadata.topic_partition


class SegmentBuilder:
    """Makes segments with random content in a directory, and remembers every partition it
    used so the suite can clean up.

    Args:
        directory: where the local files go.
        topic: the topic name (random per test).
        seed: seeds the content.
    """

    def __init__(self, directory: Path, topic: str, seed: int = 0) -> None:
        self.directory = directory
        self.topic = topic
        self.rng = random.Random(seed)
        self.partitions: set[TopicPartition] = set()
        self._count = 0

    def tp(self, partition: int = 0) -> TopicPartition:
        """A partition of the test's topic."""
        tp = TopicPartition(self.topic, partition)
        self.partitions.add(tp)
        return tp

    def make(self, start_offset: int = 0, *, partition: int = 0, log_size: int = 10_000,
             with_transaction_index: bool = True, records: int = 100,
             log_bytes: bytes | None = None,
             segment_id: RemoteLogSegmentId | None = None,
             index_bytes: Mapping[IndexType, bytes] | None = None) -> Segment:
        """A new segment with a new id (unless ``segment_id`` is given); ``index_bytes``
        replaces the random content of the indexes it names."""
        tp = self.tp(partition)
        self._count += 1
        folder = self.directory / f"seg-{self._count}"
        folder.mkdir(parents=True)
        log = log_bytes if log_bytes is not None else self.rng.randbytes(log_size)
        indexes = {
            IndexType.OFFSET: self.rng.randbytes(8 * 37),
            IndexType.TIMESTAMP: self.rng.randbytes(12 * 29),
            IndexType.PRODUCER_SNAPSHOT: self.rng.randbytes(101),
            IndexType.LEADER_EPOCH: f"0\n1\n0 {start_offset}\n".encode(),
        }
        if with_transaction_index:
            indexes[IndexType.TRANSACTION] = self.rng.randbytes(34 * 3)
        for index_type, content in (index_bytes or {}).items():
            if index_type is IndexType.TRANSACTION and not with_transaction_index:
                continue
            indexes[index_type] = content
        name = f"{start_offset:020d}"
        paths = {
            "log": folder / f"{name}.log",
            IndexType.OFFSET: folder / f"{name}.index",
            IndexType.TIMESTAMP: folder / f"{name}.timeindex",
            IndexType.PRODUCER_SNAPSHOT: folder / f"{name}.snapshot",
            IndexType.TRANSACTION: folder / f"{name}.txnindex",
        }
        paths["log"].write_bytes(log)
        for index_type, content in indexes.items():
            if index_type in paths:
                paths[index_type].write_bytes(content)
        data = LogSegmentData(
            log_segment=paths["log"], offset_index=paths[IndexType.OFFSET],
            time_index=paths[IndexType.TIMESTAMP],
            transaction_index=paths[IndexType.TRANSACTION] if with_transaction_index else None,
            producer_snapshot_index=paths[IndexType.PRODUCER_SNAPSHOT],
            leader_epoch_index=indexes[IndexType.LEADER_EPOCH])
        metadata = RemoteLogSegmentMetadata(
            segment_id or RemoteLogSegmentId.generate(tp), start_offset=start_offset,
            end_offset=start_offset + max(records, 1) - 1,
            max_timestamp_ms=1_700_000_000_000 + start_offset, broker_id=0,
            event_timestamp_ms=1_700_000_000_000, segment_size_in_bytes=len(log),
            segment_leader_epochs={0: start_offset})
        return Segment(metadata, data, log, indexes)

    def retry(self, segment: Segment, *, new_id: bool, log_size: int | None = None) -> Segment:
        """Another copy attempt of the same offsets with new content, under the same id or a
        new one."""
        return self.make(segment.metadata.start_offset, partition=segment.tp.partition,
                         log_size=log_size or len(segment.log),
                         segment_id=None if new_id else segment.metadata.remote_log_segment_id)


# --------------------------------------------------------------------------------------------
# Object-store wrappers


class InjectedFault(ConnectionResetError):
    """The failure a :class:`FaultyObjectStore` injects."""


class _DelegatingStore(ObjectStore):
    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.max_delete_batch = inner.max_delete_batch  # type: ignore[misc]  # inner's, per wrapper

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        return self.inner.put(key, data, length)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        return self.inner.get(key, byte_range)

    def delete_many(self, keys: Sequence[str]) -> None:
        self.inner.delete_many(keys)

    def list(self, prefix: str) -> Iterable[ObjectInfo]:
        return self.inner.list(prefix)

    def translate_error(self, exc: BaseException, key: str | None) -> RemoteStorageError | None:
        return self.inner.translate_error(exc, key)

    def collect_garbage(self, prefix: str, older_than_ms: int, dry_run: bool = False
                        ) -> builtins.list[str]:
        return self.inner.collect_garbage(prefix, older_than_ms, dry_run)

    def close(self) -> None:
        self.inner.close()


class _FailingReader(io.RawIOBase):
    def __init__(self, inner: BinaryIO, budget: int, on_fail: Callable[[], None]) -> None:
        self._inner = inner
        self._budget = budget
        self._on_fail = on_fail

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._budget <= 0 and len(view):
            self._on_fail()
            raise InjectedFault("injected fault: connection reset mid-upload")
        chunk = self._inner.read(min(len(view), self._budget))
        n = len(chunk)
        view[:n] = chunk
        self._budget -= n
        if n == 0:
            return 0
        return n


class FaultyObjectStore(_DelegatingStore):
    """An object store that fails on purpose.

    Args:
        inner: the real store.
        fail_put_after: a put of a matching key fails after this many bytes were read from
            its data (0: before any byte; None: puts do not fail).
        fail_put_suffix: only keys ending with this suffix fail (``".log"``, ``".manifest"``);
            None: every key.
        fail_deletes: deletes fail before deleting anything.
        spare_delete_suffix: with ``fail_deletes``, a batch whose keys all end with this suffix
            is deleted anyway (to fail the cleanup of a copy but not its first step).
    """

    def __init__(self, inner: ObjectStore, *, fail_put_after: int | None = None,
                 fail_put_suffix: str | None = None, fail_deletes: bool = False,
                 spare_delete_suffix: str | None = None) -> None:
        super().__init__(inner)
        self.fail_put_after = fail_put_after
        self.fail_put_suffix = fail_put_suffix
        self.fail_deletes = fail_deletes
        self.spare_delete_suffix = spare_delete_suffix
        self.faults = 0

    def _fault(self) -> None:
        self.faults += 1

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        if self.fail_put_after is not None and (
                self.fail_put_suffix is None or key.endswith(self.fail_put_suffix)):
            reader = io.BufferedReader(_FailingReader(data, self.fail_put_after, self._fault))
            return self.inner.put(key, reader, length)
        return self.inner.put(key, data, length)

    def delete_many(self, keys: Sequence[str]) -> None:
        spared = self.spare_delete_suffix is not None and all(
            k.endswith(self.spare_delete_suffix) for k in keys)
        if self.fail_deletes and not spared:
            self.faults += 1
            raise InjectedFault("injected fault: delete refused")
        self.inner.delete_many(keys)


class _CountedStream(io.RawIOBase):
    def __init__(self, inner: BinaryIO, owner: TrackingObjectStore) -> None:
        self._inner = inner
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        chunk = self._inner.read(len(view))
        n = len(chunk)
        view[:n] = chunk
        return n

    def close(self) -> None:
        if not self.closed:
            with self._owner.lock:
                self._owner.open_streams -= 1
            self._inner.close()
        super().close()


class TrackingObjectStore(_DelegatingStore):
    """An object store that counts its calls and the streams it handed out and that are still
    open (the suite's leak check), and records every get (the cache checks count downloads).

    Attributes:
        got: ``(key, byte range or None)`` of every get, in order.
        slow_get_suffix: gets of keys ending with it wait :attr:`slow_get_seconds` before
            reading (None: no get waits); makes concurrent readers overlap.
    """

    lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, inner: ObjectStore, *, slow_get_suffix: str | None = None,
                 slow_get_seconds: float = 0.0) -> None:
        super().__init__(inner)
        self.open_streams = 0
        self.gets = 0
        self.got: list[tuple[str, ByteRange | None]] = []
        self.puts: list[str] = []
        self.deletes: list[str] = []
        self.slow_get_suffix = slow_get_suffix
        self.slow_get_seconds = slow_get_seconds

    def gets_of(self, suffix: str) -> int:
        """How many gets so far were of keys ending with ``suffix``."""
        with self.lock:
            return sum(1 for key, _ in self.got if key.endswith(suffix))

    def put(self, key: str, data: BinaryIO, length: int | None = None) -> int:
        with self.lock:
            self.puts.append(key)
        return self.inner.put(key, data, length)

    def get(self, key: str, byte_range: ByteRange | None = None) -> BinaryIO:
        with self.lock:
            self.got.append((key, byte_range))
        if self.slow_get_suffix is not None and key.endswith(self.slow_get_suffix):
            time.sleep(self.slow_get_seconds)
        stream = self.inner.get(key, byte_range)
        with self.lock:
            self.gets += 1
            self.open_streams += 1
        return io.BufferedReader(_CountedStream(stream, self))

    def delete_many(self, keys: Sequence[str]) -> None:
        with self.lock:
            self.deletes.extend(keys)
        self.inner.delete_many(keys)


def count_calls(obj: Any, method: str) -> list[tuple[Any, ...]]:
    """Record the calls of ``obj.method`` (on this instance only) and return the record."""
    calls: list[tuple[Any, ...]] = []
    original = getattr(obj, method)

    @functools.wraps(original)
    def recorder(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    setattr(obj, method, recorder)
    return calls


def objects_of_segment(store: ObjectStore, prefix: str, segment_id: str) -> list[str]:
    """The keys in ``store`` under ``prefix`` that belong to the segment id."""
    keys = []
    for info in store.list(prefix):
        parsed = parse_segment_key(info.key)
        if parsed is not None and parsed.segment_id == segment_id:
            keys.append(info.key)
    return sorted(keys)


def open_fd_count() -> int | None:
    """How many file descriptors this process has open (None where it cannot be told)."""
    for path in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(path))
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------------------------
# Encryption keys and stored objects


#: key pair id -> its private key in PEM (generated once per process: RSA generation is slow)
_RSA_PEMS: dict[str, bytes] = {}
_RSA_LOCK = threading.Lock()
#: the key size of the suite's key pairs (the smallest the core accepts)
RSA_BITS = 2048


def write_key_pair(directory: Path, key_id: str) -> dict[str, str]:
    """Write an RSA key pair for ``key_id`` as unencrypted PEM files in ``directory`` and
    return the settings naming them (``encryption.key.pairs.<id>.public.key.file`` and
    ``.private.key.file``). The same id gives the same key pair within a process."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    with _RSA_LOCK:
        pem = _RSA_PEMS.get(key_id)
        if pem is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
            pem = _RSA_PEMS[key_id] = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption())
    private = serialization.load_pem_private_key(pem, password=None)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    directory.mkdir(parents=True, exist_ok=True)
    public_path = directory / f"{key_id}-public.pem"
    private_path = directory / f"{key_id}-private.pem"
    public_path.write_bytes(public_pem)
    private_path.touch(mode=0o600)
    private_path.write_bytes(pem)
    return {f"encryption.key.pairs.{key_id}.public.key.file": str(public_path),
            f"encryption.key.pairs.{key_id}.private.key.file": str(private_path)}


def encryption_settings(directory: Path, active: str | None, pairs: Sequence[str]
                        ) -> dict[str, str]:
    """The settings of encryption at rest with the key pairs ``pairs`` (files written by
    :func:`write_key_pair` in ``directory``), ``active`` wrapping new data keys (None: a
    reader, ``encryption.enabled=false``)."""
    settings = {"encryption.enabled": "true" if active else "false",
                "encryption.key.pairs": ",".join(pairs)}
    if active:
        settings["encryption.key.pair.id"] = active
    for key_id in pairs:
        settings.update(write_key_pair(directory, key_id))
    return settings


def read_object(store: ObjectStore, key: str) -> bytes:
    """The whole stored object ``key``, read raw through ``store``."""
    return read_all(store.get(key, None))


def write_object(store: ObjectStore, key: str, data: bytes) -> None:
    """Store ``data`` under ``key`` raw through ``store`` (replacing it)."""
    store.put(key, io.BytesIO(data), len(data))


def flip_byte(data: bytes, position: int) -> bytes:
    """``data`` with every bit of the byte at ``position`` inverted."""
    return data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1:]


__all__ = [
    "ConformanceFailure",
    "FaultyObjectStore",
    "InjectedFault",
    "Segment",
    "SegmentBuilder",
    "StorageTarget",
    "TrackingObjectStore",
    "check",
    "count_calls",
    "encryption_settings",
    "expect_raises",
    "flip_byte",
    "objects_of_segment",
    "open_fd_count",
    "read_all",
    "read_object",
    "storage_test",
    "write_key_pair",
    "write_object",
]
