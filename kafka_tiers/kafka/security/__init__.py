"""Security of the Kafka listeners: who a connection is (TLS, SASL), what it may do (the
authorizer, ACLs), and what is kept for both (SCRAM credentials, ACLs).

- :mod:`.session`: one connection's security state (listener, principal, authentication).
- :mod:`.gate`: which requests a connection may send before it authenticated.
"""
