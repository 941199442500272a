"""Tests of the Kafka listener's security: TLS, SASL, credentials, ACLs, authorization."""
