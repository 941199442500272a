"""The Kafka protocol listener: real Kafka clients (librdkafka, kafka-python, aiokafka, kcat)
produce to, consume from and administer a kafka-tiers broker or cluster unchanged.

- :mod:`.listeners_config`: ``listeners`` / ``advertised.listeners`` parsed (Kafka's syntax).
- :mod:`.codec`: request and response frames through kafka-python's schema-generated message
  classes (Kafka's own JSON schemas), never hand-written structs.
- :mod:`.registry`: which API keys and versions are served, and by which handler; the
  ``ApiVersions`` answer is built from it, so what is advertised is exactly what is served.
- :mod:`.errors`: Kafka error codes for what the broker raises.
- :mod:`.cluster_state`: brokers, controller, topics and partitions as a handler reads them
  (standalone or cluster member alike).
- :mod:`.context`: what a handler is given (the broker, the request header, the server's
  shared components).
- :mod:`.server`: the sockets: frames bounded by ``socket.request.max.bytes``, one request at
  a time per connection in order (as Kafka mutes a channel while it has a request in flight),
  responses written as bytes or sent from segment files with ``os.sendfile``.
- :mod:`.apis`: one module per API family, each registering its handlers.
"""

import warnings as _warnings

# kafka-python's schema loader calls importlib.resources' deprecated read_text once per message
# class at import (over a hundred DeprecationWarnings on Python 3.11): imported here, once and
# quietly, before any module of this package (or the CLI) uses it, so a user's test run or a
# plugin author's conformance run is not flooded with warnings that are not theirs.
with _warnings.catch_warnings():
    _warnings.simplefilter("ignore", DeprecationWarning)
    import kafka as _kafka  # noqa: F401
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer  # noqa: F401
