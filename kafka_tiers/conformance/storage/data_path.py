"""What the data-path areas of the suite share (``chunking``, ``compression``, ``encryption``,
``cache``): instances of the plugin reconfigured with data-path keys, and raw access to what
they stored.

Those areas run only for plugins declaring the ``data_transforms`` capability (the storage
manager the core builds around every object store declares it). Each test reconfigures the
plugin with its own keys (``chunk.size``, ``compression.enabled``, ``encryption.*``,
``fetch.chunk.cache.*``) on top of the target's config (its own data-path keys left out), over
the test's fresh root (its random ``key.prefix``), and reads the stored objects raw through the
plugin's object store.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kafka_tiers.api import RemoteStorageError, RemoteStorageManager
from kafka_tiers.conformance.storage.base import StorageSuiteBase
from kafka_tiers.conformance.storage.harness import (
    ConformanceFailure,
    Segment,
    StorageTarget,
    check,
    encryption_settings,
    read_all,
    read_object,
    write_object,
)
from kafka_tiers.log.records import ProducerRecord, build_batch
from kafka_tiers.objectstore import ObjectStoreRemoteStorageManager
from kafka_tiers.objectstore.data_settings import is_data_key
from kafka_tiers.objectstore.keys import ObjectKind
from kafka_tiers.objectstore.manifest import SegmentManifest

#: the capability the data-path areas need
DATA_TRANSFORMS = "data_transforms"

#: settings that keep reads deterministic for download counts: no read-ahead
NO_PREFETCH = {"fetch.chunk.cache.prefetch.max.size": "0"}


class DataPath:
    """Instances of the plugin under test with data-path settings, over the test's root.

    Args:
        target: the test's target (its fresh root); its own data-path keys
            (:func:`kafka_tiers.objectstore.data_settings.is_data_key`) are left out, so every
            instance has exactly the settings its test gives.
        key_dir: where key pair files are written.
    """

    def __init__(self, target: StorageTarget, key_dir: Path) -> None:
        # the target's own data-path keys (a broker's encryption or cache settings) would
        # change what each test configures: they are dropped, the store's keys kept
        self.target = replace(target, config={k: v for k, v in target.config.items()
                                              if not is_data_key(k)}, _cleanup=[])
        self.key_dir = key_dir
        self._made: list[RemoteStorageManager] = []

    def rsm(self, settings: Mapping[str, str] | None = None) -> ObjectStoreRemoteStorageManager:
        """A new configured instance (raw) with ``settings`` on top of the target's config;
        closed at the end of the test."""
        instance = self.target.with_settings(settings or {}).create()
        self._made.append(instance)
        if not isinstance(instance, ObjectStoreRemoteStorageManager):
            raise ConformanceFailure(DATA_TRANSFORMS, f"{type(instance).__name__} declares "
                                     "data_transforms but is not built on the object-store "
                                     "level")
        return instance

    def guarded(self, settings: Mapping[str, str] | None = None) -> Any:
        """A new configured instance behind the core's wrapper
        (:class:`kafka_tiers.remote.guarded.GuardedRemoteStorage`); closed at the end."""
        instance = self.target.with_settings(settings or {}).guarded()
        self._made.append(instance)
        return instance

    def encryption(self, active: str | None, pairs: Sequence[str]) -> dict[str, str]:
        """The settings of encryption with these key pairs (see
        :func:`~kafka_tiers.conformance.storage.harness.encryption_settings`)."""
        return encryption_settings(self.key_dir, active, pairs)

    def close(self) -> None:
        """Close every instance made (errors ignored: they must not mask the test's)."""
        for instance in self._made:
            with contextlib.suppress(Exception):
                instance.close()
        self._made.clear()


class DataPathSuiteBase(StorageSuiteBase):
    """The ``data_path`` fixture of the data-path areas."""

    @pytest.fixture
    def data_path(self, fresh_target: StorageTarget, make_rsm: Any, tmp_path: Path
                  ) -> Iterator[DataPath]:
        """Instances with data-path settings over the test's root (emptied at the end by
        ``make_rsm``)."""
        made = DataPath(fresh_target, tmp_path / "keys")
        yield made
        made.close()


# --------------------------------------------------------------------------------------------
# Segments of record batches


def batches_log(size: int, *, marker: bytes = b"", compression: str = "none",
                seed: int = 0, start_offset: int = 0) -> bytes:
    """A log of real record batches of JSON-like records, at least ``size`` bytes: every record
    holds ``marker`` (when given); ``compression`` is the batches' own codec (their producer's:
    ``"gzip"`` makes a segment the compression heuristic leaves alone)."""
    rng = random.Random(seed)
    out = bytearray()
    offset = start_offset
    while len(out) < size:
        records = []
        for _ in range(10):
            body = (b'{"user":"u%05d","event":"view","page":"/item/%d","marker":"%s",'
                    b'"ts":%d}' % (rng.randrange(100_000), rng.randrange(1000), marker,
                                   1_700_000_000_000 + offset))
            records.append(ProducerRecord(body, b"k%d" % offset, timestamp=1_700_000_000_000))
            offset += 1
        out += build_batch(records, base_offset=offset - 10, compression=compression)
    return bytes(out)


# --------------------------------------------------------------------------------------------
# Manifests and stored objects


def manifest_of(rsm: Any, segment: Segment, rule: str) -> SegmentManifest:
    """The segment's manifest (through ``read_manifest``, of a raw or a guarded instance),
    which must be of format 3."""
    manifest = rsm.read_manifest(segment.metadata)
    check(rule, isinstance(manifest, SegmentManifest) and manifest.chunks is not None,
          f"the manifest of {segment.metadata.segment_id} has no chunk index (format "
          f"{getattr(manifest, 'format_version', '?')}, expected 3)")
    return manifest


def raw_manifest(rsm: ObjectStoreRemoteStorageManager, segment: Segment) -> SegmentManifest:
    """The segment's manifest read raw from the store (no cache)."""
    key = rsm.object_key(segment.metadata, ObjectKind.MANIFEST)
    return SegmentManifest.from_json(read_object(rsm.object_store, key), key)


def write_manifest(rsm: ObjectStoreRemoteStorageManager, segment: Segment,
                   manifest: SegmentManifest) -> None:
    """Replace the segment's stored manifest with ``manifest``."""
    write_object(rsm.object_store, rsm.object_key(segment.metadata, ObjectKind.MANIFEST),
                 manifest.to_json())


def replace_object(manifest: SegmentManifest, kind: ObjectKind, **changes: Any
                   ) -> SegmentManifest:
    """``manifest`` with the fields ``changes`` of its object ``kind`` replaced."""
    objects = tuple(replace(o, **changes) if o.kind is kind else o for o in manifest.objects)
    return replace(manifest, objects=objects)


def expect_detected(rule: str, what: str, fn: Any, *args: Any) -> RemoteStorageError:
    """Call ``fn(*args)`` (a fetch) and read the stream to its end: a
    :class:`RemoteStorageError` (when called or while read) is required; data, identical or
    not, fails ``rule`` naming ``what`` was tampered with."""
    try:
        got = read_all(fn(*args))
    except RemoteStorageError as exc:
        return exc
    except Exception as exc:
        raise ConformanceFailure(rule, f"after {what}, {getattr(fn, '__name__', fn)} raised "
                                 f"{type(exc).__name__}: {exc}; expected a "
                                 "RemoteStorageError") from exc
    raise ConformanceFailure(rule, f"after {what}, {getattr(fn, '__name__', fn)} returned "
                             f"{len(got)} bytes instead of raising a RemoteStorageError")


def check_reads(rsm: Any, segment: Segment, rule: str, *,
                ranges: Sequence[tuple[int, int]] = (), whole: bool = True) -> None:
    """The whole log and every index (unless ``whole`` is False), and each inclusive
    ``(first, last)`` range of the log, read back identical."""
    md = segment.metadata
    if not whole:
        indexes: Mapping[Any, bytes] = {}
    else:
        indexes = segment.indexes
        got = read_all(rsm.fetch_log_segment(md, 0))
        check(rule, got == segment.log, f"fetch_log_segment(0) gave {len(got)} bytes, "
              f"expected the {len(segment.log)} copied"
              + (" (content differs)" if len(got) == len(segment.log) else ""))
    for index_type, content in indexes.items():
        got = read_all(rsm.fetch_index(md, index_type))
        check(rule, got == content, f"fetch_index({index_type.name}) gave {len(got)} bytes "
              f"that differ from the {len(content)} copied")
    for first, last in ranges:
        got = read_all(rsm.fetch_log_segment(md, first, last))
        want = segment.log[first:last + 1]
        check(rule, got == want, f"fetch_log_segment({first}, {last}) gave {len(got)} bytes, "
              f"expected {len(want)}" + (" (content differs)" if len(got) == len(want)
                                         else ""))


__all__ = ["DATA_TRANSFORMS", "NO_PREFETCH", "DataPath", "DataPathSuiteBase",
           "batches_log", "check_reads", "expect_detected", "manifest_of", "raw_manifest",
           "replace_object", "write_manifest"]
