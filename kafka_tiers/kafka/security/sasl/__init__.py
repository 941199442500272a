"""SASL on the Kafka listeners (KIP-43, KIP-152, KIP-368): the mechanisms' server sides and
each SASL listener's settings.

- :mod:`.jaas`: Kafka's JAAS configuration syntax (``sasl.jaas.config``).
- :mod:`.exchange`: what a mechanism server offers; one connection's exchange under way.
- :mod:`.plain`: ``PLAIN`` (RFC 4616) against a JAAS config's users.
- :mod:`.scram`: ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (RFC 5802, RFC 7677) against the
  SCRAM credential store.
- :mod:`.mechanisms`: which mechanisms are served and each listener's settings.

The requests themselves (SaslHandshake, SaslAuthenticate) are served by
:mod:`kafka_tiers.kafka.apis.sasl`; what a connection may send before it authenticated is
:mod:`kafka_tiers.kafka.security.gate`'s.
"""
