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
``encryption.plaintext.segments.readable``  false            with ``encryption.enabled=true``,
                                                             still read segments that are not
                                                             encrypted (else refused)
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

The namespaces of these keys (:data:`RESERVED_PREFIXES`: ``chunk.``, ``compression.``,
``encryption.``, ``fetch.chunk.``, ``fetch.manifest.``) belong to the core: a key there that is
not one of the above (nor ``encryption.key.pairs.<id>.public.key.file`` /
``.private.key.file`` of an id ``encryption.key.pairs`` lists) is refused at configure time
with one error naming it and the nearest known key, so ``encryption.enable=true`` cannot
silently leave a tier in plaintext. Object stores must not use these prefixes for their own
keys.
"""

from __future__ import annotations

import difflib
import logging
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_tiers.api.errors import ConfigError
from kafka_tiers.config import Bool, Int, ValueType
from kafka_tiers.objectstore.chunk_index import DEFAULT_CHUNK_SIZE, MAX_CHUNK_SIZE
from kafka_tiers.objectstore.encryption import KeyRing
from kafka_tiers.objectstore.transforms import DEFAULT_ZSTD_LEVEL

log = logging.getLogger(__name__)

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
    "encryption.key.pairs", "encryption.plaintext.segments.readable",
    "fetch.chunk.cache.class", "fetch.chunk.cache.size",
    "fetch.chunk.cache.path", "fetch.chunk.cache.retention.ms",
    "fetch.chunk.cache.prefetch.max.size", "fetch.chunk.download.threads",
    "fetch.manifest.cache.size", "fetch.manifest.cache.retention.ms",
})


def is_data_key(key: str) -> bool:
    """Whether ``key`` is one of this module's (the per-pair encryption keys included)."""
    return key in DATA_KEYS or (key.startswith("encryption.key.pairs.")
                                and key.endswith((".public.key.file", ".private.key.file")))


#: the key namespaces the core reserves for the data path (object stores must not use them)
RESERVED_PREFIXES: tuple[str, ...] = ("chunk.", "compression.", "encryption.", "fetch.chunk.",
                                      "fetch.manifest.")
_PAIR_PREFIX = "encryption.key.pairs."
_PAIR_SUFFIXES = (".public.key.file", ".private.key.file")


def is_reserved_key(key: str) -> bool:
    """Whether ``key`` lies in a namespace the core reserves for the data path
    (:data:`RESERVED_PREFIXES`, compared without regard to case), known key or not."""
    return str(key).strip().lower().startswith(RESERVED_PREFIXES)


def _listed_pairs(config: Mapping[str, Any]) -> list[str]:
    return [p.strip() for p in str(config.get("encryption.key.pairs", "") or "").split(",")
            if p.strip()]


def check_data_keys(config: Mapping[str, Any]) -> None:
    """Refuse a key of the reserved namespaces (:data:`RESERVED_PREFIXES`) that the data path
    does not read: it is a misspelling (``encryption.enable``), a per-pair key with a wrong
    suffix, or one of a key pair id ``encryption.key.pairs`` does not list. Keys outside the
    namespaces belong to the store and are not looked at.

    Raises:
        ConfigError: one line naming the first such key (in sorted order) and the nearest
            known key; never a value (a value may be a secret).
    """
    listed = _listed_pairs(config)
    known = set(DATA_KEYS) | {f"{_PAIR_PREFIX}{pid}{suffix}" for pid in listed
                              for suffix in _PAIR_SUFFIXES}
    for key in sorted(str(k) for k in config):
        if key in known:
            continue
        if not is_reserved_key(key):
            _warn_near_miss(key)
            continue
        if key.startswith(_PAIR_PREFIX) and key.endswith(_PAIR_SUFFIXES):
            pid = key[len(_PAIR_PREFIX):]
            pid = pid[:pid.rindex(".", 0, len(pid) - len(".key.file"))]
            raise ConfigError(
                f"{key} names key pair {pid!r}, which encryption.key.pairs does not list "
                f"({', '.join(listed) or 'empty'}): add {pid} to encryption.key.pairs or "
                "remove the key", key=key, expected="a key pair listed in encryption.key.pairs")
        nearest = difflib.get_close_matches(key.lower(), sorted(known), n=1, cutoff=0.0)
        hint = f"; did you mean {nearest[0]}?" if nearest else ""
        raise ConfigError(
            f"unknown data-path setting {key}{hint} (the chunk., compression., encryption., "
            "fetch.chunk. and fetch.manifest. keys are the core's: see the data path keys of "
            "docs/tiered-storage.md)", key=key, expected=nearest[0] if nearest else None)


_WARNED_KEY_FILES: set[tuple[str, int]] = set()
_WARNED_KEYS: set[str] = set()
_WARNED_LOCK = threading.Lock()
#: how alike (difflib ratio) a store's key and a data-path key must be to warn of a typo
_NEAR_MISS = 0.88


def _warn_near_miss(key: str) -> None:
    """A key outside the reserved namespaces belongs to the store and is not refused (it may
    be the store's own); but one spelt nearly like a data-path key (``compresion.enabled``,
    ``chunk_size``) gets one warning per process naming it and the key it resembles."""
    nearest = difflib.get_close_matches(key.lower(), sorted(DATA_KEYS), n=1, cutoff=_NEAR_MISS)
    if not nearest:
        return
    with _WARNED_LOCK:
        if key in _WARNED_KEYS:
            return
        _WARNED_KEYS.add(key)
    log.warning("setting %s is not a data-path key and is left to the object store; did you "
                "mean %s?", key, nearest[0])


def _warn_open_private_keys(config: Mapping[str, Any]) -> None:
    """One warning (per file and mode, per process) for each configured private key file that
    its group or others may read or write; the file's name only, never its content."""
    for pid in _listed_pairs(config):
        key = f"{_PAIR_PREFIX}{pid}.private.key.file"
        path = str(config.get(key, "") or "").strip()
        if not path:
            continue
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            continue  # KeyRing has read it; a file gone since is not this check's to report
        if not mode & 0o077:
            continue
        with _WARNED_LOCK:
            if (path, mode) in _WARNED_KEY_FILES:
                continue
            _WARNED_KEY_FILES.add((path, mode))
        log.warning("%s: private key file %s has mode %o: its group or others may read it; "
                    "make it 0600 (chmod 600 %s)", key, path, mode, path)


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
        plaintext_segments_readable: ``encryption.plaintext.segments.readable``.
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
    plaintext_segments_readable: bool = False
    cache: ChunkCacheSettings = field(default_factory=ChunkCacheSettings)
    download_threads: int = 4
    manifest_cache_size: int = 1000
    manifest_cache_retention_ms: int = 3_600_000

    @property
    def refuse_plaintext(self) -> bool:
        """Whether a segment that is not encrypted is refused on read:
        ``encryption.enabled=true`` without ``encryption.plaintext.segments.readable=true``
        (a manifest saying "not encrypted" may be a downgrade by whoever can write to the
        bucket)."""
        return self.encryption and not self.plaintext_segments_readable

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, writer: bool = True) -> DataSettings:
        """Read the settings (module docstring for the keys and defaults).

        Args:
            config: the plugin's settings (``rsm.config.`` stripped).
            writer: whether this process copies segments (a broker): then
                ``encryption.enabled=true`` needs ``encryption.key.pair.id``. Readers (the
                CLI, Spark) only need the private keys of the pairs they read.

        Raises:
            ConfigError: one line naming the key: an unknown key of the data path's
                namespaces (:func:`check_data_keys`), a malformed or out-of-range value, a
                disk cache without a path, encryption without key pairs, an unreadable key
                file. A private key file its group or others may read loads with one warning.
        """
        check_data_keys(config)
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
            _warn_open_private_keys(config)
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
            zstd_level=level, encryption=encryption, key_ring=ring,
            plaintext_segments_readable=_get(config, "encryption.plaintext.segments.readable",
                                             Bool(), False),
            cache=cache,
            download_threads=_get(config, "fetch.chunk.download.threads", Int(1, 64), 4),
            manifest_cache_size=_get(config, "fetch.manifest.cache.size", Int(0, 1 << 24),
                                     1000),
            manifest_cache_retention_ms=_get(config, "fetch.manifest.cache.retention.ms",
                                             Int(1), 3_600_000),
        )


__all__ = ["DATA_KEYS", "DISK", "MEMORY", "NONE", "RESERVED_PREFIXES", "ChunkCacheSettings",
           "DataSettings", "check_data_keys", "is_data_key", "is_reserved_key"]
