"""The core's remote-tier machinery: the wrapper every storage plugin call goes through
(:mod:`kafka_tiers.remote.guarded`) and the built-in ``local`` backend
(:mod:`kafka_tiers.remote.local`).

The storage interface and the object-store level that plugins build on are public and live in
:mod:`kafka_tiers.api` (:mod:`kafka_tiers.api.storage`, :mod:`kafka_tiers.api.objectstore`).
"""

__all__: list[str] = []
