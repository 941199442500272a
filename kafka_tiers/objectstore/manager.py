"""The storage manager built on an object store: the whole storage contract over four calls.

:class:`ObjectStoreRemoteStorageManager` implements
:class:`~kafka_tiers.api.RemoteStorageManager` on top of an :class:`~kafka_tiers.api.ObjectStore`
(the layout is :mod:`kafka_tiers.objectstore.keys`', the manifest
:mod:`kafka_tiers.objectstore.manifest`'s).

Commit protocol
    A copy first deletes any manifest of the same segment id (so an earlier attempt stops being
    visible), writes the data and index objects, and writes the manifest last, once every one of
    them is stored. A segment exists for readers only once its manifest does. A store whose
    ``put`` is thread-safe may declare :attr:`ObjectStore.max_concurrent_puts` above 1: once
    the log is stored, the index objects are then written all at once (they are small: a remote
    store spends their time waiting for round trips), the manifest still after all of them. The
    log goes first so that a failure of its (long) upload, an outage, leaves nothing committed
    that the cleanup would then be unable to delete. When any step fails, everything the
    attempt wrote is deleted once nothing of it is in flight (best effort; what cannot be
    deleted is unreferenced garbage that
    :meth:`ObjectStoreRemoteStorageManager.collect_orphans` removes later). A delete removes the
    manifest first, then the data.

Data path (format 3 manifests, :mod:`kafka_tiers.objectstore.manifest`)
    The log is cut into chunks of ``chunk.size`` original bytes, each encoded on its own by the
    segment's :class:`~kafka_tiers.objectstore.transforms.SegmentTransform` (zstd when
    ``compression.enabled``, unless ``compression.heuristic.enabled`` and the first batch is
    already compressed; AES-256-GCM with a fresh data key per segment when
    ``encryption.enabled``, the data key wrapped with the active key pair) and streamed into
    one ``.log`` object, the original and stored CRC-32C computed in the same pass. The five
    indexes are encoded too and kept inline in the manifest when they total at most
    :data:`INLINE_INDEXES_MAX` stored bytes, else in one ``.indexes`` object. A fetch reads
    only the chunks covering its range (one ranged read per chunk, through the chunk cache and
    the single-flight :class:`~kafka_tiers.objectstore.chunk_loader.ChunkLoader`), and returns
    a lazy stream. Manifests are cached (``fetch.manifest.cache.*``). Segments of format 1 and
    2 are read through the same path as identity chunks of ``chunk.size``.

Listing
    From the manifests only. When several manifests share a start offset (a copy retried with a
    new segment id), the one with the highest commit sequence (nanoseconds since the epoch,
    strictly increasing within a process) is listed; the others stay readable by their own
    metadata until deleted, and are garbage for ``collect_orphans`` once older than its age.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

from kafka_tiers.api.cluster import TopicPartition
from kafka_tiers.api.errors import (
    InvalidRangeError,
    KafkaTiersError,
    ManifestError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)
from kafka_tiers.api.objectstore import ByteRange, ObjectInfo, ObjectStore, default_translate
from kafka_tiers.api.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteStorageManager,
    StorageCapability,
    check_range,
)
from kafka_tiers.log.records import HEADER_SIZE
from kafka_tiers.objectstore.chunk_cache import build_chunk_cache
from kafka_tiers.objectstore.chunk_index import MAX_CHUNKS, ChunkIndex
from kafka_tiers.objectstore.chunk_loader import ChunkLoader
from kafka_tiers.objectstore.data_settings import DataSettings
from kafka_tiers.objectstore.encryption import UnknownKeyError, new_data_key
from kafka_tiers.objectstore.keys import (
    INDEX_KINDS,
    ObjectKind,
    ParsedKey,
    normalize_prefix,
    parse_segment_key,
    partition_prefix,
    segment_key,
    validate_key,
)
from kafka_tiers.objectstore.manifest import (
    CRC32C,
    MAX_MANIFEST_BYTES,
    ManifestObject,
    SegmentManifest,
    WrappedDataKey,
    new_hasher,
    next_commit_sequence,
)
from kafka_tiers.objectstore.manifest_cache import ManifestCache
from kafka_tiers.objectstore.segment_stream import ChunkedSegmentStream
from kafka_tiers.objectstore.sequential_read import ReadAheadStream, ReadAheadStreams
from kafka_tiers.objectstore.streams import (
    COPY_CHUNK,
    CopyCancelled,
    EncodingReader,
    HashingReader,
    LazyManagedStream,
    LocalReadError,
    ManagedStream,
    managed,
)
from kafka_tiers.objectstore.transforms import (
    ENCRYPTION_OVERHEAD,
    ZSTD,
    CorruptChunkError,
    SegmentTransform,
    batches_compressed,
    index_label,
    log_label,
    segment_context,
)

log = logging.getLogger(__name__)

#: Chunks of a copy encoded at once (compressed, encrypted) ahead of its upload: the encoding
#: overlaps the put and uses two cores, holding at most three chunks of the copy at once.
ENCODE_WORKERS = 2
#: The fewest bytes a prefetch reads with one ranged read (whole chunks of a span).
SPAN_MIN_BYTES = 16 << 20

#: (manager base, store class) -> the manager class made by ``for_store``
_MANAGER_CLASSES: dict[tuple[type, type], Any] = {}
_MANAGER_CLASSES_LOCK = threading.Lock()


#: Indexes whose stored bytes total at most this are kept inline in the manifest.
INLINE_INDEXES_MAX = 64 << 10
#: Segments whose last read position is remembered to detect sequential reads.
_SEQUENTIAL_TRACKED = 1024


@dataclass(frozen=True, slots=True)
class _Source:
    kind: ObjectKind
    path: str | None
    content: bytes | None


@dataclass(frozen=True, slots=True)
class _Segment:
    """A committed segment as the fetch path reads it (what the manifest cache holds)."""

    manifest: SegmentManifest
    chunks: ChunkIndex
    transform: SegmentTransform
    log_key: str
    indexes_key: str


class ObjectStoreRemoteStorageManager(RemoteStorageManager):
    """The whole :class:`RemoteStorageManager` contract on top of an :class:`ObjectStore`.

    The core builds one around every store registered in ``kafka_tiers.object_store``:
    :meth:`for_store` makes the manager class of a store class (its capabilities are the
    store's plus this level's). See the module docstring for the key layout, the commit
    protocol, the manifest and listing rules.

    Config keys (besides the store's own, which :meth:`ObjectStore.from_config` reads):
        ``key.prefix``: prepended to every key (default empty).

    Class attributes:
        store_class: the store built by :meth:`create_object_store` (None on this base class).
    """

    CAPABILITIES: ClassVar[frozenset[str]] = frozenset({
        StorageCapability.FAULT_INJECTION, StorageCapability.ORPHAN_COLLECTION,
        StorageCapability.LARGE_SEGMENTS, StorageCapability.DATA_TRANSFORMS,
    })
    store_class: ClassVar[type[ObjectStore] | None] = None

    _store: ObjectStore | None = None
    _prefix: str = ""
    _settings: DataSettings = DataSettings()
    _loader: ChunkLoader | None = None
    _manifests_cache: ManifestCache[_Segment] | None = None

    def __init__(self) -> None:
        self._store = None
        self._prefix = ""
        self._settings = DataSettings()
        self._loader = None
        self._manifests_cache = None
        self._reads_lock = threading.Lock()
        self._last_reads: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._read_ahead = ReadAheadStreams()

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def for_store(cls, store_class: type[ObjectStore]) -> type[ObjectStoreRemoteStorageManager]:
        """The manager class of ``store_class``: it builds the store with
        ``store_class.from_config(config)``, declares this level's capabilities plus the
        store's :attr:`ObjectStore.CAPABILITIES`, and carries the store's ``SUPPORTED_SPI``.
        The same store class always gives the same manager class.

        Raises:
            TypeError: ``store_class`` is not an :class:`ObjectStore` class.
        """
        if not (isinstance(store_class, type) and issubclass(store_class, ObjectStore)):
            raise TypeError(f"not an ObjectStore class: {store_class!r}")
        with _MANAGER_CLASSES_LOCK:
            made = _MANAGER_CLASSES.get((cls, store_class))
            if made is None:
                made = _MANAGER_CLASSES[(cls, store_class)] = cls._manager_class(store_class)
            return made

    @classmethod
    def _manager_class(cls, store_class: type[ObjectStore]
                       ) -> type[ObjectStoreRemoteStorageManager]:
        attrs: dict[str, Any] = {
            "store_class": store_class,
            "CAPABILITIES": cls.CAPABILITIES | frozenset(store_class.CAPABILITIES),
            "__module__": store_class.__module__,
            "__qualname__": f"{store_class.__qualname__}.StorageManager",
            "__doc__": f"The storage manager the core builds around "
                       f"{store_class.__module__}.{store_class.__qualname__}.",
        }
        # the loader reads these off the class: the store's SPI range, and its credential
        # keys (kafka_tiers.api.secret), wrapped before from_config
        spi = getattr(store_class, "SUPPORTED_SPI", None)
        if spi is not None:
            attrs["SUPPORTED_SPI"] = spi
        attrs["SECRET_KEYS"] = frozenset(getattr(store_class, "SECRET_KEYS", ()))
        return type(f"{store_class.__name__}StorageManager", (cls,), attrs)

    def create_object_store(self, config: Mapping[str, str]) -> ObjectStore:
        """Build the object store from the plugin's config (all keys, ``key.prefix``
        included): ``store_class.from_config(config)``.

        Raises:
            ConfigError: a bad value (from the store).
            RemoteStorageError: no :attr:`store_class` (the base class itself).
        """
        if self.store_class is None:
            raise RemoteStorageError(f"{type(self).__name__} has no store_class: build the "
                                     "manager class with for_store(store_class)")
        return self.store_class.from_config(config)

    def configure(self, config: Mapping[str, str]) -> None:
        """Read ``key.prefix`` and the data-path settings
        (:class:`~kafka_tiers.objectstore.data_settings.DataSettings`), build the chunk cache,
        the chunk loader, the manifest cache, and the store with :meth:`create_object_store`
        (it receives every key and ignores the data-path ones); the key prefix in use is the
        store's :attr:`ObjectStore.base_prefix` with ``key.prefix`` nested below it.

        Raises:
            ConfigError: a bad value (from the store, the data-path settings or an unsafe
                prefix).
        """
        from kafka_tiers.api.errors import ConfigError

        settings = DataSettings.from_config(config)
        try:
            prefix = normalize_prefix(config.get("key.prefix", ""))
        except RemoteStorageError as exc:
            raise ConfigError(str(exc), key="key.prefix",
                              expected="/-separated parts of A-Z a-z 0-9 . _ - = + , @ ~"
                              ) from None
        store = self.create_object_store(config)
        try:
            base = normalize_prefix(store.base_prefix)
        except RemoteStorageError as exc:
            store.close()
            raise ConfigError(f"the store's base prefix: {exc}",
                              expected="/-separated parts of A-Z a-z 0-9 . _ - = + , @ ~"
                              ) from None
        try:
            cache = build_chunk_cache(settings.cache)
        except BaseException:
            store.close()
            raise
        self._close_data_path()
        self._settings = settings
        self._loader = ChunkLoader(cache, settings.download_threads)
        self._manifests_cache = ManifestCache(settings.manifest_cache_size,
                                              settings.manifest_cache_retention_ms)
        self._prefix = "/".join(p for p in (base, prefix) if p)
        self._store = store

    def close(self) -> None:
        store, self._store = self._store, None
        try:
            self._close_data_path()
        finally:
            if store is not None:
                store.close()

    def _close_data_path(self) -> None:
        self._read_ahead.close()
        loader, self._loader = self._loader, None
        self._manifests_cache = None
        if loader is not None:
            loader.close()
            if loader.cache is not None:
                loader.cache.close()

    @property
    def data_settings(self) -> DataSettings:
        """The data-path settings in use (defaults until :meth:`configure`)."""
        return self._settings

    @property
    def chunk_loader(self) -> ChunkLoader:
        """The loader (and its chunk cache) every chunk read goes through; built with the
        default settings when :meth:`configure` has not run (a manager set up by hand)."""
        if self._loader is None:
            self._loader = ChunkLoader(build_chunk_cache(self._settings.cache),
                                       self._settings.download_threads)
        return self._loader

    @property
    def _segment_cache(self) -> ManifestCache[_Segment]:
        if self._manifests_cache is None:
            self._manifests_cache = ManifestCache(self._settings.manifest_cache_size,
                                                  self._settings.manifest_cache_retention_ms)
        return self._manifests_cache

    @property
    def object_store(self) -> ObjectStore:
        """The store in use.

        Raises:
            RemoteStorageError: :meth:`configure` has not been called (or after close).
        """
        if self._store is None:
            raise RemoteStorageError(f"{type(self).__name__} is not configured (or closed)")
        return self._store

    @property
    def key_prefix(self) -> str:
        """The configured ``key.prefix`` without surrounding slashes."""
        return self._prefix

    def wrap_object_store(self, wrapper: Callable[[ObjectStore], ObjectStore]) -> None:
        """Replace the store with ``wrapper(store)``: for instrumentation and fault injection
        (the conformance suite wraps stores to fail after N bytes and to count open
        streams)."""
        self._store = wrapper(self.object_store)

    # -- plumbing ----------------------------------------------------------------------------

    def _translate(self, exc: BaseException, key: str | None,
                   segment_id: str | None) -> RemoteStorageError:
        if isinstance(exc, RemoteStorageError):
            err = exc
        elif isinstance(exc, KafkaTiersError):
            err = RemoteStorageError(f"{type(exc).__name__}: {exc}", resource=key)
        else:
            err = self.object_store.translate_error(exc, key) or default_translate(exc, key)
        if err.segment_id is None:
            err.segment_id = segment_id
        return err

    def _call(self, fn: Callable[..., Any], *args: Any, key: str | None = None,
              segment_id: str | None = None) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise self._translate(exc, key, segment_id) from exc

    def _key(self, segment_id: RemoteLogSegmentId, start_offset: int, kind: ObjectKind) -> str:
        return validate_key(segment_key(self._prefix, segment_id, start_offset, kind))

    def _all_keys(self, md: RemoteLogSegmentMetadata) -> dict[ObjectKind, str]:
        return {k: self._key(md.remote_log_segment_id, md.start_offset, k) for k in ObjectKind}

    def _delete(self, keys: Sequence[str], segment_id: str | None = None) -> None:
        store = self.object_store
        batch = max(1, int(store.max_delete_batch))
        for i in range(0, len(keys), batch):
            chunk = list(keys[i:i + batch])
            self._call(store.delete_many, chunk, key=chunk[0], segment_id=segment_id)

    def _read_all(self, key: str, segment_id: str | None) -> bytes:
        """A manifest's bytes: at most :data:`MAX_MANIFEST_BYTES` + 1 are read (so
        :meth:`SegmentManifest.from_json` refuses a longer one without holding it)."""
        stream = self._call(self.object_store.get, key, None, key=key, segment_id=segment_id)
        try:
            parts: list[bytes] = []
            held = 0
            while held <= MAX_MANIFEST_BYTES:
                part = self._call(stream.read, MAX_MANIFEST_BYTES + 1 - held, key=key,
                                  segment_id=segment_id)
                if not part:
                    break
                parts.append(part)
                held += len(part)
            return b"".join(parts)
        finally:
            stream.close()

    def _put_source(self, key: str, source: _Source, segment_id: str,
                    cancel: threading.Event | None = None) -> tuple[int, str]:
        if source.content is not None:
            data = source.content
            self._call(self.object_store.put, key, io.BytesIO(data), len(data), key=key,
                       segment_id=segment_id)
            hasher = new_hasher(CRC32C)
            hasher.update(data)
            return len(data), hasher.hexdigest()
        assert source.path is not None
        try:
            # unbuffered: the hashing reader reads straight into its caller's buffer
            fh = open(source.path, "rb", buffering=0)  # noqa: SIM115 - closed in the finally
            length = os.fstat(fh.fileno()).st_size
        except OSError as exc:
            raise RemoteStorageError(
                f"cannot read local file {source.path}: {exc.strerror or exc}",
                segment_id=segment_id, retriable=False) from None
        try:
            reader = HashingReader(fh, source.path, length, cancel)
            buffered = io.BufferedReader(reader, buffer_size=COPY_CHUNK)
            try:
                stored = self._call(self.object_store.put, key, buffered, length, key=key,
                                    segment_id=segment_id)
            except RemoteStorageError as exc:
                cause = exc.__cause__
                if isinstance(cause, LocalReadError):
                    raise RemoteStorageError(str(cause), segment_id=segment_id,
                                             retriable=False) from None
                raise
            if reader.count != length or (isinstance(stored, int) and stored != length):
                raise RemoteStorageError(
                    f"stored {stored} of {length} bytes of {source.path} under {key}",
                    segment_id=segment_id, resource=key)
            return length, reader.digest.hexdigest()
        finally:
            fh.close()

    def read_manifest(self, metadata: RemoteLogSegmentMetadata) -> SegmentManifest:
        """The manifest of a segment.

        Raises:
            RemoteResourceNotFoundError: the segment has no manifest (never copied, failed
                copy, deleted).
            ManifestError: the manifest is unreadable or of an unknown format version.
        """
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset,
                        ObjectKind.MANIFEST)
        try:
            raw = self._read_all(key, metadata.segment_id)
        except RemoteResourceNotFoundError:
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} (start offset "
                f"{metadata.start_offset}) is not in the remote tier",
                segment_id=metadata.segment_id, resource="segment") from None
        manifest = SegmentManifest.from_json(raw, key)
        if manifest.metadata.remote_log_segment_id != metadata.remote_log_segment_id:
            raise ManifestError(f"manifest {key} describes segment "
                                f"{manifest.metadata.remote_log_segment_id}", key=key,
                                segment_id=metadata.segment_id)
        return manifest

    def object_key(self, metadata: RemoteLogSegmentMetadata, kind: ObjectKind) -> str:
        """The key of one object of a segment (whether or not it is stored).

        Raises:
            RemoteStorageError: the topic cannot be stored (not a legal Kafka topic name).
        """
        return self._key(metadata.remote_log_segment_id, metadata.start_offset, kind)

    def list_topics(self) -> list[str]:
        """Every topic with at least one stored object of the segment layout, sorted.

        Raises:
            RemoteStorageError: the listing failed.
        """
        prefix = f"{self._prefix}/" if self._prefix else ""
        topics = set()
        for info in self._call(lambda: list(self.object_store.list(prefix)), key=prefix or None):
            parsed = parse_segment_key(info.key)
            if parsed is None:
                continue
            directory = parsed.partition_dir[len(prefix):].rstrip("/")
            topic, _, number = directory.rpartition("-")
            if topic and number.isdigit() and "/" not in topic:
                topics.add(topic)
        return sorted(topics)

    def list_partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` with at least one committed segment (a manifest),
        sorted.

        Raises:
            RemoteStorageError: the listing failed, or the topic cannot be stored.
        """
        head = partition_prefix(self._prefix, TopicPartition(topic, 0))[:-len("0/")]
        found: set[int] = set()
        for info in self._call(lambda: list(self.object_store.list(head)), key=head):
            parsed = parse_segment_key(info.key)
            if parsed is None or parsed.kind is not ObjectKind.MANIFEST:
                continue
            number = parsed.partition_dir[len(head):].rstrip("/")
            if number.isdigit():
                found.add(int(number))
        return sorted(found)

    def custom_metadata_for(self, manifest_objects: Sequence[ManifestObject]) -> bytes | None:
        """The custom metadata bytes a copy returns (and stores in the manifest): by default a
        compact JSON ``{"v":1,"objects":N,"bytes":TOTAL}``, well under Kafka's 128-byte
        default limit. Override to return something else, or None."""
        total = sum(o.size for o in manifest_objects)
        return json.dumps({"v": 1, "objects": len(manifest_objects), "bytes": total},
                          separators=(",", ":")).encode("ascii")

    # -- the contract ------------------------------------------------------------------------

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> bytes | None:
        """Copy a segment (module docstring: commit protocol and data path). The log is
        streamed chunk by chunk through the segment's transform; the indexes are read whole
        (they are small), encoded and stored inline or in one ``.indexes`` object; the
        manifest (format 3) is written last.

        Raises:
            RemoteStorageError: a local file cannot be read (not retriable), the store failed
                (everything written is cleaned up, best effort).
            ConfigError: encryption is on but the active key pair cannot wrap (a broken key
                ring; :meth:`configure` normally refuses it first).
        """
        sid = metadata.segment_id
        keys = self._all_keys(metadata)
        index_sources = [
            _Source(ObjectKind.OFFSET_INDEX, str(data.offset_index), None),
            _Source(ObjectKind.TIME_INDEX, str(data.time_index), None),
            _Source(ObjectKind.PRODUCER_SNAPSHOT, str(data.producer_snapshot_index), None),
            _Source(ObjectKind.LEADER_EPOCH, None, data.leader_epoch_index),
        ]
        if data.transaction_index is not None:
            index_sources.append(_Source(ObjectKind.TRANSACTION_INDEX,
                                         str(data.transaction_index), None))
        log_path = str(data.log_segment)
        try:
            # An earlier attempt with this id stops being visible before anything changes.
            self._delete([keys[ObjectKind.MANIFEST]], sid)
            self._forget(keys)
            transform, encryption = self._new_transform(metadata, log_path)
            index_objects, payload = self._encode_indexes(index_sources, transform, keys, sid)
            # An earlier attempt's .indexes left when this one keeps them inline is not
            # deleted here: it goes with the segment (every delete removes every kind).
            first = functools.partial(self._put_log, keys[ObjectKind.LOG], log_path, sid,
                                      transform)
            rest = [] if payload is None else [functools.partial(
                self._put_bytes, keys[ObjectKind.INDEXES], payload, sid)]
            log_object, chunks = self._run_puts(first, rest, sid,
                                                _concurrent_puts(self.object_store))
            objects = [log_object, *index_objects]
            custom = self.custom_metadata_for(objects)
            final = metadata.with_custom_metadata(custom).with_state(
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
            manifest = SegmentManifest(final, tuple(objects), next_commit_sequence(), chunks,
                                       transform.compression, encryption)
            raw = manifest.to_json()
            mkey = keys[ObjectKind.MANIFEST]
            self._call(self.object_store.put, mkey, io.BytesIO(raw), len(raw), key=mkey,
                       segment_id=sid)
        except BaseException as exc:
            self._cleanup_failed_copy(keys, sid)
            if isinstance(exc, RemoteStorageError):
                raise
            if isinstance(exc, KafkaTiersError):  # ConfigError of the key ring: as it is
                raise
            if isinstance(exc, Exception):
                raise self._translate(exc, None, sid) from exc
            raise
        log.debug("copied segment %s (%d chunks, %d -> %d bytes, compression %s, %s)",
                  metadata.remote_log_segment_id, chunks.count, chunks.original_size,
                  chunks.stored_size, transform.compression,
                  "encrypted" if encryption is not None else "not encrypted")
        return custom

    def _new_transform(self, metadata: RemoteLogSegmentMetadata, log_path: str
                       ) -> tuple[SegmentTransform, WrappedDataKey | None]:
        """The transform of a new segment and its wrapped data key (None: not encrypted).

        Raises:
            RemoteStorageError: the log cannot be read, its size is not the metadata's
                ``segment_size_in_bytes``, or ``chunk.size`` would cut it into more than
                :data:`MAX_CHUNKS` chunks (not retriable).
        """
        settings = self._settings
        sid = metadata.segment_id
        try:
            length = os.stat(log_path).st_size
        except OSError as exc:
            raise RemoteStorageError(
                f"cannot read local file {log_path}: {exc.strerror or exc}",
                segment_id=sid, retriable=False) from None
        if length != metadata.segment_size_in_bytes:
            raise RemoteStorageError(
                f"segment {metadata.remote_log_segment_id}: its log {log_path} has {length} "
                f"bytes, its metadata's segment_size_in_bytes {metadata.segment_size_in_bytes} "
                "(a manifest's chunk index must hold the segment's size)",
                segment_id=sid, retriable=False)
        if -(-length // settings.chunk_size) > MAX_CHUNKS:
            raise RemoteStorageError(
                f"segment {metadata.remote_log_segment_id} of {length} bytes would be "
                f"{-(-length // settings.chunk_size)} chunks of chunk.size="
                f"{settings.chunk_size} bytes, more than the {MAX_CHUNKS} a segment may have: "
                f"raise chunk.size to at least {-(-length // MAX_CHUNKS)}",
                segment_id=sid, retriable=False)
        compression = ZSTD if settings.compression else None
        if compression is not None and settings.compression_heuristic:
            try:
                with open(log_path, "rb") as fh:
                    head = fh.read(HEADER_SIZE)
            except OSError as exc:
                raise RemoteStorageError(
                    f"cannot read local file {log_path}: {exc.strerror or exc}",
                    segment_id=sid, retriable=False) from None
            if batches_compressed(head):
                compression = None
        data_key = wrapped = None
        if settings.encryption:
            ring = settings.key_ring
            if ring is None:
                from kafka_tiers.api.errors import ConfigError

                raise ConfigError("encryption.enabled=true needs encryption.key.pairs",
                                  key="encryption.key.pairs")
            data_key = new_data_key()
            key_id, wrapped_key = ring.wrap(data_key)
            wrapped = WrappedDataKey(key_id, wrapped_key)
        tp = metadata.topic_partition
        context = segment_context(tp.topic, tp.partition, metadata.start_offset, sid,
                                  settings.chunk_size, length, compression)
        return (SegmentTransform(sid, compression, data_key, settings.zstd_level, context),
                wrapped)

    def _encode_indexes(self, sources: Sequence[_Source], transform: SegmentTransform,
                        keys: Mapping[ObjectKind, str], sid: str
                        ) -> tuple[list[ManifestObject], bytes | None]:
        """Read and encode the indexes: their manifest objects, and the ``.indexes`` object's
        content (None when they are kept inline)."""
        encoded: list[tuple[_Source, bytes, bytes]] = []
        for source in sources:
            if source.content is not None:
                original = bytes(source.content)
            else:
                assert source.path is not None
                try:
                    with open(source.path, "rb") as fh:
                        original = fh.read()
                except OSError as exc:
                    raise RemoteStorageError(
                        f"cannot read local file {source.path}: {exc.strerror or exc}",
                        segment_id=sid, retriable=False) from None
            stored = (original if transform.identity
                      else transform.encode(index_label(source.kind.value), original))
            encoded.append((source, original, stored))
        inline = sum(len(stored) for _, _, stored in encoded) <= INLINE_INDEXES_MAX
        objects: list[ManifestObject] = []
        offset = 0
        for source, original, stored in encoded:
            objects.append(ManifestObject(
                source.kind, keys[source.kind].rpartition("/")[2], len(original), CRC32C,
                _crc(original), len(stored), _crc(stored),
                None if inline else offset, stored if inline else None))
            offset += len(stored)
        payload = None if inline else b"".join(stored for _, _, stored in encoded)
        return objects, payload

    def _put_bytes(self, key: str, payload: bytes, sid: str,
                   cancel: threading.Event | None = None) -> None:
        if cancel is not None and cancel.is_set():
            raise CopyCancelled(f"the put of {key} did not start: another object of the "
                                "copy failed")
        stored = self._call(self.object_store.put, key, io.BytesIO(payload), len(payload),
                            key=key, segment_id=sid)
        if isinstance(stored, int) and stored != len(payload):
            raise RemoteStorageError(f"stored {stored} of {len(payload)} bytes under {key}",
                                     segment_id=sid, resource=key)

    def _put_log(self, key: str, path: str, sid: str, transform: SegmentTransform,
                 cancel: threading.Event | None = None) -> tuple[ManifestObject, ChunkIndex]:
        """Store the log: as it is (identity), or chunk by chunk through ``transform``."""
        chunk_size = self._settings.chunk_size
        name = key.rpartition("/")[2]
        if transform.identity:
            size, digest = self._put_source(key, _Source(ObjectKind.LOG, path, None), sid,
                                            cancel)
            return (ManifestObject(ObjectKind.LOG, name, size, CRC32C, digest, size, digest),
                    ChunkIndex(chunk_size, size, None))
        try:
            fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed in the finally
            length = os.fstat(fh.fileno()).st_size
        except OSError as exc:
            raise RemoteStorageError(f"cannot read local file {path}: {exc.strerror or exc}",
                                     segment_id=sid, retriable=False) from None
        reader = EncodingReader(
            fh, path, length, chunk_size,
            lambda i, view: transform.encode(log_label(i), view), cancel,
            workers=ENCODE_WORKERS)
        try:
            count = -(-length // chunk_size)
            expected = (None if transform.compression is not None
                        else length + count * ENCRYPTION_OVERHEAD)
            stored = self._put_stream(key, io.BufferedReader(reader, buffer_size=COPY_CHUNK),
                                      expected, sid)
            stored_size = sum(reader.stored_sizes)
            if reader.count != length or (isinstance(stored, int) and stored != stored_size):
                raise RemoteStorageError(
                    f"stored {stored} of {stored_size} bytes ({reader.count} of {length} "
                    f"original) of {path} under {key}", segment_id=sid, resource=key)
            stored_digest = reader.stored_digest.hexdigest()
            return (ManifestObject(ObjectKind.LOG, name, length, CRC32C,
                                   reader.digest.hexdigest(), stored_size, stored_digest),
                    ChunkIndex(chunk_size, length, tuple(reader.stored_sizes)))
        finally:
            reader.close()  # no encoding of this copy runs after this line
            fh.close()

    def _put_stream(self, key: str, stream: BinaryIO, length: int | None, sid: str) -> Any:
        try:
            return self._call(self.object_store.put, key, stream, length, key=key,
                              segment_id=sid)
        except RemoteStorageError as exc:
            cause = exc.__cause__
            if isinstance(cause, LocalReadError):
                raise RemoteStorageError(str(cause), segment_id=sid, retriable=False) from None
            raise

    def _run_puts(self, first: Callable[[threading.Event | None], Any],
                  rest: Sequence[Callable[[threading.Event | None], Any]],
                  sid: str, workers: int) -> Any:
        """Run the puts of a copy: ``first`` (the log) on this thread, then, once it is
        stored, ``rest`` (with up to ``workers`` at once when the store takes concurrent
        puts). Returns ``first``'s result. Returns or raises only once every put has ended;
        the first failure cancels the others (their sources stop being read, no further put
        starts) and is raised."""
        if workers <= 1:
            head = first(None)
            for job in rest:
                job(None)
            return head
        cancel = threading.Event()
        lock = threading.Lock()
        failures: list[BaseException] = []

        def guarded(fn: Callable[..., Any], *args: Any) -> Any:
            try:
                return fn(*args)
            except BaseException as exc:
                with lock:  # the first failure is the cause; the others follow from it
                    if not cancel.is_set():
                        failures.append(exc)
                        cancel.set()
                raise

        pool = ThreadPoolExecutor(max(1, min(workers, len(rest))),
                                  thread_name_prefix="kafka-tiers-copy")
        side: list[Future[Any]] = []
        head = None
        try:
            with contextlib.suppress(BaseException):  # recorded in failures, raised below
                head = guarded(first, cancel)
            with lock:
                if not cancel.is_set():
                    side = [pool.submit(guarded, job, cancel) for job in rest]
        finally:
            pool.shutdown(wait=True)  # nothing of this copy is in flight after this line
        if failures:
            raise failures[0]
        for future in side:
            future.result()
        return head

    def _cleanup_failed_copy(self, keys: Mapping[ObjectKind, str], sid: str) -> None:
        ordered = [keys[ObjectKind.MANIFEST]] + [k for kind, k in keys.items()
                                                 if kind is not ObjectKind.MANIFEST]
        try:
            self._delete(ordered[:1], sid)
            self._delete(ordered[1:], sid)
        except Exception:  # the objects become garbage for collect_orphans
            log.warning("could not clean up the failed copy of segment %s; its objects are "
                        "left for orphan collection", sid, exc_info=True)

    # -- the fetch path ----------------------------------------------------------------------

    def _segment(self, metadata: RemoteLogSegmentMetadata) -> _Segment:
        """The segment as the fetch path reads it: from the manifest cache, or its manifest
        read, checked, and its data key unwrapped (then cached)."""
        mkey = self._key(metadata.remote_log_segment_id, metadata.start_offset,
                         ObjectKind.MANIFEST)
        cache = self._segment_cache
        segment = cache.get(mkey)
        if segment is None:
            segment = self._segment_of(metadata, self.read_manifest(metadata))
            cache.put(mkey, segment)
        return segment

    def _segment_of(self, metadata: RemoteLogSegmentMetadata,
                    manifest: SegmentManifest) -> _Segment:
        sid = metadata.segment_id
        log_object = manifest.object(ObjectKind.LOG)
        if log_object is None:
            raise ManifestError(f"manifest of {metadata.remote_log_segment_id} lists no log",
                                segment_id=sid)
        chunks = manifest.chunks
        if chunks is None:  # formats 1 and 2: the log stored as it is
            chunks = self._plain_chunks(log_object.size)
        if manifest.encryption is None and self._settings.refuse_plaintext:
            raise ManifestError(
                f"segment {metadata.remote_log_segment_id} (start offset "
                f"{metadata.start_offset}) is not encrypted, and encryption.enabled=true "
                "refuses such segments (its manifest may have been replaced by someone who "
                "can write to the bucket); if the tier holds segments copied before "
                "encryption was enabled, set encryption.plaintext.segments.readable=true",
                segment_id=sid)
        data_key = None
        if manifest.encryption is not None:
            ring = self._settings.key_ring
            where = f"segment {metadata.remote_log_segment_id}"
            key_id = manifest.encryption.key_id
            if ring is None:
                setting = f"encryption.key.pairs.{key_id}.private.key.file"
                raise UnknownKeyError(
                    f"{where} is encrypted with key pair {key_id!r}, but no key pairs are "
                    f"configured (set encryption.key.pairs={key_id} and {setting})",
                    key_id=key_id, segment_id=sid)
            data_key = ring.unwrap(key_id, manifest.encryption.wrapped_key, where=where,
                                   segment_id=sid)
        tp = metadata.topic_partition
        context = segment_context(tp.topic, tp.partition, metadata.start_offset, sid,
                                  chunks.chunk_size, chunks.original_size,
                                  manifest.compression)
        transform = SegmentTransform(sid, manifest.compression, data_key, context=context)
        return _Segment(manifest, chunks, transform,
                        self._key(metadata.remote_log_segment_id, metadata.start_offset,
                                  ObjectKind.LOG),
                        self._key(metadata.remote_log_segment_id, metadata.start_offset,
                                  ObjectKind.INDEXES))

    def _plain_chunks(self, size: int) -> ChunkIndex:
        """The identity chunk index of a format 1 or 2 log of ``size`` bytes: chunks of
        ``chunk.size``, or larger when that would be more than :data:`MAX_CHUNKS`."""
        return ChunkIndex(max(self._settings.chunk_size, -(-size // MAX_CHUNKS)), size, None)

    def _read_range(self, key: str, first: int, end: int, size: int, sid: str) -> bytes:
        """The stored bytes ``first..end-1`` of the object ``key`` (``size`` bytes); an
        object shorter than that is an error, never short data."""
        if end <= first:
            return b""
        reader = self._ranged_reader(key, first, end, size, sid)
        try:
            return reader.readall()
        finally:
            reader.close()

    def _ranged_reader(self, key: str, first: int, end: int, size: int,
                       sid: str) -> ManagedStream:
        """A stream of the stored bytes ``first..end-1`` (``end > first``) of the object
        ``key`` (``size`` bytes: the whole object is read without a range); an object
        shorter than that is an error, never short data. The caller closes it."""
        whole = first == 0 and end == size
        stream = self._call(self.object_store.get, key,
                            None if whole else ByteRange(first, end - 1), key=key,
                            segment_id=sid)
        return ManagedStream(stream, lambda exc: self._translate(exc, key, sid), end - first)

    def _stored_chunk(self, segment: _Segment, number: int) -> bytes:
        """The stored bytes of chunk ``number`` (one ranged read)."""
        first, end = segment.chunks.stored_range(number)
        return self._read_range(segment.log_key, first, end, segment.chunks.stored_size,
                                segment.transform.segment_id)

    def _load_chunk(self, segment: _Segment, number: int) -> bytes:
        return self._decode_chunk(segment, number, self._stored_chunk(segment, number))

    def _load_chunk_prefix(self, segment: _Segment, number: int, prefix: int
                           ) -> bytes | None:
        """The first ``prefix`` original bytes of chunk ``number``, decoded before the rest
        (see ``SegmentTransform.open_chunk``), or None when the chunk is cached or loading
        (the caller reads it as usual). The chunk is claimed in the loader while it loads
        (readers of it wait), and the rest is decoded on the loader's pool, the whole chunk
        cached: a reader that goes on past the prefix finds it, nothing partial is cached."""
        loader = self.chunk_loader
        (claim,) = loader.claim_for_stream(self._chunk_items(segment, [number]))
        if claim is None:
            return None
        try:
            raw = self._stored_chunk(segment, number)
            start, stop = segment.chunks.original_range(number)
            decoder = segment.transform.open_chunk(log_label(number), raw, stop - start)
            head = decoder.read(prefix)
        except BaseException:
            loader.release([claim])  # its waiters load it themselves
            raise
        loader.hand_off(claim, lambda: head + decoder.rest())
        return head

    def _load_span(self, segment: _Segment, first: int, end: int) -> Iterator[bytes]:
        """The original bytes of the chunks ``first..end-1``, one after the other as they
        arrive, read with one ranged read of their stored bytes (each checked and decoded
        as the single-chunk load does)."""
        for number, raw in zip(range(first, end), self._stored_span(segment, first, end),
                               strict=False):
            yield self._decode_chunk(segment, number, raw)

    def _decode_chunk(self, segment: _Segment, number: int, raw: bytes) -> bytes:
        """The original bytes of chunk ``number`` from its stored bytes ``raw`` (checked)."""
        if segment.transform.identity:
            return raw
        start, limit = segment.chunks.original_range(number)
        return segment.transform.decode(log_label(number), raw, limit - start)

    def _stored_span(self, segment: _Segment, first: int, end: int) -> Iterator[bytes]:
        """The stored bytes of the chunks ``first..end-1``, one after the other as they
        arrive, read with one ranged read (a short object is an error)."""
        chunks = segment.chunks
        sid = segment.transform.segment_id
        begin, stop = chunks.stored_range(first)[0], chunks.stored_range(end - 1)[1]
        reader = self._ranged_reader(segment.log_key, begin, stop, chunks.stored_size, sid)
        try:
            for number in range(first, end):
                low, high = chunks.stored_range(number)
                yield _read_exactly(reader, high - low)
        finally:
            reader.close()

    def _chunk_items(self, segment: _Segment, numbers: Iterable[int]
                     ) -> list[tuple[str, Callable[[], bytes]]]:
        return [(f"{segment.log_key}#{n}", functools.partial(self._load_chunk, segment, n))
                for n in numbers]

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        """The original bytes ``start_position..end_position`` (inclusive; None: to the end)
        of a segment's log, as a lazy stream: only the chunks covering the range are read
        (through the chunk cache), up to ``fetch.chunk.download.threads`` at once; a read of a
        plain (identity) log covering more chunks than that is one ranged read streamed past
        the cache. A read starting where the previous read of the segment stopped
        (sequential) also prefetches the next ``fetch.chunk.cache.prefetch.max.size`` bytes
        (in spans of contiguous chunks, one ranged read each).

        Raises:
            InvalidRangeError: the range is invalid or starts beyond the log.
            RemoteResourceNotFoundError: the segment is not in the remote tier.
            ManifestError: its manifest cannot be used, or its data key cannot be unwrapped
                (:class:`~kafka_tiers.objectstore.encryption.UnknownKeyError` names the key
                pair id).
            RemoteStorageError: from the stream's reads: the store failed, or a chunk fails
                its checks (:class:`~kafka_tiers.objectstore.transforms.CorruptChunkError`).
        """
        check_range(start_position, end_position, segment_id=metadata.segment_id)
        segment = self._segment(metadata)
        size = segment.chunks.original_size
        if size == 0 and start_position == 0:
            return io.BytesIO(b"")
        if start_position > size - 1:
            raise InvalidRangeError(
                f"start position {start_position} is beyond the last byte of segment "
                f"{metadata.remote_log_segment_id} (size {size})",
                start=start_position, end=end_position, size=size,
                segment_id=metadata.segment_id)
        last = size - 1 if end_position is None else min(end_position, size - 1)
        loader = self.chunk_loader
        numbers = segment.chunks.chunks_for(start_position, last)
        long_plain = segment.transform.identity and len(numbers) > self._settings.download_threads
        sequential = self._sequential(segment.log_key, start_position)
        streamed = not long_plain and self._read_ahead_for(segment, numbers, sequential)
        if not long_plain and not streamed and sequential:
            self._prefetch_range(segment, start_position, self._settings.cache.prefetch_max_size,
                                 after=numbers[-1])
        sid = metadata.segment_id
        chunks = segment.chunks
        if long_plain:
            # a long read of a plain log: one ranged read streamed as it is (the bytes
            # stored are the original ones), not a window of ranged reads after another
            # through the cache (which would only evict the chunks short reads reuse)
            log_key = segment.log_key
            whole = start_position == 0 and last == chunks.stored_size - 1
            byte_range = None if whole else ByteRange(start_position, last)
            return io.BufferedReader(LazyManagedStream(
                functools.partial(self._call, self.object_store.get, log_key, byte_range,
                                  key=log_key, segment_id=sid),
                lambda exc: self._translate(exc, log_key, sid), last - start_position + 1,
                functools.partial(self._record_read, log_key, start_position)),
                buffer_size=COPY_CHUNK)

        def load(batch: Sequence[int]) -> list[bytes | memoryview]:
            """The original bytes of ``batch``'s chunks, trimmed to the range. A chunk of an
            identity layout the range covers only in part is read alone (exactly the bytes
            wanted, not cached) unless it is cached: one batch of a big plain segment costs
            its own size, not a chunk's. A chunk of another layout (not cached nor loading)
            whose prefix only the range needs is returned as soon as that prefix is decoded
            (an encrypted chunk's tag still checks all of it), its rest decoded on the pool
            and the whole chunk cached (``_load_chunk_prefix``)."""
            wanted: list[int] = []
            found: dict[int, bytes] = {}
            partial: dict[int, tuple[int, int]] = {}
            prefixes: dict[int, int] = {}
            for n in batch:
                begin, end = chunks.original_range(n)
                first, stop = max(begin, start_position), min(end, last + 1)
                if (first, stop) != (begin, end) and (
                        segment.transform.identity or (not streamed and first == begin)):
                    key = f"{segment.log_key}#{n}"
                    cached = loader.cached(key)
                    if cached is not None:  # kept: not looked up again
                        found[n] = cached
                        continue
                    if segment.transform.identity:
                        partial[n] = (first, stop)
                        continue
                    if loader.absent([key]):
                        prefixes[n] = stop - begin
                        continue
                wanted.append(n)
            loaded = dict(zip(wanted, loader.get_many(self._chunk_items(segment, wanted)),
                              strict=True))
            loaded.update(found)
            out: list[bytes | memoryview] = []
            for n in batch:
                if n in partial:
                    first, stop = partial[n]
                    out.append(self._read_range(segment.log_key, first, stop,
                                                chunks.stored_size, sid))
                    continue
                if n in prefixes:
                    head = self._load_chunk_prefix(segment, n, prefixes[n])
                    out.append(head if head is not None else
                               memoryview(loader.get(*self._chunk_items(segment, [n])[0]))
                               [:prefixes[n]])
                    continue
                begin, end = chunks.original_range(n)
                data: bytes | memoryview = loaded[n]
                if begin < start_position or end > last + 1:  # a view: no copy of the part
                    data = memoryview(data)[max(begin, start_position) - begin:
                                            min(end, last + 1) - begin]
                out.append(data)
            return out

        stream = ChunkedSegmentStream(
            numbers, 0, last - start_position + 1, load, self._settings.download_threads,
            lambda exc: self._translate(exc, segment.log_key, sid),
            functools.partial(self._record_read, segment.log_key, start_position))
        return io.BufferedReader(stream, buffer_size=COPY_CHUNK)

    def _read_ahead_for(self, segment: _Segment, numbers: Sequence[int],
                        sequential: bool) -> bool:
        """Let the segment's read-ahead stream serve a read of the chunks ``numbers``: advance
        the stream open on the segment, or (a sequential read) open one from the first of
        ``numbers`` neither cached nor loading, to the segment's end. Returns whether a stream
        serves the read (then no span prefetch is needed). Needs a chunk cache and a
        ``fetch.chunk.cache.prefetch.max.size`` (0: no read-ahead, no stream)."""
        loader = self.chunk_loader
        if loader.cache is None or self._settings.cache.prefetch_max_size <= 0:
            return False
        stream = self._read_ahead.get(segment.log_key)
        if stream is not None and stream.serves(numbers[0]) and stream.advance(numbers[-1]):
            return True
        if not sequential:
            return False
        count = segment.chunks.count
        ahead = self._read_ahead_chunks()
        reach = range(numbers[0], min(count, numbers[-1] + 1 + max(1, ahead)))
        first = next((n for n in reach if loader.absent([f"{segment.log_key}#{n}"])), None)
        if first is None:  # all cached or loading: nothing for a stream to read yet
            return False

        def make(on_end: Callable[[ReadAheadStream], None]) -> ReadAheadStream:
            return ReadAheadStream(
                loader, lambda i, j: self._chunk_items(segment, range(i, j)),
                lambda i, j: self._stored_span(segment, i, j),
                functools.partial(self._decode_chunk, segment), first, count, ahead,
                self._read_ahead.idle_s, on_end)

        return self._read_ahead.open(segment.log_key, numbers[0], make).advance(numbers[-1])

    def _read_ahead_chunks(self) -> int:
        """Chunks a read-ahead stream reads past the reader: ``prefetch.max.size`` in chunks
        (at least one)."""
        settings = self._settings
        return max(1, -(-settings.cache.prefetch_max_size // settings.chunk_size))

    def _sequential(self, log_key: str, start: int) -> bool:
        """Whether a read of ``log_key`` from ``start`` continues the previous one (it starts
        within what the previous read consumed, past its start)."""
        if self._settings.cache.prefetch_max_size <= 0:
            return False
        with self._reads_lock:
            previous = self._last_reads.get(log_key)
        return previous is not None and previous[0] < start <= previous[1]

    def _record_read(self, log_key: str, start: int, consumed: int) -> None:
        if self._settings.cache.prefetch_max_size <= 0 or consumed <= 0:
            return
        with self._reads_lock:
            self._last_reads[log_key] = (start, start + consumed)
            self._last_reads.move_to_end(log_key)
            while len(self._last_reads) > _SEQUENTIAL_TRACKED:
                self._last_reads.popitem(last=False)

    def _prefetch_range(self, segment: _Segment, start: int, size: int, *,
                        after: int = -1) -> int:
        """Queue the chunks of the bytes ``start..start+size-1`` past chunk ``after`` (those a
        reader loads itself) that are neither cached nor loading, as spans of contiguous
        chunks read with one ranged read each. For a sequential reader (``after`` >= 0) a
        window missing fewer than half its chunks (and not the segment's last) waits for
        the reader to move on, so the window slides on in spans, not chunk by chunk.
        Returns the chunks the range covers."""
        chunks = segment.chunks
        if size <= 0 or start >= chunks.original_size:
            return 0
        last = min(start + size, chunks.original_size) - 1
        loader = self.chunk_loader
        window = chunks.chunks_for(max(start, 0), last)
        numbers = range(max(window[0], after + 1), window[-1] + 1)
        if not numbers or loader.cache is None:
            return len(window)
        span = self._span_chunks()
        if after >= 0 and numbers[-1] < chunks.count - 1:
            missing = loader.absent([f"{segment.log_key}#{n}" for n in numbers])
            if missing < max(1, min(span, len(window) // 2)):
                return len(window)
        items = self._chunk_items(segment, numbers)
        first = numbers[0]
        loader.prefetch_spans(
            items, lambda i, j: self._load_span(segment, first + i, first + j), span)
        return len(window)

    def _span_chunks(self) -> int:
        """Chunks a prefetch reads with one ranged read: ``prefetch.max.size`` over the
        download threads, at least :data:`SPAN_MIN_BYTES` (the 8-16 MiB ranged reads object
        stores serve best), at least one chunk."""
        settings = self._settings
        span_bytes = max(settings.cache.prefetch_max_size // max(1, settings.download_threads),
                         SPAN_MIN_BYTES)
        return max(1, span_bytes // settings.chunk_size)

    def prefetch(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                 size: int) -> None:
        """Start loading the chunks of the log bytes ``start_position..start_position+size-1``
        into the chunk cache and return at once (the broker calls it for the next segment
        when a sequential read nears a segment's end). Only a hint: a failed load is logged
        and forgotten, and with no chunk cache nothing is kept.

        Raises:
            RemoteResourceNotFoundError, ManifestError: the segment's manifest cannot be
                read (the manifest is read on the caller's thread).
        """
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            return
        check_range(start_position, None, segment_id=metadata.segment_id)
        self._prefetch_range(self._segment(metadata), start_position, size)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        """An index of a segment (decoded, checked against its stored CRC-32C and its
        transform's checks), from the manifest itself, the ``.indexes`` object (through the
        chunk cache) or, for formats 1 and 2, its own object.

        Raises:
            RemoteResourceNotFoundError: no such segment, or it has no index of this type.
            ManifestError: the manifest cannot be used or the data key not unwrapped.
            CorruptChunkError: the stored index fails its checks.
        """
        if not isinstance(index_type, IndexType):
            raise RemoteStorageError(f"unknown index type {index_type!r}",
                                     segment_id=metadata.segment_id)
        segment = self._segment(metadata)
        kind = INDEX_KINDS[index_type]
        obj = segment.manifest.object(kind)
        if obj is None:
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} has no {index_type.name} index",
                segment_id=metadata.segment_id, resource=f"index {index_type.name}")
        if obj.size == 0 and obj.stored_size in (None, 0):
            return io.BytesIO(b"")
        sid = metadata.segment_id
        if segment.manifest.chunks is None:  # formats 1 and 2: its own object
            key = self._key(metadata.remote_log_segment_id, metadata.start_offset, kind)
            return self._open(key, None, obj.size, sid)
        data = self.chunk_loader.get(
            f"{segment.indexes_key}#{kind.value}",
            functools.partial(self._load_index, segment, obj))
        return io.BytesIO(data)

    def _load_index(self, segment: _Segment, obj: ManifestObject) -> bytes:
        sid = segment.transform.segment_id
        label = index_label(obj.kind.value)
        if obj.inline is not None:
            stored = obj.inline
        else:
            assert obj.stored_offset is not None and obj.stored_size is not None
            stored = self._read_range(segment.indexes_key, obj.stored_offset,
                                      obj.stored_offset + obj.stored_size, -1, sid)
        if not obj.stored_matches(stored):
            raise CorruptChunkError(
                f"chunk {label} of segment {sid} does not match the stored size and "
                "CRC-32C its manifest lists: it was changed", label=label, segment_id=sid)
        if segment.transform.identity:
            data = stored
        else:
            data = segment.transform.decode(label, stored, obj.size)
        if not obj.matches(data):
            raise CorruptChunkError(f"chunk {label} of segment {sid} decodes to bytes whose "
                                    "CRC-32C differs from its manifest's", label=label,
                                    segment_id=sid)
        return data

    def _open(self, key: str, byte_range: ByteRange | None, size: int,
              segment_id: str) -> BinaryIO:
        whole = byte_range is None or (byte_range.first == 0 and byte_range.last == size - 1)
        stream = self._call(self.object_store.get, key, None if whole else byte_range,
                            key=key, segment_id=segment_id)
        expected = size if byte_range is None else byte_range.size
        return managed(stream, lambda exc: self._translate(exc, key, segment_id), expected)

    def _forget(self, keys: Mapping[ObjectKind, str]) -> None:
        """Drop a segment's cached manifest, chunks and indexes."""
        if self._manifests_cache is not None:
            self._manifests_cache.discard(keys[ObjectKind.MANIFEST])
        loader = self._loader
        if loader is not None:  # through the loader: downloads in flight keep nothing
            loader.discard_prefix(keys[ObjectKind.LOG] + "#")
            loader.discard_prefix(keys[ObjectKind.INDEXES] + "#")
        with self._reads_lock:
            self._last_reads.pop(keys[ObjectKind.LOG], None)
        self._read_ahead.close_key(keys[ObjectKind.LOG])

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        keys = self._all_keys(metadata)
        sid = metadata.segment_id
        self._forget(keys)
        self._delete([keys[ObjectKind.MANIFEST]], sid)
        self._delete([k for kind, k in keys.items() if kind is not ObjectKind.MANIFEST], sid)
        # again: a manifest a concurrent rekey rewrote after the first delete (see rekey)
        self._delete([keys[ObjectKind.MANIFEST]], sid)

    # -- data-path operations ----------------------------------------------------------------

    def rekey(self, metadata: RemoteLogSegmentMetadata) -> bool:
        """Re-wrap a segment's data key with the active key pair: its manifest is rewritten
        (same commit sequence, same everything but the wrapped key), its data is untouched,
        so afterwards only the active pair's private key is needed to read it. Idempotent.

        Returns:
            True when the manifest was rewritten; False when the segment is not encrypted or
            already on the active key pair.

        Raises:
            ConfigError: no active key pair (``encryption.key.pair.id``).
            UnknownKeyError: the old key pair's private key is not configured.
            KeyUnwrapError: the wrapped key is damaged.
            RemoteResourceNotFoundError: the segment is not in the tier, or was deleted while
                it was rekeyed (its rewritten manifest is then deleted again: a deleted
                segment never comes back as a manifest without data).
            ManifestError, RemoteStorageError: as a read.
        """
        from kafka_tiers.api.errors import ConfigError

        manifest = self.read_manifest(metadata)
        if manifest.encryption is None:
            return False
        ring = self._settings.key_ring
        if ring is None or ring.active_id is None:
            raise ConfigError("rekey needs an active key pair: set encryption.key.pairs and "
                              "encryption.key.pair.id", key="encryption.key.pair.id")
        if manifest.encryption.key_id == ring.active_id:
            return False
        sid = metadata.segment_id
        data_key = ring.unwrap(manifest.encryption.key_id, manifest.encryption.wrapped_key,
                               where=f"segment {metadata.remote_log_segment_id}",
                               segment_id=sid)
        key_id, wrapped = ring.wrap(data_key)
        rewritten = dataclasses.replace(manifest, encryption=WrappedDataKey(key_id, wrapped))
        raw = rewritten.to_json()
        mkey = self._key(metadata.remote_log_segment_id, metadata.start_offset,
                         ObjectKind.MANIFEST)
        self._call(self.object_store.put, mkey, io.BytesIO(raw), len(raw), key=mkey,
                   segment_id=sid)
        # The put has no precondition (stores offer none in common): a delete of the segment
        # that ran since the read left it a manifest without data. The deleter removes the
        # manifest, then the data, then the manifest again, so either its last delete comes
        # after this put, or the log is gone by now: then the manifest goes again. The cache
        # is never filled from here (a segment forgotten meanwhile stays forgotten); the
        # next read reads the rewritten manifest.
        self._segment_cache.discard(mkey)
        if not self._log_exists(metadata, manifest):
            self._delete([mkey], sid)
            self._forget(self._all_keys(metadata))
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} (start offset "
                f"{metadata.start_offset}) was deleted while it was rekeyed; its rewritten "
                "manifest was removed again", segment_id=sid, resource="segment")
        log.info("segment %s re-keyed from key pair %s to %s",
                 metadata.remote_log_segment_id, manifest.encryption.key_id, key_id)
        return True

    def _log_exists(self, metadata: RemoteLogSegmentMetadata,
                    manifest: SegmentManifest) -> bool:
        """Whether the segment's log object is in the store (its first byte read, or the whole
        object when it is empty).

        Raises:
            RemoteStorageError: the store failed other than with "not found".
        """
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset, ObjectKind.LOG)
        log_object = manifest.object(ObjectKind.LOG)
        first = ByteRange(0, 0) if log_object is not None and log_object.size > 0 else None
        sid = metadata.segment_id
        try:
            stream = self._call(self.object_store.get, key, first, key=key, segment_id=sid)
            try:
                self._call(stream.read, 1, key=key, segment_id=sid)
            finally:
                stream.close()
        except RemoteResourceNotFoundError:
            return False
        return True

    def describe_segment(self, metadata: RemoteLogSegmentMetadata) -> dict[str, Any]:
        """How a segment is stored: ``format_version``, ``chunk_size``, ``chunks``,
        ``original_size``, ``stored_size``, ``ratio`` (stored / original, 1.0 for an empty
        log), ``compression`` (``"zstd"`` or None), ``key_id`` (None: not encrypted),
        ``indexes`` (``"inline"``, ``"object"`` or ``"objects"`` for formats 1 and 2).
        Reads the manifest only (no key is needed).

        Raises:
            RemoteResourceNotFoundError, ManifestError: as :meth:`read_manifest`.
        """
        manifest = self.read_manifest(metadata)
        log_object = manifest.object(ObjectKind.LOG)
        chunks = manifest.chunks
        if chunks is None:
            chunks = self._plain_chunks(log_object.size if log_object is not None else 0)
        if manifest.chunks is None:
            indexes = "objects"
        elif any(o.inline is not None for o in manifest.objects):
            indexes = "inline"
        else:
            indexes = "object"
        original, stored = chunks.original_size, chunks.stored_size
        return {
            "format_version": manifest.format_version,
            "chunk_size": chunks.chunk_size,
            "chunks": chunks.count,
            "original_size": original,
            "stored_size": stored,
            "ratio": round(stored / original, 4) if original else 1.0,
            "compression": manifest.compression,
            "key_id": None if manifest.encryption is None else manifest.encryption.key_id,
            "indexes": indexes,
        }

    def cache_stats(self) -> dict[str, Any]:
        """The data path's counters: ``chunk_cache`` (hits, misses, evictions, entries,
        bytes, max_bytes; None without a cache), ``manifest_cache`` (hits, misses,
        evictions, entries, max_entries) and ``downloads`` (chunks and indexes loaded from
        the store)."""
        loader = self.chunk_loader
        chunk_stats = (dataclasses.asdict(loader.cache.stats()) if loader.cache is not None
                       else None)
        return {"chunk_cache": chunk_stats,
                "manifest_cache": dataclasses.asdict(self._segment_cache.stats()),
                "downloads": loader.downloads}

    def _manifests(self, prefix: str, min_base_offset: int = 0
                   ) -> list[tuple[ParsedKey, SegmentManifest, ObjectInfo]]:
        found = []
        for info in self._call(lambda: list(self.object_store.list(prefix)), key=prefix):
            parsed = parse_segment_key(info.key)
            if (parsed is None or parsed.kind is not ObjectKind.MANIFEST
                    or parsed.start_offset < min_base_offset):
                continue
            try:
                raw = self._read_all(info.key, parsed.segment_id)
            except RemoteResourceNotFoundError:
                continue  # deleted since the listing
            found.append((parsed, SegmentManifest.from_json(raw, info.key), info))
        return found

    @staticmethod
    def _newest(manifests: Iterable[tuple[ParsedKey, SegmentManifest, ObjectInfo]]
                ) -> dict[tuple[str, int], tuple[ParsedKey, SegmentManifest, ObjectInfo]]:
        best: dict[tuple[str, int], tuple[ParsedKey, SegmentManifest, ObjectInfo]] = {}
        for entry in manifests:
            parsed, manifest, _ = entry
            slot = (parsed.partition_dir, parsed.start_offset)
            current = best.get(slot)
            if current is None or (manifest.commit_sequence, parsed.segment_id) > (
                    current[1].commit_sequence, current[0].segment_id):
                best[slot] = entry
        return best

    def list_remote_segments(
        self, topic_partition: TopicPartition, min_base_offset: int = 0
    ) -> list[RemoteLogSegmentMetadata]:
        prefix = partition_prefix(self._prefix, topic_partition)
        newest = self._newest(self._manifests(prefix, min_base_offset))
        result = []
        for _, manifest, info in newest.values():
            if manifest.metadata.topic_partition != topic_partition:
                raise ManifestError(f"manifest {info.key} describes "
                                    f"{manifest.metadata.topic_partition}", key=info.key)
            result.append(manifest.metadata)
        result.sort(key=lambda m: (m.start_offset, m.segment_id))
        return result

    def delete_topic_partition(self, topic_partition: TopicPartition) -> None:
        prefix = partition_prefix(self._prefix, topic_partition)
        keys = sorted(info.key for info in
                      self._call(lambda: list(self.object_store.list(prefix)), key=prefix))
        manifests = [k for k in keys if k.endswith("." + ObjectKind.MANIFEST.value)]
        if self._manifests_cache is not None:
            for key in manifests:
                self._manifests_cache.discard(key)
        loader = self._loader
        if loader is not None:  # through the loader: downloads in flight keep nothing
            loader.discard_prefix(prefix)
        self._delete(manifests)
        self._delete([k for k in keys if k not in set(manifests)])

    def collect_orphans(self, min_age_ms: int, topic_partition: TopicPartition | None = None,
                        *, now_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete the garbage of the remote tier and return its keys, sorted.

        Garbage is every object of the segment layout that no manifest references (left by a
        copy that failed and could not clean up, or by a crash), and every segment superseded
        by a newer copy of the same start offset (manifest first). Then the store removes its
        own leftovers of the same scope and age (:meth:`ObjectStore.collect_garbage`:
        incomplete uploads, temporary files); they are not in the returned list. Only garbage
        last modified at least ``min_age_ms`` ago is touched: the broker passes the remote
        retention time, so a copy in progress is never collected. Objects that do not follow
        the layout are never touched.

        Args:
            min_age_ms: the minimum age of what is deleted.
            topic_partition: only this partition (default: everything under ``key.prefix``).
            now_ms: the current time (default: the clock).
            dry_run: list without deleting.

        Raises:
            RemoteStorageError: listing or deleting failed (repeat the call).
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cutoff = now - min_age_ms
        if topic_partition is not None:
            prefix = partition_prefix(self._prefix, topic_partition)
        else:
            prefix = f"{self._prefix}/" if self._prefix else ""
        infos = self._call(lambda: list(self.object_store.list(prefix)), key=prefix or None)
        groups: dict[tuple[str, int, str], list[tuple[ParsedKey, ObjectInfo]]] = {}
        for info in infos:
            parsed = parse_segment_key(info.key)
            if parsed is not None:
                slot = (parsed.partition_dir, parsed.start_offset, parsed.segment_id)
                groups.setdefault(slot, []).append((parsed, info))
        manifests = []
        for members in groups.values():
            for parsed, info in members:
                if parsed.kind is ObjectKind.MANIFEST:
                    try:
                        raw = self._read_all(info.key, parsed.segment_id)
                    except RemoteResourceNotFoundError:
                        continue
                    manifests.append((parsed, SegmentManifest.from_json(raw, info.key), info))
        newest = {(p.partition_dir, p.start_offset, p.segment_id)
                  for p, _, _ in self._newest(manifests).values()}
        committed = {(p.partition_dir, p.start_offset, p.segment_id) for p, _, _ in manifests}
        first: list[str] = []
        rest: list[str] = []
        for slot, members in groups.items():
            if slot in newest:
                continue
            if slot in committed:  # superseded: all of it, once its manifest is old enough
                mtime = max(i.last_modified_ms for p, i in members
                            if p.kind is ObjectKind.MANIFEST)
                if mtime <= cutoff:
                    first += [i.key for p, i in members if p.kind is ObjectKind.MANIFEST]
                    rest += [i.key for p, i in members if p.kind is not ObjectKind.MANIFEST]
            else:
                rest += [i.key for _, i in members if i.last_modified_ms <= cutoff]
        if not dry_run:
            self._delete(sorted(first))
            self._delete(sorted(rest))
        if first or rest:
            log.info("collected %d orphaned objects under %r", len(first) + len(rest),
                     prefix)
        store = self.object_store
        leftovers = self._call(store.collect_garbage, prefix, cutoff, dry_run,
                               key=prefix or None)
        if leftovers:
            log.info("%s %d leftovers of the store under %r: %s",
                     "found" if dry_run else "removed", len(leftovers), prefix,
                     ", ".join(map(str, leftovers[:10])))
        return sorted(first + rest)


def _read_exactly(reader: ManagedStream, size: int) -> bytes:
    """``size`` bytes from ``reader`` (which raises if its object ends early)."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = reader.readinto(view[got:])
        if not n:
            raise RemoteStorageError(f"a span read ended {size - got} bytes early")
        got += n
    return bytes(buf)


def _crc(data: bytes) -> str:
    hasher = new_hasher(CRC32C)
    hasher.update(data)
    return hasher.hexdigest()


def _concurrent_puts(store: ObjectStore) -> int:
    """The store's :attr:`ObjectStore.max_concurrent_puts` (1 when it is not a positive
    int)."""
    value = getattr(store, "max_concurrent_puts", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return 1
    return value


__all__ = ["INLINE_INDEXES_MAX", "ObjectStoreRemoteStorageManager"]
