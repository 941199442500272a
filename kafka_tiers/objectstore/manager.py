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

Listing
    From the manifests only. When several manifests share a start offset (a copy retried with a
    new segment id), the one with the highest commit sequence (nanoseconds since the epoch,
    strictly increasing within a process) is listed; the others stay readable by their own
    metadata until deleted, and are garbage for ``collect_orphans`` once older than its age.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    ManifestObject,
    SegmentManifest,
    new_hasher,
    next_commit_sequence,
)
from kafka_tiers.objectstore.streams import COPY_CHUNK, HashingReader, LocalReadError, managed

log = logging.getLogger(__name__)

#: (manager base, store class) -> the manager class made by ``for_store``
_MANAGER_CLASSES: dict[tuple[type, type], Any] = {}
_MANAGER_CLASSES_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Source:
    kind: ObjectKind
    path: str | None
    content: bytes | None


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
        StorageCapability.LARGE_SEGMENTS,
    })
    store_class: ClassVar[type[ObjectStore] | None] = None

    _store: ObjectStore | None = None
    _prefix: str = ""

    def __init__(self) -> None:
        self._store = None
        self._prefix = ""

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
        """Read ``key.prefix`` and build the store with :meth:`create_object_store`; the key
        prefix in use is the store's :attr:`ObjectStore.base_prefix` with ``key.prefix`` nested
        below it.

        Raises:
            ConfigError: a bad value (from the store or an unsafe prefix).
        """
        from kafka_tiers.api.errors import ConfigError

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
        self._prefix = "/".join(p for p in (base, prefix) if p)
        self._store = store

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

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
        stream = self._call(self.object_store.get, key, None, key=key, segment_id=segment_id)
        try:
            return self._call(stream.read, key=key, segment_id=segment_id)
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
        sid = metadata.segment_id
        keys = self._all_keys(metadata)
        sources = [
            _Source(ObjectKind.LOG, str(data.log_segment), None),
            _Source(ObjectKind.OFFSET_INDEX, str(data.offset_index), None),
            _Source(ObjectKind.TIME_INDEX, str(data.time_index), None),
            _Source(ObjectKind.PRODUCER_SNAPSHOT, str(data.producer_snapshot_index), None),
            _Source(ObjectKind.LEADER_EPOCH, None, data.leader_epoch_index),
        ]
        if data.transaction_index is not None:
            sources.append(_Source(ObjectKind.TRANSACTION_INDEX, str(data.transaction_index),
                                   None))
        try:
            # An earlier attempt with this id stops being visible before anything changes.
            self._delete([keys[ObjectKind.MANIFEST]], sid)
            stale = ([keys[ObjectKind.TRANSACTION_INDEX]] if data.transaction_index is None
                     else [])
            workers = _concurrent_puts(self.object_store)
            if workers <= 1:
                if stale:
                    self._delete(stale, sid)
                stored = [self._put_source(keys[s.kind], s, sid) for s in sources]
            else:
                stored = self._put_concurrently(keys, sources, stale, sid, workers)
            objects: list[ManifestObject] = []
            for source, (size, digest) in zip(sources, stored, strict=True):
                key = keys[source.kind]
                objects.append(ManifestObject(source.kind, key.rpartition("/")[2], size,
                                              CRC32C, digest))
            custom = self.custom_metadata_for(objects)
            final = metadata.with_custom_metadata(custom).with_state(
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
            manifest = SegmentManifest(final, tuple(objects), next_commit_sequence())
            raw = manifest.to_json()
            mkey = keys[ObjectKind.MANIFEST]
            self._call(self.object_store.put, mkey, io.BytesIO(raw), len(raw), key=mkey,
                       segment_id=sid)
        except BaseException as exc:
            self._cleanup_failed_copy(keys, sid)
            if isinstance(exc, RemoteStorageError):
                raise
            if isinstance(exc, Exception):
                raise self._translate(exc, None, sid) from exc
            raise
        log.debug("copied segment %s (%d objects)", metadata.remote_log_segment_id,
                  len(objects))
        return custom

    def _put_concurrently(self, keys: Mapping[ObjectKind, str], sources: Sequence[_Source],
                          stale: Sequence[str], sid: str, workers: int
                          ) -> list[tuple[int, str]]:
        """Store ``sources``: the first (the log) on this thread while ``stale`` is deleted on
        a pool, then, once it is stored, the others with up to ``workers`` puts at once.
        Returns (size, crc32c hex) per source, in order. Returns or raises only once every put
        has ended; the first failure cancels the others (their sources stop being read, no
        further put starts) and is raised."""
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

        first, rest = sources[0], sources[1:]
        pool = ThreadPoolExecutor(max(1, min(workers, len(rest))),
                                  thread_name_prefix="kafka-tiers-copy")
        side: list[Future[tuple[int, str]]] = []
        try:
            if stale:
                pool.submit(guarded, self._delete, stale, sid)
            with contextlib.suppress(BaseException):  # recorded in failures, raised below
                head = guarded(self._put_source, keys[first.kind], first, sid, cancel)
            with lock:
                if not cancel.is_set():
                    side = [pool.submit(guarded, self._put_source, keys[s.kind], s, sid,
                                        cancel) for s in rest]
        finally:
            pool.shutdown(wait=True)  # nothing of this copy is in flight after this line
        if failures:
            raise failures[0]
        return [head] + [f.result() for f in side]

    def _cleanup_failed_copy(self, keys: Mapping[ObjectKind, str], sid: str) -> None:
        ordered = [keys[ObjectKind.MANIFEST]] + [k for kind, k in keys.items()
                                                 if kind is not ObjectKind.MANIFEST]
        try:
            self._delete(ordered[:1], sid)
            self._delete(ordered[1:], sid)
        except Exception:  # the objects become garbage for collect_orphans
            log.warning("could not clean up the failed copy of segment %s; its objects are "
                        "left for orphan collection", sid, exc_info=True)

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        check_range(start_position, end_position, segment_id=metadata.segment_id)
        manifest = self.read_manifest(metadata)
        obj = manifest.object(ObjectKind.LOG)
        if obj is None:
            raise ManifestError(f"manifest of {metadata.remote_log_segment_id} lists no log",
                                segment_id=metadata.segment_id)
        size = obj.size
        if size == 0 and start_position == 0:
            return io.BytesIO(b"")
        if start_position > size - 1:
            raise InvalidRangeError(
                f"start position {start_position} is beyond the last byte of segment "
                f"{metadata.remote_log_segment_id} (size {size})",
                start=start_position, end=end_position, size=size,
                segment_id=metadata.segment_id)
        last = size - 1 if end_position is None else min(end_position, size - 1)
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset, ObjectKind.LOG)
        return self._open(key, ByteRange(start_position, last), size, metadata.segment_id)

    def _open(self, key: str, byte_range: ByteRange | None, size: int,
              segment_id: str) -> BinaryIO:
        whole = byte_range is None or (byte_range.first == 0 and byte_range.last == size - 1)
        stream = self._call(self.object_store.get, key, None if whole else byte_range,
                            key=key, segment_id=segment_id)
        expected = size if byte_range is None else byte_range.size
        return managed(stream, lambda exc: self._translate(exc, key, segment_id), expected)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        if not isinstance(index_type, IndexType):
            raise RemoteStorageError(f"unknown index type {index_type!r}",
                                     segment_id=metadata.segment_id)
        manifest = self.read_manifest(metadata)
        kind = INDEX_KINDS[index_type]
        obj = manifest.object(kind)
        if obj is None:
            raise RemoteResourceNotFoundError(
                f"segment {metadata.remote_log_segment_id} has no {index_type.name} index",
                segment_id=metadata.segment_id, resource=f"index {index_type.name}")
        if obj.size == 0:
            return io.BytesIO(b"")
        key = self._key(metadata.remote_log_segment_id, metadata.start_offset, kind)
        return self._open(key, None, obj.size, metadata.segment_id)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        keys = self._all_keys(metadata)
        sid = metadata.segment_id
        self._delete([keys[ObjectKind.MANIFEST]], sid)
        self._delete([k for kind, k in keys.items() if kind is not ObjectKind.MANIFEST], sid)

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


def _concurrent_puts(store: ObjectStore) -> int:
    """The store's :attr:`ObjectStore.max_concurrent_puts` (1 when it is not a positive
    int)."""
    value = getattr(store, "max_concurrent_puts", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return 1
    return value


__all__ = ["ObjectStoreRemoteStorageManager"]
