"""Security of the Kafka listeners: who a connection is (TLS, SASL), what it may do (the
authorizer, ACLs), and what is kept for both (SCRAM credentials, ACLs).

- :mod:`.session`: one connection's security state (listener, principal, authentication).
- :mod:`.gate`: which requests a connection may send before it authenticated.
- :mod:`.state_store`: versioned JSON documents shared by every broker (the metadata store,
  or a standalone broker's 0600 files), where SCRAM credentials and ACLs are kept.
- :mod:`.scram_credentials`: SCRAM credentials (salt, StoredKey, ServerKey, iterations).
"""
