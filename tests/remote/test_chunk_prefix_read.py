"""A read needing only the first bytes of an encrypted, compressed chunk gets them as soon as
they are decoded: the whole chunk's tag is checked, its zstd frame decompressed only as far as
the read needs, the rest decoded on the loader's pool and the whole chunk cached (nothing
partial is kept)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from kafka_tiers.objectstore import transforms
from kafka_tiers.objectstore.transforms import ChunkDecoder, CorruptChunkError
from tests.remote.data_path_helpers import (
    read,
    stored_segment,
    wait_for,
)
from tests.remote.test_encryption_at_rest import key_settings, keys, make_rsm

__all__ = ["keys"]  # the fixture

CHUNK = 4000


def encrypted(tmp_path: Any, keys: Any) -> tuple[Any, Any, Any, bytes]:
    rsm = make_rsm(tmp_path / "tier", **{"chunk.size": str(CHUNK),
                                         "compression.enabled": "true",
                                         **key_settings(keys, "k1", "k1")})
    store, md, log = stored_segment(rsm, tmp_path, 5 * CHUNK)
    return rsm, store, md, log


def test_the_decoder_reads_a_prefix_then_the_checked_rest(tmp_path, keys):
    rsm, _store, md, log = encrypted(tmp_path, keys)
    segment = rsm._segment(md)
    first, end = segment.chunks.stored_range(1)
    raw = (tmp_path / "tier" / segment.log_key).read_bytes()[first:end]
    decoder = segment.transform.open_chunk(transforms.log_label(1), raw, CHUNK)
    assert decoder.read(100) == log[CHUNK:CHUNK + 100]
    assert decoder.rest() == log[CHUNK + 100:2 * CHUNK]
    # the tag covers the whole chunk: a changed byte past the prefix fails at open
    damaged = bytearray(raw)
    damaged[-20] ^= 1
    with pytest.raises(CorruptChunkError, match="authentication tag"):
        segment.transform.open_chunk(transforms.log_label(1), bytes(damaged), CHUNK)
    # a chunk index listing another size than the frame's is refused at open
    with pytest.raises(CorruptChunkError, match="zstd frame of"):
        segment.transform.open_chunk(transforms.log_label(1), raw, CHUNK + 1)
    rsm.close()


def test_a_plain_chunk_decoder_serves_the_whole_decoded_chunk() -> None:
    data = os.urandom(1000)
    decoder = ChunkDecoder(data, None, "log/0", transforms.SegmentTransform("s", None, None))
    assert decoder.read(10) == data[:10] and decoder.rest() == data[10:]


def test_a_read_gets_a_chunk_prefix_before_the_rest_is_decoded(tmp_path, keys, monkeypatch):
    rsm, store, md, log = encrypted(tmp_path, keys)
    started, release = threading.Event(), threading.Event()
    rest = ChunkDecoder.rest

    def held_rest(self: ChunkDecoder) -> bytes:
        started.set()
        assert release.wait(5)
        return rest(self)

    monkeypatch.setattr(ChunkDecoder, "rest", held_rest)
    # the range ends 100 bytes into chunk 2: the read returns while chunk 2's rest waits
    assert read(rsm, md, 2 * CHUNK - 50, 2 * CHUNK + 99) == log[2 * CHUNK - 50:2 * CHUNK + 100]
    assert started.wait(5) and rsm.cache_stats()["chunk_cache"]["entries"] == 1
    release.set()
    # then the whole chunk is cached, and a reader going on reads nothing more
    assert wait_for(lambda: rsm.cache_stats()["chunk_cache"]["entries"] == 2)
    gets = len(store.log_gets())
    assert gets == 2
    assert read(rsm, md, 2 * CHUNK + 100, 3 * CHUNK - 1) == log[2 * CHUNK + 100:3 * CHUNK]
    assert len(store.log_gets()) == gets
    rsm.close()


def test_a_reader_of_the_chunk_meanwhile_waits_for_the_same_load(tmp_path, keys, monkeypatch):
    rsm, store, md, log = encrypted(tmp_path, keys)
    release = threading.Event()
    rest = ChunkDecoder.rest
    monkeypatch.setattr(ChunkDecoder, "rest",
                        lambda self: (release.wait(5), rest(self))[1])
    assert read(rsm, md, 2 * CHUNK, 2 * CHUNK + 99) == log[2 * CHUNK:2 * CHUNK + 100]
    got: list[bytes] = []
    other = threading.Thread(target=lambda: got.append(read(rsm, md, 2 * CHUNK,
                                                            3 * CHUNK - 1)))
    other.start()
    release.set()
    other.join(5)
    assert got == [log[2 * CHUNK:3 * CHUNK]]
    assert len(store.log_gets()) == 1  # one load of chunk 2, shared
    rsm.close()
