"""Transactions are out of scope: how the broker refuses them.

The transaction APIs (AddPartitionsToTxn 24, AddOffsetsToTxn 25, EndTxn 26, WriteTxnMarkers
27, TxnOffsetCommit 28, DescribeTransactions 65, ListTransactions 66) are deliberately not
registered: ApiVersions does not advertise them, so a client that checks (librdkafka,
kafka-python) knows the broker has no transaction support, and a request for one closes the
connection as Kafka does for an API it does not serve.

A client with ``transactional.id`` never gets that far: it first looks up its transaction
coordinator (FindCoordinator, key type 1) and asks it for a producer id (InitProducerId with
the transactional id). Both are answered :data:`TRANSACTIONS_UNSUPPORTED`
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53), with :func:`transactions_unsupported_message`
where the response has a message field. That code was chosen because it is the one every
client treats as fatal at once, on both requests: librdkafka fails ``init_transactions()``
with "Failed to find transaction coordinator: ...: Broker: Transactional Id authorization
failed: <our message>", kafka-python raises ``TransactionalIdAuthorizationFailedError``. The
codes that say "unsupported" (UNSUPPORTED_VERSION, COORDINATOR_NOT_AVAILABLE) are retried by
librdkafka until ``init_transactions()`` times out, with nothing telling the user why. It is
also what Kafka answers when a principal may not use a transactional id; here none may.

Batches a client marks transactional are refused by the log
(:class:`~kafka_tiers.log.errors.TransactionsUnsupportedError`, INVALID_TXN_STATE).
"""

from __future__ import annotations

#: the error code refusing a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
TRANSACTIONS_UNSUPPORTED = 53

#: the API keys of the transaction APIs, none of them served
TRANSACTION_API_KEYS: frozenset[int] = frozenset({24, 25, 26, 27, 28, 65, 66})


def transactions_unsupported_message(transactional_id: str | None) -> str:
    """The one-line message refusing ``transactional_id``."""
    return (f"transactional id {transactional_id!r} refused: this kafka-tiers broker does not "
            f"support transactions; remove transactional.id (the idempotent producer, "
            f"enable.idempotence=true, works without it)")


__all__ = ["TRANSACTIONS_UNSUPPORTED", "TRANSACTION_API_KEYS",
           "transactions_unsupported_message"]
