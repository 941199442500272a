"""example-sqlite: a kafka-tiers remote storage backend keeping objects in one SQLite file."""

from kt_example_sqlite.store import SqliteObjectStore, SqliteRemoteStorageManager

__all__ = ["SqliteObjectStore", "SqliteRemoteStorageManager"]
