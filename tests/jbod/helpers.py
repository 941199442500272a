"""Helpers of the JBOD tests: a producer and a consumer thread working through the log
manager while replicas move, and a failing-file-system shim."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka_tiers.api import TopicPartition
from kafka_tiers.log.config import LogConfig
from kafka_tiers.log.errors import LogError
from kafka_tiers.log.log_manager import LogManager
from kafka_tiers.log.records import ProducerRecord, build_batch

#: small segments so a few thousand records span many segments (bulk + tail copy both run)
CONFIG = LogConfig(segment_bytes=16384, index_interval_bytes=512, max_index_size=8192,
                   retention_ms=-1)


def value(tp: TopicPartition, n: int) -> bytes:
    return b"%s-%d-%d" % (tp.topic.encode(), tp.partition, n)


def produce(manager: LogManager, tp: TopicPartition, start: int, count: int,
            per_batch: int = 5) -> int:
    """Append records ``start .. start+count-1`` of ``tp``; returns the next number."""
    n = start
    while n < start + count:
        k = min(per_batch, start + count - n)
        recs = [ProducerRecord(value(tp, n + i).ljust(60, b"."), b"k", (), 1_000 + n + i)
                for i in range(k)]
        manager.append(tp, build_batch(recs), leader_epoch=3)
        n += k
    return n


def read_values(manager: LogManager, tp: TopicPartition, start: int = 0
                ) -> list[tuple[int, bytes]]:
    """Every (offset, value) of ``tp`` from ``start`` to its end, through the manager."""
    out: list[tuple[int, bytes]] = []
    offset = start
    while True:
        data = manager.read(tp, offset, 1 << 16)
        batches = data.batches()
        if not batches:
            return out
        for b in batches:
            assert b.is_valid()
            out += [(r.offset, (r.value or b"").rstrip(b".")) for r in b.records()
                    if r.offset >= offset]
        offset = batches[-1].next_offset


class Producer(threading.Thread):
    """Appends numbered records to ``tp`` until stopped; counts what was acknowledged."""

    def __init__(self, manager: LogManager, tp: TopicPartition, per_batch: int = 3) -> None:
        super().__init__(daemon=True)
        self.manager, self.tp, self.per_batch = manager, tp, per_batch
        self.next = 0
        self.acked: list[int] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                before = self.next
                self.next = produce(self.manager, self.tp, self.next, self.per_batch,
                                    self.per_batch)
                self.acked += range(before, self.next)
            except LogError as exc:
                self.errors.append(exc)
                return


class Consumer(threading.Thread):
    """Reads ``tp`` from offset 0 following its end until stopped and drained."""

    def __init__(self, manager: LogManager, tp: TopicPartition) -> None:
        super().__init__(daemon=True)
        self.manager, self.tp = manager, tp
        self.values: list[tuple[int, bytes]] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        offset = 0
        while True:
            try:
                data = self.manager.read(self.tp, offset, 1 << 15)
            except LogError as exc:
                self.errors.append(exc)
                return
            batches = data.batches()
            if not batches:
                if self.stop.is_set():
                    return
                self.stop.wait(0.002)
                continue
            for b in batches:
                self.values += [(r.offset, (r.value or b"").rstrip(b"."))
                                for r in b.records() if r.offset >= offset]
            offset = batches[-1].next_offset


@contextmanager
def failing_dir(log_dir: Path) -> Iterator[None]:
    """A failing-file-system shim: while active, every file operation on ``log_dir`` (opening,
    reading, writing, fsync, stat, listing, renaming; also through descriptors opened before)
    raises ``OSError(EIO)``, as a dead disk does. Root ignores ``chmod 000`` and no loop or
    tmpfs mount is allowed here, so the tests inject the error in the I/O layer instead."""
    root = os.path.abspath(log_dir).rstrip(os.sep) + os.sep
    real = {name: getattr(os, name) for name in
            ("open", "pread", "pwrite", "read", "write", "fsync", "stat", "scandir",
             "listdir", "replace", "rename", "mkdir", "copy_file_range", "fstat")}

    def under(path: object) -> bool:
        try:
            p = os.path.abspath(os.fspath(path))  # type: ignore[arg-type]
        except TypeError:
            return False
        return (p + os.sep).startswith(root)

    def fd_under(fd: int) -> bool:
        try:
            return under(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            return False

    def eio(path: object = None) -> OSError:
        return OSError(errno.EIO, "Input/output error (injected)", path)

    def by_path(name: str):  # type: ignore[no-untyped-def]
        fn = real[name]

        def wrapped(path, *a, **kw):  # type: ignore[no-untyped-def]
            if not isinstance(path, int) and under(path):
                raise eio(os.fspath(path))
            if isinstance(path, int) and fd_under(path):
                raise eio()
            if a and name in ("replace", "rename") and under(a[0]):
                raise eio(os.fspath(a[0]))
            return fn(path, *a, **kw)
        return wrapped

    def by_fd(name: str):  # type: ignore[no-untyped-def]
        fn = real[name]

        def wrapped(fd, *a, **kw):  # type: ignore[no-untyped-def]
            if fd_under(fd) or (name == "copy_file_range" and fd_under(a[0])):
                raise eio()
            return fn(fd, *a, **kw)
        return wrapped

    import builtins

    real_open = builtins.open

    def bopen(file, *a, **kw):  # type: ignore[no-untyped-def]
        if not isinstance(file, int) and under(file):
            raise eio(os.fspath(file))
        return real_open(file, *a, **kw)

    for name in ("open", "stat", "scandir", "listdir", "replace", "rename", "mkdir"):
        setattr(os, name, by_path(name))
    for name in ("pread", "pwrite", "read", "write", "fsync", "copy_file_range", "fstat"):
        setattr(os, name, by_fd(name))
    builtins.open = bopen
    try:
        yield
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)
        builtins.open = real_open


__all__ = ["CONFIG", "Consumer", "Producer", "failing_dir", "produce", "read_values",
           "value"]
