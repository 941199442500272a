"""Value types describing a broker's log directories (design document 000, KIP-113)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log directory of a broker, as seen when choosing a directory for a new replica.

    Attributes:
        path: the absolute path of the directory.
        online: False once an I/O error took the directory offline.
        bytes_used: bytes held by the replicas in the directory.
        total_bytes: the file system's size.
        usable_bytes: bytes the file system can still give.
        replica_count: how many replicas the directory holds.
    """

    path: str
    online: bool = True
    bytes_used: int = 0
    total_bytes: int = 0
    usable_bytes: int = 0
    replica_count: int = 0


__all__ = ["LogDirInfo"]
