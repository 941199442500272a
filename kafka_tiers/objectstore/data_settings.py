"""The settings of the object-store tier's data path: chunking, compression, encryption, the
chunk cache, the manifest cache and parallel downloads.

They are storage-plugin keys (``rsm.config.<key>`` in ``server.properties``, the key alone in a
plugin settings file), read by the core for every object store, so S3, Azure, HDFS, ``local``
and third-party stores all get them. Names follow Aiven's tiered-storage plugin where it has the
setting:

==========================================  ===============  =====================================
key                                         default          meaning
==========================================  ===============  =====================================
``chunk.size``                              4194304 (4 MiB)  original bytes per stored chunk
``compression.enabled``                     false            zstd-compress each chunk
``compression.heuristic.enabled``           false            skip compressing a segment whose first
                                                             batch is already compressed
``compression.zstd.level``                  1                zstd level (1..22)
``encryption.enabled``                      false            AES-256-GCM per chunk, data key wrapped
                                                             with an RSA key pair (see
                                                             :mod:`.encryption` for its keys)
``fetch.chunk.cache.class``                 memory           ``memory``, ``disk`` or ``none``
                                                             (Aiven's class names accepted)
``fetch.chunk.cache.size``                  67108864         most bytes the chunk cache holds
``fetch.chunk.cache.path``                  (none)           the disk cache's directory (required
                                                             for ``disk``)
``fetch.chunk.cache.retention.ms``          600000           a chunk unused this long is dropped
``fetch.chunk.cache.prefetch.max.size``     0                bytes read ahead on sequential reads
                                                             (across segment boundaries too)
``fetch.chunk.download.threads``            4                chunks of one segment downloaded at
                                                             once (ranged reads in parallel)
``fetch.manifest.cache.size``               1000             manifests kept (entries)
``fetch.manifest.cache.retention.ms``       3600000          a manifest unused this long is dropped
==========================================  ===============  =====================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.config import Bool, Int, ValueType
from kafka_tiers.objectstore.chunk_index import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE
from kafka_tiers.objectstore.encryption import KeyRing
from kafka_tiers.objectstore.transforms import DEFAULT_ZSTD_LEVEL

MEMORY = "memory"
DISK = "disk"
NONE = "none"
#: Aiven's cache class names, accepted as aliases so its settings carry over.
_CACHE_ALIASES = {
    "io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache": MEMORY,
    "io.aiven.kafka.tieredstorage.fetch.cache.DiskChunkCache": DISK,
    "io.aiven.kafka.tieredstorage.fetch.cache.DiskBasedChunkCache": DISK,
}

#: every key this module reads (the stores' own keys are the rest)
DATA_KEYS: frozenset[str] = frozenset({
    "chunk.size", "compression.enabled", "compression.heuristic.enabled",
    "compression.zstd.level", "encryption.enabled", "encryption.key.pair.id",
    "encryption.key.pairs", "fetch.chunk.cache.class", "fetch.chunk.cache.size",
    "fetch.chunk.cache.path", "fetch.chunk.cache.retention.ms",
    "fetch.chunk.cache.prefetch.max.size", "fetch.chunk.download.threads",
    "fetch.manifest.cache.size", "fetch.manifest.cache.retention.ms",
})


def is_data_key(key: str) -> bool:
    """Whether ``key`` is one of this module's (the per-pair encryption keys included)."""
    return key in DATA_KEYS or (key.startswith("encryption.key.pairs.")
                                and key.endswith((".public.key.file", ".private.key.file")))


def _get(config: Mapping[str, Any], key: str, kind: ValueType, default: Any) -> Any:
    raw = config.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        return kind.parse(str(raw))
    except ValueError as exc:
        raise ConfigError(f"invalid value {raw!r} for {key}: expected {exc}", key=key,
                          value=str(raw), expected=str(exc)) from None


@dataclass(frozen=True)
class ChunkCacheSettings:
    """The chunk cache's settings (``fetch.chunk.cache.*``).

    Attributes:
        kind: :data:`MEMORY`, :data:`DISK` or :data:`NONE`.
        size: the most bytes held.
        path: the disk cache's directory (None for memory).
        retention_ms: how long an unused chunk is kept.
        prefetch_max_size: bytes read ahead of a sequential reader (0: none).
    """

    kind: str = MEMORY
    size: int = 64 << 20
    path: str | None = None
    retention_ms: int = 600_000
    prefetch_max_size: int = 0


@dataclass(frozen=True)
class DataSettings:
    """Everything :mod:`kafka_tiers.objectstore.manager` needs to write and read data.

    Attributes:
        chunk_size: original bytes per chunk.
        compression: compress new segments (zstd).
        compression_heuristic: but not those whose first batch is already compressed.
        zstd_level: the zstd level.
        encryption: encrypt new segments.
        key_ring: the key pairs (None when no ``encryption.key.pairs`` are configured; a
            reader may have one without ``encryption.enabled``).
        cache: the chunk cache's settings.
        download_threads: chunk downloads of one read in flight at once.
        manifest_cache_size: manifests kept (0: no cache).
        manifest_cache_retention_ms: how long an unused manifest is kept.
    """

    chunk_size: int = DEFAULT_CHUNK_SIZE
    compression: bool = False
    compression_heuristic: bool = False
    zstd_level: int = DEFAULT_ZSTD_LEVEL
    encryption: bool = False
    key_ring: KeyRing | None = field(default=None, repr=False)
    cache: ChunkCacheSettings = field(default_factory=ChunkCacheSettings)
    download_threads: int = 4
    manifest_cache_size: int = 1000
    manifest_cache_retention_ms: int = 3_600_000

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, writer: bool = True) -> DataSettings:
        """Read the settings (module docstring for the keys and defaults).

        Args:
            config: the plugin's settings (``rsm.config.`` stripped).
            writer: whether this process copies segments (a broker): then
                ``encryption.enabled=true`` needs ``encryption.key.pair.id``. Readers (the
                CLI, Spark) only need the private keys of the pairs they read.

        Raises:
            ConfigError: one line naming the key: a malformed or out-of-range value, a disk
                cache without a path, encryption without key pairs, an unreadable key file.
        """
        chunk_size = _get(config, "chunk.size", Int(1, MAX_CHUNK_SIZE), DEFAULT_CHUNK_SIZE)
        compression = _get(config, "compression.enabled", Bool(), False)
        heuristic = _get(config, "compression.heuristic.enabled", Bool(), False)
        level = _get(config, "compression.zstd.level", Int(1, 22), DEFAULT_ZSTD_LEVEL)
        encryption = _get(config, "encryption.enabled", Bool(), False)
        ring = None
        if encryption or str(config.get("encryption.key.pairs", "")).strip():
            if not str(config.get("encryption.key.pairs", "")).strip():
                raise ConfigError("encryption.enabled=true needs encryption.key.pairs and "
                                  "encryption.key.pair.id (and each pair's key files)",
                                  key="encryption.key.pairs")
            ring = KeyRing.from_config(config, require_active=encryption and writer)
        raw_kind = str(config.get("fetch.chunk.cache.class", "") or MEMORY).strip()
        kind = _CACHE_ALIASES.get(raw_kind, raw_kind.lower())
        if kind not in (MEMORY, DISK, NONE):
            raise ConfigError(f"invalid value {raw_kind!r} for fetch.chunk.cache.class: "
                              "expected memory, disk or none", key="fetch.chunk.cache.class",
                              value=raw_kind, expected="memory, disk or none")
        size = _get(config, "fetch.chunk.cache.size", Int(1), 64 << 20)
        path = str(config.get("fetch.chunk.cache.path", "") or "").strip() or None
        if kind == DISK and path is None:
            raise ConfigError("fetch.chunk.cache.class=disk needs fetch.chunk.cache.path",
                              key="fetch.chunk.cache.path")
        cache = ChunkCacheSettings(
            kind, size, path if kind == DISK else None,
            _get(config, "fetch.chunk.cache.retention.ms", Int(1), 600_000),
            _get(config, "fetch.chunk.cache.prefetch.max.size", Int(0), 0))
        return cls(
            chunk_size=chunk_size, compression=compression, compression_heuristic=heuristic,
            zstd_level=level, encryption=encryption, key_ring=ring, cache=cache,
            download_threads=_get(config, "fetch.chunk.download.threads", Int(1, 64), 4),
            manifest_cache_size=_get(config, "fetch.manifest.cache.size", Int(0, 1 << 24),
                                     1000),
            manifest_cache_retention_ms=_get(config, "fetch.manifest.cache.retention.ms",
                                             Int(1), 3_600_000),
        )


__all__ = ["DATA_KEYS", "DISK", "MEMORY", "NONE", "ChunkCacheSettings", "DataSettings",
           "is_data_key"]
