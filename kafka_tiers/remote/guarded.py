"""The wrapper around every storage plugin call: the broker never calls a plugin directly.

:class:`GuardedRemoteStorage` implements :class:`~kafka_tiers.api.RemoteStorageManager` by
delegating to a plugin, and on the way:

- checks arguments before the plugin sees them (types, fetch ranges that are negative or
  reversed);
- validates results (custom metadata is bytes within the size limit, a fetch returns a readable
  stream, a listing holds only the partition's segments from ``min_base_offset`` on, sorted by
  start offset, one per start offset);
- translates every foreign exception (and every exception raised while reading a returned
  stream) into :class:`~kafka_tiers.api.RemoteStorageError` naming the plugin and the
  operation, keeping the plugin's own storage errors (not-found stays not-found);
- serialises the calls (and stream reads) of a plugin that does not declare
  ``concurrent_access``;
- never lets a secret through: the values of the keys the plugin declares secret
  (``SECRET_KEYS``, see :mod:`kafka_tiers.plugins.secrets`) reach it as
  :class:`~kafka_tiers.api.Secret`, they and every other live secret are replaced by
  ``<hidden>`` in every message it raises or logs, and the foreign exception chain is dropped;
- offers the optional operations (:data:`OPTIONAL_OPERATIONS`: orphan collection, reading a
  segment's manifest, object keys, listing topics and partitions) as methods of its own, with
  the same lock, checks and redaction; a plugin without one raises
  :class:`UnsupportedStorageOperationError` naming the plugin and the operation
  (:meth:`GuardedRemoteStorage.supports` asks first).

Nothing outside this module unwraps a guard (tests/remote/test_guard_boundary.py checks it).
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, BinaryIO, TypeVar

from kafka_tiers.api import (
    IndexType,
    KafkaTiersError,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteStorageError,
    RemoteStorageManager,
    StorageCapability,
    TopicPartition,
)
from kafka_tiers.api.secret import Secret
from kafka_tiers.api.storage import check_range
from kafka_tiers.plugins.secrets import secret_config, secret_keys_of

log = logging.getLogger(__name__)

#: Kafka's default ``remote.log.metadata.custom.metadata.max.bytes``.
DEFAULT_CUSTOM_METADATA_MAX_BYTES = 128

#: The operations beyond the RemoteStorageManager contract that the guard offers when the
#: plugin has them (the core's storage manager built on an object store has them all).
OPTIONAL_OPERATIONS = ("collect_orphans", "read_manifest", "object_key", "list_topics",
                       "list_partitions", "prefetch", "rekey", "describe_segment",
                       "cache_stats")


T = TypeVar("T")


def secret_values(config: Mapping[str, str | Secret], keys: Iterable[str] = ()
                  ) -> list[Secret]:
    """The secrets of a plugin's ``config``, for the guard to hide from foreign exception text:
    the values already held as :class:`~kafka_tiers.api.Secret`, and the values of ``keys``
    (the plugin's declared ``SECRET_KEYS``, :func:`~kafka_tiers.plugins.secrets.secret_keys_of`)
    wrapped. What is secret is declared by the plugin, never guessed from key names."""
    return [v for v in secret_config(config, keys).values()
            if isinstance(v, Secret) and v]


class UnsupportedStorageOperationError(RemoteStorageError):
    """The storage plugin does not offer an optional operation (not retriable).

    Attributes:
        operation: the operation asked for (one of :data:`OPTIONAL_OPERATIONS`).
    """

    def __init__(self, message: str, *, plugin: str, operation: str) -> None:
        super().__init__(message, plugin=plugin, retriable=False)
        self.operation = operation


class GuardedRemoteStorage(RemoteStorageManager):
    """A storage plugin behind the core's checks (see the module docstring).

    Args:
        plugin: the configured plugin.
        name: its name in messages (the entry-point name or import path it was loaded by).
        secrets: secrets never to repeat beyond the live ones (:func:`secret_values` of its
            config); a ``str`` is wrapped in a :class:`~kafka_tiers.api.Secret`.
        custom_metadata_max_bytes: the most custom metadata a copy may return.
    """

    def __init__(self, plugin: RemoteStorageManager, name: str, *,
                 secrets: Iterable[Secret | str] = (),
                 custom_metadata_max_bytes: int = DEFAULT_CUSTOM_METADATA_MAX_BYTES) -> None:
        if not isinstance(plugin, RemoteStorageManager):
            raise TypeError(f"{name}: not a RemoteStorageManager: {type(plugin).__name__}")
        self._plugin = plugin
        self._name = name
        self._secrets = [Secret(s) if isinstance(s, str) else s for s in secrets if s]
        self._max_custom = custom_metadata_max_bytes
        self.CAPABILITIES = frozenset(  # type: ignore[misc]  # per guard: its plugin's
            plugin.CAPABILITIES)
        # A plugin that does not declare concurrent_access gets one call at a time (reads of
        # its streams included).
        self._lock: threading.RLock | contextlib.nullcontext[None] = (
            contextlib.nullcontext() if StorageCapability.CONCURRENT_ACCESS in self.CAPABILITIES
            else threading.RLock())

    @classmethod
    def load(cls, name_or_path: str, config: Mapping[str, str | Secret] | None = None,
             **kwargs: Any) -> GuardedRemoteStorage:
        """Load, configure and wrap a storage plugin by entry-point name or import path.

        Raises:
            PluginError, ConfigError: as :func:`kafka_tiers.plugins.load_remote_storage`.
        """
        from kafka_tiers.plugins import load_remote_storage

        cfg = dict(config or {})
        plugin = load_remote_storage(name_or_path, cfg)
        return cls(plugin, name_or_path, secrets=secret_values(cfg, secret_keys_of(plugin)),
                   **kwargs)

    @property
    def name(self) -> str:
        """The plugin's name in messages."""
        return self._name

    # -- plumbing ----------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with every secret (the plugin's, and every other live
        :class:`~kafka_tiers.api.Secret`) replaced by ``<hidden>``."""
        return Secret.hide(text, self._secrets)

    def _error(self, op: str, exc: BaseException, segment_id: str | None) -> RemoteStorageError:
        prefix = f"storage plugin {self._name!r}"
        if isinstance(exc, RemoteStorageError):
            message = self.redact(str(exc))
            if not message.startswith(prefix):
                message = f"{prefix}: {op}: {message}"
            exc.args = (message,)
            if exc.plugin is None:
                exc.plugin = self._name
            if exc.segment_id is None:
                exc.segment_id = segment_id
            err = exc
        else:
            retriable = isinstance(exc, TimeoutError | ConnectionError)
            kind = "error" if isinstance(exc, KafkaTiersError) else "unexpected error"
            err = RemoteStorageError(
                f"{prefix} failed in {op}: {kind} {type(exc).__name__}: "
                f"{self.redact(str(exc))}", plugin=self._name, segment_id=segment_id,
                retriable=retriable)
        # The error is raised to the caller, who reports it once (the remote log manager's
        # task log line, the CLI's error line); a warning here would say it twice.
        log.debug("%s", err)
        return err

    def _call(self, op: str, segment_id: str | None, fn: Callable[..., T], *args: Any) -> T:
        log.debug("storage plugin %r: %s %s", self._name, op, segment_id or "")
        try:
            with self._lock:
                return fn(*args)
        except Exception as exc:
            raise self._error(op, exc, segment_id) from None

    def _invalid(self, op: str, problem: str, segment_id: str | None = None
                 ) -> RemoteStorageError:
        err = RemoteStorageError(
            f"storage plugin {self._name!r} broke its contract in {op}: {problem}",
            plugin=self._name, segment_id=segment_id, retriable=False)
        log.error("%s", err)
        return err

    @staticmethod
    def _check_metadata(metadata: Any) -> RemoteLogSegmentMetadata:
        if not isinstance(metadata, RemoteLogSegmentMetadata):
            raise RemoteStorageError(
                f"expected RemoteLogSegmentMetadata, got {type(metadata).__name__}")
        return metadata

    def _stream(self, op: str, result: Any, segment_id: str) -> BinaryIO:
        if not (callable(getattr(result, "read", None))
                and callable(getattr(result, "close", None))):
            close = getattr(result, "close", None)
            if callable(close):
                close()
            raise self._invalid(op, f"returned {type(result).__name__}, not a readable stream",
                                segment_id)
        return io.BufferedReader(
            _GuardedStream(result, lambda exc: self._error(f"{op} (reading)", exc, segment_id),
                           self._lock))

    # -- the contract ------------------------------------------------------------------------

    def configure(self, config: Mapping[str, str | Secret]) -> None:
        """Reconfigure the plugin (it was configured when loaded); the values of the keys it
        declares secret reach it as :class:`~kafka_tiers.api.Secret`."""
        keys = secret_keys_of(self._plugin)
        self._secrets = [*self._secrets, *secret_values(config, keys)]
        self._call("configure", None, self._plugin.configure, secret_config(config, keys))

    def close(self) -> None:
        self._call("close", None, self._plugin.close)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        md = self._check_metadata(metadata)
        if not isinstance(data, LogSegmentData):
            raise RemoteStorageError(f"expected LogSegmentData, got {type(data).__name__}")
        result = self._call("copy_log_segment_data", md.segment_id,
                            self._plugin.copy_log_segment_data, md, data)
        if result is None:
            return None
        if not isinstance(result, bytes | bytearray):
            raise self._invalid("copy_log_segment_data", f"returned {type(result).__name__} "
                                "as custom metadata, not bytes or None", md.segment_id)
        if len(result) > self._max_custom:
            raise self._invalid("copy_log_segment_data", f"returned {len(result)} bytes of "
                                f"custom metadata, more than the limit of {self._max_custom}",
                                md.segment_id)
        return bytes(result)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> BinaryIO:
        md = self._check_metadata(metadata)
        check_range(start_position, end_position, segment_id=md.segment_id)
        result = self._call("fetch_log_segment", md.segment_id, self._plugin.fetch_log_segment,
                            md, start_position, end_position)
        return self._stream("fetch_log_segment", result, md.segment_id)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        md = self._check_metadata(metadata)
        if not isinstance(index_type, IndexType):
            raise RemoteStorageError(f"unknown index type {index_type!r}")
        result = self._call(f"fetch_index {index_type.name}", md.segment_id,
                            self._plugin.fetch_index, md, index_type)
        if result is None:
            raise self._invalid("fetch_index", f"returned None for {index_type.name}; a "
                                "missing index must raise RemoteResourceNotFoundError",
                                md.segment_id)
        return self._stream(f"fetch_index {index_type.name}", result, md.segment_id)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        md = self._check_metadata(metadata)
        self._call("delete_log_segment_data", md.segment_id,
                   self._plugin.delete_log_segment_data, md)

    def list_remote_segments(self, topic_partition: TopicPartition,
                             min_base_offset: int = 0) -> list[RemoteLogSegmentMetadata]:
        if not isinstance(topic_partition, TopicPartition):
            raise RemoteStorageError(f"expected TopicPartition, got {topic_partition!r}")
        result = self._call("list_remote_segments", None, self._plugin.list_remote_segments,
                            topic_partition, min_base_offset)
        op = "list_remote_segments"
        try:
            items = list(result)
        except TypeError:
            raise self._invalid(op, f"returned {type(result).__name__}, not a list") from None
        previous = None
        for md in items:
            if not isinstance(md, RemoteLogSegmentMetadata):
                raise self._invalid(op, f"listed a {type(md).__name__}")
            if md.topic_partition != topic_partition:
                raise self._invalid(op, f"listed segment {md.remote_log_segment_id} of "
                                    f"another partition than {topic_partition}")
            if md.start_offset < min_base_offset:
                raise self._invalid(op, f"listed start offset {md.start_offset} below "
                                    f"min_base_offset {min_base_offset}")
            if previous is not None and md.start_offset <= previous:
                raise self._invalid(op, f"listed start offset {md.start_offset} after "
                                    f"{previous}: not sorted, or two copies of one start offset")
            previous = md.start_offset
        return items

    def delete_topic_partition(self, topic_partition: TopicPartition) -> None:
        if not isinstance(topic_partition, TopicPartition):
            raise RemoteStorageError(f"expected TopicPartition, got {topic_partition!r}")
        self._call("delete_topic_partition", None, self._plugin.delete_topic_partition,
                   topic_partition)


    # -- optional operations -----------------------------------------------------------------

    def supports(self, operation: str) -> bool:
        """Whether the plugin offers the optional ``operation``.

        Raises:
            ValueError: ``operation`` is not one of :data:`OPTIONAL_OPERATIONS`.
        """
        if operation not in OPTIONAL_OPERATIONS:
            raise ValueError(f"unknown optional storage operation {operation!r}; known: "
                             f"{', '.join(OPTIONAL_OPERATIONS)}")
        return callable(getattr(self._plugin, operation, None))

    def _optional(self, operation: str) -> Callable[..., Any]:
        if not self.supports(operation):
            raise UnsupportedStorageOperationError(
                f"storage plugin {self._name!r} does not support {operation} (it is not built "
                "on the object-store level)", plugin=self._name, operation=operation)
        fn: Callable[..., Any] = getattr(self._plugin, operation)
        return fn

    def collect_orphans(self, min_age_ms: int, topic_partition: TopicPartition | None = None,
                        *, now_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete the garbage of the remote tier at least ``min_age_ms`` old (of one partition,
        or everything) and return its keys, sorted; ``dry_run`` only lists it. Under the
        plugin's lock, with its errors translated and redacted like every call.

        Raises:
            UnsupportedStorageOperationError: the plugin cannot collect orphans.
            RemoteStorageError: the collection failed (repeat it).
        """
        op = "collect_orphans"
        if isinstance(min_age_ms, bool) or not isinstance(min_age_ms, int) or min_age_ms < 0:
            raise RemoteStorageError(f"min_age_ms must be an int >= 0, got {min_age_ms!r}")
        if topic_partition is not None and not isinstance(topic_partition, TopicPartition):
            raise RemoteStorageError(f"expected TopicPartition, got {topic_partition!r}")
        fn = self._optional(op)
        result = self._call(op, None, lambda: fn(min_age_ms, topic_partition, now_ms=now_ms,
                                                 dry_run=dry_run))
        return self._strings(op, result)

    def read_manifest(self, metadata: RemoteLogSegmentMetadata) -> Any:
        """The manifest of a segment (a :class:`kafka_tiers.objectstore.SegmentManifest`).

        Raises:
            UnsupportedStorageOperationError: the plugin keeps no manifests.
            RemoteResourceNotFoundError: the segment has no manifest.
            RemoteStorageError: reading or parsing it failed.
        """
        from kafka_tiers.objectstore.manifest import SegmentManifest

        md = self._check_metadata(metadata)
        fn = self._optional("read_manifest")
        result = self._call("read_manifest", md.segment_id, fn, md)
        if not isinstance(result, SegmentManifest):
            raise self._invalid("read_manifest", f"returned {type(result).__name__}, not a "
                                "SegmentManifest", md.segment_id)
        return result

    def prefetch(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                 size: int) -> None:
        """Ask the plugin to start loading the log bytes ``start_position`` ..
        ``start_position + size - 1`` of a segment into its chunk cache; returns at once (a
        hint: the loads run on the plugin's own threads).

        Raises:
            UnsupportedStorageOperationError: the plugin cannot prefetch.
            RemoteStorageError: a bad position or size, or the segment's manifest could not be
                read.
        """
        md = self._check_metadata(metadata)
        for name, value in (("start_position", start_position), ("size", size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise RemoteStorageError(f"prefetch: {name} must be an int >= 0, got "
                                         f"{value!r}", segment_id=md.segment_id)
        fn = self._optional("prefetch")
        self._call("prefetch", md.segment_id, fn, md, start_position, size)

    def rekey(self, metadata: RemoteLogSegmentMetadata) -> bool:
        """Re-wrap a segment's data key with the plugin's active key pair (its manifest
        rewritten, its data untouched).

        Returns:
            True when rewritten; False when not encrypted or already on the active pair.

        Raises:
            UnsupportedStorageOperationError: the plugin cannot rekey.
            RemoteStorageError: the rewrite failed (a
                :class:`~kafka_tiers.api.ManifestError` names a missing key pair id).
        """
        md = self._check_metadata(metadata)
        result = self._call("rekey", md.segment_id, self._optional("rekey"), md)
        if not isinstance(result, bool):
            raise self._invalid("rekey", f"returned {type(result).__name__}, not a bool",
                                md.segment_id)
        return result

    def describe_segment(self, metadata: RemoteLogSegmentMetadata) -> dict[str, Any]:
        """How a segment is stored (format version, chunks, sizes, ratio, compression, key
        id), from its manifest alone.

        Raises:
            UnsupportedStorageOperationError: the plugin cannot describe segments.
            RemoteStorageError: reading the manifest failed.
        """
        md = self._check_metadata(metadata)
        result = self._call("describe_segment", md.segment_id,
                            self._optional("describe_segment"), md)
        if not isinstance(result, dict):
            raise self._invalid("describe_segment", f"returned {type(result).__name__}, not "
                                "a dict", md.segment_id)
        return result

    def cache_stats(self) -> dict[str, Any]:
        """The plugin's data-path counters (chunk cache, manifest cache, downloads).

        Raises:
            UnsupportedStorageOperationError: the plugin has no such counters.
        """
        result = self._call("cache_stats", None, self._optional("cache_stats"))
        if not isinstance(result, dict):
            raise self._invalid("cache_stats", f"returned {type(result).__name__}, not a dict")
        return result

    def object_key(self, metadata: RemoteLogSegmentMetadata, kind: str = "log") -> str:
        """The key of one object of a segment; ``kind`` is an object kind's value (``log``,
        ``index``, ``timeindex``, ``snapshot``, ``txnindex``, ``leader-epoch-checkpoint``,
        ``manifest``).

        Raises:
            UnsupportedStorageOperationError: the plugin has no object keys.
            RemoteStorageError: an unknown kind, or the topic cannot be stored.
        """
        from kafka_tiers.objectstore.keys import ObjectKind

        md = self._check_metadata(metadata)
        fn = self._optional("object_key")
        try:
            object_kind = ObjectKind(kind)
        except ValueError:
            raise RemoteStorageError(f"unknown object kind {kind!r}") from None
        result = self._call("object_key", md.segment_id, fn, md, object_kind)
        if not isinstance(result, str):
            raise self._invalid("object_key", f"returned {type(result).__name__}, not a str",
                                md.segment_id)
        return result

    def list_topics(self) -> list[str]:
        """Every topic with data in the remote tier, sorted.

        Raises:
            UnsupportedStorageOperationError: the plugin cannot list its topics.
            RemoteStorageError: the listing failed.
        """
        return self._strings("list_topics",
                             self._call("list_topics", None, self._optional("list_topics")))

    def list_partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` with segments in the remote tier, sorted.

        Raises:
            UnsupportedStorageOperationError: the plugin cannot list partitions.
            RemoteStorageError: the listing failed.
        """
        op = "list_partitions"
        if not isinstance(topic, str):
            raise RemoteStorageError(f"expected a topic name, got {topic!r}")
        result = self._call(op, None, self._optional(op), topic)
        try:
            items = list(result)
        except TypeError:
            raise self._invalid(op, f"returned {type(result).__name__}, not a list") from None
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in items):
            raise self._invalid(op, "listed something other than partition numbers")
        return sorted(items)

    def _strings(self, op: str, result: Any) -> list[str]:
        try:
            items = list(result)
        except TypeError:
            raise self._invalid(op, f"returned {type(result).__name__}, not a list") from None
        if not all(isinstance(i, str) for i in items):
            raise self._invalid(op, "returned something other than strings")
        return sorted(items)


def guard(storage: RemoteStorageManager, name: str | None = None) -> GuardedRemoteStorage:
    """``storage`` itself when it is already behind the guard, else a new guard around it
    (named ``name``, default its class name) without secrets to hide."""
    if isinstance(storage, GuardedRemoteStorage):
        return storage
    return GuardedRemoteStorage(storage, name or type(storage).__name__)


class _GuardedStream(io.RawIOBase):
    """A plugin's stream whose read errors become kafka-tiers errors."""

    def __init__(self, inner: Any, translate: Callable[[BaseException], RemoteStorageError],
                 lock: Any) -> None:
        self._inner = inner
        self._translate = translate
        self._lock = lock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if isinstance(self._inner, io.BufferedIOBase):  # straight into the buffer: no copy
            try:
                with self._lock:
                    got = self._inner.readinto(view)
            except Exception as exc:
                raise self._translate(exc) from None
            if got is None:
                return 0
            if isinstance(got, bool) or not isinstance(got, int) or not 0 <= got <= len(view):
                raise self._translate(ValueError(f"stream's readinto returned {got!r} for a "
                                                 f"read of {len(view)}"))
            return got
        try:
            with self._lock:
                chunk = self._inner.read(len(view))
        except Exception as exc:
            raise self._translate(exc) from None
        if chunk is None:
            return 0
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise self._translate(TypeError(f"stream returned {type(chunk).__name__}"))
        n = len(chunk)
        if n > len(view):
            raise self._translate(ValueError(f"stream returned {n} bytes for a read of "
                                             f"{len(view)}"))
        view[:n] = chunk
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                with self._lock:
                    self._inner.close()
            except Exception as exc:
                raise self._translate(exc) from None
            finally:
                super().close()


__all__ = [
    "DEFAULT_CUSTOM_METADATA_MAX_BYTES",
    "OPTIONAL_OPERATIONS",
    "GuardedRemoteStorage",
    "UnsupportedStorageOperationError",
    "guard",
    "secret_values",
]
