"""The controller never answers OK for partitions no broker could create, and a broker out of
descriptors (or memory, or disk space) refuses the new replica without taking its log dir
offline: what it already holds keeps serving."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

import pytest

from kafka_tiers.cluster.local_cluster import LocalCluster
from kafka_tiers.cluster.transport import ErrorCode, TransportError
from kafka_tiers.log import segment

Make = Callable[..., LocalCluster]


def _fail_creating(monkeypatch: pytest.MonkeyPatch, topic: str, err: int) -> None:
    """Every broker's ``os.open`` of a new segment of ``topic`` fails with ``err``."""
    real = os.open

    def fake(path: object, *args: object, **kwargs: object) -> int:
        if f"/{topic}-" in os.fspath(path):  # type: ignore[arg-type]
            raise OSError(err, os.strerror(err), os.fspath(path))  # type: ignore[arg-type]
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(segment.os, "open", fake)


@pytest.mark.parametrize("err", [errno.EMFILE, errno.ENOSPC])
def test_create_topics_reports_partitions_no_broker_could_create(
        make_cluster: Make, monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    c = make_cluster(brokers=2)
    cl = c.client()
    cl.create_topic("kept", 2, 2)
    cl.produce("kept", 0, [b"before"])
    _fail_creating(monkeypatch, "doomed", err)
    with pytest.raises(TransportError) as info:
        cl.create_topic("doomed", 3, 1)  # today: OK, and every log dir went offline
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR and info.value.retriable
    assert "3 of 3 partitions could not be created" in str(info.value)
    assert "refused: out of" in str(info.value)
    monkeypatch.undo()
    # nothing went offline: the existing partitions serve, new topics can be created
    cl.produce("kept", 0, [b"after"])
    records, _ = cl.fetch("kept", 0, 0)
    assert [r.value for r in records] == [b"before", b"after"]
    assert sorted(cl.create_topic("fresh", 2, 2)) == [0, 1]
    cl.produce("fresh", 1, [b"x"])


def test_a_fetch_out_of_descriptors_is_retriable_and_the_replica_stays(
        make_cluster: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_tiers.log.handles import HANDLES

    c = make_cluster(brokers=1)
    cl = c.client()
    cl.create_topic("t", 1, 1)
    cl.produce("t", 0, [b"one"])
    HANDLES.release_all()  # the next read opens the segment again
    _fail_creating(monkeypatch, "t", errno.EMFILE)
    with pytest.raises(TransportError) as info:
        cl.fetch("t", 0, 0, timeout=1)  # today: the whole request fails, code UNKNOWN
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR and info.value.retriable
    monkeypatch.undo()
    records, _ = cl.fetch("t", 0, 0)
    assert [r.value for r in records] == [b"one"]
