"""The chunk index of a segment's log object: where each fixed-size piece of the original log
is stored.

A segment's log is cut into chunks of ``chunk.size`` original bytes (the last one may be
shorter; chunk boundaries need not align with record batches). Each chunk is stored on its own
(compressed and/or encrypted, see :mod:`kafka_tiers.objectstore.transforms`), one after the
other in the log object, so chunk ``i`` of the original is a contiguous byte range of the
stored object. When no transform changes sizes the index is *identity*: stored bytes equal the
original ones and no per-chunk sizes are kept.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

#: Largest chunk size accepted (64 MiB): a chunk is held in memory whole while it is read
#: (times ``fetch.chunk.download.threads`` and the prefetches), so a manifest cannot make one
#: read allocate more than this per chunk.
MAX_CHUNK_SIZE = 64 << 20
#: Most chunks one segment's log may have (1,048,576): bounds the chunk index a manifest
#: carries (and so its size). A copy whose ``chunk.size`` would cut the log into more is
#: refused.
MAX_CHUNKS = 1 << 20
#: The default ``chunk.size`` (4 MiB, as Aiven's tiered-storage plugin).
DEFAULT_CHUNK_SIZE = 4 << 20


@dataclass(frozen=True)
class ChunkIndex:
    """The chunk layout of one stored log object.

    Attributes:
        chunk_size: original bytes per chunk (1..:data:`MAX_CHUNK_SIZE`); the last chunk holds
            the remainder.
        original_size: bytes of the original log (the segment file).
        stored_sizes: the stored size of every chunk in order, or None for an identity layout
            (each chunk stored as it is).

    Raises:
        ValueError: a size out of range, more than :data:`MAX_CHUNKS` chunks, or
            ``stored_sizes`` whose length is not the chunk count or holding a negative size.
    """

    chunk_size: int
    original_size: int
    stored_sizes: tuple[int, ...] | None = None
    _ends: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int)
                or not 1 <= self.chunk_size <= MAX_CHUNK_SIZE):
            raise ValueError(f"chunk size {self.chunk_size!r} is not 1..{MAX_CHUNK_SIZE}")
        if (isinstance(self.original_size, bool) or not isinstance(self.original_size, int)
                or self.original_size < 0):
            raise ValueError(f"original size {self.original_size!r} is not >= 0")
        if self.count > MAX_CHUNKS:
            raise ValueError(f"{self.count} chunks of {self.chunk_size} bytes is more than "
                             f"{MAX_CHUNKS} (raise chunk.size)")
        ends: tuple[int, ...] = ()
        if self.stored_sizes is not None:
            sizes = tuple(self.stored_sizes)
            if len(sizes) != self.count:
                raise ValueError(f"{len(sizes)} stored chunk sizes for {self.count} chunks")
            if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in sizes):
                raise ValueError("stored chunk sizes must be integers >= 0")
            object.__setattr__(self, "stored_sizes", sizes)
            ends = tuple(accumulate(sizes))
        object.__setattr__(self, "_ends", ends)

    @property
    def count(self) -> int:
        """How many chunks (0 for an empty log)."""
        return -(-self.original_size // self.chunk_size)

    @property
    def identity(self) -> bool:
        """Whether chunks are stored as they are (stored offsets equal original ones)."""
        return self.stored_sizes is None

    @property
    def stored_size(self) -> int:
        """Bytes of the stored log object."""
        if self.stored_sizes is None:
            return self.original_size
        return self._ends[-1] if self._ends else 0

    def original_range(self, i: int) -> tuple[int, int]:
        """Chunk ``i``'s original bytes as ``(start, end)``, end exclusive.

        Raises:
            IndexError: no such chunk.
        """
        self._check(i)
        start = i * self.chunk_size
        return start, min(start + self.chunk_size, self.original_size)

    def stored_range(self, i: int) -> tuple[int, int]:
        """Chunk ``i``'s bytes in the stored object as ``(start, end)``, end exclusive.

        Raises:
            IndexError: no such chunk.
        """
        self._check(i)
        if self.stored_sizes is None:
            return self.original_range(i)
        return (self._ends[i - 1] if i else 0), self._ends[i]

    def chunk_of(self, position: int) -> int:
        """The chunk holding original byte ``position``.

        Raises:
            IndexError: the position is outside the log.
        """
        if not 0 <= position < self.original_size:
            raise IndexError(f"position {position} is outside the log of "
                             f"{self.original_size} bytes")
        return position // self.chunk_size

    def chunks_for(self, first: int, last: int) -> range:
        """The chunks holding the original bytes ``first..last`` (inclusive).

        Raises:
            IndexError: ``first`` or ``last`` outside the log, or ``last < first``.
        """
        if last < first:
            raise IndexError(f"empty range {first}..{last}")
        return range(self.chunk_of(first), self.chunk_of(last) + 1)

    def chunk_at_stored(self, stored_position: int) -> int:
        """The chunk whose stored bytes hold ``stored_position`` (for error messages).

        Raises:
            IndexError: the position is outside the stored object.
        """
        if not 0 <= stored_position < self.stored_size:
            raise IndexError(f"stored position {stored_position} is outside the object")
        if self.stored_sizes is None:
            return stored_position // self.chunk_size
        return bisect.bisect_right(self._ends, stored_position)

    def _check(self, i: int) -> None:
        if not 0 <= i < self.count:
            raise IndexError(f"chunk {i} of {self.count}")

    def to_json(self) -> dict[str, Any]:
        """The index as a JSON object: ``{"chunk_size", "original_size", "stored_sizes"}``
        (``stored_sizes`` null for an identity layout)."""
        return {"chunk_size": self.chunk_size, "original_size": self.original_size,
                "stored_sizes": None if self.stored_sizes is None else list(self.stored_sizes)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ChunkIndex:
        """Read :meth:`to_json`'s object.

        Raises:
            ValueError, KeyError, TypeError: a missing or malformed field.
        """
        sizes = doc["stored_sizes"]
        if sizes is not None and not isinstance(sizes, Sequence):
            raise TypeError("stored_sizes must be a list or null")
        if sizes is not None and len(sizes) > MAX_CHUNKS:
            raise ValueError(f"{len(sizes)} stored chunk sizes: more than {MAX_CHUNKS}")
        return cls(doc["chunk_size"], doc["original_size"],
                   None if sizes is None else tuple(sizes))


__all__ = ["DEFAULT_CHUNK_SIZE", "MAX_CHUNKS", "MAX_CHUNK_SIZE", "ChunkIndex"]
