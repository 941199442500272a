"""The object-store tier of the core: the storage manager the core builds around a plugin's
:class:`~kafka_tiers.api.ObjectStore`.

One concept per module:

- :mod:`.keys`: the key layout (``<prefix>/<topic>-<partition>/<offset>-<id>.<kind>``);
- :mod:`.manifest`: the manifest format (the commit record of a segment: format 3 with the
  chunk index, compression and wrapped data key) and its checksums;
- :mod:`.chunk_index`, :mod:`.transforms`, :mod:`.encryption`, :mod:`.data_settings`: the
  chunk layout, the per-chunk zstd and AES-256-GCM transforms, the key ring, the data-path
  settings;
- :mod:`.chunk_cache`, :mod:`.disk_chunk_cache`, :mod:`.chunk_loader`,
  :mod:`.manifest_cache`: the caches and the single-flight chunk loader of the fetch path;
  :mod:`.lru_map`: the least-recently-used bookkeeping with a retention time the caches share;
- :mod:`.multipart`: the concurrent multipart-upload engine of a
  :class:`~kafka_tiers.api.MultipartObjectStore`;
- :mod:`.streams`: the hashing and encoding readers of a copy and the managed stream of a
  fetch;
- :mod:`.segment_stream`: the lazy chunked stream a fetch returns;
- :mod:`.sequential_read`: the read-ahead streams of sequential readers (one ranged read
  per segment, with backpressure);
- :mod:`.manager`: :class:`ObjectStoreRemoteStorageManager`, the whole storage contract
  (commit protocol, data path, listing, orphan collection) on top of a store.

None of this is API: it may change between releases without an SPI change (a manifest
change keeps reading the formats written before).
"""

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
from kafka_tiers.objectstore.manager import INLINE_INDEXES_MAX, ObjectStoreRemoteStorageManager
from kafka_tiers.objectstore.manifest import (
    CHECKSUM_ALGORITHMS,
    CRC32C,
    MANIFEST_FORMAT_VERSION,
    SHA256,
    ChecksumHasher,
    ManifestObject,
    SegmentManifest,
    WrappedDataKey,
    new_hasher,
    next_commit_sequence,
)
from kafka_tiers.objectstore.multipart import multipart_put, read_exact

__all__ = [
    "CHECKSUM_ALGORITHMS",
    "CRC32C",
    "INDEX_KINDS",
    "INLINE_INDEXES_MAX",
    "MANIFEST_FORMAT_VERSION",
    "SHA256",
    "ChecksumHasher",
    "ManifestObject",
    "ObjectKind",
    "ObjectStoreRemoteStorageManager",
    "ParsedKey",
    "SegmentManifest",
    "WrappedDataKey",
    "multipart_put",
    "new_hasher",
    "next_commit_sequence",
    "normalize_prefix",
    "parse_segment_key",
    "partition_prefix",
    "read_exact",
    "segment_key",
    "validate_key",
]
