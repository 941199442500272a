"""example-sqlite: a kafka-tiers object store keeping objects in one SQLite file."""

from kt_example_sqlite.store import SqliteObjectStore

__all__ = ["SqliteObjectStore"]
